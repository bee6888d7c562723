/* Log-rank test among groups, following R survival's survdiff (C routine
 * survdiff2 with rho = 0) with weighted counts and left-truncated risk sets. */
#include "survival/logrank.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "survival/risk_set.h"

void md_logrank_result_free(md_logrank_result *result) {
  if (!result) return;
  free(result->observed);
  free(result->expected);
  free(result->variance);
  memset(result, 0, sizeof *result);
}

/* The latest event time of `table` before row `*row` (rows are sorted by
 * time), moving *row to it; false when there is none. */
static bool previous_event_time(const md_surv_table *table, size_t *row, double *time) {
  while (*row > 0) {
    size_t i = --*row;
    if (table->event[i]) {
      *time = table->time[i];
      while (*row > 0 && table->time[*row - 1] == *time) --*row;
      return true;
    }
  }
  return false;
}

/* The sums over event times t (d events among n at risk; group k with a_k
 * at risk), with f = d (n - d) / (n (n - 1)) (0 when n <= 1):
 *   E_k  = sum d a_k / n                           (summed directly)
 *   V_jk = -sum (f / n) a_j a_k           (j != k)
 *   V_kk = sum f a_k (n - a_k) / n = -sum over j != k of V_jk
 * (each row of V sums to 0). a_k only changes at the times where group k
 * has rows, so instead of G^2 terms at every event time (the direct form)
 * the running total Q = sum f / n is kept and each product a_j a_k is
 * charged the growth of Q since either factor last changed: when a_j or
 * a_k changes, and at the end. That is O(G) work per change of a group
 * instead of O(G^2) per event time. The diagonal is the row sum, which is
 * a sum of like-signed terms and exactly 0 where R's is (a group never at
 * risk beside another). */
typedef struct lazy_sums {
  double Q;        /* running sum of f / n over the event times swept */
  double *at_risk; /* [G] a_k now */
  double *q_mark;  /* [G * G] Q when a_j a_k last changed (j < k) */
} lazy_sums;

/* Charges the products a_j a_k (k != j) for the growth of Q since they
 * last changed, before a_j changes. V's upper triangle holds them. */
static void charge_group(lazy_sums *z, md_logrank_result *r, size_t j) {
  size_t G = r->n_groups;
  double aj = z->at_risk[j];
  for (size_t k = 0; k < G; k++) {
    if (k == j) continue;
    size_t lo = j < k ? j : k, hi = j < k ? k : j;
    double *mark = &z->q_mark[lo * G + hi];
    r->variance[lo * G + hi] -= aj * z->at_risk[k] * (z->Q - *mark);
    *mark = z->Q;
  }
}

/* V from its upper triangle: the lower mirrors it, the diagonal is minus
 * the sum of the rest of its row. */
static void complete_variance(md_logrank_result *r) {
  size_t G = r->n_groups;
  for (size_t j = 0; j < G; j++)
    for (size_t k = 0; k < j; k++) r->variance[j * G + k] = r->variance[k * G + j];
  for (size_t j = 0; j < G; j++) {
    double row = 0.0;
    for (size_t k = 0; k < G; k++)
      if (k != j) row += r->variance[j * G + k];
    r->variance[j * G + j] = -row;
  }
}

/* Walks the distinct event times of all groups from the latest, merging
 * the groups' own (sorted) event times, and accumulates O, E and V. */
