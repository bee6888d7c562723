/* Weibull MLE by Newton-Raphson on (mu, s = log sigma).
 *
 * Time-scale log-likelihood of one row (weight w, event d, time t, entry e),
 * with sigma = e^s, z = (log t - mu) / sigma and z0 = (log e - mu) / sigma:
 * the hazard is h(t) = e^z / (sigma t) and the cumulative hazard
 * H(t) = e^z = (t / scale)^shape, so
 *
 *   l = w [ d (z - s - log t) - e^z + e^z0 ]          (e^z0 = H(e), 0 if e = 0)
 *
 * (the -log t is survreg's Jacobian, which makes l the density of t rather
 * than of log t). With dz/dmu = -1/sigma and dz/ds = -z:
 *
 *   dl/dmu     = w (e^z - e^z0 - d) / sigma
 *   dl/ds      = w [ z e^z - z0 e^z0 - d (1 + z) ]
 *   d2l/dmu2   = -w (e^z - e^z0) / sigma^2
 *   d2l/dmu ds = w [ -(e^z - e^z0 - d) - z e^z + z0 e^z0 ] / sigma
 *   d2l/ds2    = w [ d z - z (1 + z) e^z + z0 (1 + z0) e^z0 ]
 *
 * The observed information is minus the sum of the second derivatives; its
 * inverse at the maximum is the covariance survreg reports for
 * ((Intercept), Log(scale)). Iteration as in survreg: Newton steps from
 * the exponential fit (mu = -log lambda, sigma = 1), halved while the
 * log-likelihood does not increase; see maximise() for the stopping rule. */
#include "survival/weibull.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_linalg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_ITERATIONS = 100, MAX_HALVINGS = 40, MAX_RIDGES = 200 };
static const double RELATIVE_TOLERANCE = 1e-10; /* on the Newton decrement */
static const double MAX_ABS_LOG_SIGMA = 30.0; /* beyond: the shape runs off to 0 or infinity */

/* Per-row constants of the compressed table. */
typedef struct weibull_rows {
  size_t n;
  const double *weight;
  const uint8_t *event;
  double *log_time;
  double *log_entry; /* NaN where entry == 0 */
} weibull_rows;

typedef struct weibull_point {
  double mu, log_sigma;
  double loglik;
  double gradient[2];
  double information[2][2]; /* minus the Hessian */
} weibull_point;

static void evaluate(const weibull_rows *rows, double mu, double log_sigma, weibull_point *p) {
  double sigma = exp(log_sigma);
  double ll = 0, g_mu = 0, g_s = 0, h_mumu = 0, h_mus = 0, h_ss = 0;
  for (size_t i = 0; i < rows->n; i++) {
    double w = rows->weight[i], d = rows->event[i];
    double z = (rows->log_time[i] - mu) / sigma, ez = exp(z);
    double z0 = 0, ez0 = 0;
    if (!isnan(rows->log_entry[i])) {
      z0 = (rows->log_entry[i] - mu) / sigma;
      ez0 = exp(z0);
    }
    ll += w * (d * (z - log_sigma - rows->log_time[i]) - ez + ez0);
    g_mu += w * (ez - ez0 - d);
    g_s += w * (z * ez - z0 * ez0 - d * (1.0 + z));
    h_mumu -= w * (ez - ez0);
    h_mus += w * (-(ez - ez0 - d) - z * ez + z0 * ez0);
    h_ss += w * (d * z - z * (1.0 + z) * ez + z0 * (1.0 + z0) * ez0);
  }
  p->mu = mu;
  p->log_sigma = log_sigma;
  p->loglik = ll;
  p->gradient[0] = g_mu / sigma;
  p->gradient[1] = g_s;
  p->information[0][0] = -h_mumu / (sigma * sigma);
  p->information[0][1] = p->information[1][0] = -h_mus / sigma;
  p->information[1][1] = -h_ss;
}

static bool positive_definite(const double m[2][2]) {
  return m[0][0] > 0.0 && m[1][1] > 0.0 && m[0][0] * m[1][1] - m[0][1] * m[1][0] > 0.0;
}

/* Solves m x = b, or inverts m into `inverse`, through gsl_linalg's
 * Cholesky; m must be positive definite (checked by the caller, since GSL
 * reports failure through its global error handler). */
