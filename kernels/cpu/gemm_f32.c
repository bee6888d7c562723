/* The prompt's matrix products in float32 with AVX2 + FMA (contract in
 * gemm_f32.h): on the avx2 path, every prompt product of the back end
 * (matmul, and matmul_shared's groups of one x: q, k and v; gate and up),
 * whatever the weights' dtype, in place of cblas_sgemm (and, for F16 or
 * BF16 weights, of a weight tile widened to float32 before it); on the
 * avx512 path the same where md_cpu_gemm chooses it (cpu.h), the items then
 * run by the AVX-512 micro-kernel of avx512.c (12 x 32 tiles, the same sums
 * in the same order; the plan and threads here).
 *
 * Why our own: a product alone runs here at about sgemm's rate (1.00-1.04x
 * on a Zen 3); the gain is in what sgemm does around its kernel on every
 * call. It packs both operands again (F16/BF16 weights widened into a
 * float32 tile first), scales or zeroes C for the bias, hands off between
 * its threads once per product, and runs the narrow k and v products (128
 * outputs) at a lower rate than the wide ones. Here F16/BF16 weights are
 * widened as they are packed, the bias is added as the tiles are stored,
 * x is not packed at all, and the products of one x share one list of
 * work items, one parallel region and one hand-off.
 *
 * Blocking (as BLIS lays out a GEMM, with the weights in the role of its B):
 *   y[n, out] = x[n, K] W[out, K]^T.
 * - x is read in place, in panels of MR = 6 rows: the micro-kernel
 *   broadcasts each of the 6 rows' x[., c] from its row (6 pointers, as
 *   the prompt's attention reads its queries), and a panel's 6 runs of a
 *   K block's columns (at most 24 KiB) stay in L1 while the item's W
 *   panels pass over them; the next panel's lines are prefetched during
 *   the first W panel's run. Packing x first, in 6-row column-interleaved
 *   panels as BLIS does, costs a pass over x (1-2% slower in the model).
 *   Rows beyond n repeat the panel's first row and are never stored.
 * - W is packed per work item and K block, in panels of NR = 16 output
 *   rows: for each column c, the 16 rows' W[., c] (one transpose, 8 x 8 at
 *   a time in registers, with the F16/BF16 widening folded into the loads).
 *   An item is GROUP = 4 such panels (64 outputs) by a range of x's
 *   panels: each x panel is used against the 4 W panels while it sits in
 *   L1/L2, and the 4 panels of a K block (KC_MAX = 1,024 columns: 256 KiB)
 *   stay in a Zen 3's 512 KiB L2 for the whole range.
 * - K is blocked only when long, in equal blocks of at most KC_MAX
 *   columns (Qwen2.5-0.5B's 896 is one block, 1.5B's 1,536 two of 768,
 *   the 0.5B down projection's 4,864 five). The blocks run one after another, each with
 *   all its items: the block's columns of x (1,700 rows: 7 MiB at most)
 *   stay in L3 while every item's W panels pass over them (items running
 *   all their blocks in turn would read the whole of x, 33 MB for the down
 *   projection, from memory once per 64 outputs). The tile of y is stored
 *   once per block (the first block adds the bias, later ones add to y).
 *   Blocks of 1,024 columns with 4 panels measured best on a Zen 3: smaller
 *   blocks, or K = 896 in two, cost more in extra passes over y and x than
 *   the panels' fit in L1 gains.
 * - The weights are read from memory (the model's are too large for L3):
 *   the packing prefetches each row 64 elements ahead, which hides the
 *   latency that the eight rows read together otherwise expose (about 2%
 *   on the 0.5B gate products with cold weights).
 * - The micro-kernel keeps a 6 x 16 tile of y in 12 of the 16 ymm
 *   registers: per column, 2 loads of W, 6 broadcasts of x, 12 FMAs (the
 *   shape of BLIS's Haswell/Zen sgemm kernel; 12 independent chains cover
 *   the FMA latency of 4 cycles on 2 pipes).
 * - Work items (gemm_items.h) are handed to threads as they come free
 *   (OpenMP dynamic), at least ITEMS_PER_THREAD per thread, splitting x's
 *   rows when the outputs are few; the last item, one of many, leaves the
 *   other threads waiting a short time only.
 * Every element's sum runs over K in one order (columns in order within a
 * block, from zero in a register; the first block added to the bias, or
 * to zero, each later one to y), whatever the thread count or work split. */
#include "kernels/cpu/gemm_f32.h"

