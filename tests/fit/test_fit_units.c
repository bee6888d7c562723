/* Unit tests of fit/: input validation, the compressed table (both of its
 * paths), argument errors, and small cases derived by hand in the comments.
 * The numbers R gives for the fixtures are checked in test_fit_reference.c. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "survival/exponential.h"
#include "survival/km.h"
#include "survival/logrank.h"
#include "survival/surv_data.h"
#include "survival/weibull.h"
#include "survival/window_check.h"
#include "tests/test_rng.h"
#include "tests/test_util.h"

/* ---- invalid rows ------------------------------------------------------- */

/* Five good rows, then row `bad` replaced by the given values. */
static void expect_invalid_row(size_t bad, double time, double entry, uint8_t event,
                               double weight, const char *message_part) {
  double times[5] = {3, 4, 5, 6, 7}, entries[5] = {0, 1, 0, 2, 0}, weights[5] = {1, 2, 1, 1, 3};
  uint8_t events[5] = {1, 0, 1, 1, 0};
  times[bad] = time;
  entries[bad] = entry;
  events[bad] = event;
  weights[bad] = weight;
  md_surv_data data = {5, times, events, entries, weights};
  md_surv_table table;
  md_error err = {0};
  md_status status = md_surv_table_build(&data, &table, &err);
  char row_text[32];
  snprintf(row_text, sizeof row_text, "row %zu", bad);
  CHECK_MSG(status == MD_E_INVALID, "time %g entry %g event %u weight %g: status %d", time, entry,
            event, weight, status);
  CHECK_MSG(table.invalid_row == bad, "invalid_row %zu, expected %zu", table.invalid_row, bad);
  CHECK_MSG(strstr(err.message, row_text) && strstr(err.message, message_part), "message: %s",
            err.message);
  CHECK(table.n == 0 && !table.time && !table.event && !table.entry && !table.weight);
  md_surv_table_free(&table);
}

static void test_invalid_rows(void) {
  expect_invalid_row(2, -1.0, 0.0, 1, 1.0, "greater than entry");    /* negative time */
  expect_invalid_row(3, 2.0, 2.0, 1, 1.0, "greater than entry");     /* entry == time */
  expect_invalid_row(1, 2.0, 3.0, 0, 1.0, "greater than entry");     /* entry > time */
  expect_invalid_row(0, 2.0, -0.5, 1, 1.0, "entry");                 /* negative entry */
  expect_invalid_row(4, 5.0, 0.0, 1, 0.0, "weight");                 /* zero weight */
  expect_invalid_row(4, 5.0, 0.0, 1, -2.0, "weight");                /* negative weight */
  expect_invalid_row(2, NAN, 0.0, 1, 1.0, "time");                   /* NaN time */
  expect_invalid_row(2, INFINITY, 0.0, 1, 1.0, "time");              /* infinite time */
  expect_invalid_row(1, 5.0, NAN, 1, 1.0, "entry");                  /* NaN entry */
  expect_invalid_row(3, 5.0, 0.0, 1, NAN, "weight");                 /* NaN weight */
  expect_invalid_row(3, 5.0, 0.0, 1, INFINITY, "weight");            /* infinite weight */
  expect_invalid_row(0, 5.0, 0.0, 2, 1.0, "event");                  /* event not 0/1 */
}

static void test_invalid_arguments(void) {
  md_surv_table table;
  md_error err = {0};
  double time[1] = {1};
  uint8_t event[1] = {1};
  md_surv_data empty = {0, time, event, NULL, NULL};
  CHECK(md_surv_table_build(&empty, &table, &err) == MD_E_INVALID);
  CHECK(strstr(err.message, "no rows") != NULL);
  md_surv_data no_time = {1, NULL, event, NULL, NULL};
  CHECK(md_surv_table_build(&no_time, &table, &err) == MD_E_INVALID);
  CHECK(md_surv_table_build(NULL, &table, &err) == MD_E_INVALID);
  md_surv_table_free(&table);
  md_surv_table_free(NULL);
}

/* A bad row far into data with mostly distinct times, where the table is
 * built by sorting rather than hashing. */
static void test_invalid_row_sort_path(void) {
  size_t n = 150000;
  double *time = malloc(n * sizeof *time);
  uint8_t *event = calloc(n, 1);
  for (size_t i = 0; i < n; i++) time[i] = 1.0 + (double)i * 0.001;
  time[n - 2] = -3.0;
  md_surv_data data = {n, time, event, NULL, NULL};
  md_surv_table table;
  md_error err = {0};
  CHECK(md_surv_table_build(&data, &table, &err) == MD_E_INVALID);
  CHECK(table.invalid_row == n - 2);
  free(time);
  free(event);
}

