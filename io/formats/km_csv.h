/* The Kaplan-Meier curves of `fit --km-csv` as CSV, one row per region and
 * distinct time (memdecay-calibrate(1), KM CSV):
 *
 *   region,time,n_risk,n_event,n_censor,surv,std_err,lower,upper
 *
 * std_err is the Greenwood standard error of log S (as R's survfit reports
 * it); lower and upper are the pointwise band chosen with --band at --level.
 * A value that is undefined (R's NA) is an empty field. Numbers are written
 * in the shortest form that reads back to the same double. */
#ifndef MD_IO_FORMATS_KM_CSV_H
#define MD_IO_FORMATS_KM_CSV_H

#include <stddef.h>
#include <stdio.h>

#include "survival/km.h"
#include "base/error.h"

#define MD_KM_CSV_HEADER "region,time,n_risk,n_event,n_censor,surv,std_err,lower,upper"

/* Writes the header and every curve; curves[i] may be NULL (no rows).
 * `path` names the output in messages. */
md_status md_km_csv_write(FILE *fp, const char *path, const char *const *regions,
                          const md_km_curve *const *curves, size_t n_curves, md_error *err);

#endif
