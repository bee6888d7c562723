/* Exponential (constant hazard) MLE with right censoring, delayed entry and
 * case weights. Reference: R survival::survreg(dist = "exponential"):
 * intercept = -log(lambda), var(intercept) = 1/d. With delayed entry (which
 * survreg cannot fit) the likelihood is the left-truncated one,
 * sum w [event log h(time) - H(time) + H(entry)], whose maximum is the same
 * closed form with T counting exposure from entry. */
#ifndef MD_SURVIVAL_EXPONENTIAL_H
#define MD_SURVIVAL_EXPONENTIAL_H

#include <stdbool.h>

#include "survival/surv_data.h"

typedef struct md_exponential_fit {
  bool estimable;            /* false when there are no events (d == 0) */
  const char *reason;        /* static text for a warning when !estimable; NULL otherwise */
  double events;             /* d = sum w * event */
  double exposure;           /* T = sum w * (time - entry) */
  double lambda;             /* d / T, per decode step; 0 when d == 0 */
  double log_lambda_se;      /* 1 / sqrt(d); NaN when d == 0 */
  double level;              /* confidence level of the intervals, e.g. 0.95 */
  double lambda_ci_wald[2];  /* exp(log lambda -/+ z * se); NaN when d == 0 */
  /* Profile likelihood: {lambda : 2 (ll_max - ll(lambda)) <= chi2_1(level)},
   * ends found with gsl_root_fsolver_brent. With d == 0 the lower end is 0
   * and the upper end still exists (chi2_1(level) / (2 T)); estimable stays
   * false. Never NaN. */
  double lambda_ci_profile[2];
  /* d log lambda - lambda T: the log-likelihood on the time scale, which is
   * what survreg reports (it adds the Jacobian -sum w log(time) over events
   * to the fit on log time), so it is comparable with md_weibull_fit.loglik.
   * NaN when d == 0 (the likelihood then has no maximum, only a supremum 0
   * as lambda -> 0). */
  double loglik;
  double aic;                /* -2 loglik + 2; NaN when d == 0 */
} md_exponential_fit;

/* Errors: MD_E_INVALID (no table, empty table, level outside (0, 1)),
 * MD_E_NUMERIC when the exposure T or the events d overflow a double
 * (finite times near the largest double whose sum is not finite; the fit
 * then holds estimable = false, NaN and a reason) or the profile root finder
 * failed (does not happen otherwise). No events is not an error: the fit
 * comes back with estimable = false. */
md_status md_fit_exponential(const md_surv_table *table, double level, md_exponential_fit *fit,
                             md_error *err);

/* Sets `fit` to "not estimated": every estimate NaN, estimable false,
 * `reason` (may be NULL) and `level` kept; events and exposure 0. For a
 * caller whose fit could not run (md_fit_exponential failed). */
void md_exponential_fit_unavailable(md_exponential_fit *fit, double level, const char *reason);

/* Half-life ln 2 / lambda and its interval mapped from a lambda interval.
 * md_half_life returns +INFINITY for lambda == 0 (the upper end of a
 * half-life interval when the rate's interval starts at 0; JSON writers emit
 * null for it) and NaN for lambda < 0 or NaN. */
double md_half_life(double lambda);

/* half_life_ci = {ln 2 / lambda_ci[1], ln 2 / lambda_ci[0]} (the ends swap,
 * since the map is decreasing), with md_half_life's conventions. */
void md_half_life_ci(const double lambda_ci[2], double half_life_ci[2]);

#endif
