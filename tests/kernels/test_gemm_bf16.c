/* The BF16 products (kernels/cpu/gemm_bf16.h, --bf16-gemm) against
 * their definition, y = bias + bf16(x) W^T, written out here:
 * - the rounding of the activations, exactly: with one-hot weight rows every
 *   output is one activation rounded to bf16, compared bit for bit with a
 *   round-to-nearest-even written below from the bits (ties both ways,
 *   negative values, large and small exponents);
 * - the sums, against double precision on the rounded activations, within
 *   the bound of fp32 accumulation: (k / 2 + 4) * 2^-24 * sum |terms|;
 * - the bits do not depend on the thread count;
 * - several products of one x in one call give each product's own bits;
 * - prefill attention's P V: the pair packing bit for bit, the products
 *   within the fp32 bound on the rounded weights and values;
 * - decode rows (md_bf16_rows): the sums within the fp32 bound, and each
 *   (row, vector) the same bits whatever the number of vectors, the rows
 *   it is computed with and the threads (a batched decode step gives every
 *   sequence its bits alone);
 * - the CPU back end sends BF16 prompts there and BF16 decode rows to
 *   md_bf16_rows (F32 weights keep the float32 kernels);
 * - a CPU without AVX-512 BF16 refuses the option, naming what it lacks.
 * Shapes leave remainders everywhere: rows of x not a multiple of the
 * micro-tile's 14, outputs not a multiple of a panel's 32, odd K, K not a
 * multiple of 32, narrow outputs that split x's rows into work items. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/gemm_bf16.h"
#include "tests/test_rng.h"
#include "tests/test_util.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint32_t next_u32(void) { return md_test_rng_u32(&rng_state); }

static float uniform(float lo, float hi) { return md_test_rng_uniform(&rng_state, lo, hi); }

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint32_t to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* float -> bf16 -> float, rounding to nearest, ties to the even bf16 (finite
 * normal inputs; the kernel flushes subnormals, which no test value is). */
static float round_bf16(float f) {
  uint32_t u = to_bits(f), low = u & 0xffffu, high = u >> 16;
  if (low > 0x8000u || (low == 0x8000u && (high & 1u))) high++;
  return from_bits(high << 16);
}

/* A random BF16 weight (magnitude 2^-6 .. 2^1), as the bits and its value. */
static uint16_t random_weight(void) {
  return (uint16_t)((next_u32() & 0x8000u) | ((121u + next_u32() % 8) << 7) | (next_u32() & 0x7fu));
}

static void *checked_malloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "test_gemm_bf16: out of memory\n");
    exit(1);
  }
  return p;
}

typedef struct product {
  int64_t n, rows, k;
  float *x, *bias, *y;
  uint16_t *w;
} product;

static product product_new(int64_t n, int64_t rows, int64_t k, bool with_bias) {
  product p = {.n = n, .rows = rows, .k = k};
  p.x = checked_malloc((size_t)(n * k) * sizeof(float));
  p.w = checked_malloc((size_t)(rows * k) * sizeof(uint16_t));
  p.y = checked_malloc((size_t)(n * rows) * sizeof(float));
  p.bias = with_bias ? checked_malloc((size_t)rows * sizeof(float)) : NULL;
  for (int64_t i = 0; i < n * k; i++) p.x[i] = uniform(-2.0f, 2.0f);
  for (int64_t i = 0; i < rows * k; i++) p.w[i] = random_weight();
  for (int64_t r = 0; with_bias && r < rows; r++) p.bias[r] = uniform(-1.0f, 1.0f);
  for (int64_t i = 0; i < n * rows; i++) p.y[i] = NAN; /* every element must be written */
  return p;
}

static void product_free(product *p) {
  free(p->x);
  free(p->w);
  free(p->y);
  free(p->bias);
}

/* The definition, in double: bias[r] + sum_c bf16(x[i, c]) W[r, c], and
 * the sum of the terms' magnitudes (the fp32 bound's scale). */