/* ---- the compressed table ---------------------------------------------- */

/* By hand: rows (entry, time, event, weight)
 *   (0,5,1,1) (0,3,0,2) (0,5,1,0.5) (2,5,1,1) (-0,3,0,1) (0,5,0,1)
 * merge to, sorted by time, events first, then entry:
 *   (0,3,0,3) (0,5,1,1.5) (2,5,1,1) (0,5,0,1)
 * totals: weight 6.5, events 2.5, exposure 5+6+2.5+3+3+5 = 24.5, one
 * distinct event time (5). */
static void test_table_by_hand(void) {
  double entry[6] = {0, 0, 0, 2, -0.0, 0}, time[6] = {5, 3, 5, 5, 3, 5};
  double weight[6] = {1, 2, 0.5, 1, 1, 1};
  uint8_t event[6] = {1, 0, 1, 1, 0, 0};
  md_surv_data data = {6, time, event, entry, weight};
  md_surv_table t;
  md_error err = {0};
  CHECK(md_surv_table_build(&data, &t, &err) == MD_OK);
  double want_time[4] = {3, 5, 5, 5}, want_entry[4] = {0, 0, 2, 0}, want_weight[4] = {3, 1.5, 1, 1};
  uint8_t want_event[4] = {0, 1, 1, 0};
  CHECK(t.n == 4 && t.n_input == 6 && t.has_entry && t.invalid_row == SIZE_MAX);
  for (size_t i = 0; i < 4 && t.n == 4; i++) {
    CHECK(t.time[i] == want_time[i] && t.entry[i] == want_entry[i]);
    CHECK(t.event[i] == want_event[i] && t.weight[i] == want_weight[i]);
    CHECK(!signbit(t.entry[i]));
  }
  md_surv_totals totals;
  md_surv_table_totals(&t, &totals);
  CHECK(totals.rows == 6 && totals.weight == 6.5 && totals.events == 2.5);
  CHECK(totals.exposure == 24.5 && totals.distinct_event_times == 1);
  md_surv_table_free(&t);
}

/* A simple permutation of 0..n-1 (n prime to the multiplier). */
static size_t scatter(size_t i, size_t n) { return (i * 7919) % n; }

static void check_sorted_and_merged(const md_surv_table *t) {
  int ordered = 1;
  for (size_t i = 1; i < t->n; i++) {
    const double a[3] = {t->time[i - 1], -(double)t->event[i - 1], t->entry[i - 1]};
    const double b[3] = {t->time[i], -(double)t->event[i], t->entry[i]};
    int cmp = a[0] != b[0] ? (a[0] < b[0] ? -1 : 1)
              : a[1] != b[1] ? (a[1] < b[1] ? -1 : 1)
              : a[2] != b[2] ? (a[2] < b[2] ? -1 : 1)
                             : 0;
    if (cmp >= 0) ordered = 0;
  }
  CHECK_MSG(ordered, "table not strictly sorted by (time, events first, entry)");
}

/* Builds the table of `data`, whose rows are `keys` distinct keys each
 * twice (weights 1 and 2), and checks it: one sorted row per key, weight 3. */
static void check_keys_merged(const md_surv_data *data, size_t keys) {
  md_surv_table t;
  md_error err = {0};
  CHECK(md_surv_table_build(data, &t, &err) == MD_OK);
  CHECK_MSG(t.n == keys && t.n_input == data->n, "%zu rows of %zu, expected %zu of %zu", t.n,
            t.n_input, keys, data->n);
  int weights_ok = 1;
  for (size_t i = 0; i < t.n; i++) weights_ok &= t.weight[i] == 3.0;
  CHECK(weights_ok);
  check_sorted_and_merged(&t);
  md_surv_table_free(&t);
}

/* Mostly distinct arbitrary doubles (the sort path): 120000 keys, each
 * twice with weights 1 and 2 in scattered order, must merge to 120000 rows
 * of weight 3. */
