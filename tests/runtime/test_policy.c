/* runtime/policy: the score formula on a tiny example worked out by hand,
 * each policy's choice on small hand examples (with, for the newer
 * baselines and the ablations, a deliberately wrong variant that the example
 * tells apart), the invariants (exactly the excess evicted unless only
 * unevictable pages remain, pinned and newest pages kept, nothing evicted
 * within budget) for every policy of the table at page sizes 1, 4 and 16,
 * determinism, argument refusals, and config loading (errors name the file
 * and the field; the shipped golden config loads). Every expected number is
 * derived in the comments from the inputs. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/formats/config.h"
#include "io/formats/eval_results.h"
#include "runtime/policy.h"
#include "runtime/policy_class.h"
#include "runtime/policy_table.h"
#include "tests/test_util.h"

static char *source_path(const char *relative) {
  const char *root = getenv("MD_SOURCE_ROOT");
  static char paths[4][1024];
  static int next = 0;
  char *path = paths[next++ % 4];
  snprintf(path, sizeof paths[0], "%s/%s", root ? root : ".", relative);
  return path;
}

static char *data_path(const char *name) {
  char relative[256];
  snprintf(relative, sizeof relative, "tests/runtime/data/%s", name);
  return source_path(relative);
}

/* The table's class `name` (runtime/policy_table.h). */
static const md_policy_class *policy_class(const char *name) {
  const md_policy_class *c = md_policy_find(name);
  CHECK_MSG(c != NULL, "no policy %s in the table", name);
  return c;
}

static md_policy *make_class(const md_policy_class *cls, const md_policy_config *config,
                             int page_size, uint64_t seed) {
  md_policy_options options = {.policy = cls, .page_size = page_size, .seed = seed};
  md_policy *policy = NULL;
  md_error err = {0};
  md_status status = md_policy_new(config, &options, &policy, &err);
  CHECK_MSG(status == MD_OK, "%s: %s", cls ? cls->name : "?", err.message);
  return policy;
}

/* With snapkv's window (observe calls) and pool width (0: the defaults). */
static md_policy *make_snapkv(int page_size, int window, int kernel) {
  md_policy_options options = {.policy = md_policy_find("snapkv"), .page_size = page_size,
                               .observation_window = window, .pool_kernel = kernel};
  md_policy *policy = NULL;
  md_error err = {0};
  CHECK_MSG(md_policy_new(NULL, &options, &policy, &err) == MD_OK, "snapkv: %s", err.message);
  return policy;
}

static md_policy *make(const char *name, const md_policy_config *config, int page_size,
                       uint64_t seed) {
  const md_policy_class *cls = policy_class(name);
  return cls ? make_class(cls, config, page_size, seed) : NULL;
}

static void append(md_policy *policy, int64_t position, int region) {
  md_error err = {0};
  CHECK_MSG(md_policy_append(policy, position, region, &err) == MD_OK, "%s", err.message);
}

static void append_prompt(md_policy *policy, int64_t position, int region) {
  md_error err = {0};
  CHECK_MSG(md_policy_append_prompt(policy, position, region, &err) == MD_OK, "%s", err.message);
}

static void observe(md_policy *policy, const float *received, int64_t n, int64_t n_queries) {
  md_error err = {0};
  CHECK_MSG(md_policy_observe(policy, received, n, n_queries, &err) == MD_OK, "%s", err.message);
}

/* Evicts and compares the positions with `want` (n_want of them). */
static void evict_expect(md_policy *policy, int64_t budget, const int64_t *want, int64_t n_want) {
  const int64_t *got = NULL;
  int64_t n = -1;
  md_error err = {0};
  CHECK_MSG(md_policy_evict(policy, budget, &got, &n, &err) == MD_OK, "%s", err.message);
  CHECK_MSG(n == n_want, "evicted %lld positions, expected %lld", (long long)n,
            (long long)n_want);
  for (int64_t i = 0; i < n && i < n_want; i++) {
    CHECK_MSG(got[i] == want[i], "evicted[%lld] = %lld, expected %lld", (long long)i,
              (long long)got[i], (long long)want[i]);
  }
}

/* ---- the score formula by hand ------------------------------------------------ */

/* Regions: 0 "sys" pinned; 1 "a" b = 0.8, lambda = ln 2 (exp(-lambda dt) =
 * 2^-dt); 2 "b" b = 0.4, lambda = 0. tau 1, beta 0.5, alpha 0.5, kappa 2,
 * page_size 2. */
static md_policy_region hand_regions[] = {
    {.name = "sys", .pinned = true, .base_priority = 1.0, .lambda = NAN},
    {.name = "a", .pinned = false, .base_priority = 0.8, .lambda = 0.69314718055994530942},
    {.name = "b", .pinned = false, .base_priority = 0.4, .lambda = 0.0},
};
static const md_policy_config hand_config = {
    .page_size = 2, .tau = 1.0, .ewma_beta = 0.5, .alpha = 0.5, .kappa = 2.0,
    .n_regions = 3, .regions = hand_regions};

/* Prefill positions 0 (sys), 1 (a), 2 (a), 3 (b) as one chunk (steps 1..4;
 * t = 4), then decode position 4 (b) (step 5). */
static void hand_feed(md_policy *p) {
  append(p, 0, 0);
  append(p, 1, 1);
  append(p, 2, 1);
  append(p, 3, 2);
  /* Column sums of the 4 chunk queries (each row sums to 1: total 4). */
  const float prefill[4] = {2.0f, 0.75f, 0.75f, 0.5f};
  observe(p, prefill, 4, 4);
  append(p, 4, 2);
  const float decode[5] = {0.125f, 0.25f, 0.125f, 0.0625f, 0.4375f};  /* sums to 1 */
  observe(p, decode, 5, 1);
}

/* The clock counts decoded tokens (runtime/policy.h, Time): a prompt chunk is
 * born at the current step and does not move it. hand_config: region a has
 * b = 0.8 and exp(-lambda dt) = 2^-dt, region b has b = 0.4 and lambda 0;
 * tau 1, beta 0.5, alpha / kappa = 0.25, pages of 2. */
static void test_prompt_clock(void) {
  md_policy *p = make("memdecay", &hand_config, 0, 0);
  if (!p) return;
  /* Prompt chunk: positions 0 (a), 1 (a), 2 (b), all born at t = 0. */
  append_prompt(p, 0, 1);
  append_prompt(p, 1, 1);
  append_prompt(p, 2, 2);
  CHECK(md_policy_step(p) == 0);
  /* Queries at slots 0..2 see v = 1, 2, 3: u_0 = 11/6, u_1 = 5/6, u_2 = 1/3;
   * r = 1.5 * 6/11 = 9/11 (not refreshed), 1.0 * 6/5 = 1.2 and 0.5 * 3 = 1.5
   * (refreshed at t = 0: their birth step anyway); e = r / 2. */
  const float prefill[3] = {1.5f, 1.0f, 0.5f};
  observe(p, prefill, 3, 3);
  CHECK_REL(md_policy_token_score(p, 0), 0.8 + 0.25 * (9.0 / 22), 1e-12);
  CHECK_REL(md_policy_token_score(p, 2), 0.4 + 0.25 * 0.75, 1e-12);
  /* Decode position 3 (b): t = 1; one query over 4 tokens, all of it on
   * the new token: r = 0, 0, 0, 4, nothing old refreshed; e halves. */
  append(p, 3, 2);
  CHECK(md_policy_step(p) == 1);
  const float decode[4] = {0.0f, 0.0f, 0.0f, 1.0f};
  observe(p, decode, 4, 1);
  /* Decode position 4 (b): t = 2. Token 0 was last refreshed at its birth,
   * t = 0: dt = 2, s_0 = 0.8 * 2^-2 + 0.25 * 9/44; token 1 (refreshed at
   * 0): 0.8 * 2^-2 + 0.25 * 0.3. A clock of every appended token would
   * have t = 5 and token 0 born at 1: 0.8 * 2^-4 + ... */
  append(p, 4, 2);
  CHECK(md_policy_step(p) == 2);
  CHECK_REL(md_policy_token_score(p, 0), 0.2 + 0.25 * (9.0 / 44), 1e-12);
  CHECK_REL(md_policy_token_score(p, 1), 0.2 + 0.25 * 0.3, 1e-12);
  CHECK_REL(md_policy_token_score(p, 2), 0.4 + 0.25 * 0.375, 1e-12);
  /* A prompt chunk after decoding (a tool's output): born at t = 2, which
   * stays: s_5 = 0.8, and token 0's score is unchanged. */
  append_prompt(p, 5, 1);
  CHECK(md_policy_step(p) == 2);
  CHECK_REL(md_policy_token_score(p, 5), 0.8, 1e-12);
  CHECK_REL(md_policy_token_score(p, 0), 0.2 + 0.25 * (9.0 / 44), 1e-12);
  /* The same checks as append: a position that does not increase. */
  md_error err = {0};
  CHECK(md_policy_append_prompt(p, 5, 1, &err) != MD_OK && err.message[0]);
  md_policy_free(p);
}

