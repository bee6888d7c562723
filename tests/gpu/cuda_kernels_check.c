/* The CUDA back end's operations, one at a time, against the CPU back end
 * (itself tested against double-precision definitions and HF transformers)
 * on the same random inputs, so that a failure names one kernel. Run by
 * tests/gpu/check.sh on a machine with a GPU; prints a PASS or FAIL line
 * per check with its error and tolerance.
 *
 *   cuda_kernels_check [--device N] [--small]
 *       every check below (--small: smaller shapes, for the CUDA emulator
 *       of tests/cudaemu)
 *   cuda_kernels_check [--device N] fault [--sync]
 *       a kernel reading an invalid address: the failure must be reported
 *       (at sync, naming the last kernel queued; with --sync, naming the
 *       faulting kernel itself), not crash or pass silently
 *
 * Tolerances (the error is |cuda - cpu| divided by sum |w x| + |b| for
 * products, absolute elsewhere):
 *   fp32 products (decode GEMV; prefill GEMM in EXACT mode or with F32
 *     weights): 2e-5, the sum of both back ends' fp32 accumulation bounds
 *     (the CPU test holds the CPU to 1e-5 of a double sum);
 *   FAST prefill with BF16/F16 weights: the activations are rounded to
 *     BF16 (unit roundoff 2^-8) or F16 (2^-11) before the product, so the
 *     bound is 2^-8 + 2e-5 or 2^-11 + 2e-5; TF32 inputs: 2 * 2^-11 + 2e-5;
 *   element-wise ops: a few fp32 ulps (each op is the same formula in the
 *     same order on both sides; exp and cos/sin may differ by an ulp);
 *   attention: outputs 1e-5, softmax weights 1e-6, capture rows 1e-6,
 *     prefill column sums 2e-5 relative (sums of up to n weights). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/cuda.h"
#include "tests/gpu/gpu_check.h"

static int device = 0;
static bool small_shapes = false; /* --small: shapes an emulator runs in seconds */

static md_kernels *open_cuda(md_cuda_gemm gemm, int sync_each_launch) {
  md_cuda_options options = {.device = device, .gemm = gemm, .sync_each_launch = sync_each_launch};
  md_kernels *k = NULL;
  md_error err;
  if (md_kernels_cuda_new(&options, &k, &err) != MD_OK) gpu_die("md_kernels_cuda_new", &err);
  return k;
}

static md_kernels *open_cpu(void) {
  md_kernels *k = NULL;
  md_error err;
  if (md_kernels_cpu_new(NULL, &k, &err) != MD_OK) gpu_die("md_kernels_cpu_new", &err);
  return k;
}

static const md_dtype DTYPES[] = {MD_DTYPE_F32, MD_DTYPE_F16, MD_DTYPE_BF16};
static const char *const GEMM_NAMES[] = {"fast", "exact", "tf32"};

/* ---- matrix products ------------------------------------------------------------ */

typedef struct product_case {
  int64_t n, rows, cols;
  bool bias;
} product_case;

/* The bound each mode must meet, relative to sum |w x| + |b|. */
static double product_tolerance(int64_t n, md_dtype dtype, md_cuda_gemm gemm) {
  const double fp32 = 2e-5;
  if (n == 1) return fp32;
  if (dtype == MD_DTYPE_F32) return gemm == MD_CUDA_GEMM_TF32 ? 2.0 * ldexp(1.0, -11) + fp32 : fp32;
  if (gemm == MD_CUDA_GEMM_EXACT) return fp32;
  return (dtype == MD_DTYPE_BF16 ? ldexp(1.0, -8) : ldexp(1.0, -11)) + fp32;
}

/* sum |w x| + |b| for every output, in double. */
static double *product_scale(const float *w, const float *x, const float *b, const product_case *pc) {
  double *scale = malloc((size_t)(pc->n * pc->rows) * sizeof(double));
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < pc->rows; r++)
    for (int64_t i = 0; i < pc->n; i++) {
      double s = b ? fabs(b[r]) : 0.0;
      for (int64_t c = 0; c < pc->cols; c++) s += fabs((double)w[r * pc->cols + c] * x[i * pc->cols + c]);
      scale[i * pc->rows + r] = s;
    }
  return scale;
}

static float *run_product(md_kernels *k, const void *wbits, md_dtype dtype, const float *x,
                          const float *b, const product_case *pc) {
  md_tensor wt, bt;
  md_kweight *w = gpu_weight(k, &wt, wbits, dtype, pc->rows, pc->cols);
  md_kweight *bias = b ? gpu_weight(k, &bt, b, MD_DTYPE_F32, 0, pc->rows) : NULL;
  md_kbuf *xb = gpu_upload(k, x, (size_t)(pc->n * pc->cols));
  md_kbuf *yb = gpu_upload(k, NULL, (size_t)(pc->n * pc->rows));
  k->ops->matmul(k, yb, xb, w, bias, pc->n);
  md_error err;
  if (k->ops->sync(k, &err) != MD_OK) gpu_die("matmul", &err);
  float *y = gpu_download(k, yb, (size_t)(pc->n * pc->rows));
  k->ops->buf_free(k, xb);
  k->ops->buf_free(k, yb);
  k->ops->weight_free(k, w);
  k->ops->weight_free(k, bias);
  return y;
}

static void check_products(md_kernels *cpu, md_kernels *cuda[3]) {
  /* Every GEMV split (rows >= 8192, 2048, 512, fewer), the scalar path
   * (columns not a multiple of the vector), and GEMMs with and without
   * bias. */
  const product_case small[] = {
      {1, 1, 1, false},    {1, 3, 7, true},     {1, 13, 37, false},  {1, 8192, 16, true},
      {1, 2048, 24, false}, {1, 512, 40, true}, {1, 256, 1536, true}, {1, 9, 4099, false},
      {2, 24, 40, true},   {5, 17, 33, false},  {37, 130, 70, true}, {64, 300, 256, false}};
  const product_case full[] = {
      {1, 1, 1, false},      {1, 3, 7, true},       {1, 13, 37, false},   {1, 64, 4099, true},
      {1, 256, 1536, true},  {1, 1536, 1536, true}, {1, 8960, 1536, false}, {1, 1536, 8960, false},
      {1, 2100, 2048, false}, {2, 24, 40, true},    {5, 17, 33, false},   {37, 130, 70, true},
      {300, 1536, 1536, true}, {64, 2100, 2048, false}, {64, 8960, 1536, false},
      {17, 1536, 8960, false}};
  const product_case *cases = small_shapes ? small : full;
  size_t n_cases = small_shapes ? sizeof small / sizeof small[0] : sizeof full / sizeof full[0];
  for (size_t d = 0; d < 3; d++)
    for (size_t s = 0; s < n_cases; s++) {
      const product_case *pc = &cases[s];
      float *wv;
      void *wbits = gpu_random_weight(DTYPES[d], (size_t)(pc->rows * pc->cols), &wv);
      float *x = gpu_random_floats((size_t)(pc->n * pc->cols), -1.0f, 1.0f);
      float *b = pc->bias ? gpu_random_floats((size_t)pc->rows, -1.0f, 1.0f) : NULL;
      double *scale = product_scale(wv, x, b, pc);
      float *want = run_product(cpu, wbits, DTYPES[d], x, b, pc);
      for (int g = 0; g < 3; g++) {
        if (pc->n == 1 && g > 0) break; /* decode is the same kernel in every mode */
        float *got = run_product(cuda[g], wbits, DTYPES[d], x, b, pc);
        double worst = 0.0;
        for (int64_t i = 0; i < pc->n * pc->rows; i++) {
          double e = fabs((double)got[i] - want[i]) / (scale[i] > 0 ? scale[i] : 1.0);
          if (!(e <= worst)) worst = e;
        }
        gpu_result(worst, product_tolerance(pc->n, DTYPES[d], (md_cuda_gemm)g),
                   "matmul %s %s n=%lld [%lld x %lld]%s (%s)", md_dtype_name(DTYPES[d]),
                   pc->n == 1 ? "gemv" : "gemm", (long long)pc->n, (long long)pc->rows,
                   (long long)pc->cols, pc->bias ? " +bias" : "", GEMM_NAMES[g]);
        free(got);
      }
      free(want);
      free(scale);
      free(wbits);
      free(wv);
      free(x);
      free(b);
    }
}

