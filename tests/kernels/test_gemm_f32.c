/* Our float32 prompt products (kernels/cpu/gemm_f32.h) against their
 * definition, y = bias + x W^T, written out here in double precision:
 * - the sums within the bound of fp32 accumulation, (k + 4) * 2^-24 *
 *   sum |terms|, for F32, F16 and BF16 weights (widened exactly);
 * - every output written, nothing past y (a guard after it);
 * - the bits do not depend on the thread count;
 * - several products of one x in one call give each product's own bits;
 * - the CPU back end sends every prompt product there on the avx2 path
 *   (matmul, and matmul_shared's products of one x, for every weight
 *   dtype: md_gemm_f32's bits), and keeps sgemm on the portable path, and
 *   matrix-vector products for decode rows; MEMDECAY_CPU_GEMM's choices
 *   (md_cpu_options.gemm): blas sends the avx2 path's products to sgemm
 *   (the portable path's bits), own is refused on the portable path;
 * - the fused gate/up/SwiGLU (md_gemm_f32_swiglu, the back end's
 *   matmul_swiglu) gives the bits of the plain pair followed by SiLU;
 * - on a CPU with AVX-512, the AVX-512 micro-kernel's bits are the AVX2
 *   one's for every shape above, and the avx512 path with gemm own sends
 *   its products there (tests/kernels/avx512_emulated checks that kernel
 *   on every machine, in an emulated CPU).
 * Shapes leave remainders everywhere: rows of x not a multiple of the
 * micro-tile's 6 (and fewer than 6), outputs not a multiple of a panel's 16
 * (and fewer than 16), K not a multiple of 8, K above 1,024 (summed in
 * blocks), narrow outputs that split x's rows into work items.
 * Needs AVX2, FMA and F16C; elsewhere it says so and checks nothing else. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/gemm_f32.h"
#include "tests/test_rng.h"
#include "tests/test_util.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float uniform(float lo, float hi) { return md_test_rng_uniform(&rng_state, lo, hi); }

static void *checked_malloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "test_gemm_f32: out of memory\n");
    exit(1);
  }
  return p;
}

enum { GUARD = 37 }; /* floats after y that must stay untouched */

typedef struct product {
  int64_t n, rows, k;
  md_dtype dtype;
  float *x, *bias, *y;
  void *w;
} product;

/* A random weight element in `dtype` (magnitude about 2^-6 .. 2), read
 * back by the test through md_cpu_weight_at as the kernels widen it. */
static void random_weight(void *w, md_dtype dtype, size_t i) {
  uint32_t bits = md_test_rng_u32(&rng_state);
  if (dtype == MD_DTYPE_F32)
    ((float *)w)[i] = uniform(-1.0f, 1.0f);
  else if (dtype == MD_DTYPE_F16) /* sign, exponent 9 .. 16 (bias 15), mantissa */
    ((uint16_t *)w)[i] = (uint16_t)((bits & 0x8000u) | ((9u + (bits >> 16) % 8) << 10) |
                                    ((bits >> 4) & 0x3ffu));
  else /* BF16: exponent 121 .. 128 (bias 127) */
    ((uint16_t *)w)[i] = (uint16_t)((bits & 0x8000u) | ((121u + (bits >> 16) % 8) << 7) |
                                    ((bits >> 4) & 0x7fu));
}

static product product_new(int64_t n, int64_t rows, int64_t k, md_dtype dtype, bool with_bias) {
  product p = {.n = n, .rows = rows, .k = k, .dtype = dtype};
  p.x = checked_malloc((size_t)(n * k) * sizeof(float));
  p.w = checked_malloc((size_t)(rows * k) * md_dtype_size(dtype));
  p.y = checked_malloc((size_t)(n * rows + GUARD) * sizeof(float));
  p.bias = with_bias ? checked_malloc((size_t)rows * sizeof(float)) : NULL;
  for (int64_t i = 0; i < n * k; i++) p.x[i] = uniform(-2.0f, 2.0f);
  for (int64_t i = 0; i < rows * k; i++) random_weight(p.w, dtype, (size_t)i);
  for (int64_t r = 0; with_bias && r < rows; r++) p.bias[r] = uniform(-1.0f, 1.0f);
  for (int64_t i = 0; i < n * rows + GUARD; i++) p.y[i] = NAN; /* every element must be written */
  return p;
}