static void test_hand_scores(void) {
  /* Prefill: queries j = 0..3 at slots 0..3 see v = 1, 2, 3, 4 tokens.
   * u_s = sum over queries j >= s of 1/v_j:
   *   u_0 = 1 + 1/2 + 1/3 + 1/4 = 25/12, u_1 = 13/12, u_2 = 7/12, u_3 = 1/4.
   * r_s = received / u_s: r_0 = 2 * 12/25 = 0.96, r_1 = 0.75 * 12/13 = 9/13,
   *   r_2 = 0.75 * 12/7 = 9/7, r_3 = 0.5 * 4 = 2.
   * Raw share w_s = received / (4 - s): 0.5, 0.25, 0.375, 0.5.
   * tau = 1: tokens 2 (9/7) and 3 (2) are refreshed at t = 4; 0 and 1 not.
   * EWMA (beta 0.5, from 0): e = r / 2: 0.48, 9/26, 9/14, 1;
   *   e_raw = w / 2: 0.25, 0.125, 0.1875, 0.25.
   * Decode at t = 5, one query over v = 5 tokens: r = 5 a =
   *   0.625, 1.25, 0.625, 0.3125, 2.1875; w = a.
   * Refreshed: token 1 (1.25 >= 1) at 5, token 4 (2.1875; born at 5).
   * Last refresh: 0 -> 1 (birth), 1 -> 5, 2 -> 4, 3 -> 4, 4 -> 5.
   * e = e/2 + r/2: e_1 = 9/52 + 0.625, e_2 = 9/28 + 0.3125,
   *   e_3 = 0.5 + 0.15625 = 0.65625, e_4 = 1.09375.
   * e_raw = e_raw/2 + a/2: e_raw_1 = 0.0625 + 0.125 = 0.1875,
   *   e_raw_2 = 0.09375 + 0.0625 = 0.15625, e_raw_3 = 0.125 + 0.03125 =
   *   0.15625, e_raw_4 = 0.21875.
   * memdecay, alpha / kappa = 0.25:
   *   s_0 = +inf (pinned)
   *   s_1 = 0.8 * 2^0 + 0.25 (9/52 + 0.625)
   *   s_2 = 0.8 * 2^-1 + 0.25 (9/28 + 0.3125)
   *   s_3 = 0.4 + 0.25 * 0.65625 = 0.5640625
   *   s_4 = 0.4 + 0.25 * 1.09375 = 0.6734375
   * memdecay-raw, alpha 0.5:
   *   s_1 = 0.8 + 0.5 * 0.1875 = 0.89375, s_2 = 0.4 + 0.5 * 0.15625 =
   *   0.478125, s_3 = 0.4 + 0.078125 = 0.478125, s_4 = 0.4 + 0.109375 =
   *   0.509375.
   * h2o: acc = prefill + decode = 2.125, 1, 0.875, 0.5625, 0.4375. */
  md_policy *p = make("memdecay", &hand_config, 0, 0);
  md_policy *raw = make("memdecay-raw", &hand_config, 0, 0);
  md_policy *h2o = make("h2o", &hand_config, 0, 0);
  if (!p || !raw || !h2o) return;
  hand_feed(p);
  hand_feed(raw);
  hand_feed(h2o);
  CHECK(md_policy_step(p) == 5);
  CHECK(md_policy_cached_tokens(p) == 5 && md_policy_cached_pages(p) == 3);
  double s1 = 0.8 + 0.25 * (9.0 / 52 + 0.625);
  double s2 = 0.4 + 0.25 * (9.0 / 28 + 0.3125);
  CHECK(isinf(md_policy_token_score(p, 0)) && md_policy_token_score(p, 0) > 0);
  CHECK_REL(md_policy_token_score(p, 1), s1, 1e-12);
  CHECK_REL(md_policy_token_score(p, 2), s2, 1e-12);
  CHECK_REL(md_policy_token_score(p, 3), 0.5640625, 1e-12);
  CHECK_REL(md_policy_token_score(p, 4), 0.6734375, 1e-12);
  CHECK(isnan(md_policy_token_score(p, 5)));
  /* Pages of 2: page 0 = {0, 1} (+inf), page 1 = {2, 3}, page 2 = {4}. */
  CHECK(isinf(md_policy_page_score(p, 0)));
  CHECK_REL(md_policy_page_score(p, 1), (s2 + 0.5640625) / 2, 1e-12);
  CHECK_REL(md_policy_page_score(p, 2), 0.6734375, 1e-12);
  CHECK(isnan(md_policy_page_score(p, 3)));

  CHECK_REL(md_policy_token_score(raw, 1), 0.89375, 1e-12);
  CHECK_REL(md_policy_token_score(raw, 2), 0.478125, 1e-12);
  CHECK_REL(md_policy_token_score(raw, 3), 0.478125, 1e-12);
  CHECK_REL(md_policy_token_score(raw, 4), 0.509375, 1e-12);

  CHECK_REL(md_policy_token_score(h2o, 0), 2.125, 1e-12);
  CHECK_REL(md_policy_token_score(h2o, 3), 0.5625, 1e-12);
  CHECK_REL(md_policy_page_score(h2o, 1), (0.875 + 0.5625) / 2, 1e-12);

  /* One more step without attention (position 5, region a; t = 6): token 1
   * decays one step, s_1 = 0.8 * 2^-1 + 0.25 e_1; token 2, 2 steps:
   * 0.8 * 2^-2 + 0.25 e_2. */
  append(p, 5, 1);
  CHECK_REL(md_policy_token_score(p, 1), 0.4 + 0.25 * (9.0 / 52 + 0.625), 1e-12);
  CHECK_REL(md_policy_token_score(p, 2), 0.2 + 0.25 * (9.0 / 28 + 0.3125), 1e-12);
  /* A new token: dt = 0, e = 0: s_5 = 0.8. */
  CHECK_REL(md_policy_token_score(p, 5), 0.8, 1e-12);

  /* Budget 2 of pages {0 pinned, 1, 2 newest}: only page 1 may go. */
  const int64_t want[] = {2, 3};
  evict_expect(p, 2, want, 2);
  CHECK(md_policy_cached_pages(p) == 2 && md_policy_cached_tokens(p) == 4);
  /* Budget 0: nothing more is evictable (page 0 pinned, page 2 newest):
   * the overshoot shows in the page count. */
  evict_expect(p, 0, NULL, 0);
  CHECK(md_policy_cached_pages(p) == 2);
  /* After an eviction the slots are renumbered: attention on 4 tokens. */
  append(p, 6, 2);  /* page 3, t = 7 */
  const float after[5] = {0.5f, 0.125f, 0.125f, 0.125f, 0.125f};
  observe(p, after, 5, 1);
  CHECK(md_policy_cached_pages(p) == 3);
  /* Token 6 (b): r = 0.125 * 5 = 0.625, e = 0.3125: s = 0.4 + 0.25 * 0.3125. */
  CHECK_REL(md_policy_token_score(p, 6), 0.478125, 1e-12);
  md_policy_free(p);
  md_policy_free(raw);
  md_policy_free(h2o);

  /* r = tau exactly refreshes: four tokens of region a (steps 1..4), one
   * query over v = 4 with a = 0.25 each: r = 1 = tau, so all are refreshed
   * at t = 4 and e = 0.5 * 1. Token 0: dt = 0, s = 0.8 + 0.25 * 0.5 = 0.925
   * (unrefreshed it would be 0.8 * 2^-3 + 0.125 = 0.225). */
  p = make("memdecay", &hand_config, 0, 0);
  if (!p) return;
  for (int i = 0; i < 4; i++) append(p, i, 1);
  const float even[4] = {0.25f, 0.25f, 0.25f, 0.25f};
  observe(p, even, 4, 1);
  CHECK_REL(md_policy_token_score(p, 0), 0.925, 1e-12);
  md_policy_free(p);
}

/* ---- memdecay with lambda = alpha = 0: base priority, oldest first -------------- */

