/* AVX-512 kernels (contracts in avx512.h). The shapes follow the AVX2
 * kernels of matvec.c and vmath.c, twice as wide; what differs is the
 * remainders: a mask covers the last columns of a row or the last elements
 * of a vector, so every element goes through the same vector code and no
 * scalar fallback (nor libm's expf) is needed.
 *
 * AVX-512 BF16 (vdpbf16ps) is not used here: it multiplies bf16 by bf16,
 * so the fp32 activations would be rounded to bf16 first, which HF does not
 * do (it widens the bf16 weights exactly and multiplies in fp32), and the
 * decode products are bound by memory bandwidth, not by the arithmetic
 * that instruction would save. The BF16 prompt products of gemm_bf16.c
 * use it, where the arithmetic is the limit.
 *
 * Freestanding on purpose (see avx512.h): intrinsics only. */
#include "kernels/cpu/avx512.h"
#include "kernels/cpu/transpose8.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define MD_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

/* The register-blocked products (MD_DEFINE_MATVEC_ROWS_AVX512) go without
 * UBSan's pointer-overflow check: with it, optimising their six unrolled
 * instances is most of clang's sanitized build of this file. Their loads and
 * stores keep ASan's checks, and avx512_emulated runs them against guard
 * pages. */
#if defined(__has_attribute)
#if __has_attribute(no_sanitize)
#define MD_NO_POINTER_OVERFLOW_CHECK __attribute__((no_sanitize("pointer-overflow")))
#endif
#endif
#ifndef MD_NO_POINTER_OVERFLOW_CHECK
#define MD_NO_POINTER_OVERFLOW_CHECK
#endif

/* The lanes below `count` (count <= 16). */
MD_AVX512 static inline __mmask16 first_lanes(int64_t count) {
  return (__mmask16)((1u << count) - 1u);
}

MD_AVX512 static inline __m512 load16_f32(const float *p) { return _mm512_loadu_ps(p); }
MD_AVX512 static inline __m512 load16_f32_masked(const float *p, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, p);
}
MD_AVX512 static inline __m512 widen_f16(__m256i bits) { return _mm512_cvtph_ps(bits); }
/* bf16 -> f32 is exact: the bf16 bits are the high half of the f32. */
MD_AVX512 static inline __m512 widen_bf16(__m256i bits) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}
MD_AVX512 static inline __m512 load16_f16(const uint16_t *p) {
  return widen_f16(_mm256_loadu_si256((const __m256i *)p));
}
MD_AVX512 static inline __m512 load16_f16_masked(const uint16_t *p, __mmask16 m) {
  return widen_f16(_mm256_maskz_loadu_epi16(m, p));
}
MD_AVX512 static inline __m512 load16_bf16(const uint16_t *p) {
  return widen_bf16(_mm256_loadu_si256((const __m256i *)p));
}
MD_AVX512 static inline __m512 load16_bf16_masked(const uint16_t *p, __mmask16 m) {
  return widen_bf16(_mm256_maskz_loadu_epi16(m, p));
}

/* The 16-bit weights' streams prefetched AHEAD bytes ahead (avx512.h says
 * why and how far), one line per step of 32 columns. */
#define MATVEC_PREFETCH(TYPE, p, AHEAD)                                                      \
  do {                                                                                       \
    if (sizeof(TYPE) == 2) _mm_prefetch((const char *)(p) + (AHEAD), _MM_HINT_T0);           \
  } while (0)

/* Four rows per step, one from each quarter of [r0, r1) (four long
 * sequential streams, see matvec.c), 32 columns at a time in eight
 * independent FMA chains, then one step of 16 and one masked step for the
 * last < 16 columns. A row of the remainder goes alone. */
#define MD_DEFINE_MATVEC_AVX512(NAME, TYPE, LOAD, LOAD_MASKED, AHEAD)                        \
  MD_AVX512 static float NAME##_row(const TYPE *wr, const float *x, int64_t cols) {          \
    int64_t c16 = cols & ~(int64_t)15, c = 0;                                                \
    __m512 a = _mm512_setzero_ps();                                                          \
    for (; c < c16; c += 16) a = _mm512_fmadd_ps(LOAD(wr + c), _mm512_loadu_ps(x + c), a);   \
    if (c < cols) {                                                                          \
      __mmask16 m = first_lanes(cols - c);                                                   \
      a = _mm512_fmadd_ps(LOAD_MASKED(wr + c, m), _mm512_maskz_loadu_ps(m, x + c), a);       \
    }                                                                                        \
    return _mm512_reduce_add_ps(a);                                                          \
  }                                                                                          \
  MD_AVX512 void NAME(float *y, const TYPE *w, const float *x, int64_t r0, int64_t r1,       \
                      int64_t cols, const float *bias) {                                     \
    int64_t c32 = cols & ~(int64_t)31, quarter = (r1 - r0) / 4;                              \
    for (int64_t i = 0; i < quarter; i++) {                                                  \
      int64_t r[4] = {r0 + i, r0 + quarter + i, r0 + 2 * quarter + i, r0 + 3 * quarter + i}; \
      const TYPE *w0 = w + r[0] * cols, *w1 = w + r[1] * cols;                               \
      const TYPE *w2 = w + r[2] * cols, *w3 = w + r[3] * cols;                               \
      __m512 a0 = _mm512_setzero_ps(), b0 = a0, a1 = a0, b1 = a0;                            \
      __m512 a2 = a0, b2 = a0, a3 = a0, b3 = a0;                                             \
      int64_t c = 0;                                                                         \
      for (; c < c32; c += 32) {                                                             \
        MATVEC_PREFETCH(TYPE, w0 + c, AHEAD);                                                \
        MATVEC_PREFETCH(TYPE, w1 + c, AHEAD);                                                \
        MATVEC_PREFETCH(TYPE, w2 + c, AHEAD);                                                \
        MATVEC_PREFETCH(TYPE, w3 + c, AHEAD);                                                \
        __m512 xl = _mm512_loadu_ps(x + c), xh = _mm512_loadu_ps(x + c + 16);                \
        a0 = _mm512_fmadd_ps(LOAD(w0 + c), xl, a0);                                          \
        b0 = _mm512_fmadd_ps(LOAD(w0 + c + 16), xh, b0);                                     \
        a1 = _mm512_fmadd_ps(LOAD(w1 + c), xl, a1);                                          \
        b1 = _mm512_fmadd_ps(LOAD(w1 + c + 16), xh, b1);                                     \
        a2 = _mm512_fmadd_ps(LOAD(w2 + c), xl, a2);                                          \
        b2 = _mm512_fmadd_ps(LOAD(w2 + c + 16), xh, b2);                                     \
        a3 = _mm512_fmadd_ps(LOAD(w3 + c), xl, a3);                                          \
        b3 = _mm512_fmadd_ps(LOAD(w3 + c + 16), xh, b3);                                     \
      }                                                                                      \
      if (c + 16 <= cols) {                                                                  \
        __m512 xl = _mm512_loadu_ps(x + c);                                                  \
        a0 = _mm512_fmadd_ps(LOAD(w0 + c), xl, a0);                                          \
        a1 = _mm512_fmadd_ps(LOAD(w1 + c), xl, a1);                                          \
        a2 = _mm512_fmadd_ps(LOAD(w2 + c), xl, a2);                                          \
        a3 = _mm512_fmadd_ps(LOAD(w3 + c), xl, a3);                                          \
        c += 16;                                                                             \
      }                                                                                      \
      if (c < cols) {                                                                        \
        __mmask16 m = first_lanes(cols - c);                                                 \
        __m512 xh = _mm512_maskz_loadu_ps(m, x + c);                                         \
        b0 = _mm512_fmadd_ps(LOAD_MASKED(w0 + c, m), xh, b0);                                \
        b1 = _mm512_fmadd_ps(LOAD_MASKED(w1 + c, m), xh, b1);                                \
        b2 = _mm512_fmadd_ps(LOAD_MASKED(w2 + c, m), xh, b2);                                \
        b3 = _mm512_fmadd_ps(LOAD_MASKED(w3 + c, m), xh, b3);                                \
      }                                                                                      \
      float sums[4] = {_mm512_reduce_add_ps(_mm512_add_ps(a0, b0)),                          \
                       _mm512_reduce_add_ps(_mm512_add_ps(a1, b1)),                          \
                       _mm512_reduce_add_ps(_mm512_add_ps(a2, b2)),                          \
                       _mm512_reduce_add_ps(_mm512_add_ps(a3, b3))};                         \
      for (int j = 0; j < 4; j++) y[r[j]] = sums[j] + (bias ? bias[r[j]] : 0.0f);            \
    }                                                                                        \
    for (int64_t r = r0 + 4 * quarter; r < r1; r++)                                          \
      y[r] = NAME##_row(w + r * cols, x, cols) + (bias ? bias[r] : 0.0f);                    \
  }