/* The LM head's shape (vocab 151936 x 1536, BF16) through logits(): the
 * final norm of one row, then the GEMV. */
static void check_logits(md_kernels *cpu, md_kernels *cuda, int64_t vocab, int64_t dim) {
  float *wv, *x = gpu_random_floats((size_t)(3 * dim), -2.0f, 2.0f);
  float *gamma = gpu_random_floats((size_t)dim, 0.5f, 1.5f);
  void *wbits = gpu_random_weight(MD_DTYPE_BF16, (size_t)(vocab * dim), &wv);
  float *result[2];
  md_kernels *ks[2] = {cpu, cuda};
  for (int i = 0; i < 2; i++) {
    md_kernels *k = ks[i];
    md_tensor wt, gt;
    md_kweight *w = gpu_weight(k, &wt, wbits, MD_DTYPE_BF16, vocab, dim);
    md_kweight *g = gpu_weight(k, &gt, gamma, MD_DTYPE_F32, 0, dim);
    md_kbuf *xb = gpu_upload(k, x, (size_t)(3 * dim)), *lb = gpu_upload(k, NULL, (size_t)vocab);
    k->ops->logits(k, lb, xb, 2, g, w, 1e-6f); /* row 2: misaligned when dim is odd */
    result[i] = gpu_download(k, lb, (size_t)vocab);
    k->ops->buf_free(k, xb);
    k->ops->buf_free(k, lb);
    k->ops->weight_free(k, w);
    k->ops->weight_free(k, g);
  }
  double worst = 0.0, top = 0.0;
  for (int64_t r = 0; r < vocab; r++) {
    worst = fmax(worst, fabs((double)result[0][r] - result[1][r]));
    top = fmax(top, fabs((double)result[0][r]));
  }
  gpu_result(worst / (top > 0 ? top : 1), 1e-5, "logits (rmsnorm + lm head gemv) [%lld x %lld], relative to max |logit|",
             (long long)vocab, (long long)dim);
  free(result[0]);
  free(result[1]);
  free(wbits);
  free(wv);
  free(x);
  free(gamma);
}

/* The batched decode products (matmul_rows, logits_rows) against the
 * one-row products of the same back end, bit for bit (what the forward
 * pass's batched step relies on, kernels.h): q/k/v-like triples with
 * biases, a pair, one matrix; every GEMV split and the scalar path; 1, 3,
 * 8 (one launch) and 11 rows (two). */
static void check_rows_products(md_kernels *cuda) {
  typedef struct { int count; int64_t rows[3], cols; bool bias; } rows_case;
  const rows_case cases[] = {{3, {40, 8, 8}, 64, true},     {2, {96, 96, 0}, 32, false},
                             {1, {24, 0, 0}, 1032, false},   {1, {9, 0, 0}, 2056, true},
                             {1, {5, 0, 0}, 37, true},       {2, {8200, 3, 0}, 16, false}};
  const int64_t batches[] = {1, 3, 8, 11};
  md_error err;
  for (size_t d = 0; d < 3; d++)
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
      for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
        const rows_case *rc = &cases[ci];
        const int64_t n = batches[bi], cols = rc->cols;
        md_tensor wt[3], bt[3];
        md_kweight *w[3] = {NULL, NULL, NULL}, *b[3] = {NULL, NULL, NULL};
        void *wbits[3] = {NULL, NULL, NULL};
        float *wv[3] = {NULL, NULL, NULL}, *bias[3] = {NULL, NULL, NULL};
        md_kbuf *ys[3], *one[3];
        float *x = gpu_random_floats((size_t)(n * cols), -1.0f, 1.0f);
        md_kbuf *xb = gpu_upload(cuda, x, (size_t)(n * cols)), *xrow = gpu_upload(cuda, NULL, (size_t)cols);
        for (int m = 0; m < rc->count; m++) {
          wbits[m] = gpu_random_weight(DTYPES[d], (size_t)(rc->rows[m] * cols), &wv[m]);
          w[m] = gpu_weight(cuda, &wt[m], wbits[m], DTYPES[d], rc->rows[m], cols);
          if (rc->bias) {
            bias[m] = gpu_random_floats((size_t)rc->rows[m], -1.0f, 1.0f);
            b[m] = gpu_weight(cuda, &bt[m], bias[m], MD_DTYPE_F32, 0, rc->rows[m]);
          }
          ys[m] = gpu_upload(cuda, NULL, (size_t)(n * rc->rows[m]));
          one[m] = gpu_upload(cuda, NULL, (size_t)rc->rows[m]);
        }
        cuda->ops->matmul_rows(cuda, ys, xb, (const md_kweight *const *)w, (const md_kweight *const *)b,
                               rc->count, n);
        bool same = cuda->ops->sync(cuda, &err) == MD_OK;
        for (int64_t r = 0; r < n && same; r++) {
          cuda->ops->buf_write(cuda, xrow, 0, (size_t)cols, x + r * cols, &err);
          for (int m = 0; m < rc->count; m++) {
            cuda->ops->matmul(cuda, one[m], xrow, w[m], b[m], 1);
            float *want = gpu_download(cuda, one[m], (size_t)rc->rows[m]);
            float *got = malloc((size_t)rc->rows[m] * sizeof(float));
            cuda->ops->buf_read(cuda, ys[m], (size_t)(r * rc->rows[m]), (size_t)rc->rows[m], got, &err);
            same = same && !memcmp(got, want, (size_t)rc->rows[m] * sizeof(float));
            free(want);
            free(got);
          }
        }
        gpu_expect(same, "matmul_rows %s, %d matrix(es) of %lld columns, n=%lld: the bits of the "
                   "one-row products", md_dtype_name(DTYPES[d]), rc->count, (long long)cols, (long long)n);
        for (int m = 0; m < rc->count; m++) {
          cuda->ops->buf_free(cuda, ys[m]);
          cuda->ops->buf_free(cuda, one[m]);
          cuda->ops->weight_free(cuda, w[m]);
          cuda->ops->weight_free(cuda, b[m]);
          free(wbits[m]);
          free(wv[m]);
          free(bias[m]);
        }
        cuda->ops->buf_free(cuda, xb);
        cuda->ops->buf_free(cuda, xrow);
        free(x);
      }
  /* logits_rows against logits of each row, through views of the rows. */
  const int64_t vocab = 1000, dims[] = {64, 37};
  for (size_t di = 0; di < 2; di++) {
    const int64_t dim = dims[di], n = 11;
    float *wv, *x = gpu_random_floats((size_t)(n * dim), -2.0f, 2.0f);
    float *gamma = gpu_random_floats((size_t)dim, 0.5f, 1.5f);
    void *wbits = gpu_random_weight(MD_DTYPE_BF16, (size_t)(vocab * dim), &wv);
    md_tensor wt, gt;
    md_kweight *w = gpu_weight(cuda, &wt, wbits, MD_DTYPE_BF16, vocab, dim);
    md_kweight *g = gpu_weight(cuda, &gt, gamma, MD_DTYPE_F32, 0, dim);
    md_kbuf *xb = gpu_upload(cuda, x, (size_t)(n * dim)), *all = gpu_upload(cuda, NULL, (size_t)(n * vocab));
    md_kbuf *one = gpu_upload(cuda, NULL, (size_t)vocab);
    cuda->ops->logits_rows(cuda, all, xb, n, g, w, 1e-6f);
    bool same = cuda->ops->sync(cuda, &err) == MD_OK;
    for (int64_t r = 0; r < n && same; r++) {
      md_kbuf *view = NULL;
      same = cuda->ops->buf_view(cuda, all, (size_t)(r * vocab), (size_t)vocab, &view, &err) == MD_OK;
      if (!same) break;
      cuda->ops->logits(cuda, one, xb, r, g, w, 1e-6f);
      float *want = gpu_download(cuda, one, (size_t)vocab), *got = gpu_download(cuda, view, (size_t)vocab);
      same = !memcmp(got, want, (size_t)vocab * sizeof(float));
      free(want);
      free(got);
      cuda->ops->buf_free(cuda, view);
    }
    gpu_expect(same, "logits_rows [%lld x %lld], n=%lld: the bits of logits row by row",
               (long long)vocab, (long long)dim, (long long)n);
    cuda->ops->buf_free(cuda, xb);
    cuda->ops->buf_free(cuda, all);
    cuda->ops->buf_free(cuda, one);
    cuda->ops->weight_free(cuda, w);
    cuda->ops->weight_free(cuda, g);
    free(wbits);
    free(wv);
    free(x);
    free(gamma);
  }
}