#include <omp.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/cpu/avx512.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/gemm_items.h"
#include "kernels/cpu/transpose8.h"
#include "kernels/cpu/vexp.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define MD_AVX2 __attribute__((target("avx2,fma,f16c")))

enum {
  MR = 6,    /* rows of x per micro-tile */
  NR = 16,   /* outputs (columns of y) per micro-tile: one packed W panel */
  GROUP = 4, /* W panels per work item, used against each x panel in turn */
  KC_MAX = 1024, /* columns of K per block at most */
  ITEMS_PER_THREAD = 8,
  PREFETCH_AHEAD = 64 /* elements of a weight row prefetched ahead of its packing */
};

/* Columns of K per block: all of them up to KC_MAX, else equal blocks of
 * at most KC_MAX (rounded up to a multiple of 8 for the packing's steps). */
static int64_t block_cols(int64_t k) {
  int64_t blocks = (k + KC_MAX - 1) / KC_MAX, kc = (k + blocks - 1) / blocks;
  return blocks > 1 ? (kc + 7) / 8 * 8 : kc;
}

size_t md_gemm_f32_w_floats(int64_t k) { return (size_t)GROUP * (size_t)block_cols(k) * NR; }

/* 8 consecutive elements of a weight row as float32 (exact widening). */
MD_AVX2 static inline __attribute__((always_inline)) __m256 load8(const void *w, md_dtype dtype,
                                                                 size_t at) {
  if (dtype == MD_DTYPE_F32) return _mm256_loadu_ps((const float *)w + at);
  __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + at));
  if (dtype == MD_DTYPE_F16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Packs W rows [j0, j0 + NR) (zeros beyond `rows`), columns [c0, c0 + kc):
 * dst[(c - c0) * NR + j] = W[j0 + j, c] as float32. */
MD_AVX2 static void pack_w(float *dst, const void *w, md_dtype dtype, int64_t rows, int64_t k,
                           int64_t j0, int64_t c0, int64_t kc) {
  const char *bytes = w;
  size_t esize = dtype == MD_DTYPE_F32 ? 4 : 2;
  for (int half = 0; half < NR / 8; half++) {
    int64_t first = j0 + 8 * half;
    int live = rows - first >= 8 ? 8 : rows - first > 0 ? (int)(rows - first) : 0;
    int64_t c = 0;
    for (; c + 8 <= kc; c += 8) {
      __m256 r[8];
      /* Each live row PREFETCH_AHEAD elements on, within the block. */
      if (c % 16 == 0 && c + PREFETCH_AHEAD < kc)
        for (int i = 0; i < live; i++) {
          size_t at = (size_t)(first + i) * (size_t)k + (size_t)(c0 + c + PREFETCH_AHEAD);
          _mm_prefetch(bytes + at * esize, _MM_HINT_T0);
        }
      for (int i = 0; i < 8; i++)
        r[i] = i < live ? load8(w, dtype, (size_t)(first + i) * (size_t)k + (size_t)(c0 + c))
                        : _mm256_setzero_ps();
      md_transpose_8x8(r);
      for (int j = 0; j < 8; j++) _mm256_storeu_ps(dst + (c + j) * NR + 8 * half, r[j]);
    }
    for (; c < kc; c++)
      for (int i = 0; i < 8; i++)
        dst[c * NR + 8 * half + i] =
            i < live ? md_cpu_weight_at(w, dtype, (size_t)(first + i) * (size_t)k + (size_t)(c0 + c))
                     : 0.0f;
  }
}

/* acc(MR x NR) = sum over kc columns of x's 6 rows (a[i], read in place)
 * times b (packed W); then y rows [0, mr), columns [0, nr): y = (first ?
 * bias or 0 : y) + acc. next, if not NULL: the next panel's 6 rows, whose
 * lines are prefetched as the columns go by. With `gate` (the SwiGLU
 * epilogue, the up product's last K block): u = (first ? bias or 0 : y) +
 * acc is not stored; gate's tile (same rows and columns, already final)
 * becomes silu(gate) * u. The 12 accumulators are named variables, not an
 * array: GCC kept an array of them in memory (a load and a store around
 * every FMA). */
MD_AVX2 static void micro_kernel(float *y, int64_t ldy, const float *const *a, const float *b,
                                 int64_t kc, int mr, int nr, const float *bias, bool first,
                                 const float *const *next, float *gate) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int i = 0; i < mr; i++) {
    __builtin_prefetch(y + i * ldy, 1, 3);
    __builtin_prefetch(y + i * ldy + 8, 1, 3);
  }
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
  for (int64_t p = 0; p < kc; p++) {
    if (next && p % 16 == 0)
      for (int i = 0; i < MR; i++) _mm_prefetch((const char *)(next[i] + p), _MM_HINT_T0);
    __m256 b0 = _mm256_loadu_ps(b + p * NR), b1 = _mm256_loadu_ps(b + p * NR + 8), ai;
#define MD_F32_ROW(row, lo, hi)        \
  ai = _mm256_broadcast_ss(row + p); \
  lo = _mm256_fmadd_ps(ai, b0, lo);  \
  hi = _mm256_fmadd_ps(ai, b1, hi)
    MD_F32_ROW(a0, c00, c01);
    MD_F32_ROW(a1, c10, c11);
    MD_F32_ROW(a2, c20, c21);
    MD_F32_ROW(a3, c30, c31);
    MD_F32_ROW(a4, c40, c41);
    MD_F32_ROW(a5, c50, c51);
#undef MD_F32_ROW
  }
  __m256 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (gate && nr == NR) { /* u = base + acc, then gate = silu(gate) * u */
    __m256 base0 = _mm256_setzero_ps(), base1 = _mm256_setzero_ps();
    if (first && bias) {
      base0 = _mm256_loadu_ps(bias);
      base1 = _mm256_loadu_ps(bias + 8);
    }
    for (int i = 0; i < mr; i++) {
      const float *row = y + i * ldy;
      float *g = gate + i * ldy;
      if (!first) {
        base0 = _mm256_loadu_ps(row);
        base1 = _mm256_loadu_ps(row + 8);
      }
      _mm256_storeu_ps(g, md_silu_mul8(_mm256_loadu_ps(g), _mm256_add_ps(base0, acc[i][0])));
      _mm256_storeu_ps(g + 8, md_silu_mul8(_mm256_loadu_ps(g + 8), _mm256_add_ps(base1, acc[i][1])));
    }
    return;
  }
  if (gate) { /* a narrow last panel: the same, lane by lane into 8-wide vectors */
    for (int i = 0; i < mr; i++) {
      float u[NR], g[NR] = {0}, out[NR];
      for (int h = 0; h < 2; h++) _mm256_storeu_ps(u + 8 * h, acc[i][h]);
      for (int j = 0; j < nr; j++) {
        u[j] += first ? (bias ? bias[j] : 0.0f) : y[i * ldy + j];
        g[j] = gate[i * ldy + j];
      }
      for (int h = 0; h < 2; h++)
        _mm256_storeu_ps(out + 8 * h, md_silu_mul8(_mm256_loadu_ps(g + 8 * h),
                                                   _mm256_loadu_ps(u + 8 * h)));
      for (int j = 0; j < nr; j++) gate[i * ldy + j] = out[j];
    }
    return;
  }
  if (nr == NR) {
    __m256 base0 = _mm256_setzero_ps(), base1 = _mm256_setzero_ps();
    if (first && bias) {
      base0 = _mm256_loadu_ps(bias);
      base1 = _mm256_loadu_ps(bias + 8);
    }
    for (int i = 0; i < mr; i++) {
      float *row = y + i * ldy;
      if (!first) {
        base0 = _mm256_loadu_ps(row);
        base1 = _mm256_loadu_ps(row + 8);
      }
      _mm256_storeu_ps(row, _mm256_add_ps(base0, acc[i][0]));
      _mm256_storeu_ps(row + 8, _mm256_add_ps(base1, acc[i][1]));
    }
    return;
  }
  /* A narrow last panel (outputs not a multiple of 16): lane by lane. */
  float tile[MR][NR];
  for (int i = 0; i < MR; i++) {
    _mm256_storeu_ps(tile[i], acc[i][0]);
    _mm256_storeu_ps(tile[i] + 8, acc[i][1]);
  }
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nr; j++) {
      float base = first ? (bias ? bias[j] : 0.0f) : y[i * ldy + j];
      y[i * ldy + j] = base + tile[i][j];
    }
}