MD_DEFINE_MATVEC_AVX512(md_avx512_matvec_f32, float, load16_f32, load16_f32_masked, 0)
MD_DEFINE_MATVEC_AVX512(md_avx512_matvec_f16, uint16_t, load16_f16, load16_f16_masked,
                        MD_MATVEC_PREFETCH_BYTES)
MD_DEFINE_MATVEC_AVX512(md_avx512_matvec_bf16, uint16_t, load16_bf16, load16_bf16_masked,
                        MD_MATVEC_PREFETCH_BYTES)
MD_DEFINE_MATVEC_AVX512(md_avx512_matvec_f16_far, uint16_t, load16_f16, load16_f16_masked,
                        MD_MATVEC_PREFETCH_FAR_BYTES)
MD_DEFINE_MATVEC_AVX512(md_avx512_matvec_bf16_far, uint16_t, load16_bf16, load16_bf16_masked,
                        MD_MATVEC_PREFETCH_FAR_BYTES)

/* The matrix-vector kernels above for nx vectors at once (avx512.h,
 * md_avx512_matvec_rows_*), each (row, vector) computed in the chains,
 * order and reduction the one-vector kernel uses for that row: a row of
 * [r0, r0 + 4 * quarter) in its two chains (a: the first 16 of each 32
 * columns and a lone step of 16; b: the second 16 and the masked rest,
 * then the sum of the two reduced), a row of the remainder through the
 * one-vector kernel's own one-chain function (ONE##_row).
 * The two chains of a row are independent, so they are computed one after
 * the other: a block of 4 rows and up to 6 vectors keeps its 24 sums of
 * one chain in registers, each weight vector widened once for 6 products
 * and each vector of x loaded once for 4 (the arithmetic, not the loads,
 * sets the pace).
 * Each 4-row block is read from memory once, in its first pass, and from
 * L1 in the others: a bursty stream the hardware prefetchers do not run
 * ahead of, so the kernel asks for the block ROWS_AHEAD blocks on itself,
 * spread over the steps of the first two vector blocks (one or two lines
 * a step of 16-bit weights, twice that of f32), into L2. Without it, a
 * matrix larger than the caches (a vocabulary's LM head) was read far
 * below the memory's rate (bench/README.md). */
#define ROWS_AHEAD 4
#define ROWS_PREFETCH(pf, lines)                                                  \
  do {                                                                            \
    for (int line_ = 0; line_ < (lines); line_++)                                 \
      _mm_prefetch((pf) + 64 * line_, _MM_HINT_T1);                               \
    (pf) += 64 * (lines);                                                         \
  } while (0)