static double exact_sum(const product *p, int64_t i, int64_t r, double *magnitude) {
  double sum = p->bias ? p->bias[r] : 0.0;
  *magnitude = fabs(sum);
  for (int64_t c = 0; c < p->k; c++) {
    double term = (double)round_bf16(p->x[i * p->k + c]) * md_bf16_to_f32(p->w[r * p->k + c]);
    sum += term;
    *magnitude += fabs(term);
  }
  return sum;
}

static void run(product *p, int threads) {
  uint32_t *xs = checked_malloc(md_gemm_bf16_x_words(p->n, p->k) * sizeof(uint32_t));
  uint32_t *ws = checked_malloc((size_t)threads * md_gemm_bf16_w_words(p->k) * sizeof(uint32_t));
  md_gemm_bf16(threads, p->y, p->x, p->w, p->bias, p->n, p->rows, p->k, xs, ws);
  free(xs);
  free(ws);
}

/* One-hot weight rows: y[i, r] = bf16(x[i, col(r)]) exactly. */
static void test_rounding(void) {
  const int64_t n = 31, rows = 70, k = 37;
  product p = product_new(n, rows, k, false);
  for (int64_t i = 0; i < n * k; i++) {
    uint32_t u;
    switch (i % 6) {
      case 0: u = (to_bits(uniform(1.0f, 2.0f)) & 0xffff0000u) | 0x8000u; break; /* tie */
      case 1: u = to_bits(-uniform(1e-30f, 1e30f)); break;
      case 2: u = (to_bits(uniform(-4.0f, 4.0f)) & 0xffff0000u) | 0x7fffu; break; /* just below a tie */
      case 3: u = (to_bits(uniform(1e-20f, 1e-10f)) & 0xffff0000u) | 0x8001u; break; /* just above */
      case 4: u = to_bits(uniform(-1e20f, 1e20f)); break;
      default: u = to_bits(uniform(-3.0f, 3.0f)); break;
    }
    p.x[i] = from_bits(u);
  }
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < k; c++) p.w[r * k + c] = c == (r * 7) % k ? 0x3f80 : 0; /* 1.0, 0 */
  run(&p, 2);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t r = 0; r < rows; r++) {
      float want = round_bf16(p.x[i * k + (r * 7) % k]), got = p.y[i * rows + r];
      if (got != want && wrong++ < 5)
        fprintf(stderr, "rounding: x %a -> %a, want %a\n", p.x[i * k + (r * 7) % k], got, want);
    }
  CHECK_MSG(wrong == 0, "%lld of %lld outputs are not the activation rounded to bf16",
            (long long)wrong, (long long)(n * rows));
  product_free(&p);
}

/* The sums against double precision on the rounded activations. */
static void test_sums(void) {
  /* K above 3,072 is summed in blocks (two of 769 pairs at 3,075, three
   * of 1,367 at 8,201); 70 and 257 outputs leave a work item's 4 panels
   * part-filled. */
  const int64_t shapes[][3] = {{1, 1, 1},       {5, 33, 7},     {14, 32, 64},   {29, 130, 258},
                               {100, 300, 515}, {17, 128, 896}, {40, 257, 33}, {3, 1000, 1},
                               {20, 70, 3075},  {9, 40, 8201}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    for (int with_bias = 0; with_bias < 2; with_bias++) {
      int64_t n = shapes[s][0], rows = shapes[s][1], k = shapes[s][2];
      product p = product_new(n, rows, k, with_bias);
      run(&p, 3);
      double worst = 0.0;
      int64_t outside = 0;
      for (int64_t i = 0; i < n; i++)
        for (int64_t r = 0; r < rows; r++) {
          double magnitude, sum = exact_sum(&p, i, r, &magnitude);
          double err = fabs(p.y[i * rows + r] - sum);
          double bound = (double)(k / 2 + 4) * 0x1p-24 * magnitude;
          if (!(err <= bound)) outside++;
          if (err / (magnitude + 1e-30) > worst) worst = err / (magnitude + 1e-30);
        }
      CHECK_MSG(outside == 0, "n %lld rows %lld k %lld bias %d: %lld outputs beyond the fp32 bound "
                "(worst error %.3g of sum |terms|)", (long long)n, (long long)rows, (long long)k,
                with_bias, (long long)outside, worst);
      product_free(&p);
    }
  }
}

