/* collector/lifetimes: events of hand-built episodes, every expected row
 * derived by hand next to it from memdecay-calibrate(1), EXTRACT, and the decisions in
 * fit/extract/lifetimes.h, and the bad inputs. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fit/extract/lifetimes.h"
#include "tests/test_util.h"

/* The worked examples below are the last-use estimand at tau 1 and guard
 * 16 (the defaults before the estimand choice made gap at tau 3 the default:
 * memdecay-calibrate(1), EXTRACT); test_defaults checks today's defaults. */
#define LAST_USE_TAU1 ((md_lifetime_params){.estimand = MD_ESTIMAND_LAST_USE, .tau = 1.0, .guard = 16})

#define MAX_STEPS 48
#define MAX_TOKENS 96

static const char *const region_names[] = {"system", "user", "scratchpad"};
static const bool region_pinned[] = {true, false, false};
static const md_region_table regions = {3, region_names, region_pinned};
enum { SYSTEM, USER, SCRATCHPAD };

typedef struct built {
  md_attn_episode ep;
  size_t prompt;
  float attn[MAX_STEPS * MAX_TOKENS];
  uint32_t region[MAX_TOKENS];
  int32_t birth[MAX_TOKENS];
  int64_t page[MAX_TOKENS], token_id[MAX_TOKENS];
} built;

/* `prompt` prompt tokens (the first in SYSTEM, the rest in USER), then one
 * SCRATCHPAD token decoded per step: token prompt + t is born at step t.
 * All attention 0. */
static void build(built *b, size_t prompt, size_t steps) {
  memset(b, 0, sizeof *b);
  b->prompt = prompt;
  size_t tokens = prompt + steps;
  for (size_t i = 0; i < tokens; i++) {
    b->region[i] = i == 0 ? SYSTEM : i < prompt ? USER : SCRATCHPAD;
    b->birth[i] = i < prompt ? -1 : (int32_t)(i - prompt);
    b->page[i] = (int64_t)(i / 16);
    b->token_id[i] = 1000 + (int64_t)i;
  }
  b->ep = (md_attn_episode){.id = "ep-hand", .steps = steps, .tokens = tokens, .attn = b->attn,
                            .region = b->region, .birth = b->birth, .page = b->page,
                            .token_id = b->token_id};
}

/* a_t(i) such that a_hat = a n_t is `relative` (n_t = prompt + t + 1). */
static void set_relative(built *b, size_t t, size_t i, double relative) {
  b->attn[t * b->ep.tokens + i] = (float)(relative / (double)(b->prompt + t + 1));
}

static void set_attn(built *b, size_t t, size_t i, float a) { b->attn[t * b->ep.tokens + i] = a; }

typedef struct expected_row {
  int64_t pos;
  size_t region;
  double time;
  int event;
} expected_row;

static void check_rows(const md_event_buffer *got, const expected_row *want, size_t n,
                       const char *what) {
  CHECK_MSG(got->n == n, "%s: %zu rows, expected %zu", what, got->n, n);
  for (size_t r = 0; r < got->n && r < n; r++) {
    const md_event_row *row = &got->rows[r];
    CHECK_MSG(row->pos == want[r].pos && row->region == want[r].region &&
              row->time == want[r].time && row->event == want[r].event,
              "%s row %zu: got pos %lld region %zu time %g event %d, expected %lld %zu %g %d",
              what, r, (long long)row->pos, row->region, row->time, row->event,
              (long long)want[r].pos, want[r].region, want[r].time, want[r].event);
    CHECK(!strcmp(row->region_name, region_names[row->region]));
    CHECK(row->entry == 0.0 && row->weight == 1.0 && !strcmp(row->episode, "ep-hand"));
    CHECK(row->page == row->pos / 16 && row->token_id == 1000 + row->pos);
  }
}

/* The main hand-built episode: P = 7 prompt tokens, 40 decode steps, so
 * n_t = 7 + t + 1 = 8 + t and tokens 7 .. 46 are born at steps 0 .. 39. */
