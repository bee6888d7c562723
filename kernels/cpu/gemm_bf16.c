/* The prompt's matrix products with AVX-512 BF16 (contract in gemm_bf16.h),
 * and prefill attention's P V on the same instruction (at the end).
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
 * - W is packed per work item and K block, in panels of NR = 32 output
 *   rows: for each pair p, the 32 rows' pairs (a pair of consecutive bf16
 *   of a row is one 32-bit word of it, so packing is a transpose of words,
 *   16 x 16 at a time in registers). An item is GROUP = 4 such panels (128
 *   output rows) by a range of x's panels: each x panel, read from L3 or
 *   memory, is used against the 4 W panels while it sits in L2, so x is
 *   streamed once per 128 outputs instead of once per 32 (x's panels for a
 *   1,700-token prompt are 5 MiB at K = 1536, 30 MiB at 8,960: one per W
 *   panel was as much traffic again as W itself, per output column).
 * - K is blocked only when long: all of it up to KC_MAX = 1536 pairs (the
 *   4 packed panels, 768 KiB at most, stay in the 1 MiB L2 of a Zen 4 or a
 *   Sapphire Rapids core), else equal blocks of at most KC_MAX pairs.
 * - The micro-kernel keeps a 14 x 32 tile of y in 28 of the 32 zmm
 *   registers: per pair, 2 loads of W, 14 broadcasts of x, 28 vdpbf16ps
 *   (14 rows measured a little faster than 12 on a Zen 4; noisy).
 *   Each tile is summed over a whole K block in registers and stored once
 *   per block. Blocking K short (the BLIS way, 256 columns at a time with
 *   the panel in L1) makes every block load and store the tile again, and
 *   with y 35 KiB a row (1.5B's 8,960 outputs) those loads miss the caches
 *   on the critical path (full-K panels measured 1.1-1.4x as fast on a
 *   Zen 4).
 * - Prefetches: while the first W panel runs against an x panel, the next
 *   x panel is fetched into L2 (a line per pair), and each tile's lines of
 *   y are fetched for writing before its sums start (y's rows are far
 *   apart and miss on the final stores otherwise): on a Zen 4 that took a
 *   product streaming x from L3 from 0.85-0.9 to 0.93-0.96 of the
 *   micro-kernel's rate on L2-resident panels.
 * - Work items are handed to threads as they come free (OpenMP dynamic);
 *   there are at least 4 per thread, splitting x's rows when the output is
 *   narrow. Products of one x (q, k and v; gate and up:
 *   md_gemm_bf16_shared) pack it once and share one list of items.
 * Every element's sum runs over K in one order (pairs in order within a
 * block, from zero in a register; the first block added to the bias, or
 * to zero, each later one to y), whatever the thread count or work split:
 * the results' bits do not depend on it. */
#include "kernels/cpu/gemm_bf16.h"

#include <omp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/gemm_items.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define MD_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,prfchw")))

enum {
  MR = 14, /* rows of x per micro-tile */
  NR = 32, /* output rows (columns of y) per micro-tile, two zmm: one packed
              panel of W */
  GROUP = 4,    /* W panels per work item, used against each x panel in turn */
  KC_MAX = 1536 /* pairs of K per block at most */
};

size_t md_gemm_bf16_x_words(int64_t n, int64_t k) {
  int64_t panels = (n + MR - 1) / MR;
  int64_t pairs = (k + 1) / 2;
  return (size_t)(panels * pairs * MR);
}

/* Pairs of K per block: all of them up to KC_MAX, else equal blocks of at
 * most KC_MAX. */
static int64_t block_pairs(int64_t k) {
  int64_t pairs = (k + 1) / 2, blocks = (pairs + KC_MAX - 1) / KC_MAX;
  return (pairs + blocks - 1) / blocks;
}

size_t md_gemm_bf16_w_words(int64_t k) { return (size_t)GROUP * (size_t)block_pairs(k) * NR; }

/* Round to nearest even, as vcvtne2ps2bf16 does for every finite value
 * (NaNs stay NaNs); the packed words hold (even column) | (odd << 16). */