/* Views (buf_view): a view shares its buffer's memory, is refused beyond
 * it, and freeing it leaves the buffer alone; a pending read of the buffer
 * holds back work that writes through a view. */
static void check_views(md_kernels *cuda) {
  md_error err;
  float values[100], got[100];
  for (int i = 0; i < 100; i++) values[i] = (float)i;
  md_kbuf *b = gpu_upload(cuda, values, 100), *v = NULL;
  gpu_expect(cuda->ops->buf_view(cuda, b, 20, 30, &v, &err) == MD_OK, "a view of [20, 50)");
  if (!v) return;
  md_kbuf *vv = NULL;
  gpu_expect(cuda->ops->buf_view(cuda, b, 90, 11, &vv, &err) == MD_E_INVALID &&
                 strstr(err.message, "[90, 101) of a buffer of 100 floats"),
             "a view beyond the buffer is refused: \"%s\"", err.message);
  cuda->ops->buf_read_start(cuda, b, 0, 100, got, 1, &err);
  cuda->ops->buf_zero(cuda, v, 0, 30);
  cuda->ops->buf_read_finish(cuda, 1, &err);
  gpu_expect(got[25] == 25.0f, "a read of the buffer started before a write through a view sees "
             "the values from before");
  cuda->ops->buf_read(cuda, b, 0, 100, got, &err);
  bool ok = true;
  for (int i = 0; i < 100; i++) ok = ok && got[i] == (i >= 20 && i < 50 ? 0.0f : values[i]);
  gpu_expect(ok, "zeroing the view zeroes [20, 50) of the buffer and nothing else");
  cuda->ops->buf_write(cuda, b, 20, 30, values, &err);
  cuda->ops->buf_read(cuda, v, 0, 30, got, &err);
  gpu_expect(!memcmp(got, values, 30 * sizeof(float)), "a write to the buffer is seen through the view");
  cuda->ops->buf_free(cuda, v);
  cuda->ops->buf_read(cuda, b, 0, 100, got, &err);
  gpu_expect(got[99] == 99.0f, "the buffer lives on after its view is freed");
  cuda->ops->buf_free(cuda, b);
}

/* FAST prefill with F16 weights refuses activations beyond the F16 range. */
static void check_f16_overflow(md_kernels *cuda) {
  enum { N = 4, ROWS = 8, COLS = 16 };
  float *wv;
  void *wbits = gpu_random_weight(MD_DTYPE_F16, ROWS * COLS, &wv);
  float x[N * COLS];
  for (int i = 0; i < N * COLS; i++) x[i] = i == 5 ? 1e5f : 0.5f;
  md_tensor wt;
  md_kweight *w = gpu_weight(cuda, &wt, wbits, MD_DTYPE_F16, ROWS, COLS);
  md_kbuf *xb = gpu_upload(cuda, x, N * COLS), *yb = gpu_upload(cuda, NULL, N * ROWS);
  cuda->ops->matmul(cuda, yb, xb, w, NULL, N);
  md_error err = {0};
  md_status status = cuda->ops->sync(cuda, &err);
  gpu_expect(status == MD_E_NUMERIC && strstr(err.message, "float16 range"),
             "F16 prefill overflow is reported at sync: \"%s\"", err.message);
  status = cuda->ops->sync(cuda, &err);
  gpu_expect(status == MD_OK, "the back end works again after reporting it");
  cuda->ops->buf_free(cuda, xb);
  cuda->ops->buf_free(cuda, yb);
  cuda->ops->weight_free(cuda, w);
  free(wbits);
  free(wv);
}

/* ---- element-wise ops -------------------------------------------------------------- */