/* x's 6 rows of the panel starting at row0, from column c0 (rows beyond n
 * repeat row0: their sums are computed and never stored). */
static void panel_rows(const float **a, const float *x, int64_t n, int64_t k, int64_t row0,
                       int64_t c0) {
  for (int i = 0; i < MR; i++)
    a[i] = x + (size_t)(row0 + i < n ? row0 + i : row0) * (size_t)k + (size_t)c0;
}

/* One work item of the K block [c0, c0 + kc): outputs [j0, j0 + GROUP *
 * NR) (clipped) against x's panels [panel0, panel1). */
MD_AVX2 static void gemm_item(float *y, const float *x, const void *w, md_dtype dtype,
                              const float *bias, int64_t n, int64_t rows, int64_t k, int64_t c0,
                              int64_t kc, int64_t j0, int64_t panel0, int64_t panel1,
                              float *w_scratch) {
  int64_t j1 = j0 + GROUP * NR < rows ? j0 + GROUP * NR : rows;
  int panels_w = (int)((j1 - j0 + NR - 1) / NR);
  for (int g = 0; g < panels_w; g++)
    pack_w(w_scratch + (size_t)g * (size_t)kc * NR, w, dtype, rows, k, j0 + g * NR, c0, kc);
  const float *a[MR], *next[MR];
  panel_rows(a, x, n, k, panel0 * MR, c0);
  for (int64_t panel = panel0; panel < panel1; panel++) {
    int64_t row0 = panel * MR;
    int mr = n - row0 < MR ? (int)(n - row0) : MR;
    /* The next panel of the range, if any, prefetched during the first W
     * panel's run. */
    bool more = panel + 1 < panel1;
    if (more) panel_rows(next, x, n, k, row0 + MR, c0);
    for (int g = 0; g < panels_w; g++) {
      int64_t jg = j0 + g * NR;
      int nr = rows - jg < NR ? (int)(rows - jg) : NR;
      micro_kernel(y + row0 * rows + jg, rows, a, w_scratch + (size_t)g * (size_t)kc * NR, kc, mr,
                   nr, bias ? bias + jg : NULL, c0 == 0, more && g == 0 ? next : NULL, NULL);
    }
    if (more) memcpy(a, next, sizeof a);
  }
}