/* The same bits on 1, 2 and 3 threads (work items change, sums do not). */
static void test_threads(void) {
  const int64_t n = 61, rows = 200, k = 300;
  product p = product_new(n, rows, k, true);
  float *first = checked_malloc((size_t)(n * rows) * sizeof(float));
  run(&p, 1);
  memcpy(first, p.y, (size_t)(n * rows) * sizeof(float));
  for (int threads = 2; threads <= 3; threads++) {
    run(&p, threads);
    CHECK_MSG(memcmp(first, p.y, (size_t)(n * rows) * sizeof(float)) == 0,
              "%d threads give other bits than 1", threads);
  }
  free(first);
  product_free(&p);
}

/* Products of one x in one md_gemm_bf16_shared call: each output the bits
 * it has alone (narrow and wide outputs together, so the shared call
 * splits x's rows where some alone would not). */
static void test_shared(void) {
  const int64_t n = 45, k = 515, rows[] = {300, 33, 70};
  product p[3];
  float *alone[3];
  md_gemm_bf16_out outs[3];
  for (int o = 0; o < 3; o++) {
    p[o] = product_new(n, rows[o], k, o != 1);
    if (o) memcpy(p[o].x, p[0].x, (size_t)(n * k) * sizeof(float));
    run(&p[o], 2);
    alone[o] = checked_malloc((size_t)(n * rows[o]) * sizeof(float));
    memcpy(alone[o], p[o].y, (size_t)(n * rows[o]) * sizeof(float));
    for (int64_t i = 0; i < n * rows[o]; i++) p[o].y[i] = NAN;
    outs[o] = (md_gemm_bf16_out){.y = p[o].y, .w = p[o].w, .bias = p[o].bias, .rows = rows[o]};
  }
  uint32_t *xs = checked_malloc(md_gemm_bf16_x_words(n, k) * sizeof(uint32_t));
  uint32_t *ws = checked_malloc(3 * md_gemm_bf16_w_words(k) * sizeof(uint32_t));
  md_gemm_bf16_shared(3, p[0].x, n, k, outs, 3, xs, ws);
  for (int o = 0; o < 3; o++) {
    CHECK_MSG(memcmp(alone[o], p[o].y, (size_t)(n * rows[o]) * sizeof(float)) == 0,
              "product %d of a shared call differs from the same product alone", o);
    free(alone[o]);
    product_free(&p[o]);
  }
  free(xs);
  free(ws);
}

/* The bf16 pair word of (lo, hi) as the kernels must form it. */
static uint32_t pair_word(float lo, float hi) {
  return (to_bits(round_bf16(lo)) >> 16) | (to_bits(round_bf16(hi)) & 0xffff0000u);
}

/* Prefill attention's P V (--bf16-gemm): the packing bit for bit, in place
 * and not; the products against double precision on the rounded operands
 * within the fp32 bound, rows of a block seeing different numbers of keys
 * (odd ones too), chunks of 256 pairs crossed, head_dim 16, 48 (a half
 * block of 16 columns) and 128; words past the pairs a block may read are
 * NaN, so reading them would show. */
