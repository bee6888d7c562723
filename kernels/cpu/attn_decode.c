/* Decode attention's two products for one KV head and one block of keys:
 * the scores of the group's query heads and their weighted sum of values
 * (contracts in cpu_internal.h; attention.c calls them per task).
 *
 * Why our own: with one query row per head these are matrix products with
 * m = the group (7 for Qwen2.5-0.5B), where sgemm spends as long packing
 * its operands as multiplying them, and at long contexts the step's time
 * goes there (inference_bench depth). Here every key and value is read
 * once per block, straight from the cache, and kept in L1 while all the
 * group's heads use it:
 *   scores: eight keys at a time; for each head, eight FMA chains (one per
 *     key) over the head dimension, then one horizontal reduction of the
 *     eight chains into the eight scores (hadd tree), so the reduction
 *     costs 9 operations per 8 dot products;
 *   values: per 16 columns of the head dimension, up to 6 heads at a time
 *     in 12 accumulators (7 would need 17 of the 16 registers; a group of
 *     7 goes as 4 + 3), each value vector loaded once per pass and
 *     multiplied by each head's weight (broadcast).
 * Both prefetch what they read next: the block comes from memory (the
 * step's weights evicted the cache), and the hardware prefetchers alone
 * do not run far enough ahead of the keys' one stream and the values'
 * first column pass (16 floats of every row, a whole row apart). The keys
 * go 8 KiB ahead and the value rows 16 rows ahead, into L2 so that the
 * later column passes find them there: on a Zen 5 that made decode
 * attention read its cache 1.5-1.7x as fast (`inference_bench attention`),
 * and shorter or longer distances did no better.
 * Sums run in a fixed order, independent of threads. The AVX-512 versions
 * are in avx512.c; the portable path keeps sgemm. */
#include <stdbool.h>

#include "kernels/cpu/avx512.h"
#include "kernels/cpu/cpu_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MD_AVX2 __attribute__((target("avx2,fma,f16c")))
#define MD_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) static inline
/* Loops over accumulator arrays unrolled whole, so the arrays live in
 * registers (without it GCC 12 keeps them on the stack). */
#define MD_UNROLL _Pragma("GCC unroll 16")

/* Prefetch distances (see the file's comment): keys 8 KiB ahead of the
 * 8 being multiplied (32 keys of 64 floats, 16 of 128), value rows 16 ahead
 * of the first column pass's row. Near a block's end they reach past it,
 * into the next block or beyond the buffer: prefetches do not fault. */
#define KEYS_AHEAD_FLOATS 2048
#define VALUES_AHEAD_ROWS 16

/* r[j] = the sum of the lanes of a_j. */
MD_AVX2_INLINE __m256 sum_lanes8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5,
                                 __m256 a6, __m256 a7) {
  __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

MD_AVX2_INLINE float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

MD_AVX2 static void scores_avx2(float *scores, int64_t ld, const float *q, int group,
                                const float *keys, int64_t len, int hd, float scale) {
  const __m256 vscale = _mm256_set1_ps(scale);
  int64_t k = 0;
  for (; k + 8 <= len; k += 8) {
    const float *kb = keys + k * hd;
    for (int64_t line = 0; line < 8 * (int64_t)hd; line += 16)
      _mm_prefetch((const char *)(kb + KEYS_AHEAD_FLOATS + line), _MM_HINT_T0);
    for (int h = 0; h < group; h++) {
      const float *qh = q + (int64_t)h * hd;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
      for (int c = 0; c < hd; c += 8) {
        __m256 qc = _mm256_loadu_ps(qh + c);
        a0 = _mm256_fmadd_ps(qc, _mm256_loadu_ps(kb + 0 * hd + c), a0);
        a1 = _mm256_fmadd_ps(qc, _mm256_loadu_ps(kb + 1 * hd + c), a1);
        a2 = _mm256_fmadd_ps(qc, _mm256_loadu_ps(kb + 2 * hd + c), a2);
        a3 = _mm256_fmadd_ps(qc, _mm256_loadu_ps(kb + 3 * hd + c), a3);
        a4 = _mm256_fmadd_ps(qc, _mm256_loadu_ps(kb + 4 * hd + c), a4);
        a5 = _mm256_fmadd_ps(qc, _mm256_loadu_ps(kb + 5 * hd + c), a5);
        a6 = _mm256_fmadd_ps(qc, _mm256_loadu_ps(kb + 6 * hd + c), a6);
        a7 = _mm256_fmadd_ps(qc, _mm256_loadu_ps(kb + 7 * hd + c), a7);
      }
      _mm256_storeu_ps(scores + h * ld + k,
                       _mm256_mul_ps(sum_lanes8(a0, a1, a2, a3, a4, a5, a6, a7), vscale));
    }
  }
  for (; k < len; k++)
    for (int h = 0; h < group; h++) {
      __m256 a = _mm256_setzero_ps();
      for (int c = 0; c < hd; c += 8)
        a = _mm256_fmadd_ps(_mm256_loadu_ps(q + (int64_t)h * hd + c), _mm256_loadu_ps(keys + k * hd + c), a);
      scores[h * ld + k] = hsum8(a) * scale;
    }
}

/* out[j * hd + d0 ..] for `g` heads (g <= 6, a constant where inlined):
 * 16 columns from d0 (two accumulators per head), or 8 when `half`. */
MD_AVX2_INLINE void values_avx2_g(float *out, const float *p, int64_t ld, int g,
                                  const float *values, int64_t len, int hd, int d0, bool half) {
  __m256 lo[6], hi[6];
  MD_UNROLL
  for (int j = 0; j < g; j++) lo[j] = hi[j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < len; k++) {
    const float *v = values + k * hd + d0;
    if (d0 == 0) /* the first column pass: whole rows into L2 */
      for (int line = 0; line < hd; line += 16)
        _mm_prefetch((const char *)(values + (k + VALUES_AHEAD_ROWS) * hd + line), _MM_HINT_T1);
    __m256 v0 = _mm256_loadu_ps(v), v1 = half ? v0 : _mm256_loadu_ps(v + 8);
    MD_UNROLL
    for (int j = 0; j < g; j++) {
      __m256 w = _mm256_broadcast_ss(p + j * ld + k);
      lo[j] = _mm256_fmadd_ps(w, v0, lo[j]);
      if (!half) hi[j] = _mm256_fmadd_ps(w, v1, hi[j]);
    }
  }
  MD_UNROLL
  for (int j = 0; j < g; j++) {
    _mm256_storeu_ps(out + (int64_t)j * hd + d0, lo[j]);
    if (!half) _mm256_storeu_ps(out + (int64_t)j * hd + d0 + 8, hi[j]);
  }
}

/* One call per head count, so that each is compiled with g constant and
 * its accumulators in registers. */
#define MD_VALUES_AVX2(G)                                                                          \
  MD_AVX2 static void values_avx2_##G(float *out, const float *p, int64_t ld, const float *values, \
                                      int64_t len, int hd) {                                       \
    int d = 0;                                                                                     \
    for (; d + 16 <= hd; d += 16) values_avx2_g(out, p, ld, G, values, len, hd, d, false);         \
    if (d < hd) values_avx2_g(out, p, ld, G, values, len, hd, d, true);                            \
  }
