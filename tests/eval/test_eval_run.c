/* Properties of the eviction-probe evaluation (collector/eval/eval.h) on the
 * shipped checkpoint and the first episodes of the shipped short traces,
 * evicting by the shipped golden config:
 *  - after every eviction point the cache holds at most the budget
 *    (budget_pages x page_size tokens), and never more than the episode;
 *  - a budget of the whole episode evicts nothing, and every policy then
 *    answers every probe exactly as the full cache does;
 *  - the full cache keeps every answer token; the shipped traces' answers
 *    are all found in their regions;
 *  - memdecay never evicts a pinned region's tokens: the answers of pinned
 *    regions are fully retained;
 *  - the same inputs give byte-identical results (page size 1 too). */
#include <stdlib.h>
#include <string.h>

#include "collector/eval/eval.h"
#include "runtime/policy_table.h"
#include "tests/test_util.h"

static char *path_of(const char *relative) {
  const char *root = getenv("MD_SOURCE_ROOT");
  if (!root) root = ".";
  size_t n = strlen(root) + strlen(relative) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", root, relative);
  return p;
}

static void base_options(md_eval_options *o, char *model, char *traces, char *config) {
  md_eval_options_init(o);
  o->model_dir = model;
  o->traces_path = traces;
  o->config_path = config;
  o->threads = 1;
  o->max_episodes = 3;
}

static void check_properties(const md_eval_results *r) {
  for (size_t e = 0; e < r->n_episodes; e++) {
    const md_eval_episode *ep = &r->episodes[e];
    int64_t length = (int64_t)(ep->prompt_tokens + ep->continuation_tokens);
    const md_eval_run *full = &ep->runs[0];
    CHECK(!strcmp(r->run_policy[0], "full"));
    CHECK(full->evicted == 0 && full->final_cached == length);
    for (size_t k = 0; k < ep->n_probes; k++) {
      CHECK_MSG(full->probes[k].answer_in_region, "%s probe %zu", ep->id, k);
      CHECK(full->probes[k].answer_kept == full->probes[k].answer_tokens);
    }
    for (size_t run = 1; run < r->n_runs; run++) {
      const md_eval_run *x = &ep->runs[run];
      int64_t budget_tokens = x->budget_pages * r->page_size;
      CHECK_MSG(x->max_cached_after_eviction <= budget_tokens, "%s %s@%g: %lld > %lld", ep->id,
                r->run_policy[run], r->run_budget[run], (long long)x->max_cached_after_eviction,
                (long long)budget_tokens);
      CHECK(x->max_cached <= length);
      CHECK(x->final_cached + x->evicted == length);
      if (r->run_budget[run] == 1.0) {
        CHECK_MSG(x->evicted == 0, "%s %s@1 evicted %lld", ep->id, r->run_policy[run],
                  (long long)x->evicted);
        for (size_t k = 0; k < ep->n_probes; k++)
          CHECK_MSG(!strcmp(x->probes[k].output, full->probes[k].output) &&
                        x->probes[k].correct == full->probes[k].correct,
                    "%s %s@1 probe %zu: \"%s\" vs full \"%s\"", ep->id, r->run_policy[run], k,
                    x->probes[k].output, full->probes[k].output);
      } else {
        CHECK_MSG(x->evicted > 0, "%s %s@%g evicted nothing", ep->id, r->run_policy[run],
                  r->run_budget[run]);
      }
      if (!strcmp(r->run_policy[run], "memdecay") || !strcmp(r->run_policy[run], "memdecay-raw"))
        for (size_t k = 0; k < ep->n_probes; k++) {
          const char *region = ep->probes[k].region;
          for (size_t g = 0; g < r->n_regions; g++)
            if (r->pinned[g] && !strcmp(r->regions[g], region))
              CHECK_MSG(x->probes[k].answer_kept == x->probes[k].answer_tokens,
                        "%s %s: pinned %s answer lost %zu of %zu tokens", ep->id,
                        r->run_policy[run], region,
                        x->probes[k].answer_tokens - x->probes[k].answer_kept,
                        x->probes[k].answer_tokens);
        }
    }
  }
}

int main(void) {
  char *model = path_of("data/models/qwen2-tiny");
  char *traces = path_of("data/traces/agent-450.jsonl");
  char *config = path_of("data/golden/qwen2-tiny-agent-450.json");
  md_error err = {0};

  /* Every policy at 25% and at the whole episode, pages of the config's size. */
  md_eval_options o;
  base_options(&o, model, traces, config);
  o.budgets[0] = 0.25;
  o.budgets[1] = 1.0;
  o.n_budgets = 2;
  md_eval_results r;
  md_status s = md_eval(&o, &r, &err);
  CHECK_MSG(s == MD_OK, "%s", err.message);
  if (s == MD_OK) {
    CHECK(r.n_episodes == 3 && r.n_runs == 11 && r.page_size == 16);
    check_properties(&r);
    md_eval_results_free(&r);
  }

  /* Token granularity, twice: identical bytes. */
  base_options(&o, model, traces, config);
  o.max_episodes = 2;
  o.page_size = 1;
  o.policies[0] = md_policy_find("memdecay");
  o.policies[1] = md_policy_find("h2o");
  o.policies[2] = md_policy_find("random");
  o.n_policies = 3;
  o.budgets[0] = 0.5;
  o.n_budgets = 1;
  char *text[2] = {NULL, NULL};
  for (int pass = 0; pass < 2; pass++) {
    s = md_eval(&o, &r, &err);
    CHECK_MSG(s == MD_OK, "%s", err.message);
    if (s != MD_OK) break;
    CHECK(r.page_size == 1 && r.n_runs == 4);
    check_properties(&r);
    CHECK(md_eval_results_dump(&r, true, &text[pass], &err) == MD_OK);
    md_eval_results_free(&r);
  }
  CHECK(text[0] && text[1] && !strcmp(text[0], text[1]));
  free(text[0]);
  free(text[1]);
  free(model);
  free(traces);
  free(config);
  return md_test_finish("eval_run");
}