static void test_table_sort_path(void) {
  size_t keys = 120000, n = 2 * keys;
  double *time = malloc(n * sizeof *time), *entry = malloc(n * sizeof *entry);
  double *weight = malloc(n * sizeof *weight);
  uint8_t *event = malloc(n);
  for (size_t i = 0; i < n; i++) {
    size_t k = scatter(i % keys, keys);
    time[i] = 0.5 + (double)(k / 3) * 0.731 + 1e-7 * (double)(k % 3);
    entry[i] = (k % 5 == 0) ? 0.25 : 0.0;
    event[i] = (uint8_t)(k % 2);
    weight[i] = i < keys ? 1.0 : 2.0;
  }
  md_surv_data data = {n, time, event, entry, weight};
  check_keys_merged(&data, keys);
  free(time);
  free(entry);
  free(weight);
  free(event);
}

/* Real-valued times in a table long enough for the hash to give up after
 * its first 65,536 rows (all distinct here) and sort instead: 150,000 keys,
 * each twice (weights 1, then 2), must merge to 150,000 rows of weight 3;
 * a bad row after the switch is still reported by its index. */
static void test_table_probe_switch(void) {
  size_t keys = 150000, n = 2 * keys;
  double *time = malloc(n * sizeof *time), *weight = malloc(n * sizeof *weight);
  uint8_t *event = malloc(n);
  for (size_t i = 0; i < n; i++) {
    size_t k = i % keys;
    time[i] = 1.0 + (double)k * 0.613;
    event[i] = (uint8_t)(k % 3 == 0);
    weight[i] = i < keys ? 1.0 : 2.0;
  }
  md_surv_data data = {n, time, event, NULL, weight};
  check_keys_merged(&data, keys);
  md_surv_table t;
  md_error err = {0};
  time[200000] = NAN;
  CHECK(md_surv_table_build(&data, &t, &err) == MD_E_INVALID);
  CHECK_MSG(t.invalid_row == 200000, "invalid row %zu, expected 200000", t.invalid_row);
  free(time);
  free(weight);
  free(event);
}

/* Integer times (the hash path): a million rows over 200 times and both
 * event values merge to at most 400 rows whose weights add up to 1e6. */
static void test_table_hash_path(void) {
  size_t n = 1000000;
  double *time = malloc(n * sizeof *time);
  uint8_t *event = malloc(n);
  for (size_t i = 0; i < n; i++) {
    time[i] = (double)(1 + scatter(i, n) % 200);
    event[i] = (uint8_t)(scatter(i, n) % 3 == 0);
  }
  md_surv_data data = {n, time, event, NULL, NULL};
  md_surv_table t;
  md_error err = {0};
  CHECK(md_surv_table_build(&data, &t, &err) == MD_OK);
  CHECK(t.n <= 400 && t.n >= 200 && !t.has_entry && t.n_input == n);
  md_surv_totals totals;
  md_surv_table_totals(&t, &totals);
  CHECK(totals.weight == (double)n);
  check_sorted_and_merged(&t);
  md_surv_table_free(&t);
  free(time);
  free(event);
}

/* ---- exponential --------------------------------------------------------- */

static md_surv_table table_of(size_t n, const double *time, const uint8_t *event,
                              const double *entry, const double *weight) {
  md_surv_data data = {n, time, event, entry, weight};
  md_surv_table t;
  md_error err = {0};
  if (md_surv_table_build(&data, &t, &err) != MD_OK) {
    fprintf(stderr, "table_of: %s\n", err.message);
    exit(1);
  }
  return t;
}

/* No events, exposure T = 2 + 3 + 5 = 10: the profile upper end solves
 * 2 lambda T = chi2_1(0.95) = 3.8414588206941236 (R: qchisq(0.95, 1)). */
static void test_exponential_no_events(void) {
  double time[3] = {2, 3, 5};
  uint8_t event[3] = {0, 0, 0};
  md_surv_table t = table_of(3, time, event, NULL, NULL);
  md_exponential_fit f;
  md_error err = {0};
  CHECK(md_fit_exponential(&t, 0.95, &f, &err) == MD_OK);
  CHECK(!f.estimable && f.reason != NULL && f.lambda == 0.0 && f.events == 0.0);
  CHECK(f.exposure == 10.0 && f.lambda_ci_profile[0] == 0.0);
  CHECK_REL(f.lambda_ci_profile[1], 3.8414588206941236 / 20.0, 1e-12);
  CHECK(isnan(f.log_lambda_se) && isnan(f.lambda_ci_wald[0]) && isnan(f.lambda_ci_wald[1]));
  CHECK(isnan(f.loglik) && isnan(f.aic));
  md_weibull_fit w;
  CHECK(md_fit_weibull(&t, &f, 0.95, &w, &err) == MD_OK);
  CHECK(!w.estimable && w.reason != NULL && isnan(w.shape) && isnan(w.lrt_p) && w.level == 0.95);
  md_surv_table_free(&t);
}

