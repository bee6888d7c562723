/* The fit stage, as `fit` and `run` call it: the priors file, the
 * calibration sidecar and the events in; every region fitted
 * (region_fits.h) and memdecay.json built (memdecay-config(5)); the config,
 * the Kaplan-Meier CSV and the figure written, each atomically and all
 * prepared before any is committed, so that a failure leaves none behind.
 *
 * The library never prints: the outcome holds the fits (for the table,
 * md_regions_print_table) and the config's text (for a caller that sends it
 * to standard output). */
#ifndef MD_FIT_REGIONS_FIT_STAGE_H
#define MD_FIT_REGIONS_FIT_STAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "fit/regions/region_fits.h"
#include "base/error.h"

typedef struct md_fit_options {
  const char *const *inputs;       /* events files ("-": standard input) */
  size_t n_inputs;
  const char *output;              /* the config; NULL or "-": not written, only returned */
  const char *priors_path;         /* NULL: built-in priors */
  const char *calibration_path;    /* NULL: no calibration */
  const char *km_csv;              /* NULL: none */
  const char *plot;                /* NULL: no figure */
  bool plot_log_time;
  bool reproducible;               /* no "created" in the config */
  /* level, band, pins; the stage fills in priors and calibration from the
   * files above (what is given here for them is ignored). */
  md_regions_settings settings;
} md_fit_options;

/* Defaults: the fit's confidence level, a log band, nothing written. */
void md_fit_options_init(md_fit_options *options);

typedef struct md_fit_outcome {
  md_regions_results results;      /* every region's fits and the warnings */
  char *json;                      /* the config's text, as written */
  /* The inputs as read: the results point into them. */
  md_events events;
  md_priors priors;
  md_calibration calibration;
} md_fit_outcome;

void md_fit_outcome_free(md_fit_outcome *outcome);

/* Runs the stage. Outputs that would replace an input or each other are
 * refused before anything is read (io/files/output_guard.h); unreadable or
 * invalid inputs are MD_KIND_INPUT errors naming the file (and line). On
 * failure nothing is written and `outcome` is left empty. */
md_status md_fit(const md_fit_options *options, md_fit_outcome *outcome, md_error *err);

#endif