static void build_main(built *b) {
  build(b, 7, 40);
  /* token 0 (system): refreshed at 2, 9, 20 */
  set_relative(b, 2, 0, 2.0);
  set_relative(b, 9, 0, 2.0);
  set_relative(b, 20, 0, 2.0);
  /* token 1: refreshed at steps 0 and 5 */
  set_relative(b, 0, 1, 2.0);
  set_relative(b, 5, 1, 2.0);
  /* token 2: refreshed at step 30 only */
  set_relative(b, 30, 2, 2.0);
  /* token 3: a_hat = 0.5 at every step, never refreshed */
  for (size_t t = 0; t < 40; t++) set_relative(b, t, 3, 0.5);
  /* token 4: a_hat = 1 exactly at step 8 (n = 16, a = 1/16); at step 24
   * (n = 32) a = 1/32 - 2^-20, a_hat = 1 - 2^-15 < 1 */
  set_attn(b, 8, 4, 1.0f / 16);
  set_attn(b, 24, 4, 1.0f / 32 - 0x1p-20f);
  /* token 5: refreshed at step 23 = steps - guard - 1; token 6 at step 24 */
  set_relative(b, 23, 5, 3.0);
  set_relative(b, 24, 6, 3.0);
  /* token 7, born at 0: self-attention a_hat = 3 (a = 3/8); a = 1/16 at step
   * 7 where n = 15: a_hat = 15/16 < 1 */
  set_attn(b, 0, 7, 3.0f / 8);
  set_attn(b, 7, 7, 1.0f / 16);
  /* token 8, born at 1: a = 1/16 at step 8 where n = 16: a_hat = 1 */
  set_attn(b, 8, 8, 1.0f / 16);
  /* token 9, born at 2: a = 1/16 at step 9 where n = 17: a_hat = 17/16 */
  set_attn(b, 9, 9, 1.0f / 16);
  /* token 10, born at 3: self-attention a_hat = 5, then 1.5 at step 12 */
  set_relative(b, 3, 10, 5.0);
  set_relative(b, 12, 10, 1.5);
  /* token 14, born at 7: only its self-attention, a_hat = 6 */
  set_relative(b, 7, 14, 6.0);
  /* token 46, born at the last step 39: self-attention a = 0.9 */
  set_attn(b, 39, 46, 0.9f);
}

static void test_last_use(void) {
  static built b;
  build_main(&b);
  md_event_buffer events = {0};
  md_error err = {0};
  md_lifetime_params params = LAST_USE_TAU1;
  CHECK_MSG(md_lifetimes_episode(&b.ep, &regions, &params, md_event_buffer_sink, &events, NULL,
                                 &err) == MD_OK, "%s", err.message);
  /* steps 40, guard 16: a last refresh at t >= 24 is censored at 40 - origin. */
  static const expected_row want[] = {
      {0, SYSTEM, 21, 1},     /* last refresh 20 < 24: 20 - 0 + 1 */
      {1, USER, 6, 1},        /* last refresh 5: 5 - 0 + 1 */
      {2, USER, 40, 0},       /* last refresh 30 >= 24: censored at 40 - 0 */
                              /* token 3: never refreshed, no row */
      {4, USER, 9, 1},        /* a_hat = tau exactly at 8 counts: 8 - 0 + 1 */
      {5, USER, 24, 1},       /* 23 < 24: 23 - 0 + 1 */
      {6, USER, 40, 0},       /* 24 >= 24: censored */
                              /* token 7: 15/16 < 1 and its birth step do not count */
      {8, SCRATCHPAD, 8, 1},  /* born 1, refresh 8: 8 - 1 + 1 */
      {9, SCRATCHPAD, 8, 1},  /* born 2, refresh 9: 9 - 2 + 1 */
      {10, SCRATCHPAD, 10, 1} /* born 3, self-attention skipped, refresh 12: 12 - 3 + 1 */
                              /* tokens 14 and 46: self-attention only, no row */
  };
  check_rows(&events, want, sizeof want / sizeof *want, "last-use");
  md_event_buffer_free(&events);

  /* tau just above 1: token 4's a_hat = 1 and token 8's no longer refresh. */
  params.tau = 1.0 + 1e-9;
  CHECK(md_lifetimes_episode(&b.ep, &regions, &params, md_event_buffer_sink, &events, NULL,
                             &err) == MD_OK);
  CHECK(events.n == 7);
  for (size_t r = 0; r < events.n; r++) CHECK(events.rows[r].pos != 4 && events.rows[r].pos != 8);
  md_event_buffer_free(&events);
}