MD_VALUES_AVX2(1)
MD_VALUES_AVX2(2)
MD_VALUES_AVX2(3)
MD_VALUES_AVX2(4)
MD_VALUES_AVX2(5)
MD_VALUES_AVX2(6)

typedef void (*values_fn)(float *, const float *, int64_t, const float *, int64_t, int);
static const values_fn values_avx2_by_heads[7] = {
    NULL, values_avx2_1, values_avx2_2, values_avx2_3, values_avx2_4, values_avx2_5, values_avx2_6,
};

static void values_avx2(float *out, const float *p, int64_t ld, int group, const float *values,
                        int64_t len, int hd) {
  /* As few passes as 6 heads allow, their sizes as equal as can be. */
  int passes = (group + 5) / 6;
  for (int i = 0, h0 = 0; i < passes; i++) {
    int g = (group - h0) / (passes - i);
    values_avx2_by_heads[g](out + (int64_t)h0 * hd, p + h0 * ld, ld, values, len, hd);
    h0 += g;
  }
}
#endif

bool md_cpu_decode_scores(md_cpu_isa isa, float *scores, int64_t ld, const float *q, int group,
                          const float *keys, int64_t len, int hd, float scale) {
#if defined(__x86_64__)
  if (isa == MD_CPU_ISA_AVX512 && hd % 16 == 0) {
    md_avx512_decode_scores(scores, ld, q, group, keys, len, hd, scale);
    return true;
  }
#endif
#if defined(__x86_64__) || defined(__i386__)
  if (isa >= MD_CPU_ISA_AVX2 && hd % 8 == 0) {
    scores_avx2(scores, ld, q, group, keys, len, hd, scale);
    return true;
  }
#endif
  (void)isa, (void)scores, (void)ld, (void)q, (void)group, (void)keys, (void)len, (void)hd, (void)scale;
  return false;
}

bool md_cpu_decode_values(md_cpu_isa isa, float *out, const float *p, int64_t ld, int group,
                          const float *values, int64_t len, int hd) {
#if defined(__x86_64__)
  if (isa == MD_CPU_ISA_AVX512 && hd % 16 == 0) {
    md_avx512_decode_values(out, p, ld, group, values, len, hd);
    return true;
  }
#endif
#if defined(__x86_64__) || defined(__i386__)
  if (isa >= MD_CPU_ISA_AVX2 && hd % 8 == 0) {
    values_avx2(out, p, ld, group, values, len, hd);
    return true;
  }
#endif
  (void)isa, (void)out, (void)p, (void)ld, (void)group, (void)values, (void)len, (void)hd;
  return false;
}