#define MD_DEFINE_MATVEC_ROWS_AVX512(NAME, ONE, TYPE, LOAD, LOAD_MASKED)                          \
  __attribute__((always_inline)) MD_AVX512 MD_NO_POINTER_OVERFLOW_CHECK static inline void    \
  NAME##_block(                                                                               \
      float *y, int64_t y_stride, const TYPE *w, const float *x, int64_t cols, int64_t r,     \
      const float *bias, const int J, const char *pf, const int pf_lines) {                   \
    int64_t c32 = cols & ~(int64_t)31, lone = c32 + 16 <= cols, tail = c32 + 16 * lone;       \
    const TYPE *wr[4] = {w + r * cols, w + (r + 1) * cols, w + (r + 2) * cols,                \
                         w + (r + 3) * cols};                                                 \
    __m512 acc[4][6], a[4][6];                                                                \
    /* chain a */                                                                             \
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                       \
      _Pragma("GCC unroll 6") for (int j = 0; j < J; j++) acc[i][j] = _mm512_setzero_ps();    \
    for (int64_t c = 0; c < c32 + 32 * lone; c += 32) {                                       \
      __m512 wv[4];                                                                           \
      ROWS_PREFETCH(pf, pf_lines);                                                            \
      _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) wv[i] = LOAD(wr[i] + c);            \
      _Pragma("GCC unroll 6") for (int j = 0; j < J; j++) {                                   \
        __m512 xv = _mm512_loadu_ps(x + j * cols + c);                                        \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                   \
          acc[i][j] = _mm512_fmadd_ps(wv[i], xv, acc[i][j]);                                  \
      }                                                                                       \
    }                                                                                         \
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                       \
      _Pragma("GCC unroll 6") for (int j = 0; j < J; j++) a[i][j] = acc[i][j];                \
    /* chain b */                                                                             \
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                       \
      _Pragma("GCC unroll 6") for (int j = 0; j < J; j++) acc[i][j] = _mm512_setzero_ps();    \
    for (int64_t c = 16; c < c32; c += 32) {                                                  \
      __m512 wv[4];                                                                           \
      ROWS_PREFETCH(pf, pf_lines);                                                            \
      _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) wv[i] = LOAD(wr[i] + c);            \
      _Pragma("GCC unroll 6") for (int j = 0; j < J; j++) {                                   \
        __m512 xv = _mm512_loadu_ps(x + j * cols + c);                                        \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                   \
          acc[i][j] = _mm512_fmadd_ps(wv[i], xv, acc[i][j]);                                  \
      }                                                                                       \
    }                                                                                         \
    if (tail < cols) {                                                                        \
      __mmask16 m = first_lanes(cols - tail);                                                 \
      __m512 wv[4];                                                                           \
      _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) wv[i] = LOAD_MASKED(wr[i] + tail, m); \
      _Pragma("GCC unroll 6") for (int j = 0; j < J; j++) {                                   \
        __m512 xv = _mm512_maskz_loadu_ps(m, x + j * cols + tail);                            \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                   \
          acc[i][j] = _mm512_fmadd_ps(wv[i], xv, acc[i][j]);                                  \
      }                                                                                       \
    }                                                                                         \
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                       \
      _Pragma("GCC unroll 6") for (int j = 0; j < J; j++)                                     \
        y[j * y_stride + r + i] = _mm512_reduce_add_ps(_mm512_add_ps(a[i][j], acc[i][j])) +  \
                                  (bias ? bias[r + i] : 0.0f);                                \
  }                                                                                           \
  MD_AVX512 MD_NO_POINTER_OVERFLOW_CHECK void NAME(float *y, int64_t y_stride, const TYPE *w,  \
                                                   const float *x, int64_t nx,                \
                      int64_t r0, int64_t r1, int64_t cols, const float *bias) {              \
    int64_t paired_end = r0 + 4 * ((r1 - r0) / 4);                                            \
    /* the vectors in blocks of at most 6, as even as they go (8 = 4 + 4,   \
     * not 6 + 2: a block of 2 widens 4 weight vectors for 8 products) */    \
    int64_t blocks = (nx + 5) / 6;                                                            \
    for (int64_t r = r0; r < paired_end; r += 4)                                              \
      for (int64_t b = 0, j = 0; b < blocks; b++) {                                           \
        int64_t size = (nx - j + (blocks - b) - 1) / (blocks - b);                            \
        float *yj = y + j * y_stride;                                                         \
        const float *xj = x + j * cols;                                                       \
        /* a block's cols * sizeof(TYPE) / 16 lines over the cols / 16 steps \
         * of one vector block or the first halves of two */                 \
        int lines = (blocks == 1 ? 2 : b < 2) * (int)sizeof(TYPE) / 2;                        \
        const char *pf = (const char *)(w + (r + 4 * ROWS_AHEAD) * cols) +                    \
                         b * (cols / 16) * 32 * (int64_t)sizeof(TYPE);                        \
        switch (size) {                                                                       \
        case 6: NAME##_block(yj, y_stride, w, xj, cols, r, bias, 6, pf, lines); break;      \
        case 5: NAME##_block(yj, y_stride, w, xj, cols, r, bias, 5, pf, lines); break;      \
        case 4: NAME##_block(yj, y_stride, w, xj, cols, r, bias, 4, pf, lines); break;      \
        case 3: NAME##_block(yj, y_stride, w, xj, cols, r, bias, 3, pf, lines); break;      \
        case 2: NAME##_block(yj, y_stride, w, xj, cols, r, bias, 2, pf, lines); break;      \
        default: NAME##_block(yj, y_stride, w, xj, cols, r, bias, 1, pf, lines); break;     \
        }                                                                                     \
        j += size;                                                                            \
      }                                                                                       \
    for (int64_t r = paired_end; r < r1; r++)                                                 \
      for (int64_t j = 0; j < nx; j++)                                                        \
        y[j * y_stride + r] = ONE##_row(w + r * cols, x + j * cols, cols) + (bias ? bias[r] : 0.0f); \
  }

MD_DEFINE_MATVEC_ROWS_AVX512(md_avx512_matvec_rows_f32, md_avx512_matvec_f32, float, load16_f32, load16_f32_masked)
MD_DEFINE_MATVEC_ROWS_AVX512(md_avx512_matvec_rows_f16, md_avx512_matvec_f16, uint16_t, load16_f16, load16_f16_masked)
MD_DEFINE_MATVEC_ROWS_AVX512(md_avx512_matvec_rows_bf16, md_avx512_matvec_bf16, uint16_t, load16_bf16, load16_bf16_masked)

MD_AVX512 size_t md_avx512_argmax(const float *v, size_t n) {
  if (n == 0 || v[0] != v[0]) return 0; /* NaN first: nothing compares greater */
  /* The largest value that is not NaN (NaN lanes masked to -inf). */
  __m512 best = _mm512_set1_ps(v[0]);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 x = _mm512_loadu_ps(v + i);
    __mmask16 ordered = _mm512_cmp_ps_mask(x, x, _CMP_ORD_Q);
    best = _mm512_mask_max_ps(best, ordered, best, x);
  }
  if (i < n) {
    __mmask16 m = first_lanes((int64_t)(n - i));
    __m512 x = _mm512_maskz_loadu_ps(m, v + i);
    __mmask16 ordered = _mm512_mask_cmp_ps_mask(m, x, x, _CMP_ORD_Q);
    best = _mm512_mask_max_ps(best, ordered, best, x);
  }
  __m512 all = _mm512_set1_ps(_mm512_reduce_max_ps(best));
  /* The first element equal to it (== : -0 equals +0, as the scalar
   * loop's "strictly greater" keeps the first). */
  for (i = 0; i + 16 <= n; i += 16) {
    __mmask16 eq = _mm512_cmp_ps_mask(_mm512_loadu_ps(v + i), all, _CMP_EQ_OQ);
    if (eq) return i + (size_t)__builtin_ctz((unsigned)eq);
  }
  __mmask16 m = first_lanes((int64_t)(n - i));
  __mmask16 eq = _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, v + i), all, _CMP_EQ_OQ);
  return eq ? i + (size_t)__builtin_ctz((unsigned)eq) : 0;
}

MD_AVX512 void md_avx512_to_f32(float *dst, const uint16_t *src, size_t count, int bf16) {
  size_t i = 0;
  for (; i + 16 <= count; i += 16)
    _mm512_storeu_ps(dst + i, bf16 ? load16_bf16(src + i) : load16_f16(src + i));
  if (i < count) {
    __mmask16 m = first_lanes((int64_t)(count - i));
    _mm512_mask_storeu_ps(dst + i, m,
                          bf16 ? load16_bf16_masked(src + i, m) : load16_f16_masked(src + i, m));
  }
}