static void test_attention_values(void) {
  const int64_t lengths[] = {1, 2, 31, 32, 33, 64, 65, 101};
  for (size_t t = 0; t < sizeof lengths / sizeof lengths[0]; t++) {
    int64_t n = lengths[t], words = (n + 1) / 2;
    float *src = checked_malloc((size_t)n * sizeof(float)), *row = checked_malloc((size_t)n * sizeof(float));
    uint32_t *dst = checked_malloc((size_t)words * sizeof(uint32_t));
    for (int64_t i = 0; i < n; i++) src[i] = uniform(-3.0f, 3.0f);
    memcpy(row, src, (size_t)n * sizeof(float));
    md_bf16_pack_row(dst, src, n);
    md_bf16_pack_row((uint32_t *)row, row, n); /* in place */
    int64_t wrong = 0;
    for (int64_t j = 0; j < words; j++) {
      uint32_t want = pair_word(src[2 * j], 2 * j + 1 < n ? src[2 * j + 1] : 0.0f);
      wrong += dst[j] != want || ((uint32_t *)row)[j] != want;
    }
    CHECK_MSG(wrong == 0, "md_bf16_pack_row: %lld of %lld words wrong at n = %lld", (long long)wrong,
              (long long)words, (long long)n);
    free(src);
    free(row);
    free(dst);
  }
  const int hds[] = {16, 48, 128};
  for (size_t h = 0; h < sizeof hds / sizeof hds[0]; h++) {
    int hd = hds[h];
    const int64_t m = 13, keys = 703 - (int64_t)(h % 2); /* odd and even; blocks of 6, 6, 1 rows */
    int64_t visible[13];
    for (int64_t i = 0; i < m; i++) visible[i] = i == 12 ? 1 : keys - 9 * i - (i % 2); /* odd and even */
    float *values = checked_malloc((size_t)(keys * hd) * sizeof(float));
    for (int64_t i = 0; i < keys * hd; i++) values[i] = uniform(-1.0f, 1.0f);
    size_t vwords = md_bf16_packed_values_words(keys, hd);
    CHECK(vwords == (size_t)((keys + 1) / 2 * hd));
    uint32_t *packed = checked_malloc(vwords * sizeof(uint32_t));
    md_bf16_pack_values(packed, values, keys, hd);
    int64_t wrong = 0;
    for (int64_t j = 0; j < (keys + 1) / 2; j++)
      for (int d = 0; d < hd; d++) {
        float hi = 2 * j + 1 < keys ? values[(2 * j + 1) * hd + d] : 0.0f;
        wrong += packed[j * hd + d] != pair_word(values[2 * j * hd + d], hi);
      }
    CHECK_MSG(wrong == 0, "md_bf16_pack_values: %lld words wrong at head_dim %d", (long long)wrong, hd);
    int64_t ld = 400; /* words per row: more than the 352 pairs of 703 keys */
    uint32_t *p = checked_malloc((size_t)(m * ld) * sizeof(uint32_t));
    float *weights = checked_malloc((size_t)(m * keys) * sizeof(float));
    for (int64_t i = 0; i < m; i++) {
      int64_t block_most = 0;
      for (int64_t r = i / 6 * 6; r < m && r < i / 6 * 6 + 6; r++)
        block_most = visible[r] > block_most ? visible[r] : block_most;
      for (int64_t c = 0; c < keys; c++)
        weights[i * keys + c] = c < visible[i] ? uniform(0.0f, 1.0f) : 0.0f;
      for (int64_t j = 0; j < ld; j++) p[i * ld + j] = 0x7fc00000u; /* NaN pairs */
      md_bf16_pack_row(p + i * ld, weights + i * keys, visible[i]);
      for (int64_t j = (visible[i] + 1) / 2; j < (block_most + 1) / 2; j++) p[i * ld + j] = 0;
    }
    float *out = checked_malloc((size_t)(m * hd) * sizeof(float));
    float *out_rows[13];
    for (int64_t i = 0; i < m; i++) out_rows[i] = out + i * hd;
    md_bf16_prefill_values(out_rows, p, ld, visible, m, packed, hd);
    double worst = 0.0;
    int64_t outside = 0;
    for (int64_t i = 0; i < m; i++)
      for (int d = 0; d < hd; d++) {
        double sum = 0.0, magnitude = 0.0;
        for (int64_t c = 0; c < visible[i]; c++) {
          double term = (double)round_bf16(weights[i * keys + c]) * round_bf16(values[c * hd + d]);
          sum += term;
          magnitude += fabs(term);
        }
        double err = fabs(out_rows[i][d] - sum), bound = ((double)keys / 2 + 4) * 0x1p-24 * magnitude;
        outside += !(err <= bound);
        worst = err / (magnitude > 0 ? magnitude : 1) > worst ? err / (magnitude > 0 ? magnitude : 1) : worst;
      }
    CHECK_MSG(outside == 0, "md_bf16_prefill_values: %lld outputs outside the fp32 bound at head_dim %d (worst relative %g)",
              (long long)outside, hd, worst);
    free(values);
    free(packed);
    free(p);
    free(weights);
    free(out);
  }
}