MD_BF16 static inline uint32_t pair_bits(float lo, float hi) {
  __m128bh packed = _mm_cvtne2ps_pbh(_mm_setzero_ps(), _mm_set_ps(0.0f, 0.0f, hi, lo));
  return (uint32_t)_mm_cvtsi128_si32((__m128i)packed);
}

/* Transposes a 16 x 16 block of 32-bit words held one row per register:
 * on return r[w] holds column w (word w of every row, row 0 in lane 0).
 * Words 4q .. 4q + 3 of a row sit in its 128-bit quarter q. */
MD_BF16 static inline __attribute__((always_inline)) void transpose_16x16(__m512i r[16]) {
  __m512i t[16];
  /* t[2m] quarter q: words 4q, 4q + 1 of rows 2m, 2m + 1 interleaved;
   * t[2m + 1]: words 4q + 2, 4q + 3. */
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  /* r[4g + c] quarter q: word 4q + c of rows 4g .. 4g + 3. */
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  /* For each c, a 4 x 4 transpose of quarters across r[c], r[4 + c],
   * r[8 + c], r[12 + c]: column 4q + c gets quarter q of each in turn.
   * shuffle_i32x4 0x88 takes quarters (a0, a2, b0, b2), 0xdd (a1, a3, b1, b3). */
  for (int c = 0; c < 4; c++) {
    __m512i u0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x88);
    __m512i u1 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xdd);
    __m512i u2 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x88);
    __m512i u3 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xdd);
    t[c] = _mm512_shuffle_i32x4(u0, u2, 0x88);
    t[8 + c] = _mm512_shuffle_i32x4(u0, u2, 0xdd);
    t[4 + c] = _mm512_shuffle_i32x4(u1, u3, 0x88);
    t[12 + c] = _mm512_shuffle_i32x4(u1, u3, 0xdd);
  }
  for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* Rounds and packs x's rows [panel * MR, panel * MR + MR) (zeros beyond n):
 * packed[(panel * pairs + p) * MR + i] = the pair p of row panel * MR + i.
 * Sixteen pairs of the 14 rows at a time: rounded (vcvtne2ps2bf16 keeps
 * the order, word j = (src[2j], src[2j + 1])), transposed in registers with
 * two rows of zeros, and stored as 16 runs of 14 words; storing them one
 * word at a time, 56 bytes apart, took 2% of a 1.5B prompt. */
MD_BF16 static void pack_x(uint32_t *packed, const float *x, int64_t n, int64_t k,
                           int64_t panel) {
  int64_t pairs = (k + 1) / 2, whole = k / 2;
  uint32_t *dst = packed + panel * pairs * MR;
  int live = n - panel * MR >= MR ? MR : (int)(n - panel * MR);
  const float *src = x + panel * MR * k;
  const __mmask16 row_mask = (__mmask16)((1u << MR) - 1u);
  int64_t p = 0;
  for (; p + 16 <= whole; p += 16) {
    __m512i r[16];
    for (int i = 0; i < 16; i++)
      r[i] = i < live ? (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i * k + 2 * p + 16),
                                                     _mm512_loadu_ps(src + i * k + 2 * p))
                      : _mm512_setzero_si512();
    transpose_16x16(r);
    for (int j = 0; j < 16; j++) _mm512_mask_storeu_epi32(dst + (p + j) * MR, row_mask, r[j]);
  }
  for (int i = 0; i < MR; i++)
    for (int64_t q = p; q < pairs; q++) {
      if (i >= live) {
        dst[q * MR + i] = 0;
        continue;
      }
      const float *row = src + i * k;
      dst[q * MR + i] = pair_bits(row[2 * q], 2 * q + 1 < k ? row[2 * q + 1] : 0.0f);
    }
}

/* Packs W rows [j0, j0 + NR) (zeros beyond `rows`) over all of K:
 * dst[p * NR + j] = word p of row j0 + j (an odd K's last word is (last
 * column, 0)). Sixteen rows by sixteen words at a time, transposed in
 * registers: storing one word at a time, 128 bytes apart, took a tenth of
 * a 1.5B prompt's time on a Zen 4. */
