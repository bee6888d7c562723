/* The CPU back end's kernels against double-precision evaluations of their
 * definitions (written out below), on every instruction-set path the CPU
 * runs (portable C always, AVX2 and AVX-512 where the CPU has them; the
 * AVX-512 file also runs in an emulated CPU, tests/kernels/avx512_emulated),
 * for every weight dtype, with shapes that leave remainders in every loop
 * of every path (16- and 32-column steps, masked tails). Weight bits are converted for the
 * references by io/tensor's md_bf16_to_f32 / md_f16_to_f32, independent code
 * from the kernels' own conversions. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_internal.h"
#include "tests/test_rng.h"
#include "tests/test_util.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t next_u32(void) { return md_test_rng_u32(&rng_state); }

static float uniform(float lo, float hi) { return md_test_rng_uniform(&rng_state, lo, hi); }

/* A random weight of the given dtype, magnitude ~2^-6 .. 2^1, and its value. */
static double random_weight(void *w, md_dtype dtype, size_t i) {
  if (dtype == MD_DTYPE_F32) {
    ((float *)w)[i] = uniform(-1.0f, 1.0f);
    return ((float *)w)[i];
  }
  uint16_t bits;
  if (dtype == MD_DTYPE_BF16) {
    bits = (uint16_t)((next_u32() & 0x8000u) | ((121u + next_u32() % 8) << 7) | (next_u32() & 0x7fu));
    ((uint16_t *)w)[i] = bits;
    return md_bf16_to_f32(bits);
  }
  uint32_t r = next_u32();
  if (r % 97 == 0) bits = (uint16_t)(r & 0x83ffu); /* zero or subnormal */
  else bits = (uint16_t)((r & 0x8000u) | ((9u + (r >> 16) % 8) << 10) | ((r >> 4) & 0x3ffu));
  ((uint16_t *)w)[i] = bits;
  return md_f16_to_f32(bits);
}

static const md_dtype DTYPES[] = {MD_DTYPE_F32, MD_DTYPE_F16, MD_DTYPE_BF16};

/* y = W x + b: within 1e-5 of sum |w x| (fp32 accumulation of up to 17k terms). */
static void test_matvec(md_cpu_isa isa) {
  /* {64, 4099}, {1031, 96} and {150, 1024} are large enough for the team:
   * several chunks of rows each, the last one short and, for 1031 and 150
   * rows, ending in rows outside the four-row path; {6, 17000}: a few rows
   * of more than 64 KiB each (F32), two chunks. */
  const int64_t shapes[][2] = {{1, 1}, {3, 7}, {4, 16}, {13, 37}, {9, 2049}, {64, 4099}, {1031, 96},
                               {5, 50}, {8, 31}, {12, 48}, {150, 1024}, {6, 17000}};
  for (size_t d = 0; d < 3; d++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      int64_t rows = shapes[s][0], cols = shapes[s][1];
      md_dtype dtype = DTYPES[d];
      void *w = malloc((size_t)(rows * cols) * 4);
      double *wv = malloc((size_t)(rows * cols) * sizeof(double));
      float *x = malloc((size_t)cols * sizeof(float)), *bias = malloc((size_t)rows * sizeof(float));
      float *y = malloc((size_t)rows * sizeof(float)), *y1 = malloc((size_t)rows * sizeof(float));
      for (int64_t i = 0; i < rows * cols; i++) wv[i] = random_weight(w, dtype, (size_t)i);
      for (int64_t c = 0; c < cols; c++) x[c] = uniform(-2.0f, 2.0f);
      for (int64_t r = 0; r < rows; r++) bias[r] = uniform(-1.0f, 1.0f);
      for (int threads = 1; threads <= 3; threads += 2) {
        md_cpu_matvec(isa, threads, y, w, dtype, rows, cols, x, (s % 2) ? bias : NULL);
        for (int64_t r = 0; r < rows; r++) {
          double want = (s % 2) ? bias[r] : 0.0, scale = fabs(want);
          for (int64_t c = 0; c < cols; c++) {
            want += wv[r * cols + c] * x[c];
            scale += fabs(wv[r * cols + c] * x[c]);
          }
          CHECK_MSG(fabs(y[r] - want) <= 1e-5 * scale + 1e-30,
                    "matvec %s isa %d [%lld x %lld] row %lld: %.9g vs %.9g", md_dtype_name(dtype),
                    (int)isa, (long long)rows, (long long)cols, (long long)r, y[r], want);
        }
        /* Rows are handed to threads in chunks of a multiple of 4 rows:
         * every row takes the same path, so the bits do not depend on the
         * thread count. */
        if (threads == 1) memcpy(y1, y, (size_t)rows * sizeof(float));
        else
          CHECK_MSG(!memcmp(y1, y, (size_t)rows * sizeof(float)),
                    "matvec %s isa %d [%lld x %lld]: %d threads differ from 1 thread",
                    md_dtype_name(dtype), (int)isa, (long long)rows, (long long)cols, threads);
      }
      free(y1);
      free(w);
      free(wv);
      free(x);
      free(bias);
      free(y);
    }
}

/* md_cpu_argmax against the loop it stands for: random values with ties,
 * NaNs (first and elsewhere), -0 before +0, infinities, every length to 70
 * and a vocabulary's. */
static void test_argmax(md_cpu_isa isa) {
  enum { N = 151936 };
  float *v = malloc(N * sizeof(float));
  for (int trial = 0; trial < 400; trial++) {
    size_t n = trial < 71 ? (size_t)trial : trial < 390 ? (size_t)(1 + rand() % 5000) : N;
    for (size_t i = 0; i < n; i++) {
      int kind = rand() % 20;
      v[i] = kind == 0 ? NAN : kind == 1 ? 3.0f : kind == 2 ? -0.0f : kind == 3 ? 0.0f
             : kind == 4 ? -INFINITY : uniform(-4.0f, 2.0f);
    }
    if (trial % 7 == 3 && n > 0) v[0] = NAN;
    if (trial % 11 == 5) for (size_t i = 0; i < n; i++) v[i] = i % 3 ? 0.0f : -0.0f;
    size_t want = 0;
    for (size_t i = 1; i < n; i++)
      if (v[i] > v[want]) want = i;
    size_t got = md_cpu_argmax(isa, v, n);
    CHECK_MSG(got == want, "argmax isa %d, n %zu: %zu, the loop %zu", (int)isa, n, got, want);
  }
  free(v);
}

/* md_cpu_matvec_rows (a batched decode step's products): row b of each y
 * is, bit for bit, what md_cpu_matvec_shared gives x's row b alone, for 1
 * to 13 rows (the AVX-512 kernel's groups of 8, 4, 2 and 1 vectors), on 1
 * and 3 threads, every dtype, widths with and without a remainder of 16
 * and 32 columns, matrices cut into several pieces with a remainder of
 * rows (the one-chain path) and one of a single row. */
static void test_matvec_rows(md_cpu_isa isa) {
  const int64_t widths[] = {64, 37, 1013};
  const int64_t rows[] = {1031, 7, 1};
  const md_dtype dtypes[] = {MD_DTYPE_BF16, MD_DTYPE_F32, MD_DTYPE_F16};
  enum { MAX_X = 13 };
  for (size_t wi = 0; wi < 3; wi++) {
    int64_t cols = widths[wi];
    float *x = malloc((size_t)(MAX_X * cols) * sizeof(float));
    for (int64_t c = 0; c < MAX_X * cols; c++) x[c] = uniform(-2.0f, 2.0f);
    void *w[3];
    float *bias[3], *want[3], *got[3];
    md_cpu_matvec_out outs[3], alone[3];
    for (int i = 0; i < 3; i++) {
      size_t n = (size_t)(rows[i] * cols);
      w[i] = malloc(n * 4 + 4);
      for (size_t j = 0; j < n; j++) random_weight(w[i], dtypes[i], j);
      bias[i] = malloc((size_t)rows[i] * sizeof(float));
      for (int64_t r = 0; r < rows[i]; r++) bias[i][r] = uniform(-1.0f, 1.0f);
      want[i] = malloc((size_t)(MAX_X * rows[i]) * sizeof(float));
      got[i] = malloc((size_t)(MAX_X * rows[i]) * sizeof(float));
      outs[i] = (md_cpu_matvec_out){.y = got[i], .w = w[i], .dtype = dtypes[i], .rows = rows[i],
                                    .bias = i == 1 ? NULL : bias[i]};
    }
    for (int threads = 1; threads <= 3; threads += 2)
      for (int64_t nx = 1; nx <= MAX_X; nx++) {
        for (int64_t b = 0; b < nx; b++) {
          for (int i = 0; i < 3; i++) {
            alone[i] = outs[i];
            alone[i].y = want[i] + b * rows[i];
          }
          md_cpu_matvec_shared(isa, threads, alone, 3, cols, x + b * cols);
        }
        for (int i = 0; i < 3; i++)
          for (int64_t r = 0; r < nx * rows[i]; r++) got[i][r] = -12345.0f;
        md_cpu_matvec_rows(isa, threads, outs, 3, cols, x, nx);
        for (int i = 0; i < 3; i++)
          CHECK_MSG(!memcmp(want[i], got[i], (size_t)(nx * rows[i]) * sizeof(float)),
                    "matvec_rows isa %d, %d threads, %lld rows of x: product %d (%lld x %lld %s) "
                    "is not md_cpu_matvec_shared's", (int)isa, threads, (long long)nx, i,
                    (long long)rows[i], (long long)cols, md_dtype_name(dtypes[i]));
      }
    for (int i = 0; i < 3; i++) {
      free(w[i]);
      free(bias[i]);
      free(want[i]);
      free(got[i]);
    }
    free(x);
  }
}

/* md_cpu_matvec_shared: each product's bits are md_cpu_matvec's, alone,
 * on 1 and 3 threads: a q-like matrix cut into chunks beside k/v-like ones
 * too small for more than one thread, mixed dtypes, biases on some; an
 * empty matrix among them; one product alone; an empty matrix and one
 * small one (a single piece of work, not the first product's). */