/* d = 4 events over T = 40: lambda = 0.1, se(log lambda) = 1/2,
 * Wald 0.95 interval 0.1 exp(-/+ 1.959963984540054 / 2), loglik
 * 4 log 0.1 - 4, and the profile ends satisfy
 * 2 (ll_max - ll) = 2 d (u - 1 - log u) = chi2_1(0.95), u = lambda / 0.1. */
static void test_exponential_by_hand(void) {
  double time[5] = {5, 10, 7, 12, 6};
  uint8_t event[5] = {1, 1, 0, 1, 1};
  md_surv_table t = table_of(5, time, event, NULL, NULL);
  md_exponential_fit f;
  md_error err = {0};
  CHECK(md_fit_exponential(&t, 0.95, &f, &err) == MD_OK);
  CHECK(f.estimable && f.reason == NULL);
  CHECK_REL(f.lambda, 0.1, 1e-15);
  CHECK_REL(f.log_lambda_se, 0.5, 1e-15);
  CHECK_REL(f.lambda_ci_wald[0], 0.1 * exp(-1.959963984540054 / 2), 1e-13);
  CHECK_REL(f.lambda_ci_wald[1], 0.1 * exp(1.959963984540054 / 2), 1e-13);
  CHECK_REL(f.loglik, 4 * log(0.1) - 4, 1e-14);
  CHECK_REL(f.aic, -2 * (4 * log(0.1) - 4) + 2, 1e-14);
  for (int end = 0; end < 2; end++) {
    double u = f.lambda_ci_profile[end] / 0.1;
    CHECK_REL(2 * 4 * (u - 1 - log(u)), 3.8414588206941236, 1e-10);
  }
  CHECK(f.lambda_ci_profile[0] < 0.1 && f.lambda_ci_profile[1] > 0.1);
  md_exponential_fit bad;
  CHECK(md_fit_exponential(&t, 1.0, &bad, &err) == MD_E_INVALID);
  CHECK(md_fit_exponential(&t, 0.0, &bad, &err) == MD_E_INVALID);
  CHECK(md_fit_exponential(&t, NAN, &bad, &err) == MD_E_INVALID);
  CHECK(md_fit_exponential(NULL, 0.95, &bad, &err) == MD_E_INVALID);
  md_surv_table_free(&t);
}

static void test_half_life(void) {
  CHECK_REL(md_half_life(M_LN2 / 10.0), 10.0, 1e-15);
  CHECK(isinf(md_half_life(0.0)) && md_half_life(0.0) > 0);
  CHECK(isnan(md_half_life(-1.0)) && isnan(md_half_life(NAN)));
  double ci[2];
  md_half_life_ci((double[]){0.0, M_LN2 / 4.0}, ci);
  CHECK_REL(ci[0], 4.0, 1e-15);
  CHECK(isinf(ci[1]));
}

/* ---- Weibull ------------------------------------------------------------- */

static void test_weibull_arguments(void) {
  double time[6] = {3, 8, 2, 15, 6, 9};
  uint8_t event[6] = {1, 1, 0, 1, 1, 0};
  md_surv_table t = table_of(6, time, event, NULL, NULL);
  md_exponential_fit e;
  md_weibull_fit given, own;
  md_error err = {0};
  CHECK(md_fit_exponential(&t, 0.9, &e, &err) == MD_OK);
  CHECK(md_fit_weibull(&t, &e, 0.9, &given, &err) == MD_OK);
  CHECK(md_fit_weibull(&t, NULL, 0.9, &own, &err) == MD_OK);
  CHECK(given.estimable && own.estimable && given.converged);
  CHECK(given.mu == own.mu && given.log_sigma == own.log_sigma && given.lrt_p == own.lrt_p);
  /* At the maximum the score vanishes; the information is symmetric. */
  CHECK(given.vcov[0][1] == given.vcov[1][0]);
  CHECK(given.shape_ci[0] < given.shape && given.shape < given.shape_ci[1]);
  CHECK(given.scale_ci[0] < given.scale && given.scale < given.scale_ci[1]);
  CHECK(md_fit_weibull(&t, &e, 1.5, &own, &err) == MD_E_INVALID);
  CHECK(md_fit_weibull(NULL, &e, 0.9, &own, &err) == MD_E_INVALID);
  md_surv_table_free(&t);
}

