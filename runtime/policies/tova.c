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
#include <stdlib.h>

#include "runtime/policies/policies_internal.h"

typedef struct tova_state {
  /* the last observe call's received attention, by position */
  int64_t n, cap;
  int64_t *position;
  double *received;
} tova_state;

static void tova_reset(void *state, uint64_t seed) {
  (void)seed;
  ((tova_state *)state)->n = 0;
}

static md_status tova_observe(void *state, const md_policy_view *view, const float *received,
                              int64_t n_queries, md_error *err) {
  (void)n_queries;
  tova_state *s = state;
  if (view->n > s->cap) {
    int64_t cap = s->cap ? s->cap : 256;
    while (cap < view->n) cap *= 2;
    int64_t *position = realloc(s->position, (size_t)cap * sizeof *position);
    if (position) s->position = position;
    double *value = realloc(s->received, (size_t)cap * sizeof *value);
    if (value) s->received = value;
    if (!position || !value) return md_fail(err, MD_E_NOMEM, "out of memory");
    s->cap = cap;
  }
  for (int64_t i = 0; i < view->n; i++) {
    s->position[i] = view->position[i];
    s->received[i] = received[i];
  }
  s->n = view->n;
  return MD_OK;
}

static double tova_score(const void *state, const md_policy_view *view, int64_t i) {
  const tova_state *s = state;
  return md_policy_value_at(s->position, s->received, s->n, view->position[i]);
}

static void tova_free(void *state) {
  tova_state *s = state;
  free(s->position);
  free(s->received);
}

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
