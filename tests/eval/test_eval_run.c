/* Properties of the eviction-probe evaluation (collector/eval/eval.h) on the
 * shipped checkpoint and the first episodes of the shipped short traces,
 * evicting by the shipped golden config:
 *  - after every eviction point the cache holds at most the budget
 *    (budget_pages x page_size tokens), and never more than the episode;
 *  - a budget of the whole episode evicts nothing, and every policy then
 *    answers every probe exactly as the full cache does;
 *  - the full cache keeps every answer token; the shipped traces' answers
 *    are all found in their regions;
 *  - memdecay (every region-aware policy) never evicts a pinned region's
 *    tokens: the answers of pinned regions are fully retained;
 *  - the opt-in policies (the further baselines and memdecay's ablations)
 *    hold the same properties, run by name on a config with a pooled fit;
 *  - the same inputs give byte-identical results (page size 1 too). */
#include <jansson.h>
#include <math.h>
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
      const md_policy_class *cls = md_policy_find(r->run_policy[run]);
      if (cls && cls->uses_regions)
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

/* The golden config with its pooled fit replaced by a known one (lambda
 * 0.0083, its half-life ln 2 / lambda), so that the test does not depend
 * on what the golden run measured. Written into the build directory; NULL
 * on failure. */
static char *config_with_pooled(const char *golden) {
  const char *build = getenv("MD_BUILD_ROOT");
  json_error_t json_err;
  json_t *root = json_load_file(golden, 0, &json_err);
  CHECK_MSG(root != NULL, "%s: %s", golden, json_err.text);
  if (!root) return NULL;
  json_t *pooled = json_pack("{s:f, s:f}", "lambda", 0.0083, "half_life", log(2.0) / 0.0083);
  json_object_set_new(root, "pooled", pooled);
  size_t n = strlen(build ? build : ".") + 64;
  char *path = malloc(n);
  if (path) snprintf(path, n, "%s/tests/eval/pooled-config.json", build ? build : ".");
  int written = path ? json_dump_file(root, path, JSON_INDENT(2)) : -1;
  json_decref(root);
  CHECK_MSG(written == 0, "cannot write %s", path ? path : "?");
  if (written != 0) {
    free(path);
    return NULL;
  }
  return path;
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
    CHECK(r.n_episodes == 3 && r.n_runs == 1 + 7 * 2 && r.page_size == 16);
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

  /* The opt-in policies, named, at 25% and at the whole episode: the same
   * properties (memdecay-shared reads the pooled fit). */
  char *pooled_config = config_with_pooled(config);
  if (pooled_config) {
    base_options(&o, model, traces, pooled_config);
    o.max_episodes = 2;
    for (size_t i = 0; i < md_policy_table_count; i++)
      if (md_policy_table[i]->opt_in) o.policies[o.n_policies++] = md_policy_table[i];
    o.budgets[0] = 0.25;
    o.budgets[1] = 1.0;
    o.n_budgets = 2;
    s = md_eval(&o, &r, &err);
    CHECK_MSG(s == MD_OK, "%s", err.message);
    if (s == MD_OK) {
      CHECK(o.n_policies == 4 && r.n_runs == 1 + 4 * 2);
      check_properties(&r);
      md_eval_results_free(&r);
    }
    free(pooled_config);
  }
  free(model);
  free(traces);
  free(config);
  return md_test_finish("eval_run");
}