static void test_matvec_shared(md_cpu_isa isa) {
  const int64_t cols = 1000;
  const int64_t rows[] = {1031, 64, 0, 150};
  const md_dtype dtypes[] = {MD_DTYPE_BF16, MD_DTYPE_F32, MD_DTYPE_F16, MD_DTYPE_F16};
  void *w[4];
  float *bias[4], *want[4], *got[4];
  float *x = malloc((size_t)cols * sizeof(float));
  for (int64_t c = 0; c < cols; c++) x[c] = uniform(-2.0f, 2.0f);
  md_cpu_matvec_out outs[4];
  for (int i = 0; i < 4; i++) {
    size_t n = (size_t)(rows[i] * cols);
    w[i] = malloc(n * 4 + 4);
    for (size_t j = 0; j < n; j++) random_weight(w[i], dtypes[i], j);
    bias[i] = malloc((size_t)rows[i] * sizeof(float) + 4);
    for (int64_t r = 0; r < rows[i]; r++) bias[i][r] = uniform(-1.0f, 1.0f);
    want[i] = malloc((size_t)rows[i] * sizeof(float) + 4);
    got[i] = malloc((size_t)rows[i] * sizeof(float) + 4);
    outs[i] = (md_cpu_matvec_out){.y = got[i], .w = w[i], .dtype = dtypes[i], .rows = rows[i],
                                  .bias = i % 2 ? NULL : bias[i]};
  }
  for (int threads = 1; threads <= 3; threads += 2)
    for (int count = 1; count <= 4; count += 3) {
      for (int i = 0; i < count; i++) {
        md_cpu_matvec(isa, threads, want[i], w[i], dtypes[i], rows[i], cols, x, outs[i].bias);
        for (int64_t r = 0; r < rows[i]; r++) got[i][r] = -12345.0f;
      }
      md_cpu_matvec_shared(isa, threads, outs, count, cols, x);
      for (int i = 0; i < count; i++)
        CHECK_MSG(!memcmp(want[i], got[i], (size_t)rows[i] * sizeof(float)),
                  "matvec_shared isa %d, %d threads, %d products: product %d (%lld x %lld %s) is "
                  "not md_cpu_matvec's", (int)isa, threads, count, i, (long long)rows[i],
                  (long long)cols, md_dtype_name(dtypes[i]));
    }
  /* outs[2] (no rows) then the first 20 rows of outs[1] (20 x 1000 F32,
   * under MD_MATVEC_PARALLEL_MIN: one piece of work). */
  md_cpu_matvec_out pair[] = {outs[2], outs[1]};
  pair[1].rows = 20;
  md_cpu_matvec(isa, 3, want[1], w[1], dtypes[1], 20, cols, x, outs[1].bias);
  for (int64_t r = 0; r < 20; r++) got[1][r] = -12345.0f;
  md_cpu_matvec_shared(isa, 3, pair, 2, cols, x);
  CHECK_MSG(!memcmp(want[1], got[1], 20 * sizeof(float)),
            "matvec_shared isa %d: an empty product then one piece of work: not md_cpu_matvec's",
            (int)isa);
  for (int i = 0; i < 4; i++) {
    free(w[i]);
    free(bias[i]);
    free(want[i]);
    free(got[i]);
  }
  free(x);
}

/* softmax(x)_i = exp(x_i - max) / sum_j exp(x_j - max). */
static void test_softmax(md_cpu_isa isa) {
  const int64_t sizes[] = {1, 5, 8, 9, 16, 33, 100, 1000};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    int64_t n = sizes[s];
    float *x = malloc((size_t)n * sizeof(float));
    double *want = malloc((size_t)n * sizeof(double)), max = -INFINITY, sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
      x[i] = uniform(-40.0f, 40.0f);
      if (i == n / 2) x[i] = -200.0f; /* underflows to 0 */
      max = fmax(max, x[i]);
    }
    for (int64_t i = 0; i < n; i++) sum += want[i] = exp((double)x[i] - max);
    md_cpu_softmax(isa, x, n);
    for (int64_t i = 0; i < n; i++)
      CHECK_MSG(fabs(x[i] - want[i] / sum) <= 1e-6 * want[i] / sum + 1e-12,
                "softmax isa %d n %lld [%lld]: %.9g vs %.9g", (int)isa, (long long)n, (long long)i,
                x[i], want[i] / sum);
    free(x);
    free(want);
  }
}

/* silu(g) * u = g / (1 + exp(-g)) * u, including exp's overflow and underflow. */
static void test_silu(md_cpu_isa isa) {
  enum { N = 1003 };
  float gate[N], up[N];
  double want[N];
  const float edges[] = {0.0f, -88.0f, -90.0f, -200.0f, 88.0f, 89.0f, 200.0f, 1e-3f, -1e-3f};
  for (int i = 0; i < N; i++) {
    gate[i] = i < 9 ? edges[i] : uniform(-30.0f, 30.0f);
    up[i] = uniform(-2.0f, 2.0f);
    want[i] = (double)gate[i] / (1.0 + exp(-(double)gate[i])) * up[i];
  }
  md_cpu_silu_mul(isa, gate, up, N);
  for (int i = 0; i < N; i++)
    CHECK_MSG(fabs(gate[i] - want[i]) <= 1e-6 * fabs(want[i]) + 1e-30,
              "silu isa %d [%d]: %.9g vs %.9g", (int)isa, i, gate[i], want[i]);
  /* A NaN gate gives NaN (as torch does), in a vector lane and in the tail. */
  float nan_gate[9], nan_up[9];
  for (int i = 0; i < 9; i++) nan_gate[i] = i == 2 || i == 8 ? NAN : 1.0f, nan_up[i] = 1.0f;
  md_cpu_silu_mul(isa, nan_gate, nan_up, 9);
  CHECK_MSG(isnan(nan_gate[2]) && isnan(nan_gate[8]) && !isnan(nan_gate[0]),
            "silu isa %d: NaN in, %g and %g out", (int)isa, nan_gate[2], nan_gate[8]);
}

/* Decode attention's products for one KV head and a block of keys, with
 * every head count the kernels split differently (up to 7 heads at once),
 * head dimensions with 8- and 16-column remainders, and key counts around
 * the 8- and 16-key steps; scores and weights stored with a row stride
 * (ld) larger than the block. Within 1e-5 of sum |terms|. Paths without a
 * kernel for the shape say so (false) and write nothing. */
static void test_decode_products(md_cpu_isa isa) {
  const int groups[] = {1, 2, 3, 6, 7, 8, 9, 14, 15};
  const int dims[] = {8, 16, 24, 64, 128};
  const int64_t lens[] = {1, 7, 8, 9, 15, 16, 17, 33, 256};
  int ran = 0;
  for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++)
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
      for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        int g = groups[gi], hd = dims[di];
        int64_t len = lens[li], ld = len + 5;
        float *q = malloc((size_t)(g * hd) * sizeof(float));
        float *kv = malloc((size_t)(len * hd) * sizeof(float));
        float *scores = malloc((size_t)(g * ld) * sizeof(float));
        float *out = malloc((size_t)(g * hd) * sizeof(float));
        for (int i = 0; i < g * hd; i++) q[i] = uniform(-2.0f, 2.0f);
        for (int64_t i = 0; i < len * hd; i++) kv[i] = uniform(-1.0f, 1.0f);
        for (int64_t i = 0; i < g * ld; i++) scores[i] = -7.0f;
        const float scale = 0.125f;
        bool have = md_cpu_decode_scores(isa, scores, ld, q, g, kv, len, hd, scale);
        CHECK_MSG(have == (isa != MD_CPU_ISA_PORTABLE), "decode scores isa %d hd %d: kernel %d", (int)isa, hd, have);
        if (!have) {
          for (int64_t i = 0; i < g * ld; i++) CHECK(scores[i] == -7.0f);
        } else {
          ran++;
          for (int h = 0; h < g; h++)
            for (int64_t k = 0; k < ld; k++) {
              float got = scores[h * ld + k];
              if (k >= len) {
                CHECK_MSG(got == -7.0f, "decode scores g %d hd %d len %lld: wrote past the block", g, hd, (long long)len);
                continue;
              }
              double want = 0.0, bound = 0.0;
              for (int d = 0; d < hd; d++) {
                double t = (double)q[h * hd + d] * kv[k * hd + d];
                want += t;
                bound += fabs(t);
              }
              want *= scale;
              CHECK_MSG(fabs(got - want) <= 1e-5 * scale * bound + 1e-30,
                        "decode scores isa %d g %d hd %d len %lld [%d][%lld]: %.9g vs %.9g", (int)isa, g, hd,
                        (long long)len, h, (long long)k, got, want);
            }
        }
        /* The weights: any values, a row stride ld. */
        for (int64_t i = 0; i < g * ld; i++) scores[i] = uniform(0.0f, 1.0f);
        for (int i = 0; i < g * hd; i++) out[i] = -7.0f;
        have = md_cpu_decode_values(isa, out, scores, ld, g, kv, len, hd);
        CHECK(have == (isa != MD_CPU_ISA_PORTABLE));
        for (int h = 0; h < g; h++)
          for (int d = 0; d < hd; d++) {
            float got = out[h * hd + d];
            if (!have) {
              CHECK(got == -7.0f);
              continue;
            }
            double want = 0.0, bound = 0.0;
            for (int64_t k = 0; k < len; k++) {
              double t = (double)scores[h * ld + k] * kv[k * hd + d];
              want += t;
              bound += fabs(t);
            }
            CHECK_MSG(fabs(got - want) <= 1e-5 * bound + 1e-30,
                      "decode values isa %d g %d hd %d len %lld [%d][%d]: %.9g vs %.9g", (int)isa, g, hd,
                      (long long)len, h, d, got, want);
          }
        free(q);
        free(kv);
        free(scores);
        free(out);
      }
  /* A head dimension without a kernel: the caller's sgemm. */
  float dummy[16] = {0};
  CHECK(!md_cpu_decode_scores(isa, dummy, 1, dummy, 1, dummy, 1, 12, 1.0f));
  CHECK(!md_cpu_decode_values(isa, dummy, dummy, 1, 1, dummy, 1, 12));
  if (isa != MD_CPU_ISA_PORTABLE) CHECK(ran > 0);
}

/* Prefill attention's products for a tile of rows of one KV head: row
 * counts around the 6-row blocks (and 448, Qwen2.5-0.5B's 7 heads x 64
 * positions), head dimensions 16, 48, 64 and 128 (every mix of the AVX-512
 * values kernel's 64-, 32- and 16-column passes; 24 has no kernel), key
 * counts around the 16-key panels and the 64-key steps of the AVX-512
 * scores kernel (40: a last step of 3 panels, 49: of 1), each row its own visible keys in
 * the causal pattern of stacked heads (runs of increasing positions) or at
 * random; rows given as pointers in any order. Scores and outputs within
 * 1e-5 of sum |terms|; nothing written outside the contract: a score row
 * beyond the next multiple of 16 of its block's longest row, an output row
 * beyond head_dim, or anything on a path without the kernels. */