static void test_gap(void) {
  static built b;
  build_main(&b);
  md_event_buffer events = {0};
  md_error err = {0};
  md_lifetime_params params = {.estimand = MD_ESTIMAND_GAP, .tau = 1.0, .guard = 16};
  CHECK(md_lifetimes_episode(&b.ep, &regions, &params, md_event_buffer_sink, &events, NULL,
                             &err) == MD_OK);
  /* gaps r_{k+1} - r_k (event 1), then 40 - r_last (event 0); guard unused */
  static const expected_row want[] = {
      {0, SYSTEM, 7, 1},       /* 9 - 2 */
      {0, SYSTEM, 11, 1},      /* 20 - 9 */
      {0, SYSTEM, 20, 0},      /* 40 - 20 */
      {1, USER, 5, 1},         /* 5 - 0 */
      {1, USER, 35, 0},        /* 40 - 5 */
      {2, USER, 10, 0},        /* refreshed once: only 40 - 30 */
      {4, USER, 32, 0},        /* 40 - 8 */
      {5, USER, 17, 0},        /* 40 - 23 */
      {6, USER, 16, 0},        /* 40 - 24 */
      {8, SCRATCHPAD, 32, 0},  /* 40 - 8: the wait from birth to 8 is not a gap */
      {9, SCRATCHPAD, 31, 0},  /* 40 - 9 */
      {10, SCRATCHPAD, 28, 0}, /* 40 - 12 */
  };
  check_rows(&events, want, sizeof want / sizeof *want, "gap");
  md_event_buffer_free(&events);
}

/* The guard at its edges: P = 1, 3 steps (n_t = t + 2); token 0 has a = 0.5
 * at step 2 (n = 4, a_hat = 2), its last refresh. */
static void test_guard_edges(void) {
  static built b;
  build(&b, 1, 3);
  set_attn(&b, 2, 0, 0.5f);
  md_error err = {0};
  const struct { long guard; double time; int event; } cases[] = {
      {0, 3, 1},  /* 2 >= 3 - 0 is false: event at 2 - 0 + 1 = 3 */
      {1, 3, 0},  /* 2 >= 3 - 1: censored at 3 - 0 */
      {5, 3, 0},  /* guard beyond the window: everything censored */
  };
  for (size_t c = 0; c < 3; c++) {
    md_event_buffer events = {0};
    md_lifetime_params params = {.estimand = MD_ESTIMAND_LAST_USE, .tau = 1.0,
                                 .guard = cases[c].guard};
    CHECK(md_lifetimes_episode(&b.ep, &regions, &params, md_event_buffer_sink, &events, NULL,
                               &err) == MD_OK);
    CHECK(events.n == 1 && events.rows[0].pos == 0 && events.rows[0].time == cases[c].time &&
          events.rows[0].event == cases[c].event);
    md_event_buffer_free(&events);
  }
  /* gap: one refresh at the last step leaves an open gap of 3 - 2 = 1 */
  md_event_buffer events = {0};
  md_lifetime_params gap = {.estimand = MD_ESTIMAND_GAP, .tau = 1.0, .guard = 0};
  CHECK(md_lifetimes_episode(&b.ep, &regions, &gap, md_event_buffer_sink, &events, NULL, &err)
        == MD_OK);
  CHECK(events.n == 1 && events.rows[0].time == 1 && events.rows[0].event == 0);
  md_event_buffer_free(&events);
}

/* n_t and the relative-attention series (P = 7: n_t = 8 + t). */
static void test_visible_and_series(void) {
  static built b;
  build_main(&b);
  uint32_t visible[40];
  CHECK(md_attn_episode_check(&b.ep, 3, visible, NULL) == MD_OK);
  CHECK(visible[0] == 8 && visible[8] == 16 && visible[39] == 47);
  double series[40];
  md_token_relative_attention(&b.ep, visible, 8, series);  /* born 1: ages 0 .. 38 */
  CHECK(series[0] == 0.0 && series[7] == 1.0);             /* step 8 = age 7: 16 / 16 */
  md_token_relative_attention(&b.ep, visible, 7, series);  /* born 0 */
  CHECK(series[0] == 3.0 && series[7] == 15.0 / 16);
  CHECK(md_token_origin(&b.ep, 10) == 3 && md_token_origin(&b.ep, 3) == 0);
}