static void check_rmsnorm(md_kernels *cpu, md_kernels *cuda) {
  const int64_t dims[] = {37, 896, 1536, 8960};
  for (size_t d = 0; d < 4; d++) {
    int64_t n = 3, dim = dims[d];
    float *x = gpu_random_floats((size_t)(n * dim), -3.0f, 3.0f);
    float *gamma = gpu_random_floats((size_t)dim, 0.5f, 1.5f);
    float *out[2];
    md_kernels *ks[2] = {cpu, cuda};
    for (int i = 0; i < 2; i++) {
      md_tensor gt;
      md_kweight *g = gpu_weight(ks[i], &gt, gamma, MD_DTYPE_F32, 0, dim);
      md_kbuf *xb = gpu_upload(ks[i], x, (size_t)(n * dim));
      ks[i]->ops->rmsnorm(ks[i], xb, xb, g, n, 1e-6f); /* in place, as the model's final norm */
      out[i] = gpu_download(ks[i], xb, (size_t)(n * dim));
      ks[i]->ops->buf_free(ks[i], xb);
      ks[i]->ops->weight_free(ks[i], g);
    }
    double worst = 0.0;
    for (int64_t i = 0; i < n * dim; i++)
      worst = fmax(worst, fabs((double)out[0][i] - out[1][i]) / (fabs((double)out[0][i]) + 1e-6));
    gpu_result(worst, 4e-7, "rmsnorm dim %lld (relative)", (long long)dim);
    free(out[0]);
    free(out[1]);
    free(x);
    free(gamma);
  }
}

static void check_embed(md_kernels *cpu, md_kernels *cuda) {
  const int64_t vocab = 1003, dim = 37;
  int32_t tokens[] = {1002, 0, 5, 5, 777};
  for (size_t d = 0; d < 3; d++) {
    float *values;
    void *bits = gpu_random_weight(DTYPES[d], (size_t)(vocab * dim), &values);
    float *out[2];
    md_kernels *ks[2] = {cpu, cuda};
    for (int i = 0; i < 2; i++) {
      md_tensor t;
      md_kweight *w = gpu_weight(ks[i], &t, bits, DTYPES[d], vocab, dim);
      md_kbuf *xb = gpu_upload(ks[i], NULL, 5 * (size_t)dim);
      ks[i]->ops->embed(ks[i], xb, w, tokens, 5);
      out[i] = gpu_download(ks[i], xb, 5 * (size_t)dim);
      ks[i]->ops->buf_free(ks[i], xb);
      ks[i]->ops->weight_free(ks[i], w);
    }
    gpu_result(gpu_max_abs_diff(out[0], out[1], 5 * (size_t)dim), 0.0, "embed %s (exact)",
               md_dtype_name(DTYPES[d]));
    free(out[0]);
    free(out[1]);
    free(bits);
    free(values);
  }
}

static void check_rope(md_kernels *cpu, md_kernels *cuda) {
  const int dims[] = {16, 64, 128};
  const int64_t starts[] = {0, 7, 1700, 32000};
  for (size_t d = 0; d < 3; d++)
    for (size_t p = 0; p < 4; p++) {
      int n = 5, heads = 12, kv = 2, hd = dims[d];
      float *q = gpu_random_floats((size_t)(n * heads * hd), -1.0f, 1.0f);
      float *kk = gpu_random_floats((size_t)(n * kv * hd), -1.0f, 1.0f);
      float *out_q[2], *out_k[2];
      md_kernels *ks[2] = {cpu, cuda};
      for (int i = 0; i < 2; i++) {
        md_kbuf *qb = gpu_upload(ks[i], q, (size_t)(n * heads * hd));
        md_kbuf *kb = gpu_upload(ks[i], kk, (size_t)(n * kv * hd));
        ks[i]->ops->rope(ks[i], qb, kb, n, heads, kv, hd, starts[p], 1e6);
        out_q[i] = gpu_download(ks[i], qb, (size_t)(n * heads * hd));
        out_k[i] = gpu_download(ks[i], kb, (size_t)(n * kv * hd));
        ks[i]->ops->buf_free(ks[i], qb);
        ks[i]->ops->buf_free(ks[i], kb);
      }
      double worst = fmax(gpu_max_abs_diff(out_q[0], out_q[1], (size_t)(n * heads * hd)),
                          gpu_max_abs_diff(out_k[0], out_k[1], (size_t)(n * kv * hd)));
      gpu_result(worst, 4e-7, "rope head_dim %d at positions %lld.. (theta 1e6)", hd, (long long)starts[p]);
      for (int i = 0; i < 2; i++) {
        free(out_q[i]);
        free(out_k[i]);
      }
      free(q);
      free(kk);
    }
}

static void check_swiglu_add(md_kernels *cpu, md_kernels *cuda) {
  const size_t n = 100003;
  float *gate = gpu_random_floats(n, -30.0f, 30.0f), *up = gpu_random_floats(n, -2.0f, 2.0f);
  float *out[2], *sum[2];
  md_kernels *ks[2] = {cpu, cuda};
  for (int i = 0; i < 2; i++) {
    md_kbuf *gb = gpu_upload(ks[i], gate, n), *ub = gpu_upload(ks[i], up, n);
    ks[i]->ops->swiglu(ks[i], gb, ub, n);
    out[i] = gpu_download(ks[i], gb, n);
    ks[i]->ops->add(ks[i], gb, ub, n);
    sum[i] = gpu_download(ks[i], gb, n);
    ks[i]->ops->buf_free(ks[i], gb);
    ks[i]->ops->buf_free(ks[i], ub);
  }
  double worst = 0.0;
  for (size_t i = 0; i < n; i++)
    worst = fmax(worst, fabs((double)out[0][i] - out[1][i]) / (fabs((double)out[0][i]) + 1e-30));
  gpu_result(worst, 5e-7, "swiglu (relative; expf within 2 ulp on both sides)");
  double worst_add = 0.0;
  for (size_t i = 0; i < n; i++) {
    double want = (double)out[1][i] + up[i]; /* the CUDA swiglu output plus up, rounded once */
    worst_add = fmax(worst_add, fabs((double)sum[1][i] - (double)(float)want));
  }
  gpu_result(worst_add, 0.0, "add (exact)");
  for (int i = 0; i < 2; i++) {
    free(out[i]);
    free(sum[i]);
  }
  free(gate);
  free(up);
}

static void check_argmax(md_kernels *cuda) {
  const size_t n = 151936;
  float *v = gpu_random_floats(n, -10.0f, 10.0f);
  struct {
    const char *what;
    size_t a, b, c;  /* positions set to the maximum */
  } cases[] = {{"one maximum at the end", n - 1, n - 1, n - 1},
               {"ties: the first wins", 90000, 12345, 150000},
               {"ties at 0 and the end", n - 1, 0, n - 1},
               {"ties one block apart", 1024 + 3, 3, 2048 + 3}};
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    float *w = malloc(n * sizeof(float));
    memcpy(w, v, n * sizeof(float));
    w[cases[t].a] = w[cases[t].b] = w[cases[t].c] = 11.0f;
    size_t want = cases[t].a < cases[t].b ? cases[t].a : cases[t].b;
    if (cases[t].c < want) want = cases[t].c;
    md_kbuf *b = gpu_upload(cuda, w, n);
    int64_t index = -1;
    md_error err;
    md_status status = cuda->ops->argmax(cuda, b, n, &index, &err);
    gpu_expect(status == MD_OK && index == (int64_t)want, "argmax, %s: %lld (want %zu)", cases[t].what,
               (long long)index, want);
    cuda->ops->buf_free(cuda, b);
    free(w);
  }
  float flat[5] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  md_kbuf *b = gpu_upload(cuda, flat, 5);
  int64_t index = -1;
  md_error err;
  cuda->ops->argmax(cuda, b, 5, &index, &err);
  gpu_expect(index == 0, "argmax of all -inf is 0: %lld", (long long)index);
  gpu_expect(cuda->ops->argmax(cuda, b, 6, &index, &err) == MD_E_INVALID, "argmax beyond the buffer is refused");
  cuda->ops->buf_free(cuda, b);
  free(v);
}

