/* Log-rank test among groups, following R survival's survdiff (C routine
 * survdiff2 with rho = 0) with weighted counts and left-truncated risk sets. */
#include "fit/logrank.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fit/risk_set.h"

void md_logrank_result_free(md_logrank_result *result) {
  if (!result) return;
  free(result->observed);
  free(result->expected);
  free(result->variance);
  memset(result, 0, sizeof *result);
}

static int by_value_descending(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x < y) - (x > y);
}

/* The distinct event times of all groups, latest first. */
static double *pooled_event_times(const md_surv_table *groups, size_t n_groups, size_t *n_out) {
  size_t n = 0;
  for (size_t g = 0; g < n_groups; g++)
    for (size_t i = 0; i < groups[g].n; i++) n += groups[g].event[i];
  double *times = malloc((n ? n : 1) * sizeof *times);
  if (!times) return NULL;
  n = 0;
  for (size_t g = 0; g < n_groups; g++)
    for (size_t i = 0; i < groups[g].n; i++)
      if (groups[g].event[i]) times[n++] = groups[g].time[i];
  qsort(times, n, sizeof *times, by_value_descending);
  size_t distinct = 0;
  for (size_t i = 0; i < n; i++)
    if (distinct == 0 || times[i] != times[distinct - 1]) times[distinct++] = times[i];
  *n_out = distinct;
  return times;
}

/* Adds one event time's terms to E and V; at_risk[] and events[] per group. */
static void accumulate_time(md_logrank_result *r, const double *at_risk, const double *events) {
  size_t G = r->n_groups;
  double n = 0.0, d = 0.0;
  for (size_t k = 0; k < G; k++) {
    n += at_risk[k];
    d += events[k];
  }
  if (d <= 0.0) return;
  for (size_t k = 0; k < G; k++) r->expected[k] += d * at_risk[k] / n;
  if (n <= 1.0) return; /* one subject at risk: no variance */
  double factor = d * (n - d) / (n * (n - 1.0));
  for (size_t j = 0; j < G; j++) {
    double term = factor * at_risk[j];
    for (size_t k = 0; k < G; k++) r->variance[j * G + k] += term * ((j == k) - at_risk[k] / n);
  }
}

static md_status sweep_groups(const md_surv_table *groups, md_logrank_result *r, md_error *err) {
  size_t G = r->n_groups, n_times = 0;
  double *times = pooled_event_times(groups, G, &n_times);
  md_risk_sweep *sweeps = calloc(G, sizeof *sweeps);
  double *at_risk = malloc(G * sizeof *at_risk), *events = malloc(G * sizeof *events);
  md_status status = MD_OK;
  if (!times || !sweeps || !at_risk || !events)
    status = md_fail(err, MD_E_NOMEM, "log-rank test: out of memory");
  for (size_t k = 0; status == MD_OK && k < G; k++)
    status = md_risk_sweep_init(&groups[k], &sweeps[k], err);
  for (size_t t = 0; status == MD_OK && t < n_times; t++) {
    for (size_t k = 0; k < G; k++) {
      at_risk[k] = md_risk_sweep_to(&sweeps[k], times[t], &events[k], NULL);
      r->observed[k] += events[k];
    }
    accumulate_time(r, at_risk, events);
  }
  for (size_t k = 0; sweeps && k < G; k++) md_risk_sweep_free(&sweeps[k]);
  free(sweeps);
  free(times);
  free(at_risk);
  free(events);
  return status;
}

static void not_estimable(md_logrank_result *r, double chisq, const char *reason) {
  r->chisq = chisq;
  r->p_value = NAN;
  r->estimable = false;
  r->reason = reason;
}

/* survdiff: keep groups with E > 0, drop the first of them, and solve
 * V x = O - E on the rest; chisq = (O - E)' x. The solve goes through
 * gsl_linalg's LU with the pivots checked first (a singular V would make
 * GSL call its global error handler). */