/* x's n rows rounded and paired as the back end hands them to md_bf16_rows. */
static uint32_t *pair_rows(const float *x, int64_t n, int64_t k) {
  int64_t words = (k + 1) / 2;
  uint32_t *xb = checked_malloc((size_t)(n * words) * sizeof(uint32_t));
  for (int64_t i = 0; i < n; i++) md_bf16_pack_row(xb + i * words, x + i * k, k);
  return xb;
}

/* Decode rows: every (row, vector) within the fp32 bound of its exact sum
 * on the rounded activations; the same bits for the vector alone, for the
 * row alone, for any split of the rows into calls, with the bias added
 * last. Widths: one step, remainders of the 32-column step (odd too),
 * several steps; vector counts up to two blocks of 6 and beyond. */
static void test_decode_rows(void) {
  const int64_t widths[] = {1, 31, 33, 130, 896};
  const int64_t counts[] = {1, 2, 5, 8, 13};
  for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++)
    for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
      int64_t k = widths[wi], nx = counts[ci], rows = 23, words = (k + 1) / 2;
      bool with_bias = ci % 2 == 0;
      product p = product_new(nx, rows, k, with_bias);
      uint32_t *xb = pair_rows(p.x, nx, k);
      md_bf16_rows(p.y, rows, p.w, xb, nx, 0, rows, k, p.bias);
      double worst = 0.0;
      int64_t outside = 0, moved = 0;
      float alone = 0.0f, *split = checked_malloc((size_t)(nx * rows) * sizeof(float));
      for (int64_t i = 0; i < nx; i++)
        for (int64_t r = 0; r < rows; r++) {
          double magnitude, sum = exact_sum(&p, i, r, &magnitude);
          /* A lane adds one pair a step (at most two roundings: the pair's
           * sum and its addition), ceil(k / 32) steps, so at most k / 16 + 2
           * roundings; then the 16 lanes' tree (4 levels) and the bias (1).
           * Each rounding moves a partial sum of at most `magnitude` by at
           * most 2^-24 of it: (k / 16 + 7) * 2^-24 * magnitude bounds the
           * error; k / 2 + 24 is looser (the GEMM's k / 2 + 4 plus the
           * reduction's share, with room), and a wrong order of the pairs
           * or a lost term still lands far outside it. */
          double err = fabs(p.y[i * rows + r] - sum), bound = ((double)k / 2 + 24) * 0x1p-24 * magnitude;
          outside += !(err <= bound);
          double rel = err / (magnitude > 0 ? magnitude : 1);
          worst = rel > worst ? rel : worst;
          /* the row and the vector alone */
          md_bf16_rows(&alone, 1, p.w + r * k, xb + i * words, 1, 0, 1, k, p.bias ? p.bias + r : NULL);
          moved += memcmp(&alone, &p.y[i * rows + r], sizeof alone) != 0;
        }
      /* rows in uneven calls: [0, 5), [5, 6), [6, 19), [19, 23) */
      const int64_t cuts[] = {0, 5, 6, 19, 23};
      for (int c = 0; c < 4; c++) md_bf16_rows(split, rows, p.w, xb, nx, cuts[c], cuts[c + 1], k, p.bias);
      CHECK_MSG(outside == 0, "md_bf16_rows: %lld of %lld outside the fp32 bound at k %lld, %lld vectors (worst relative %g)",
                (long long)outside, (long long)(nx * rows), (long long)k, (long long)nx, worst);
      CHECK_MSG(moved == 0, "md_bf16_rows: %lld (row, vector) bits differ from the row and vector alone at k %lld, %lld vectors",
                (long long)moved, (long long)k, (long long)nx);
      CHECK_MSG(memcmp(split, p.y, (size_t)(nx * rows) * sizeof(float)) == 0,
                "md_bf16_rows: the rows cut into calls differ at k %lld, %lld vectors", (long long)k, (long long)nx);
      free(split);
      free(xb);
      product_free(&p);
    }
}

