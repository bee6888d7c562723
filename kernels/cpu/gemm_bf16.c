/* The prompt's matrix products with AVX-512 BF16 (contract in gemm_bf16.h).
 *
 * vdpbf16ps multiplies pairs of bf16 numbers and adds both products to an
 * fp32 lane: lane l of acc += a[2l] * b[2l] + a[2l+1] * b[2l+1]. A product
 * of two bf16 numbers (8-bit significands) is exact in fp32, so the only
 * roundings are the sum of the pair and its addition to the accumulator,
 * the same count as two fp32 FMAs; the loss against the float32 product is
 * the rounding of the activations to bf16 (relative 2^-9 per element). It
 * does twice the work of an fp32 FMA per instruction: 64 flops per 512-bit
 * instruction, one per cycle on Zen 4 and Intel's AVX-512 BF16 cores.
 *
 * Blocking (as BLIS lays out a GEMM, with the weights in the role of its B):
 *   y[n, out] = x[n, K] W[out, K]^T.
 * - x is rounded to bf16 once and packed in panels of MR = 14 rows: for
 *   each K pair p, the 14 rows' pairs as 14 consecutive 32-bit words, so the
 *   micro-kernel broadcasts a row's pair straight from memory.
 * - W is packed per work item, a panel of NR = 32 output rows over all of
 *   K: for each pair p, the 32 rows' pairs (a pair of consecutive bf16 of a
 *   row is one 32-bit word of it, so packing is a transpose of words). The
 *   panel (64 K bytes: 96 KiB for K = 1536, 560 KiB for 8960) stays in L2
 *   while the micro-kernel runs down every row of x against it.
 * - The micro-kernel keeps a 14 x 32 tile of y in 28 of the 32 zmm
 *   registers: per pair, 2 loads of W, 14 broadcasts of x, 28 vdpbf16ps
 *   (14 rows measured a little faster than 12 on a Zen 4; noisy).
 *   Each tile is summed over the whole of K in registers and stored once:
 *   blocking K (the BLIS way, 256 columns at a time with the panel in L1)
 *   made every block load and store the tile again, and with y 35 KiB a row
 *   (1.5B's 8,960 outputs) those loads missed the caches on the critical
 *   path: full-K panels ran 1.1-1.4 times as fast on a Zen 4 (alternating,
 *   Qwen2.5-0.5B's and 1.5B's prompt shapes).
 * - Work items are panels of NR = 32 output rows by a range of x's rows,
 *   handed to threads as they come free (OpenMP dynamic); there are at
 *   least 4 per thread, splitting x's rows when the output is narrow.
 * Every element's sum runs over K in one order (pairs in order, from zero
 * in a register, then bias + sum), whatever the thread count or work split:
 * the results' bits do not depend on it. */
#include "kernels/cpu/gemm_bf16.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define MD_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma")))

enum {
  MR = 14, /* rows of x per micro-tile */
  NR = 32, /* output rows (columns of y) per micro-tile, two zmm: one packed
              panel of W, one work item */
};

size_t md_gemm_bf16_x_words(int64_t n, int64_t k) {
  int64_t panels = (n + MR - 1) / MR;
  int64_t pairs = (k + 1) / 2;
  return (size_t)(panels * pairs * MR);
}

size_t md_gemm_bf16_w_words(int64_t k) { return (size_t)((k + 1) / 2) * NR; }

/* Round to nearest even, as vcvtne2ps2bf16 does for every finite value
 * (NaNs stay NaNs); the packed words hold (even column) | (odd << 16). */
MD_BF16 static inline uint32_t pair_bits(float lo, float hi) {
  __m128bh packed = _mm_cvtne2ps_pbh(_mm_setzero_ps(), _mm_set_ps(0.0f, 0.0f, hi, lo));
  return (uint32_t)_mm_cvtsi128_si32((__m128i)packed);
}

/* Rounds and packs x's rows [panel * MR, panel * MR + MR) (zeros beyond n):
 * packed[(panel * pairs + p) * MR + i] = the pair p of row panel * MR + i. */
MD_BF16 static void pack_x(uint32_t *packed, const float *x, int64_t n, int64_t k,
                           int64_t panel) {
  int64_t pairs = (k + 1) / 2;
  uint32_t *dst = packed + panel * pairs * MR;
  for (int i = 0; i < MR; i++) {
    int64_t row = panel * MR + i;
    if (row >= n) {
      for (int64_t p = 0; p < pairs; p++) dst[p * MR + i] = 0;
      continue;
    }
    const float *src = x + row * k;
    int64_t p = 0;
    /* 16 pairs at a time: vcvtne2ps2bf16 interleaves nothing, so the 32
     * floats' bf16 halves come out in order: word j = (src[2j], src[2j+1]). */
    for (; p + 16 <= k / 2; p += 16) {
      __m512 lo = _mm512_loadu_ps(src + 2 * p);
      __m512 hi = _mm512_loadu_ps(src + 2 * p + 16);
      __m512i words = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
      uint32_t tmp[16];
      _mm512_storeu_si512(tmp, words);
      for (int j = 0; j < 16; j++) dst[(p + j) * MR + i] = tmp[j];
    }
    for (; p < pairs; p++) {
      float lo = src[2 * p];
      float hi = 2 * p + 1 < k ? src[2 * p + 1] : 0.0f;
      dst[p * MR + i] = pair_bits(lo, hi);
    }
  }
}

