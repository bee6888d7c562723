/* What extract, fit and run print about the extract and fit stages (the
 * stages themselves are library calls: fit/extract/extract_stage.h,
 * fit/regions/fit_stage.h): the progress line, the summaries on standard
 * error, and the config on standard output. */
#ifndef MD_CALIB_STAGE_REPORT_H
#define MD_CALIB_STAGE_REPORT_H

#include <stdio.h>

#include "fit/extract/extract_stage.h"
#include "fit/regions/fit_stage.h"

/* An md_extract_progress_fn: "\rCOMMAND: extracting N/M episodes" on
 * stderr; context is the command's name. */
void md_report_extract_progress(void *context, const md_extract_progress *progress);

/* The extract summary: workload, the region table, kappa and alpha, the
 * sidecar's warnings, what was written. */
void md_report_extract(FILE *out, const char *command, const md_extract_options *options,
                       const md_extract_outcome *outcome);

/* The fit summary: the region table, the warnings, what was written. */
void md_report_fit(FILE *out, const char *command, const md_fit_options *options,
                   const md_fit_outcome *outcome);

/* Sends the config to standard output when the fit wrote no file (-o
 * missing or "-"); returns the exit code (MD_EXIT_OK, or a failure after
 * saying so). */
int md_report_fit_stdout(const char *command, const md_fit_options *options,
                         const md_fit_outcome *outcome);

#endif