MD_BF16 static void pack_w(uint32_t *dst, const uint16_t *w, int64_t rows, int64_t k,
                           int64_t j0, int64_t p0, int64_t kc) {
  int64_t whole = k / 2; /* pairs with both columns */
  int64_t p_end = p0 + kc, whole_end = whole < p_end ? whole : p_end;
  for (int half = 0; half < NR / 16; half++) {
    int64_t first = j0 + 16 * half;
    int live = rows - first >= 16 ? 16 : rows - first > 0 ? (int)(rows - first) : 0;
    for (int64_t p = p0; p < whole_end; p += 16) {
      int cols = whole_end - p >= 16 ? 16 : (int)(whole_end - p);
      __mmask16 m = (__mmask16)((1u << cols) - 1u);
      __m512i r[16];
      for (int i = 0; i < 16; i++)
        r[i] = i < live ? _mm512_maskz_loadu_epi32(m, w + (first + i) * k + 2 * p)
                        : _mm512_setzero_si512();
      transpose_16x16(r);
      for (int i = 0; i < cols; i++)
        _mm512_storeu_si512(dst + (p - p0 + i) * NR + 16 * half, r[i]);
    }
    if (whole_end < p_end) /* an odd K's last word, in the last block */
      for (int i = 0; i < 16; i++)
        dst[(whole - p0) * NR + 16 * half + i] = i < live ? w[(first + i) * k + 2 * whole] : 0;
  }
}

/* acc(MR x 32) = sum over kc pairs; then y rows [0, mr) columns [0, nr):
 * y = (bias or 0) + acc. */
MD_BF16 static void micro_kernel(float *y, int64_t ldy, const uint32_t *a, const uint32_t *b,
                                 int64_t kc, int mr, int nr, const float *bias, bool first,
                                 const uint32_t *next, int64_t next_lines) {
  __m512 acc[MR][2];
#pragma GCC unroll 14
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int i = 0; i < mr; i++) {
    __builtin_prefetch(y + i * ldy, 1, 3);
    __builtin_prefetch(y + i * ldy + 16, 1, 3);
  }
  for (int64_t p = 0; p < kc; p++) {
    if (p < next_lines) _mm_prefetch((const char *)(next + p * 16), _MM_HINT_T1);
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
  if (first && bias) {
    base0 = _mm512_maskz_loadu_ps(m0, bias);
    base1 = _mm512_maskz_loadu_ps(m1, bias + 16);
  }
#pragma GCC unroll 14
  for (int i = 0; i < MR; i++) {
    if (i >= mr) break;
    float *row = y + i * ldy;
    if (!first) {
      base0 = _mm512_maskz_loadu_ps(m0, row);
      base1 = _mm512_maskz_loadu_ps(m1, row + 16);
    }
    _mm512_mask_storeu_ps(row, m0, _mm512_add_ps(base0, acc[i][0]));
    _mm512_mask_storeu_ps(row + 16, m1, _mm512_add_ps(base1, acc[i][1]));
  }
}

/* One work item: output rows [j0, j0 + GROUP * NR) (clipped) against x's
 * panels [panel0, panel1), K block by K block. */
MD_BF16 static void gemm_item(float *y, const uint32_t *packed_x, const uint16_t *w,
                               const float *bias, int64_t n, int64_t rows, int64_t k,
                               int64_t j0, int64_t panel0, int64_t panel1, uint32_t *w_scratch) {
  int64_t pairs = (k + 1) / 2, kc_max = block_pairs(k);
  int64_t j1 = j0 + GROUP * NR < rows ? j0 + GROUP * NR : rows;
  int panels_w = (int)((j1 - j0 + NR - 1) / NR);
  for (int64_t p0 = 0; p0 < pairs; p0 += kc_max) {
    int64_t kc = pairs - p0 < kc_max ? pairs - p0 : kc_max;
    for (int g = 0; g < panels_w; g++)
      pack_w(w_scratch + (size_t)g * kc_max * NR, w, rows, k, j0 + g * NR, p0, kc);
    for (int64_t panel = panel0; panel < panel1; panel++) {
      int64_t row0 = panel * MR;
      int mr = n - row0 < MR ? (int)(n - row0) : MR;
      const uint32_t *a = packed_x + (panel * pairs + p0) * MR;
      /* The next x panel's block is fetched into L2 during the first W
       * panel's run (a line per pair). */
      /* (a itself at the range's end: no pointer past the packed panels
       * is formed.) */
      bool more = panel + 1 < panel1;
      const uint32_t *next = more ? a + pairs * MR : a;
      int64_t next_lines = more ? (kc * MR + 15) / 16 : 0;
      for (int g = 0; g < panels_w; g++) {
        int64_t jg = j0 + g * NR;
        int nr = rows - jg < NR ? (int)(rows - jg) : NR;
        micro_kernel(y + row0 * rows + jg, rows, a, w_scratch + (size_t)g * kc_max * NR, kc, mr,
                     nr, bias ? bias + jg : NULL, p0 == 0, next, g == 0 ? next_lines : 0);
      }
    }
  }
}

