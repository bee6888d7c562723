/* A policy from outside the table through the eval stage: "oldest-first" is
 * defined in this file only (a class of runtime/policy_class.h), given to
 * md_eval in md_eval_options.policies next to the table's streaming, and run
 * on the shipped checkpoint, the first episodes of the shipped short traces
 * and the golden config. Checked:
 *  - its runs are in the results under its name, in the order given, at
 *    every budget, and its hooks ran;
 *  - what it evicted is the oldest evictable pages: after each eviction its
 *    next append sees exactly the cache it chose (the pages it put first
 *    gone, every other page there);
 *  - its recall is sane: every probe asked (the full cache's totals per
 *    region), recalled <= total, the cache within the budget after each
 *    eviction, the whole-episode budget evicting nothing and answering as
 *    the full cache does;
 *  - it is the policy that ran: it pins (uses_regions), so the pinned
 *    region's answers are all kept, where streaming at the same budget
 *    loses some of them. */
#include <stdlib.h>
#include <string.h>

#include "collector/eval/eval.h"
#include "runtime/policy_class.h"
#include "runtime/policy_table.h"
#include "tests/test_util.h"

/* ---- the policy ------------------------------------------------------------------- */

typedef struct oldest_state {
  int64_t *gone;       /* pages the last eviction is to remove */
  int64_t n_gone, cap_gone;
  int64_t expect_n;    /* tokens cached after it; -1: nothing to verify */
} oldest_state;

static int64_t chooses = 0, verified = 0, resets = 0;

static void oldest_reset(void *state, uint64_t seed) {
  (void)seed;
  ((oldest_state *)state)->expect_n = -1;
  resets++;
}

/* After an eviction, the next append sees the cache less the chosen pages. */
static md_status oldest_append(void *state, const md_policy_view *v, md_error *err) {
  oldest_state *s = state;
  if (s->expect_n < 0) return MD_OK;
  if (v->n - 1 != s->expect_n)
    return md_fail(err, MD_E_INVALID, "%lld tokens cached after the eviction, expected %lld",
                   (long long)(v->n - 1), (long long)s->expect_n);
  for (int64_t i = 0; i < v->n; i++)
    for (int64_t k = 0; k < s->n_gone; k++)
      if (v->position[i] / v->page_size == s->gone[k])
        return md_fail(err, MD_E_INVALID, "position %lld of evicted page %lld still cached",
                       (long long)v->position[i], (long long)s->gone[k]);
  s->expect_n = -1;
  verified++;
  return MD_OK;
}

/* Every evictable page, oldest first; remembers what the engine will take. */
static md_status oldest_choose(void *state, const md_policy_view *v, const md_policy_page *pages,
                               int64_t n_pages, int64_t budget_pages, int64_t excess,
                               md_policy_candidate *order, int64_t *n_order, md_error *err) {
  (void)budget_pages;
  oldest_state *s = state;
  chooses++;
  if (s->cap_gone < n_pages) {
    int64_t *gone = realloc(s->gone, (size_t)n_pages * sizeof *gone);
    if (!gone) return md_fail(err, MD_E_NOMEM, "out of memory");
    s->gone = gone;
    s->cap_gone = n_pages;
  }
  int64_t n = 0, left = v->n;
  s->n_gone = 0;
  for (int64_t j = 0; j < n_pages; j++) {
    if (!pages[j].evictable) continue;
    order[n++].index = j;
    if (s->n_gone < excess) {
      s->gone[s->n_gone++] = pages[j].page;
      left -= pages[j].count;
    }
  }
  s->expect_n = left;
  *n_order = n;
  return MD_OK;
}

static void oldest_free(void *state) { free(((oldest_state *)state)->gone); }

static const md_policy_class oldest_first = {
    .name = "oldest-first",
    .description = "every unpinned page, oldest first (a test's policy)",
    .color = {0.0, 0.6, 0.5},
    .uses_regions = true,
    .state_size = sizeof(oldest_state),
    .reset = oldest_reset,
    .append = oldest_append,
    .choose = oldest_choose,
    .free = oldest_free,
};

/* ---- the run -------------------------------------------------------------------- */

static char *path_of(const char *relative) {
  const char *root = getenv("MD_SOURCE_ROOT");
  if (!root) root = ".";
  size_t n = strlen(root) + strlen(relative) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", root, relative);
  return p;
}

/* The share of the pinned regions' answer tokens kept, over every episode. */
static double pinned_retention(const md_eval_results *r, size_t run) {
  size_t kept = 0, all = 0;
  for (size_t g = 0; g < r->n_regions; g++) {
    if (!r->pinned[g]) continue;
    const md_eval_cell *c = md_eval_cell_at(r, run, g);
    kept += c->answer_kept;
    all += c->answer_tokens;
  }
  return all ? (double)kept / (double)all : -1.0;
}

