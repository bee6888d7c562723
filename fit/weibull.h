/* Weibull MLE in survreg's parametrisation: log T = mu + sigma W, W standard
 * extreme value; shape = 1/sigma, scale = exp(mu). Newton-Raphson on
 * (mu, log sigma) with the analytic observed information, step halving.
 * Delayed entry subtracts the cumulative hazard at entry (survreg cannot do
 * this; the truncated likelihood is standard). */
#ifndef MD_FIT_WEIBULL_H
#define MD_FIT_WEIBULL_H

#include <stdbool.h>

#include "fit/exponential.h"
#include "fit/surv_data.h"

typedef struct md_weibull_fit {
  bool estimable;      /* false with fewer than 2 distinct event times, or no convergence */
  bool converged;
  int iterations;
  double mu;           /* survreg "(Intercept)" */
  double log_sigma;    /* survreg "Log(scale)" */
  double vcov[2][2];   /* inverse observed information on (mu, log sigma) */
  double shape;        /* 1 / sigma */
  double scale;        /* exp(mu), decode steps */
  double level;
  double shape_ci[2];  /* exp(-(log sigma +/- z se)) from the information */
  double scale_ci[2];  /* exp(mu -/+ z se) */
  double loglik;       /* time scale, as survreg reports it */
  double aic;          /* -2 loglik + 4 */
  /* Likelihood-ratio test against the exponential (sigma = 1), 1 df. */
  double lrt_statistic;
  double lrt_p;
} md_weibull_fit;

/* `exponential` supplies the starting point and the null model of the LRT. */
md_status md_fit_weibull(const md_surv_table *table, const md_exponential_fit *exponential,
                         double level, md_weibull_fit *fit, md_error *err);

#endif