static void test_prefill_products(md_cpu_isa isa) {
  const int64_t row_counts[] = {1, 5, 6, 7, 13, 448};
  const int dims[] = {16, 24, 48, 64, 128};
  const int64_t key_counts[] = {1, 15, 16, 17, 40, 49, 64, 100, 300};
  int ran = 0;
  for (size_t ri = 0; ri < sizeof row_counts / sizeof row_counts[0]; ri++)
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
      for (size_t ki = 0; ki < sizeof key_counts / sizeof key_counts[0]; ki++) {
        int64_t m = row_counts[ri], n = key_counts[ki];
        int hd = dims[di];
        if (m == 448 && (n < 100 || hd != 64)) continue; /* the big tile once per key count */
        bool causal = ki % 2 == 0;
        int64_t ld = (n + 15) / 16 * 16 + 3;
        float *q = malloc((size_t)(m * hd) * sizeof(float)), *keys = malloc((size_t)(n * hd) * sizeof(float));
        float *values = malloc((size_t)(n * hd) * sizeof(float));
        float *packed = malloc((size_t)md_cpu_packed_keys_floats(n, hd) * sizeof(float));
        float *scores = malloc((size_t)(m * ld) * sizeof(float));
        float *out = malloc((size_t)(m * (hd + 8)) * sizeof(float));
        const float **q_rows = malloc((size_t)m * sizeof *q_rows);
        float **out_rows = malloc((size_t)m * sizeof *out_rows);
        int64_t *visible = malloc((size_t)m * sizeof *visible);
        for (int64_t i = 0; i < m * hd; i++) q[i] = uniform(-2.0f, 2.0f);
        for (int64_t i = 0; i < n * hd; i++) {
          keys[i] = uniform(-1.0f, 1.0f);
          values[i] = uniform(-1.0f, 1.0f);
        }
        int64_t run = m > 6 ? m / 3 + 1 : m; /* "heads" of `run` positions each */
        for (int64_t i = 0; i < m; i++) {
          /* Row i reads query row m - 1 - i and writes output slot (i * 11) % m
           * (11 is prime to every m here), hd + 8 floats apart. */
          q_rows[i] = q + (m - 1 - i) * hd;
          out_rows[i] = out + ((i * 11) % m) * (hd + 8);
          int64_t v = causal ? n - run + 1 + i % run : 1 + (int64_t)(next_u32() % (uint32_t)n);
          visible[i] = v < 1 ? 1 : v > n ? n : v;
        }
        md_cpu_pack_keys(packed, keys, n, hd);
        for (int64_t j = 0; j < (n + 15) / 16 * 16; j++)
          for (int d = 0; d < hd; d++) {
            float want = j < n ? keys[j * hd + d] : 0.0f;
            CHECK(packed[(j / 16) * hd * 16 + d * 16 + j % 16] == want);
          }
        for (int64_t i = 0; i < m * ld; i++) scores[i] = -7.0f;
        const float scale = 0.125f;
        bool have = md_cpu_prefill_scores(isa, scores, ld, q_rows, visible, m, packed, hd, scale);
        bool expect = isa != MD_CPU_ISA_PORTABLE && hd % 16 == 0;
        CHECK_MSG(have == expect && md_cpu_prefill_kernels(isa, hd) == expect,
                  "prefill scores isa %d hd %d: kernel %d", (int)isa, hd, have);
        for (int64_t i = 0; i < m; i++) {
          int64_t block = i / 6 * 6, most = 0;
          for (int64_t b = block; b < block + 6 && b < m; b++) most = visible[b] > most ? visible[b] : most;
          int64_t written = (most + 15) / 16 * 16;
          for (int64_t j = 0; j < ld; j++) {
            float got = scores[i * ld + j];
            if (!have || j >= written) {
              CHECK_MSG(got == -7.0f, "prefill scores isa %d m %lld hd %d n %lld: row %lld written at %lld",
                        (int)isa, (long long)m, hd, (long long)n, (long long)i, (long long)j);
              continue;
            }
            if (j >= visible[i]) continue; /* unspecified */
            double want = 0.0, bound = 0.0;
            for (int d = 0; d < hd; d++) {
              double t = (double)q_rows[i][d] * keys[j * hd + d];
              want += t;
              bound += fabs(t);
            }
            want *= scale;
            CHECK_MSG(fabs(got - want) <= 1e-5 * scale * bound + 1e-30,
                      "prefill scores isa %d m %lld hd %d n %lld [%lld][%lld]: %.9g vs %.9g", (int)isa,
                      (long long)m, hd, (long long)n, (long long)i, (long long)j, got, want);
          }
        }
        if (have) ran++;
        /* The weights: any values up to each row's visible keys, zeros
         * beyond (the contract), a row stride ld. */
        for (int64_t i = 0; i < m; i++)
          for (int64_t j = 0; j < ld; j++) scores[i * ld + j] = j < visible[i] ? uniform(0.0f, 1.0f) : 0.0f;
        for (int64_t i = 0; i < m * (hd + 8); i++) out[i] = -7.0f;
        have = md_cpu_prefill_values(isa, out_rows, scores, ld, visible, m, values, hd);
        CHECK(have == expect);
        for (int64_t i = 0; i < m; i++)
          for (int d = 0; d < hd + 8; d++) {
            float got = out_rows[i][d];
            if (!have || d >= hd) {
              CHECK_MSG(got == -7.0f, "prefill values isa %d m %lld hd %d: row %lld written at %d", (int)isa,
                        (long long)m, hd, (long long)i, d);
              continue;
            }
            double want = 0.0, bound = 0.0;
            for (int64_t k = 0; k < visible[i]; k++) {
              double t = (double)scores[i * ld + k] * values[k * hd + d];
              want += t;
              bound += fabs(t);
            }
            CHECK_MSG(fabs(got - want) <= 1e-5 * bound + 1e-30,
                      "prefill values isa %d m %lld hd %d n %lld [%lld][%d]: %.9g vs %.9g", (int)isa,
                      (long long)m, hd, (long long)n, (long long)i, d, got, want);
          }
        free(q);
        free(keys);
        free(values);
        free(packed);
        free(scores);
        free(out);
        free(q_rows);
        free(out_rows);
        free(visible);
      }
  if (isa != MD_CPU_ISA_PORTABLE) CHECK(ran > 0);
}

/* ---- through the ops table ---------------------------------------------------- */

static md_kbuf *upload(md_kernels *k, const float *data, size_t n) {
  md_kbuf *buf = NULL;
  md_error err;
  CHECK(k->ops->buf_new(k, n, &buf, &err) == MD_OK);
  CHECK(k->ops->buf_write(k, buf, 0, n, data, &err) == MD_OK);
  return buf;
}

static md_kbuf *empty(md_kernels *k, size_t n) {
  md_kbuf *buf = NULL;
  md_error err;
  CHECK(k->ops->buf_new(k, n, &buf, &err) == MD_OK);
  return buf;
}

static float *download(md_kernels *k, const md_kbuf *buf, size_t n) {
  float *out = malloc(n * sizeof(float));
  md_error err;
  CHECK(k->ops->buf_read(k, buf, 0, n, out, &err) == MD_OK);
  return out;
}

static md_kweight *weight_as(md_kernels *k, md_tensor *t, const void *data, md_dtype dtype,
                             int64_t rows, int64_t cols, bool mapped) {
  memset(t, 0, sizeof *t);
  t->mapped = mapped;
  t->name = "test.weight";
  t->dtype = dtype;
  t->ndim = rows ? 2 : 1;
  t->shape[0] = rows ? rows : cols;
  t->shape[1] = cols;
  t->data = data;
  md_kweight *w = NULL;
  md_error err;
  CHECK(k->ops->weight_new(k, t, &w, &err) == MD_OK);
  return w;
}

/* A tensor in memory the caller owns (as a GGUF checkpoint's dequantized
 * tensors are), which the CPU back end reads where it lies. */
static md_kweight *weight(md_kernels *k, md_tensor *t, const void *data, md_dtype dtype,
                          int64_t rows, int64_t cols) {
  return weight_as(k, t, data, dtype, rows, cols, false);
}

/* A tensor standing for one of a file mapping (a safetensors checkpoint's),
 * which the CPU back end copies unless made with MD_CPU_WEIGHTS_MAPPED.
 * nbytes stays 0, so md_tensor_drop_pages leaves the test's heap memory
 * alone. */
static md_kweight *weight_of_mapping(md_kernels *k, md_tensor *t, const void *data, md_dtype dtype,
                                     int64_t rows, int64_t cols) {
  return weight_as(k, t, data, dtype, rows, cols, true);
}

/* The prefill product (sgemm on converted tiles; the largest case, 16.8M
 * floats, is more than the 64 MiB scratch holds and goes as two tiles) and
 * the small-n path, with bias, against double sums. */
static void test_matmul(md_kernels *k) {
  const int64_t cases[][3] = {{1, 24, 40}, {3, 17, 33}, {5, 64, 96}, {40, 130, 70}, {5, 4100, 4096}};
  for (size_t d = 0; d < 3; d++)
    for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++) {
      int64_t n = cases[s][0], rows = cases[s][1], cols = cases[s][2];
      md_dtype dtype = DTYPES[d];
      void *wdata = malloc((size_t)(rows * cols) * 4);
      double *wv = malloc((size_t)(rows * cols) * sizeof(double));
      float *x = malloc((size_t)(n * cols) * sizeof(float)), *b = malloc((size_t)rows * sizeof(float));
      for (int64_t i = 0; i < rows * cols; i++) wv[i] = random_weight(wdata, dtype, (size_t)i);
      for (int64_t i = 0; i < n * cols; i++) x[i] = uniform(-1.0f, 1.0f);
      for (int64_t i = 0; i < rows; i++) b[i] = uniform(-1.0f, 1.0f);
      md_tensor wt, bt;
      md_kweight *w = weight(k, &wt, wdata, dtype, rows, cols), *bias = weight(k, &bt, b, MD_DTYPE_F32, 0, rows);
      md_kbuf *xb = upload(k, x, (size_t)(n * cols)), *yb = NULL;
      md_error err;
      CHECK(k->ops->buf_new(k, (size_t)(n * rows), &yb, &err) == MD_OK);
      k->ops->matmul(k, yb, xb, w, bias, n);
      float *y = download(k, yb, (size_t)(n * rows));
      double worst = 0.0;
      for (int64_t i = 0; i < n; i++)
        for (int64_t r = 0; r < rows; r++) {
          double want = b[r], scale = fabs(want);
          for (int64_t c = 0; c < cols; c++) {
            want += wv[r * cols + c] * x[i * cols + c];
            scale += fabs(wv[r * cols + c] * x[i * cols + c]);
          }
          worst = fmax(worst, fabs(y[i * rows + r] - want) / scale);
        }
      CHECK_MSG(worst <= 1e-5, "matmul %s n %lld [%lld x %lld]: relative error %g", md_dtype_name(dtype),
                (long long)n, (long long)rows, (long long)cols, worst);
      free(y);
      k->ops->buf_free(k, xb);
      k->ops->buf_free(k, yb);
      k->ops->weight_free(k, w);
      k->ops->weight_free(k, bias);
      free(wdata);
      free(wv);
      free(x);
      free(b);
    }
}

