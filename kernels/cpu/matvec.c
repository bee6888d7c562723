/* Matrix-vector products and weight-tile conversion for F32, F16 and BF16
 * weights: the decode step's kernels, memory-bound, so each weight byte is
 * read exactly once and converted in registers. The AVX-512 versions are in
 * avx512.c; this file has the portable and AVX2 ones and the dispatch.
 *
 * bf16 -> f32 is exact: the bf16 bits are the high half of the f32
 * (`bits << 16`). f16 -> f32 is exact too (F16C's vcvtph2ps, or the
 * bit-level conversion below). Accumulation is fp32.
 *
 * The AVX2 functions carry target attributes, so this file compiles
 * without -march=native; md_cpu_detect_isa (features.c) picks the path at
 * run time. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/cpu/avx512.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/gemm_bf16.h"

#if defined(__x86_64__) || defined(__i386__)
#define MD_HAVE_X86 1
#include <immintrin.h>
#else
#define MD_HAVE_X86 0
#endif

#define MD_MATVEC_CHUNKS_PER_THREAD 8
#define MD_MATVEC_CHUNK_MIN_BYTES (64u << 10)

static inline float bf16_to_f32(uint16_t bits) {
  union { uint32_t u; float f; } v = {.u = (uint32_t)bits << 16};
  return v.f;
}

/* IEEE binary16 -> binary32, exact for every input (subnormals, inf, NaN). */
static inline float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  union { uint32_t u; float f; } v;
  if (exponent == 0) { /* subnormal: mantissa * 2^-24, exact in binary32 */
    float magnitude = (float)mantissa * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31)
    v.u = sign | 0x7f800000u | (mantissa << 13);
  else
    v.u = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  return v.f;
}

float md_cpu_weight_at(const void *w, md_dtype dtype, size_t index) {
  switch (dtype) {
  case MD_DTYPE_F32: return ((const float *)w)[index];
  case MD_DTYPE_F16: return f16_to_f32(((const uint16_t *)w)[index]);
  case MD_DTYPE_BF16: return bf16_to_f32(((const uint16_t *)w)[index]);
  }
  return 0.0f;
}

/* ---- portable C ---------------------------------------------------------- */

/* The rows [r0, r1) are split into four equal quarters and row i of each
 * quarter is computed together: four long sequential streams through the
 * matrix (which the hardware prefetchers follow; four adjacent short rows
 * were ~2x slower for Qwen's 896-wide rows on AMD Zen), and each x element
 * loaded once for four rows. The remainder rows go one at a time. */
#define MD_DEFINE_MATVEC_PORTABLE(NAME, TYPE, CONVERT)                                 \
  static float NAME##_row(const TYPE *wr, const float *x, int64_t cols) {               \
    float s = 0;                                                                       \
    for (int64_t c = 0; c < cols; c++) s += CONVERT(wr[c]) * x[c];                     \
    return s;                                                                          \
  }                                                                                    \
  static void NAME(float *y, const TYPE *w, const float *x, int64_t r0, int64_t r1,    \
                   int64_t cols, const float *bias) {                                  \
    int64_t quarter = (r1 - r0) / 4;                                                   \
    for (int64_t i = 0; i < quarter; i++) {                                            \
      int64_t r[4] = {r0 + i, r0 + quarter + i, r0 + 2 * quarter + i, r0 + 3 * quarter + i}; \
      const TYPE *w0 = w + r[0] * cols, *w1 = w + r[1] * cols;                         \
      const TYPE *w2 = w + r[2] * cols, *w3 = w + r[3] * cols;                         \
      float s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                            \
      for (int64_t c = 0; c < cols; c++) {                                             \
        float xc = x[c];                                                               \
        s0 += CONVERT(w0[c]) * xc;                                                     \
        s1 += CONVERT(w1[c]) * xc;                                                     \
        s2 += CONVERT(w2[c]) * xc;                                                     \
        s3 += CONVERT(w3[c]) * xc;                                                     \
      }                                                                                \
      float sums[4] = {s0, s1, s2, s3};                                                \
      for (int j = 0; j < 4; j++) y[r[j]] = sums[j] + (bias ? bias[r[j]] : 0.0f);      \
    }                                                                                  \
    for (int64_t r = r0 + 4 * quarter; r < r1; r++)                                    \
      y[r] = NAME##_row(w + r * cols, x, cols) + (bias ? bias[r] : 0.0f);              \
  }