static void cholesky_solve_2x2(const double m[2][2], const double b[2], double x[2],
                               double inverse[2][2]) {
  double a[4] = {m[0][0], m[0][1], m[1][0], m[1][1]};
  gsl_matrix_view view = gsl_matrix_view_array(a, 2, 2);
  gsl_linalg_cholesky_decomp1(&view.matrix);
  if (x) {
    double rhs[2] = {b[0], b[1]};
    gsl_vector_view rhs_view = gsl_vector_view_array(rhs, 2);
    gsl_vector_view x_view = gsl_vector_view_array(x, 2);
    gsl_linalg_cholesky_solve(&view.matrix, &rhs_view.vector, &x_view.vector);
  }
  if (inverse) {
    gsl_linalg_cholesky_invert(&view.matrix);
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 2; j++) inverse[i][j] = gsl_matrix_get(&view.matrix, i, j);
  }
}

static bool point_finite(const weibull_point *p) {
  return isfinite(p->loglik) && isfinite(p->gradient[0]) && isfinite(p->gradient[1]) &&
         isfinite(p->information[0][0]) && isfinite(p->information[0][1]) &&
         isfinite(p->information[1][1]);
}

/* The Newton direction; away from the maximum, where the information need
 * not be positive definite, a multiple of the identity is added until it is
 * (Levenberg), which turns the step towards the gradient. The ridge doubles,
 * so a finite matrix is positive definite long before MAX_RIDGES; false (no
 * direction) when it is not, which only a sum that overflowed can cause. */
static bool newton_direction(const weibull_point *p, double step[2]) {
  if (!point_finite(p)) return false;
  double m[2][2] = {{p->information[0][0], p->information[0][1]},
                    {p->information[1][0], p->information[1][1]}};
  double ridge = 0.0, size = fabs(m[0][0]) + fabs(m[1][1]) + 1e-12;
  for (int k = 0; !positive_definite(m); k++) {
    if (k == MAX_RIDGES) return false;
    double add = ridge == 0.0 ? 1e-3 * size : ridge;
    ridge += add;
    m[0][0] += add;
    m[1][1] += add;
  }
  cholesky_solve_2x2(m, p->gradient, step, NULL);
  return isfinite(step[0]) && isfinite(step[1]);
}

/* Moves along `step`, halved while the log-likelihood does not increase;
 * returns false when no step increases it. */
static bool newton_step(const weibull_rows *rows, weibull_point *p, double step[2]) {
  for (int k = 0; k <= MAX_HALVINGS; k++) {
    double mu = p->mu + step[0], log_sigma = p->log_sigma + step[1];
    if (fabs(log_sigma) <= MAX_ABS_LOG_SIGMA) {
      weibull_point next;
      evaluate(rows, mu, log_sigma, &next);
      if (point_finite(&next) && next.loglik >= p->loglik) {
        *p = next;
        return true;
      }
    }
    step[0] /= 2.0;
    step[1] /= 2.0;
  }
  return false;
}

/* Newton steps with halving until the increase the next step promises
 * (half the Newton decrement g' I^-1 g) is below a relative 5e-11 of the
 * log-likelihood (survreg stops on the relative change in the
 * log-likelihood, 1e-9 by default). From there the log-likelihood is too
 * flat for its rounding to judge a step, and the maximum is within the
 * quadratic convergence of Newton's method: up to two full steps finish
 * the job (each squares the relative error of the parameters). */
static const char *maximise(const weibull_rows *rows, weibull_point *p, int *iterations) {
  int final_steps = 0;
  for (*iterations = 0; *iterations < MAX_ITERATIONS;) {
    double step[2];
    if (!newton_direction(p, step))
      return "the log-likelihood or its derivatives overflow a double (times or weights too "
             "extreme)";
    double decrement = p->gradient[0] * step[0] + p->gradient[1] * step[1];
    double scale = fmax(1.0, fabs(p->loglik));
    if (decrement <= 1e-24 * scale) return NULL;
    if (decrement <= RELATIVE_TOLERANCE * scale) {
      weibull_point next;
      evaluate(rows, p->mu + step[0], p->log_sigma + step[1], &next);
      if (!point_finite(&next)) return "the log-likelihood is not finite near its maximum";
      *p = next;
      ++*iterations;
      if (++final_steps == 2) return NULL;
      continue;
    }
    if (!newton_step(rows, p, step))
      return "Newton-Raphson could not increase the log-likelihood";
    ++*iterations;
  }
  return "Newton-Raphson did not converge";
}

void md_weibull_fit_unavailable(md_weibull_fit *fit, double level, const char *reason) {
  memset(fit, 0, sizeof *fit);
  double *fields[] = {&fit->mu, &fit->log_sigma, &fit->vcov[0][0], &fit->vcov[0][1],
                      &fit->vcov[1][0], &fit->vcov[1][1], &fit->shape, &fit->scale,
                      &fit->shape_ci[0], &fit->shape_ci[1], &fit->scale_ci[0], &fit->scale_ci[1],
                      &fit->loglik, &fit->aic, &fit->lrt_statistic, &fit->lrt_p};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) *fields[i] = NAN;
  fit->estimable = false;
  fit->reason = reason;
  fit->level = level;
}

