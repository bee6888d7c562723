/* fit/attention_norm: EWMA, base priorities, kappa, alpha and mean relative
 * attention on hand-made token series (expected values derived by hand next
 * to each check; type-7 quantiles as R's quantile(x, q, type = 7) defines
 * them), the exact two-pass quantile against a full sort, and bad input. */
#include <gsl/gsl_rng.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_sort_double.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fit/extract/attention_norm.h"
#include "fit/regions/region_fits.h"
#include "tests/test_util.h"

static const char *const names[] = {"system", "user", "tool_out", "retrieval", "tool_in"};
static const bool pinned[] = {true, false, false, false, false};
static const md_region_table regions = {5, names, pinned};
enum { SYSTEM, USER, TOOL_OUT, RETRIEVAL, TOOL_IN };

static md_attn_norm *make(double beta, double q, size_t memory) {
  md_attn_norm_params params = {.ewma_beta = beta, .quantile = q, .memory_bytes = memory};
  md_attn_norm *acc = NULL;
  md_error err = {0};
  CHECK_MSG(md_attn_norm_new(&regions, &params, &acc, &err) == MD_OK, "%s", err.message);
  return acc;
}

static void add(md_attn_norm *acc, size_t region, const double *x, size_t n, bool observed,
                bool refreshed) {
  md_error err = {0};
  CHECK_MSG(md_attn_norm_add_token(acc, region, x, n, observed, refreshed, &err) == MD_OK, "%s",
            err.message);
}

static void finish(md_attn_norm *acc, md_attn_norm_result *res) {
  md_error err = {0};
  bool again = true;
  CHECK_MSG(md_attn_norm_end_pass(acc, &again, &err) == MD_OK && !again, "%s", err.message);
  CHECK_MSG(md_attn_norm_finish(acc, res, &err) == MD_OK, "%s", err.message);
}

static void test_ewma(void) {
  /* beta 0.5: e0 = 0.5 * 1 = 0.5; e1 = 0.5 * 0.5 + 0 = 0.25;
   * e2 = 0.5 * 0.25 + 0.5 * 2 = 1.125 */
  const double x[] = {1, 0, 2};
  double e[3];
  md_ewma(x, 3, 0.5, e);
  CHECK(e[0] == 0.5 && e[1] == 0.25 && e[2] == 1.125);
  /* beta 0: the series itself */
  md_ewma(x, 3, 0.0, e);
  CHECK(e[0] == 1 && e[1] == 0 && e[2] == 2);
}

/* With beta = 0 the EWMA values are the series: kappa is a plain quantile. */
static void test_kappa_small(void) {
  const double a[] = {1, 2, 3, 4}, b[] = {5}, sys[] = {100};
  const struct { double q, kappa; } cases[] = {
      {0.5, 3.0},   /* h = 4 * 0.5 = 2: x[2] = 3 */
      {0.95, 4.8},  /* h = 3.8: 0.2 * 4 + 0.8 * 5 (R: quantile(1:5, 0.95) = 4.8) */
      {0.1, 1.4},   /* h = 0.4: 0.6 * 1 + 0.4 * 2 */
  };
  for (size_t c = 0; c < 3; c++) {
    for (size_t memory = 0; memory <= MD_ATTN_NORM_DEFAULT_MEMORY;
         memory += MD_ATTN_NORM_DEFAULT_MEMORY) {
      md_attn_norm *acc = make(0.0, cases[c].q, memory);
      add(acc, USER, a, 4, true, true);
      add(acc, TOOL_OUT, b, 1, true, false);
      add(acc, SYSTEM, sys, 1, true, true);  /* pinned: not in kappa */
      md_error err = {0};
      bool again = false;
      CHECK(md_attn_norm_end_pass(acc, &again, &err) == MD_OK);
      CHECK(again == (memory == 0));
      if (again) {
        add(acc, TOOL_OUT, b, 1, true, false);  /* any order */
        add(acc, SYSTEM, sys, 1, true, true);
        add(acc, USER, a, 4, true, true);
        CHECK(md_attn_norm_end_pass(acc, &again, &err) == MD_OK && !again);
      }
      md_attn_norm_result res;
      CHECK(md_attn_norm_finish(acc, &res, &err) == MD_OK);
      CHECK(res.kappa_status == MD_KAPPA_OK && res.kappa_samples == 5);
      CHECK_REL(res.kappa, cases[c].kappa, 1e-15);
      CHECK(res.passes == (memory == 0 ? 2 : 1));
      md_attn_norm_result_free(&res);
      md_attn_norm_free(acc);
    }
  }
}

/* beta = 0.5: series {2, 2} gives e = {1, 1.5}, series {4} gives {2}; the
 * values {1, 1.5, 2} at q = 0.75: h = 1.5, 0.5 * 1.5 + 0.5 * 2 = 1.75. */
