/* Shared by the GPU check programs (tests/gpu, built only with CUDA,
 * run by tests/gpu/check.sh on a machine with a GPU): one PASS or FAIL line
 * per check with the measured error and its tolerance, random inputs, and
 * tensors handed to both back ends. */
#ifndef MD_TESTS_GPU_CHECK_H
#define MD_TESTS_GPU_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "kernels/kernels.h"
#include "tests/test_rng.h"

static int gpu_passed = 0, gpu_failed = 0;

/* PASS when error <= tolerance (NaN fails). */
static inline void gpu_result(double error, double tolerance, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void gpu_result(double error, double tolerance, const char *fmt, ...) {
  int ok = error <= tolerance;
  va_list args;
  va_start(args, fmt);
  printf("%s ", ok ? "PASS" : "FAIL");
  vprintf(fmt, args);
  va_end(args);
  printf(": max error %.3g (tolerance %.3g)\n", error, tolerance);
  fflush(stdout);
  if (ok) gpu_passed++;
  else gpu_failed++;
}

static inline void gpu_expect(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void gpu_expect(int ok, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  printf("%s ", ok ? "PASS" : "FAIL");
  vprintf(fmt, args);
  va_end(args);
  printf("\n");
  fflush(stdout);
  if (ok) gpu_passed++;
  else gpu_failed++;
}

static inline int gpu_finish(const char *name) {
  printf("%s: %d passed, %d failed\n", name, gpu_passed, gpu_failed);
  return gpu_failed ? 1 : 0;
}

/* ---- random inputs (xorshift64*, fixed seed: runs are reproducible) ----------- */

static uint64_t gpu_rng = 0x2545f4914f6cdd1dull;

static inline uint32_t gpu_u32(void) { return md_test_rng_u32(&gpu_rng); }

static inline float gpu_uniform(float lo, float hi) { return md_test_rng_uniform(&gpu_rng, lo, hi); }

static inline float *gpu_random_floats(size_t n, float lo, float hi) {
  float *v = malloc((n ? n : 1) * sizeof(float));
  if (!v) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  for (size_t i = 0; i < n; i++) v[i] = gpu_uniform(lo, hi);
  return v;
}

/* Weight bits of `dtype` with values of magnitude about 2^-6 .. 2^1 (F16
 * includes zeros and subnormals); returns the values as f32 in *values. */
static inline void *gpu_random_weight(md_dtype dtype, size_t n, float **values) {
  size_t size = md_dtype_size(dtype);
  void *bits = malloc((n ? n : 1) * size);
  float *v = malloc((n ? n : 1) * sizeof(float));
  if (!bits || !v) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  for (size_t i = 0; i < n; i++) {
    if (dtype == MD_DTYPE_F32) {
      ((float *)bits)[i] = v[i] = gpu_uniform(-1.0f, 1.0f);
      continue;
    }
    uint32_t r = gpu_u32();
    uint16_t h;
    if (dtype == MD_DTYPE_BF16) {
      h = (uint16_t)((r & 0x8000u) | ((121u + (r >> 16) % 8) << 7) | ((r >> 4) & 0x7fu));
      v[i] = md_bf16_to_f32(h);
    } else {
      if (r % 97 == 0) h = (uint16_t)(r & 0x83ffu);
      else h = (uint16_t)((r & 0x8000u) | ((9u + (r >> 16) % 8) << 10) | ((r >> 4) & 0x3ffu));
      v[i] = md_f16_to_f32(h);
    }
    ((uint16_t *)bits)[i] = h;
  }
  *values = v;
  return bits;
}

/* ---- one back end's view of the same data ------------------------------------- */

static inline void gpu_die(const char *what, const md_error *err) {
  fprintf(stderr, "FAIL %s: %s\n", what, err->message);
  exit(1);
}

static inline md_kbuf *gpu_upload(md_kernels *k, const float *data, size_t n) {
  md_kbuf *buf = NULL;
  md_error err;
  if (k->ops->buf_new(k, n, &buf, &err) != MD_OK) gpu_die("buf_new", &err);
  if (data && k->ops->buf_write(k, buf, 0, n, data, &err) != MD_OK) gpu_die("buf_write", &err);
  return buf;
}

static inline float *gpu_download(md_kernels *k, const md_kbuf *buf, size_t n) {
  float *out = malloc((n ? n : 1) * sizeof(float));
  md_error err;
  if (!out) exit(2);
  if (k->ops->buf_read(k, buf, 0, n, out, &err) != MD_OK) gpu_die("buf_read", &err);
  return out;
}

/* A tensor over `data` ([rows, cols], or 1-D [cols] when rows is 0) prepared
 * by back end k; t must outlive the weight. */
static inline md_kweight *gpu_weight(md_kernels *k, md_tensor *t, const void *data, md_dtype dtype,
                                     int64_t rows, int64_t cols) {
  memset(t, 0, sizeof *t);
  t->name = "gpu_check.weight";
  t->dtype = dtype;
  t->ndim = rows ? 2 : 1;
  t->shape[0] = rows ? rows : cols;
  t->shape[1] = rows ? cols : 0;
  t->data = data;
  t->nbytes = (size_t)(rows ? rows : 1) * (size_t)cols * md_dtype_size(dtype);
  md_kweight *w = NULL;
  md_error err;
  if (k->ops->weight_new(k, t, &w, &err) != MD_OK) gpu_die("weight_new", &err);
  return w;
}

static inline double gpu_max_abs_diff(const float *a, const float *b, size_t n) {
  double worst = 0.0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    if (!(d <= worst)) worst = d; /* NaN counts as worst */
  }
  return worst;
}

#endif
