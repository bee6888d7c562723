/* Exponential (constant hazard) MLE with right censoring, delayed entry and
 * case weights. Reference: R survival::survreg(dist = "exponential"):
 * intercept = -log(lambda), var(intercept) = 1/d. */
#ifndef MD_FIT_EXPONENTIAL_H
#define MD_FIT_EXPONENTIAL_H

#include <stdbool.h>

#include "fit/surv_data.h"

typedef struct md_exponential_fit {
  bool estimable;            /* false when there are no events (d == 0) */
  double events;             /* d = sum w * event */
  double exposure;           /* T = sum w * (time - entry) */
  double lambda;             /* d / T, per decode step */
  double log_lambda_se;      /* 1 / sqrt(d) */
  double level;              /* confidence level of the intervals, e.g. 0.95 */
  double lambda_ci_wald[2];  /* exp(log lambda -/+ z * se) */
  /* Profile likelihood: {lambda : 2 (ll_max - ll(lambda)) <= chi2_1(level)},
   * ends found with gsl_root_fsolver_brent. With d == 0 the lower end is 0
   * and the upper end still exists; estimable stays false. */
  double lambda_ci_profile[2];
  double loglik;             /* d log lambda - lambda T (time scale, as survreg) */
  double aic;                /* -2 loglik + 2 */
} md_exponential_fit;

md_status md_fit_exponential(const md_surv_table *table, double level, md_exponential_fit *fit,
                             md_error *err);

/* Half-life ln 2 / lambda and its interval mapped from a lambda interval. */
double md_half_life(double lambda);

#endif