void md_gemm_bf16_shared(int threads, const float *x, int64_t n, int64_t k,
                         const md_gemm_bf16_out *outs, int count, uint32_t *x_scratch,
                         uint32_t *w_scratch) {
  _Static_assert(MD_GEMM_BF16_MAX_SHARED <= MD_GEMM_ITEMS_MAX_PRODUCTS, "gemm_items.h's limit");
  int64_t panels = (n + MR - 1) / MR, rows[MD_GEMM_BF16_MAX_SHARED];
  for (int o = 0; o < count; o++) rows[o] = outs[o].rows;
  md_gemm_items plan = md_gemm_items_plan(rows, count, GROUP * NR, panels, 4 * (int64_t)threads);
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static)
    for (int64_t panel = 0; panel < panels; panel++) pack_x(x_scratch, x, n, k, panel);
    uint32_t *mine = w_scratch + (size_t)omp_get_thread_num() * md_gemm_bf16_w_words(k);
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < plan.count; item++) {
      md_gemm_item it = md_gemm_items_at(&plan, item);
      const md_gemm_bf16_out *out = &outs[it.product];
      gemm_item(out->y, x_scratch, out->w, out->bias, n, out->rows, k, it.col0, it.panel0,
                it.panel1, mine);
    }
  }
}

void md_gemm_bf16(int threads, float *y, const float *x, const uint16_t *w, const float *bias,
                  int64_t n, int64_t rows, int64_t k, uint32_t *x_scratch,
                  uint32_t *w_scratch) {
  md_gemm_bf16_out out = {.y = y, .w = w, .bias = bias, .rows = rows};
  md_gemm_bf16_shared(threads, x, n, k, &out, 1, x_scratch, w_scratch);
}

/* ---- prefill attention's P V (gemm_bf16.h) ------------------------------ */

size_t md_bf16_packed_values_words(int64_t n, int hd) { return (size_t)((n + 1) / 2) * (size_t)hd; }

MD_BF16 void md_bf16_pack_values(uint32_t *packed, const float *values, int64_t n, int hd) {
  for (int64_t j = 0; j < (n + 1) / 2; j++) {
    const float *lo = values + 2 * j * hd, *hi = lo + hd;
    uint32_t *dst = packed + j * hd;
    bool pair = 2 * j + 1 < n;
    int d = 0;
    /* 16 columns of each key rounded (vcvtneps2bf16), widened to words
     * and merged: word d = bf16(lo[d]) | bf16(hi[d]) << 16. */
    for (; d + 16 <= hd; d += 16) {
      __m512i l = _mm512_castsi256_si512((__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(lo + d)));
      __m512i h = pair ? _mm512_castsi256_si512((__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(hi + d)))
                       : _mm512_setzero_si512();
      __m512i words = _mm512_or_si512(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(l)),
                                      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
      _mm512_storeu_si512(dst + d, words);
    }
    for (; d < hd; d++) dst[d] = pair_bits(lo[d], pair ? hi[d] : 0.0f);
  }
}