/* matmul_shared on a decode row (md_cpu_matvec_shared): q-, k- and
 * v-like BF16 products with biases, each the bits of its own matmul. */
static void test_matmul_shared_row(md_kernels *k) {
  const int64_t cols = 2000, rows[] = {2000, 256, 256};
  void *data[3];
  float *b[3], *x = malloc((size_t)cols * sizeof(float));
  md_tensor wt[3], bt[3];
  md_kweight *w[3], *bias[3];
  md_kbuf *ys[3];
  md_error err;
  for (int64_t c = 0; c < cols; c++) x[c] = uniform(-1.0f, 1.0f);
  md_kbuf *xb = upload(k, x, (size_t)cols);
  for (int i = 0; i < 3; i++) {
    data[i] = malloc((size_t)(rows[i] * cols) * 2);
    for (int64_t j = 0; j < rows[i] * cols; j++) random_weight(data[i], MD_DTYPE_BF16, (size_t)j);
    b[i] = malloc((size_t)rows[i] * sizeof(float));
    for (int64_t r = 0; r < rows[i]; r++) b[i][r] = uniform(-1.0f, 1.0f);
    w[i] = weight(k, &wt[i], data[i], MD_DTYPE_BF16, rows[i], cols);
    bias[i] = weight(k, &bt[i], b[i], MD_DTYPE_F32, 0, rows[i]);
    CHECK(k->ops->buf_new(k, (size_t)rows[i], &ys[i], &err) == MD_OK);
  }
  k->ops->matmul_shared(k, ys, xb, (const md_kweight *const *)w, (const md_kweight *const *)bias, 3, 1);
  for (int i = 0; i < 3; i++) {
    float *shared = download(k, ys[i], (size_t)rows[i]);
    k->ops->matmul(k, ys[i], xb, w[i], bias[i], 1);
    float *alone = download(k, ys[i], (size_t)rows[i]);
    CHECK_MSG(!memcmp(shared, alone, (size_t)rows[i] * sizeof(float)),
              "%s: matmul_shared's product %d on a decode row is not its matmul's", md_kernels_cpu_isa(k), i);
    free(shared);
    free(alone);
    k->ops->buf_free(k, ys[i]);
    k->ops->weight_free(k, w[i]);
    k->ops->weight_free(k, bias[i]);
    free(data[i]);
    free(b[i]);
  }
  k->ops->buf_free(k, xb);
  free(x);
}

/* rmsnorm, embedding rows, SwiGLU, residual add, argmax, buffer bounds. */
static void test_elementwise(md_kernels *k) {
  enum { N = 3, DIM = 37 };
  float x[N * DIM], gamma[DIM];
  for (int i = 0; i < N * DIM; i++) x[i] = uniform(-3.0f, 3.0f);
  for (int i = 0; i < DIM; i++) gamma[i] = uniform(0.5f, 1.5f);
  md_tensor gt;
  md_kweight *g = weight(k, &gt, gamma, MD_DTYPE_F32, 0, DIM);
  md_kbuf *xb = upload(k, x, N * DIM);
  k->ops->rmsnorm(k, xb, xb, g, N, 1e-6f);
  float *y = download(k, xb, N * DIM);
  for (int i = 0; i < N; i++) {
    double ss = 0.0;
    for (int j = 0; j < DIM; j++) ss += (double)x[i * DIM + j] * x[i * DIM + j];
    for (int j = 0; j < DIM; j++) {
      double want = x[i * DIM + j] / sqrt(ss / DIM + 1e-6) * gamma[j];
      CHECK_MSG(fabs(y[i * DIM + j] - want) <= 1e-6 * fabs(want) + 1e-7, "rmsnorm [%d,%d]", i, j);
    }
  }
  free(y);

  /* embedding rows are exact conversions, for every dtype */
  for (size_t d = 0; d < 3; d++) {
    uint32_t table[11 * DIM];
    double values[11 * DIM];
    for (int i = 0; i < 11 * DIM; i++) values[i] = random_weight(table, DTYPES[d], (size_t)i);
    md_tensor tt;
    md_kweight *tw = weight(k, &tt, table, DTYPES[d], 11, DIM);
    int32_t tokens[N] = {10, 0, 4};
    k->ops->embed(k, xb, tw, tokens, N);
    float *e = download(k, xb, N * DIM);
    for (int i = 0; i < N; i++)
      for (int j = 0; j < DIM; j++) CHECK(e[i * DIM + j] == (float)values[tokens[i] * DIM + j]);
    free(e);
    k->ops->weight_free(k, tw);
  }

  float up[N * DIM], gate[N * DIM];
  for (int i = 0; i < N * DIM; i++) {
    up[i] = uniform(-1, 1);
    gate[i] = uniform(-5, 5);
  }
  md_kbuf *ub = upload(k, up, N * DIM), *gb = upload(k, gate, N * DIM);
  k->ops->swiglu(k, gb, ub, N * DIM);
  k->ops->add(k, gb, ub, N * DIM);
  float *s = download(k, gb, N * DIM);
  for (int i = 0; i < N * DIM; i++) {
    double want = gate[i] / (1.0 + exp(-(double)gate[i])) * up[i] + up[i];
    CHECK_MSG(fabs(s[i] - want) <= 1e-6 * fabs(want) + 1e-7, "swiglu+add [%d]", i);
  }
  free(s);

  float ties[6] = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f, 3.0f};
  md_kbuf *tb = upload(k, ties, 6);
  int64_t index = -1;
  md_error err;
  CHECK(k->ops->argmax(k, tb, 6, &index, &err) == MD_OK && index == 1); /* first of the ties */
  CHECK(k->ops->argmax(k, tb, 7, &index, &err) == MD_E_INVALID);
  float out[4];
  CHECK(k->ops->buf_read(k, tb, 4, 3, out, &err) == MD_E_INVALID);
  CHECK(strstr(err.message, "read of [4, 7) from a buffer of 6 floats") != NULL);
  CHECK(k->ops->buf_write(k, tb, 5, 2, out, &err) == MD_E_INVALID);
  md_tensor bad = {.name = "three.d", .dtype = MD_DTYPE_F32, .ndim = 3, .shape = {1, 1, 1}, .data = ties};
  md_kweight *bw = NULL;
  CHECK(k->ops->weight_new(k, &bad, &bw, &err) == MD_E_UNSUPPORTED);
  CHECK(strstr(err.message, "tensor 'three.d' has 3 dimensions") != NULL);
  /* A 2-D weight is copied (kernels.h): a shape or dtype whose size cannot
   * be a buffer is refused, not copied or divided by. md_dtype 3 is no
   * dtype md_dtype names, yet a value the enum can hold (clang's UBSan
   * checks loads of enum values out of its range). */
  md_tensor negative = {.name = "negative", .dtype = MD_DTYPE_F32, .ndim = 2, .shape = {-2, 3}, .data = ties};
  md_tensor huge = {.name = "huge", .dtype = MD_DTYPE_F32, .ndim = 2, .shape = {INT64_MAX / 2, 4}, .data = ties};
  md_tensor no_dtype = {.name = "no.dtype", .dtype = (md_dtype)3, .ndim = 2, .shape = {1, 2}, .data = ties};
  const md_tensor *refused[] = {&negative, &huge, &no_dtype};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    bw = NULL;
    CHECK(k->ops->weight_new(k, refused[i], &bw, &err) == MD_E_INVALID && bw == NULL);
    CHECK_MSG(strstr(err.message, refused[i]->name) && strstr(err.message, "impossible dtype or shape"),
              "weight_new %s: %s", refused[i]->name, err.message);
  }
  k->ops->buf_free(k, tb);
  k->ops->buf_free(k, ub);
  k->ops->buf_free(k, gb);
  k->ops->buf_free(k, xb);
  k->ops->weight_free(k, g);
}

/* RoPE: x'_j = x_j cos(a_j) - x_{j+d/2} sin(a_j), x'_{j+d/2} = x_{j+d/2} cos(a_j) +
 * x_j sin(a_j), a_j = pos * theta^(-2j/d), for queries and keys alike. */
static void test_rope(md_kernels *k) {
  enum { N = 5, H = 3, KV = 1, D = 16 };
  const int64_t pos0 = 7;
  const double theta = 10000.0;
  float q[N * H * D], kk[N * KV * D];
  for (int i = 0; i < N * H * D; i++) q[i] = uniform(-1, 1);
  for (int i = 0; i < N * KV * D; i++) kk[i] = uniform(-1, 1);
  md_kbuf *qb = upload(k, q, N * H * D), *kb = upload(k, kk, N * KV * D);
  k->ops->rope(k, qb, kb, N, H, KV, D, pos0, theta);
  float *qr = download(k, qb, N * H * D), *kr = download(k, kb, N * KV * D);
  for (int t = 0; t < N; t++)
    for (int h = 0; h < H + KV; h++)
      for (int j = 0; j < D / 2; j++) {
        const float *in = h < H ? q + (t * H + h) * D : kk + (t * KV + h - H) * D;
        const float *got = h < H ? qr + (t * H + h) * D : kr + (t * KV + h - H) * D;
        double angle = (double)(pos0 + t) * pow(theta, -2.0 * j / D);
        double a = in[j] * cos(angle) - in[j + D / 2] * sin(angle);
        double b = in[j + D / 2] * cos(angle) + in[j] * sin(angle);
        CHECK_MSG(fabs(got[j] - a) <= 1e-5 && fabs(got[j + D / 2] - b) <= 1e-5,
                  "rope t %d head %d j %d", t, h, j);
      }
  free(qr);
  free(kr);
  k->ops->buf_free(k, qb);
  k->ops->buf_free(k, kb);
}

/* ---- attention ------------------------------------------------------------------- */

enum { AH = 4, AKV = 2, AD = 16, ACAP = 528 };

typedef struct hook_log {
  double *weights; /* [AH][ACAP][ACAP]: row of query position p for head h */
  int64_t calls, bad;
} hook_log;

static void log_row(void *ctx, int layer, int head, int64_t pos, const float *w, int64_t n_keys) {
  hook_log *log = ctx;
  log->calls++;
  if (layer != 3 || n_keys != pos + 1 || head < 0 || head >= AH || pos >= ACAP) {
    log->bad++;
    return;
  }
  for (int64_t j = 0; j < n_keys; j++) log->weights[((size_t)head * ACAP + pos) * ACAP + j] = w[j];
}

