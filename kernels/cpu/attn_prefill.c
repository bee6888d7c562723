/* Prefill attention's two products for a tile of query rows of one KV head
 * (contracts in cpu_internal.h; attention.c calls them per tile).
 *
 * Why our own: the tile's products are sgemm calls with an inner dimension
 * (scores) or an output width (values) of head_dim = 64, where OpenBLAS
 * spends a third of the time outside its kernel: zeroing the score matrix
 * before accumulating into it (beta = 0), packing both operands on every
 * call, and the caller copying the stacked queries in and the outputs out.
 * Here:
 *   - the queries and the scores' rows are the broadcast operand, read in
 *     place through one pointer per row, so the tile's rows (the group's
 *     heads stacked, each a run of positions) need no copy, and the outputs
 *     are written straight to their rows of the attention output;
 *   - the keys are packed once per call and KV head into panels of 16 keys,
 *     [panel][head_dim][16] (md_cpu_pack_keys), reused by every tile; the
 *     values are read in place (16 consecutive floats of a value row are
 *     already what the product wants);
 *   - blocks of 6 rows x 16 columns accumulate in 12 registers over the
 *     whole inner dimension (12 independent FMA chains cover AVX2's FMA
 *     latency times its two FMA ports) and are stored once: no zeroing, no
 *     read-modify-write of the output;
 *   - the values' product runs chunk of MD_VALUE_CHUNK keys by chunk,
 *     every block of rows over the chunk in turn, so that the chunk's
 *     values (16 KiB) are read from L1 by all the tile's rows (block by
 *     block over all the keys, each block would read the whole 435 KiB of
 *     a 1,700-token head's values from L2); the running sums wait in the
 *     output rows between chunks;
 *   - causality: a block of rows computes scores only up to its longest
 *     row's visible keys and multiplies values only up to them (the
 *     softmax has zeroed each row beyond its own), so the diagonal of the
 *     causal triangle is not computed twice.
 * Each output is one FMA chain in a fixed order (over head_dim, or over the
 * keys), independent of threads and tiling. The AVX-512 versions (6 rows x
 * 64 columns in 24 registers) are in avx512.c; the portable path keeps
 * sgemm. */
#include "kernels/cpu/avx512.h"
#include "kernels/cpu/cpu_internal.h"

#define MD_PANEL 16 /* keys per packed panel, columns per block */
#define MD_BLOCK_ROWS 6
#define MD_VALUE_CHUNK 64 /* keys: their values (16 KiB) stay in L1 */

int64_t md_cpu_prefill_ld(int64_t n) { return (n + MD_PANEL - 1) / MD_PANEL * MD_PANEL; }

int64_t md_cpu_packed_keys_floats(int64_t n, int hd) { return md_cpu_prefill_ld(n) * hd; }

void md_cpu_pack_keys(float *packed, const float *keys, int64_t n, int hd) {
  int64_t panels = (n + MD_PANEL - 1) / MD_PANEL;
  for (int64_t p = 0; p < panels; p++) {
    float *dst = packed + p * hd * MD_PANEL;
    int64_t j0 = p * MD_PANEL, count = n - j0 < MD_PANEL ? n - j0 : MD_PANEL;
    for (int64_t j = 0; j < MD_PANEL; j++)
      for (int d = 0; d < hd; d++) dst[d * MD_PANEL + j] = j < count ? keys[(j0 + j) * hd + d] : 0.0f;
  }
}

bool md_cpu_prefill_kernels(md_cpu_isa isa, int hd) {
#if defined(__x86_64__) || defined(__i386__)
  return isa >= MD_CPU_ISA_AVX2 && hd > 0 && hd % MD_PANEL == 0;
#else
  (void)isa, (void)hd;
  return false;
#endif
}

