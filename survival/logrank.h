/* Log-rank test (G-rho family with rho = 0) between groups, with case
 * weights (frequency weights: identical to survdiff on the expanded rows)
 * and delayed entry (risk set entry < t <= time). Reference: R
 * survival::survdiff; with delayed entry, the score test of coxph at
 * beta = 0 (ties = "exact" on expanded rows, or "breslow" on data without
 * tied event times; both equal the log-rank test there).
 *
 * At each distinct event time t, with n the weighted number at risk over all
 * groups, d the weighted events, and n_k, d_k those of group k:
 *   expected_k += d n_k / n
 *   variance_jk += d (n - d) / (n (n - 1)) * n_j (delta_jk - n_k / n)
 * the variance term being skipped when n <= 1 (survdiff skips n == 1). */
#ifndef MD_SURVIVAL_LOGRANK_H
#define MD_SURVIVAL_LOGRANK_H

#include <stdbool.h>
#include <stddef.h>

#include "survival/surv_data.h"

typedef struct md_logrank_result {
  size_t n_groups;
  double *observed;  /* [n_groups] weighted events */
  double *expected;  /* [n_groups] */
  double *variance;  /* [n_groups * n_groups] hypergeometric covariance of O - E, row-major */
  /* survdiff's rule: the test uses the groups with expected > 0, dropping
   * the first of them; chisq = (O - E)' V^-1 (O - E) over the rest. */
  double chisq;      /* 0 when df < 1 (as survdiff); NaN when that V is singular */
  int df;            /* groups with expected > 0, minus 1; 0 when there are none */
  double p_value;    /* gsl_cdf_chisq_Q(chisq, df); NaN when !estimable */
  bool estimable;    /* df >= 1 and V invertible */
  const char *reason; /* static text for a warning when !estimable; NULL otherwise */
} md_logrank_result;

/* groups[0 .. n_groups-1], n_groups >= 2. Errors: MD_E_INVALID (fewer than
 * two groups, an empty group), MD_E_NOMEM. A test that cannot be computed
 * is not an error: MD_OK with estimable = false (also when the groups'
 * weights sum to more than MD_SURV_MAX_TOTAL_WEIGHT, where the variance
 * would overflow). */
md_status md_logrank(const md_surv_table *groups, size_t n_groups, md_logrank_result *result,
                     md_error *err);
void md_logrank_result_free(md_logrank_result *result);

/* Every pairwise test (the two groups alone, as survdiff on their rows).
 * chisq and p_value are caller-allocated [n_groups * n_groups], row-major and
 * symmetric; the diagonal, and pairs whose test is not estimable, hold NaN.
 * Either array may be NULL. Errors as md_logrank. */
md_status md_logrank_pairwise(const md_surv_table *groups, size_t n_groups, double *chisq,
                              double *p_value, md_error *err);

#endif