/* A failure within the fit keeps how far Newton-Raphson got. */
static void set_not_estimable(md_weibull_fit *fit, const char *reason) {
  bool converged = fit->converged;
  int iterations = fit->iterations;
  md_weibull_fit_unavailable(fit, fit->level, reason);
  fit->converged = converged;
  fit->iterations = iterations;
}

static void fill_fit(const weibull_point *p, const md_exponential_fit *exponential,
                     md_weibull_fit *fit) {
  fit->estimable = true;
  fit->mu = p->mu;
  fit->log_sigma = p->log_sigma;
  cholesky_solve_2x2(p->information, NULL, NULL, fit->vcov);
  fit->shape = exp(-p->log_sigma);
  fit->scale = exp(p->mu);
  double z = gsl_cdf_ugaussian_Pinv(1.0 - (1.0 - fit->level) / 2.0);
  double se_mu = sqrt(fit->vcov[0][0]), se_s = sqrt(fit->vcov[1][1]);
  fit->shape_ci[0] = exp(-(p->log_sigma + z * se_s));
  fit->shape_ci[1] = exp(-(p->log_sigma - z * se_s));
  fit->scale_ci[0] = exp(p->mu - z * se_mu);
  fit->scale_ci[1] = exp(p->mu + z * se_mu);
  fit->loglik = p->loglik;
  fit->aic = -2.0 * p->loglik + 4.0;
  fit->lrt_statistic = fmax(2.0 * (p->loglik - exponential->loglik), 0.0);
  fit->lrt_p = gsl_cdf_chisq_Q(fit->lrt_statistic, 1.0);
}

static md_status fit_rows(const md_surv_table *table, const md_exponential_fit *exponential,
                          md_weibull_fit *fit, md_error *err) {
  weibull_rows rows = {table->n, table->weight, table->event, malloc(table->n * sizeof(double)),
                       malloc(table->n * sizeof(double))};
  if (!rows.log_time || !rows.log_entry) {
    free(rows.log_time);
    free(rows.log_entry);
    return md_fail(err, MD_E_NOMEM, "Weibull fit: out of memory");
  }
  for (size_t i = 0; i < table->n; i++) {
    rows.log_time[i] = log(table->time[i]);
    rows.log_entry[i] = table->entry[i] > 0.0 ? log(table->entry[i]) : NAN;
  }
  weibull_point p;
  evaluate(&rows, -log(exponential->lambda), 0.0, &p);
  const char *failure = maximise(&rows, &p, &fit->iterations);
  fit->converged = failure == NULL;
  if (!failure && !positive_definite(p.information))
    failure = "the observed information is not positive definite at the maximum";
  if (failure)
    set_not_estimable(fit, failure);
  else
    fill_fit(&p, exponential, fit);
  free(rows.log_time);
  free(rows.log_entry);
  return MD_OK;
}

md_status md_fit_weibull(const md_surv_table *table, const md_exponential_fit *exponential,
                         double level, md_weibull_fit *fit, md_error *err) {
  if (!table || !fit || table->n == 0) return md_fail(err, MD_E_INVALID, "Weibull fit: no data");
  if (!(level > 0.0 && level < 1.0))
    return md_fail(err, MD_E_INVALID, "Weibull fit: confidence level %g is not in (0, 1)", level);
  memset(fit, 0, sizeof *fit);
  fit->level = level;
  md_exponential_fit own_exponential;
  if (!exponential) {
    md_error local = {0};
    md_status status = md_fit_exponential(table, level, &own_exponential, &local);
    if (status == MD_E_NUMERIC) {
      /* No starting point (an exposure that overflows): not estimable,
       * as the contract says, rather than an error. */
      set_not_estimable(fit, "the exponential fit it starts from cannot be computed");
      return MD_OK;
    }
    if (status != MD_OK) {
      if (err) *err = local;
      return status;
    }
    exponential = &own_exponential;
  }
  md_surv_totals totals;
  md_surv_table_totals(table, &totals);
  if (totals.distinct_event_times < 2 || !exponential->estimable) {
    set_not_estimable(fit, "fewer than 2 distinct event times: the shape cannot be estimated");
    return MD_OK;
  }
  if (!(exponential->lambda > 0.0 && isfinite(exponential->lambda))) {
    set_not_estimable(fit, "the exponential fit it starts from has no finite positive rate");
    return MD_OK;
  }
  return fit_rows(table, exponential, fit, err);
}