/* y = x W^T through a back end's matmul. */
static void backend_matmul(md_kernels *k, const md_tensor *tensor, const float *x, int64_t n,
                           float *y) {
  md_kweight *w = NULL;
  md_kbuf *xb = NULL, *yb = NULL;
  md_error err;
  int64_t rows = tensor->shape[0], cols = tensor->shape[1];
  CHECK(k->ops->weight_new(k, tensor, &w, &err) == MD_OK);
  CHECK(k->ops->buf_new(k, (size_t)(n * cols), &xb, &err) == MD_OK);
  CHECK(k->ops->buf_new(k, (size_t)(n * rows), &yb, &err) == MD_OK);
  CHECK(k->ops->buf_write(k, xb, 0, (size_t)(n * cols), x, &err) == MD_OK);
  k->ops->matmul(k, yb, xb, w, NULL, n);
  CHECK(k->ops->buf_read(k, yb, 0, (size_t)(n * rows), y, &err) == MD_OK);
  k->ops->buf_free(k, xb);
  k->ops->buf_free(k, yb);
  k->ops->weight_free(k, w);
}

/* ys[i] = x W_i^T through a back end's matmul_shared. */
static void backend_matmul_shared(md_kernels *k, const md_tensor *const *tensors, int count,
                                  const float *x, int64_t n, float *const *ys) {
  md_kweight *w[MD_KERNELS_MAX_SHARED] = {0};
  md_kbuf *xb = NULL, *yb[MD_KERNELS_MAX_SHARED] = {0};
  md_error err;
  int64_t cols = tensors[0]->shape[1];
  CHECK(k->ops->buf_new(k, (size_t)(n * cols), &xb, &err) == MD_OK);
  CHECK(k->ops->buf_write(k, xb, 0, (size_t)(n * cols), x, &err) == MD_OK);
  for (int i = 0; i < count; i++) {
    CHECK(k->ops->weight_new(k, tensors[i], &w[i], &err) == MD_OK);
    CHECK(k->ops->buf_new(k, (size_t)(n * tensors[i]->shape[0]), &yb[i], &err) == MD_OK);
  }
  k->ops->matmul_shared(k, yb, xb, (const md_kweight *const *)w, NULL, count, n);
  for (int i = 0; i < count; i++) {
    CHECK(k->ops->buf_read(k, yb[i], 0, (size_t)(n * tensors[i]->shape[0]), ys[i], &err) ==
          MD_OK);
    k->ops->buf_free(k, yb[i]);
    k->ops->weight_free(k, w[i]);
  }
  k->ops->buf_free(k, xb);
}

/* The back end: BF16 prompts go to md_gemm_bf16, BF16 decode rows to
 * md_bf16_rows (one row, and a batch's rows through matmul_rows, each with
 * the bits of the row alone); F32 weights keep their float32 kernels (the
 * bits of a back end without it). */