/* The most keys any of rows [r, r + g) sees. */
static int64_t most_visible(const int64_t *visible, int64_t r, int g) {
  int64_t most = 0;
  for (int i = 0; i < g; i++) most = visible[r + i] > most ? visible[r + i] : most;
  return most;
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MD_AVX2 __attribute__((target("avx2,fma,f16c")))
#define MD_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) static inline
/* Loops over accumulator arrays unrolled whole, so the arrays live in
 * registers (without it GCC 12 keeps them on the stack). */
#define MD_UNROLL _Pragma("GCC unroll 16")

/* Scores of rows [r, r + g) (g <= 6, a constant where inlined) against every
 * panel of keys up to their longest row's visible keys. */
MD_AVX2_INLINE void scores_block(float *scores, int64_t ld, const float *const *q_rows,
                                 const int64_t *visible, int64_t r, int g, const float *packed,
                                 int hd, float scale) {
  const float *q[MD_BLOCK_ROWS];
  MD_UNROLL
  for (int i = 0; i < g; i++) q[i] = q_rows[r + i];
  const __m256 vscale = _mm256_set1_ps(scale);
  int64_t keys = most_visible(visible, r, g);
  for (int64_t j0 = 0; j0 < keys; j0 += MD_PANEL) {
    const float *kp = packed + j0 * hd; /* panel j0 / 16: [hd][16] */
    __m256 lo[MD_BLOCK_ROWS], hi[MD_BLOCK_ROWS];
    MD_UNROLL
    for (int i = 0; i < g; i++) lo[i] = hi[i] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d++) {
      __m256 k0 = _mm256_loadu_ps(kp + d * MD_PANEL), k1 = _mm256_loadu_ps(kp + d * MD_PANEL + 8);
      MD_UNROLL
      for (int i = 0; i < g; i++) {
        __m256 qd = _mm256_broadcast_ss(q[i] + d);
        lo[i] = _mm256_fmadd_ps(qd, k0, lo[i]);
        hi[i] = _mm256_fmadd_ps(qd, k1, hi[i]);
      }
    }
    MD_UNROLL
    for (int i = 0; i < g; i++) {
      float *s = scores + (r + i) * ld + j0;
      _mm256_storeu_ps(s, _mm256_mul_ps(lo[i], vscale));
      _mm256_storeu_ps(s + 8, _mm256_mul_ps(hi[i], vscale));
    }
  }
}

/* Outputs of rows [r, r + g) over keys [k0, k1): the running sums start
 * from zero at the first key and wait in the output rows between key
 * chunks (stored and reloaded exactly: each output is still one chain in
 * key order), per 16 columns of head_dim. */
MD_AVX2_INLINE void values_block(float *const *out_rows, const float *p, int64_t ld, int64_t r,
                                 int g, int64_t k0, int64_t k1, const float *values, int hd) {
  const float *w[MD_BLOCK_ROWS];
  float *o[MD_BLOCK_ROWS];
  MD_UNROLL
  for (int i = 0; i < g; i++) w[i] = p + (r + i) * ld, o[i] = out_rows[r + i];
  for (int d0 = 0; d0 < hd; d0 += MD_PANEL) {
    __m256 lo[MD_BLOCK_ROWS], hi[MD_BLOCK_ROWS];
    MD_UNROLL
    for (int i = 0; i < g; i++) {
      lo[i] = k0 ? _mm256_loadu_ps(o[i] + d0) : _mm256_setzero_ps();
      hi[i] = k0 ? _mm256_loadu_ps(o[i] + d0 + 8) : _mm256_setzero_ps();
    }
    for (int64_t k = k0; k < k1; k++) {
      const float *v = values + k * hd + d0;
      __m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8);
      MD_UNROLL
      for (int i = 0; i < g; i++) {
        __m256 pk = _mm256_broadcast_ss(w[i] + k);
        lo[i] = _mm256_fmadd_ps(pk, v0, lo[i]);
        hi[i] = _mm256_fmadd_ps(pk, v1, hi[i]);
      }
    }
    MD_UNROLL
    for (int i = 0; i < g; i++) {
      _mm256_storeu_ps(o[i] + d0, lo[i]);
      _mm256_storeu_ps(o[i] + d0 + 8, hi[i]);
    }
  }
}

/* One function per block height, so that each is compiled with g constant
 * and its accumulators in registers. */