/* ---- Kaplan-Meier ---------------------------------------------------------- */

static void test_km_names(void) {
  md_km_band band;
  const md_km_band all[3] = {MD_KM_BAND_LOG, MD_KM_BAND_LOG_LOG, MD_KM_BAND_PLAIN};
  for (int i = 0; i < 3; i++) CHECK(md_km_band_parse(md_km_band_name(all[i]), &band) && band == all[i]);
  CHECK(!md_km_band_parse("loglog", &band) && !md_km_band_parse("", &band));
  CHECK(!md_km_band_parse(NULL, &band));
}

/* Four events at 1, 2, 3, 4: S = 0.75, 0.5, 0.25, 0. By quantile.survfit's
 * rules the 0.25 quantile sits on the flat stretch at exactly S = 0.75
 * after t = 1, so it is the midpoint (1 + 2) / 2 = 1.5; the median likewise
 * (2 + 3) / 2 = 2.5; the 0.9 quantile is the first time with S <= 0.1: 4. */
static void test_km_quantiles_by_hand(void) {
  double time[4] = {4, 2, 3, 1};
  uint8_t event[4] = {1, 1, 1, 1};
  md_surv_table t = table_of(4, time, event, NULL, NULL);
  md_km_curve c;
  md_error err = {0};
  CHECK(md_km_fit(&t, MD_KM_BAND_LOG, 0.95, &c, &err) == MD_OK);
  CHECK(c.n_times == 4 && c.surv[3] == 0.0 && isinf(c.std_err[3]));
  CHECK(isnan(c.lower[3]) && isnan(c.upper[3]));
  CHECK(c.median == 2.5);
  double q[3];
  CHECK(md_km_quantile(&c, 0.25, q, &err) == MD_OK && q[0] == 1.5);
  CHECK(md_km_quantile(&c, 0.9, q, &err) == MD_OK && q[0] == 4.0);
  CHECK(md_km_quantile(&c, 0.0, q, &err) == MD_E_INVALID);
  CHECK(md_km_quantile(&c, 1.0, q, &err) == MD_E_INVALID);
  md_km_curve bad;
  CHECK(md_km_fit(&t, (md_km_band)7, 0.95, &bad, &err) == MD_E_INVALID);
  CHECK(md_km_fit(&t, MD_KM_BAND_LOG, 2.0, &bad, &err) == MD_E_INVALID);
  md_km_curve_free(&bad);
  md_km_curve_free(&c);
  md_km_curve_free(&c); /* a freed curve is empty and may be freed again */
  md_surv_table_free(&t);
}

/* ---- log-rank ------------------------------------------------------------- */

/* Non-integer weights (no R reference: survdiff takes no weights), by hand.
 * A: (t=1, event, w=0.5), (t=3, censored, w=2.5)
 * B: (t=2, event, w=1.5), (t=4, event, w=1.0)
 * t=1: n_A = 3, n_B = 2.5, n = 5.5, d = 0.5 (A):
 *      E_A += 0.5*3/5.5 = 3/11, E_B += 2.5/11,
 *      V_AA += d(n-d)/(n(n-1)) n_A (1 - n_A/n) = (10/99)*3*(5/11) = 150/1089
 * t=2: n_A = 2.5, n_B = 2.5, n = 5, d = 1.5 (B):
 *      E_A += 0.75, E_B += 0.75, V_AA += (5.25/20)*2.5*0.5 = 21/64
 * t=4: n_A = 0, n_B = 1, n = 1, d = 1: E_B += 1; n <= 1: no variance.
 * O = (0.5, 2.5), E = (45/44, 87/44), V_AA = V_BB = -V_AB = 32469/69696,
 * chisq = (O_B - E_B)^2 / V_BB = (23/44)^2 * 69696/32469 = 19044/32469,
 * p = P(chi2_1 > chisq) = erfc(sqrt(chisq / 2)). */
