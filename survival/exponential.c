/* Exponential MLE: closed form, Wald and profile-likelihood intervals. */
#include "survival/exponential.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_roots.h>
#include <math.h>
#include <string.h>

/* With v = log(lambda / lambda_hat), the log-likelihood d log lambda - lambda T
 * drops from its maximum by ll_max - ll(lambda) = d (e^v - 1 - v), so the
 * profile interval's ends solve e^v - 1 - v = q / (2 d), q = chi2_1(level):
 * one root below 0 and one above. expm1 keeps the difference exact when
 * d is large and v small. */
typedef struct profile_params {
  double target; /* q / (2 d) */
} profile_params;

static double profile_excess(double v, void *params) {
  const profile_params *p = params;
  return (expm1(v) - v) - p->target;
}

/* GSL is never handed an interval or value that would make it call its
 * error handler (which aborts by default, and is global state we leave
 * alone): the brackets below are proven to straddle the root and keep
 * e^v finite. */
static md_status brent_root(double lo, double hi, double target, double *root, md_error *err) {
  profile_params params = {target};
  gsl_function f = {profile_excess, &params};
  gsl_root_fsolver *solver = gsl_root_fsolver_alloc(gsl_root_fsolver_brent);
  if (!solver) return md_fail(err, MD_E_NOMEM, "exponential fit: out of memory");
  int status = gsl_root_fsolver_set(solver, &f, lo, hi);
  int converged = 0;
  for (int iter = 0; status == GSL_SUCCESS && !converged && iter < 500; iter++) {
    status = gsl_root_fsolver_iterate(solver);
    converged = gsl_root_test_interval(gsl_root_fsolver_x_lower(solver),
                                       gsl_root_fsolver_x_upper(solver), 0.0, 1e-15) == GSL_SUCCESS;
  }
  *root = gsl_root_fsolver_root(solver);
  gsl_root_fsolver_free(solver);
  if (status != GSL_SUCCESS || !converged)
    return md_fail(err, MD_E_NUMERIC, "exponential fit: profile-likelihood root not found (%s)",
                   status != GSL_SUCCESS ? gsl_strerror(status) : "no convergence");
  return MD_OK;
}

/* Brackets, with c = q / (2 d): for v < 0, e^v - 1 - v > -v - 1, which is
 * c + 1 > c at v = -(c + 2); for v > 0, e^v - 1 - v >= v^2 / 2 > c at
 * v = sqrt(2 c) + 1, and e^v - 1 - v > c at v = log(2 c + 2) + 1 (there e^v
 * exceeds 5 c + 5 while 1 + v <= 2 c + 3); the smaller bound is used. */
static md_status profile_interval(const md_exponential_fit *fit, double q, double ci[2],
                                  md_error *err) {
  if (fit->events <= 0.0) {
    /* ll(lambda) = -lambda T, supremum 0 at lambda = 0: the end solves 2 lambda T = q. */
    ci[0] = 0.0;
    ci[1] = q / (2.0 * fit->exposure);
    return MD_OK;
  }
  double c = q / (2.0 * fit->events);
  if (!(c < 1e300))
    return md_fail(err, MD_E_NUMERIC, "exponential fit: %g events are too few for a profile interval",
                   fit->events);
  double v_lower, v_upper;
  double upper_bracket = fmin(sqrt(2.0 * c), log(2.0 * c + 2.0)) + 1.0;
  md_status status = brent_root(-(c + 2.0), 0.0, c, &v_lower, err);
  if (status == MD_OK) status = brent_root(0.0, upper_bracket, c, &v_upper, err);
  if (status != MD_OK) return status;
  ci[0] = fit->lambda * exp(v_lower);
  ci[1] = fit->lambda * exp(v_upper);
  return MD_OK;
}

void md_exponential_fit_unavailable(md_exponential_fit *fit, double level, const char *reason) {
  memset(fit, 0, sizeof *fit);
  fit->level = level;
  fit->estimable = false;
  fit->reason = reason;
  fit->lambda = fit->log_lambda_se = fit->loglik = fit->aic = NAN;
  fit->lambda_ci_wald[0] = fit->lambda_ci_wald[1] = NAN;
  fit->lambda_ci_profile[0] = fit->lambda_ci_profile[1] = NAN;
}

md_status md_fit_exponential(const md_surv_table *table, double level, md_exponential_fit *fit,
                             md_error *err) {
  if (!table || !fit || table->n == 0)
    return md_fail(err, MD_E_INVALID, "exponential fit: no data");
  if (!(level > 0.0 && level < 1.0))
    return md_fail(err, MD_E_INVALID, "exponential fit: confidence level %g is not in (0, 1)",
                   level);
  memset(fit, 0, sizeof *fit);
  md_surv_totals totals;
  md_surv_table_totals(table, &totals);
  fit->events = totals.events;
  fit->exposure = totals.exposure;
  fit->level = level;
  double q = gsl_cdf_chisq_Pinv(level, 1.0);
  /* Every row is finite, but their sum need not be (two times of 1e308):
   * lambda would come out 0 and every estimate from it wrong. */
  if (!isfinite(totals.exposure) || !isfinite(totals.events)) {
    fit->estimable = false;
    fit->reason = "the exposure sum(weight * (time - entry)) overflows a double";
    fit->lambda = fit->log_lambda_se = NAN;
    fit->lambda_ci_wald[0] = fit->lambda_ci_wald[1] = NAN;
    fit->lambda_ci_profile[0] = fit->lambda_ci_profile[1] = NAN;
    fit->loglik = fit->aic = NAN;
    return md_fail(err, MD_E_NUMERIC,
                   "exponential fit: the exposure, sum(weight * (time - entry)) over %.17g rows, "
                   "overflows a double (times or weights too close to the largest double)",
                   totals.rows);
  }
  if (totals.events <= 0.0) {
    fit->estimable = false;
    fit->reason = "no events: the rate cannot be estimated, only bounded above";
    fit->lambda = 0.0;
    fit->log_lambda_se = NAN;
    fit->lambda_ci_wald[0] = fit->lambda_ci_wald[1] = NAN;
    fit->loglik = fit->aic = NAN;
    return profile_interval(fit, q, fit->lambda_ci_profile, err);
  }
  fit->estimable = true;
  fit->lambda = fit->events / fit->exposure;
  fit->log_lambda_se = 1.0 / sqrt(fit->events);
  double z = gsl_cdf_ugaussian_Pinv(1.0 - (1.0 - level) / 2.0);
  fit->lambda_ci_wald[0] = exp(log(fit->lambda) - z * fit->log_lambda_se);
  fit->lambda_ci_wald[1] = exp(log(fit->lambda) + z * fit->log_lambda_se);
  fit->loglik = fit->events * log(fit->lambda) - fit->lambda * fit->exposure;
  fit->aic = -2.0 * fit->loglik + 2.0;
  return profile_interval(fit, q, fit->lambda_ci_profile, err);
}

double md_half_life(double lambda) {
  if (lambda == 0.0) return INFINITY;
  if (!(lambda > 0.0)) return NAN;
  return M_LN2 / lambda;
}

void md_half_life_ci(const double lambda_ci[2], double half_life_ci[2]) {
  double lower = md_half_life(lambda_ci[1]);
  double upper = md_half_life(lambda_ci[0]);
  half_life_ci[0] = lower;
  half_life_ci[1] = upper;
}
