/* The options of the extract stage, shared by `extract` and `run`:
 * --estimand, --tau, --guard, --ewma-beta, --quantile, --kappa-memory,
 * --pin and --no-pin, with their validation and defaults. */
#ifndef MD_CALIB_EXTRACT_OPTIONS_H
#define MD_CALIB_EXTRACT_OPTIONS_H

#include "calib/extract_job.h"
#include "calib/options.h"

/* Defaults: last-use, tau 1, guard 16, beta 0.9, quantile 0.95, 256 MiB;
 * level 0.95 and the log band for the figure's fits; system pinned. */
void md_extract_job_defaults(md_extract_job *job, const char *command);

/* The table of these options (calib/options.h). */
extern const md_opt md_extract_option_table[];

/* Applies `opt`, an entry of md_extract_option_table, with `value`; a pin
 * goes to pins[job->settings.n_pins++] (job->settings.pins must be `pins`,
 * room for one per argument). Returns -1 to go on, or the exit code of a
 * usage error. */
int md_extract_option(const char *command, const md_opt *opt, const char *value,
                      md_extract_job *job, md_pin_override *pins);

#endif