/* Packs W rows [j0, j0 + NR) (zeros beyond `rows`) over all of K:
 * dst[p * NR + j] = word p of row j0 + j (an odd K's last word is (last
 * column, 0)). */
static void pack_w(uint32_t *dst, const uint16_t *w, int64_t rows, int64_t k, int64_t j0) {
  int64_t pairs = (k + 1) / 2, whole = k / 2; /* whole: pairs with both columns */
  for (int j = 0; j < NR; j++) {
    int64_t row = j0 + j;
    if (row >= rows) {
      for (int64_t p = 0; p < pairs; p++) dst[p * NR + j] = 0;
      continue;
    }
    const uint16_t *src = w + row * k;
    for (int64_t p = 0; p < whole; p++) {
      uint32_t word;
      memcpy(&word, src + 2 * p, sizeof word);
      dst[p * NR + j] = word;
    }
    if (whole < pairs) dst[whole * NR + j] = src[2 * whole];
  }
}

/* acc(MR x 32) = sum over kc pairs; then y rows [0, mr) columns [0, nr):
 * y = (bias or 0) + acc. */
MD_BF16 static void micro_kernel(float *y, int64_t ldy, const uint32_t *a, const uint32_t *b,
                                 int64_t kc, int mr, int nr, const float *bias) {
  __m512 acc[MR][2];
#pragma GCC unroll 14
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; p++) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * NR);
    __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * NR + 16);
#pragma GCC unroll 14
    for (int i = 0; i < MR; i++) {
      __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[p * MR + i]);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], b0, ai);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], b1, ai);
    }
  }
  __mmask16 m0 = nr >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nr) - 1u);
  __mmask16 m1 = nr >= 32 ? (__mmask16)0xffff
                          : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1u) : (__mmask16)0;
  __m512 base0 = _mm512_setzero_ps(), base1 = _mm512_setzero_ps();
  if (bias) {
    base0 = _mm512_maskz_loadu_ps(m0, bias);
    base1 = _mm512_maskz_loadu_ps(m1, bias + 16);
  }
#pragma GCC unroll 14
  for (int i = 0; i < MR; i++) {
    if (i >= mr) break;
    float *row = y + i * ldy;
    _mm512_mask_storeu_ps(row, m0, _mm512_add_ps(base0, acc[i][0]));
    _mm512_mask_storeu_ps(row + 16, m1, _mm512_add_ps(base1, acc[i][1]));
  }
}

MD_BF16 static void gemm_item(float *y, const uint32_t *packed_x, const uint16_t *w,
                               const float *bias, int64_t n, int64_t rows, int64_t k,
                               int64_t j0, int64_t panel0, int64_t panel1, uint32_t *w_scratch) {
  int64_t pairs = (k + 1) / 2;
  int nr = rows - j0 < NR ? (int)(rows - j0) : NR;
  pack_w(w_scratch, w, rows, k, j0);
  for (int64_t panel = panel0; panel < panel1; panel++) {
    int64_t row0 = panel * MR;
    int mr = n - row0 < MR ? (int)(n - row0) : MR;
    micro_kernel(y + row0 * rows + j0, rows, packed_x + panel * pairs * MR, w_scratch, pairs, mr,
                 nr, bias ? bias + j0 : NULL);
  }
}

void md_gemm_bf16(int threads, float *y, const float *x, const uint16_t *w, const float *bias,
                  int64_t n, int64_t rows, int64_t k, uint32_t *x_scratch,
                  uint32_t *w_scratch) {
  int64_t panels = (n + MR - 1) / MR;
  int64_t col_blocks = (rows + NR - 1) / NR;
  /* At least 4 items per thread: split x's rows when the output is narrow. */
  int64_t row_blocks = (4 * (int64_t)threads + col_blocks - 1) / col_blocks;
  if (row_blocks > panels) row_blocks = panels;
  if (row_blocks < 1) row_blocks = 1;
  int64_t per_block = (panels + row_blocks - 1) / row_blocks;
  row_blocks = (panels + per_block - 1) / per_block;
  int64_t items = col_blocks * row_blocks;
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static)
    for (int64_t panel = 0; panel < panels; panel++) pack_x(x_scratch, x, n, k, panel);
    uint32_t *mine = w_scratch + (size_t)omp_get_thread_num() * md_gemm_bf16_w_words(k);
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; item++) {
      int64_t cb = item / row_blocks, rb = item % row_blocks;
      int64_t panel0 = rb * per_block;
      int64_t panel1 = panel0 + per_block < panels ? panel0 + per_block : panels;
      gemm_item(y, x_scratch, w, bias, n, rows, k, cb * NR, panel0, panel1, mine);
    }
  }
}

#else /* not x86-64: never called (md_cpu_facts has no AVX-512 BF16 there) */

size_t md_gemm_bf16_x_words(int64_t n, int64_t k) { (void)n, (void)k; return 0; }
size_t md_gemm_bf16_w_words(int64_t k) { (void)k; return 0; }
void md_gemm_bf16(int threads, float *y, const float *x, const uint16_t *w, const float *bias,
                  int64_t n, int64_t rows, int64_t k, uint32_t *x_scratch,
                  uint32_t *w_scratch) {
  (void)threads, (void)y, (void)x, (void)w, (void)bias, (void)n, (void)rows, (void)k,
      (void)x_scratch, (void)w_scratch;
  abort();
}

#endif