/* greedy_rows: each row's first largest logit, one launch for all rows,
 * on a head where the answer is known. Row r of x is one-hot at column
 * c = r % 16 (normalised: 4 there); the head's random entries lie in
 * [-1, 1] and column c holds 2 at two rows t1(c) < t2(c), so row r's
 * largest logit, 8, ties at t1 and t2 and the first wins: t2 is the same
 * thread's next element (t1 + 1024) or a neighbour's (t1 + 5), the last
 * column's pair ends the vocabulary. Also the logits' own argmax, 1 to 40
 * rows, and a logits buffer too short refused. */
static void check_greedy_rows(md_kernels *cuda) {
  enum { VOCAB = 5000, DIM = 16, MOST = 40 };
  float *wv = gpu_random_floats((size_t)VOCAB * DIM, -1.0f, 1.0f), gamma[DIM], *x = calloc((size_t)MOST * DIM, sizeof(float));
  int64_t first[DIM];
  for (int c = 0; c < DIM; c++) {
    int64_t t1 = c == DIM - 1 ? VOCAB - 2 : 100 + 290 * c, t2 = c == DIM - 1 ? VOCAB - 1 : t1 + (c % 2 ? 5 : 1024);
    wv[t1 * DIM + c] = wv[t2 * DIM + c] = 2.0f;
    first[c] = t1;
    gamma[c] = 1.0f;
  }
  for (int r = 0; r < MOST; r++) x[r * DIM + r % DIM] = 1.0f;
  md_tensor wt, gt;
  md_kweight *w = gpu_weight(cuda, &wt, wv, MD_DTYPE_F32, VOCAB, DIM);
  md_kweight *g = gpu_weight(cuda, &gt, gamma, MD_DTYPE_F32, 0, DIM);
  md_kbuf *xb = gpu_upload(cuda, x, (size_t)MOST * DIM), *logits = gpu_upload(cuda, NULL, (size_t)MOST * VOCAB);
  md_error err;
  const int64_t counts[] = {1, 3, 11, MOST};
  for (size_t ni = 0; ni < sizeof counts / sizeof counts[0]; ni++) {
    const int64_t n = counts[ni];
    int64_t index[MOST];
    bool right = cuda->ops->greedy_rows(cuda, index, logits, xb, n, g, w, 1e-6f, &err) == MD_OK;
    for (int64_t r = 0; r < n && right; r++) right = index[r] == first[r % DIM];
    cuda->ops->logits_rows(cuda, logits, xb, n, g, w, 1e-6f);
    for (int64_t r = 0; r < n && right; r++) {
      md_kbuf *view = NULL;
      int64_t want = -1;
      right = cuda->ops->buf_view(cuda, logits, (size_t)(r * VOCAB), VOCAB, &view, &err) == MD_OK &&
              cuda->ops->argmax(cuda, view, VOCAB, &want, &err) == MD_OK && want == index[r];
      if (view) cuda->ops->buf_free(cuda, view);
    }
    gpu_expect(right, "greedy_rows, %lld rows: each row's first largest logit, as argmax", (long long)n);
  }
  int64_t index[MOST];
  gpu_expect(cuda->ops->greedy_rows(cuda, index, logits, xb, MOST + 1, g, w, 1e-6f, &err) == MD_E_INVALID,
             "greedy_rows beyond the logits buffer is refused");
  cuda->ops->buf_free(cuda, xb);
  cuda->ops->buf_free(cuda, logits);
  cuda->ops->weight_free(cuda, w);
  cuda->ops->weight_free(cuda, g);
  free(wv);
  free(x);
}

/* Whether a recorded decode step of k names p (a buffer or a weight). */
static bool recorded_names(md_kernels *k, const void *p) {
  const md_cuda_kernels *c = md_cuda_of(k);
  for (int i = 0; i < MD_CUDA_GRAPH_CACHE; i++) {
    const md_cuda_graph *g = &c->graph_cache[i];
    for (size_t j = 0; g->exec && j < g->n_ops; j++) {
      const md_cuda_op *op = &g->ops[j];
      if ((const void *)op->out == p || (const void *)op->out2 == p || (const void *)op->in == p ||
          (const void *)op->in2 == p || (const void *)op->w == p || (const void *)op->w2 == p ||
          (const void *)op->capture.received == p)
        return true;
    }
  }
  return false;
}

/* Freeing a buffer or a weight drops the recorded steps that name it: a
 * step is found by comparing logs, which name buffers and weights by their
 * host addresses, and a later allocation at a freed one's address would
 * otherwise replay a recording into the freed device memory (graph.c). A
 * one-token step (embed, rmsnorm) is recorded, then its output buffer and
 * its norm weight are freed in turn; a step with new ones is recorded
 * again and computes what the launched operations compute. */