static void product_free(product *p) {
  free(p->x);
  free(p->w);
  free(p->y);
  free(p->bias);
}

/* Whether this CPU runs the AVX-512 micro-kernel (the avx512 path). */
static bool have_avx512;

static void run_isa(product *p, int threads, md_cpu_isa isa) {
  float *ws = checked_malloc((size_t)threads * md_gemm_f32_w_floats(p->k) * sizeof(float));
  md_gemm_f32(isa, threads, p->y, p->x, p->w, p->dtype, p->bias, p->n, p->rows, p->k, ws);
  free(ws);
}

static void run(product *p, int threads) { run_isa(p, threads, MD_CPU_ISA_AVX2); }

/* Outputs of `y` beyond the fp32 bound of the double-precision sum, with the
 * worst error relative to sum |terms| in *worst. */
static int64_t outside_bound(const product *p, const float *y, double *worst) {
  int64_t outside = 0;
  *worst = 0.0;
  for (int64_t i = 0; i < p->n; i++)
    for (int64_t r = 0; r < p->rows; r++) {
      double sum = p->bias ? p->bias[r] : 0.0, magnitude = fabs(sum);
      for (int64_t c = 0; c < p->k; c++) {
        double term = (double)p->x[i * p->k + c] *
                      md_cpu_weight_at(p->w, p->dtype, (size_t)(r * p->k + c));
        sum += term;
        magnitude += fabs(term);
      }
      double err = fabs(y[i * p->rows + r] - sum);
      double bound = (double)(p->k + 4) * 0x1p-24 * magnitude;
      if (!(err <= bound)) outside++;
      if (err / (magnitude + 1e-30) > *worst) *worst = err / (magnitude + 1e-30);
    }
  return outside;
}

static void test_sums(void) {
  /* 2,049 columns are two blocks of 1,032 and 1,017; 4,864 five (the 0.5B
   * down projection's K); 70 and 200 outputs leave a work item's 4 panels
   * part-filled; 3 x 1000 and 2 x 40 split x's few rows into items. */
  const int64_t shapes[][3] = {{1, 1, 1},      {5, 17, 7},     {6, 16, 8},     {7, 15, 9},
                               {29, 130, 258}, {13, 64, 896},  {40, 200, 33},  {3, 1000, 1},
                               {20, 70, 2049}, {9, 40, 4864},  {61, 33, 1024}, {2, 40, 1025}};
  const md_dtype dtypes[] = {MD_DTYPE_F32, MD_DTYPE_F16, MD_DTYPE_BF16};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (size_t d = 0; d < 3; d++)
      for (int with_bias = 0; with_bias < 2; with_bias++) {
        int64_t n = shapes[s][0], rows = shapes[s][1], k = shapes[s][2];
        product p = product_new(n, rows, k, dtypes[d], with_bias);
        run(&p, 3);
        double worst;
        int64_t outside = outside_bound(&p, p.y, &worst);
        CHECK_MSG(outside == 0, "n %lld rows %lld k %lld dtype %s bias %d: %lld outputs beyond "
                  "the fp32 bound (worst error %.3g of sum |terms|)", (long long)n,
                  (long long)rows, (long long)k, md_dtype_name(dtypes[d]), with_bias,
                  (long long)outside, worst);
        int64_t touched = 0;
        for (int g = 0; g < GUARD; g++) touched += !isnan(p.y[n * rows + g]);
        CHECK_MSG(touched == 0, "n %lld rows %lld k %lld: %lld floats written past y",
                  (long long)n, (long long)rows, (long long)k, (long long)touched);
        if (have_avx512) { /* the AVX-512 micro-kernel: the same bits */
          float *avx2 = checked_malloc((size_t)(n * rows) * sizeof(float));
          memcpy(avx2, p.y, (size_t)(n * rows) * sizeof(float));
          for (int64_t i = 0; i < n * rows + GUARD; i++) p.y[i] = NAN;
          run_isa(&p, 3, MD_CPU_ISA_AVX512);
          CHECK_MSG(memcmp(avx2, p.y, (size_t)(n * rows) * sizeof(float)) == 0,
                    "n %lld rows %lld k %lld dtype %s bias %d: the AVX-512 micro-kernel's bits "
                    "are not the AVX2 one's", (long long)n, (long long)rows, (long long)k,
                    md_dtype_name(dtypes[d]), with_bias);
          touched = 0;
          for (int g = 0; g < GUARD; g++) touched += !isnan(p.y[n * rows + g]);
          CHECK_MSG(touched == 0, "AVX-512, n %lld rows %lld k %lld: %lld floats written past y",
                    (long long)n, (long long)rows, (long long)k, (long long)touched);
          free(avx2);
        }
        product_free(&p);
      }
}