MD_BF16 void md_bf16_pack_row(uint32_t *dst, const float *src, int64_t n) {
  int64_t j = 0;
  /* In place (dst == src) is safe: word j is written after floats 2j and
   * 2j + 1 are read, and 16 words take the bytes of 8 of the 32 floats
   * just read. */
  for (; 2 * j + 32 <= n; j += 16) {
    __m512 lo = _mm512_loadu_ps(src + 2 * j), hi = _mm512_loadu_ps(src + 2 * j + 16);
    _mm512_storeu_si512(dst + j, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  }
  for (; 2 * j < n; j++) {
    float lo = src[2 * j], hi = 2 * j + 1 < n ? src[2 * j + 1] : 0.0f;
    dst[j] = pair_bits(lo, hi);
  }
}

enum {
  PV_ROWS = 6,      /* rows per block: 12 accumulators, as the float32 kernel */
  PV_CHUNK = 256    /* key pairs per chunk: 6 rows' 6 KiB of weights stay in L1 */
};

/* Rows [r, r + g) of out, 32 columns from d0 (16 when `half`), per chunk of
 * key pairs, running sums kept in the output rows between chunks. */
/* Always inlined into pv_1 .. pv_6, where g is a constant (as the float32
 * kernels in avx512.c). */
MD_BF16 static inline __attribute__((always_inline)) void pv_block(float *const *out_rows, const uint32_t *p, int64_t ld,
                                    int64_t pairs, int64_t r, int g, const uint32_t *values,
                                    int hd) {
  const uint32_t *w[PV_ROWS];
  float *o[PV_ROWS];
#pragma GCC unroll 6
  for (int i = 0; i < g; i++) w[i] = p + (r + i) * ld, o[i] = out_rows[r + i];
  for (int64_t j0 = 0; j0 < pairs; j0 += PV_CHUNK) {
    int64_t j1 = pairs - j0 < PV_CHUNK ? pairs : j0 + PV_CHUNK;
    for (int d0 = 0; d0 < hd; d0 += 32) {
      int half = hd - d0 < 32;
      __m512 lo[PV_ROWS], hi[PV_ROWS];
#pragma GCC unroll 6
      for (int i = 0; i < g; i++) {
        lo[i] = j0 ? _mm512_loadu_ps(o[i] + d0) : _mm512_setzero_ps();
        hi[i] = j0 && !half ? _mm512_loadu_ps(o[i] + d0 + 16) : _mm512_setzero_ps();
      }
      for (int64_t j = j0; j < j1; j++) {
        const uint32_t *v = values + j * hd + d0;
        __m512bh v0 = (__m512bh)_mm512_loadu_si512(v);
        __m512bh v1 = half ? v0 : (__m512bh)_mm512_loadu_si512(v + 16);
#pragma GCC unroll 6
        for (int i = 0; i < g; i++) {
          __m512bh pj = (__m512bh)_mm512_set1_epi32((int)w[i][j]);
          lo[i] = _mm512_dpbf16_ps(lo[i], v0, pj);
          if (!half) hi[i] = _mm512_dpbf16_ps(hi[i], v1, pj);
        }
      }
#pragma GCC unroll 6
      for (int i = 0; i < g; i++) {
        _mm512_storeu_ps(o[i] + d0, lo[i]);
        if (!half) _mm512_storeu_ps(o[i] + d0 + 16, hi[i]);
      }
    }
  }
}

#define PV_ROWS_OF(G)                                                                             \
  MD_BF16 static void pv_##G(float *const *out_rows, const uint32_t *p, int64_t ld,               \
                             int64_t pairs, int64_t r, const uint32_t *values, int hd) {          \
    pv_block(out_rows, p, ld, pairs, r, G, values, hd);                                          \
  }
PV_ROWS_OF(1)
PV_ROWS_OF(2)
PV_ROWS_OF(3)
PV_ROWS_OF(4)
PV_ROWS_OF(5)
PV_ROWS_OF(6)

MD_BF16 void md_bf16_prefill_values(float *const *out_rows, const uint32_t *p, int64_t ld,
                                    const int64_t *visible, int64_t m,
                                    const uint32_t *packed_values, int hd) {
  typedef void (*rows_kernel)(float *const *, const uint32_t *, int64_t, int64_t, int64_t,
                              const uint32_t *, int);
  static const rows_kernel by_rows[PV_ROWS] = {pv_1, pv_2, pv_3, pv_4, pv_5, pv_6};
  for (int64_t r = 0; r < m; r += PV_ROWS) {
    int g = m - r < PV_ROWS ? (int)(m - r) : PV_ROWS;
    int64_t most = 0;
    for (int i = 0; i < g; i++) most = visible[r + i] > most ? visible[r + i] : most;
    by_rows[g - 1](out_rows, p, ld, (most + 1) / 2, r, packed_values, hd);
  }
}