/* out_h(p) = sum_{j <= p} softmax_j(q_h(p) . k_g(j) / sqrt(d)) v_g(j), g = h / (H / KV). */
static void attention_reference(const float *q_all, const float *keys, const float *values,
                                int64_t total, double *out, double *weights) {
  for (int64_t p = 0; p < total; p++)
    for (int h = 0; h < AH; h++) {
      int g = h / (AH / AKV);
      const float *q = q_all + (p * AH + h) * AD;
      double s[ACAP], max = -INFINITY, sum = 0.0;
      for (int64_t j = 0; j <= p; j++) {
        s[j] = 0.0;
        for (int e = 0; e < AD; e++) s[j] += (double)q[e] * keys[(j * AKV + g) * AD + e];
        s[j] /= sqrt((double)AD);
        max = fmax(max, s[j]);
      }
      for (int64_t j = 0; j <= p; j++) sum += s[j] = exp(s[j] - max);
      for (int e = 0; e < AD; e++) out[(p * AH + h) * AD + e] = 0.0;
      for (int64_t j = 0; j <= p; j++) {
        weights[((size_t)h * ACAP + p) * ACAP + j] = s[j] / sum;
        for (int e = 0; e < AD; e++)
          out[(p * AH + h) * AD + e] += s[j] / sum * values[(j * AKV + g) * AD + e];
      }
    }
}

/* The capture of one attention call, from the reference weights
 * (kernels.h, md_attn_capture): prefill chunks sum the rows of the chunk's
 * queries, heads averaged; a decode row is the mean or the max over heads. */
static void capture_reference(const double *weights, int64_t pos0, int64_t n, double weight,
                              md_capture_heads heads, double *want) {
  for (int64_t j = 0; j < pos0 + n; j++) {
    double sum = 0.0, max = 0.0;
    for (int h = 0; h < AH; h++)
      for (int64_t p = pos0; p < pos0 + n; p++) {
        double w = weights[((size_t)h * ACAP + p) * ACAP + j];
        sum += w;
        max = fmax(max, w);
      }
    want[j] = weight * (n == 1 && heads == MD_CAPTURE_HEADS_MAX ? max : sum / AH);
  }
}

/* Runs the attention call once more with a capture into a zeroed buffer and
 * compares the result with capture_reference; returns the largest error. */
static double check_capture(md_kernels *k, md_kbuf *out, md_kbuf *qb, md_kbuf *cache,
                            const md_attn_shape *shape, int64_t pos0, int64_t n,
                            const double *weights, md_capture_heads heads) {
  md_error err;
  md_kbuf *received = NULL;
  CHECK(k->ops->buf_new(k, ACAP, &received, &err) == MD_OK);
  k->ops->buf_write(k, received, 0, 1, (const float[]){7.0f}, &err);
  k->ops->buf_zero(k, received, 0, ACAP);
  md_attn_capture capture = {.received = received, .weight = 0.5f, .heads = heads};
  k->ops->attention(k, out, qb, cache, shape, pos0, n, NULL, &capture);
  float got[ACAP];
  CHECK(k->ops->buf_read_start(k, received, 0, ACAP, got, 1, &err) == MD_OK);
  CHECK(k->ops->buf_read_finish(k, 1, &err) == MD_OK);
  double want[ACAP] = {0}, worst = 0.0;
  capture_reference(weights, pos0, n, 0.5, heads, want);
  for (int64_t j = 0; j < ACAP; j++) worst = fmax(worst, fabs(got[j] - want[j]));
  k->ops->buf_free(k, received);
  return worst;
}

/* Prefill of 150 rows (tiles of 64, 64 and 22 rows), a decode step, a
 * chunk of 5 more rows, a chunk of 363, then two decode steps over three
 * blocks of keys (520 and 521 keys: decode cuts the keys into blocks of 256
 * and adds the blocks' outputs): outputs, hook rows and captures against
 * the reference. out_tol bounds the outputs' error: 1e-5 in float32; with
 * --bf16-gemm prefill's P V rounds the weights and the values (|v| <= 1)
 * to bf16, 2^-9 relative each, so 2^-8 sum p |v| <= 2^-8 more, while the
 * weights (hook, capture) keep the float32 bounds. */
static void test_attention(md_kernels *k, double out_tol) {
  const int64_t chunks[][2] = {{0, 150}, {150, 1}, {151, 5}, {156, 363}, {519, 1}, {520, 1}};
  const int64_t total = 521, max_chunk = 363;
  float *q = malloc(total * AH * AD * sizeof(float));
  float *keys = malloc(total * AKV * AD * sizeof(float)), *values = malloc(total * AKV * AD * sizeof(float));
  for (int64_t i = 0; i < total * AH * AD; i++) q[i] = uniform(-2.5f, 2.5f);
  for (int64_t i = 0; i < total * AKV * AD; i++) {
    keys[i] = uniform(-1, 1);
    values[i] = uniform(-1, 1);
  }
  double *want = malloc(total * AH * AD * sizeof(double));
  double *want_w = calloc((size_t)AH * ACAP * ACAP, sizeof(double));
  attention_reference(q, keys, values, total, want, want_w);

  hook_log log = {.weights = calloc((size_t)AH * ACAP * ACAP, sizeof(double))};
  md_attn_hook hook = {.on_row = log_row, .ctx = &log};
  md_attn_shape shape = {.layer = 3, .n_heads = AH, .n_kv_heads = AKV, .head_dim = AD, .capacity = ACAP};
  md_kbuf *cache = NULL, *out = NULL;
  md_error err;
  CHECK(k->ops->buf_new(k, 2 * AKV * ACAP * AD, &cache, &err) == MD_OK);
  CHECK(k->ops->buf_new(k, max_chunk * AH * AD, &out, &err) == MD_OK);
  double worst_out = 0.0;
  for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
    int64_t pos0 = chunks[c][0], n = chunks[c][1];
    md_kbuf *qb = upload(k, q + pos0 * AH * AD, (size_t)(n * AH * AD));
    md_kbuf *kb = upload(k, keys + pos0 * AKV * AD, (size_t)(n * AKV * AD));
    md_kbuf *vb = upload(k, values + pos0 * AKV * AD, (size_t)(n * AKV * AD));
    k->ops->kv_store(k, cache, kb, vb, &shape, pos0, n);
    k->ops->attention(k, out, qb, cache, &shape, pos0, n, &hook, NULL);
    CHECK(k->ops->sync(k, &err) == MD_OK);
    /* Column sums of a prefill chunk reach 1 + (rows after j): 1e-5 of that. */
    double worst_mean = check_capture(k, out, qb, cache, &shape, pos0, n, want_w, MD_CAPTURE_HEADS_MEAN);
    CHECK_MSG(worst_mean <= 1e-5 * (double)n, "capture (mean) at chunk %zu off by %g", c, worst_mean);
    if (n == 1) {
      double worst_max = check_capture(k, out, qb, cache, &shape, pos0, n, want_w, MD_CAPTURE_HEADS_MAX);
      CHECK_MSG(worst_max <= 1e-6, "capture (max) off by %g", worst_max);
    }
    float *got = download(k, out, (size_t)(n * AH * AD));
    for (int64_t i = 0; i < n * AH * AD; i++)
      worst_out = fmax(worst_out, fabs(got[i] - want[pos0 * AH * AD + i]));
    free(got);
    k->ops->buf_free(k, qb);
    k->ops->buf_free(k, kb);
    k->ops->buf_free(k, vb);
  }
  double worst_w = 0.0;
  for (size_t i = 0; i < (size_t)AH * ACAP * ACAP; i++) worst_w = fmax(worst_w, fabs(log.weights[i] - want_w[i]));
  CHECK_MSG(worst_out <= out_tol, "attention output off by %g", worst_out);
  CHECK_MSG(worst_w <= 1e-6, "attention weights off by %g", worst_w);
  CHECK(log.calls == AH * total);
  CHECK(log.bad == 0);

  /* The cache layout is the documented one: keys then values, head-major. */
  float *c = download(k, cache, 2 * AKV * ACAP * AD);
  CHECK(c[(1 * ACAP + 155) * AD + 3] == keys[(155 * AKV + 1) * AD + 3]);
  CHECK(c[((AKV + 0) * ACAP + 7) * AD + 15] == values[(7 * AKV + 0) * AD + 15]);
  free(c);
  k->ops->buf_free(k, cache);
  k->ops->buf_free(k, out);
  free(q);
  free(keys);
  free(values);
  free(want);
  free(want_w);
  free(log.weights);
}

/* kv_compact: the kept slots move down in order, keys and values of every
 * KV head, in place; bad slot lists are reported by sync and change nothing. */
static void test_kv_compact(md_kernels *k) {
  enum { KV = 2, CAP = 9, HD = 4, FLOATS = 2 * KV * CAP * HD };
  md_attn_shape shape = {.n_heads = 4, .n_kv_heads = KV, .head_dim = HD, .capacity = CAP};
  float data[FLOATS], got[FLOATS];
  for (int i = 0; i < FLOATS; i++) data[i] = (float)i;
  md_kbuf *cache = NULL;
  md_error err;
  CHECK(k->ops->buf_new(k, FLOATS, &cache, &err) == MD_OK);
  CHECK(k->ops->buf_write(k, cache, 0, FLOATS, data, &err) == MD_OK);
  const int64_t keep[] = {0, 1, 3, 4, 7, 8}; /* slots 2, 5, 6 go */
  const int n_keep = 6;
  k->ops->kv_compact(k, cache, &shape, keep, n_keep);
  CHECK(k->ops->sync(k, &err) == MD_OK);
  CHECK(k->ops->buf_read(k, cache, 0, FLOATS, got, &err) == MD_OK);
  int wrong = 0;
  for (int plane = 0; plane < 2 * KV; plane++)
    for (int j = 0; j < n_keep; j++)
      for (int d = 0; d < HD; d++)
        wrong += got[(plane * CAP + j) * HD + d] != data[(plane * CAP + (int)keep[j]) * HD + d];
  CHECK(wrong == 0);
  const int64_t unsorted[] = {0, 2, 1}, duplicate[] = {1, 1}, beyond[] = {0, CAP};
  const int64_t *bad[] = {unsorted, duplicate, beyond};
  const int64_t n_bad[] = {3, 2, 2};
  for (int i = 0; i < 3; i++) {
    float before[FLOATS];
    CHECK(k->ops->buf_read(k, cache, 0, FLOATS, before, &err) == MD_OK);
    k->ops->kv_compact(k, cache, &shape, bad[i], n_bad[i]);
    CHECK(k->ops->sync(k, &err) == MD_E_INVALID);
    CHECK(k->ops->buf_read(k, cache, 0, FLOATS, got, &err) == MD_OK);
    CHECK(memcmp(got, before, sizeof got) == 0);
  }
  k->ops->buf_free(k, cache);
}

/* A decode step over 520 keys (three blocks) on 1, 2 and 3 threads: the
 * blocks go to threads as they come free, so the output and the capture
 * must be the same bits whatever the thread count. */