static void check_graphs_forget_freed(md_kernels *cpu) {
  enum { VOCAB = 8, DIM = 16 };
  md_cuda_options options = {.device = device, .gemm = MD_CUDA_GEMM_FAST};
  md_kernels *k = NULL;
  md_error err;
  if (md_kernels_cuda_new(&options, &k, &err) != MD_OK) gpu_die("md_kernels_cuda_new", &err);
  float *table = gpu_random_floats(VOCAB * DIM, -1.0f, 1.0f), *gamma = gpu_random_floats(DIM, 0.5f, 1.5f);
  md_tensor tt, gt, gt2;
  md_kweight *e = gpu_weight(k, &tt, table, MD_DTYPE_F32, VOCAB, DIM);
  md_kweight *g = gpu_weight(k, &gt, gamma, MD_DTYPE_F32, 0, DIM);
  md_kbuf *x = gpu_upload(k, NULL, DIM), *y = gpu_upload(k, NULL, DIM);
  const int32_t token = 5;
  k->ops->step_begin(k, 3, 3);
  k->ops->embed(k, x, e, &token, 1);
  k->ops->rmsnorm(k, y, x, g, 1, 1e-6f);
  k->ops->step_end(k);
  gpu_expect(k->ops->sync(k, &err) == MD_OK && recorded_names(k, y) && recorded_names(k, g),
             "graphs: a one-token step is recorded, naming its buffers and weights");
  k->ops->buf_free(k, y);
  gpu_expect(!recorded_names(k, y) && !recorded_names(k, x),
             "graphs: freeing a buffer drops the recorded steps that name it");
  y = gpu_upload(k, NULL, DIM);
  k->ops->step_begin(k, 4, 4);
  k->ops->embed(k, x, e, &token, 1);
  k->ops->rmsnorm(k, y, x, g, 1, 1e-6f);
  k->ops->step_end(k);
  gpu_expect(k->ops->sync(k, &err) == MD_OK && recorded_names(k, g), "graphs: the step is recorded again");
  k->ops->weight_free(k, g);
  gpu_expect(!recorded_names(k, g) && !recorded_names(k, y),
             "graphs: freeing a weight drops the recorded steps that name it");
  for (int c = 0; c < DIM; c++) gamma[c] *= 2.0f;
  g = gpu_weight(k, &gt2, gamma, MD_DTYPE_F32, 0, DIM);
  k->ops->step_begin(k, 5, 5);
  k->ops->embed(k, x, e, &token, 1);
  k->ops->rmsnorm(k, y, x, g, 1, 1e-6f);
  k->ops->step_end(k);
  float *got = gpu_download(k, y, DIM);
  md_tensor ct, cg;
  md_kweight *ce = gpu_weight(cpu, &ct, table, MD_DTYPE_F32, VOCAB, DIM);
  md_kweight *cgw = gpu_weight(cpu, &cg, gamma, MD_DTYPE_F32, 0, DIM);
  md_kbuf *cx = gpu_upload(cpu, NULL, DIM), *cy = gpu_upload(cpu, NULL, DIM);
  cpu->ops->embed(cpu, cx, ce, &token, 1);
  cpu->ops->rmsnorm(cpu, cy, cx, cgw, 1, 1e-6f);
  float *want = gpu_download(cpu, cy, DIM);
  double worst = 0;
  for (int c = 0; c < DIM; c++) worst = fmax(worst, fabs((double)got[c] - want[c]));
  gpu_expect(worst <= 1e-6, "graphs: a step recorded with the new weight computes with it (max error %.2g)", worst);
  free(got);
  free(want);
  cpu->ops->buf_free(cpu, cx);
  cpu->ops->buf_free(cpu, cy);
  cpu->ops->weight_free(cpu, ce);
  cpu->ops->weight_free(cpu, cgw);
  k->ops->buf_free(k, x);
  k->ops->buf_free(k, y);
  k->ops->weight_free(k, e);
  k->ops->weight_free(k, g);
  free(table);
  free(gamma);
  md_kernels_free(k);
}

/* ---- attention ------------------------------------------------------------------------ */

typedef struct attn_config {
  int heads, kv, hd;
  int64_t chunks[6][2]; /* (pos0, n) calls in order; n = 0 ends */
} attn_config;

typedef struct hook_store {
  int heads;
  int64_t width;  /* positions */
  float *rows;    /* [heads][width][width] */
  int64_t calls, bad;
} hook_store;

static void store_row(void *ctx, int layer, int head, int64_t pos, const float *w, int64_t n_keys) {
  hook_store *s = ctx;
  s->calls++;
  if (layer != 5 || head < 0 || head >= s->heads || pos >= s->width || n_keys != pos + 1) {
    s->bad++;
    return;
  }
  memcpy(s->rows + ((size_t)head * s->width + pos) * s->width, w, (size_t)n_keys * sizeof(float));
}

typedef struct attn_result {
  float *out;       /* [total][heads][hd] */
  float *captured;  /* per call: [width] (mean), and for decode calls a second [width] (max) */
  hook_store hook;
} attn_result;

static attn_result run_attention(md_kernels *k, const attn_config *cfg, int64_t total,
                                 const float *q, const float *keys, const float *values) {
  const int H = cfg->heads, KV = cfg->kv, D = cfg->hd;
  attn_result r = {.hook = {.heads = H, .width = total}};
  r.out = calloc((size_t)total * H * D, sizeof(float));
  r.captured = calloc(12 * (size_t)total, sizeof(float));
  r.hook.rows = calloc((size_t)H * total * total, sizeof(float));
  md_attn_shape shape = {.layer = 5, .n_heads = H, .n_kv_heads = KV, .head_dim = D, .capacity = total};
  md_kbuf *cache = gpu_upload(k, NULL, 2 * (size_t)KV * total * D);
  md_kbuf *out = gpu_upload(k, NULL, (size_t)total * H * D);
  md_kbuf *received = gpu_upload(k, NULL, (size_t)total);
  md_attn_hook hook = {.on_row = store_row, .ctx = &r.hook};
  md_error err;
  for (int c = 0; c < 6 && cfg->chunks[c][1] > 0; c++) {
    int64_t pos0 = cfg->chunks[c][0], n = cfg->chunks[c][1];
    md_kbuf *qb = gpu_upload(k, q + pos0 * H * D, (size_t)(n * H * D));
    md_kbuf *kb = gpu_upload(k, keys + pos0 * KV * D, (size_t)(n * KV * D));
    md_kbuf *vb = gpu_upload(k, values + pos0 * KV * D, (size_t)(n * KV * D));
    k->ops->kv_store(k, cache, kb, vb, &shape, pos0, n);
    for (int mode = 0; mode < (n == 1 ? 2 : 1); mode++) {
      md_attn_capture capture = {.received = received, .weight = 0.25f,
                                 .heads = mode ? MD_CAPTURE_HEADS_MAX : MD_CAPTURE_HEADS_MEAN};
      k->ops->buf_zero(k, received, 0, (size_t)total);
      k->ops->attention(k, out, qb, cache, &shape, pos0, n, mode == 0 ? &hook : NULL, &capture);
      if (k->ops->buf_read(k, received, 0, (size_t)total, r.captured + (size_t)(2 * c + mode) * total,
                           &err) != MD_OK)
        gpu_die("attention", &err);
    }
    if (k->ops->buf_read(k, out, 0, (size_t)(n * H * D), r.out + pos0 * H * D, &err) != MD_OK)
      gpu_die("attention", &err);
    k->ops->buf_free(k, qb);
    k->ops->buf_free(k, kb);
    k->ops->buf_free(k, vb);
  }
  k->ops->buf_free(k, cache);
  k->ops->buf_free(k, out);
  k->ops->buf_free(k, received);
  return r;
}