/* ---- decode rows (gemm_bf16.h, md_bf16_rows) ----------------------------- */

enum {
  DR_ROWS = 4,           /* weight rows per block */
  DR_VECS = 6,           /* vectors of x per block at most: 24 sums in registers */
  DR_STREAM_AHEAD = 1024 /* bytes each row's stream is prefetched ahead (avx512.h) */
};

/* Rows ri[0 .. R) (at wr[i]) against vectors [0, J) of xb (J, R constants
 * where inlined): per step of 32 columns, R loads of W, J of x and R * J
 * vdpbf16ps, each (row, vector) in its own chain; the last < 32 columns
 * masked to zero in both operands. Each row's stream is prefetched
 * DR_STREAM_AHEAD bytes ahead, a line a step. */
MD_BF16 static inline __attribute__((always_inline)) void dr_block(
    float *y, int64_t y_stride, const uint16_t *const *wr, const int64_t *ri, const uint16_t *xb,
    int64_t xb_stride, int64_t k, const float *bias, const int R, const int J) {
  __m512 acc[DR_ROWS][DR_VECS];
#pragma GCC unroll 4
  for (int i = 0; i < R; i++)
#pragma GCC unroll 6
    for (int j = 0; j < J; j++) acc[i][j] = _mm512_setzero_ps();
  for (int64_t c = 0; c < k; c += 32) {
    __mmask32 m = k - c >= 32 ? ~(__mmask32)0 : (((__mmask32)1 << (k - c)) - 1);
    __m512bh wv[DR_ROWS];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
      _mm_prefetch((const char *)(wr[i] + c) + DR_STREAM_AHEAD, _MM_HINT_T0);
      wv[i] = (__m512bh)_mm512_maskz_loadu_epi16(m, wr[i] + c);
    }
#pragma GCC unroll 6
    for (int j = 0; j < J; j++) {
      __m512bh xv = (__m512bh)_mm512_maskz_loadu_epi16(m, xb + j * xb_stride + c);
#pragma GCC unroll 4
      for (int i = 0; i < R; i++) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], wv[i], xv);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < R; i++)
#pragma GCC unroll 6
    for (int j = 0; j < J; j++)
      y[j * y_stride + ri[i]] = _mm512_reduce_add_ps(acc[i][j]) + (bias ? bias[ri[i]] : 0.0f);
}

typedef void (*dr_kernel)(float *, int64_t, const uint16_t *const *, const int64_t *,
                          const uint16_t *, int64_t, int64_t, const float *);
#define DR_BLOCK_OF(R, J)                                                                         \
  MD_BF16 static void dr_##R##_##J(float *y, int64_t y_stride, const uint16_t *const *wr,          \
                                   const int64_t *ri, const uint16_t *xb, int64_t xb_stride,      \
                                   int64_t k, const float *bias) {                                \
    dr_block(y, y_stride, wr, ri, xb, xb_stride, k, bias, R, J);                                  \
  }
#define DR_BLOCKS_OF(R) \
  DR_BLOCK_OF(R, 1) DR_BLOCK_OF(R, 2) DR_BLOCK_OF(R, 3) DR_BLOCK_OF(R, 4) DR_BLOCK_OF(R, 5) DR_BLOCK_OF(R, 6)
DR_BLOCKS_OF(1)
DR_BLOCKS_OF(4)

/* Rows ri[0 .. R) against all nx vectors, in vector blocks of at most
 * DR_VECS, as even as they go (8 = 4 + 4). */