static void test_kappa_ewma(void) {
  md_attn_norm *acc = make(0.5, 0.75, 0);
  const double a[] = {2, 2}, b[] = {4};
  add(acc, USER, a, 2, true, true);
  add(acc, RETRIEVAL, b, 1, true, true);
  md_error err = {0};
  bool again = false;
  CHECK(md_attn_norm_end_pass(acc, &again, &err) == MD_OK && again);
  add(acc, USER, a, 2, true, true);
  add(acc, RETRIEVAL, b, 1, true, true);
  md_attn_norm_result res;
  finish(acc, &res);
  CHECK_REL(res.kappa, 1.75, 1e-15);
  md_attn_norm_result_free(&res);
  md_attn_norm_free(acc);
}

/* Order statistics j and j+1 far apart: {1, 1000}, q = 0.5: h = 0.5,
 * 0.5 * 1 + 0.5 * 1000 = 500.5; and ties: {3, 3, 3, 3} gives 3. */
static void test_kappa_bracket_edges(void) {
  for (size_t memory = 0; memory <= 4096; memory += 4096) {
    md_attn_norm *acc = make(0.0, 0.5, memory);
    const double x[] = {1000, 1};
    add(acc, USER, x, 2, true, true);
    md_error err = {0};
    bool again = false;
    CHECK(md_attn_norm_end_pass(acc, &again, &err) == MD_OK);
    CHECK(again == (memory == 0));
    if (again) {
      add(acc, USER, x, 2, true, true);
      CHECK(md_attn_norm_end_pass(acc, &again, &err) == MD_OK && !again);
    }
    md_attn_norm_result res;
    CHECK(md_attn_norm_finish(acc, &res, &err) == MD_OK);
    CHECK_REL(res.kappa, 500.5, 1e-15);
    md_attn_norm_result_free(&res);
    md_attn_norm_free(acc);
  }
  md_attn_norm *acc = make(0.0, 0.3, MD_ATTN_NORM_DEFAULT_MEMORY);
  const double ties[] = {3, 3, 3, 3};
  add(acc, USER, ties, 4, true, true);
  md_attn_norm_result res;
  finish(acc, &res);
  CHECK(res.kappa == 3.0);
  md_attn_norm_result_free(&res);
  md_attn_norm_free(acc);
}

/* Many values, several tokens, a memory limit crossed midway: the two-pass
 * selection equals GSL's quantile of the fully sorted EWMA values. */
static void test_kappa_against_full_sort(void) {
  gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
  enum { TOKENS = 2000, AGES = 100 };
  double *series = malloc(TOKENS * AGES * sizeof *series);
  double *all = malloc(TOKENS * AGES * sizeof *all);
  for (size_t k = 0; k < TOKENS * AGES; k++)
    series[k] = gsl_rng_uniform(rng) < 0.1 ? 0.0 : gsl_ran_lognormal(rng, -1.0, 1.5);
  for (size_t t = 0; t < TOKENS; t++) md_ewma(series + t * AGES, AGES, 0.9, all + t * AGES);
  gsl_sort(all, 1, TOKENS * AGES);
  const double qs[] = {0.95, 0.5, 0.999, 0.01};
  const size_t memories[] = {MD_ATTN_NORM_DEFAULT_MEMORY, 100000 * sizeof(double)};
  for (size_t c = 0; c < 4; c++) {
    double want = gsl_stats_quantile_from_sorted_data(all, 1, TOKENS * AGES, qs[c]);
    for (size_t m = 0; m < 2; m++) {
      md_attn_norm *acc = make(0.9, qs[c], memories[m]);
      md_error err = {0};
      bool again = false;
      for (int pass = 0; pass < 2; pass++) {
        for (size_t t = 0; t < TOKENS; t++)
          add(acc, 1 + t % 3, series + t * AGES, AGES, true, true);
        CHECK(md_attn_norm_end_pass(acc, &again, &err) == MD_OK);
        CHECK(again == (pass == 0 && m == 1));
        if (!again) break;
      }
      md_attn_norm_result res;
      CHECK(md_attn_norm_finish(acc, &res, &err) == MD_OK);
      CHECK_MSG(res.kappa == want, "q %g memory %zu: kappa %.17g, full sort %.17g", qs[c],
                memories[m], res.kappa, want);
      md_attn_norm_result_free(&res);
      md_attn_norm_free(acc);
    }
  }
  free(series);
  free(all);
  gsl_rng_free(rng);
}