static void test_base_priority_order(void) {
  md_policy_region regions[] = {
      {.name = "x", .base_priority = 0.5, .lambda = 0},
      {.name = "y", .base_priority = 0.2, .lambda = 0},
      {.name = "z", .base_priority = 0.9, .lambda = 0},
  };
  md_policy_config config = {.page_size = 2, .tau = 1, .ewma_beta = 0.9, .alpha = 0, .kappa = 1,
                             .n_regions = 3, .regions = regions};
  md_policy *p = make("memdecay", &config, 0, 0);
  if (!p) return;
  /* Pages of 2: page 0 = x x (0.5), page 1 = y y (0.2), page 2 = z z (0.9),
   * page 3 = y y (0.2), page 4 = x y (mean 0.35), page 5 = z (newest). */
  const int region[] = {0, 0, 1, 1, 2, 2, 1, 1, 0, 1, 2};
  for (int i = 0; i < 11; i++) append(p, i, region[i]);
  /* Attention changes nothing (alpha 0, lambda 0): a uniform row. */
  float row[11];
  for (int i = 0; i < 11; i++) row[i] = 1.0f / 11;
  observe(p, row, 11, 1);
  CHECK_REL(md_policy_page_score(p, 4), 0.35, 1e-12);
  /* Budget 5 of 6 pages: the lowest, 0.2, is a tie between pages 1 and 3:
   * the oldest, page 1 (positions 2, 3), goes. */
  const int64_t first[] = {2, 3};
  evict_expect(p, 5, first, 2);
  /* Budget 2 of pages {0: 0.5, 2: 0.9, 3: 0.2, 4: 0.35, 5: newest}: three go,
   * lowest first: page 3 (0.2), page 4 (0.35), page 0 (0.5); kept: 2 and 5.
   * Returned ascending: 0 1 6 7 8 9. */
  const int64_t second[] = {0, 1, 6, 7, 8, 9};
  evict_expect(p, 2, second, 6);
  CHECK(md_policy_cached_pages(p) == 2 && md_policy_cached_tokens(p) == 3);
  CHECK(!isnan(md_policy_token_score(p, 4)) && !isnan(md_policy_token_score(p, 10)));
  md_policy_free(p);
}


/* ---- memdecay's ablations by hand ----------------------------------------------- */

/* hand_config with a pooled fit: lambda_pooled = ln 4 (exp(-lambda dt) =
 * 4^-dt), against region a's ln 2 and region b's 0. */
static md_policy_config pooled_config(void) {
  md_policy_config c = hand_config;
  c.has_pooled = true;
  c.pooled_lambda = 1.38629436111989061883;  /* ln 4 */
  return c;
}

static void test_memdecay_ablations(void) {
  /* After hand_feed (t = 5; see test_hand_scores): last refresh 1 -> 5,
   * 2 -> 4, 3 -> 4, 4 -> 5, so dt = 0, 1, 1, 0 for tokens 1..4; e_1 = 9/52 +
   * 0.625, e_2 = 9/28 + 0.3125, e_3 = 0.65625, e_4 = 1.09375; alpha / kappa
   * = 0.25; b = 0.8 (a: tokens 1, 2), 0.4 (b: tokens 3, 4).
   * memdecay-shared, lambda = ln 4 for a and b:
   *   s_1 = 0.8 + 0.25 e_1, s_2 = 0.8/4 + 0.25 e_2,
   *   s_3 = 0.4/4 + 0.25 * 0.65625 = 0.2640625 (memdecay: 0.5640625, b's
   *   own lambda being 0), s_4 = 0.4 + 0.25 * 1.09375 = 0.6734375.
   * memdecay-nodecay, lambda = 0: s_2 = 0.8 + 0.25 e_2 (memdecay: 0.4 +
   *   0.25 e_2), s_3 = 0.5640625.
   * memdecay-noattn, alpha = 0: s_1 = 0.8, s_2 = 0.8/2 = 0.4, s_3 = s_4 =
   *   0.4. Token 0 is pinned: +infinity for all three. */
  md_policy_config config = pooled_config();
  md_policy *shared = make("memdecay-shared", &config, 1, 0);
  md_policy *nodecay = make("memdecay-nodecay", &config, 1, 0);
  md_policy *noattn = make("memdecay-noattn", &config, 1, 0);
  md_policy *memdecay = make("memdecay", &config, 1, 0);
  if (!shared || !nodecay || !noattn || !memdecay) return;
  md_policy *all[] = {shared, nodecay, noattn, memdecay};
  for (int k = 0; k < 4; k++) {
    hand_feed(all[k]);
    CHECK(isinf(md_policy_token_score(all[k], 0)) && md_policy_token_score(all[k], 0) > 0);
  }
  const double e1 = 9.0 / 52 + 0.625, e2 = 9.0 / 28 + 0.3125;
  CHECK_REL(md_policy_token_score(shared, 1), 0.8 + 0.25 * e1, 1e-12);
  CHECK_REL(md_policy_token_score(shared, 2), 0.2 + 0.25 * e2, 1e-12);
  CHECK_REL(md_policy_token_score(shared, 3), 0.2640625, 1e-12);
  CHECK_REL(md_policy_token_score(shared, 4), 0.6734375, 1e-12);
  CHECK_REL(md_policy_token_score(nodecay, 2), 0.8 + 0.25 * e2, 1e-12);
  CHECK_REL(md_policy_token_score(nodecay, 3), 0.5640625, 1e-12);
  CHECK_REL(md_policy_token_score(noattn, 1), 0.8, 1e-12);
  CHECK_REL(md_policy_token_score(noattn, 2), 0.4, 1e-12);
  CHECK_REL(md_policy_token_score(noattn, 3), 0.4, 1e-12);
  /* Each ablation is told apart from memdecay by the example: shared's
   * token 3 (the pooled rate, not b's 0), nodecay's token 2, noattn's
   * token 4 (no attention term). */
  CHECK(fabs(md_policy_token_score(shared, 3) - md_policy_token_score(memdecay, 3)) > 0.1);
  CHECK(fabs(md_policy_token_score(nodecay, 2) - md_policy_token_score(memdecay, 2)) > 0.1);
  CHECK(fabs(md_policy_token_score(noattn, 4) - md_policy_token_score(memdecay, 4)) > 0.1);

  /* One more step (position 5, region a; t = 6), token-granular. dt = 1, 2,
   * 2, 1 for tokens 1..4, and token 5 (dt 0, e 0) is the newest:
   *   memdecay: s_1 = 0.4 + 0.25 e_1 = 0.5995, s_2 = 0.2 + 0.25 e_2 =
   *     0.3585, s_3 = 0.5640625, s_4 = 0.6734375: lowest s_2;
   *   shared:   s_1 = 0.2 + 0.25 e_1 = 0.3995, s_2 = 0.05 + 0.25 e_2 =
   *     0.2085, s_3 = 0.025 + 0.1640625 = 0.1890625, s_4 = 0.1 + 0.2734375
   *     = 0.3734375: lowest s_3, then s_2, s_4, s_1;
   *   nodecay:  s_1 = 0.9995, s_2 = 0.9585, s_3 = 0.5640625, s_4 =
   *     0.6734375: lowest s_3, then s_4, s_2;
   *   noattn:   s_2 = 0.8/4 = 0.2, the others 0.4: lowest s_2.
   * Budget 5 of 6 tokens: one goes. */
  for (int k = 0; k < 4; k++) append(all[k], 5, 1);
  CHECK_REL(md_policy_token_score(shared, 3), 0.1890625, 1e-12);
  CHECK_REL(md_policy_token_score(noattn, 2), 0.2, 1e-12);
  const int64_t two[] = {2}, three[] = {3};
  evict_expect(memdecay, 5, two, 1);
  evict_expect(shared, 5, three, 1);
  evict_expect(nodecay, 5, three, 1);
  evict_expect(noattn, 5, two, 1);
  /* Budget 2: the three left that may go (all but the pinned 0 and the
   * newest 5) go, returned ascending. */
  const int64_t rest[] = {1, 2, 4};
  evict_expect(shared, 2, rest, 3);
  evict_expect(nodecay, 2, rest, 3);
  /* nodecay's order past its first: from all six again, budget 4 drops s_3
   * and s_4, the two lowest (memdecay would drop 2 and 3). */
  for (int k = 0; k < 4; k++) md_policy_free(all[k]);
  nodecay = make("memdecay-nodecay", &config, 1, 0);
  if (!nodecay) return;
  hand_feed(nodecay);
  append(nodecay, 5, 1);
  const int64_t nodecay_order[] = {3, 4};
  evict_expect(nodecay, 4, nodecay_order, 2);
  md_policy_free(nodecay);

  /* memdecay-shared refuses a config without a pooled fit, or a null one,
   * naming the field; a pooled lambda out of range is refused for every
   * policy. The others need none. */
  md_error err = {0};
  md_policy *p = NULL;
  md_policy_options options = {.policy = policy_class("memdecay-shared")};
  CHECK(md_policy_new(&hand_config, &options, &p, &err) == MD_E_INVALID && !p);
  CHECK_MSG(strstr(err.message, "policy memdecay-shared: pooled.lambda: the config has no pooled "
                   "fit") != NULL, "%s", err.message);
  config.pooled_lambda = NAN;
  CHECK(md_policy_new(&config, &options, &p, &err) == MD_E_INVALID && !p);
  CHECK_MSG(strstr(err.message, "pooled.lambda: null") != NULL, "%s", err.message);
  config.pooled_lambda = -1;
  options.policy = policy_class("memdecay");
  CHECK(md_policy_new(&config, &options, &p, &err) == MD_E_INVALID && !p);
  CHECK_MSG(strstr(err.message, "pooled.lambda: -1 is not a number >= 0") != NULL, "%s",
            err.message);
  p = make("memdecay-nodecay", &hand_config, 0, 0);
  md_policy_free(p);
}