static void test_decode_split(md_cpu_kernels path) {
  enum { KEYS = 520 };
  md_attn_shape shape = {.layer = 0, .n_heads = AH, .n_kv_heads = AKV, .head_dim = AD, .capacity = ACAP};
  float *q = malloc(AH * AD * sizeof(float));
  float *keys = malloc(KEYS * AKV * AD * sizeof(float)), *values = malloc(KEYS * AKV * AD * sizeof(float));
  for (int i = 0; i < AH * AD; i++) q[i] = uniform(-2.5f, 2.5f);
  for (int i = 0; i < KEYS * AKV * AD; i++) {
    keys[i] = uniform(-1, 1);
    values[i] = uniform(-1, 1);
  }
  float first_out[AH * AD], first_received[ACAP];
  for (int threads = 1; threads <= 3; threads++) {
    md_cpu_options options = {.threads = threads, .kernels = path};
    md_kernels *k = NULL;
    md_error err;
    CHECK(md_kernels_cpu_new(&options, &k, &err) == MD_OK);
    md_kbuf *cache = NULL, *out = NULL, *received = NULL;
    CHECK(k->ops->buf_new(k, 2 * AKV * ACAP * AD, &cache, &err) == MD_OK);
    CHECK(k->ops->buf_new(k, AH * AD, &out, &err) == MD_OK);
    CHECK(k->ops->buf_new(k, ACAP, &received, &err) == MD_OK);
    k->ops->buf_zero(k, received, 0, ACAP);
    md_kbuf *qb = upload(k, q, AH * AD), *kb = upload(k, keys, KEYS * AKV * AD);
    md_kbuf *vb = upload(k, values, KEYS * AKV * AD);
    k->ops->kv_store(k, cache, kb, vb, &shape, 0, KEYS);
    md_attn_capture capture = {.received = received, .weight = 0.5f, .heads = MD_CAPTURE_HEADS_MEAN};
    k->ops->attention(k, out, qb, cache, &shape, KEYS - 1, 1, NULL, &capture);
    CHECK(k->ops->sync(k, &err) == MD_OK);
    float *got = download(k, out, AH * AD), *got_received = download(k, received, ACAP);
    if (threads == 1) {
      memcpy(first_out, got, sizeof first_out);
      memcpy(first_received, got_received, sizeof first_received);
    } else {
      CHECK_MSG(!memcmp(first_out, got, sizeof first_out),
                "decode attention on %d threads differs from 1 thread", threads);
      CHECK_MSG(!memcmp(first_received, got_received, sizeof first_received),
                "decode capture on %d threads differs from 1 thread", threads);
    }
    free(got);
    free(got_received);
    k->ops->buf_free(k, qb);
    k->ops->buf_free(k, kb);
    k->ops->buf_free(k, vb);
    k->ops->buf_free(k, received);
    k->ops->buf_free(k, out);
    k->ops->buf_free(k, cache);
    md_kernels_free(k);
  }
  free(q);
  free(keys);
  free(values);
}

/* weight_new copies a 2-D weight of a file mapping (kernels.h): the
 * products and the embedding read the copy, not the tensor's memory, which
 * may change or go after it returns; two weights of one tensor (a tied LM
 * head and its embedding) share one copy, freed with the last of them in
 * either order (ASan and LSan see a double free or a leak). */
static void test_weights_are_copies(md_kernels *k) {
  enum { ROWS = 37, COLS = 50 };
  float *table = malloc((size_t)ROWS * COLS * sizeof(float)), x[COLS];
  double want[ROWS];
  for (int i = 0; i < ROWS * COLS; i++) table[i] = uniform(-1.0f, 1.0f);
  for (int j = 0; j < COLS; j++) x[j] = uniform(-1.0f, 1.0f);
  for (int r = 0; r < ROWS; r++) {
    want[r] = 0.0;
    for (int j = 0; j < COLS; j++) want[r] += (double)table[r * COLS + j] * x[j];
  }
  md_tensor t;
  md_kweight *head = weight_of_mapping(k, &t, table, MD_DTYPE_F32, ROWS, COLS);
  md_kweight *embed = weight_of_mapping(k, &t, table, MD_DTYPE_F32, ROWS, COLS);
  float row7[COLS];
  memcpy(row7, table + 7 * COLS, sizeof row7);
  for (int i = 0; i < ROWS * COLS; i++) table[i] = NAN;
  free(table);
  md_kbuf *xb = upload(k, x, COLS), *yb = NULL, *eb = NULL;
  md_error err;
  CHECK(k->ops->buf_new(k, ROWS, &yb, &err) == MD_OK && k->ops->buf_new(k, COLS, &eb, &err) == MD_OK);
  for (int pass = 0; pass < 2; pass++) {
    k->ops->matmul(k, yb, xb, head, NULL, 1);
    float *y = download(k, yb, ROWS);
    for (int r = 0; r < ROWS; r++)
      CHECK_MSG(fabs(y[r] - want[r]) <= 1e-5, "copied weight, pass %d, row %d: %g vs %g", pass, r, y[r], want[r]);
    free(y);
    int32_t token = 7;
    k->ops->embed(k, eb, embed, &token, 1);
    float *e = download(k, eb, COLS);
    CHECK(memcmp(e, row7, sizeof row7) == 0);
    free(e);
    /* The second pass with the LM head's weight gone: the embedding's
     * copy is the same memory and must stay. */
    if (pass == 0) k->ops->weight_free(k, head), head = embed;
  }
  k->ops->weight_free(k, embed);
  k->ops->buf_free(k, xb);
  k->ops->buf_free(k, yb);
  k->ops->buf_free(k, eb);
}

/* A 2-D tensor outside a file mapping (memory the model owns: a GGUF
 * checkpoint's dequantized tensors) is read where it lies by the copying
 * back end too, not held twice: a change to it shows in the product. */
static void test_owned_weights_in_place(md_kernels *k) {
  enum { ROWS = 11, COLS = 40 };
  float *table = malloc((size_t)ROWS * COLS * sizeof(float)), x[COLS];
  for (int i = 0; i < ROWS * COLS; i++) table[i] = uniform(-1.0f, 1.0f);
  for (int j = 0; j < COLS; j++) x[j] = uniform(-1.0f, 1.0f);
  md_tensor t;
  md_kweight *w = weight(k, &t, table, MD_DTYPE_F32, ROWS, COLS);
  md_kbuf *xb = upload(k, x, COLS), *yb = NULL;
  md_error err;
  CHECK(k->ops->buf_new(k, ROWS, &yb, &err) == MD_OK);
  k->ops->matmul(k, yb, xb, w, NULL, 1);
  float *before = download(k, yb, ROWS);
  for (int j = 0; j < COLS; j++) table[5 * COLS + j] *= 2.0f; /* exact */
  k->ops->matmul(k, yb, xb, w, NULL, 1);
  float *after = download(k, yb, ROWS);
  for (int r = 0; r < ROWS; r++) {
    float want = r == 5 ? 2.0f * before[r] : before[r];
    CHECK_MSG(after[r] == want, "owned weight, row %d: %g, want %g (read from a copy?)", r, after[r], want);
  }
  free(before);
  free(after);
  k->ops->weight_free(k, w);
  k->ops->buf_free(k, xb);
  k->ops->buf_free(k, yb);
  free(table);
}

/* MD_CPU_WEIGHTS_MAPPED reads the tensor where it lies and gives the copy's
 * bits: a BF16 and an F32 matrix multiplied by one row (decode) and by
 * several (the prompt's GEMM) on a mapped and a copying back end, compared
 * whole; then the tensor is changed in place, which the mapped back end
 * sees and the copying one does not. */
/* An LM head trained over part of its vocabulary (most rows zero, as the
 * demo checkpoint's): its packed nonzero 4-row blocks give every logit the
 * bits of the whole product (dense_logits), one row (logits) and several
 * (logits_rows); +0 where the row is zero; the whole product when the input
 * is not finite; no packing when more than half the blocks are nonzero or
 * the matrix is small. Rows % 4 = 3, with the last, partial block zero and
 * nonzero. With `bf16` (BF16 products, md_bf16_rows), the same. */