static void test_base_priorities_and_alpha(void) {
  md_attn_norm *acc = make(0.9, 0.95, MD_ATTN_NORM_DEFAULT_MEMORY);
  const double x[] = {1, 3, 2}, y[] = {3};
  /* system (pinned): 2 observed, 1 refreshed: share 1/2, base priority 1 */
  add(acc, SYSTEM, x, 3, true, true);
  add(acc, SYSTEM, x, 3, true, false);
  /* user: 4 observed, 3 refreshed, plus an unobserved token: 3/4 */
  for (int k = 0; k < 3; k++) add(acc, USER, x, 3, true, true);
  add(acc, USER, y, 1, true, false);
  add(acc, USER, y, 1, false, true);  /* unobserved: counts in neither */
  /* tool_out: 2 observed, none refreshed: 0 */
  add(acc, TOOL_OUT, x, 3, true, false);
  add(acc, TOOL_OUT, y, 1, true, false);
  /* retrieval: 5 observed, all refreshed: 1; tool_in: no token */
  for (int k = 0; k < 5; k++) add(acc, RETRIEVAL, y, 1, true, true);
  md_attn_norm_result res;
  finish(acc, &res);
  const md_region_attn_stats *s = res.regions;
  CHECK(s[SYSTEM].refreshed_share == 0.5 && s[SYSTEM].base_priority == 1.0);
  CHECK(s[USER].tokens == 5 && s[USER].observed_tokens == 4 && s[USER].refreshed_tokens == 3);
  CHECK(s[USER].refreshed_share == 0.75 && s[USER].base_priority == 0.75);
  CHECK(s[TOOL_OUT].share_defined && s[TOOL_OUT].refreshed_share == 0.0);
  CHECK(s[RETRIEVAL].refreshed_share == 1.0);
  CHECK(!s[TOOL_IN].share_defined && s[TOOL_IN].tokens == 0 && s[TOOL_IN].base_priority == 0.0);
  CHECK(s[TOOL_IN].curve_length == 0 && s[TOOL_IN].mean_relative_attention == 0.0);
  /* alpha: median of the unpinned defined shares {0.75, 0, 1} = 0.75 */
  CHECK(res.alpha_defined && res.alpha_regions == 3 && res.alpha == 0.75);
  /* user's a_hat: three tokens {1, 3, 2} and two {3}: ages 0: (1+1+1+3+3)/5
   * = 1.8 over 5 pairs; 1: 3 over 3; 2: 2 over 3; overall (3*6 + 6)/11 */
  CHECK(s[USER].curve_length == 3 && s[USER].visible_pairs == 11);
  CHECK(s[USER].curve_pairs[0] == 5 && s[USER].curve_pairs[1] == 3 && s[USER].curve_pairs[2] == 3);
  CHECK_REL(s[USER].curve_mean[0], 1.8, 1e-15);
  CHECK(s[USER].curve_mean[1] == 3.0 && s[USER].curve_mean[2] == 2.0);
  CHECK_REL(s[USER].mean_relative_attention, 24.0 / 11, 1e-15);
  CHECK(!strcmp(s[RETRIEVAL].name, "retrieval") && s[SYSTEM].pinned && !s[USER].pinned);
  md_attn_norm_result_free(&res);
  md_attn_norm_free(acc);
}

static void test_median_and_alpha(void) {
  double odd[] = {0.9, 0.1, 0.5}, even[] = {0.9, 0.1, 0.5, 0.3}, m = 0;
  md_error err = {0};
  CHECK(md_regions_alpha(odd, 3, &m, &err) == MD_OK && m == 0.5);
  CHECK(md_regions_alpha(even, 4, &m, &err) == MD_OK && m == 0.4);  /* (0.3 + 0.5) / 2 */
  double priors[] = {0.2, 0.8};
  CHECK(md_regions_alpha(priors, 2, &m, &err) == MD_OK && m == 0.5);
  CHECK(md_regions_alpha(priors, 0, &m, &err) == MD_E_INVALID && strstr(err.message, "alpha"));
}

/* Only pinned tokens: kappa and alpha undefined, reported as 0 with a flag. */
static void test_no_unpinned(void) {
  md_attn_norm *acc = make(0.9, 0.95, MD_ATTN_NORM_DEFAULT_MEMORY);
  const double x[] = {2, 2};
  add(acc, SYSTEM, x, 2, true, true);
  md_attn_norm_result res;
  finish(acc, &res);
  CHECK(res.kappa_status == MD_KAPPA_NO_DATA && res.kappa == 0.0 && res.kappa_samples == 0);
  CHECK(!res.alpha_defined && res.alpha == 0.0 && res.alpha_regions == 0);
  CHECK(strstr(md_kappa_status_message(res.kappa_status), "no unpinned token"));
  CHECK(!strcmp(md_kappa_status_message(MD_KAPPA_OK), ""));
  md_attn_norm_result_free(&res);
  md_attn_norm_free(acc);
}