/* exp(x), lane by lane: vmath.c's Cephes algorithm step for step (the same
 * constants, the same fused operations, so each lane equals the AVX2
 * exp8's); below ln(FLT_MIN) it returns 0, NaN stays NaN. */
MD_AVX512 static inline __m512 exp16(__m512 x) {
  const __m512 hi = _mm512_set1_ps(88.3762626647949f);
  const __m512 lo = _mm512_set1_ps(-87.3365447504f);
  __mmask16 underflow = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  __m512 v = _mm512_max_ps(_mm512_min_ps(x, hi), lo);
  __m512 n = _mm512_roundscale_ps(
      _mm512_fmadd_ps(v, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
      _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  v = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), v);
  v = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), v);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, v, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, v, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, v, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, v, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, v, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(v, v), v);
  p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
  __m512i e = _mm512_slli_epi32(
      _mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
  __m512 result = _mm512_maskz_mul_ps((__mmask16)~underflow, p, _mm512_castsi512_ps(e));
  return _mm512_mask_blend_ps(is_nan, result, x);
}

MD_AVX512 void md_avx512_softmax(float *x, int64_t n) {
  int64_t n16 = n & ~(int64_t)15, i;
  __mmask16 tail = first_lanes(n - n16);
  const __m512 minus_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 vmax = minus_inf;
  for (i = 0; i < n16; i += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + i));
  if (tail) vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(minus_inf, tail, x + i));
  __m512 shift = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));

  __m512 vsum = _mm512_setzero_ps();
  for (i = 0; i < n16; i += 16) {
    __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), shift));
    _mm512_storeu_ps(x + i, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  if (tail) {
    __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + i), shift));
    _mm512_mask_storeu_ps(x + i, tail, e);
    vsum = _mm512_mask_add_ps(vsum, tail, vsum, e);
  }
  __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
  for (i = 0; i < n16; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
  if (tail) _mm512_mask_storeu_ps(x + i, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + i), inv));
}

MD_AVX512 static inline __m512 silu_mul16(__m512 g, __m512 u) {
  __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
  return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}

MD_AVX512 void md_avx512_silu_mul(float *gate, const float *up, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(gate + i, silu_mul16(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  if (i < n) {
    __mmask16 m = first_lanes((int64_t)(n - i));
    _mm512_mask_storeu_ps(gate + i, m,
                          silu_mul16(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i)));
  }
}
/* ---- decode attention (attn_decode.c has the AVX2 versions and the why) -- */

#define MD_AVX512_INLINE \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"), always_inline)) static inline
/* Loops over accumulator arrays unrolled whole, so the arrays live in
 * registers. */
#define MD_UNROLL _Pragma("GCC unroll 16")

/* Two vectors of partial sums folded into one: the lanes of `a` (from `lo`
 * and `hi`) added pairwise within 128-bit lanes so that the result holds,
 * in each 128-bit lane, two partials of `lo` then two of `hi`. */
MD_AVX512_INLINE __m512 fold_pairs(__m512 lo, __m512 hi) {
  return _mm512_add_ps(_mm512_unpacklo_ps(lo, hi), _mm512_unpackhi_ps(lo, hi));
}

/* r[j] = the sum of the 16 lanes of a[j], j < 16: a butterfly of unpack and
 * shuffle steps, each halving the partials per sum (45 operations for 16
 * sums). */
MD_AVX512_INLINE __m512 sum_lanes16(const __m512 a[16]) {
  __m512 s[8], t[4], u[2];
  /* s[i]: in each 128-bit lane, partials [a2i, a2i+1, a2i, a2i+1]. */
  MD_UNROLL
  for (int i = 0; i < 8; i++) s[i] = fold_pairs(a[2 * i], a[2 * i + 1]);
  /* t[i]: in each 128-bit lane, one partial of a4i .. a4i+3, in order. */
  MD_UNROLL
  for (int i = 0; i < 4; i++)
    t[i] = _mm512_add_ps(_mm512_shuffle_ps(s[2 * i], s[2 * i + 1], 0x44),
                         _mm512_shuffle_ps(s[2 * i], s[2 * i + 1], 0xEE));
  /* u[i]: 128-bit lanes [t2i lanes 0+1, t2i lanes 2+3, t2i+1 lanes 0+1, t2i+1 lanes 2+3]. */
  MD_UNROLL
  for (int i = 0; i < 2; i++)
    u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0xDD));
  /* 128-bit lane L of the result: the whole sums of a4L .. a4L+3. */
  return _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xDD));
}

/* Sixteen keys at a time: per head, one FMA chain per key over the head
 * dimension, then one butterfly into the 16 scores. The next 16 keys are
 * prefetched as each 16 begin, as values_rows prefetches its rows: the
 * cache is read from memory (the weights of the step before evicted it),
 * one sequential stream per thread, which the hardware prefetchers alone
 * do not keep at the memory's rate. 16 keys ahead (and the values' rows 64
 * ahead, into L2) measured best on an Intel Xeon: about 1.2x as fast as
 * without, where 32 or 128 keys ahead, or the rows into L1, gained less. */
MD_AVX512 void md_avx512_decode_scores(float *scores, int64_t ld, const float *q, int group,
                                       const float *keys, int64_t len, int hd, float scale) {
  const __m512 vscale = _mm512_set1_ps(scale);
  int64_t k = 0;
  for (; k + 16 <= len; k += 16) {
    const float *kb = keys + k * hd;
    for (int64_t line = 0; line < 16 * (int64_t)hd; line += 16) /* the next 16 keys */
      _mm_prefetch((const char *)(kb + 16 * hd + line), _MM_HINT_T0);
    for (int h = 0; h < group; h++) {
      const float *qh = q + (int64_t)h * hd;
      __m512 a[16];
      MD_UNROLL
      for (int j = 0; j < 16; j++) a[j] = _mm512_setzero_ps();
      for (int c = 0; c < hd; c += 16) {
        __m512 qc = _mm512_loadu_ps(qh + c);
        MD_UNROLL
        for (int j = 0; j < 16; j++) a[j] = _mm512_fmadd_ps(qc, _mm512_loadu_ps(kb + j * hd + c), a[j]);
      }
      _mm512_storeu_ps(scores + h * ld + k, _mm512_mul_ps(sum_lanes16(a), vscale));
    }
  }
  for (; k < len; k++)
    for (int h = 0; h < group; h++) {
      __m512 a = _mm512_setzero_ps();
      for (int c = 0; c < hd; c += 16)
        a = _mm512_fmadd_ps(_mm512_loadu_ps(q + (int64_t)h * hd + c), _mm512_loadu_ps(keys + k * hd + c), a);
      scores[h * ld + k] = _mm512_reduce_add_ps(a) * scale;
    }
}

