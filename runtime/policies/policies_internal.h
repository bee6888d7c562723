/* What the policy classes of runtime/policies/ share and nothing outside the
 * runtime includes: the code an ablation reuses from the policy it ablates,
 * so that the ablation differs from it only in what it takes away. */
#ifndef MD_RUNTIME_POLICIES_POLICIES_INTERNAL_H
#define MD_RUNTIME_POLICIES_POLICIES_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/policy_class.h"

/* ---- memdecay.c: the score of memdecay and its ablations ------------------- */

/* Where the decay rate of a token of region r comes from. */
typedef enum md_memdecay_rate {
  MD_MEMDECAY_RATE_REGION,  /* lambda_r, the region's own (memdecay) */
  MD_MEMDECAY_RATE_POOLED,  /* the config's pooled lambda for every region (memdecay-shared) */
  MD_MEMDECAY_RATE_NONE,    /* lambda = 0: no decay (memdecay-nodecay) */
} md_memdecay_rate;

/* memdecay's score of cached token i (runtime/policy.h, Scores): +infinity
 * for a pinned region's token, else b_r exp(-lambda dt) + alpha e / kappa,
 * with lambda from `rate` and the attention term only when `attention`
 * (memdecay-noattn leaves it out: alpha = 0). */
double md_memdecay_score(const md_policy_view *view, int64_t i, md_memdecay_rate rate,
                         bool attention);

/* ---- streaming.c: StreamingLLM's sinks and recency ------------------------- */

/* streaming's state and callbacks, which streaming-pinned runs with pinning
 * on (uses_regions): the sink pages kept, the others oldest first. */
typedef struct md_streaming_state {
  int64_t sink_tokens;
  int64_t sinks_seen;   /* sink tokens appended so far (<= sink_tokens) */
  int64_t sink_last;    /* position of the last sink token; -1 none */
} md_streaming_state;

md_status md_streaming_init(void *state, const md_policy_options *options,
                            const md_policy_config *config, md_error *err);
void md_streaming_reset(void *state, uint64_t seed);
md_status md_streaming_append(void *state, const md_policy_view *view, md_error *err);
md_status md_streaming_choose(void *state, const md_policy_view *view, const md_policy_page *pages,
                              int64_t n_pages, int64_t budget_pages, int64_t excess,
                              md_policy_candidate *order, int64_t *n_order, md_error *err);

/* ---- keyed.c: values kept per token by position (snapkv, tova) --------- */

/* Values a class stores for the tokens cached at an observe call, keyed by
 * their positions (ascending, as a view's are), and looked up after
 * evictions have moved the view's indices: a token appended after the call
 * has none (0). The storage grows by doubling and is kept across calls. */
typedef struct md_policy_keyed {
  int64_t n, cap;
  int64_t *position;  /* [n] ascending */
  double *value;      /* [n] */
} md_policy_keyed;

/* Takes the view's n positions with values[i] (widened to double), or 0
 * for every token when values is NULL. */
md_status md_policy_keyed_take(md_policy_keyed *k, const md_policy_view *view,
                               const float *values, md_error *err);
/* The index of the first stored position >= position (n when none). */
int64_t md_policy_keyed_lower_bound(const md_policy_keyed *k, int64_t position);
/* The value stored for position; 0 when absent. */
double md_policy_keyed_at(const md_policy_keyed *k, int64_t position);
/* The same, given the position's lower bound `at` (found by
 * md_policy_keyed_lower_bound or kept by a cursor). */
static inline double md_policy_keyed_value(const md_policy_keyed *k, int64_t at, int64_t position) {
  return at < k->n && k->position[at] == position ? k->value[at] : 0.0;
}
void md_policy_keyed_free(md_policy_keyed *k);

#endif
