/* The options of the extract stage, shared by `extract` and `run`:
 * --estimand, --tau, --guard, --ewma-beta, --quantile, --kappa-memory,
 * --pin and --no-pin, with their validation and defaults. */
#ifndef MD_CALIB_EXTRACT_OPTIONS_H
#define MD_CALIB_EXTRACT_OPTIONS_H

#include "fit/extract/extract_stage.h"
#include "calib/options.h"

/* The table of these options (calib/options.h). */
extern const md_opt md_extract_option_table[];

/* Applies `opt`, an entry of md_extract_option_table, with `value` (the
 * defaults are md_extract_options_init's); a pin goes to
 * pins[extract->settings.n_pins++] (extract->settings.pins must be `pins`,
 * room for one per argument). Returns -1 to go on, or the exit code of a
 * usage error. */
int md_extract_option(const char *command, const md_opt *opt, const char *value,
                      md_extract_options *extract, md_pin_override *pins);

#endif
