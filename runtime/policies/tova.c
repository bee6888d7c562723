/* tova: TOVA (Oren et al. 2024, "Transformers are Multi-State RNNs": when
 * the cache is full, drop the token the current query attends to least,
 * attention averaged over heads) at page granularity
 * (runtime/policy.h, Scores; Pages and eviction): a token scores the
 * attention it received in the last observe call, and pages go lowest mean
 * score first. Where it departs from the paper: whole pages, one decision
 * for every layer (the attention is averaged over heads and captured
 * layers), and after a prefill chunk the "current query" is the chunk's
 * queries, their attention summed. No pinning, no recent window: the
 * newest token's page alone is kept by the engine. */
#include "runtime/policies/policies_internal.h"

typedef struct tova_state {
  md_policy_keyed received;  /* the last observe call's received attention */
} tova_state;

static void tova_reset(void *state, uint64_t seed) {
  (void)seed;
  ((tova_state *)state)->received.n = 0;
}

static md_status tova_observe(void *state, const md_policy_view *view, const float *received,
                              int64_t n_queries, md_error *err) {
  (void)n_queries;
  return md_policy_keyed_take(&((tova_state *)state)->received, view, received, err);
}

static double tova_score(const void *state, const md_policy_view *view, int64_t i) {
  return md_policy_keyed_at(&((const tova_state *)state)->received, view->position[i]);
}

static void tova_free(void *state) { md_policy_keyed_free(&((tova_state *)state)->received); }

const md_policy_class md_policy_class_tova = {
    .name = "tova",
    .description = "TOVA: least attended by the latest query first",
    .color = {0.0, 0.620, 0.451},
    .state_size = sizeof(tova_state),
    .reset = tova_reset,
    .observe = tova_observe,
    .score = tova_score,
    .choose = md_policy_choose_by_score,
    .free = tova_free,
};
