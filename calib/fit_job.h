/* The fit stage as `fit` and `run` both run it: read the priors file, the
 * calibration sidecar and the events, fit every region, build memdecay.json,
 * write every output atomically (all prepared before any is committed), and
 * print the table and the warnings on stderr. */
#ifndef MD_CALIB_FIT_JOB_H
#define MD_CALIB_FIT_JOB_H

#include <stdbool.h>
#include <stddef.h>

#include "fit/regions/region_fits.h"

typedef struct md_fit_job {
  const char *command;             /* "fit" or "run", for messages */
  const char *const *inputs;       /* events files ("-": standard input) */
  size_t n_inputs;
  const char *output;              /* NULL or "-": standard output */
  const char *priors_path;         /* NULL: built-in priors */
  const char *calibration_path;    /* NULL: no calibration */
  const char *km_csv;
  const char *plot;
  bool plot_log_time;
  bool reproducible;
  bool quiet;
  md_regions_settings settings;        /* level, band, pins; the job sets priors and calibration */
} md_fit_job;

/* Returns the exit code (calib/cli.h); errors and the report go to stderr. */
int md_fit_job_run(md_fit_job *job);

/* The current time as ISO 8601 UTC ("2025-06-11T09:30:00Z"). */
void md_timestamp_now(char out[32]);

#endif