/* The same bits on 1, 2 and 3 threads (work items change, sums do not). */
static void test_threads(void) {
  const int64_t n = 61, rows = 200, k = 1300;
  product p = product_new(n, rows, k, MD_DTYPE_BF16, true);
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

/* Products of one x in one md_gemm_f32_shared call: each output the bits
 * it has alone (narrow and wide outputs and mixed dtypes together, so the
 * shared call splits x's rows where some alone would not). */
static void test_shared(void) {
  const int64_t n = 45, k = 515, rows[] = {300, 33, 70};
  const md_dtype dtypes[] = {MD_DTYPE_BF16, MD_DTYPE_F32, MD_DTYPE_F16};
  product p[3];
  float *alone[3];
  md_gemm_f32_out outs[3];
  for (int o = 0; o < 3; o++) {
    p[o] = product_new(n, rows[o], k, dtypes[o], o != 1);
    if (o) memcpy(p[o].x, p[0].x, (size_t)(n * k) * sizeof(float));
    run(&p[o], 2);
    alone[o] = checked_malloc((size_t)(n * rows[o]) * sizeof(float));
    memcpy(alone[o], p[o].y, (size_t)(n * rows[o]) * sizeof(float));
    for (int64_t i = 0; i < n * rows[o]; i++) p[o].y[i] = NAN;
    outs[o] = (md_gemm_f32_out){.y = p[o].y, .w = p[o].w, .dtype = dtypes[o],
                                .bias = p[o].bias, .rows = rows[o]};
  }
  float *ws = checked_malloc(3 * md_gemm_f32_w_floats(k) * sizeof(float));
  md_gemm_f32_shared(MD_CPU_ISA_AVX2, 3, p[0].x, n, k, outs, 3, ws);
  for (int o = 0; o < 3; o++) {
    CHECK_MSG(memcmp(alone[o], p[o].y, (size_t)(n * rows[o]) * sizeof(float)) == 0,
              "product %d of a shared call differs from the same product alone", o);
    free(alone[o]);
    product_free(&p[o]);
  }
  free(ws);
}

/* The fused gate/up/SwiGLU (md_gemm_f32_swiglu) against the plain pair
 * followed by the avx2 path's SiLU: the same bits, gate's every output
 * written, nothing past it; shapes with K in one block and in several (the
 * up product's partial sums wait in up), outputs not a multiple of 16 (a
 * narrow panel) and fewer than an item's 32, x's rows not a multiple of 6,
 * biases or none, mixed dtypes, 1 and 3 threads. */
static void test_swiglu(void) {
  const int64_t shapes[][3] = {{1, 1, 1},     {7, 40, 33},   {13, 64, 896},
                               {6, 70, 1025}, {29, 100, 2049}, {45, 17, 9}};
  const md_dtype dtypes[][2] = {{MD_DTYPE_BF16, MD_DTYPE_BF16}, {MD_DTYPE_F32, MD_DTYPE_F16}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int d = 0; d < 2; d++) {
      int64_t n = shapes[s][0], rows = shapes[s][1], k = shapes[s][2];
      bool with_bias = d == 1;
      product gate = product_new(n, rows, k, dtypes[d][0], with_bias);
      product up = product_new(n, rows, k, dtypes[d][1], with_bias);
      memcpy(up.x, gate.x, (size_t)(n * k) * sizeof(float));
      int threads = s % 2 ? 3 : 1;
      /* The plain pair, then SiLU. */
      float *ws = checked_malloc((size_t)threads * md_gemm_f32_w_floats(k) * sizeof(float));
      md_gemm_f32_out outs[2] = {
          {.y = gate.y, .w = gate.w, .dtype = gate.dtype, .bias = gate.bias, .rows = rows},
          {.y = up.y, .w = up.w, .dtype = up.dtype, .bias = up.bias, .rows = rows}};
      md_gemm_f32_shared(MD_CPU_ISA_AVX2, threads, gate.x, n, k, outs, 2, ws);
      md_cpu_silu_mul(MD_CPU_ISA_AVX2, gate.y, up.y, (size_t)(n * rows));
      float *want = checked_malloc((size_t)(n * rows) * sizeof(float));
      memcpy(want, gate.y, (size_t)(n * rows) * sizeof(float));
      for (int64_t i = 0; i < n * rows + GUARD; i++) gate.y[i] = up.y[i] = NAN;
      md_gemm_f32_swiglu(threads, gate.x, n, k, &outs[0], &outs[1], ws);
      CHECK_MSG(memcmp(want, gate.y, (size_t)(n * rows) * sizeof(float)) == 0,
                "swiglu n %lld rows %lld k %lld %s/%s bias %d: not the plain products' and SiLU's "
                "bits", (long long)n, (long long)rows, (long long)k, md_dtype_name(dtypes[d][0]),
                md_dtype_name(dtypes[d][1]), with_bias);
      int64_t touched = 0;
      for (int g = 0; g < GUARD; g++) touched += !isnan(gate.y[n * rows + g]) + !isnan(up.y[n * rows + g]);
      CHECK_MSG(touched == 0, "swiglu n %lld rows %lld k %lld: %lld floats written past gate or up",
                (long long)n, (long long)rows, (long long)k, (long long)touched);
      free(want);
      free(ws);
      product_free(&gate);
      product_free(&up);
    }
}

/* ys[i] = x W_i^T (+ bias_i) through a back end's matmul_shared (count
 * products) or, count 0, one matmul of W_0. */
static void backend_products(md_kernels *k, const md_tensor *const *tensors,
                             const md_tensor *const *biases, int count, const float *x, int64_t n,
                             float *const *ys) {
  int calls = count ? count : 1;
  md_kweight *w[MD_KERNELS_MAX_SHARED] = {0}, *b[MD_KERNELS_MAX_SHARED] = {0};
  md_kbuf *xb = NULL, *yb[MD_KERNELS_MAX_SHARED] = {0};
  md_error err;
  int64_t cols = tensors[0]->shape[1];
  CHECK(k->ops->buf_new(k, (size_t)(n * cols), &xb, &err) == MD_OK);
  CHECK(k->ops->buf_write(k, xb, 0, (size_t)(n * cols), x, &err) == MD_OK);
  for (int i = 0; i < calls; i++) {
    CHECK(k->ops->weight_new(k, tensors[i], &w[i], &err) == MD_OK);
    if (biases[i]) CHECK(k->ops->weight_new(k, biases[i], &b[i], &err) == MD_OK);
    CHECK(k->ops->buf_new(k, (size_t)(n * tensors[i]->shape[0]), &yb[i], &err) == MD_OK);
  }
  if (count)
    k->ops->matmul_shared(k, yb, xb, (const md_kweight *const *)w, (const md_kweight *const *)b,
                          count, n);
  else
    k->ops->matmul(k, yb[0], xb, w[0], b[0], n);
  for (int i = 0; i < calls; i++) {
    CHECK(k->ops->buf_read(k, yb[i], 0, (size_t)(n * tensors[i]->shape[0]), ys[i], &err) ==
          MD_OK);
    k->ops->buf_free(k, yb[i]);
    k->ops->weight_free(k, w[i]);
    k->ops->weight_free(k, b[i]);
  }
  k->ops->buf_free(k, xb);
}

/* The back end: on the avx2 path a prompt's products of one x are
 * md_gemm_f32_shared's bits (q/k/v-like: a wide product with a bias and a
 * narrow one), within the fp32 bound, and a single matmul is md_gemm_f32's,
 * for BF16 and F32 weights; the portable path keeps sgemm (its shared call
 * is its matmuls' bits); decode rows keep the matrix-vector product's bits
 * on both. */
static void test_backend(void) {
  md_cpu_options avx2 = {.threads = 2, .kernels = MD_CPU_KERNELS_AVX2};
  md_cpu_options portable = {.threads = 2, .kernels = MD_CPU_KERNELS_PORTABLE};
  md_kernels *k_avx2 = NULL, *k_portable = NULL;
  md_error err;
  CHECK(md_kernels_cpu_new(&avx2, &k_avx2, &err) == MD_OK);
  CHECK(md_kernels_cpu_new(&portable, &k_portable, &err) == MD_OK);
  const int64_t n = 20, cols = 130, rows[] = {96, 40};
  product p[2];
  md_tensor t[2], bias_t;
  for (int o = 0; o < 2; o++) {
    p[o] = product_new(n, rows[o], cols, MD_DTYPE_BF16, o == 0);
    if (o) memcpy(p[o].x, p[0].x, (size_t)(n * cols) * sizeof(float));
    t[o] = (md_tensor){.name = "w", .dtype = MD_DTYPE_BF16, .ndim = 2, .shape = {rows[o], cols},
                       .data = p[o].w, .nbytes = (size_t)(rows[o] * cols) * 2};
  }
  bias_t = (md_tensor){.name = "b", .dtype = MD_DTYPE_F32, .ndim = 1, .shape = {rows[0]},
                       .data = p[0].bias, .nbytes = (size_t)rows[0] * 4};
  const md_tensor *ts[] = {&t[0], &t[1]}, *bs[] = {&bias_t, NULL}, *none[] = {NULL, NULL};
  float *got[2], *want[2], *single[2];
  for (int o = 0; o < 2; o++) {
    got[o] = checked_malloc((size_t)(n * rows[o]) * sizeof(float));
    want[o] = checked_malloc((size_t)(n * rows[o]) * sizeof(float));
    single[o] = checked_malloc((size_t)(n * rows[o]) * sizeof(float));
  }
  /* avx2: the shared call is md_gemm_f32_shared's bits and within the
   * bound; a single matmul is md_gemm_f32's bits. */
  md_gemm_f32_out outs[2];
  for (int o = 0; o < 2; o++)
    outs[o] = (md_gemm_f32_out){.y = want[o], .w = p[o].w, .dtype = MD_DTYPE_BF16,
                                .bias = p[o].bias, .rows = rows[o]};
  float *ws = checked_malloc(2 * md_gemm_f32_w_floats(cols) * sizeof(float));
  md_gemm_f32_shared(MD_CPU_ISA_AVX2, 2, p[0].x, n, cols, outs, 2, ws);
  backend_products(k_avx2, ts, bs, 2, p[0].x, n, got);
  double worst;
  for (int o = 0; o < 2; o++) {
    CHECK_MSG(memcmp(got[o], want[o], (size_t)(n * rows[o]) * sizeof(float)) == 0,
              "avx2 path: matmul_shared's product %d is not md_gemm_f32_shared's", o);
    CHECK_MSG(outside_bound(&p[o], got[o], &worst) == 0,
              "avx2 path: matmul_shared's product %d beyond the fp32 bound (worst %.3g)", o, worst);
  }
  backend_products(k_avx2, ts, bs, 0, p[0].x, n, single);
  md_gemm_f32(MD_CPU_ISA_AVX2, 2, want[0], p[0].x, p[0].w, MD_DTYPE_BF16, p[0].bias, n, rows[0], cols, ws);
  CHECK_MSG(memcmp(single[0], want[0], (size_t)(n * rows[0]) * sizeof(float)) == 0,
            "avx2 path: matmul is not md_gemm_f32's");
  /* portable: matmul_shared is its matmuls, bit for bit. */
  backend_products(k_portable, ts, bs, 2, p[0].x, n, got);
  for (int o = 0; o < 2; o++) {
    const md_tensor *one[] = {ts[o]}, *one_bias[] = {bs[o]};
    backend_products(k_portable, one, one_bias, 0, p[0].x, n, single);
    CHECK_MSG(memcmp(got[o], single[0], (size_t)(n * rows[o]) * sizeof(float)) == 0,
              "portable path: matmul_shared's product %d is not its matmul's", o);
  }
  /* F32 weights on the avx2 path: matmul_shared and matmul are
   * md_gemm_f32's bits too. */
  {
    const int64_t r = rows[0];
    float *wf = checked_malloc((size_t)(r * cols) * sizeof(float));
    for (int64_t i = 0; i < r * cols; i++) wf[i] = md_bf16_to_f32(((const uint16_t *)p[0].w)[i]);
    md_tensor f32 = {.name = "w", .dtype = MD_DTYPE_F32, .ndim = 2, .shape = {r, cols},
                     .data = wf, .nbytes = (size_t)(r * cols) * 4};
    const md_tensor *f32s[] = {&f32, &f32}, *one[] = {&f32};
    float *pair[] = {got[0], single[0]}; /* both rows[0] wide */
    md_gemm_f32(MD_CPU_ISA_AVX2, 2, want[0], p[0].x, wf, MD_DTYPE_F32, NULL, n, r, cols, ws);
    backend_products(k_avx2, f32s, none, 2, p[0].x, n, pair);
    CHECK_MSG(memcmp(got[0], want[0], (size_t)(n * r) * sizeof(float)) == 0 &&
                  memcmp(single[0], want[0], (size_t)(n * r) * sizeof(float)) == 0,
              "avx2 path: matmul_shared of F32 weights is not md_gemm_f32's");
    md_gemm_f32(MD_CPU_ISA_AVX2, 2, want[0], p[0].x, wf, MD_DTYPE_F32, p[0].bias, n, r, cols, ws);
    backend_products(k_avx2, one, bs, 0, p[0].x, n, single);
    CHECK_MSG(memcmp(single[0], want[0], (size_t)(n * r) * sizeof(float)) == 0,
              "avx2 path: matmul of F32 weights is not md_gemm_f32's");
    free(wf);
  }
  /* A decode row (n = 1): the matrix-vector product on the avx2 path,
   * shared or not. */
  backend_products(k_avx2, ts, none, 2, p[0].x, 1, got);
  backend_products(k_avx2, ts, none, 0, p[0].x, 1, single);
  CHECK_MSG(memcmp(got[0], single[0], (size_t)rows[0] * sizeof(float)) == 0,
            "avx2 path: a decode row's shared product is not the matrix-vector product");
  for (int o = 0; o < 2; o++) {
    free(got[o]);
    free(want[o]);
    free(single[o]);
    product_free(&p[o]);
  }
  free(ws);
  md_kernels_free(k_avx2);
  md_kernels_free(k_portable);
}

/* The back end's matmul_swiglu on every path this CPU runs, with our GEMM
 * and with sgemm: the bits of its matmul_shared on {gate, up} followed by
 * its swiglu, for a prompt (fused on the avx2 path with our GEMM) and a
 * decode row. */
static void test_backend_swiglu(void) {
  const int64_t n = 19, cols = 1030, rows = 72;
  product g = product_new(n, rows, cols, MD_DTYPE_BF16, false);
  product u = product_new(n, rows, cols, MD_DTYPE_BF16, false);
  md_tensor tg = {.name = "gate", .dtype = MD_DTYPE_BF16, .ndim = 2, .shape = {rows, cols},
                  .data = g.w, .nbytes = (size_t)(rows * cols) * 2};
  md_tensor tu = tg;
  tu.name = "up", tu.data = u.w;
  md_cpu_kernels paths[3];
  int count = md_cpu_kernel_paths(paths);
  float *want = checked_malloc((size_t)(n * rows) * sizeof(float));
  float *got = checked_malloc((size_t)(n * rows) * sizeof(float));
  for (int p = 0; p < count; p++)
    for (int blas = 0; blas < 2; blas++) {
      md_cpu_options o = {.threads = 2, .kernels = paths[p],
                          .gemm = blas ? MD_CPU_GEMM_BLAS : MD_CPU_GEMM_AUTO};
      md_kernels *k = NULL;
      md_error err;
      CHECK(md_kernels_cpu_new(&o, &k, &err) == MD_OK);
      md_kweight *wg = NULL, *wu = NULL;
      md_kbuf *x = NULL, *gate = NULL, *up = NULL;
      CHECK(k->ops->weight_new(k, &tg, &wg, &err) == MD_OK);
      CHECK(k->ops->weight_new(k, &tu, &wu, &err) == MD_OK);
      CHECK(k->ops->buf_new(k, (size_t)(n * cols), &x, &err) == MD_OK);
      CHECK(k->ops->buf_new(k, (size_t)(n * rows), &gate, &err) == MD_OK);
      CHECK(k->ops->buf_new(k, (size_t)(n * rows), &up, &err) == MD_OK);
      CHECK(k->ops->buf_write(k, x, 0, (size_t)(n * cols), g.x, &err) == MD_OK);
      const int64_t row_counts[] = {n, 1}; /* the prompt, then a decode row */
      for (int r = 0; r < 2; r++) {
        int64_t rows_in = row_counts[r];
        md_kbuf *ys[] = {gate, up};
        const md_kweight *ws[] = {wg, wu};
        k->ops->matmul_shared(k, ys, x, ws, NULL, 2, rows_in);
        k->ops->swiglu(k, gate, up, (size_t)(rows_in * rows));
        CHECK(k->ops->buf_read(k, gate, 0, (size_t)(rows_in * rows), want, &err) == MD_OK);
        k->ops->buf_zero(k, gate, 0, (size_t)(n * rows));
        k->ops->matmul_swiglu(k, gate, up, x, wg, wu, rows_in);
        CHECK(k->ops->buf_read(k, gate, 0, (size_t)(rows_in * rows), got, &err) == MD_OK);
        CHECK_MSG(memcmp(want, got, (size_t)(rows_in * rows) * sizeof(float)) == 0,
                  "%s path, %s: matmul_swiglu on %lld rows is not matmul_shared and swiglu",
                  md_kernels_cpu_isa(k), md_kernels_cpu_gemm(k), (long long)rows_in);
      }
      k->ops->buf_free(k, x);
      k->ops->buf_free(k, gate);
      k->ops->buf_free(k, up);
      k->ops->weight_free(k, wg);
      k->ops->weight_free(k, wu);
      md_kernels_free(k);
    }
  free(want);
  free(got);
  product_free(&g);
  product_free(&u);
}

/* MEMDECAY_CPU_GEMM's choices (md_cpu_options.gemm): the names, who each
 * path multiplies with by default, blas on the avx2 path (sgemm: the
 * portable path's bits, shared or not), own refused on the portable path,
 * and own on the avx512 path (where the CPU has it): the AVX-512
 * micro-kernel's bits, which are the AVX2 one's. */
static void test_gemm_choice(void) {
  md_cpu_gemm g = MD_CPU_GEMM_BLAS;
  CHECK(md_cpu_gemm_parse("auto", &g) && g == MD_CPU_GEMM_AUTO);
  CHECK(md_cpu_gemm_parse("own", &g) && g == MD_CPU_GEMM_OWN);
  CHECK(md_cpu_gemm_parse("blas", &g) && g == MD_CPU_GEMM_BLAS);
  CHECK(!md_cpu_gemm_parse("OWN", &g) && !md_cpu_gemm_parse("", &g) &&
        !md_cpu_gemm_parse("sgemm", &g));

  md_error err;
  md_kernels *k = NULL;
  md_cpu_options refused = {.threads = 2, .kernels = MD_CPU_KERNELS_PORTABLE,
                            .gemm = MD_CPU_GEMM_OWN};
  CHECK(md_kernels_cpu_new(&refused, &k, &err) == MD_E_DEVICE);
  CHECK_MSG(strstr(err.message, "MEMDECAY_CPU_GEMM=own") && strstr(err.message, "portable"),
            "own on the portable path: '%s'", err.message);
  refused.gemm = (md_cpu_gemm)7;
  CHECK(md_kernels_cpu_new(&refused, &k, &err) == MD_E_INVALID);

  md_cpu_options avx2 = {.threads = 2, .kernels = MD_CPU_KERNELS_AVX2};
  md_cpu_options avx2_blas = {.threads = 2, .kernels = MD_CPU_KERNELS_AVX2,
                              .gemm = MD_CPU_GEMM_BLAS};
  md_cpu_options portable = {.threads = 2, .kernels = MD_CPU_KERNELS_PORTABLE};
  md_kernels *k_avx2 = NULL, *k_blas = NULL, *k_portable = NULL;
  CHECK(md_kernels_cpu_new(&avx2, &k_avx2, &err) == MD_OK);
  CHECK(md_kernels_cpu_new(&avx2_blas, &k_blas, &err) == MD_OK);
  CHECK(md_kernels_cpu_new(&portable, &k_portable, &err) == MD_OK);
  CHECK(!strcmp(md_kernels_cpu_gemm(k_avx2), "own"));
  CHECK(!strcmp(md_kernels_cpu_gemm(k_blas), "blas"));
  CHECK(!strcmp(md_kernels_cpu_gemm(k_portable), "blas"));

  const int64_t n = 20, cols = 130, rows[] = {96, 40};
  product p[2];
  md_tensor t[2];
  for (int o = 0; o < 2; o++) {
    p[o] = product_new(n, rows[o], cols, MD_DTYPE_BF16, false);
    if (o) memcpy(p[o].x, p[0].x, (size_t)(n * cols) * sizeof(float));
    t[o] = (md_tensor){.name = "w", .dtype = MD_DTYPE_BF16, .ndim = 2, .shape = {rows[o], cols},
                       .data = p[o].w, .nbytes = (size_t)(rows[o] * cols) * 2};
  }
  const md_tensor *ts[] = {&t[0], &t[1]}, *none[] = {NULL, NULL};
  float *got[2], *want[2];
  for (int o = 0; o < 2; o++) {
    got[o] = checked_malloc((size_t)(n * rows[o]) * sizeof(float));
    want[o] = checked_malloc((size_t)(n * rows[o]) * sizeof(float));
  }
  /* blas on the avx2 path: sgemm, as the portable path multiplies. */
  backend_products(k_portable, ts, none, 0, p[0].x, n, want);
  backend_products(k_blas, ts, none, 0, p[0].x, n, got);
  CHECK_MSG(memcmp(got[0], want[0], (size_t)(n * rows[0]) * sizeof(float)) == 0,
            "MEMDECAY_CPU_GEMM=blas on the avx2 path: matmul is not sgemm's (the portable path's)");
  backend_products(k_blas, ts, none, 2, p[0].x, n, got);
  CHECK_MSG(memcmp(got[0], want[0], (size_t)(n * rows[0]) * sizeof(float)) == 0,
            "MEMDECAY_CPU_GEMM=blas on the avx2 path: matmul_shared is not its matmuls");

  if (have_avx512) {
    md_cpu_options avx512 = {.threads = 2, .kernels = MD_CPU_KERNELS_AVX512};
    md_cpu_options avx512_own = {.threads = 2, .kernels = MD_CPU_KERNELS_AVX512,
                                 .gemm = MD_CPU_GEMM_OWN};
    md_kernels *k_avx512 = NULL, *k_own = NULL;
    CHECK(md_kernels_cpu_new(&avx512, &k_avx512, &err) == MD_OK);
    CHECK(md_kernels_cpu_new(&avx512_own, &k_own, &err) == MD_OK);
    /* auto: ours on the avx512 path of an AMD Zen 5 or later (family 26
     * on), OpenBLAS on the others'. */
    md_cpu_facts here = md_cpu_read_facts();
    bool zen5 = here.vendor == MD_CPU_VENDOR_AMD && here.family >= 26;
    CHECK(!strcmp(md_kernels_cpu_gemm(k_avx512), zen5 ? "own" : "blas"));
    CHECK(!strcmp(md_kernels_cpu_gemm(k_own), "own"));
    backend_products(k_avx2, ts, none, 2, p[0].x, n, want);
    backend_products(k_own, ts, none, 2, p[0].x, n, got);
    for (int o = 0; o < 2; o++)
      CHECK_MSG(memcmp(got[o], want[o], (size_t)(n * rows[o]) * sizeof(float)) == 0,
                "avx512 path with our GEMM: matmul_shared's product %d is not the avx2 path's", o);
    md_kernels_free(k_avx512);
    md_kernels_free(k_own);
  } else {
    printf("test_gemm_f32: no AVX-512 here: the avx512 path's GEMM is checked in an emulated "
           "CPU (kernels_avx512_emulated)\n");
  }
  for (int o = 0; o < 2; o++) {
    free(got[o]);
    free(want[o]);
    product_free(&p[o]);
  }
  md_kernels_free(k_avx2);
  md_kernels_free(k_blas);
  md_kernels_free(k_portable);
}

int main(void) {
  md_cpu_facts facts = md_cpu_read_facts();
  if (md_cpu_isa_for(&facts) < MD_CPU_ISA_AVX2) {
    printf("test_gemm_f32: this CPU has no AVX2/FMA/F16C: the avx2 path does not run here\n");
    return md_test_finish("test_gemm_f32");
  }
  have_avx512 = md_cpu_isa_for(&facts) >= MD_CPU_ISA_AVX512;
  test_sums();
  test_threads();
  test_shared();
  test_swiglu();
  test_backend();
  test_backend_swiglu();
  test_gemm_choice();
  return md_test_finish("test_gemm_f32");
}
