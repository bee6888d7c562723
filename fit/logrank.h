/* Log-rank test (G-rho family with rho = 0) between groups, with case
 * weights (frequency weights: identical to survdiff on the expanded rows)
 * and delayed entry (risk set entry < t <= time). Reference: R
 * survival::survdiff; with delayed entry, the score test of coxph with
 * Breslow ties on data without tied event times. */
#ifndef MD_FIT_LOGRANK_H
#define MD_FIT_LOGRANK_H

#include <stddef.h>

#include "fit/surv_data.h"

typedef struct md_logrank_result {
  size_t n_groups;
  double *observed;  /* [n_groups] weighted events */
  double *expected;  /* [n_groups] */
  double *variance;  /* [n_groups * n_groups] hypergeometric covariance of O - E */
  double chisq;
  int df;            /* groups with positive variance, minus 1 (as survdiff) */
  double p_value;    /* NaN when df == 0 */
} md_logrank_result;

md_status md_logrank(const md_surv_table *groups, size_t n_groups, md_logrank_result *result,
                     md_error *err);
void md_logrank_result_free(md_logrank_result *result);

#endif