/* ---- streaming-pinned by hand ---------------------------------------------------- */

static void test_streaming_pinned(void) {
  /* page_size 2, 4 sink tokens = pages 0 and 1; positions 0..13 = pages
   * 0..6, every token of region b but position 6 (page 3), of the pinned
   * region sys. Budget 4: three go, oldest first among the non-sink,
   * unpinned pages 2, 4, 5 (page 3 pinned, page 6 newest): 4, 5, 8..11.
   * streaming, which does not pin, drops pages 2, 3, 4 (4..9) instead. */
  md_policy *pinned = make("streaming-pinned", &hand_config, 2, 0);
  md_policy *plain = make("streaming", &hand_config, 2, 0);
  if (!pinned || !plain) return;
  for (int i = 0; i < 14; i++) {
    append(pinned, i, i == 6 ? 0 : 2);
    append(plain, i, i == 6 ? 0 : 2);
  }
  const int64_t want[] = {4, 5, 8, 9, 10, 11};
  evict_expect(pinned, 4, want, 6);
  const int64_t streaming_want[] = {4, 5, 6, 7, 8, 9};
  evict_expect(plain, 4, streaming_want, 6);
  /* Budget 1: nothing else may go (sinks, the pinned page, the newest):
   * four pages stay. */
  evict_expect(pinned, 1, NULL, 0);
  CHECK(md_policy_cached_pages(pinned) == 4);
  CHECK(md_policy_token_score(pinned, 6) == 0);  /* ranks by position only */
  md_policy_free(pinned);
  md_policy_free(plain);
  /* It reads the config's pinning: refused without one. */
  md_error err = {0};
  md_policy *p = NULL;
  md_policy_options options = {.policy = policy_class("streaming-pinned")};
  CHECK(md_policy_new(NULL, &options, &p, &err) == MD_E_INVALID && !p);
  CHECK(strstr(err.message, "needs a memdecay.json") != NULL);
}

/* ---- snapkv by hand --------------------------------------------------------------- */

/* Positions 0..5 prefilled as one chunk, then 6..9 decoded, each step
 * observed; pages of 2. */
static void snapkv_feed(md_policy *p) {
  for (int i = 0; i < 6; i++) append(p, i, -1);
  const float prefill[6] = {3.0f, 1.0f, 0.5f, 0.5f, 0.5f, 0.5f};  /* 6 queries */
  observe(p, prefill, 6, 6);
  const float call6[7] = {0.25f, 0, 0, 0, 0, 0, 0.75f};
  const float call7[8] = {0.25f, 0, 0, 0, 0, 0, 0, 0.75f};
  const float call8[9] = {0.125f, 0, 0, 0, 0, 0.375f, 0, 0, 0.5f};
  const float call9[10] = {0.125f, 0, 0, 0.25f, 0, 0, 0, 0.125f, 0.25f, 0.25f};
  const float *calls[4] = {call6, call7, call8, call9};
  for (int k = 0; k < 4; k++) {
    append(p, 6 + k, -1);
    observe(p, calls[k], 7 + k, 1);
  }
}

static void test_snapkv(void) {
  /* Window W = 2 calls (8 and 9), pool K = 3 (neighbours within 1):
   *   v = call8 + call9 = 0.25, 0, 0, 0.25, 0, 0.375, 0, 0.125, 0.75, 0.25
   *   s_i = max(v_{i-1}, v_i, v_{i+1}) = 0.25, 0.25, 0.25, 0.25, 0.375,
   *     0.375, 0.375, 0.75, 0.75, 0.75
   * Pages: 0 (0, 1) 0.25, 1 (2, 3) 0.25, 2 (4, 5) 0.375, 3 (6, 7) 0.5625,
   * 4 (8, 9) the window's and the newest. Budget 2: pages 0, 1 (tie, the
   * older first), 2 go: positions 0..5. (Had the prefill counted, its 3 on
   * token 0 would have kept page 0.) */
  md_policy *p = make_snapkv(2, 2, 3);
  if (!p) return;
  snapkv_feed(p);
  CHECK_REL(md_policy_token_score(p, 0), 0.25, 1e-12);
  CHECK_REL(md_policy_token_score(p, 2), 0.25, 1e-12);
  CHECK_REL(md_policy_token_score(p, 6), 0.375, 1e-12);
  CHECK_REL(md_policy_token_score(p, 7), 0.75, 1e-12);
  CHECK_REL(md_policy_page_score(p, 3), 0.5625, 1e-12);
  const int64_t want[] = {0, 1, 2, 3, 4, 5};
  evict_expect(p, 2, want, 6);
  /* After the eviction the pool sees only what is cached: token 6's
   * neighbours are 7 (0.125) and 5, gone: s_6 = max(v_6, v_7) = 0.125. */
  CHECK_REL(md_policy_token_score(p, 6), 0.125, 1e-12);
  md_policy_free(p);

  /* Mutations the example tells apart. Window 1 (call 9 alone): v = 0.125,
   * 0, 0, 0.25, 0, 0, 0, 0.125, 0.25, 0.25; s = 0.125, 0.125, 0.25, 0.25,
   * 0.25, 0, 0.125, 0.25, 0.25, 0.25; pages 0.125, 0.25, 0.125, 0.1875:
   * pages 0, 2, 3 go (0, 1, 4..7). */
  p = make_snapkv(2, 1, 3);
  if (!p) return;
  snapkv_feed(p);
  const int64_t window1[] = {0, 1, 4, 5, 6, 7};
  evict_expect(p, 2, window1, 6);
  md_policy_free(p);
  /* No pooling (K = 1), W = 2: pages 0.125, 0.125, 0.1875, 0.0625: pages
   * 3, 0, 1 go (0..3, 6, 7). */
  p = make_snapkv(2, 2, 1);
  if (!p) return;
  snapkv_feed(p);
  const int64_t no_pool[] = {0, 1, 2, 3, 6, 7};
  evict_expect(p, 2, no_pool, 6);
  md_policy_free(p);

  /* The window's own tokens go last. Token-granular, W = 2, K = 1; tokens
   * 0..4 decoded one by one, each observed: the window is calls 3 and 4,
   * v = 0.875, 0.3125, 0.5, 0, 0.3125. Token 3, one of the last W = 2
   * appended, scores lowest but is kept while others can go: budget 3
   * drops 1 and 2; lowest-first alone would drop 3 and 1. Budget 1 then drops 0, and
   * finally 3 (only 4, the newest, stays). */
  p = make_snapkv(1, 2, 1);
  if (!p) return;
  const float rows[5][5] = {{1}, {0.5f, 0.5f}, {0.25f, 0.25f, 0.5f},
                            {0.5f, 0.25f, 0.25f, 0}, {0.375f, 0.0625f, 0.25f, 0, 0.3125f}};
  for (int i = 0; i < 5; i++) {
    append(p, i, -1);
    observe(p, rows[i], i + 1, 1);
  }
  CHECK(md_policy_token_score(p, 3) == 0);
  CHECK_REL(md_policy_token_score(p, 0), 0.875, 1e-12);
  CHECK_REL(md_policy_token_score(p, 1), 0.3125, 1e-12);
  const int64_t first[] = {1, 2};
  evict_expect(p, 3, first, 2);
  const int64_t then[] = {0, 3};
  evict_expect(p, 1, then, 2);
  CHECK(md_policy_cached_tokens(p) == 1);
  /* A reset forgets the window: no attention observed, every score 0. */
  md_policy_reset(p, 0);
  append(p, 0, -1);
  append(p, 1, -1);
  CHECK(md_policy_token_score(p, 0) == 0);
  md_policy_free(p);

  /* The defaults (W = 32, K = 7) run; an even width is refused. */
  p = make_snapkv(2, 0, 0);
  if (p) {
    snapkv_feed(p);
    /* All five calls in the window: v = 3 + 0.25 + 0.25 + 0.125 + 0.125 =
     * 3.75, 1, 0.5, 0.75, 0.5, 0.875, 0.75, 0.875, 0.75, 0.25; K = 7 pools
     * over 3 positions each side: s_0 = s_3 = 3.75 (v_0 in reach), s_4 =
     * max(v_1 .. v_7) = 1. */
    CHECK_REL(md_policy_token_score(p, 0), 3.75, 1e-12);
    CHECK_REL(md_policy_token_score(p, 3), 3.75, 1e-12);
    CHECK_REL(md_policy_token_score(p, 4), 1.0, 1e-12);
    md_policy_free(p);
  }
  md_policy_options options = {.policy = policy_class("snapkv"), .pool_kernel = 4};
  md_error err = {0};
  p = NULL;
  CHECK(md_policy_new(NULL, &options, &p, &err) == MD_E_INVALID && !p);
  CHECK_MSG(strstr(err.message, "policy snapkv: pool_kernel 4 is not odd") != NULL, "%s",
            err.message);
  options.pool_kernel = 0;
  options.observation_window = -1;
  CHECK(md_policy_new(NULL, &options, &p, &err) == MD_E_INVALID && !p);
}