/* Unpinned tokens that receive no attention: the quantile is 0. */
static void test_zero_kappa(void) {
  md_attn_norm *acc = make(0.9, 0.95, MD_ATTN_NORM_DEFAULT_MEMORY);
  const double zeros[] = {0, 0, 0};
  add(acc, USER, zeros, 3, true, false);
  md_attn_norm_result res;
  finish(acc, &res);
  CHECK(res.kappa_status == MD_KAPPA_ZERO && res.kappa == 0.0 && res.kappa_samples == 3);
  CHECK(strstr(md_kappa_status_message(res.kappa_status), "is 0"));
  CHECK(res.alpha_defined && res.alpha == 0.0);
  md_attn_norm_result_free(&res);
  md_attn_norm_free(acc);
}

static void expect_params_error(double beta, double q, const char *text) {
  md_attn_norm_params params = {.ewma_beta = beta, .quantile = q, .memory_bytes = 0};
  md_attn_norm *acc = (md_attn_norm *)&params;  /* must be reset to NULL */
  md_error err = {0};
  CHECK(md_attn_norm_new(&regions, &params, &acc, &err) == MD_E_INVALID && acc == NULL);
  CHECK_MSG(strstr(err.message, text), "\"%s\" lacks \"%s\"", err.message, text);
}

static void test_bad_input(void) {
  expect_params_error(1.0, 0.95, "ewma_beta = 1: must lie in [0, 1)");
  expect_params_error(-0.1, 0.95, "ewma_beta = -0.1");
  expect_params_error(NAN, 0.95, "ewma_beta = nan");
  expect_params_error(0.9, 0.0, "kappa quantile = 0: must lie in (0, 1)");
  expect_params_error(0.9, 1.0, "kappa quantile = 1");
  expect_params_error(0.9, NAN, "kappa quantile = nan");

  md_attn_norm_params params = MD_ATTN_NORM_PARAMS_DEFAULT;
  md_region_table empty = {0, names, pinned};
  md_attn_norm *acc = NULL;
  md_error err = {0};
  CHECK(md_attn_norm_new(&empty, &params, &acc, &err) == MD_E_INVALID &&
        strstr(err.message, "region table is empty"));

  acc = make(0.9, 0.95, 0);
  const double x[] = {1, 2}, bad[] = {1, NAN}, negative[] = {-1};
  CHECK(md_attn_norm_add_token(acc, 5, x, 2, true, true, &err) == MD_E_INVALID &&
        strstr(err.message, "region index 5 of 5"));
  CHECK(md_attn_norm_add_token(acc, USER, x, 0, true, true, &err) == MD_E_INVALID &&
        strstr(err.message, "no visible step"));
  CHECK(md_attn_norm_add_token(acc, USER, bad, 2, true, true, &err) == MD_E_INVALID &&
        strstr(err.message, "relative attention nan at age 1"));
  CHECK(md_attn_norm_add_token(acc, USER, negative, 1, true, true, &err) == MD_E_INVALID);
  add(acc, USER, x, 2, true, true);
  md_attn_norm_result res;
  CHECK(md_attn_norm_finish(acc, &res, &err) == MD_E_INVALID &&
        strstr(err.message, "first pass is not ended"));
  bool again = false;
  CHECK(md_attn_norm_end_pass(acc, &again, &err) == MD_OK && again);
  CHECK(md_attn_norm_finish(acc, &res, &err) == MD_E_INVALID &&
        strstr(err.message, "needs the second pass"));
  /* a second pass over other data is refused */
  const double other[] = {1, 2, 3};
  add(acc, USER, other, 3, true, true);
  CHECK(md_attn_norm_end_pass(acc, &again, &err) == MD_E_INVALID &&
        strstr(err.message, "feed the same tokens in both passes"));
  md_attn_norm_free(acc);

  acc = make(0.9, 0.95, MD_ATTN_NORM_DEFAULT_MEMORY);
  add(acc, USER, x, 2, true, true);
  CHECK(md_attn_norm_end_pass(acc, &again, &err) == MD_OK && !again);
  CHECK(md_attn_norm_end_pass(acc, &again, &err) == MD_E_INVALID);
  CHECK(md_attn_norm_add_token(acc, USER, x, 2, true, true, &err) == MD_E_INVALID &&
        strstr(err.message, "after the last pass"));
  md_attn_norm_free(acc);
}

int main(void) {
  test_ewma();
  test_kappa_small();
  test_kappa_ewma();
  test_kappa_bracket_edges();
  test_kappa_against_full_sort();
  test_base_priorities_and_alpha();
  test_median_and_alpha();
  test_no_unpinned();
  test_zero_kappa();
  test_bad_input();
  return md_test_finish("extract_attention_norm");
}