/* `g` heads (g <= 7), 32 columns from d0 (two accumulators per head), or
 * 16 when `half`. */
MD_AVX512_INLINE void values_g(float *out, const float *p, int64_t ld, int g, const float *values,
                               int64_t len, int hd, int d0, int half) {
  __m512 lo[7], hi[7];
  MD_UNROLL
  for (int j = 0; j < g; j++) lo[j] = hi[j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < len; k++) {
    const float *v = values + k * hd + d0;
    __m512 v0 = _mm512_loadu_ps(v), v1 = half ? v0 : _mm512_loadu_ps(v + 16);
    MD_UNROLL
    for (int j = 0; j < g; j++) {
      __m512 w = _mm512_set1_ps(p[j * ld + k]);
      lo[j] = _mm512_fmadd_ps(w, v0, lo[j]);
      if (!half) hi[j] = _mm512_fmadd_ps(w, v1, hi[j]);
    }
  }
  MD_UNROLL
  for (int j = 0; j < g; j++) {
    _mm512_storeu_ps(out + (int64_t)j * hd + d0, lo[j]);
    if (!half) _mm512_storeu_ps(out + (int64_t)j * hd + d0 + 16, hi[j]);
  }
}

#define MD_VALUES_AVX512(G)                                                                  \
  MD_AVX512 static void values_##G(float *out, const float *p, int64_t ld, const float *values, \
                                   int64_t len, int hd) {                                   \
    int d = 0;                                                                              \
    for (; d + 32 <= hd; d += 32) values_g(out, p, ld, G, values, len, hd, d, 0);           \
    if (d < hd) values_g(out, p, ld, G, values, len, hd, d, 1);                             \
  }
MD_VALUES_AVX512(1)
MD_VALUES_AVX512(2)
MD_VALUES_AVX512(3)
MD_VALUES_AVX512(4)
MD_VALUES_AVX512(5)
MD_VALUES_AVX512(6)
MD_VALUES_AVX512(7)

/* `g` heads over whole value rows of NV * 16 floats (head_dim 64 or 128):
 * each row is read once per pass in order, where values_g reads 32 columns
 * of every row per pass (a quarter of a 128-float row, 512 bytes apart, so
 * the first pass over a block pulls it from memory at a stride the
 * prefetchers follow badly: on a Zen 4, whole rows read a 1.5B-shaped
 * cache's values 2.5-3x as fast). The same FMA chains in the same order as
 * values_g: the same bits (compared whole for groups of 1-7, 9 and 14
 * heads, 1 to 300 keys). g * NV accumulators + g weights + one row vector
 * fit the 32 registers for (NV, g) = (4, 6) and (8, 3). */
MD_AVX512_INLINE void values_rows(float *out, const float *p, int64_t ld, int g,
                                  const float *values, int64_t len, int nv) {
  __m512 acc[6][8];
  MD_UNROLL
  for (int j = 0; j < g; j++) {
    MD_UNROLL
    for (int c = 0; c < nv; c++) acc[j][c] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < len; k++) {
    const float *v = values + k * nv * 16;
    MD_UNROLL
    for (int c = 0; c < nv; c++) /* into L2, 64 rows ahead */
      _mm_prefetch((const char *)(v + 64 * nv * 16 + c * 16), _MM_HINT_T1);
    __m512 w[6];
    MD_UNROLL
    for (int j = 0; j < g; j++) w[j] = _mm512_set1_ps(p[j * ld + k]);
    MD_UNROLL
    for (int c = 0; c < nv; c++) {
      __m512 vc = _mm512_loadu_ps(v + c * 16);
      MD_UNROLL
      for (int j = 0; j < g; j++) acc[j][c] = _mm512_fmadd_ps(w[j], vc, acc[j][c]);
    }
  }
  MD_UNROLL
  for (int j = 0; j < g; j++) {
    MD_UNROLL
    for (int c = 0; c < nv; c++) _mm512_storeu_ps(out + (int64_t)j * nv * 16 + c * 16, acc[j][c]);
  }
}

#define MD_VALUES_ROWS_AVX512(NV, G)                                                       \
  MD_AVX512 static void values_rows_##NV##_##G(float *out, const float *p, int64_t ld,   \
                                               const float *values, int64_t len) {        \
    values_rows(out, p, ld, G, values, len, NV);                                           \
  }
MD_VALUES_ROWS_AVX512(4, 1)
MD_VALUES_ROWS_AVX512(4, 2)
MD_VALUES_ROWS_AVX512(4, 3)
MD_VALUES_ROWS_AVX512(4, 4)
MD_VALUES_ROWS_AVX512(4, 5)
MD_VALUES_ROWS_AVX512(4, 6)
MD_VALUES_ROWS_AVX512(8, 1)
MD_VALUES_ROWS_AVX512(8, 2)
MD_VALUES_ROWS_AVX512(8, 3)

