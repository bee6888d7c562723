/* random: uniformly random evictable pages, without replacement
 * (runtime/policy.h, Pages and eviction), drawn with a self-contained
 * splitmix64 generator seeded by md_policy_options.seed / md_policy_reset.
 * No pinning. The draws: one uniform_below per page taken, in the order of a
 * partial Fisher-Yates shuffle of the evictable pages (oldest first). */
#include <stdint.h>

#include "runtime/policy_class.h"

typedef struct random_state {
  uint64_t rng;
} random_state;

/* splitmix64 (Steele, Lea and Flood 2014): a 64-bit state, one add and a
 * mix per draw; enough for choosing pages, and the same on every platform. */
static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in [0, n), n >= 1, without modulo bias (rejection). */
static uint64_t uniform_below(uint64_t *state, uint64_t n) {
  uint64_t threshold = (0 - n) % n;  /* 2^64 mod n */
  for (;;) {
    uint64_t x = splitmix64(state);
    if (x >= threshold) return x % n;
  }
}

static void random_reset(void *state, uint64_t seed) { ((random_state *)state)->rng = seed; }

static md_status random_choose(void *state, const md_policy_view *view,
                               const md_policy_page *pages, int64_t n_pages, int64_t budget_pages,
                               int64_t excess, md_policy_candidate *order, int64_t *n_order,
                               md_error *err) {
  (void)view, (void)budget_pages, (void)err;
  random_state *s = state;
  int64_t n_cand = 0;
  for (int64_t j = 0; j < n_pages; j++) {
    if (pages[j].evictable) order[n_cand++].index = j;
  }
  /* A partial Fisher-Yates shuffle: order[0 .. take-1] is a uniform sample
   * without replacement. */
  for (int64_t k = 0; k < n_cand && k < excess; k++) {
    int64_t pick = k + (int64_t)uniform_below(&s->rng, (uint64_t)(n_cand - k));
    md_policy_candidate tmp = order[k];
    order[k] = order[pick];
    order[pick] = tmp;
  }
  *n_order = n_cand;
  return MD_OK;
}

const md_policy_class md_policy_class_random = {
    .name = "random",
    .description = "uniformly random pages",
    .parameters = "seeded by --seed",
    .color = {0.60, 0.60, 0.60},
    .state_size = sizeof(random_state),
    .reset = random_reset,
    .choose = random_choose,
};