static void test_backend(void) {
  md_cpu_options plain = {.threads = 2}, fast = {.threads = 2, .bf16_gemm = true};
  md_kernels *k_plain = NULL, *k_fast = NULL;
  md_error err;
  CHECK(md_kernels_cpu_new(&plain, &k_plain, &err) == MD_OK);
  CHECK(md_kernels_cpu_new(&fast, &k_fast, &err) == MD_OK);
  CHECK(md_kernels_cpu_bf16_gemm(k_fast) && !md_kernels_cpu_bf16_gemm(k_plain));
  /* a prompt long enough for the GEMM; a short one of 20 rows */
  const int64_t n = MD_CPU_BF16_GEMM_MIN_ROWS + 6, rows = 96, cols = 130, short_n = 20;
  product p = product_new(n, rows, cols, false);
  float *wf = checked_malloc((size_t)(rows * cols) * sizeof(float));
  for (int64_t i = 0; i < rows * cols; i++) wf[i] = md_bf16_to_f32(p.w[i]);
  md_tensor bf16 = {.name = "w", .dtype = MD_DTYPE_BF16, .ndim = 2, .shape = {rows, cols},
                    .data = p.w, .nbytes = (size_t)(rows * cols) * 2};
  md_tensor f32 = {.name = "w", .dtype = MD_DTYPE_F32, .ndim = 2, .shape = {rows, cols},
                   .data = wf, .nbytes = (size_t)(rows * cols) * 4};
  float *a = checked_malloc((size_t)(n * rows) * sizeof(float));
  float *b = checked_malloc((size_t)(n * rows) * sizeof(float));
  run(&p, 2);
  backend_matmul(k_fast, &bf16, p.x, n, a);
  CHECK_MSG(memcmp(a, p.y, (size_t)(n * rows) * sizeof(float)) == 0,
            "a BF16 prompt product is not md_gemm_bf16's");
  backend_matmul(k_plain, &bf16, p.x, n, b);
  CHECK_MSG(memcmp(a, b, (size_t)(n * rows) * sizeof(float)) != 0,
            "the float32 back end gave the BF16 products' bits");
  backend_matmul(k_fast, &f32, p.x, n, a);
  backend_matmul(k_plain, &f32, p.x, n, b);
  CHECK_MSG(memcmp(a, b, (size_t)(n * rows) * sizeof(float)) == 0,
            "F32 weights did not keep the float32 product");
  uint32_t *x_pairs = pair_rows(p.x, short_n, cols);
  float *want = checked_malloc((size_t)(short_n * rows) * sizeof(float));
  md_bf16_rows(want, rows, p.w, x_pairs, short_n, 0, rows, cols, NULL);
  backend_matmul(k_fast, &bf16, p.x, short_n, a);
  CHECK_MSG(memcmp(a, want, (size_t)(short_n * rows) * sizeof(float)) == 0,
            "a short BF16 prompt (fewer than MD_CPU_BF16_GEMM_MIN_ROWS rows) is not md_bf16_rows's");
  backend_matmul(k_fast, &bf16, p.x, 1, a);
  CHECK_MSG(memcmp(a, want, (size_t)rows * sizeof(float)) == 0,
            "a BF16 decode row is not md_bf16_rows's");
  backend_matmul(k_plain, &bf16, p.x, 1, b);
  CHECK_MSG(memcmp(a, b, (size_t)rows * sizeof(float)) != 0,
            "the float32 back end gave a BF16 decode row's bits");
  backend_matmul(k_fast, &bf16, p.x, 3, a); /* fewer than a prompt's rows */
  CHECK_MSG(memcmp(a, want, (size_t)(3 * rows) * sizeof(float)) == 0,
            "three BF16 decode rows are not md_bf16_rows's");
  backend_matmul(k_fast, &f32, p.x, 1, a);
  backend_matmul(k_plain, &f32, p.x, 1, b);
  CHECK_MSG(memcmp(a, b, (size_t)rows * sizeof(float)) == 0,
            "an F32 decode row did not keep the float32 matrix-vector product");
  {
    md_kweight *w = NULL;
    md_kbuf *xbuf = NULL, *ybuf = NULL;
    CHECK(k_fast->ops->weight_new(k_fast, &bf16, &w, &err) == MD_OK);
    CHECK(k_fast->ops->buf_new(k_fast, (size_t)(3 * cols), &xbuf, &err) == MD_OK);
    CHECK(k_fast->ops->buf_new(k_fast, (size_t)(3 * rows), &ybuf, &err) == MD_OK);
    CHECK(k_fast->ops->buf_write(k_fast, xbuf, 0, (size_t)(3 * cols), p.x, &err) == MD_OK);
    const md_kweight *ws[] = {w};
    md_kbuf *ys[] = {ybuf};
    k_fast->ops->matmul_rows(k_fast, ys, xbuf, ws, NULL, 1, 3);
    CHECK(k_fast->ops->buf_read(k_fast, ybuf, 0, (size_t)(3 * rows), a, &err) == MD_OK);
    CHECK_MSG(memcmp(a, want, (size_t)(3 * rows) * sizeof(float)) == 0,
              "a batch's BF16 decode rows (matmul_rows) are not md_bf16_rows's");
    k_fast->ops->buf_free(k_fast, xbuf);
    k_fast->ops->buf_free(k_fast, ybuf);
    k_fast->ops->weight_free(k_fast, w);
  }
  free(want);
  free(x_pairs);
  /* matmul_shared: each output matmul's bits, on either path, with BF16
   * weights together, or one F32 among them (then matmul by matmul). */
  float *c = checked_malloc((size_t)(n * rows) * sizeof(float));
  float *d = checked_malloc((size_t)(n * rows) * sizeof(float));
  float *ys[] = {c, d};
  const md_tensor *both_bf16[] = {&bf16, &bf16}, *mixed[] = {&bf16, &f32};
  md_kernels *ks[] = {k_fast, k_plain};
  for (int kk = 0; kk < 4; kk++) {
    int64_t m = kk < 2 ? n : short_n; /* the GEMM, then md_bf16_rows */
    backend_matmul(ks[kk % 2], &bf16, p.x, m, a);
    backend_matmul(ks[kk % 2], &f32, p.x, m, b);
    backend_matmul_shared(ks[kk % 2], both_bf16, 2, p.x, m, ys);
    CHECK_MSG(memcmp(a, c, (size_t)(m * rows) * sizeof(float)) == 0 &&
                  memcmp(a, d, (size_t)(m * rows) * sizeof(float)) == 0,
              "matmul_shared of BF16 weights is not matmul's (%s)", kk % 2 ? "float32" : "--bf16-gemm");
    backend_matmul_shared(ks[kk % 2], mixed, 2, p.x, m, ys);
    CHECK_MSG(memcmp(a, c, (size_t)(m * rows) * sizeof(float)) == 0 &&
                  memcmp(b, d, (size_t)(m * rows) * sizeof(float)) == 0,
              "matmul_shared of BF16 and F32 weights is not matmul's (%s)",
              kk % 2 ? "float32" : "--bf16-gemm");
  }
  free(c);
  free(d);
  free(a);
  free(b);
  free(wf);
  product_free(&p);
  md_kernels_free(k_plain);
  md_kernels_free(k_fast);
}

