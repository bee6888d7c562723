/* Weibull MLE in survreg's parametrisation: log T = mu + sigma W, W standard
 * extreme value; shape = 1/sigma, scale = exp(mu). Newton-Raphson on
 * (mu, log sigma) with the analytic observed information, step halving.
 * Delayed entry subtracts the cumulative hazard at entry (survreg cannot do
 * this; the truncated likelihood is standard). Reference: R
 * survival::survreg(dist = "weibull") without entry; with entry, the
 * truncated likelihood maximised directly in R. */
#ifndef MD_SURVIVAL_WEIBULL_H
#define MD_SURVIVAL_WEIBULL_H

#include <stdbool.h>

#include "survival/exponential.h"
#include "survival/surv_data.h"

typedef struct md_weibull_fit {
  bool estimable;      /* false with fewer than 2 distinct event times, no convergence, or
                        * a log-likelihood whose sums overflow (every loop is bounded) */
  const char *reason;  /* static text for a warning when !estimable; NULL otherwise */
  bool converged;
  int iterations;      /* Newton steps taken */
  /* When !estimable every double below is NaN. */
  double mu;           /* survreg "(Intercept)" */
  double log_sigma;    /* survreg "Log(scale)" */
  double vcov[2][2];   /* inverse observed information on (mu, log sigma) */
  double shape;        /* 1 / sigma */
  double scale;        /* exp(mu), decode steps */
  double level;        /* the level asked for (set even when !estimable) */
  double shape_ci[2];  /* exp(-(log sigma +/- z se)) from the information */
  double scale_ci[2];  /* exp(mu -/+ z se) */
  double loglik;       /* time scale, as survreg reports it (includes the Jacobian) */
  double aic;          /* -2 loglik + 4 */
  /* Likelihood-ratio test against the exponential (sigma = 1), 1 df. The
   * statistic 2 (loglik - exponential loglik) is clamped at 0 against
   * rounding. */
  double lrt_statistic;
  double lrt_p;
} md_weibull_fit;

/* `exponential` supplies the starting point and the null model of the LRT;
 * it may be NULL, and then it is fitted here. Errors: MD_E_INVALID (no
 * table, level outside (0, 1)), MD_E_NOMEM. A model that cannot be estimated
 * is not an error: MD_OK with estimable = false and a reason. */
md_status md_fit_weibull(const md_surv_table *table, const md_exponential_fit *exponential,
                         double level, md_weibull_fit *fit, md_error *err);

/* Sets `fit` to "not estimated": every estimate NaN, estimable false, not
 * converged, no iterations, `reason` (may be NULL) and `level` kept. For a
 * caller whose fit could not run, and for md_fit_weibull's own failures. */
void md_weibull_fit_unavailable(md_weibull_fit *fit, double level, const char *reason);

#endif