static md_status chi_square(md_logrank_result *r, md_error *err) {
  size_t G = r->n_groups, *kept = malloc(G * sizeof *kept), n_kept = 0;
  if (!kept) return md_fail(err, MD_E_NOMEM, "log-rank test: out of memory");
  for (size_t k = 0; k < G; k++)
    if (r->expected[k] > 0.0) kept[n_kept++] = k;
  r->df = n_kept > 1 ? (int)n_kept - 1 : 0;
  if (n_kept < 2) {
    free(kept);
    not_estimable(r, 0.0, "fewer than two groups have expected events");
    return MD_OK;
  }
  size_t m = n_kept - 1;
  gsl_matrix *v = gsl_matrix_alloc(m, m);
  gsl_vector *diff = gsl_vector_alloc(m), *x = gsl_vector_alloc(m);
  gsl_permutation *perm = gsl_permutation_alloc(m);
  md_status status = MD_OK;
  if (!v || !diff || !x || !perm) {
    status = md_fail(err, MD_E_NOMEM, "log-rank test: out of memory");
  } else {
    double largest = 0.0;
    for (size_t i = 0; i < m; i++) {
      size_t gi = kept[i + 1];
      gsl_vector_set(diff, i, r->observed[gi] - r->expected[gi]);
      for (size_t j = 0; j < m; j++) {
        double vij = r->variance[gi * G + kept[j + 1]];
        gsl_matrix_set(v, i, j, vij);
        largest = fmax(largest, fabs(vij));
      }
    }
    int signum;
    gsl_linalg_LU_decomp(v, perm, &signum);
    bool singular = !(largest > 0.0);
    for (size_t i = 0; i < m; i++)
      if (!(fabs(gsl_matrix_get(v, i, i)) > 1e-12 * largest)) singular = true;
    if (singular) {
      not_estimable(r, NAN, "the variance matrix of O - E is singular");
    } else {
      gsl_linalg_LU_solve(v, perm, diff, x);
      double chisq = 0.0;
      gsl_blas_ddot(diff, x, &chisq);
      r->chisq = chisq;
      r->p_value = gsl_cdf_chisq_Q(chisq, (double)r->df);
      r->estimable = true;
      r->reason = NULL;
    }
  }
  gsl_matrix_free(v);
  gsl_vector_free(diff);
  gsl_vector_free(x);
  gsl_permutation_free(perm);
  free(kept);
  return status;
}

md_status md_logrank(const md_surv_table *groups, size_t n_groups, md_logrank_result *result,
                     md_error *err) {
  if (!result) return md_fail(err, MD_E_INVALID, "log-rank test: no result to fill");
  memset(result, 0, sizeof *result);
  if (!groups || n_groups < 2)
    return md_fail(err, MD_E_INVALID, "log-rank test: needs at least 2 groups, got %zu", n_groups);
  for (size_t k = 0; k < n_groups; k++)
    if (groups[k].n == 0) return md_fail(err, MD_E_INVALID, "log-rank test: group %zu is empty", k);
  result->n_groups = n_groups;
  result->observed = calloc(n_groups, sizeof(double));
  result->expected = calloc(n_groups, sizeof(double));
  result->variance = calloc(n_groups * n_groups, sizeof(double));
  md_status status = MD_OK;
  if (!result->observed || !result->expected || !result->variance)
    status = md_fail(err, MD_E_NOMEM, "log-rank test: out of memory");
  if (status == MD_OK) status = sweep_groups(groups, result, err);
  if (status == MD_OK) status = chi_square(result, err);
  if (status != MD_OK) md_logrank_result_free(result);
  return status;
}

md_status md_logrank_pairwise(const md_surv_table *groups, size_t n_groups, double *chisq,
                              double *p_value, md_error *err) {
  if (!groups || n_groups < 2)
    return md_fail(err, MD_E_INVALID, "log-rank test: needs at least 2 groups, got %zu", n_groups);
  for (size_t i = 0; i < n_groups; i++) {
    if (chisq) chisq[i * n_groups + i] = NAN;
    if (p_value) p_value[i * n_groups + i] = NAN;
    for (size_t j = i + 1; j < n_groups; j++) {
      md_surv_table pair[2] = {groups[i], groups[j]};
      md_logrank_result result;
      md_status status = md_logrank(pair, 2, &result, err);
      if (status != MD_OK) return status;
      double c = result.estimable ? result.chisq : NAN;
      double p = result.estimable ? result.p_value : NAN;
      if (chisq) chisq[i * n_groups + j] = chisq[j * n_groups + i] = c;
      if (p_value) p_value[i * n_groups + j] = p_value[j * n_groups + i] = p;
      md_logrank_result_free(&result);
    }
  }
  return MD_OK;
}