MD_BF16 static void dr_rows(float *y, int64_t y_stride, const uint16_t *const *wr,
                            const int64_t *ri, int R, const uint16_t *x, int64_t x_stride,
                            int64_t nx, int64_t k, const float *bias) {
  static const dr_kernel four[DR_VECS] = {dr_4_1, dr_4_2, dr_4_3, dr_4_4, dr_4_5, dr_4_6};
  static const dr_kernel one[DR_VECS] = {dr_1_1, dr_1_2, dr_1_3, dr_1_4, dr_1_5, dr_1_6};
  int64_t blocks = (nx + DR_VECS - 1) / DR_VECS;
  for (int64_t b = 0, j = 0; b < blocks; b++) {
    int64_t size = (nx - j + (blocks - b) - 1) / (blocks - b);
    (R == DR_ROWS ? four : one)[size - 1](y + j * y_stride, y_stride, wr, ri, x + j * x_stride,
                                          x_stride, k, bias);
    j += size;
  }
}

/* The four rows of a block come one from each quarter of [r0, r1): four
 * long streams, each prefetched ahead, as md_cpu_matvec reads them: a real
 * model's weights stream from memory, and four streams kept a core's reads
 * at the memory's rate where four consecutive rows did not
 * (bench/README.md). The rows of the remainder go one at a time. */
MD_BF16 void md_bf16_rows(float *y, int64_t y_stride, const uint16_t *w, const uint32_t *xb,
                          int64_t nx, int64_t r0, int64_t r1, int64_t k, const float *bias) {
  const uint16_t *x = (const uint16_t *)xb;
  int64_t x_stride = 2 * ((k + 1) / 2); /* bf16 elements a vector */
  int64_t quarter = (r1 - r0) / DR_ROWS;
  for (int64_t q = 0; q < quarter; q++) {
    int64_t ri[DR_ROWS];
    const uint16_t *wr[DR_ROWS];
    for (int i = 0; i < DR_ROWS; i++) ri[i] = r0 + i * quarter + q, wr[i] = w + ri[i] * k;
    dr_rows(y, y_stride, wr, ri, DR_ROWS, x, x_stride, nx, k, bias);
  }
  for (int64_t r = r0 + DR_ROWS * quarter; r < r1; r++) {
    const uint16_t *wr[1] = {w + r * k};
    dr_rows(y, y_stride, wr, &r, 1, x, x_stride, nx, k, bias);
  }
}

#else /* not x86-64: never called (md_cpu_facts has no AVX-512 BF16 there) */

size_t md_gemm_bf16_x_words(int64_t n, int64_t k) { (void)n, (void)k; return 0; }
size_t md_gemm_bf16_w_words(int64_t k) { (void)k; return 0; }
void md_gemm_bf16_shared(int threads, const float *x, int64_t n, int64_t k,
                         const md_gemm_bf16_out *outs, int count, uint32_t *x_scratch,
                         uint32_t *w_scratch) {
  (void)threads, (void)x, (void)n, (void)k, (void)outs, (void)count, (void)x_scratch,
      (void)w_scratch;
  abort();
}
void md_gemm_bf16(int threads, float *y, const float *x, const uint16_t *w, const float *bias,
                  int64_t n, int64_t rows, int64_t k, uint32_t *x_scratch,
                  uint32_t *w_scratch) {
  (void)threads, (void)y, (void)x, (void)w, (void)bias, (void)n, (void)rows, (void)k,
      (void)x_scratch, (void)w_scratch;
  abort();
}
size_t md_bf16_packed_values_words(int64_t n, int hd) { (void)n, (void)hd; return 0; }
void md_bf16_pack_values(uint32_t *packed, const float *values, int64_t n, int hd) {
  (void)packed, (void)values, (void)n, (void)hd;
  abort();
}
void md_bf16_pack_row(uint32_t *dst, const float *src, int64_t n) {
  (void)dst, (void)src, (void)n;
  abort();
}
void md_bf16_prefill_values(float *const *out_rows, const uint32_t *p, int64_t ld,
                            const int64_t *visible, int64_t m, const uint32_t *packed_values,
                            int hd) {
  (void)out_rows, (void)p, (void)ld, (void)visible, (void)m, (void)packed_values, (void)hd;
  abort();
}
void md_bf16_rows(float *y, int64_t y_stride, const uint16_t *w, const uint32_t *xb,
                  int64_t nx, int64_t r0, int64_t r1, int64_t k, const float *bias) {
  (void)y, (void)y_stride, (void)w, (void)xb, (void)nx, (void)r0, (void)r1, (void)k, (void)bias;
  abort();
}

#endif