static void check_attention(md_kernels *cpu, md_kernels *cuda) {
  /* Prefill chunks at pos0 = 0 and pos0 > 0, decode steps between them,
   * one-token prompts, GQA groups of 2, 6, 7 and 1, head_dim 16 to 256
   * (256 needs more than 48 KiB of shared memory). */
  const attn_config configs[] = {
      {4, 2, 16, {{0, 150}, {150, 1}, {151, 5}, {156, 1}, {0, 0}}},
      {7, 1, 256, {{0, 90}, {90, 1}, {91, 1}, {0, 0}}},
      {16, 16, 32, {{0, 65}, {65, 1}, {0, 0}}},
      {12, 2, 128, {{0, 70}, {70, 1}, {71, 9}, {80, 1}, {0, 0}}},
      {14, 2, 64, {{0, 1}, {1, 1}, {2, 300}, {302, 1}, {0, 0}}},
      {12, 2, 128, {{0, 700}, {700, 1}, {701, 37}, {738, 1}, {739, 1}, {0, 0}}}};
  size_t n_configs = small_shapes ? 4 : sizeof configs / sizeof configs[0];
  for (size_t ci = 0; ci < n_configs; ci++) {
    const attn_config *cfg = &configs[ci];
    int64_t total = 0;
    for (int c = 0; c < 6 && cfg->chunks[c][1] > 0; c++) total = cfg->chunks[c][0] + cfg->chunks[c][1];
    float *q = gpu_random_floats((size_t)total * cfg->heads * cfg->hd, -2.5f, 2.5f);
    float *keys = gpu_random_floats((size_t)total * cfg->kv * cfg->hd, -1.0f, 1.0f);
    float *values = gpu_random_floats((size_t)total * cfg->kv * cfg->hd, -1.0f, 1.0f);
    attn_result want = run_attention(cpu, cfg, total, q, keys, values);
    attn_result got = run_attention(cuda, cfg, total, q, keys, values);
    char name[96];
    snprintf(name, sizeof name, "attention %d heads / %d kv, head_dim %d, %lld positions", cfg->heads,
             cfg->kv, cfg->hd, (long long)total);
    gpu_result(gpu_max_abs_diff(got.out, want.out, (size_t)total * cfg->heads * cfg->hd), 1e-5,
               "%s: outputs", name);
    gpu_result(gpu_max_abs_diff(got.hook.rows, want.hook.rows, (size_t)cfg->heads * total * total), 1e-6,
               "%s: hook rows (softmax weights)", name);
    gpu_expect(got.hook.calls == want.hook.calls && got.hook.bad == 0,
               "%s: hook calls %lld (cpu %lld), malformed %lld", name, (long long)got.hook.calls,
               (long long)want.hook.calls, (long long)got.hook.bad);
    double worst_decode = 0.0, worst_prefill = 0.0;
    for (int c = 0; c < 6 && cfg->chunks[c][1] > 0; c++) {
      int modes = cfg->chunks[c][1] == 1 ? 2 : 1;
      for (int m = 0; m < modes; m++) {
        const float *a = got.captured + (size_t)(2 * c + m) * total, *b = want.captured + (size_t)(2 * c + m) * total;
        for (int64_t j = 0; j < total; j++) {
          double d = fabs((double)a[j] - b[j]);
          if (modes == 2) worst_decode = fmax(worst_decode, d);
          else worst_prefill = fmax(worst_prefill, d / (fabs((double)b[j]) + 0.05));
        }
      }
    }
    gpu_result(worst_decode, 1e-6, "%s: decode capture (mean and max over heads)", name);
    gpu_result(worst_prefill, 2e-5, "%s: prefill capture (column sums, relative)", name);
    free(want.out);
    free(want.captured);
    free(want.hook.rows);
    free(got.out);
    free(got.captured);
    free(got.hook.rows);
    free(q);
    free(keys);
    free(values);
  }
}

static void check_kv_store(md_kernels *cpu, md_kernels *cuda) {
  md_attn_shape shape = {.layer = 0, .n_heads = 4, .n_kv_heads = 2, .head_dim = 24, .capacity = 50};
  size_t row = 2 * 24, cache_floats = 2 * row * 50;
  float *keys = gpu_random_floats(9 * row, -1, 1), *values = gpu_random_floats(9 * row, -1, 1);
  float *caches[2];
  md_kernels *ks[2] = {cpu, cuda};
  for (int i = 0; i < 2; i++) {
    md_kbuf *cache = gpu_upload(ks[i], NULL, cache_floats);
    md_kbuf *kb = gpu_upload(ks[i], keys, 9 * row), *vb = gpu_upload(ks[i], values, 9 * row);
    ks[i]->ops->kv_store(ks[i], cache, kb, vb, &shape, 41, 9);
    caches[i] = gpu_download(ks[i], cache, cache_floats);
    ks[i]->ops->buf_free(ks[i], cache);
    ks[i]->ops->buf_free(ks[i], kb);
    ks[i]->ops->buf_free(ks[i], vb);
  }
  gpu_result(gpu_max_abs_diff(caches[0], caches[1], cache_floats), 0.0,
             "kv_store at positions 41..49 of 50 (exact, same layout)");
  free(caches[0]);
  free(caches[1]);
  free(keys);
  free(values);
}

/* ---- buffers, reads, errors ---------------------------------------------------------------- */

static void check_buffers(md_kernels *cuda) {
  md_error err;
  float values[1000], got[1000];
  for (int i = 0; i < 1000; i++) values[i] = (float)i;
  md_kbuf *b = gpu_upload(cuda, values, 1000);
  /* An overlapped read, then work that overwrites the buffer before finish:
   * the read must see the values from before (the compute stream waits). */
  md_status s1 = cuda->ops->buf_read_start(cuda, b, 10, 500, got, 2, &err);
  cuda->ops->buf_zero(cuda, b, 0, 1000);
  md_status s2 = cuda->ops->buf_read_finish(cuda, 2, &err);
  double worst = 0.0;
  for (int i = 0; i < 500; i++) worst = fmax(worst, fabs(got[i] - values[10 + i]));
  gpu_expect(s1 == MD_OK && s2 == MD_OK && worst == 0.0,
             "buf_read_start sees the values queued before it, not a later buf_zero");
  float zeros[1000];
  cuda->ops->buf_read(cuda, b, 0, 1000, zeros, &err);
  double nonzero = 0.0;
  for (int i = 0; i < 1000; i++) nonzero = fmax(nonzero, fabs(zeros[i]));
  gpu_expect(nonzero == 0.0, "buf_zero then clears the buffer");
  /* Several slots at once, finished in another order. */
  float parts[4][100];
  cuda->ops->buf_write(cuda, b, 0, 1000, values, &err);
  for (int s = 0; s < 4; s++) cuda->ops->buf_read_start(cuda, b, (size_t)s * 100, 100, parts[s], s, &err);
  int ok = 1;
  for (int s = 3; s >= 0; s--) {
    ok &= cuda->ops->buf_read_finish(cuda, s, &err) == MD_OK;
    for (int i = 0; i < 100; i++) ok &= parts[s][i] == values[s * 100 + i];
  }
  gpu_expect(ok, "four read slots at once, finished in reverse order");
  gpu_expect(cuda->ops->buf_read_finish(cuda, 1, &err) == MD_OK, "finishing an idle slot is a no-op");
  cuda->ops->buf_read_start(cuda, b, 0, 1, got, 0, &err);
  gpu_expect(cuda->ops->buf_read_start(cuda, b, 0, 1, got, 0, &err) == MD_E_INVALID &&
                 strstr(err.message, "already holds a read"),
             "a second read into a busy slot is refused: \"%s\"", err.message);
  cuda->ops->buf_read_finish(cuda, 0, &err);
  gpu_expect(cuda->ops->buf_read_start(cuda, b, 0, 1, got, 4, &err) == MD_E_INVALID,
             "slot %d is out of range", MD_KERNELS_READ_SLOTS);
  gpu_expect(cuda->ops->buf_read(cuda, b, 990, 20, got, &err) == MD_E_INVALID &&
                 strstr(err.message, "read of [990, 1010) from a buffer of 1000 floats"),
             "an out-of-range read is refused: \"%s\"", err.message);
  gpu_expect(cuda->ops->buf_write(cuda, b, 999, 2, values, &err) == MD_E_INVALID,
             "an out-of-range write is refused");
  /* A compute op with a buffer too small fails at sync, names the op, and
   * the back end works afterwards. */
  float wbits[6] = {1, 2, 3, 4, 5, 6};
  md_tensor wt;
  md_kweight *w = gpu_weight(cuda, &wt, wbits, MD_DTYPE_F32, 2, 3);
  md_kbuf *small = gpu_upload(cuda, NULL, 1);
  cuda->ops->matmul(cuda, small, b, w, NULL, 1);
  md_status status = cuda->ops->sync(cuda, &err);
  gpu_expect(status == MD_E_INVALID && strstr(err.message, "matmul: y holds 1 floats"),
             "a too-small output is reported at sync: \"%s\"", err.message);
  gpu_expect(cuda->ops->sync(cuda, &err) == MD_OK, "and cleared once reported");
  md_tensor three = {.name = "three.d", .dtype = MD_DTYPE_F32, .ndim = 3, .shape = {1, 1, 1}, .data = wbits, .nbytes = 4};
  md_kweight *bad = NULL;
  gpu_expect(cuda->ops->weight_new(cuda, &three, &bad, &err) == MD_E_UNSUPPORTED &&
                 strstr(err.message, "tensor 'three.d' has 3 dimensions"),
             "a 3-D tensor is refused: \"%s\"", err.message);
  /* The same host tensor prepared twice (a tied LM head) is uploaded once. */
  md_kweight *again = NULL;
  cuda->ops->weight_new(cuda, &wt, &again, &err);
  gpu_expect(again && again->data == w->data, "a tensor given twice shares one device copy");
  cuda->ops->weight_free(cuda, again);
  float y[2] = {0};
  md_kbuf *yb = gpu_upload(cuda, NULL, 2);
  cuda->ops->matmul(cuda, yb, b, w, NULL, 1); /* b holds 0, 1, 2, ... */
  cuda->ops->buf_read(cuda, yb, 0, 2, y, &err);
  gpu_expect(y[0] == 8.0f && y[1] == 17.0f, "the shared copy survives freeing one of its weights: %g %g",
             y[0], y[1]);
  cuda->ops->weight_free(cuda, w);
  cuda->ops->buf_free(cuda, yb);
  cuda->ops->buf_free(cuda, small);
  cuda->ops->buf_free(cuda, b);
}