static void test_logrank_fractional_weights(void) {
  double ta[2] = {1, 3}, wa[2] = {0.5, 2.5}, tb[2] = {2, 4}, wb[2] = {1.5, 1.0};
  uint8_t ea[2] = {1, 0}, eb[2] = {1, 1};
  md_surv_table groups[2] = {table_of(2, ta, ea, NULL, wa), table_of(2, tb, eb, NULL, wb)};
  md_logrank_result r;
  md_error err = {0};
  CHECK(md_logrank(groups, 2, &r, &err) == MD_OK);
  CHECK(r.n_groups == 2 && r.df == 1 && r.estimable && r.reason == NULL);
  CHECK(r.observed[0] == 0.5 && r.observed[1] == 2.5);
  CHECK_REL(r.expected[0], 45.0 / 44.0, 1e-14);
  CHECK_REL(r.expected[1], 87.0 / 44.0, 1e-14);
  CHECK_REL(r.variance[0], 32469.0 / 69696.0, 1e-14);
  CHECK_REL(r.variance[3], 32469.0 / 69696.0, 1e-14);
  CHECK_REL(r.variance[1], -32469.0 / 69696.0, 1e-14);
  CHECK_REL(r.variance[2], -32469.0 / 69696.0, 1e-14);
  CHECK_REL(r.chisq, 19044.0 / 32469.0, 1e-13);
  CHECK_REL(r.p_value, erfc(sqrt(19044.0 / 32469.0 / 2.0)), 1e-12);
  double chisq[4], p[4];
  CHECK(md_logrank_pairwise(groups, 2, chisq, p, &err) == MD_OK);
  CHECK(isnan(chisq[0]) && isnan(p[3]) && chisq[1] == r.chisq && chisq[2] == r.chisq);
  CHECK(p[1] == r.p_value && p[2] == r.p_value);
  CHECK(md_logrank_pairwise(groups, 2, NULL, NULL, &err) == MD_OK);
  md_logrank_result_free(&r);
  /* Argument errors. */
  CHECK(md_logrank(groups, 1, &r, &err) == MD_E_INVALID);
  md_surv_table empty = {0};
  md_surv_table with_empty[2] = {groups[0], empty};
  CHECK(md_logrank(with_empty, 2, &r, &err) == MD_E_INVALID);
  CHECK(md_logrank_pairwise(groups, 1, chisq, p, &err) == MD_E_INVALID);
  md_surv_table_free(&groups[0]);
  md_surv_table_free(&groups[1]);
}

/* Groups never at risk at an event time have E = 0; with fewer than two
 * groups left survdiff reports chisq 0 (df 0): not estimable here. */
static void test_logrank_not_estimable(void) {
  double ta[1] = {0.5}, tb[1] = {5};
  uint8_t ea[1] = {0}, eb[1] = {1};
  md_surv_table groups[2] = {table_of(1, ta, ea, NULL, NULL), table_of(1, tb, eb, NULL, NULL)};
  md_logrank_result r;
  md_error err = {0};
  CHECK(md_logrank(groups, 2, &r, &err) == MD_OK);
  CHECK(!r.estimable && r.reason != NULL && r.df == 0 && r.chisq == 0.0 && isnan(r.p_value));
  CHECK(r.expected[0] == 0.0 && r.expected[1] == 1.0);
  md_logrank_result_free(&r);
  md_surv_table_free(&groups[0]);
  md_surv_table_free(&groups[1]);
}

/* Finite rows whose sums overflow: each estimator gives a clear outcome
 * (not estimable, or MD_E_NUMERIC for the caller to turn into a warning)
 * and returns; the Weibull fit used to loop for ever on a NaN information. */
static void build(md_surv_table *t, size_t n, const double *times, const uint8_t *events,
                  const double *weights) {
  md_surv_data data = {n, times, events, NULL, weights};
  md_error err = {0};
  CHECK_MSG(md_surv_table_build(&data, t, &err) == MD_OK, "%s", err.message);
}