/* ---- tova by hand ----------------------------------------------------------------- */

/* A wrong TOVA: the attention accumulated over every query (H2O's acc)
 * instead of the latest query's, every page by score. */
static double cumulative_score(const void *state, const md_policy_view *v, int64_t i) {
  (void)state;
  return v->acc[i];
}
static const md_policy_class tova_cumulative = {
    .name = "tova-cumulative", .description = "a wrong TOVA (a test's)",
    .score = cumulative_score, .choose = md_policy_choose_by_score};

static void tova_feed(md_policy *p) {
  for (int i = 0; i < 6; i++) append(p, i, -1);
  const float prefill[6] = {0.5f, 0.5f, 1, 1, 2, 1};  /* 6 queries */
  observe(p, prefill, 6, 6);
  append(p, 6, -1);
  const float call6[7] = {0.125f, 0.125f, 0.1875f, 0.1875f, 0.125f, 0.125f, 0.125f};
  observe(p, call6, 7, 1);
  append(p, 7, -1);
  const float call7[8] = {0.25f, 0.25f, 0.125f, 0.125f, 0.0625f, 0.0625f, 0.0625f, 0.0625f};
  observe(p, call7, 8, 1);
}

static void test_tova(void) {
  /* Pages of 2, positions 0..7 = pages 0..3. TOVA scores the latest
   * query's (call 7) attention: pages 0.25, 0.125, 0.0625, 0.0625 (page 3
   * newest). Budget 3: page 2 goes (4, 5). The cumulative attention (acc =
   * prefill + call6 + call7) = 0.875, 0.875, 1.3125, 1.3125, 2.1875,
   * 1.1875, 0.1875, 0.0625 would drop page 0 (0, 1) instead, and the
   * previous query (call 6; pages 0.125, 0.1875, 0.125) page 0 too. */
  md_policy *p = make("tova", NULL, 2, 0);
  md_policy *wrong = make_class(&tova_cumulative, NULL, 2, 0);
  if (!p || !wrong) return;
  tova_feed(p);
  tova_feed(wrong);
  CHECK_REL(md_policy_token_score(p, 0), 0.25, 1e-12);
  CHECK_REL(md_policy_page_score(p, 2), 0.0625, 1e-12);
  CHECK_REL(md_policy_page_score(p, 1), 0.125, 1e-12);
  const int64_t want[] = {4, 5};
  evict_expect(p, 3, want, 2);
  const int64_t cumulative[] = {0, 1};
  evict_expect(wrong, 3, cumulative, 2);
  /* Budget 1: pages 1 (0.125) then 0 go; page 3 (newest) stays. */
  const int64_t rest[] = {0, 1, 2, 3};
  evict_expect(p, 1, rest, 4);
  /* A token appended after the latest query has no score from it (0). */
  append(p, 8, -1);
  CHECK(md_policy_token_score(p, 8) == 0);
  CHECK_REL(md_policy_token_score(p, 7), 0.0625, 1e-12);
  md_policy_free(p);
  md_policy_free(wrong);
}

/* ---- the baselines by hand -------------------------------------------------- */

static void test_streaming(void) {
  /* page_size 2, 4 sink tokens = pages 0 and 1; positions 0..11 = pages
   * 0..5. Budget 4: two go, the oldest non-sink pages 2 and 3 (4..7). */
  md_policy *p = make("streaming", NULL, 2, 0);
  if (!p) return;
  for (int i = 0; i < 12; i++) append(p, i, -1);
  const int64_t want[] = {4, 5, 6, 7};
  evict_expect(p, 4, want, 4);
  /* Two more tokens (page 6): budget 4 again drops page 4 (8, 9). */
  append(p, 12, -1);
  append(p, 13, -1);
  const int64_t next[] = {8, 9};
  evict_expect(p, 4, next, 2);
  md_policy_free(p);

  /* page_size 16: the sink page keeps all 16 of its tokens. Positions
   * 0..47 = pages 0, 1, 2; budget 2 drops page 1 (16..31). */
  p = make("streaming", NULL, 16, 0);
  if (!p) return;
  for (int i = 0; i < 48; i++) append(p, i, -1);
  const int64_t *got;
  int64_t n;
  md_error err = {0};
  CHECK(md_policy_evict(p, 2, &got, &n, &err) == MD_OK);
  CHECK(n == 16 && got[0] == 16 && got[15] == 31);
  CHECK(!isnan(md_policy_token_score(p, 15)));  /* cached: score 0 */
  md_policy_free(p);

  /* Token-granular: exactly the 4 sinks and the recent window. Positions
   * 0..9, budget 6: 4, 5, 6, 7 go. With sink_tokens 2 and budget 3: 2..8 go. */
  p = make("streaming", NULL, 1, 0);
  if (!p) return;
  for (int i = 0; i < 10; i++) append(p, i, -1);
  const int64_t token_want[] = {4, 5, 6, 7};
  evict_expect(p, 6, token_want, 4);
  md_policy_free(p);
  md_policy_options options = {.policy = policy_class("streaming"), .page_size = 1,
                               .sink_tokens = 2};
  CHECK(md_policy_new(NULL, &options, &p, &err) == MD_OK);
  for (int i = 0; i < 10; i++) append(p, i, -1);
  const int64_t two_sinks[] = {2, 3, 4, 5, 6, 7, 8};
  evict_expect(p, 3, two_sinks, 7);
  /* A new sequence starting at position 5 with page_size 1: sinks 5, 6. */
  md_policy_reset(p, 0);
  for (int i = 5; i < 10; i++) append(p, i, -1);
  const int64_t shifted[] = {7, 8};
  evict_expect(p, 3, shifted, 2);
  md_policy_free(p);
}

static void test_h2o(void) {
  /* page_size 2, positions 0..11 = pages 0..5. One chunk of 12 queries with
   * column sums giving page means: page 0 (0.25, 0.75) 0.5; page 1 (3, 1) 2;
   * page 2 (0.5, 0.5) 0.5; page 3 (1, 1) 1; pages 4, 5: 0.5 each.
   * Budget 3: ceil(3/2) = 2 recent pages (4, 5) kept; the other budget page
   * goes to the heaviest of 0..3. Three go, lowest mean first: page 0 (0.5,
   * older of the tie), page 2 (0.5), page 3 (1). Kept: page 1, 4, 5. */
  md_policy *p = make("h2o", NULL, 2, 0);
  if (!p) return;
  for (int i = 0; i < 12; i++) append(p, i, -1);
  const float received[12] = {0.25f, 0.75f, 3, 1, 0.5f, 0.5f, 1, 1, 0.5f, 0.5f, 0.5f, 0.5f};
  observe(p, received, 12, 12);
  CHECK_REL(md_policy_page_score(p, 1), 2.0, 1e-12);
  const int64_t want[] = {0, 1, 4, 5, 6, 7};
  evict_expect(p, 3, want, 6);
  /* Budget 1: ceil(1/2) = 1 recent page (5, also the newest), no heavy page:
   * pages 1 and 4 go (2, 3, 8, 9). */
  const int64_t rest[] = {2, 3, 8, 9};
  evict_expect(p, 1, rest, 4);
  CHECK(md_policy_cached_pages(p) == 1);
  md_policy_free(p);

  /* Token-granular with accumulation over two queries: positions 0..4 are
   * appended and the query of position 4 puts 0.1 0.4 0.1 0.2 0.2 on them;
   * then position 5, whose query puts 0.3 0.1 0.1 0.1 0.2 0.2. acc = 0.4 0.5 0.2 0.3
   * 0.4 0.2. Budget 4: 2 recent (4, 5), 2 heavy among 0..3: keep 1 (0.5) and
   * 0 (0.4); 2 (0.2) and 3 (0.3) go. */
  p = make("h2o", NULL, 1, 0);
  if (!p) return;
  for (int i = 0; i < 5; i++) append(p, i, -1);
  const float q1[5] = {0.1f, 0.4f, 0.1f, 0.2f, 0.2f};
  observe(p, q1, 5, 1);
  append(p, 5, -1);
  const float q2[6] = {0.3f, 0.1f, 0.1f, 0.1f, 0.2f, 0.2f};
  observe(p, q2, 6, 1);
  const int64_t token_want[] = {2, 3};
  evict_expect(p, 4, token_want, 2);
  md_policy_free(p);
}