/* What the episode feeds the statistics: base priorities by hand. */
static void test_stats_feed(void) {
  static built b;
  build_main(&b);
  md_error err = {0};
  md_attn_norm_params np = MD_ATTN_NORM_PARAMS_DEFAULT;
  md_attn_norm *stats = NULL;
  CHECK(md_attn_norm_new(&regions, &np, &stats, &err) == MD_OK);
  md_lifetime_params params = LAST_USE_TAU1;
  CHECK(md_lifetimes_episode(&b.ep, &regions, &params, NULL, NULL, stats, &err) == MD_OK);
  bool again = true;
  CHECK(md_attn_norm_end_pass(stats, &again, &err) == MD_OK && !again);
  md_attn_norm_result res;
  CHECK(md_attn_norm_finish(stats, &res, &err) == MD_OK);
  /* system: token 0, refreshed: 1/1. user: tokens 1-6, all but 3 refreshed:
   * 5/6. scratchpad: 40 decoded tokens, the one born at step 39 unobserved;
   * refreshed 8, 9, 10: 3/39. */
  CHECK(res.regions[SYSTEM].tokens == 1 && res.regions[SYSTEM].refreshed_tokens == 1);
  CHECK(res.regions[USER].observed_tokens == 6 && res.regions[USER].refreshed_tokens == 5);
  CHECK_REL(res.regions[USER].refreshed_share, 5.0 / 6, 1e-15);
  CHECK(res.regions[SCRATCHPAD].tokens == 40 && res.regions[SCRATCHPAD].observed_tokens == 39);
  CHECK(res.regions[SCRATCHPAD].refreshed_tokens == 3);
  CHECK_REL(res.regions[SCRATCHPAD].base_priority, 3.0 / 39, 1e-15);
  CHECK(res.regions[SYSTEM].base_priority == 1.0 && res.regions[SYSTEM].pinned);
  /* alpha: median of the unpinned shares {5/6, 3/39} = their mean */
  CHECK(res.alpha_defined && res.alpha_regions == 2);
  CHECK_REL(res.alpha, (5.0 / 6 + 3.0 / 39) / 2, 1e-15);
  /* visible pairs: 7 prompt tokens x 40 steps + sum over births of 40 - b */
  uint64_t pairs = 0;
  for (size_t r = 0; r < 3; r++) pairs += res.regions[r].visible_pairs;
  CHECK(pairs == 7 * 40 + 40 * 41 / 2);
  /* kappa samples: the unpinned pairs, all but token 0's 40 */
  CHECK(res.kappa_samples == pairs - 40);
  md_attn_norm_result_free(&res);
  md_attn_norm_free(stats);
}

static md_status failing_sink(void *user, const md_event_row *row, md_error *err) {
  (void)row;
  int *calls = user;
  if (++*calls == 2) return md_fail(err, MD_E_IO, "events.csv: disk full");
  return MD_OK;
}

static void test_sink_failure(void) {
  static built b;
  build_main(&b);
  md_error err = {0};
  int calls = 0;
  md_lifetime_params params = LAST_USE_TAU1;
  CHECK(md_lifetimes_episode(&b.ep, &regions, &params, failing_sink, &calls, NULL, &err) ==
        MD_E_IO);
  CHECK(calls == 2 && strstr(err.message, "disk full"));
}

/* Runs one episode expecting `status` and a message containing `text`. */
static void expect_failure(const built *b, const md_lifetime_params *params, md_status status,
                           const char *text) {
  md_error err = {0};
  md_event_buffer events = {0};
  md_status got = md_lifetimes_episode(&b->ep, &regions, params, md_event_buffer_sink, &events,
                                       NULL, &err);
  CHECK_MSG(got == status && strstr(err.message, text), "status %d, message \"%s\", wanted %s",
            (int)got, err.message, text);
  CHECK(events.n == 0);
  md_event_buffer_free(&events);
}