MD_AVX512 void md_avx512_decode_values(float *out, const float *p, int64_t ld, int group,
                                       const float *values, int64_t len, int hd) {
  /* Switches, not tables of pointers: this file runs freestanding in the
   * emulated-CPU test, with no relocations done for it. */
  if (hd == 64) {
    for (int h0 = 0; h0 < group; h0 += 6) {
      int g = group - h0 < 6 ? group - h0 : 6;
      float *o = out + (int64_t)h0 * hd;
      const float *ph = p + h0 * ld;
      switch (g) {
        case 1: values_rows_4_1(o, ph, ld, values, len); break;
        case 2: values_rows_4_2(o, ph, ld, values, len); break;
        case 3: values_rows_4_3(o, ph, ld, values, len); break;
        case 4: values_rows_4_4(o, ph, ld, values, len); break;
        case 5: values_rows_4_5(o, ph, ld, values, len); break;
        default: values_rows_4_6(o, ph, ld, values, len); break;
      }
    }
    return;
  }
  if (hd == 128) {
    for (int h0 = 0; h0 < group; h0 += 3) {
      int g = group - h0 < 3 ? group - h0 : 3;
      float *o = out + (int64_t)h0 * hd;
      const float *ph = p + h0 * ld;
      switch (g) {
        case 1: values_rows_8_1(o, ph, ld, values, len); break;
        case 2: values_rows_8_2(o, ph, ld, values, len); break;
        default: values_rows_8_3(o, ph, ld, values, len); break;
      }
    }
    return;
  }
  for (int h0 = 0; h0 < group; h0 += 7) {
    int g = group - h0 < 7 ? group - h0 : 7;
    float *o = out + (int64_t)h0 * hd;
    const float *ph = p + h0 * ld;
    switch (g) {
      case 1: values_1(o, ph, ld, values, len, hd); break;
      case 2: values_2(o, ph, ld, values, len, hd); break;
      case 3: values_3(o, ph, ld, values, len, hd); break;
      case 4: values_4(o, ph, ld, values, len, hd); break;
      case 5: values_5(o, ph, ld, values, len, hd); break;
      case 6: values_6(o, ph, ld, values, len, hd); break;
      default: values_7(o, ph, ld, values, len, hd); break;
    }
  }
}
/* Prefill attention's products (md_cpu_prefill_scores / md_cpu_prefill_values
 * in cpu_internal.h, attn_prefill.c for the design): blocks of 6 rows x 64
 * columns in 24 accumulators (of the 32 registers), the queries and
 * weights broadcast from their rows in place: per step 4 loads and 6
 * broadcasts feed 24 FMAs, where 6 x 32 blocks (12 accumulators) needed 8
 * for 12. Scores take four 16-key panels at a time and then the 1 to 3
 * left, so a block computes at most 15 keys past its longest row's visible
 * ones (as the 16-key panels always did); values take 64 columns of
 * head_dim at a time, then 32, then 16. On an Intel Xeon the wider blocks
 * made the scores about 1.2x and the values about 1.3x as fast; going key
 * chunk by key chunk over all the blocks instead (the AVX2 order: the
 * chunk's values stay in L1) was slower there at every chunk size tried. */
MD_AVX512_INLINE int64_t most_visible(const int64_t *visible, int64_t r, int g) {
  int64_t most = 0;
  for (int i = 0; i < g; i++) most = visible[r + i] > most ? visible[r + i] : most;
  return most;
}

/* Scores of rows q[0..g) against `panels` (1 to 4, a constant where
 * inlined) panels of 16 keys from kp, stored at columns [j0, j0 + 16 *
 * panels) of their rows: one FMA chain over head_dim per score, then the
 * scale. */
MD_AVX512_INLINE void prefill_scores_panels(float *scores, int64_t ld, const float *const *q,
                                            int64_t r, int g, const float *kp, int panels,
                                            int64_t j0, int hd, __m512 vscale) {
  __m512 acc[6][4];
  MD_UNROLL
  for (int i = 0; i < g; i++) {
    MD_UNROLL
    for (int c = 0; c < panels; c++) acc[i][c] = _mm512_setzero_ps();
  }
  for (int d = 0; d < hd; d++) {
    __m512 k[4];
    MD_UNROLL
    for (int c = 0; c < panels; c++) k[c] = _mm512_loadu_ps(kp + ((int64_t)c * hd + d) * 16);
    MD_UNROLL
    for (int i = 0; i < g; i++) {
      __m512 qd = _mm512_set1_ps(q[i][d]);
      MD_UNROLL
      for (int c = 0; c < panels; c++) acc[i][c] = _mm512_fmadd_ps(qd, k[c], acc[i][c]);
    }
  }
  MD_UNROLL
  for (int i = 0; i < g; i++) {
    float *s = scores + (r + i) * ld + j0;
    MD_UNROLL
    for (int c = 0; c < panels; c++) _mm512_storeu_ps(s + 16 * c, _mm512_mul_ps(acc[i][c], vscale));
  }
}

MD_AVX512_INLINE void prefill_scores_block(float *scores, int64_t ld, const float *const *q_rows,
                                           const int64_t *visible, int64_t r, int g,
                                           const float *packed, int hd, float scale) {
  const float *q[6];
  MD_UNROLL
  for (int i = 0; i < g; i++) q[i] = q_rows[r + i];
  const __m512 vscale = _mm512_set1_ps(scale);
  /* Panels up to the one holding the last key, never past it: the rows
   * and the packed keys end there (md_cpu_prefill_ld). */
  int64_t keys = most_visible(visible, r, g), j0 = 0;
  for (; keys - j0 > 48; j0 += 64)
    prefill_scores_panels(scores, ld, q, r, g, packed + j0 * hd, 4, j0, hd, vscale);
  if (keys - j0 > 32)
    prefill_scores_panels(scores, ld, q, r, g, packed + j0 * hd, 3, j0, hd, vscale);
  else if (keys - j0 > 16)
    prefill_scores_panels(scores, ld, q, r, g, packed + j0 * hd, 2, j0, hd, vscale);
  else if (keys > j0)
    prefill_scores_panels(scores, ld, q, r, g, packed + j0 * hd, 1, j0, hd, vscale);
}

/* Outputs of rows [0, g) over keys [k0, k1), `regs` (1, 2 or 4) registers
 * of columns from d0: the running sums start from zero at the first key
 * and wait in the output rows between key chunks (stored and reloaded
 * exactly: each output is still one chain in key order). */
MD_AVX512_INLINE void prefill_values_columns(float *const *o, const float *const *w, int g,
                                             int64_t k0, int64_t k1, const float *values, int hd,
                                             int d0, int regs) {
  __m512 acc[6][4];
  MD_UNROLL
  for (int i = 0; i < g; i++) {
    MD_UNROLL
    for (int c = 0; c < regs; c++)
      acc[i][c] = k0 ? _mm512_loadu_ps(o[i] + d0 + 16 * c) : _mm512_setzero_ps();
  }
  for (int64_t k = k0; k < k1; k++) {
    const float *v = values + k * hd + d0;
    __m512 vc[4];
    MD_UNROLL
    for (int c = 0; c < regs; c++) vc[c] = _mm512_loadu_ps(v + 16 * c);
    MD_UNROLL
    for (int i = 0; i < g; i++) {
      __m512 pk = _mm512_set1_ps(w[i][k]);
      MD_UNROLL
      for (int c = 0; c < regs; c++) acc[i][c] = _mm512_fmadd_ps(pk, vc[c], acc[i][c]);
    }
  }
  MD_UNROLL
  for (int i = 0; i < g; i++) {
    MD_UNROLL
    for (int c = 0; c < regs; c++) _mm512_storeu_ps(o[i] + d0 + 16 * c, acc[i][c]);
  }
}

/* Per chunk of 256 keys (the chunk of the rows' weights, 6 KiB, stays in
 * L1 across the column passes of a head_dim over 64). */