static void test_random_and_full(void) {
  /* page_size 4, positions 0..19 = pages 0..4; budget 4 drops one page of
   * 0..3 (never 4, the newest). Over 4000 seeds each page should go about
   * 1000 times: binomial sd sqrt(4000 * 1/4 * 3/4) = 27.4, so +-150 is
   * 5.5 sd. */
  md_policy *p = make("random", NULL, 4, 1);
  if (!p) return;
  int counts[5] = {0};
  for (uint64_t seed = 0; seed < 4000; seed++) {
    md_policy_reset(p, seed);
    for (int i = 0; i < 20; i++) append(p, i, -1);
    const int64_t *got;
    int64_t n;
    md_error err = {0};
    CHECK(md_policy_evict(p, 4, &got, &n, &err) == MD_OK);
    CHECK(n == 4 && got[0] % 4 == 0 && got[3] == got[0] + 3);
    if (n == 4) counts[got[0] / 4]++;
  }
  CHECK(counts[4] == 0);
  for (int k = 0; k < 4; k++) CHECK_MSG(abs(counts[k] - 1000) < 150, "page %d: %d", k, counts[k]);

  /* Same seed, same choices; reset reproduces them. */
  int64_t first[3][8], n_first[3];
  for (int pass = 0; pass < 2; pass++) {
    md_policy_reset(p, 42);
    for (int i = 0; i < 40; i++) append(p, i, -1);
    for (int r = 0; r < 3; r++) {
      const int64_t *got;
      int64_t n;
      md_error err = {0};
      CHECK(md_policy_evict(p, 8 - 2 * r, &got, &n, &err) == MD_OK);  /* 10 -> 8 -> 6 -> 4 pages */
      CHECK(n == 8);
      for (int64_t i = 0; i < n && i < 8; i++) {
        if (pass == 0) first[r][i] = got[i];
        else CHECK(first[r][i] == got[i]);
      }
      if (pass == 0) n_first[r] = n;
      else CHECK(n_first[r] == n);
    }
  }
  md_policy_free(p);

  md_policy *full = make("full", NULL, 1, 0);
  if (!full) return;
  for (int i = 0; i < 50; i++) append(full, i, -1);
  evict_expect(full, 0, NULL, 0);
  CHECK(md_policy_cached_tokens(full) == 50 && md_policy_cached_pages(full) == 50);
  md_policy_free(full);
}

/* ---- invariants, every policy of the table, page sizes 1, 4, 16 --------------- */

static uint64_t lcg(uint64_t *state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return *state >> 33;
}

static void test_invariants(void) {
  md_policy_region regions[] = {
      {.name = "system", .pinned = true, .base_priority = 1, .lambda = NAN},
      {.name = "user", .base_priority = 0.6, .lambda = 0.01},
      {.name = "scratchpad", .base_priority = 0.3, .lambda = 0.05},
  };
  md_policy_config config = {.page_size = 16, .tau = 1, .ewma_beta = 0.9, .alpha = 0.4,
                             .kappa = 3, .has_pooled = true, .pooled_lambda = 0.02,
                             .n_regions = 3, .regions = regions};
  const int page_sizes[] = {1, 4, 16};
  enum { PROMPT = 300, TOTAL = 2000 };
  float *received = malloc(TOTAL * sizeof *received);
  bool *cached = malloc(TOTAL * sizeof *cached);
  int *region_of = malloc(TOTAL * sizeof *region_of);
  if (!received || !cached || !region_of) return;
  for (size_t k = 0; k < md_policy_table_count; k++) {
    const md_policy_class *cls = md_policy_table[k];
    for (size_t ps = 0; ps < sizeof page_sizes / sizeof page_sizes[0]; ps++) {
      int page_size = page_sizes[ps];
      md_policy *p = make_class(cls, &config, page_size, 7);
      if (!p) continue;
      bool pins = cls->uses_regions;
      int64_t budget = 64 / page_size + 2;  /* about 64 tokens and a bit */
      uint64_t rng = 12345;
      int64_t n = 0;
      memset(cached, 0, TOTAL * sizeof *cached);
      int failures_before = md_test_failures;
      for (int64_t pos = 0; pos < TOTAL && md_test_failures == failures_before; pos++) {
        /* A prompt of system (first 20), user, then decoded scratchpad with
         * a user or system token now and then. */
        int region = pos < 20 ? 0 : pos < PROMPT ? 1 : (lcg(&rng) % 10 == 0 ? 0 : 2);
        region_of[pos] = region;
        append(p, pos, region);
        cached[pos] = true;
        n++;
        if (pos + 1 < PROMPT) continue;
        int64_t n_queries = pos + 1 == PROMPT ? PROMPT : 1;
        for (int64_t s = 0; s < n; s++) received[s] = (float)(lcg(&rng) % 1000) / 1000.0f / (float)n;
        observe(p, received, n, n_queries);
        const int64_t *got;
        int64_t n_got;
        md_error err = {0};
        int64_t pages_before = md_policy_cached_pages(p);
        CHECK_MSG(md_policy_evict(p, budget, &got, &n_got, &err) == MD_OK, "%s", err.message);
        if (pages_before <= budget) CHECK(n_got == 0);
        for (int64_t i = 0; i < n_got; i++) {
          CHECK(i == 0 || got[i] > got[i - 1]);
          CHECK(got[i] >= 0 && got[i] <= pos && cached[got[i]]);
          CHECK(got[i] / page_size != pos / page_size);       /* newest page */
          if (pins) CHECK(region_of[got[i]] != 0);            /* pinned */
          cached[got[i]] = false;
        }
        n -= n_got;
        CHECK(md_policy_cached_tokens(p) == n);
        /* The pages left: count them, and the unevictable ones. */
        int64_t pages = 0, fixed = 0, last_page = -1;
        bool fixed_page = false;
        for (int64_t q = 0; q <= pos; q++) {
          if (!cached[q]) continue;
          if (q / page_size != last_page) {
            if (fixed_page) fixed++;
            pages++;
            last_page = q / page_size;
            fixed_page = false;
          }
          if ((pins && region_of[q] == 0) || q / page_size == pos / page_size) fixed_page = true;
        }
        if (fixed_page) fixed++;
        CHECK(md_policy_cached_pages(p) == pages);
        if (!cls->choose) {  /* full */
          CHECK(n == pos + 1);
        } else {
          /* Within budget, or only unevictable pages beyond it; and never
           * more than the excess. */
          CHECK_MSG(pages <= budget || pages == fixed, "%s page %d: %lld pages, %lld fixed",
                    cls->name, page_size, (long long)pages,
                    (long long)fixed);
          CHECK_MSG(n_got == 0 || pages >= budget, "%s page %d: %lld pages left, budget %lld",
                    cls->name, page_size, (long long)pages, (long long)budget);
          if (pages > budget) CHECK(pins);
        }
        /* Pinned tokens are all still cached. */
        if (pins) {
          for (int64_t q = 0; q <= pos; q++) if (region_of[q] == 0) CHECK(cached[q]);
        }
      }
      md_policy_free(p);
    }
  }
  free(received);
  free(cached);
  free(region_of);
}

/* ---- refusals ----------------------------------------------------------------- */

static void test_refusals(void) {
  md_error err = {0};
  md_policy *p = NULL;
  md_policy_options options = {.policy = policy_class("memdecay")};
  CHECK(md_policy_new(NULL, &options, &p, &err) == MD_E_INVALID && !p);
  CHECK(strstr(err.message, "needs a memdecay.json") != NULL);
  md_policy_region bad_regions[] = {{.name = "plan", .base_priority = 0.5, .lambda = NAN}};
  md_policy_config bad = hand_config;
  bad.n_regions = 1;
  bad.regions = bad_regions;
  CHECK(md_policy_new(&bad, &options, &p, &err) == MD_E_INVALID);
  CHECK_MSG(strstr(err.message, "regions.plan.lambda: null") != NULL, "%s", err.message);
  bad = hand_config;
  bad.kappa = 0;
  CHECK(md_policy_new(&bad, &options, &p, &err) == MD_E_INVALID);
  CHECK_MSG(strstr(err.message, "policy.attention_norm.kappa: 0 is not a positive number") != NULL,
            "%s", err.message);
  options.page_size = -1;
  CHECK(md_policy_new(&hand_config, &options, &p, &err) == MD_E_INVALID);
  options.page_size = 0;

  p = make("memdecay", &hand_config, 0, 0);
  if (!p) return;
  CHECK(md_policy_append(p, 0, -1, &err) == MD_E_INVALID);   /* memdecay needs a region */
  CHECK(md_policy_append(p, 0, 3, &err) == MD_E_INVALID);    /* 3 regions */
  append(p, 3, 1);
  CHECK(md_policy_append(p, 3, 1, &err) == MD_E_INVALID);    /* not increasing */
  CHECK(strstr(err.message, "position 3 after 3") != NULL);
  float received[2] = {0.5f, 0.5f};
  CHECK(md_policy_observe(p, received, 2, 1, &err) == MD_E_INVALID);  /* 1 cached */
  CHECK(md_policy_observe(p, received, 1, 2, &err) == MD_E_INVALID);  /* 1 appended */
  received[0] = NAN;
  CHECK(md_policy_observe(p, received, 1, 1, &err) == MD_E_INVALID);
  received[0] = -1;
  CHECK(md_policy_observe(p, received, 1, 1, &err) == MD_E_INVALID);
  received[0] = 1;
  observe(p, received, 1, 1);
  CHECK(md_policy_observe(p, received, 1, 1, &err) == MD_E_INVALID);  /* nothing new */
  const int64_t *got;
  int64_t n;
  CHECK(md_policy_evict(p, -1, &got, &n, &err) == MD_E_INVALID);
  md_policy_free(p);

  md_policy *h2o = make("h2o", &hand_config, 0, 0);
  if (!h2o) return;
  append(h2o, 0, -1);   /* region-agnostic: -1 or an index */
  append(h2o, 1, 2);
  CHECK(md_policy_append(h2o, 2, 3, &err) == MD_E_INVALID);
  md_policy_free(h2o);

  options.policy = NULL;
  CHECK(md_policy_new(&hand_config, &options, &p, &err) == MD_E_INVALID && !p);
  CHECK(strstr(err.message, "no policy class") != NULL);
}