#define MD_IDENTITY(v) (v)
MD_DEFINE_MATVEC_PORTABLE(matvec_f32_portable, float, MD_IDENTITY)
MD_DEFINE_MATVEC_PORTABLE(matvec_f16_portable, uint16_t, f16_to_f32)
MD_DEFINE_MATVEC_PORTABLE(matvec_bf16_portable, uint16_t, bf16_to_f32)

/* ---- AVX2 + FMA (+ F16C) ------------------------------------------------- */
#if MD_HAVE_X86
#define MD_AVX2 __attribute__((target("avx2,fma,f16c")))

MD_AVX2 static inline __m256 load8_f32(const float *p) { return _mm256_loadu_ps(p); }
MD_AVX2 static inline __m256 load8_f16(const uint16_t *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
MD_AVX2 static inline __m256 load8_bf16(const uint16_t *p) {
  __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
MD_AVX2 static inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* The 16-bit weights' four streams prefetched MD_MATVEC_PREFETCH_BYTES
 * ahead (avx512.h says why and how far), once per 64-byte line: every
 * other step of 16 columns. */
#define MATVEC_PREFETCH(TYPE, p, c)                                                     \
  do {                                                                                  \
    if (sizeof(TYPE) == 2 && ((c) & 31) == 0)                                           \
      _mm_prefetch((const char *)((p) + (c)) + MD_MATVEC_PREFETCH_BYTES, _MM_HINT_T0);  \
  } while (0)

/* Four rows per step, one from each quarter of [r0, r1) (see the portable
 * version for why), sixteen columns at a time: eight independent FMA chains
 * hide the FMA latency, and each x vector is loaded once for four rows. */
#define MD_DEFINE_MATVEC_AVX2(NAME, TYPE, LOAD8, CONVERT)                               \
  MD_AVX2 static float NAME##_row(const TYPE *wr, const float *x, int64_t cols) {       \
    int64_t c8 = cols & ~(int64_t)7, c = 0;                                             \
    __m256 a = _mm256_setzero_ps();                                                     \
    for (; c < c8; c += 8) a = _mm256_fmadd_ps(LOAD8(wr + c), _mm256_loadu_ps(x + c), a); \
    float s = hsum8(a);                                                                 \
    for (; c < cols; c++) s += CONVERT(wr[c]) * x[c];                                   \
    return s;                                                                           \
  }                                                                                     \
  MD_AVX2 static void NAME(float *y, const TYPE *w, const float *x, int64_t r0,         \
                           int64_t r1, int64_t cols, const float *bias) {               \
    int64_t c16 = cols & ~(int64_t)15, quarter = (r1 - r0) / 4;                         \
    for (int64_t i = 0; i < quarter; i++) {                                             \
      int64_t r[4] = {r0 + i, r0 + quarter + i, r0 + 2 * quarter + i, r0 + 3 * quarter + i}; \
      const TYPE *w0 = w + r[0] * cols, *w1 = w + r[1] * cols;                          \
      const TYPE *w2 = w + r[2] * cols, *w3 = w + r[3] * cols;                          \
      __m256 a0 = _mm256_setzero_ps(), b0 = a0, a1 = a0, b1 = a0;                       \
      __m256 a2 = a0, b2 = a0, a3 = a0, b3 = a0;                                        \
      for (int64_t c = 0; c < c16; c += 16) {                                           \
        MATVEC_PREFETCH(TYPE, w0, c);                                                   \
        MATVEC_PREFETCH(TYPE, w1, c);                                                   \
        MATVEC_PREFETCH(TYPE, w2, c);                                                   \
        MATVEC_PREFETCH(TYPE, w3, c);                                                   \
        __m256 xl = _mm256_loadu_ps(x + c), xh = _mm256_loadu_ps(x + c + 8);            \
        a0 = _mm256_fmadd_ps(LOAD8(w0 + c), xl, a0);                                    \
        b0 = _mm256_fmadd_ps(LOAD8(w0 + c + 8), xh, b0);                                \
        a1 = _mm256_fmadd_ps(LOAD8(w1 + c), xl, a1);                                    \
        b1 = _mm256_fmadd_ps(LOAD8(w1 + c + 8), xh, b1);                                \
        a2 = _mm256_fmadd_ps(LOAD8(w2 + c), xl, a2);                                    \
        b2 = _mm256_fmadd_ps(LOAD8(w2 + c + 8), xh, b2);                                \
        a3 = _mm256_fmadd_ps(LOAD8(w3 + c), xl, a3);                                    \
        b3 = _mm256_fmadd_ps(LOAD8(w3 + c + 8), xh, b3);                                \
      }                                                                                 \
      float sums[4] = {hsum8(_mm256_add_ps(a0, b0)), hsum8(_mm256_add_ps(a1, b1)),      \
                       hsum8(_mm256_add_ps(a2, b2)), hsum8(_mm256_add_ps(a3, b3))};     \
      const TYPE *rows[4] = {w0, w1, w2, w3};                                           \
      for (int j = 0; j < 4; j++) {                                                     \
        for (int64_t c = c16; c < cols; c++) sums[j] += CONVERT(rows[j][c]) * x[c];     \
        y[r[j]] = sums[j] + (bias ? bias[r[j]] : 0.0f);                                 \
      }                                                                                 \
    }                                                                                   \
    for (int64_t r = r0 + 4 * quarter; r < r1; r++)                                     \
      y[r] = NAME##_row(w + r * cols, x, cols) + (bias ? bias[r] : 0.0f);               \
  }

MD_DEFINE_MATVEC_AVX2(matvec_f32_avx2, float, load8_f32, MD_IDENTITY)
MD_DEFINE_MATVEC_AVX2(matvec_f16_avx2, uint16_t, load8_f16, f16_to_f32)
MD_DEFINE_MATVEC_AVX2(matvec_bf16_avx2, uint16_t, load8_bf16, bf16_to_f32)

/* One weight row of a four-row group against the vectors at xv (+ j *
 * cols) into yv (+ j * y_stride): for each vector the one-vector kernel's
 * two chains over sixteen columns (a: the low eight, b: the high eight),
 * its sum and its tail, so each (row, vector) gets that kernel's bits;
 * ROW4 widens the row's weights once for four vectors (named accumulators:
 * an array of them is not kept in registers), ROW1 is one vector. */
#define MD_MATVEC_AVX2_ROW_TAIL(CONVERT, j, acc_a, acc_b)                                 \
  do {                                                                                  \
    float sum = hsum8(_mm256_add_ps(acc_a, acc_b));                                     \
    for (int64_t c = c16; c < cols; c++) sum += CONVERT(wr[c]) * xv[(j) * cols + c];    \
    yv[(j) * y_stride] = sum + (bias ? bias[r] : 0.0f);                                 \
  } while (0)

#define MD_MATVEC_AVX2_ROW4(TYPE, LOAD8, CONVERT)                                         \
  do {                                                                                  \
    const float *x0 = xv, *x1 = xv + cols, *x2 = xv + 2 * cols, *x3 = xv + 3 * cols;    \
    __m256 a0 = _mm256_setzero_ps(), b0 = a0, a1 = a0, b1 = a0;                         \
    __m256 a2 = a0, b2 = a0, a3 = a0, b3 = a0;                                          \
    for (int64_t c = 0; c < c16; c += 16) {                                             \
      MATVEC_PREFETCH(TYPE, wr, c);                                                     \
      __m256 wl = LOAD8(wr + c), wh = LOAD8(wr + c + 8);                                \
      a0 = _mm256_fmadd_ps(wl, _mm256_loadu_ps(x0 + c), a0);                            \
      b0 = _mm256_fmadd_ps(wh, _mm256_loadu_ps(x0 + c + 8), b0);                        \
      a1 = _mm256_fmadd_ps(wl, _mm256_loadu_ps(x1 + c), a1);                            \
      b1 = _mm256_fmadd_ps(wh, _mm256_loadu_ps(x1 + c + 8), b1);                        \
      a2 = _mm256_fmadd_ps(wl, _mm256_loadu_ps(x2 + c), a2);                            \
      b2 = _mm256_fmadd_ps(wh, _mm256_loadu_ps(x2 + c + 8), b2);                        \
      a3 = _mm256_fmadd_ps(wl, _mm256_loadu_ps(x3 + c), a3);                            \
      b3 = _mm256_fmadd_ps(wh, _mm256_loadu_ps(x3 + c + 8), b3);                        \
    }                                                                                   \
    MD_MATVEC_AVX2_ROW_TAIL(CONVERT, 0, a0, b0);                                        \
    MD_MATVEC_AVX2_ROW_TAIL(CONVERT, 1, a1, b1);                                        \
    MD_MATVEC_AVX2_ROW_TAIL(CONVERT, 2, a2, b2);                                        \
    MD_MATVEC_AVX2_ROW_TAIL(CONVERT, 3, a3, b3);                                        \
  } while (0)

#define MD_MATVEC_AVX2_ROW1(TYPE, LOAD8, CONVERT)                                         \
  do {                                                                                  \
    __m256 a0 = _mm256_setzero_ps(), b0 = a0;                                           \
    for (int64_t c = 0; c < c16; c += 16) {                                             \
      a0 = _mm256_fmadd_ps(LOAD8(wr + c), _mm256_loadu_ps(xv + c), a0);                 \
      b0 = _mm256_fmadd_ps(LOAD8(wr + c + 8), _mm256_loadu_ps(xv + c + 8), b0);         \
    }                                                                                   \
    MD_MATVEC_AVX2_ROW_TAIL(CONVERT, 0, a0, b0);                                        \
  } while (0)

/* The kernel NAME for nx vectors x + j * cols into y + j * y_stride (j <
 * nx), rows [r0, r1), with its bits for every (row, vector) (a batched
 * decode step, md_cpu_matvec_rows): the rows of its four-row groups (the
 * first 4 * ((r1 - r0) / 4)) by MD_MATVEC_AVX2_ROW4, four vectors at a
 * time, and its last (r1 - r0) % 4 rows by its one-chain NAME##_row. */
#define MD_DEFINE_MATVEC_ROWS_AVX2(ROWS_NAME, NAME, TYPE, LOAD8, CONVERT)               \
  MD_AVX2 static void ROWS_NAME(float *y, int64_t y_stride, const TYPE *w, const float *x, \
                                int64_t nx, int64_t r0, int64_t r1, int64_t cols,         \
                                const float *bias) {                                      \
    int64_t c16 = cols & ~(int64_t)15, grouped = r0 + 4 * ((r1 - r0) / 4);               \
    for (int64_t r = r0; r < grouped; r++) {                                             \
      const TYPE *wr = w + r * cols;                                                     \
      int64_t j0 = 0;                                                                    \
      for (; j0 + 4 <= nx; j0 += 4) {                                                    \
        const float *xv = x + j0 * cols;                                                 \
        float *yv = y + j0 * y_stride + r;                                               \
        MD_MATVEC_AVX2_ROW4(TYPE, LOAD8, CONVERT);                                       \
      }                                                                                  \
      for (; j0 < nx; j0++) {                                                            \
        const float *xv = x + j0 * cols;                                                 \
        float *yv = y + j0 * y_stride + r;                                               \
        MD_MATVEC_AVX2_ROW1(TYPE, LOAD8, CONVERT);                                       \
      }                                                                                  \
    }                                                                                    \
    for (int64_t r = grouped; r < r1; r++)                                               \
      for (int64_t j = 0; j < nx; j++)                                                   \
        y[j * y_stride + r] = NAME##_row(w + r * cols, x + j * cols, cols) +             \
                              (bias ? bias[r] : 0.0f);                                   \
  }

MD_DEFINE_MATVEC_ROWS_AVX2(matvec_rows_f32_avx2, matvec_f32_avx2, float, load8_f32, MD_IDENTITY)
MD_DEFINE_MATVEC_ROWS_AVX2(matvec_rows_f16_avx2, matvec_f16_avx2, uint16_t, load8_f16, f16_to_f32)
MD_DEFINE_MATVEC_ROWS_AVX2(matvec_rows_bf16_avx2, matvec_bf16_avx2, uint16_t, load8_bf16,
                           bf16_to_f32)

MD_AVX2 static void rows_to_f32_avx2(float *dst, const uint16_t *src, size_t count, md_dtype dtype) {
  size_t i = 0;
  if (dtype == MD_DTYPE_BF16)
    for (; i + 8 <= count; i += 8) _mm256_storeu_ps(dst + i, load8_bf16(src + i));
  else
    for (; i + 8 <= count; i += 8) _mm256_storeu_ps(dst + i, load8_f16(src + i));
  for (; i < count; i++) dst[i] = md_cpu_weight_at(src, dtype, i);
}
#endif /* MD_HAVE_X86 */

/* ---- dispatch ------------------------------------------------------------ */

typedef void (*matvec_fn)(float *, const void *, const float *, int64_t, int64_t, int64_t,
                          const float *);

static matvec_fn pick_matvec(md_cpu_isa isa, md_dtype dtype) {
#if defined(__x86_64__)
  if (isa == MD_CPU_ISA_AVX512) {
    /* The 16-bit rows' prefetch distance by CPU (avx512.h). */
    bool far = md_cpu_amd_zen5_or_later_once();
    switch (dtype) {
    case MD_DTYPE_F32: return (matvec_fn)md_avx512_matvec_f32;
    case MD_DTYPE_F16: return far ? (matvec_fn)md_avx512_matvec_f16_far : (matvec_fn)md_avx512_matvec_f16;
    case MD_DTYPE_BF16:
      return far ? (matvec_fn)md_avx512_matvec_bf16_far : (matvec_fn)md_avx512_matvec_bf16;
    }
  }
#endif
#if MD_HAVE_X86
  if (isa == MD_CPU_ISA_AVX2) {
    switch (dtype) {
    case MD_DTYPE_F32: return (matvec_fn)matvec_f32_avx2;
    case MD_DTYPE_F16: return (matvec_fn)matvec_f16_avx2;
    case MD_DTYPE_BF16: return (matvec_fn)matvec_bf16_avx2;
    }
  }
#else
  (void)isa;
#endif
  switch (dtype) {
  case MD_DTYPE_F32: return (matvec_fn)matvec_f32_portable;
  case MD_DTYPE_F16: return (matvec_fn)matvec_f16_portable;
  case MD_DTYPE_BF16: return (matvec_fn)matvec_bf16_portable;
  }
  return (matvec_fn)matvec_f32_portable;
}

/* The rows of each piece of work md_cpu_matvec deals out for a [rows,
 * cols] matrix on a team of `team` threads; `rows` (one piece) when it
 * runs on one thread. */
static int64_t matvec_chunk(int team, md_dtype dtype, int64_t rows, int64_t cols) {
  if (team <= 1) return rows > 0 ? rows : 1;
  /* Chunks of rows handed out as threads come free, not one fixed slice per
   * thread: on a shared machine one core is often slowed for a while, and
   * with fixed slices every other thread waited for it at the barrier (a
   * fifth of a decode step on a 2-core VM). MD_MATVEC_CHUNKS_PER_THREAD
   * chunks each, at least MD_MATVEC_CHUNK_MIN_BYTES of weights so that the
   * kernel's four streams stay long enough for the prefetchers; a multiple
   * of 4 rows, so that every row but the last < 4 goes through the kernels'
   * four-row path whatever the thread count (row results do not depend on
   * the split). */
  size_t row_bytes = (size_t)cols * md_dtype_size(dtype);
  int64_t chunk = rows / ((int64_t)team * MD_MATVEC_CHUNKS_PER_THREAD);
  int64_t min_rows = (int64_t)(MD_MATVEC_CHUNK_MIN_BYTES / row_bytes);
  if (chunk < min_rows) chunk = min_rows;
  if (chunk < 4) chunk = 4; /* rows of more than 64 KiB, few of them */
  chunk = (chunk + 3) & ~(int64_t)3;
  return chunk;
}

void md_cpu_matvec(md_cpu_isa isa, int threads, float *y, const void *w, md_dtype dtype,
                   int64_t rows, int64_t cols, const float *x, const float *bias) {
  md_cpu_matvec_out out = {.y = y, .w = w, .dtype = dtype, .rows = rows, .bias = bias};
  md_cpu_matvec_shared(isa, threads, &out, 1, cols, x);
}

/* Rows of a batched product's piece: at most this many weight bytes, so
 * that the piece is read from memory once and from the core's L2 for the
 * other rows of x. */
#define MD_MATVEC_ROWS_PIECE_BYTES (128u << 10)

/* How md_cpu_matvec_shared, md_cpu_matvec_rows and md_cpu_matvec_rows_bf16
 * deal out n rows of x through `count` matrices: pieces of rows, chunk[i]
 * rows of matrix i each (pieces first[i] .. first[i + 1] - 1), on a team
 * of plan.team threads.
 * md_cpu_matvec's pieces, cut to fit the L2 when `fit_l2` (a kernel that
 * passes over a piece once per few rows of x); md_bf16_rows runs all the
 * rows of x through each block of 4 weight rows while it sits in L1, and
 * its four streams run longer in md_cpu_matvec's larger pieces. */
typedef struct rows_plan {
  int team;
  int64_t chunk[MD_CPU_MATVEC_MAX_SHARED], first[MD_CPU_MATVEC_MAX_SHARED + 1];
} rows_plan;

static rows_plan plan_rows(int threads, const md_cpu_matvec_out *outs, int count, int64_t cols,
                           int64_t n, bool fit_l2) {
  rows_plan plan = {.first = {0}};
  int64_t bytes = 0;
  for (int i = 0; i < count; i++)
    bytes += outs[i].rows * cols * (int64_t)md_dtype_size(outs[i].dtype);
  plan.team = md_cpu_team(threads, bytes * n, MD_GRAIN_MATVEC_BYTES);
  for (int i = 0; i < count; i++) {
    /* md_cpu_matvec's pieces, cut smaller for the L2: still a multiple of
     * 4 rows, so every row takes the kernel path it takes there (the four-
     * row one but for the last rows % 4) and gets its bits. */
    int64_t piece = matvec_chunk(plan.team, outs[i].dtype, outs[i].rows, cols);
    int64_t fit = (int64_t)(MD_MATVEC_ROWS_PIECE_BYTES / ((size_t)cols * md_dtype_size(outs[i].dtype)));
    fit &= ~(int64_t)3;
    if (fit < 4) fit = 4;
    plan.chunk[i] = piece < fit || !fit_l2 ? piece : fit;
    plan.first[i + 1] = plan.first[i] + (outs[i].rows + plan.chunk[i] - 1) / plan.chunk[i];
  }
  int64_t pieces = plan.first[count];
  if (pieces < plan.team) plan.team = (int)(pieces > 0 ? pieces : 1);
  return plan;
}

/* Piece p of a plan: its matrix and rows [*r0, *r1). */
static int plan_piece(const rows_plan *plan, const md_cpu_matvec_out *outs, int64_t p,
                      int64_t *r0, int64_t *r1) {
  int i = 0;
  while (p >= plan->first[i + 1]) i++;
  *r0 = (p - plan->first[i]) * plan->chunk[i];
  *r1 = *r0 + plan->chunk[i] < outs[i].rows ? *r0 + plan->chunk[i] : outs[i].rows;
  return i;
}

void md_cpu_matvec_shared(md_cpu_isa isa, int threads, const md_cpu_matvec_out *outs, int count,
                          int64_t cols, const float *x) {
  rows_plan plan = plan_rows(threads, outs, count, cols, 1, false);
  matvec_fn kernels[MD_CPU_MATVEC_MAX_SHARED];
  for (int i = 0; i < count; i++) kernels[i] = pick_matvec(isa, outs[i].dtype);
  MD_CPU_FOR_DYNAMIC(plan.team, p, plan.first[count], {
    int64_t r0, r1;
    int i = plan_piece(&plan, outs, p, &r0, &r1);
    kernels[i](outs[i].y, outs[i].w, x, r0, r1, cols, outs[i].bias);
  });
}

typedef void (*matvec_rows_fn)(float *, int64_t, const void *, const float *, int64_t, int64_t,
                               int64_t, int64_t, const float *);

/* The kernel that runs several vectors through a row at once where the
 * path has one (AVX-512, AVX2), else NULL (the one-vector kernel, vector
 * by vector). */
static matvec_rows_fn pick_matvec_rows(md_cpu_isa isa, md_dtype dtype) {
#if defined(__x86_64__)
  if (isa == MD_CPU_ISA_AVX512) {
    switch (dtype) {
    case MD_DTYPE_F32: return (matvec_rows_fn)md_avx512_matvec_rows_f32;
    case MD_DTYPE_F16: return (matvec_rows_fn)md_avx512_matvec_rows_f16;
    case MD_DTYPE_BF16: return (matvec_rows_fn)md_avx512_matvec_rows_bf16;
    }
  }
#endif
#if MD_HAVE_X86
  if (isa == MD_CPU_ISA_AVX2) {
    switch (dtype) {
    case MD_DTYPE_F32: return (matvec_rows_fn)matvec_rows_f32_avx2;
    case MD_DTYPE_F16: return (matvec_rows_fn)matvec_rows_f16_avx2;
    case MD_DTYPE_BF16: return (matvec_rows_fn)matvec_rows_bf16_avx2;
    }
  }
#endif
  (void)isa, (void)dtype;
  return NULL;
}

void md_cpu_matvec_rows(md_cpu_isa isa, int threads, const md_cpu_matvec_out *outs, int count,
                        int64_t cols, const float *x, int64_t n) {
  if (n == 1) {
    md_cpu_matvec_shared(isa, threads, outs, count, cols, x);
    return;
  }
  rows_plan plan = plan_rows(threads, outs, count, cols, n, true);
  matvec_fn kernels[MD_CPU_MATVEC_MAX_SHARED];
  matvec_rows_fn wide[MD_CPU_MATVEC_MAX_SHARED];
  for (int i = 0; i < count; i++) {
    kernels[i] = pick_matvec(isa, outs[i].dtype);
    wide[i] = pick_matvec_rows(isa, outs[i].dtype);
  }
  MD_CPU_FOR_DYNAMIC(plan.team, p, plan.first[count], {
    int64_t r0, r1;
    int i = plan_piece(&plan, outs, p, &r0, &r1);
    const md_cpu_matvec_out *o = &outs[i];
    if (wide[i]) {
      wide[i](o->y, o->rows, o->w, x, n, r0, r1, cols, o->bias);
      continue;
    }
    for (int64_t b = 0; b < n; b++)
      kernels[i](o->y + b * o->rows, o->w, x + b * cols, r0, r1, cols, o->bias);
  });
}

void md_cpu_matvec_rows_bf16(int threads, const md_cpu_matvec_out *outs, int count, int64_t cols,
                             const uint32_t *xb, int64_t n) {
  rows_plan plan = plan_rows(threads, outs, count, cols, n, false);
  MD_CPU_FOR_DYNAMIC(plan.team, p, plan.first[count], {
    int64_t r0, r1;
    int i = plan_piece(&plan, outs, p, &r0, &r1);
    md_bf16_rows(outs[i].y, outs[i].rows, outs[i].w, xb, n, r0, r1, cols, outs[i].bias);
  });
}

/* One F16 or BF16 row of `cols` weights widened to f32. */
static void row_to_f32(md_cpu_isa isa, float *out, const uint16_t *src, md_dtype dtype,
                       int64_t cols) {
#if defined(__x86_64__)
  if (isa == MD_CPU_ISA_AVX512) {
    md_avx512_to_f32(out, src, (size_t)cols, dtype == MD_DTYPE_BF16);
    return;
  }
#endif
#if MD_HAVE_X86
  if (isa == MD_CPU_ISA_AVX2) {
    rows_to_f32_avx2(out, src, (size_t)cols, dtype);
    return;
  }
#else
  (void)isa;
#endif
  for (int64_t c = 0; c < cols; c++) out[c] = md_cpu_weight_at(src, dtype, (size_t)c);
}

void md_cpu_rows_to_f32(md_cpu_isa isa, int threads, float *dst, const void *w, md_dtype dtype,
                        int64_t cols, int64_t r0, int64_t r1) {
  size_t row_bytes = (size_t)cols * md_dtype_size(dtype);
  if (dtype == MD_DTYPE_F32) {
    memcpy(dst, (const char *)w + (size_t)r0 * row_bytes, (size_t)(r1 - r0) * row_bytes);
    return;
  }
  MD_CPU_FOR_STATIC(threads, i, r1 - r0, {
    row_to_f32(isa, dst + (size_t)i * (size_t)cols,
               (const uint16_t *)((const char *)w + (size_t)(r0 + i) * row_bytes), dtype, cols);
  });
}