int main(void) {
  char *model = path_of("data/models/qwen2-tiny");
  char *traces = path_of("data/traces/agent-450.jsonl");
  char *config = path_of("data/golden/qwen2-tiny-agent-450.json");
  CHECK(md_policy_find(oldest_first.name) == NULL);  /* not in the table */
  md_eval_options o;
  md_eval_options_init(&o);
  o.model_dir = model;
  o.traces_path = traces;
  o.config_path = config;
  o.threads = 1;
  o.max_episodes = 3;
  o.policies[0] = &oldest_first;
  o.policies[1] = md_policy_find("streaming");
  o.n_policies = 2;
  o.budgets[0] = 0.25;
  o.budgets[1] = 1.0;
  o.n_budgets = 2;
  md_eval_results r;
  md_error err = {0};
  md_status s = md_eval(&o, &r, &err);
  CHECK_MSG(s == MD_OK, "%s", err.message);
  if (s == MD_OK) {
    /* full, then oldest-first and streaming at 0.25 and 1 */
    CHECK(r.n_episodes == 3 && r.n_runs == 5);
    CHECK(!strcmp(r.run_policy[0], "full"));
    CHECK(!strcmp(r.run_policy[1], "oldest-first") && r.run_budget[1] == 0.25);
    CHECK(!strcmp(r.run_policy[2], "oldest-first") && r.run_budget[2] == 1.0);
    CHECK(!strcmp(r.run_policy[3], "streaming") && r.run_budget[3] == 0.25);
    int oldest = md_eval_run_index(&r, "oldest-first", 0.25);
    int streaming = md_eval_run_index(&r, "streaming", 0.25);
    CHECK(oldest == 1 && streaming == 3);
    /* its hooks ran: a reset per run (3 episodes x 2 budgets, and one at
     * each md_policy_new: a policy per run, the runs of an episode being
     * stepped together, and the one eval makes to try the config before
     * any model work), evictions chosen and each verified at the next
     * append */
    CHECK_MSG(resets == 9, "%lld resets", (long long)resets);
    CHECK_MSG(chooses > 0 && verified > 0 && verified <= chooses, "%lld chosen, %lld verified",
              (long long)chooses, (long long)verified);
    for (size_t e = 0; e < r.n_episodes; e++) {
      const md_eval_episode *ep = &r.episodes[e];
      const md_eval_run *full = &ep->runs[0], *x = &ep->runs[1], *whole = &ep->runs[2];
      int64_t length = (int64_t)(ep->prompt_tokens + ep->continuation_tokens);
      CHECK_MSG(x->evicted > 0 && x->final_cached + x->evicted == length, "%s", ep->id);
      CHECK_MSG(x->max_cached_after_eviction <= x->budget_pages * r.page_size, "%s: %lld > %lld",
                ep->id, (long long)x->max_cached_after_eviction,
                (long long)(x->budget_pages * r.page_size));
      CHECK(whole->evicted == 0);
      for (size_t k = 0; k < ep->n_probes; k++) {
        CHECK(x->probes[k].answer_kept <= x->probes[k].answer_tokens);
        CHECK_MSG(!strcmp(whole->probes[k].output, full->probes[k].output) &&
                      whole->probes[k].correct == full->probes[k].correct,
                  "%s probe %zu at the whole episode: \"%s\" vs full \"%s\"", ep->id, k,
                  whole->probes[k].output, full->probes[k].output);
      }
    }
    for (size_t g = 0; g < r.n_regions; g++) {
      const md_eval_cell *full = md_eval_cell_at(&r, 0, g), *c = md_eval_cell_at(&r, 1, g);
      CHECK_MSG(c->total == full->total && c->recalled <= c->total, "%s: %zu/%zu, full %zu",
                r.regions[g], c->recalled, c->total, full->total);
    }
    double kept = pinned_retention(&r, 1), kept_streaming = pinned_retention(&r, 3);
    CHECK_MSG(kept == 1.0, "oldest-first kept %g of the pinned answers' tokens", kept);
    CHECK_MSG(kept_streaming >= 0 && kept_streaming < 1.0,
              "streaming kept %g of the pinned answers' tokens", kept_streaming);
    md_eval_results_free(&r);
  }

  /* Two policies of one name are refused before any model work. */
  o.policies[1] = &oldest_first;
  s = md_eval(&o, &r, &err);
  CHECK_MSG(s == MD_E_INVALID && strstr(err.message, "policy oldest-first is listed twice"),
            "%d %s", (int)s, err.message);
  free(model);
  free(traces);
  free(config);
  return md_test_finish("eval_policy_class");
}