static md_status sweep_groups(md_risk_sweep *sweeps, md_logrank_result *r, md_error *err) {
  size_t G = r->n_groups;
  size_t *row = malloc(G * sizeof *row);
  double *next_time = malloc(G * sizeof *next_time);
  double *events = malloc(G * sizeof *events);
  bool *has_next = malloc(G * sizeof *has_next);
  lazy_sums z = {.at_risk = calloc(G, sizeof(double)), .q_mark = calloc(G * G, sizeof(double))};
  md_status status = MD_OK;
  if (!row || !next_time || !events || !has_next || !z.at_risk || !z.q_mark) {
    status = md_fail(err, MD_E_NOMEM, "log-rank test: out of memory");
  } else {
    for (size_t k = 0; k < G; k++) {
      md_risk_sweep_reset(&sweeps[k]);
      row[k] = sweeps[k].table->n;
      has_next[k] = previous_event_time(sweeps[k].table, &row[k], &next_time[k]);
    }
    for (;;) {
      double t = -INFINITY;
      for (size_t k = 0; k < G; k++)
        if (has_next[k] && next_time[k] > t) t = next_time[k];
      if (t == -INFINITY) break;
      double n = 0.0, d = 0.0;
      for (size_t k = 0; k < G; k++) {
        double a = md_risk_sweep_to(&sweeps[k], t, &events[k], NULL);
        if (a != z.at_risk[k]) {
          charge_group(&z, r, k);
          z.at_risk[k] = a;
        }
        n += a;
        d += events[k];
        r->observed[k] += events[k];
        if (has_next[k] && next_time[k] == t)
          has_next[k] = previous_event_time(sweeps[k].table, &row[k], &next_time[k]);
      }
      if (d <= 0.0) continue;
      for (size_t k = 0; k < G; k++) r->expected[k] += d * z.at_risk[k] / n;
      if (n > 1.0) /* one subject at risk: no variance */
        z.Q += d * (n - d) / (n * (n - 1.0)) / n;
    }
    for (size_t k = 0; k < G; k++) charge_group(&z, r, k);
    complete_variance(r);
  }
  free(row);
  free(next_time);
  free(events);
  free(has_next);
  free(z.at_risk);
  free(z.q_mark);
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

static md_status check_groups(const md_surv_table *groups, size_t n_groups, md_error *err) {
  if (!groups || n_groups < 2)
    return md_fail(err, MD_E_INVALID, "log-rank test: needs at least 2 groups, got %zu", n_groups);
  for (size_t k = 0; k < n_groups; k++)
    if (groups[k].n == 0) return md_fail(err, MD_E_INVALID, "log-rank test: group %zu is empty", k);
  return MD_OK;
}

/* The risk-set sweeps of all groups, prepared once (entries sorted). */
static md_status prepare_sweeps(const md_surv_table *groups, size_t n_groups,
                                md_risk_sweep **sweeps, md_error *err) {
  *sweeps = calloc(n_groups, sizeof **sweeps);
  if (!*sweeps) return md_fail(err, MD_E_NOMEM, "log-rank test: out of memory");
  for (size_t k = 0; k < n_groups; k++) {
    md_status status = md_risk_sweep_init(&groups[k], &(*sweeps)[k], err);
    if (status != MD_OK) return status;
  }
  return MD_OK;
}

static void free_sweeps(md_risk_sweep *sweeps, size_t n_groups) {
  for (size_t k = 0; sweeps && k < n_groups; k++) md_risk_sweep_free(&sweeps[k]);
  free(sweeps);
}

/* One test among the groups whose sweeps are given. */
static md_status run_test(md_risk_sweep *sweeps, size_t n_groups, md_logrank_result *result,
                          md_error *err) {
  memset(result, 0, sizeof *result);
  result->n_groups = n_groups;
  result->observed = calloc(n_groups, sizeof(double));
  result->expected = calloc(n_groups, sizeof(double));
  result->variance = calloc(n_groups * n_groups, sizeof(double));
  md_status status = MD_OK;
  if (!result->observed || !result->expected || !result->variance)
    status = md_fail(err, MD_E_NOMEM, "log-rank test: out of memory");
  /* Numbers at risk are multiplied together (a_j a_k, n (n - 1)): beyond
   * this total their products overflow and the statistic would be NaN. */
  double weight = 0.0; /* md_surv_table_totals' weights, summed once per sweep */
  for (size_t k = 0; k < n_groups; k++) weight += sweeps[k].total_weight;
  if (status == MD_OK && !(weight <= MD_SURV_MAX_TOTAL_WEIGHT)) {
    not_estimable(result, NAN, "the weights sum to more than 1e150: the variance would overflow");
    return MD_OK;
  }
  if (status == MD_OK) status = sweep_groups(sweeps, result, err);
  if (status == MD_OK) status = chi_square(result, err);
  if (status != MD_OK) md_logrank_result_free(result);
  return status;
}

md_status md_logrank(const md_surv_table *groups, size_t n_groups, md_logrank_result *result,
                     md_error *err) {
  if (!result) return md_fail(err, MD_E_INVALID, "log-rank test: no result to fill");
  memset(result, 0, sizeof *result);
  md_status status = check_groups(groups, n_groups, err);
  if (status != MD_OK) return status;
  md_risk_sweep *sweeps = NULL;
  status = prepare_sweeps(groups, n_groups, &sweeps, err);
  if (status == MD_OK) status = run_test(sweeps, n_groups, result, err);
  free_sweeps(sweeps, n_groups);
  return status;
}

static void set_pair(double *matrix, size_t n_groups, size_t i, size_t j, double value) {
  if (!matrix) return;
  matrix[i * n_groups + j] = matrix[j * n_groups + i] = value;
}

md_status md_logrank_pairwise(const md_surv_table *groups, size_t n_groups, double *chisq,
                              double *p_value, md_error *err) {
  md_status status = check_groups(groups, n_groups, err);
  if (status != MD_OK) return status;
  md_risk_sweep *sweeps = NULL;
  status = prepare_sweeps(groups, n_groups, &sweeps, err);
  for (size_t i = 0; status == MD_OK && i < n_groups; i++) {
    set_pair(chisq, n_groups, i, i, NAN);
    set_pair(p_value, n_groups, i, i, NAN);
    for (size_t j = i + 1; status == MD_OK && j < n_groups; j++) {
      md_risk_sweep pair[2] = {sweeps[i], sweeps[j]};
      md_logrank_result result;
      status = run_test(pair, 2, &result, err);
      if (status != MD_OK) break;
      set_pair(chisq, n_groups, i, j, result.estimable ? result.chisq : NAN);
      set_pair(p_value, n_groups, i, j, result.estimable ? result.p_value : NAN);
      md_logrank_result_free(&result);
    }
  }
  free_sweeps(sweeps, n_groups);
  return status;
}
