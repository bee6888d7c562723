/* The fit settings that fit, extract and run share on their command lines
 * (--level, --band, --pin/--no-pin, --plot), with one parser each so that
 * all three validate them alike, and the table of the fit stage's options
 * that fit and run share. Each returns -1 when the value was taken, or the
 * exit code after printing a usage error ("memdecay-calibrate COMMAND:
 * ..."). */
#ifndef MD_CALIB_FIT_OPTIONS_H
#define MD_CALIB_FIT_OPTIONS_H

#include <stdbool.h>

#include "fit/regions/fit_stage.h"
#include "calib/options.h"
#include "fit/regions/region_fits.h"

/* --level P: a confidence level strictly between 0 and 1. */
int md_fit_option_level(const char *command, const char *value, md_regions_settings *settings);

/* --band log|log-log|plain. */
int md_fit_option_band(const char *command, const char *value, md_regions_settings *settings);

/* --pin REGION (pinned true) or --no-pin REGION: appended to `pins`, which
 * settings->pins points to and which has room for one per argument. */
int md_fit_option_pin(const char *command, const char *value, bool pinned,
                      md_regions_settings *settings, md_pin_override *pins);

/* --plot FILE: a figure format we can write, judged by the extension. */
int md_fit_option_plot(const char *command, const char *value, const char **plot);

/* The options of the fit stage that fit and run share: --level, --band,
 * --priors, --km-csv, --plot, --plot-log-time (calib/options.h). */
extern const md_opt md_fit_option_table[];

/* Applies `opt`, an entry of md_fit_option_table, with `value` to `fit`. */
int md_fit_option(const char *command, const md_opt *opt, const char *value, md_fit_options *fit);

#endif
