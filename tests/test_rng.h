/* Reproducible random test inputs: xorshift64* (Vigna, "An experimental
 * exploration of Marsaglia's xorshift generators, scrambled", 2016), the
 * high 32 bits of each output. Each test keeps its own state and seed. */
#ifndef MD_TESTS_TEST_RNG_H
#define MD_TESTS_TEST_RNG_H

#include <stdint.h>

static inline uint32_t md_test_rng_u32(uint64_t *state) {
  *state ^= *state >> 12;
  *state ^= *state << 25;
  *state ^= *state >> 27;
  return (uint32_t)((*state * 2685821657736338717ull) >> 32);
}

/* Uniform on [lo, hi) with 24 random bits (every step a float can take). */
static inline float md_test_rng_uniform(uint64_t *state, float lo, float hi) {
  return lo + (hi - lo) * (float)(md_test_rng_u32(state) >> 8) / (float)(1u << 24);
}

#endif