static void test_overflowing_sums(void) {
  double times[3] = {1e308, 4.9e-324, 1e308};
  uint8_t events[3] = {1, 1, 0};
  md_surv_table t;
  build(&t, 3, times, events, NULL);
  md_error err = {0};
  md_exponential_fit e;
  CHECK(md_fit_exponential(&t, 0.95, &e, &err) == MD_E_NUMERIC);
  CHECK_MSG(strstr(err.message, "overflows a double") != NULL, "%s", err.message);
  CHECK(!e.estimable && e.reason && isnan(e.lambda) && isnan(e.loglik));
  md_weibull_fit w;
  CHECK(md_fit_weibull(&t, NULL, 0.95, &w, &err) == MD_OK);
  CHECK(!w.estimable && w.reason && isnan(w.shape) && isnan(w.scale));
  /* An exponential fit handed in with a rate of 0 (what the overflowing
   * exposure used to give) starts Newton at mu = inf. */
  md_exponential_fit zero = {.estimable = true, .events = 2, .exposure = INFINITY, .lambda = 0,
                             .level = 0.95};
  CHECK(md_fit_weibull(&t, &zero, 0.95, &w, &err) == MD_OK);
  CHECK(!w.estimable && w.reason && isnan(w.shape));
  md_km_curve km;
  CHECK(md_km_fit(&t, MD_KM_BAND_LOG, 0.95, &km, &err) == MD_OK);
  md_km_curve_free(&km);
  md_surv_table_free(&t);

  /* Extreme but summable times: the fit ends, estimable or not, never NaN
   * when estimable. */
  double spread[4] = {1e300, 4.9e-324, 1e300, 5e-324};
  uint8_t spread_events[4] = {1, 1, 0, 1};
  build(&t, 4, spread, spread_events, NULL);
  CHECK(md_fit_weibull(&t, NULL, 0.95, &w, &err) == MD_OK);
  CHECK(!w.estimable || (isfinite(w.shape) && isfinite(w.scale)));
  md_surv_table_free(&t);

  /* Weights whose sum squared overflows: KM and log-rank give up. */
  double wt[2] = {1, 2}, weights[2] = {1e200, 1e200};
  uint8_t both[2] = {1, 1};
  md_surv_table groups[2];
  build(&groups[0], 2, wt, both, weights);
  build(&groups[1], 2, wt, both, NULL);
  CHECK(md_km_fit(&groups[0], MD_KM_BAND_LOG, 0.95, &km, &err) == MD_E_NUMERIC);
  CHECK_MSG(strstr(err.message, "weights sum") != NULL, "%s", err.message);
  CHECK(km.n_times == 0);
  md_km_curve_free(&km);
  md_logrank_result r;
  CHECK(md_logrank(groups, 2, &r, &err) == MD_OK);
  CHECK(!r.estimable && r.reason && isnan(r.p_value));
  md_logrank_result_free(&r);
  double chisq[4], p_value[4];
  CHECK(md_logrank_pairwise(groups, 2, chisq, p_value, &err) == MD_OK);
  CHECK(isnan(chisq[1]) && isnan(p_value[1]));
  md_surv_table_free(&groups[0]);
  md_surv_table_free(&groups[1]);
}

/* ---- the observation-window check ------------------------------------------ */

static md_window_check window_check_of(size_t n, const double *time, const uint8_t *event,
                                       const double *entry, const double *weight) {
  md_surv_data data = {n, time, event, entry, weight};
  md_surv_table table;
  md_error err = {0};
  md_window_check check = {0};
  CHECK(md_surv_table_build(&data, &table, &err) == MD_OK);
  md_surv_totals totals;
  md_surv_table_totals(&table, &totals);
  CHECK_MSG(md_window_check_run(&table, &totals, &check, &err) == MD_OK, "%s", err.message);
  md_surv_table_free(&table);
  return check;
}