MD_AVX512_INLINE void prefill_values_block(float *const *out_rows, const float *p, int64_t ld,
                                           const int64_t *visible, int64_t r, int g,
                                           const float *values, int hd) {
  const float *w[6];
  float *o[6];
  MD_UNROLL
  for (int i = 0; i < g; i++) w[i] = p + (r + i) * ld, o[i] = out_rows[r + i];
  int64_t keys = most_visible(visible, r, g);
  for (int64_t k0 = 0; k0 < keys; k0 += 256) {
    int64_t k1 = keys - k0 < 256 ? keys : k0 + 256;
    int d0 = 0;
    for (; hd - d0 >= 64; d0 += 64) prefill_values_columns(o, w, g, k0, k1, values, hd, d0, 4);
    if (hd - d0 >= 32) prefill_values_columns(o, w, g, k0, k1, values, hd, d0, 2), d0 += 32;
    if (hd - d0 >= 16) prefill_values_columns(o, w, g, k0, k1, values, hd, d0, 1);
  }
}

#define MD_PREFILL_AVX512(G)                                                                      \
  MD_AVX512 static void prefill_scores_##G(float *scores, int64_t ld, const float *const *q_rows, \
                                           const int64_t *visible, int64_t r,                    \
                                           const float *packed, int hd, float scale) {           \
    prefill_scores_block(scores, ld, q_rows, visible, r, G, packed, hd, scale);                  \
  }                                                                                              \
  MD_AVX512 static void prefill_values_##G(float *const *out_rows, const float *p, int64_t ld,   \
                                           const int64_t *visible, int64_t r,                    \
                                           const float *values, int hd) {                        \
    prefill_values_block(out_rows, p, ld, visible, r, G, values, hd);                            \
  }
MD_PREFILL_AVX512(1)
MD_PREFILL_AVX512(2)
MD_PREFILL_AVX512(3)
MD_PREFILL_AVX512(4)
MD_PREFILL_AVX512(5)
MD_PREFILL_AVX512(6)

MD_AVX512 void md_avx512_prefill_scores(float *scores, int64_t ld, const float *const *q_rows,
                                        const int64_t *visible, int64_t m,
                                        const float *packed_keys, int hd, float scale) {
  for (int64_t r = 0; r < m; r += 6) {
    switch (m - r < 6 ? m - r : 6) {
      case 1: prefill_scores_1(scores, ld, q_rows, visible, r, packed_keys, hd, scale); break;
      case 2: prefill_scores_2(scores, ld, q_rows, visible, r, packed_keys, hd, scale); break;
      case 3: prefill_scores_3(scores, ld, q_rows, visible, r, packed_keys, hd, scale); break;
      case 4: prefill_scores_4(scores, ld, q_rows, visible, r, packed_keys, hd, scale); break;
      case 5: prefill_scores_5(scores, ld, q_rows, visible, r, packed_keys, hd, scale); break;
      default: prefill_scores_6(scores, ld, q_rows, visible, r, packed_keys, hd, scale); break;
    }
  }
}

MD_AVX512 void md_avx512_prefill_values(float *const *out_rows, const float *p, int64_t ld,
                                        const int64_t *visible, int64_t m, const float *values,
                                        int hd) {
  for (int64_t r = 0; r < m; r += 6) {
    switch (m - r < 6 ? m - r : 6) {
      case 1: prefill_values_1(out_rows, p, ld, visible, r, values, hd); break;
      case 2: prefill_values_2(out_rows, p, ld, visible, r, values, hd); break;
      case 3: prefill_values_3(out_rows, p, ld, visible, r, values, hd); break;
      case 4: prefill_values_4(out_rows, p, ld, visible, r, values, hd); break;
      case 5: prefill_values_5(out_rows, p, ld, visible, r, values, hd); break;
      default: prefill_values_6(out_rows, p, ld, visible, r, values, hd); break;
    }
  }
}

/* ---- the prompt's float32 GEMM: one work item -------------------------------
 * The AVX-512 form of gemm_f32.c's item (that file says why our own and how
 * the product is blocked; it drives this one). What differs is the shape of
 * the micro-tile: 12 rows of x by 32 outputs (two registers of W per
 * column), 24 accumulators of the 32 zmm registers, the shape of BLIS's
 * SkylakeX sgemm kernel (its 32 x 12 with the operands' roles as here):
 * per column 2 loads of W, 12 broadcasts of x, 24 FMAs, enough independent
 * chains for two 512-bit FMA pipes of 4 cycles' latency. An item is 2 W
 * panels of 32 outputs (64, as on the AVX2 path, so the two paths split the
 * work alike). Remainders are masked: the last columns of a weight row
 * (K not a multiple of 8) in the packing, the last outputs of a narrow
 * panel in the stores; rows beyond n repeat the panel's first row and are
 * never stored. Each output is one FMA chain over the block's columns in
 * order, added to the bias (first block) or to y: the same sums in the
 * same order as the AVX2 item, so the two paths give the same bits. */

enum { GEMM_MR = MD_AVX512_GEMM_MR, GEMM_NR = 32, GEMM_GROUP = 2, GEMM_PREFETCH_AHEAD = 64 };

/* The elements of a weight row at [at, at + 8) under mask m as float32
 * (exact widening; masked-off lanes 0, never read). */