static void test_packed_logits(md_cpu_kernels path, bool bf16) {
  enum { ROWS = 8195, N = 5 };
  const int64_t widths[] = {64, 37};
  md_cpu_options packed_options = {.threads = 2, .kernels = path, .bf16_gemm = bf16};
  md_cpu_options dense_options = {.threads = 2, .kernels = path, .dense_logits = true,
                                  .bf16_gemm = bf16};
  md_kernels *packed = NULL, *dense = NULL;
  md_error err;
  CHECK(md_kernels_cpu_new(&packed_options, &packed, &err) == MD_OK);
  CHECK(md_kernels_cpu_new(&dense_options, &dense, &err) == MD_OK);
  for (size_t d = 0; d < 3; d++)
    for (size_t wi = 0; wi < 2; wi++)
      for (int last = 0; last < 2; last++) {
        const int64_t cols = widths[wi];
        md_dtype dtype = DTYPES[d];
        size_t esize = md_dtype_size(dtype);
        void *w = calloc((size_t)ROWS * (size_t)cols, esize);
        int64_t nonzero = 0;
        for (int64_t r = 0; r < ROWS; r++) {
          /* about one row in 11, in runs, and the last row when `last` */
          bool keep = (r % 97) < 9 || (r % 13) == 5 || (last && r == ROWS - 1);
          if (!keep) continue;
          nonzero++;
          for (int64_t c = 0; c < cols; c++) random_weight(w, dtype, (size_t)(r * cols + c));
        }
        float *gamma = malloc((size_t)cols * sizeof(float)), *x = malloc((size_t)(N * cols) * sizeof(float));
        for (int64_t c = 0; c < cols; c++) gamma[c] = uniform(0.5f, 1.5f);
        for (int64_t i = 0; i < N * cols; i++) x[i] = uniform(-2.0f, 2.0f);
        float *got[2][2];
        int64_t greedy[2][N];
        md_kernels *ks[2] = {packed, dense};
        int64_t packed_rows = -1;
        for (int kk = 0; kk < 2; kk++) {
          md_kernels *k = ks[kk];
          md_tensor wt, gt;
          md_kweight *head = weight(k, &wt, w, dtype, ROWS, cols), *norm = weight(k, &gt, gamma, MD_DTYPE_F32, 0, cols);
          if (kk == 0) packed_rows = md_kweight_cpu_packed_rows(head);
          else CHECK(md_kweight_cpu_packed_rows(head) == 0);
          md_kbuf *xb = upload(k, x, (size_t)(N * cols)), *one = empty(k, ROWS),
                  *all = empty(k, (size_t)N * ROWS);
          k->ops->logits(k, one, xb, 3, norm, head, 1e-6f);
          k->ops->logits_rows(k, all, xb, N, norm, head, 1e-6f);
          got[kk][0] = download(k, one, ROWS);
          got[kk][1] = download(k, all, (size_t)N * ROWS);
          CHECK(k->ops->greedy_rows(k, greedy[kk], all, xb, N, norm, head, 1e-6f, &err) == MD_OK);
          k->ops->buf_free(k, xb);
          k->ops->buf_free(k, one);
          k->ops->buf_free(k, all);
          k->ops->weight_free(k, head);
          k->ops->weight_free(k, norm);
        }
        CHECK_MSG(packed_rows > 0 && packed_rows % 4 == (last ? 3 : 0) && packed_rows < ROWS / 2 &&
                      packed_rows >= nonzero,
                  "%s %s cols %lld: %lld packed rows for %lld nonzero", md_cpu_isa_name(md_cpu_isa_of(path)),
                  md_dtype_name(dtype), (long long)cols, (long long)packed_rows, (long long)nonzero);
        CHECK_MSG(!memcmp(got[0][0], got[1][0], ROWS * sizeof(float)) &&
                      !memcmp(got[0][1], got[1][1], (size_t)N * ROWS * sizeof(float)),
                  "%s %s cols %lld last %d: packed logits differ from the whole product",
                  md_cpu_isa_name(md_cpu_isa_of(path)), md_dtype_name(dtype), (long long)cols, last);
        bool zeros = true;
        for (int64_t r = 0; r < ROWS; r++) {
          union { float f; uint32_t u; } v = {.f = got[0][0][r]};
          if ((r % 97) >= 9 && (r % 13) != 5 && !(last && r == ROWS - 1)) zeros = zeros && v.u == 0;
        }
        CHECK_MSG(zeros, "a zero row's logit is +0");
        for (int64_t b = 0; b < N; b++)
          for (int kk = 0; kk < 2; kk++)
            CHECK_MSG(greedy[kk][b] == (int64_t)md_cpu_argmax(MD_CPU_ISA_PORTABLE,
                                                              got[1][1] + b * ROWS, ROWS),
                      "%s %s cols %lld row %lld: greedy_rows (%s) is not the logits' argmax",
                      md_cpu_isa_name(md_cpu_isa_of(path)), md_dtype_name(dtype),
                      (long long)cols, (long long)b, kk ? "dense" : "packed");
        for (int kk = 0; kk < 2; kk++) free(got[kk][0]), free(got[kk][1]);
        free(w);
        free(gamma);
        free(x);
      }
  /* A NaN input: the whole product (NaN logits), not +0 for the zero rows;
   * a denser matrix and a small one are not packed. */
  enum { COLS = 16 };
  uint16_t *w = calloc((size_t)ROWS * COLS, sizeof *w);
  for (int64_t r = 0; r < ROWS; r += 16) /* a block in four nonzero */
    for (int c = 0; c < COLS; c++) w[r * COLS + c] = 0x3f80; /* 1.0 in BF16 */
  float gamma[COLS], x[COLS];
  for (int c = 0; c < COLS; c++) gamma[c] = 1.0f, x[c] = c == 3 ? NAN : 1.0f;
  md_tensor wt, gt;
  md_kweight *head = weight(packed, &wt, w, MD_DTYPE_BF16, ROWS, COLS);
  md_kweight *norm = weight(packed, &gt, gamma, MD_DTYPE_F32, 0, COLS);
  CHECK(md_kweight_cpu_packed_rows(head) > 0);
  md_kbuf *xb = upload(packed, x, COLS), *one = empty(packed, ROWS);
  packed->ops->logits(packed, one, xb, 0, norm, head, 1e-6f);
  float *nan_logits = download(packed, one, ROWS);
  CHECK_MSG(isnan(nan_logits[1]) && isnan(nan_logits[0]), "a NaN input gives NaN logits on zero rows too");
  free(nan_logits);
  packed->ops->weight_free(packed, head);
  for (int64_t r = 0; r < ROWS; r += 2) w[r * COLS] = 0x3f80; /* every block nonzero */
  head = weight(packed, &wt, w, MD_DTYPE_BF16, ROWS, COLS);
  CHECK(md_kweight_cpu_packed_rows(head) == 0);
  packed->ops->weight_free(packed, head);
  head = weight(packed, &wt, w, MD_DTYPE_BF16, 4000, COLS); /* below 8,192 rows */
  CHECK(md_kweight_cpu_packed_rows(head) == 0);
  packed->ops->weight_free(packed, head);
  packed->ops->weight_free(packed, norm);
  packed->ops->buf_free(packed, xb);
  packed->ops->buf_free(packed, one);
  free(w);
  md_kernels_free(packed);
  md_kernels_free(dense);
}

/* greedy_rows on a packed head searches the packed products alone
 * (backend.c, packed_argmax): its token is the whole logits' argmax (the
 * loop "best = 0; if v[i] > v[best]"), on hand-made heads where the answer
 * is known: every packed logit negative (the first zero row, before and
 * after the packed rows), the largest packed logit zero (the smaller of its
 * row and the first zero row), a NaN among the packed logits (at row 0:
 * token 0; later: not chosen), and a positive largest. Each head is BF16,
 * 16 columns, x = (1, 1, 0, ...) normalised with gamma 1 (x' = (2.83, 2.83,
 * 0, ...)), so row r's logit is 2.83 (w[r][0] + w[r][1]); one row of x
 * alone and the same row twice (n = 2, the second row's products). */
static void test_packed_greedy(md_cpu_kernels path) {
  enum { ROWS = 8195, COLS = 16 };
  const uint16_t one = 0x3f80, minus_one = 0xbf80, minus_two = 0xc000, inf = 0x7f80,
                 minus_inf = 0xff80;
  struct {
    const char *what;
    int64_t first_block;     /* the 4-row block of nonzero rows starts here */
    uint16_t col0[4], col1[4]; /* w[first_block + i][0] and [1] */
    int64_t want;
  } cases[] = {
      {"all negative, zero rows before", 8, {minus_one, minus_two, minus_one, minus_one}, {0}, 0},
      {"all negative, zero rows after", 0, {minus_one, minus_two, minus_one, minus_one}, {0}, 4},
      {"largest zero, zero rows after", 0, {minus_one, minus_one, one, minus_one},
       {0, 0, minus_one, 0}, 2},
      {"largest zero, zero rows before", 8, {minus_one, one, minus_one, minus_one},
       {0, minus_one, 0, 0}, 0},
      {"NaN at row 0", 0, {inf, one, one, minus_one}, {minus_inf, 0, 0, 0}, 0},
      {"NaN later, largest positive", 8, {inf, one, minus_two, one}, {minus_inf, one, 0, 0}, 9},
      {"largest positive", 8, {minus_one, one, minus_two, one}, {0, one, 0, one}, 9},
  };
  md_cpu_options packed_options = {.threads = 2, .kernels = path};
  md_cpu_options dense_options = {.threads = 2, .kernels = path, .dense_logits = true};
  md_kernels *packed = NULL, *dense = NULL;
  md_error err;
  CHECK(md_kernels_cpu_new(&packed_options, &packed, &err) == MD_OK);
  CHECK(md_kernels_cpu_new(&dense_options, &dense, &err) == MD_OK);
  float gamma[COLS], x[2 * COLS];
  for (int c = 0; c < COLS; c++) gamma[c] = 1.0f, x[c] = x[COLS + c] = c < 2 ? 1.0f : 0.0f;
  uint16_t *w = calloc((size_t)ROWS * COLS, sizeof *w);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memset(w, 0, (size_t)ROWS * COLS * sizeof *w);
    for (int r = 0; r < 4; r++) {
      w[(cases[i].first_block + r) * COLS] = cases[i].col0[r];
      w[(cases[i].first_block + r) * COLS + 1] = cases[i].col1[r];
      w[(cases[i].first_block + r) * COLS + 5] = one; /* nonzero, times x's 0 */
    }
    int64_t got[2][2], alone[2], want_dense[2];
    md_kernels *ks[2] = {packed, dense};
    for (int kk = 0; kk < 2; kk++) {
      md_kernels *k = ks[kk];
      md_tensor wt, gt;
      md_kweight *head = weight(k, &wt, w, MD_DTYPE_BF16, ROWS, COLS);
      md_kweight *norm = weight(k, &gt, gamma, MD_DTYPE_F32, 0, COLS);
      CHECK(md_kweight_cpu_packed_rows(head) == (kk ? 0 : 4));
      md_kbuf *xb = upload(k, x, 2 * COLS), *logits = empty(k, 2 * ROWS);
      CHECK(k->ops->greedy_rows(k, &alone[kk], logits, xb, 1, norm, head, 1e-6f, &err) == MD_OK);
      CHECK(k->ops->greedy_rows(k, got[kk], logits, xb, 2, norm, head, 1e-6f, &err) == MD_OK);
      if (kk) {
        dense->ops->logits_rows(dense, logits, xb, 2, norm, head, 1e-6f);
        float *all = download(dense, logits, 2 * ROWS);
        for (int b = 0; b < 2; b++)
          want_dense[b] = (int64_t)md_cpu_argmax(MD_CPU_ISA_PORTABLE, all + b * ROWS, ROWS);
        free(all);
      }
      k->ops->buf_free(k, xb);
      k->ops->buf_free(k, logits);
      k->ops->weight_free(k, head);
      k->ops->weight_free(k, norm);
    }
    CHECK_MSG(alone[0] == cases[i].want && alone[1] == cases[i].want,
              "%s, %s, one row: packed %lld, dense %lld, want %lld",
              md_cpu_isa_name(md_cpu_isa_of(path)), cases[i].what, (long long)alone[0],
              (long long)alone[1], (long long)cases[i].want);
    for (int b = 0; b < 2; b++)
      CHECK_MSG(want_dense[b] == cases[i].want && got[0][b] == cases[i].want &&
                    got[1][b] == cases[i].want,
                "%s, %s, row %d: packed %lld, dense %lld, the logits' argmax %lld, want %lld",
                md_cpu_isa_name(md_cpu_isa_of(path)), cases[i].what, b, (long long)got[0][b],
                (long long)got[1][b], (long long)want_dense[b], (long long)cases[i].want);
  }
  /* logits too short for the rows: refused */
  md_tensor wt, gt;
  md_kweight *head = weight(packed, &wt, w, MD_DTYPE_BF16, ROWS, COLS);
  md_kweight *norm = weight(packed, &gt, gamma, MD_DTYPE_F32, 0, COLS);
  md_kbuf *xb = upload(packed, x, 2 * COLS), *logits = empty(packed, ROWS);
  int64_t index[2];
  CHECK(packed->ops->greedy_rows(packed, index, logits, xb, 2, norm, head, 1e-6f, &err) ==
        MD_E_INVALID);
  packed->ops->buf_free(packed, xb);
  packed->ops->buf_free(packed, logits);
  packed->ops->weight_free(packed, head);
  packed->ops->weight_free(packed, norm);
  free(w);
  md_kernels_free(packed);
  md_kernels_free(dense);
}