/* The device messages: an ordinal this machine does not have. */
static void check_device_errors(void) {
  md_cuda_options options = {.device = 4096};
  md_kernels *k = NULL;
  md_error err;
  md_status status = md_kernels_cuda_new(&options, &k, &err);
  gpu_expect(status == MD_E_DEVICE && strstr(err.message, "no such device"),
             "cuda:4096 is refused: \"%s\"", err.message);
  options.device = -1;
  gpu_expect(md_kernels_cuda_new(&options, &k, &err) == MD_E_INVALID, "cuda:-1 is refused");
}

/* A weight whose device pointer is invalid: the fault is reported. */
static int run_fault(int sync_each_launch) {
  md_kernels *cuda = open_cuda(MD_CUDA_GEMM_FAST, sync_each_launch);
  float wbits[64 * 64];
  for (int i = 0; i < 64 * 64; i++) wbits[i] = 1.0f;
  md_tensor wt;
  md_kweight *w = gpu_weight(cuda, &wt, wbits, MD_DTYPE_F32, 64, 64);
  const void *valid = w->data;
  w->data = (const void *)(uintptr_t)0x10000; /* no device memory there */
  md_kbuf *x = gpu_upload(cuda, wbits, 64), *y = gpu_upload(cuda, NULL, 64);
  cuda->ops->matmul(cuda, y, x, w, NULL, 1); /* the last kernel queued */
  md_error err = {0};
  md_status status = cuda->ops->sync(cuda, &err);
  printf("reported: %s\n", err.message);
  /* The launch names the kernel as written at the launch site, template
   * arguments included: "(gemv_vec_kernel<DT, NORM>)". */
  int named = strstr(err.message, sync_each_launch ? "kernel (gemv_vec_kernel" : "gemv_vec_kernel") != NULL;
  gpu_expect(status == MD_E_DEVICE && named,
             "a kernel fault is reported at sync and names the GEMV kernel%s",
             sync_each_launch ? " as the one at fault" : " (the last kernel queued before it)");
  w->data = valid;
  /* The context is unusable after a fault: teardown must not crash. */
  cuda->ops->weight_free(cuda, w);
  cuda->ops->buf_free(cuda, x);
  cuda->ops->buf_free(cuda, y);
  md_kernels_free(cuda);
  return gpu_finish(sync_each_launch ? "cuda_kernels_check fault --sync" : "cuda_kernels_check fault");
}

int main(int argc, char **argv) {
  bool fault = false, sync_each_launch = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--device") && i + 1 < argc) device = atoi(argv[++i]);
    else if (!strcmp(argv[i], "fault")) fault = true;
    else if (!strcmp(argv[i], "--sync")) sync_each_launch = true;
    else if (!strcmp(argv[i], "--small")) small_shapes = true;
    else {
      fprintf(stderr, "usage: cuda_kernels_check [--device N] [--small] [fault [--sync]]\n");
      return 2;
    }
  }
  /* The fault kills the CUDA context: it runs in a process of its own. */
  if (fault) return run_fault(sync_each_launch);
  md_kernels *cpu = open_cpu();
  md_kernels *cuda[3] = {open_cuda(MD_CUDA_GEMM_FAST, 0), open_cuda(MD_CUDA_GEMM_EXACT, 0),
                         open_cuda(MD_CUDA_GEMM_TF32, 0)};
  printf("device: %s\n", md_kernels_cuda_describe(cuda[0]));
  check_buffers(cuda[0]);
  check_device_errors();
  check_embed(cpu, cuda[0]);
  check_rmsnorm(cpu, cuda[0]);
  check_rope(cpu, cuda[0]);
  check_swiglu_add(cpu, cuda[0]);
  check_kv_store(cpu, cuda[0]);
  check_argmax(cuda[0]);
  check_greedy_rows(cuda[0]);
  check_graphs_forget_freed(cpu);
  check_f16_overflow(cuda[0]);
  check_products(cpu, cuda);
  check_rows_products(cuda[0]);
  check_views(cuda[0]);
  if (!small_shapes) check_logits(cpu, cuda[0], 151936, 1536);
  check_logits(cpu, cuda[0], 1000, 37);
  check_attention(cpu, cuda[0]);
  /* The same attention with a synchronisation after every launch. */
  md_kernels *synced = open_cuda(MD_CUDA_GEMM_FAST, 1);
  check_attention(cpu, synced);
  md_kernels_free(synced);
  for (int g = 0; g < 3; g++) md_kernels_free(cuda[g]);
  md_kernels_free(cpu);
  return gpu_finish("cuda_kernels_check");
}
