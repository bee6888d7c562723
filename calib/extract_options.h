/* The options of the extract stage, shared by `extract` and `run`:
 * --estimand, --tau, --guard, --ewma-beta, --quantile, --kappa-memory,
 * --pin and --no-pin, with their validation and defaults. */
#ifndef MD_CALIB_EXTRACT_OPTIONS_H
#define MD_CALIB_EXTRACT_OPTIONS_H

#include <getopt.h>

#include "calib/extract_job.h"

enum { MD_EXTRACT_OPTION_COUNT = 8 };

/* Defaults: last-use, tau 1, guard 16, beta 0.9, quantile 0.95, 256 MiB;
 * level 0.95 and the log band for the figure's fits; system pinned. */
void md_extract_job_defaults(md_extract_job *job, const char *command);

/* Writes the MD_EXTRACT_OPTION_COUNT getopt_long entries, option i with
 * val = first + i, followed by a zero entry. */
void md_extract_long_options(struct option *out, int first);

/* Applies option `id` (0 .. MD_EXTRACT_OPTION_COUNT-1) with `value`; a pin
 * goes to pins[job->settings.n_pins++] (job->settings.pins must be `pins`,
 * room for one per argument). Returns -1 to go on, or the exit code of a
 * usage error. */
int md_extract_option(int id, const char *value, const char *command, md_extract_job *job,
                      md_pin_override *pins);

#endif