/* ---- a policy from outside the table (runtime/policy_class.h) ------------------ */

/* "oldest-first", defined here and nowhere else: every evictable page, the
 * oldest first (pinned regions kept: uses_regions). Its hooks count their
 * calls and check what the engine promises a class: the view after an
 * append ends with the token, an observe's view carries the attention
 * accumulated, the pages are in page order with the newest not evictable. */
typedef struct oldest_state {
  int64_t appends, observes, chooses, resets;
  double acc_seen;   /* the sum of acc over the view at the last observe */
} oldest_state;
static int oldest_frees = 0;
static const oldest_state *oldest_last = NULL;  /* the state of the last policy reset */

static void oldest_reset(void *state, uint64_t seed) {
  (void)seed;
  ((oldest_state *)state)->resets++;
  oldest_last = state;
}

static md_status oldest_append(void *state, const md_policy_view *v, md_error *err) {
  (void)err;
  ((oldest_state *)state)->appends++;
  CHECK(v->n >= 1 && v->step >= 1);
  return MD_OK;
}

static md_status oldest_observe(void *state, const md_policy_view *v, const float *received,
                                int64_t n_queries, md_error *err) {
  (void)received, (void)n_queries, (void)err;
  oldest_state *s = state;
  s->observes++;
  s->acc_seen = 0;
  for (int64_t i = 0; i < v->n; i++) s->acc_seen += v->acc[i];
  return MD_OK;
}

static md_status oldest_choose(void *state, const md_policy_view *v, const md_policy_page *pages,
                               int64_t n_pages, int64_t budget_pages, int64_t excess,
                               md_policy_candidate *order, int64_t *n_order, md_error *err) {
  (void)budget_pages, (void)excess, (void)err;
  ((oldest_state *)state)->chooses++;
  CHECK(n_pages > 0 && !pages[n_pages - 1].evictable);
  int64_t n = 0;
  for (int64_t j = 0; j < n_pages; j++) {
    CHECK(j == 0 || pages[j].page > pages[j - 1].page);
    CHECK(pages[j].page == v->position[pages[j].first] / v->page_size);
    if (pages[j].evictable) order[n++].index = j;
  }
  *n_order = n;
  return MD_OK;
}

static void oldest_free(void *state) {
  (void)state;
  oldest_frees++;
}

static const md_policy_class oldest_first = {
    .name = "oldest-first",
    .description = "every unpinned page, oldest first (a test's policy)",
    .uses_regions = true,
    .state_size = sizeof(oldest_state),
    .reset = oldest_reset,
    .append = oldest_append,
    .observe = oldest_observe,
    .choose = oldest_choose,
    .free = oldest_free,
};

/* A class that breaks the contract: it offers the newest page. */
static md_status newest_choose(void *state, const md_policy_view *v, const md_policy_page *pages,
                               int64_t n_pages, int64_t budget_pages, int64_t excess,
                               md_policy_candidate *order, int64_t *n_order, md_error *err) {
  (void)state, (void)v, (void)pages, (void)budget_pages, (void)excess, (void)err;
  order[0].index = n_pages - 1;
  *n_order = 1;
  return MD_OK;
}

static md_status failing_init(void *state, const md_policy_options *options,
                              const md_policy_config *config, md_error *err) {
  (void)state, (void)options, (void)config;
  return md_fail(err, MD_E_INVALID, "no such setting");
}

static void test_class_outside_table(void) {
  CHECK(md_policy_find("oldest-first") == NULL);  /* not in the table */
  /* page size 4: pages 0..9 over positions 0..39; page 1 holds a token of
   * the pinned region (position 5), the rest are region 2 */
  md_policy *p = make_class(&oldest_first, &hand_config, 4, 0);
  if (!p) return;
  CHECK(md_policy_get_class(p) == &oldest_first);
  const oldest_state *s = oldest_last;
  CHECK(s && s->resets == 1 && s->appends == 0);
  for (int64_t pos = 0; pos < 40; pos++) append(p, pos, pos == 5 ? 0 : 2);
  float received[40];
  for (int i = 0; i < 40; i++) received[i] = 0.25f;
  observe(p, received, 40, 40);
  /* Budget 5 of 10 pages: the 5 oldest evictable go, pages 0, 2, 3, 4, 5
   * (page 1 pinned): positions 0-3 and 8-23. */
  int64_t want[20];
  int64_t n_want = 0;
  for (int64_t q = 0; q < 4; q++) want[n_want++] = q;
  for (int64_t q = 8; q < 24; q++) want[n_want++] = q;
  evict_expect(p, 5, want, n_want);
  CHECK(md_policy_cached_pages(p) == 5 && md_policy_cached_tokens(p) == 20);
  /* Within budget: nothing, and choose is not called. */
  evict_expect(p, 5, NULL, 0);
  /* Budget 1: all but the pinned page 1 and the newest page 9 go, and the
   * budget cannot be met (not an error). */
  const int64_t want2[] = {24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35};
  evict_expect(p, 1, want2, 12);
  CHECK(md_policy_cached_pages(p) == 2);
  /* The hooks ran as documented: an append per token, an observe with the
   * attention accumulated (40 x 0.25), choose per evict beyond the budget. */
  if (s) {
    CHECK(s->appends == 40 && s->observes == 1 && s->chooses == 2);
    CHECK(s->acc_seen == 10.0);
  }
  md_policy_reset(p, 9);
  if (s) CHECK(s->resets == 2);
  md_policy_free(p);
  CHECK(oldest_frees == 1);

  /* Without a config: refused, as for memdecay (uses_regions). */
  md_error err = {0};
  md_policy_options options = {.policy = &oldest_first, .page_size = 4};
  p = NULL;
  CHECK(md_policy_new(NULL, &options, &p, &err) == MD_E_INVALID && !p);
  CHECK_MSG(strstr(err.message, "policy oldest-first: needs a memdecay.json") != NULL, "%s",
            err.message);

  /* A choice of the newest page is refused, naming the policy. */
  const md_policy_class newest = {.name = "newest", .description = "breaks the contract",
                                  .choose = newest_choose};
  p = make_class(&newest, NULL, 1, 0);
  if (p) {
    append(p, 0, -1);
    append(p, 1, -1);
    const int64_t *got = NULL;
    int64_t n = 0;
    CHECK(md_policy_evict(p, 1, &got, &n, &err) == MD_E_INVALID && n == 0);
    CHECK_MSG(strstr(err.message, "policy newest: chose page index 1 of 2, which is not "
                     "evictable") != NULL, "%s", err.message);
    CHECK(md_policy_cached_tokens(p) == 2);
    md_policy_free(p);
  }

  /* An init that fails: the error comes back prefixed, the free hook runs. */
  const md_policy_class failing = {.name = "failing", .description = "init fails",
                                   .state_size = 8, .init = failing_init, .free = oldest_free};
  options = (md_policy_options){.policy = &failing};
  p = NULL;
  CHECK(md_policy_new(NULL, &options, &p, &err) == MD_E_INVALID && !p);
  CHECK_MSG(!strcmp(err.message, "policy failing: no such setting"), "%s", err.message);
  CHECK(oldest_frees == 2);
}

/* The table itself: names unique, in the form eval writes, descriptions one
 * short line, colours in range; full first (eval's ceiling), md_policy_find
 * finds each and nothing else. */