#define MD_PREFILL_AVX2(G)                                                                         \
  MD_AVX2 static void scores_##G(float *scores, int64_t ld, const float *const *q_rows,           \
                                 const int64_t *visible, int64_t r, const float *packed, int hd,  \
                                 float scale) {                                                   \
    scores_block(scores, ld, q_rows, visible, r, G, packed, hd, scale);                           \
  }                                                                                               \
  MD_AVX2 static void values_##G(float *const *out_rows, const float *p, int64_t ld, int64_t r,   \
                                 int64_t k0, int64_t k1, const float *values, int hd) {           \
    values_block(out_rows, p, ld, r, G, k0, k1, values, hd);                                      \
  }
MD_PREFILL_AVX2(1)
MD_PREFILL_AVX2(2)
MD_PREFILL_AVX2(3)
MD_PREFILL_AVX2(4)
MD_PREFILL_AVX2(5)
MD_PREFILL_AVX2(6)

typedef void (*scores_fn)(float *, int64_t, const float *const *, const int64_t *, int64_t,
                          const float *, int, float);
typedef void (*values_fn)(float *const *, const float *, int64_t, int64_t, int64_t, int64_t,
                          const float *, int);
static const scores_fn scores_by_rows[MD_BLOCK_ROWS + 1] = {
    NULL, scores_1, scores_2, scores_3, scores_4, scores_5, scores_6,
};
static const values_fn values_by_rows[MD_BLOCK_ROWS + 1] = {
    NULL, values_1, values_2, values_3, values_4, values_5, values_6,
};
#endif

bool md_cpu_prefill_scores(md_cpu_isa isa, float *scores, int64_t ld, const float *const *q_rows,
                           const int64_t *visible, int64_t m, const float *packed_keys, int hd,
                           float scale) {
  if (!md_cpu_prefill_kernels(isa, hd)) return false;
#if defined(__x86_64__)
  if (isa == MD_CPU_ISA_AVX512) {
    md_avx512_prefill_scores(scores, ld, q_rows, visible, m, packed_keys, hd, scale);
    return true;
  }
#endif
#if defined(__x86_64__) || defined(__i386__)
  for (int64_t r = 0; r < m; r += MD_BLOCK_ROWS) {
    int g = m - r < MD_BLOCK_ROWS ? (int)(m - r) : MD_BLOCK_ROWS;
    scores_by_rows[g](scores, ld, q_rows, visible, r, packed_keys, hd, scale);
  }
#else
  (void)scores, (void)ld, (void)q_rows, (void)visible, (void)m, (void)packed_keys, (void)scale;
#endif
  return true;
}

bool md_cpu_prefill_values(md_cpu_isa isa, float *const *out_rows, const float *p, int64_t ld,
                           const int64_t *visible, int64_t m, const float *values, int hd) {
  if (!md_cpu_prefill_kernels(isa, hd)) return false;
#if defined(__x86_64__)
  if (isa == MD_CPU_ISA_AVX512) {
    md_avx512_prefill_values(out_rows, p, ld, visible, m, values, hd);
    return true;
  }
#endif
#if defined(__x86_64__) || defined(__i386__)
  /* Key chunk by key chunk, every block of rows in turn: the chunk's
   * values stay in L1 for all of them. */
  int64_t most = 0;
  for (int64_t r = 0; r < m; r++) most = visible[r] > most ? visible[r] : most;
  for (int64_t k0 = 0; k0 < most; k0 += MD_VALUE_CHUNK)
    for (int64_t r = 0; r < m; r += MD_BLOCK_ROWS) {
      int g = m - r < MD_BLOCK_ROWS ? (int)(m - r) : MD_BLOCK_ROWS;
      int64_t keys = most_visible(visible, r, g);
      int64_t k1 = keys - k0 < MD_VALUE_CHUNK ? keys : k0 + MD_VALUE_CHUNK;
      if (k1 > k0) values_by_rows[g](out_rows, p, ld, r, k0, k1, values, hd);
    }
#else
  (void)out_rows, (void)p, (void)ld, (void)visible, (void)m, (void)values;
#endif
  return true;
}