/* Refusals: on the portable or AVX2 path the option is refused everywhere;
 * on a CPU without AVX-512 BF16 on every path, naming the feature. */
static void test_refused(bool has_bf16) {
  md_kernels *k = NULL;
  md_error err;
  md_cpu_options narrow = {.threads = 1, .kernels = MD_CPU_KERNELS_AVX2, .bf16_gemm = true};
  CHECK(md_kernels_cpu_new(&narrow, &k, &err) == MD_E_DEVICE && k == NULL);
  if (!has_bf16) {
    md_cpu_options best = {.threads = 1, .bf16_gemm = true};
    CHECK(md_kernels_cpu_new(&best, &k, &err) == MD_E_DEVICE && k == NULL);
    CHECK_MSG(strstr(err.message, "AVX-512 BF16") != NULL, "%s", err.message);
  } else {
    CHECK_MSG(strstr(err.message, "avx2") != NULL, "%s", err.message);
  }
}

int main(void) {
  md_cpu_facts facts = md_cpu_read_facts();
  test_refused(facts.avx512_bf16);
  if (facts.avx512_bf16) {
    test_rounding();
    test_sums();
    test_threads();
    test_shared();
    test_attention_values();
    test_decode_rows();
    test_backend();
  } else {
    printf("test_gemm_bf16: this CPU has no AVX-512 BF16: only the refusal is checked here\n");
  }
  return md_test_finish("test_gemm_bf16");
}