static void test_weights_mapped(md_cpu_kernels path) {
  enum { ROWS = 67, COLS = 96, N = 9 };
  md_cpu_options copy_options = {.threads = 2, .kernels = path};
  md_cpu_options mapped_options = {.threads = 2, .kernels = path, .weights = MD_CPU_WEIGHTS_MAPPED};
  md_kernels *copy = NULL, *mapped = NULL;
  md_error err;
  CHECK(md_kernels_cpu_new(&copy_options, &copy, &err) == MD_OK);
  CHECK(md_kernels_cpu_new(&mapped_options, &mapped, &err) == MD_OK);
  CHECK(!strcmp(md_kernels_cpu_weights(copy), "copy") && !strcmp(md_kernels_cpu_weights(mapped), "mapped"));
  uint16_t *bf16 = malloc((size_t)ROWS * COLS * sizeof *bf16);
  float *f32 = malloc((size_t)ROWS * COLS * sizeof *f32), x[N * COLS];
  for (int i = 0; i < ROWS * COLS; i++) {
    f32[i] = uniform(-1.0f, 1.0f);
    union { float f; uint32_t u; } v = {.f = f32[i]};
    bf16[i] = (uint16_t)(v.u >> 16);
  }
  for (int i = 0; i < N * COLS; i++) x[i] = uniform(-1.0f, 1.0f);
  const void *tables[2] = {bf16, f32};
  const md_dtype dtypes[2] = {MD_DTYPE_BF16, MD_DTYPE_F32};
  for (int d = 0; d < 2; d++) {
    md_tensor tc, tm;
    md_kweight *wc = weight_of_mapping(copy, &tc, tables[d], dtypes[d], ROWS, COLS);
    md_kweight *wm = weight_of_mapping(mapped, &tm, tables[d], dtypes[d], ROWS, COLS);
    md_kbuf *xc = upload(copy, x, N * COLS), *xm = upload(mapped, x, N * COLS), *yc = NULL, *ym = NULL;
    CHECK(copy->ops->buf_new(copy, N * ROWS, &yc, &err) == MD_OK);
    CHECK(mapped->ops->buf_new(mapped, N * ROWS, &ym, &err) == MD_OK);
    float *before[2] = {NULL, NULL}; /* pass 0's products, 1 row and N rows */
    for (int pass = 0; pass < 2; pass++) {
      for (int64_t n = 1; n <= N; n += N - 1) {
        float **kept = &before[n == N];
        copy->ops->matmul(copy, yc, xc, wc, NULL, n);
        mapped->ops->matmul(mapped, ym, xm, wm, NULL, n);
        float *c = download(copy, yc, (size_t)(n * ROWS)), *m = download(mapped, ym, (size_t)(n * ROWS));
        if (pass == 0) {
          CHECK_MSG(memcmp(c, m, (size_t)(n * ROWS) * sizeof(float)) == 0,
                    "%s, %lld rows: the mapped weight's products are not the copy's",
                    d ? "f32" : "bf16", (long long)n);
        } else {
          /* Row 3 of the tensor was doubled (exact in both dtypes). */
          for (int64_t i = 0; i < n; i++)
            for (int r = 0; r < ROWS; r++) {
              size_t at = (size_t)(i * ROWS + r);
              CHECK_MSG(c[at] == (*kept)[at], "the copy saw the tensor change (row %d)", r);
              float want = r == 3 ? 2.0f * (*kept)[at] : (*kept)[at];
              CHECK_MSG(m[at] == want, "mapped, %s, row %d: %g, want %g", d ? "f32" : "bf16", r, m[at], want);
            }
        }
        if (pass == 0) *kept = c;
        else free(c);
        free(m);
      }
      if (pass == 0) {
        for (int j = 0; j < COLS; j++) {
          if (d == 0) bf16[3 * COLS + j] = (uint16_t)(bf16[3 * COLS + j] + 0x80); /* exponent + 1 */
          else f32[3 * COLS + j] *= 2.0f;
        }
      }
    }
    free(before[0]);
    free(before[1]);
    copy->ops->weight_free(copy, wc);
    mapped->ops->weight_free(mapped, wm);
    copy->ops->buf_free(copy, xc), copy->ops->buf_free(copy, yc);
    mapped->ops->buf_free(mapped, xm), mapped->ops->buf_free(mapped, ym);
  }
  free(bf16);
  free(f32);
  md_kernels_free(copy);
  md_kernels_free(mapped);
  md_cpu_weights parsed;
  CHECK(md_cpu_weights_parse("mapped", &parsed) && parsed == MD_CPU_WEIGHTS_MAPPED);
  CHECK(md_cpu_weights_parse("copy", &parsed) && parsed == MD_CPU_WEIGHTS_COPY);
  CHECK(!md_cpu_weights_parse("Mapped", &parsed) && !md_cpu_weights_parse("", &parsed));
  md_cpu_options bad = {.weights = (md_cpu_weights)5};
  md_kernels *k = NULL;
  CHECK(md_kernels_cpu_new(&bad, &k, &err) == MD_E_INVALID);
}

static void test_backend(md_cpu_kernels path) {
  md_cpu_options options = {.threads = 2, .kernels = path};
  md_kernels *k = NULL;
  md_error err;
  CHECK(md_kernels_cpu_new(&options, &k, &err) == MD_OK);
  if (path != MD_CPU_KERNELS_BEST) CHECK(strcmp(md_kernels_cpu_isa(k), md_cpu_isa_name(md_cpu_isa_of(path))) == 0);
  CHECK(strcmp(k->ops->name, "cpu") == 0);
  test_matmul(k);
  test_matmul_shared_row(k);
  test_weights_are_copies(k);
  test_owned_weights_in_place(k);
  test_elementwise(k);
  test_rope(k);
  test_attention(k, 1e-5);
  test_kv_compact(k);
  md_kernels_free(k);
  test_decode_split(path);
  test_weights_mapped(path);
  md_cpu_options negative = {.threads = -1};
  CHECK(md_kernels_cpu_new(&negative, &k, &err) == MD_E_INVALID);
}

/* The CPUID test picks what GCC's __builtin_cpu_supports would (clang 14
 * does not know "f16c", so the comparison is made in GCC builds). */
static void test_detect_isa(void) {
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__)
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
              __builtin_cpu_supports("f16c");
  bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  md_cpu_isa want = avx512 ? MD_CPU_ISA_AVX512 : avx2 ? MD_CPU_ISA_AVX2 : MD_CPU_ISA_PORTABLE;
  CHECK_MSG(md_cpu_detect_isa() == want, "detected %s, GCC says %s", md_cpu_isa_name(md_cpu_detect_isa()),
            md_cpu_isa_name(want));
#endif
  /* The rule on made-up CPUs. */
  md_cpu_facts f = {.avx = true, .avx2 = true, .fma = true, .f16c = true};
  CHECK(md_cpu_isa_for(&f) == MD_CPU_ISA_AVX2);
  f.avx512f = f.avx512bw = f.avx512vl = true;
  CHECK(md_cpu_isa_for(&f) == MD_CPU_ISA_AVX2); /* DQ missing */
  f.avx512dq = true;
  CHECK(md_cpu_isa_for(&f) == MD_CPU_ISA_AVX512);
  f.f16c = false;
  CHECK(md_cpu_isa_for(&f) == MD_CPU_ISA_PORTABLE);
  char words[160];
  CHECK(strcmp(md_cpu_facts_describe(&f, words, sizeof words),
               "avx avx2 fma avx512f avx512bw avx512vl avx512dq") == 0);
  md_cpu_facts none = {0};
  CHECK(strcmp(md_cpu_facts_describe(&none, words, sizeof words), "none") == 0);
  /* Names and paths. */
  md_cpu_kernels parsed;
  CHECK(md_cpu_kernels_parse("avx512", &parsed) && parsed == MD_CPU_KERNELS_AVX512);
  CHECK(md_cpu_kernels_parse("best", &parsed) && parsed == MD_CPU_KERNELS_BEST);
  CHECK(md_cpu_kernels_parse("portable", &parsed) && parsed == MD_CPU_KERNELS_PORTABLE);
  CHECK(!md_cpu_kernels_parse("AVX2", &parsed) && !md_cpu_kernels_parse("", &parsed));
  md_cpu_kernels paths[3];
  int n = md_cpu_kernel_paths(paths);
  CHECK(n == (int)md_cpu_detect_isa() + 1 && paths[0] == MD_CPU_KERNELS_PORTABLE);
  /* A path above this CPU's is refused, naming both. */
  if (md_cpu_detect_isa() != MD_CPU_ISA_AVX512) {
    md_cpu_options options = {.kernels = MD_CPU_KERNELS_AVX512};
    md_kernels *k = NULL;
    md_error err;
    CHECK(md_kernels_cpu_new(&options, &k, &err) == MD_E_DEVICE && k == NULL);
    CHECK_MSG(strstr(err.message, "avx512") != NULL, "%s", err.message);
  }
  md_cpu_options bad = {.kernels = (md_cpu_kernels)7};
  md_kernels *k = NULL;
  md_error err;
  CHECK(md_kernels_cpu_new(&bad, &k, &err) == MD_E_INVALID);
}

int main(void) {
  test_detect_isa();
  md_cpu_kernels paths[3];
  int n_paths = md_cpu_kernel_paths(paths);
  char words[160];
  md_cpu_facts facts = md_cpu_read_facts();
  printf("CPU features: %s; best instruction set here: %s\n",
         md_cpu_facts_describe(&facts, words, sizeof words), md_cpu_isa_name(md_cpu_detect_isa()));
  for (int i = 0; i < n_paths; i++) {
    md_cpu_isa isa = md_cpu_isa_of(paths[i]);
    test_matvec(isa);
    test_matvec_rows(isa);
    test_argmax(isa);
    test_matvec_shared(isa);
    test_softmax(isa);
    test_silu(isa);
    test_decode_products(isa);
    test_prefill_products(isa);
    test_backend(paths[i]);
    test_packed_logits(paths[i], false);
    test_packed_greedy(paths[i]);
  }
  test_backend(MD_CPU_KERNELS_BEST);
  if (facts.avx512_bf16) { /* --bf16-gemm's attention: P V in bf16, weights float32 */
    md_cpu_options options = {.threads = 2, .bf16_gemm = true};
    md_kernels *k = NULL;
    md_error err;
    CHECK(md_kernels_cpu_new(&options, &k, &err) == MD_OK);
    test_attention(k, 1e-5 + 1.0 / 256.0);
    md_kernels_free(k);
    test_packed_logits(MD_CPU_KERNELS_AVX512, true);
  }
  return md_test_finish("test_cpu_kernels");
}