/* One work item of the fused gate/up product (md_gemm_f32_swiglu), K block
 * [c0, c0 + kc): outputs [j0, j0 + SWIGLU_COLS) of both products against
 * x's panels [panel0, panel1). The scratch holds the gate's 2 W panels,
 * then the up's 2; for each x panel the gate's tiles are stored first, so
 * that in the last K block the up's tiles find them final and leave
 * silu(gate) * up in their place (earlier blocks store both as the plain
 * product does). */
enum { SWIGLU_COLS = GROUP * NR / 2 };
MD_AVX2 static void swiglu_item(const md_gemm_f32_out *gate, const md_gemm_f32_out *up,
                                const float *x, int64_t n, int64_t k, int64_t c0, int64_t kc,
                                int64_t j0, int64_t panel0, int64_t panel1, float *w_scratch) {
  int64_t rows = gate->rows, j1 = j0 + SWIGLU_COLS < rows ? j0 + SWIGLU_COLS : rows;
  int panels_w = (int)((j1 - j0 + NR - 1) / NR);
  bool last = c0 + kc == k;
  const md_gemm_f32_out *part[2] = {gate, up};
  for (int p = 0; p < 2; p++)
    for (int g = 0; g < panels_w; g++)
      pack_w(w_scratch + (size_t)(p * panels_w + g) * (size_t)kc * NR, part[p]->w, part[p]->dtype,
             rows, k, j0 + g * NR, c0, kc);
  const float *a[MR], *next[MR];
  panel_rows(a, x, n, k, panel0 * MR, c0);
  for (int64_t panel = panel0; panel < panel1; panel++) {
    int64_t row0 = panel * MR;
    int mr = n - row0 < MR ? (int)(n - row0) : MR;
    bool more = panel + 1 < panel1;
    if (more) panel_rows(next, x, n, k, row0 + MR, c0);
    for (int p = 0; p < 2; p++)
      for (int g = 0; g < panels_w; g++) {
        int64_t jg = j0 + g * NR, at = row0 * rows + jg;
        int nr = rows - jg < NR ? (int)(rows - jg) : NR;
        const float *bias = part[p]->bias ? part[p]->bias + jg : NULL;
        micro_kernel(part[p]->y + at, rows, a, w_scratch + (size_t)(p * panels_w + g) * (size_t)kc * NR,
                     kc, mr, nr, bias, c0 == 0, more && p == 0 && g == 0 ? next : NULL,
                     p == 1 && last ? gate->y + at : NULL);
      }
    if (more) memcpy(a, next, sizeof a);
  }
}