MD_AVX512_INLINE __m256 gemm_load8(const void *w, int dtype, size_t at, __mmask8 m) {
  if (dtype == MD_AVX512_F32) return _mm256_maskz_loadu_ps(m, (const float *)w + at);
  __m128i h = _mm_maskz_loadu_epi16(m, (const uint16_t *)w + at);
  if (dtype == MD_AVX512_F16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Packs W rows [j0, j0 + 32) (zeros beyond `rows`), columns [c0, c0 + kc):
 * dst[(c - c0) * 32 + j] = W[j0 + j, c] as float32, 8 rows by 8 columns at a
 * time, each live row prefetched GEMM_PREFETCH_AHEAD elements on. */
MD_AVX512 static void gemm_pack_w(float *dst, const void *w, int dtype, int64_t rows, int64_t k,
                                  int64_t j0, int64_t c0, int64_t kc) {
  const char *bytes = w;
  size_t esize = dtype == MD_AVX512_F32 ? 4 : 2;
  for (int quarter = 0; quarter < GEMM_NR / 8; quarter++) {
    int64_t first = j0 + 8 * quarter;
    int live = rows - first >= 8 ? 8 : rows - first > 0 ? (int)(rows - first) : 0;
    for (int64_t c = 0; c < kc; c += 8) {
      int cols = kc - c >= 8 ? 8 : (int)(kc - c);
      __mmask8 m = (__mmask8)((1u << cols) - 1u);
      __m256 r[8];
      if (c % 16 == 0 && c + GEMM_PREFETCH_AHEAD < kc)
        for (int i = 0; i < live; i++) {
          size_t at = (size_t)(first + i) * (size_t)k + (size_t)(c0 + c + GEMM_PREFETCH_AHEAD);
          _mm_prefetch(bytes + at * esize, _MM_HINT_T0);
        }
      for (int i = 0; i < 8; i++)
        r[i] = i < live ? gemm_load8(w, dtype, (size_t)(first + i) * (size_t)k + (size_t)(c0 + c), m)
                        : _mm256_setzero_ps();
      md_transpose_8x8(r);
      for (int j = 0; j < cols; j++) _mm256_storeu_ps(dst + (c + j) * GEMM_NR + 8 * quarter, r[j]);
    }
  }
}

/* acc (12 x 32) = sum over kc columns of x's 12 rows (a[i], read in place)
 * times b (one packed W panel); then y rows [0, mr), outputs [0, nr):
 * y = (first ? bias or 0 : y) + acc. The accumulators are named variables
 * (GCC keeps an array of them in memory).
 *
 * Unlike the AVX2 item, the next x panel's lines are not prefetched during
 * the first W panel's run: on an Intel Xeon the products ran 8-10%
 * slower with those prefetches (into L1 or L2) than without. Which GEMM
 * multiplies a prompt on the avx512 path, this or OpenBLAS's sgemm, is
 * md_cpu_gemm's choice (cpu.h). */
MD_AVX512 static void gemm_micro_kernel(float *y, int64_t ldy, const float *const *a,
                                        const float *b, int64_t kc, int mr, int nr,
                                        const float *bias, bool first) {
#define MD_ACC(i) __m512 c##i##_0 = _mm512_setzero_ps(), c##i##_1 = _mm512_setzero_ps()
  MD_ACC(0); MD_ACC(1); MD_ACC(2); MD_ACC(3); MD_ACC(4); MD_ACC(5);
  MD_ACC(6); MD_ACC(7); MD_ACC(8); MD_ACC(9); MD_ACC(10); MD_ACC(11);
#undef MD_ACC
  for (int i = 0; i < mr; i++) {
    __builtin_prefetch(y + i * ldy, 1, 3);
    __builtin_prefetch(y + i * ldy + 16, 1, 3);
  }
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
  const float *a6 = a[6], *a7 = a[7], *a8 = a[8], *a9 = a[9], *a10 = a[10], *a11 = a[11];
  for (int64_t p = 0; p < kc; p++) {
    __m512 b0 = _mm512_loadu_ps(b + p * GEMM_NR), b1 = _mm512_loadu_ps(b + p * GEMM_NR + 16), ai;
#define MD_ROW(i)                              \
  ai = _mm512_set1_ps(a##i[p]);                \
  c##i##_0 = _mm512_fmadd_ps(ai, b0, c##i##_0); \
  c##i##_1 = _mm512_fmadd_ps(ai, b1, c##i##_1)
    MD_ROW(0); MD_ROW(1); MD_ROW(2); MD_ROW(3); MD_ROW(4); MD_ROW(5);
    MD_ROW(6); MD_ROW(7); MD_ROW(8); MD_ROW(9); MD_ROW(10); MD_ROW(11);
#undef MD_ROW
  }
  __m512 acc[GEMM_MR][2] = {{c0_0, c0_1}, {c1_0, c1_1}, {c2_0, c2_1},   {c3_0, c3_1},
                            {c4_0, c4_1}, {c5_0, c5_1}, {c6_0, c6_1},   {c7_0, c7_1},
                            {c8_0, c8_1}, {c9_0, c9_1}, {c10_0, c10_1}, {c11_0, c11_1}};
  /* Lanes of the two registers that are outputs: all but in a narrow panel. */
  __mmask16 m0 = nr >= 16 ? (__mmask16)0xffff : first_lanes(nr);
  __mmask16 m1 = nr >= 32 ? (__mmask16)0xffff : nr > 16 ? first_lanes(nr - 16) : (__mmask16)0;
  __m512 base0 = _mm512_setzero_ps(), base1 = _mm512_setzero_ps();
  if (first && bias) {
    base0 = _mm512_maskz_loadu_ps(m0, bias);
    base1 = _mm512_maskz_loadu_ps(m1, bias + 16);
  }
  for (int i = 0; i < mr; i++) {
    float *row = y + i * ldy;
    if (!first) {
      base0 = _mm512_maskz_loadu_ps(m0, row);
      base1 = _mm512_maskz_loadu_ps(m1, row + 16);
    }
    _mm512_mask_storeu_ps(row, m0, _mm512_add_ps(base0, acc[i][0]));
    _mm512_mask_storeu_ps(row + 16, m1, _mm512_add_ps(base1, acc[i][1]));
  }
}

/* x's 12 rows of the panel starting at row0, from column c0 (rows beyond n
 * repeat row0). */
MD_AVX512_INLINE void gemm_panel_rows(const float **a, const float *x, int64_t n, int64_t k,
                                      int64_t row0, int64_t c0) {
  for (int i = 0; i < GEMM_MR; i++)
    a[i] = x + (size_t)(row0 + i < n ? row0 + i : row0) * (size_t)k + (size_t)c0;
}

MD_AVX512 void md_avx512_gemm_f32_item(const md_avx512_gemm_item *it) {
  int64_t rows = it->rows, kc = it->kc;
  int64_t j1 = it->j0 + GEMM_GROUP * GEMM_NR < rows ? it->j0 + GEMM_GROUP * GEMM_NR : rows;
  int panels_w = (int)((j1 - it->j0 + GEMM_NR - 1) / GEMM_NR);
  for (int g = 0; g < panels_w; g++)
    gemm_pack_w(it->w_scratch + (size_t)g * (size_t)kc * GEMM_NR, it->w, it->dtype, rows, it->k,
                it->j0 + g * GEMM_NR, it->c0, kc);
  const float *a[GEMM_MR];
  for (int64_t panel = it->panel0; panel < it->panel1; panel++) {
    int64_t row0 = panel * GEMM_MR;
    int mr = it->n - row0 < GEMM_MR ? (int)(it->n - row0) : GEMM_MR;
    gemm_panel_rows(a, it->x, it->n, it->k, row0, it->c0);
    for (int g = 0; g < panels_w; g++) {
      int64_t jg = it->j0 + g * GEMM_NR;
      int nr = rows - jg < GEMM_NR ? (int)(rows - jg) : GEMM_NR;
      gemm_micro_kernel(it->y + row0 * rows + jg, rows, a,
                        it->w_scratch + (size_t)g * (size_t)kc * GEMM_NR, kc, mr, nr,
                        it->bias ? it->bias + jg : NULL, it->c0 == 0);
    }
  }
}
#else
/* Not x86-64: nothing here (the dispatchers never choose AVX-512). */
typedef int md_avx512_not_built;
#endif