static void test_bad_episodes(void) {
  static built b;
  md_lifetime_params params = LAST_USE_TAU1;
  build(&b, 3, 4);
  b.ep.steps = 0;
  expect_failure(&b, &params, MD_E_FORMAT, "ep-hand: attention matrix is 0 x 7");
  build(&b, 3, 4);
  b.ep.tokens = 0;
  expect_failure(&b, &params, MD_E_FORMAT, "needs at least one decode step and one token");
  build(&b, 3, 4);
  set_attn(&b, 2, 1, NAN);
  expect_failure(&b, &params, MD_E_FORMAT, "attn[2][1] = nan: attention must be a finite number");
  build(&b, 3, 4);
  set_attn(&b, 1, 0, -0.25f);
  expect_failure(&b, &params, MD_E_FORMAT, "attn[1][0] = -0.25");
  build(&b, 3, 4);
  set_attn(&b, 0, 2, INFINITY);
  expect_failure(&b, &params, MD_E_FORMAT, "attn[0][2] = inf");
  build(&b, 3, 4);
  set_attn(&b, 3, 2, 1.5f);
  expect_failure(&b, &params, MD_E_FORMAT, "attn[3][2] = 1.5: attention must be a finite "
                 "number in [0, 1]");
  build(&b, 3, 4);
  set_attn(&b, 1, 5, 0.125f);  /* token 5 is born at step 2 */
  expect_failure(&b, &params, MD_E_FORMAT, "attn[1][5] = 0.125 on a token born at step 2");
  build(&b, 3, 4);
  b.birth[4] = 4;
  expect_failure(&b, &params, MD_E_FORMAT, "token 4: birth 4 outside -1 .. 3");
  build(&b, 3, 4);
  b.birth[0] = -2;
  expect_failure(&b, &params, MD_E_FORMAT, "token 0: birth -2 outside -1 .. 3");
  build(&b, 3, 4);
  b.birth[4] = 0;  /* tokens 3 and 4 both born at step 0, none at step 1 */
  expect_failure(&b, &params, MD_E_FORMAT, "2 tokens born at decode step 0");
  build(&b, 3, 4);
  b.birth[4] = -1;  /* a fourth prompt token: no token born at step 1 */
  expect_failure(&b, &params, MD_E_FORMAT, "0 tokens born at decode step 1");
  build(&b, 3, 4);
  b.region[2] = 3;
  expect_failure(&b, &params, MD_E_FORMAT, "token 2: region index 3, but the run has 3 regions");
}

static void test_bad_params(void) {
  static built b;
  build(&b, 3, 4);
  md_lifetime_params params = LAST_USE_TAU1;
  params.tau = 0.0;
  expect_failure(&b, &params, MD_E_INVALID, "tau = 0: must be a finite number > 0");
  params.tau = -1.0;
  expect_failure(&b, &params, MD_E_INVALID, "tau = -1");
  params.tau = NAN;
  expect_failure(&b, &params, MD_E_INVALID, "tau = nan");
  params = LAST_USE_TAU1;
  params.guard = -1;
  expect_failure(&b, &params, MD_E_INVALID, "guard = -1: must be >= 0");
  params = LAST_USE_TAU1;
  params.estimand = (md_estimand)7;
  expect_failure(&b, &params, MD_E_INVALID, "estimand 7");

  md_estimand estimand;
  CHECK(md_estimand_parse("gap", &estimand) && estimand == MD_ESTIMAND_GAP);
  CHECK(md_estimand_parse("last-use", &estimand) && estimand == MD_ESTIMAND_LAST_USE);
  CHECK(!md_estimand_parse("last_use", &estimand));
  CHECK(!strcmp(md_estimand_name(MD_ESTIMAND_GAP), "gap"));
}

/* Without page and token ids the diagnostics are -1. */
static void test_optional_diagnostics(void) {
  static built b;
  build(&b, 1, 3);
  set_attn(&b, 2, 0, 0.5f);
  b.ep.page = NULL;
  b.ep.token_id = NULL;
  md_event_buffer events = {0};
  md_lifetime_params params = LAST_USE_TAU1;
  CHECK(md_lifetimes_episode(&b.ep, &regions, &params, md_event_buffer_sink, &events, NULL,
                             NULL) == MD_OK);
  CHECK(events.n == 1 && events.rows[0].page == -1 && events.rows[0].token_id == -1);
  md_event_buffer_free(&events);
}

/* The defaults extract and run use, chosen by bench/estimand_choice.sh. */
static void test_defaults(void) {
  md_lifetime_params d = MD_LIFETIME_PARAMS_DEFAULT;
  CHECK(d.estimand == MD_ESTIMAND_GAP && d.tau == 3.0 && d.guard == 16);
}

int main(void) {
  test_defaults();
  test_last_use();
  test_gap();
  test_guard_edges();
  test_visible_and_series();
  test_stats_feed();
  test_sink_failure();
  test_bad_episodes();
  test_bad_params();
  test_optional_diagnostics();
  return md_test_finish("extract_lifetimes");
}