void md_gemm_f32_swiglu(int threads, const float *x, int64_t n, int64_t k,
                        const md_gemm_f32_out *gate, const md_gemm_f32_out *up, float *w_scratch) {
  int64_t panels = (n + MR - 1) / MR, kc_max = block_cols(k);
  md_gemm_items plan = md_gemm_items_plan(&gate->rows, 1, SWIGLU_COLS, panels,
                                          ITEMS_PER_THREAD * (int64_t)threads);
#pragma omp parallel num_threads(threads)
  {
    float *mine = w_scratch + (size_t)omp_get_thread_num() * md_gemm_f32_w_floats(k);
    for (int64_t c0 = 0; c0 < k; c0 += kc_max) {
      int64_t kc = k - c0 < kc_max ? k - c0 : kc_max;
#pragma omp for schedule(dynamic, 1)
      for (int64_t item = 0; item < plan.count; item++) {
        md_gemm_item it = md_gemm_items_at(&plan, item);
        swiglu_item(gate, up, x, n, k, c0, kc, it.col0, it.panel0, it.panel1, mine);
      }
    }
  }
}

/* md_avx512_gemm_f32_item's dtype codes are md_dtype's values. */
_Static_assert(MD_AVX512_F32 == (int)MD_DTYPE_F32 && MD_AVX512_F16 == (int)MD_DTYPE_F16 &&
                   MD_AVX512_BF16 == (int)MD_DTYPE_BF16,
               "avx512.h's dtype codes");
_Static_assert(GROUP * NR == 64, "avx512.h's items are 64 outputs wide");

void md_gemm_f32_shared(md_cpu_isa isa, int threads, const float *x, int64_t n, int64_t k,
                        const md_gemm_f32_out *outs, int count, float *w_scratch) {
  _Static_assert(MD_GEMM_F32_MAX_SHARED <= MD_GEMM_ITEMS_MAX_PRODUCTS, "gemm_items.h's limit");
  bool wide = isa == MD_CPU_ISA_AVX512;
  int64_t mr = wide ? MD_AVX512_GEMM_MR : MR;
  int64_t panels = (n + mr - 1) / mr, rows[MD_GEMM_F32_MAX_SHARED], kc_max = block_cols(k);
  for (int o = 0; o < count; o++) rows[o] = outs[o].rows;
  md_gemm_items plan =
      md_gemm_items_plan(rows, count, GROUP * NR, panels, ITEMS_PER_THREAD * (int64_t)threads);
#pragma omp parallel num_threads(threads)
  {
    float *mine = w_scratch + (size_t)omp_get_thread_num() * md_gemm_f32_w_floats(k);
    /* K block by K block, every item over the block's columns of x while
     * they are in L3; the loop's barrier keeps each tile of y's blocks in
     * order. */
    for (int64_t c0 = 0; c0 < k; c0 += kc_max) {
      int64_t kc = k - c0 < kc_max ? k - c0 : kc_max;
#pragma omp for schedule(dynamic, 1)
      for (int64_t item = 0; item < plan.count; item++) {
        md_gemm_item it = md_gemm_items_at(&plan, item);
        const md_gemm_f32_out *out = &outs[it.product];
        if (wide) {
          md_avx512_gemm_item task = {
              .y = out->y, .x = x, .w = out->w, .bias = out->bias, .w_scratch = mine,
              .n = n, .rows = out->rows, .k = k, .c0 = c0, .kc = kc, .j0 = it.col0,
              .panel0 = it.panel0, .panel1 = it.panel1, .dtype = (int32_t)out->dtype};
          md_avx512_gemm_f32_item(&task);
        } else {
          gemm_item(out->y, x, out->w, out->dtype, out->bias, n, out->rows, k, c0, kc, it.col0,
                    it.panel0, it.panel1, mine);
        }
      }
    }
  }
}

#else /* not x86-64: never called (the avx2 path does not exist there) */

size_t md_gemm_f32_w_floats(int64_t k) { return (size_t)k; }
void md_gemm_f32_swiglu(int threads, const float *x, int64_t n, int64_t k,
                        const md_gemm_f32_out *gate, const md_gemm_f32_out *up, float *w_scratch) {
  (void)threads, (void)x, (void)n, (void)k, (void)gate, (void)up, (void)w_scratch;
}
void md_gemm_f32_shared(md_cpu_isa isa, int threads, const float *x, int64_t n, int64_t k,
                        const md_gemm_f32_out *outs, int count, float *w_scratch) {
  (void)isa, (void)threads, (void)x, (void)n, (void)k, (void)outs, (void)count, (void)w_scratch;
}

#endif

void md_gemm_f32(md_cpu_isa isa, int threads, float *y, const float *x, const void *w,
                 md_dtype dtype, const float *bias, int64_t n, int64_t rows, int64_t k,
                 float *w_scratch) {
  md_gemm_f32_out out = {.y = y, .w = w, .dtype = dtype, .bias = bias, .rows = rows};
  md_gemm_f32_shared(isa, threads, x, n, k, &out, 1, w_scratch);
}