static void test_table(void) {
  CHECK(md_policy_table_count >= 1 && md_policy_table[0] == &md_policy_class_full);
  CHECK(md_policy_table_count <= MD_EVAL_MAX_POLICIES);  /* --policies can name them all */
  /* eval's default set, which the golden eval results hold
   * (data/golden): the table's classes but the opt-in ones, in this order. */
  const char *default_set[] = {"full", "random", "streaming", "h2o", "snapkv", "tova",
                               "memdecay", "memdecay-raw"};
  size_t n_default = 0;
  for (size_t i = 0; i < md_policy_table_count; i++) {
    if (md_policy_table[i]->opt_in) continue;
    CHECK_MSG(n_default < 8 && !strcmp(md_policy_table[i]->name, default_set[n_default]),
              "default set: %s at %zu", md_policy_table[i]->name, n_default);
    n_default++;
  }
  CHECK(n_default == 8);
  for (size_t i = 0; i < md_policy_table_count; i++) {
    const md_policy_class *c = md_policy_table[i];
    size_t length = strlen(c->name);
    CHECK_MSG(length > 0 && length < MD_EVAL_POLICY_NAME_MAX &&
                  strspn(c->name, "abcdefghijklmnopqrstuvwxyz0123456789_-") == length,
              "policy name '%s'", c->name);
    CHECK_MSG(c->description && strlen(c->description) <= 60 && !strchr(c->description, '\n'),
              "%s: description", c->name);
    for (int k = 0; k < 3; k++) CHECK(c->color[k] >= 0 && c->color[k] <= 1);
    CHECK(md_policy_find(c->name) == c);
    for (size_t j = 0; j < i; j++) {
      const md_policy_class *d = md_policy_table[j];
      CHECK(strcmp(d->name, c->name) != 0);
      /* bars a reader can tell apart: colours differ by 0.1 somewhere */
      CHECK_MSG(fabs(d->color[0] - c->color[0]) + fabs(d->color[1] - c->color[1]) +
                        fabs(d->color[2] - c->color[2]) > 0.1,
                "%s and %s share a colour", d->name, c->name);
    }
  }
  CHECK(md_policy_find("H2O") == NULL && md_policy_find("") == NULL &&
        md_policy_find(NULL) == NULL);
  /* The engine's choice of full: never evicts (no choose). */
  CHECK(md_policy_class_full.choose == NULL);
}

/* ---- config loading ------------------------------------------------------------ */

static void test_config_load(void) {
  md_policy_config config;
  md_error err = {0};
  CHECK_MSG(md_policy_config_load(data_path("good.json"), &config, &err) == MD_OK, "%s",
            err.message);
  CHECK(config.page_size == 4 && config.tau == 1.5 && config.ewma_beta == 0.75);
  CHECK(config.alpha == 0.25 && config.kappa == 2.5 && config.n_regions == 2);
  if (config.n_regions == 2) {
    /* system is pinned with lambda null: allowed. */
    CHECK(!strcmp(config.regions[0].name, "system") && config.regions[0].pinned);
    CHECK(isnan(config.regions[0].lambda));
    CHECK(!config.regions[1].pinned && config.regions[1].base_priority == 0.5);
    CHECK(config.regions[1].lambda == 0.125);
  }
  CHECK(md_policy_config_region(&config, "plan") == 1);
  CHECK(md_policy_config_region(&config, "user") == -1);
  CHECK(!config.has_pooled);  /* a config without "pooled" still loads */
  /* The config's page size is the default. */
  md_policy *p = make("memdecay", &config, 0, 0);
  if (p) {
    for (int i = 0; i < 9; i++) append(p, i, 1);
    CHECK(md_policy_cached_pages(p) == 3);  /* 0..3, 4..7, 8 */
    md_policy_free(p);
  }
  md_policy_config_free(&config);

  const struct {
    const char *file, *message;
  } bad[] = {
      {"missing.json", "missing.json: cannot open"},
      {"lambda_null.json",
       "lambda_null.json: regions.plan.lambda: null (not estimable) on an unpinned region"},
      {"lambda_string.json",
       "lambda_string.json: regions.plan.lambda: expected a number or null, found a string"},
      {"lambda_missing.json", "lambda_missing.json: regions.plan.lambda: missing"},
      {"kappa_null.json", "kappa_null.json: policy.attention_norm.kappa: null"},
      {"alpha_null.json", "alpha_null.json: policy.alpha: null"},
      {"tau_string.json", "tau_string.json: policy.tau: expected a number, found a string"},
      {"page_size_fraction.json",
       "page_size_fraction.json: policy.page_size: expected an integer, found a fraction"},
      {"page_size_zero.json", "page_size_zero.json: policy.page_size: 0 is not a positive"},
      {"beta_one.json", "beta_one.json: policy.ewma_beta: 1 is not in [0, 1)"},
      {"no_policy.json", "no_policy.json: policy: missing"},
      {"norm_missing.json", "norm_missing.json: policy.attention_norm: missing"},
      {"pooled_string.json",
       "pooled_string.json: pooled.lambda: expected a number or null, found a string"},
      {"pooled_missing_lambda.json", "pooled_missing_lambda.json: pooled.lambda: missing"},
      {"pooled_not_object.json",
       "pooled_not_object.json: pooled: expected an object, found a number"},
      {"pooled_contradicts.json",
       "pooled_contradicts.json: pooled.lambda: 0.5 contradicts its half_life 11.09"},
      {"pooled_negative.json", "pooled_negative.json: pooled.lambda: -0.0625 is not a number >= 0"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memset(&config, 0xff, sizeof config);
    md_status status = md_policy_config_load(data_path(bad[i].file), &config, &err);
    CHECK_MSG(status != MD_OK, "%s loaded", bad[i].file);
    CHECK_MSG(strstr(err.message, bad[i].message) != NULL, "%s: %s", bad[i].file, err.message);
    CHECK(config.n_regions == 0 && config.regions == NULL);
  }

  /* `check` reads as before: the fields only the runtime needs may be of any
   * type there (none of these is an error for md_config_read). */
  const char *lenient[] = {"lambda_string.json", "lambda_missing.json", "tau_string.json",
                           "page_size_fraction.json", "no_policy.json", "norm_missing.json",
                           "pooled_string.json", "pooled_missing_lambda.json",
                           "pooled_not_object.json"};
  for (size_t i = 0; i < sizeof lenient / sizeof lenient[0]; i++) {
    md_config_summary summary;
    CHECK_MSG(md_config_read(data_path(lenient[i]), &summary, &err) == MD_OK, "%s: %s",
              lenient[i], err.message);
    md_config_summary_free(&summary);
  }
  /* The pooled fit: its lambda loads (memdecay-shared runs on it); a null
   * one loads as NaN, which memdecay-shared alone refuses. */
  CHECK_MSG(md_policy_config_load(data_path("pooled_good.json"), &config, &err) == MD_OK, "%s",
            err.message);
  CHECK(config.has_pooled && config.pooled_lambda == 0.0625);
  md_policy *shared = make("memdecay-shared", &config, 0, 0);
  md_policy_free(shared);
  md_policy_config_free(&config);
  CHECK_MSG(md_policy_config_load(data_path("pooled_null.json"), &config, &err) == MD_OK, "%s",
            err.message);
  CHECK(config.has_pooled && isnan(config.pooled_lambda));
  md_policy_options shared_options = {.policy = policy_class("memdecay-shared")};
  md_policy *refused = NULL;
  CHECK(md_policy_new(&config, &shared_options, &refused, &err) == MD_E_INVALID && !refused);
  CHECK_MSG(strstr(err.message, "pooled.lambda: null") != NULL, "%s", err.message);
  md_policy_config_free(&config);

  md_config_summary summary;
  CHECK(md_config_read(data_path("pooled_string.json"), &summary, &err) == MD_OK);
  CHECK(summary.has_pooled && isnan(summary.pooled_lambda) &&
        summary.pooled_half_life == 11.090354888959125);
  md_config_summary_free(&summary);
  CHECK(md_config_read(data_path("tau_string.json"), &summary, &err) == MD_OK);
  CHECK(isnan(summary.tau) && summary.page_size == 4 && summary.ewma_beta == 0.75);
  if (summary.n_regions == 2) CHECK(summary.regions[1].lambda == 0.125);
  md_config_summary_free(&summary);

  /* The shipped golden config loads: 7 regions, system pinned. */
  CHECK_MSG(md_policy_config_load(source_path("data/golden/qwen2-tiny-agent-450.json"), &config,
                                  &err) == MD_OK, "%s", err.message);
  CHECK(config.n_regions == 7 && config.page_size == 16);
  CHECK(md_policy_config_region(&config, "system") == 0 && config.regions[0].pinned);
  int scratchpad = md_policy_config_region(&config, "scratchpad");
  CHECK(scratchpad >= 0 && !config.regions[scratchpad].pinned &&
        isfinite(config.regions[scratchpad].lambda) && config.regions[scratchpad].lambda > 0);
  CHECK(config.kappa > 0 && isfinite(config.kappa) && config.alpha > 0);
  md_policy_config_free(&config);
}

int main(void) {
  test_hand_scores();
  test_prompt_clock();
  test_base_priority_order();
  test_streaming();
  test_h2o();
  test_snapkv();
  test_tova();
  test_memdecay_ablations();
  test_streaming_pinned();
  test_random_and_full();
  test_invariants();
  test_refusals();
  test_class_outside_table();
  test_table();
  test_config_load();
  return md_test_finish("test_policy");
}