static void test_window_check_by_hand(void) {
  /* Lifetimes spread over the window: times 2, 4, 6, 8, all ended. W = 8;
   * d = 4, T = 20, half-life 5 ln 2. Cut at 4: 2 and 4 end, 6 and 8 are
   * censored at 4; d' = 2, T' = 2 + 4 + 4 + 4 = 14, half-life 7 ln 2; the
   * ratio 7/5 = 1.4 exceeds 1.25: window-bound. */
  double t1[] = {2, 4, 6, 8};
  uint8_t e1[] = {1, 1, 1, 1};
  md_window_check c = window_check_of(4, t1, e1, NULL, NULL);
  CHECK_CLOSE(c.window, 8, 0);
  CHECK_CLOSE(c.censored_share, 0, 0);
  CHECK_REL(c.half_life, 5 * log(2.0), 1e-15);
  CHECK_REL(c.half_life_cut, 7 * log(2.0), 1e-15);
  CHECK(!c.identified && c.reason && strcmp(c.reason, "window-bound") == 0);

  /* Mostly ended early: (1, ended) x4, (2, ended) x2, (3, ended) x1,
   * (4, censored) x1. W = 4, d = 7, T = 4 + 4 + 3 + 4 = 15. Cut at 2: the
   * six lifetimes of 1 and 2 end, the others are censored at 2; d' = 6,
   * T' = 4 + 4 + 2 + 2 = 12. Half-lives 15/7 ln 2 and 2 ln 2 (ratio 0.93);
   * censored share 1/8: identified. */
  double t2[] = {1, 2, 3, 4}, w2[] = {4, 2, 1, 1};
  uint8_t e2[] = {1, 1, 1, 0};
  c = window_check_of(4, t2, e2, NULL, w2);
  CHECK_REL(c.half_life, 15.0 / 7 * log(2.0), 1e-15);
  CHECK_REL(c.half_life_cut, 2 * log(2.0), 1e-15);
  CHECK_CLOSE(c.censored_share, 0.125, 1e-15);
  CHECK(c.identified && c.reason == NULL);

  /* Two of three tokens still in use at the end: mostly censored, whatever
   * the ratio. */
  double t3[] = {1, 5}, w3[] = {1, 2};
  uint8_t e3[] = {1, 0};
  c = window_check_of(2, t3, e3, NULL, w3);
  CHECK_CLOSE(c.censored_share, 2.0 / 3, 1e-15);
  CHECK(!c.identified && strcmp(c.reason, "mostly-censored") == 0);

  /* Nothing ends in the first half of the window: no half-life there. */
  double t4[] = {6, 8};
  uint8_t e4[] = {1, 1};
  c = window_check_of(2, t4, e4, NULL, NULL);
  CHECK(isnan(c.half_life_cut));
  CHECK(!c.identified && strcmp(c.reason, "no-events") == 0);

  /* Delayed entry: the row entering at 5 (after the cut at 4) is left out
   * of the cut fit; the row entering at 1 counts from 1. Rows (entry, time,
   * event): (0, 2, 1), (1, 3, 1), (5, 8, 1). Full: d = 3, T = 2 + 2 + 3 = 7.
   * Cut: d' = 2, T' = 2 + 2 = 4. */
  double t5[] = {2, 3, 8}, n5[] = {0, 1, 5};
  uint8_t e5[] = {1, 1, 1};
  c = window_check_of(3, t5, e5, n5, NULL);
  CHECK_REL(c.half_life, 7.0 / 3 * log(2.0), 1e-15);
  CHECK_REL(c.half_life_cut, 2 * log(2.0), 1e-15);
  CHECK(c.identified);

  md_error err = {0};
  CHECK(md_window_check_run(NULL, NULL, &c, &err) == MD_E_INVALID);
}

/* Simulated: a constant hazard with a half-life well inside the window is
 * identified; lifetimes uniform over the window (what a last-use estimand
 * gives when tokens are used until the window ends) are window-bound. */
static void test_window_check_simulated(void) {
  enum { N = 20000 };
  static double time[N];
  static uint8_t event[N];
  uint64_t state = 0x9e3779b97f4a7c15ull;
  const double window = 256, half_life = 20;
  for (size_t i = 0; i < N; i++) {
    double u = 1.0 - md_test_rng_uniform(&state, 0.0f, 1.0f); /* (0, 1] */
    double t = -log(u) * half_life / log(2.0);
    time[i] = t < window ? fmax(t, 1e-3) : window;
    event[i] = t < window;
  }
  md_window_check c = window_check_of(N, time, event, NULL, NULL);
  CHECK_MSG(c.identified, "exponential: %s %g %g", c.reason ? c.reason : "-", c.half_life,
            c.half_life_cut);
  CHECK_REL(c.half_life, half_life, 0.05);
  for (size_t i = 0; i < N; i++) {
    time[i] = 1 + (window - 1) * md_test_rng_uniform(&state, 0.0f, 1.0f);
    event[i] = 1;
  }
  c = window_check_of(N, time, event, NULL, NULL);
  CHECK_MSG(!c.identified && strcmp(c.reason, "window-bound") == 0, "uniform: %s",
            c.reason ? c.reason : "identified");
  CHECK_REL(c.half_life_cut / c.half_life, 1.5, 0.05);
  char text[256];
  md_window_check_describe(&c, text, sizeof text);
  CHECK_MSG(strstr(text, "follows the window"), "%s", text);
}

int main(void) {
  test_invalid_rows();
  test_invalid_arguments();
  test_invalid_row_sort_path();
  test_table_by_hand();
  test_table_sort_path();
  test_table_probe_switch();
  test_table_hash_path();
  test_exponential_no_events();
  test_exponential_by_hand();
  test_half_life();
  test_weibull_arguments();
  test_km_names();
  test_km_quantiles_by_hand();
  test_logrank_fractional_weights();
  test_logrank_not_estimable();
  test_overflowing_sums();
  test_window_check_by_hand();
  test_window_check_simulated();
  return md_test_finish("test_fit_units");
}
