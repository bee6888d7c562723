/* The forward pass's speed against the machine's own limits. Run by
 * bench/inference_bench.sh and bench/llama_cpp_bench.sh, which print the
 * ratios; not a test.
 *
 *   inference_bench limits [--threads N]
 *       prints the compute peak (an FMA loop at the widest vector width
 *       this CPU runs, on every thread: the machine's limit, not a
 *       library's), the memory bandwidth (a STREAM-style triad, a read-only
 *       stream on every thread and one large f32 cblas_sgemv), and the
 *       cblas_sgemm rate on a prefill-sized
 *       product with the OpenBLAS core it ran on (the best BLAS kernel when
 *       the caller chose the core, as the scripts do); on a CPU with AVX-512
 *       BF16 also the BF16 dot-product peak (a vdpbf16ps loop, the limit of
 *       --bf16-gemm) and the back end's BF16 prompt product's rate on the
 *       same product
 *   inference_bench bandwidth [--threads N]
 *       the three bandwidth figures of `limits` alone (seconds, not a
 *       minute), for reading them again between runs
 *   inference_bench run CHECKPOINT PROMPT.i32 [--decode N] [--threads N]
 *                       [--capture-steps N] [--prefill-capture] [--warmup]
 *                       [--bf16-gemm]
 *       prefill of the prompt (raw little-endian int32 token ids; with
 *       --prefill-capture, capturing the attention every prompt token
 *       receives, as the collector does), then N greedy decode steps;
 *       prints times, sizes and peak RSS. Then the cost of the fused
 *       attention capture: N more decode steps (default the --decode count)
 *       that alternate capture off and capture on (mean over heads, all
 *       layers, the row read back through two buffers as the collector
 *       does), so that both see the same positions and the same machine
 *       noise; prints the time of each half. With --warmup, one untimed
 *       prefill of the same prompt runs first and the cache is emptied, as
 *       llama-bench does before it times: the first pass through a freshly
 *       mapped checkpoint pays the page faults of every weight page and
 *       every buffer, which a collector, running many prompts in one
 *       process, pays once. --bf16-gemm: the prompt's products of BF16
 *       weights with AVX-512 BF16 (memdecay-calibrate collect --bf16-gemm).
 *   inference_bench ops CHECKPOINT PROMPT.i32 [--decode N] [--threads N]
 *                       [--prefill-capture] [--bf16-gemm]
 *       where the time goes, operation by operation (op_profile.h): after
 *       an untimed warm-up prefill, the prompt and N decode steps (default
 *       256) with every back-end call timed; one table per phase, each
 *       kind of call (q/k/v, o, gate/up, down, attention, ...) with its
 *       seconds, its share, its GFLOP/s against the FMA peak (measured
 *       first; the prompt) or the GB/s of weights it reads (decode).
 *   inference_bench depth CHECKPOINT [--depths 0,1024,4096,16384]
 *                         [--steps N] [--threads N] [--warmup] [--paired]
 *       decode speed against context depth: for each depth (ascending) the
 *       cache is filled to it by prefilling random token ids (untimed), then
 *       N decode steps alternate capture off and on as above; prints each
 *       depth's times and the KV-cache bytes a step reads there. With
 *       --warmup, one untimed decode step runs first (then the cache is
 *       emptied), as llama-bench's warm-up generation. With --paired, a
 *       read stream (as in `bandwidth`) over as many bytes as the step's
 *       weights (at most 1 GiB) runs just before each step, and the
 *       medians over the steps of the step's rate (weights and KV cache
 *       read) over the stream's are printed (paired_off, paired_on) with
 *       the stream's (paired_read_gbs): decode against the memory's rate of
 *       that moment, where a host's speed moves within seconds.
 *   inference_bench attention [--keys 4096] [--heads 14] [--kv-heads 2]
 *                             [--head-dim 64] [--rounds 5] [--threads N]
 *       decode attention alone (one query row against a cache of --keys
 *       positions; Qwen2.5-0.5B's heads by default, 1.5B's are --heads 12
 *       --head-dim 128), over enough caches in turn (256 MiB) that each
 *       comes from memory as a decode step's do; the best of the rounds as
 *       GB/s of keys and values read, on the path the program runs
 *       (MEMDECAY_CPU_KERNELS=avx2 measures the AVX2 one).
 *
 * Output is "key value" lines for the script to read. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MD_BENCH_X86 1
#endif

#include "collector/model/qwen2_forward.h"
#include "collector/model/qwen2_model.h"
#include "kernels/device.h"
#include "bench/op_profile.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long peak_rss_kb(void) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

static float *filled(size_t n, float value) {
  float *p = malloc(n * sizeof(float));
  if (!p) {
    fprintf(stderr, "inference_bench: out of memory\n");
    exit(1);
  }
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) p[i] = value + (float)(i % 7) * 1e-3f;
  return p;
}

/* a = b + s c over arrays far larger than the caches; STREAM counts 3 arrays
 * of traffic per pass (J. McCalpin, STREAM benchmark). Best of 5. */
static double triad_gbs(int threads) {
  size_t n = (size_t)32 << 20; /* 128 MiB per array */
  float *a = filled(n, 0.0f), *b = filled(n, 1.0f), *c = filled(n, 2.0f);
  double best = 1e30;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = now();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = b[i] + 0.5f * c[i];
    double dt = now() - t0;
    if (dt < best) best = dt;
  }
  double gbs = 3.0 * (double)n * sizeof(float) / best / 1e9;
  if (a[n / 2] < 0) gbs = 0; /* keeps the stores alive */
  free(a);
  free(b);
  free(c);
  return gbs;
}

/* Reads only: every thread sums its share of a 512 MiB array in each of
 * the ways READ_PATTERNS lists, sixteen independent sums, the best pass
 * of all. A decode step reads its weights and writes almost nothing, so
 * this is its limit where the triad's (which also writes, and counts its
 * stores once where a CPU without streaming stores reads each line before
 * writing it) is lower: on an AMD Zen 5 our BF16 decode read its weights
 * 1.3-1.4x as fast as the triad and the sgemv of the same run.
 * Plain GCC vectors: the loads are what is measured, at any vector width. */
typedef float md_v16 __attribute__((vector_size(64)));

/* A way of reading: each thread's share cut into `streams` parts read
 * side by side, each with a software prefetch `ahead` floats on (0: the
 * hardware prefetchers alone). Which is fastest differs by CPU and moment
 * (on the Zen 5, two streams with a prefetch 2 KiB ahead, the way our GEMV
 * reads its rows, read about 1.4x as fast as one stream alone); a limit
 * must be the best of them. */
typedef struct read_pattern {
  int streams, ahead;
} read_pattern;

static const read_pattern READ_PATTERNS[] = {{1, 0}, {2, 0}, {4, 0}, {1, 512}, {2, 512}, {4, 512}};
enum { N_READ_PATTERNS = sizeof READ_PATTERNS / sizeof READ_PATTERNS[0] };

/* Where the read passes' sums go, so that their loads stay. */
static volatile float read_sink;

/* One pass over p[0 .. n-1] on `threads` threads, read as `how` says;
 * seconds. */
static double read_pass_s(const float *p, size_t n, int threads, read_pattern how) {
  float sum_all = 0.0f;
  double t0 = now();
#pragma omp parallel num_threads(threads) reduction(+ : sum_all)
  {
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
    size_t lo = n * (size_t)t / (size_t)nt, hi = n * (size_t)(t + 1) / (size_t)nt;
    size_t part = (hi - lo) / (size_t)how.streams / 32 * 32;
    md_v16 acc[16] = {{0}};
    for (size_t i = 0; i < part; i += 32)
      for (int s = 0; s < how.streams; s++) {
        const float *x = p + lo + (size_t)s * part + i;
        if (how.ahead) { /* prefetches do not fault past the end */
          __builtin_prefetch(x + how.ahead, 0, 3);
          __builtin_prefetch(x + how.ahead + 16, 0, 3);
        }
        md_v16 v0, v1;
        memcpy(&v0, x, sizeof v0);
        memcpy(&v1, x + 16, sizeof v1);
        acc[4 * s + (int)(i / 32 % 2) * 2] += v0;
        acc[4 * s + (int)(i / 32 % 2) * 2 + 1] += v1;
      }
    md_v16 sum = acc[0];
    for (int j = 1; j < 16; j++) sum += acc[j];
    for (int j = 0; j < 16; j++) sum_all += sum[j];
  }
  double dt = now() - t0;
  read_sink = sum_all;
  return dt;
}

/* The fastest of READ_PATTERNS over p[0 .. n-1], `passes` passes of each
 * in turn; its index, its best seconds in *best_s. */
static int fastest_read(const float *p, size_t n, int threads, int passes, double *best_s) {
  int fastest = 0;
  *best_s = 1e30;
  for (int rep = 0; rep < passes * N_READ_PATTERNS; rep++) {
    double dt = read_pass_s(p, n, threads, READ_PATTERNS[rep % N_READ_PATTERNS]);
    if (dt < *best_s) {
      *best_s = dt;
      fastest = rep % N_READ_PATTERNS;
    }
  }
  return fastest;
}

static double read_gbs(int threads) {
  size_t n = (size_t)128 << 20; /* floats */
  float *p = filled(n, 1.0f);
  double best;
  fastest_read(p, n, threads, 2, &best);
  double gbs = (double)n * sizeof(float) / best / 1e9;
  free(p);
  return gbs;
}

/* One f32 matrix-vector product over a 256 MiB matrix: the decode step's
 * access pattern. Best of 5. */
static double sgemv_gbs(void) {
  int rows = 8192, cols = 8192;
  float *w = filled((size_t)rows * cols, 0.01f), *x = filled((size_t)cols, 1.0f), *y = filled((size_t)rows, 0.0f);
  double best = 1e30;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = now();
    cblas_sgemv(CblasRowMajor, CblasNoTrans, rows, cols, 1.0f, w, cols, x, 1, 0.0f, y, 1);
    double dt = now() - t0;
    if (dt < best) best = dt;
  }
  free(w);
  free(x);
  free(y);
  return (double)rows * cols * sizeof(float) / best / 1e9;
}

/* The prefill-sized product of the limits: C [m, n] = A [m, k] B^T with
 * B [n, k], Qwen2.5-0.5B's gate projection over a 1,700-token prompt. */
enum { PRODUCT_M = 1700, PRODUCT_N = 4864, PRODUCT_K = 896 };

/* That product by cblas_sgemm. Best of 3. */
static double sgemm_gflops(void) {
  int m = PRODUCT_M, n = PRODUCT_N, k = PRODUCT_K;
  float *a = filled((size_t)m * k, 0.5f), *b = filled((size_t)n * k, 0.25f), *c = filled((size_t)m * n, 0.0f);
  double best = 1e30;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
    double dt = now() - t0;
    if (dt < best) best = dt;
  }
  free(a);
  free(b);
  free(c);
  return 2.0 * m * n * k / best / 1e9;
}

/* y = x W^T by the CPU back end's matmul, as the forward pass calls it: W
 * [rows, cols] BF16 (element i = bits(i)), x [n, cols] of 0.5; best of
 * `reps`, in seconds, or -1 when the back end cannot (said on stderr).
 * With `bf16_gemm` the back end is opened as --bf16-gemm opens it. */
static double bf16_product_s(int threads, bool bf16_gemm, int64_t n, int64_t rows, int64_t cols,
                             uint16_t (*bits)(int64_t), int reps) {
  md_error err = {0};
  md_kernels *k = NULL;
  md_device_options device = {.device = "cpu", .threads = threads, .bf16_gemm = bf16_gemm};
  if (md_device_open(&device, &k, &err) != MD_OK) {
    fprintf(stderr, "inference_bench: %s\n", err.message);
    return -1;
  }
  uint16_t *w = malloc((size_t)rows * (size_t)cols * sizeof *w);
  float *x = filled((size_t)(n * cols), 0.5f);
  md_kweight *weight = NULL;
  md_kbuf *xb = NULL, *yb = NULL;
  double best = -1;
  if (w && x) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < rows * cols; i++) w[i] = bits(i);
    md_tensor t = {.name = "bench", .dtype = MD_DTYPE_BF16, .ndim = 2, .shape = {rows, cols},
                   .data = w, .nbytes = (size_t)rows * (size_t)cols * sizeof *w};
    if (k->ops->weight_new(k, &t, &weight, &err) == MD_OK &&
        k->ops->buf_new(k, (size_t)(n * cols), &xb, &err) == MD_OK &&
        k->ops->buf_write(k, xb, 0, (size_t)(n * cols), x, &err) == MD_OK &&
        k->ops->buf_new(k, (size_t)(n * rows), &yb, &err) == MD_OK) {
      best = 1e30;
      for (int r = 0; r < reps && best > 0; r++) {
        double t0 = now();
        k->ops->matmul(k, yb, xb, weight, NULL, n);
        if (k->ops->sync(k, &err) != MD_OK) best = -1;
        double dt = now() - t0;
        if (best > 0 && dt < best) best = dt;
      }
    }
    if (best < 0) fprintf(stderr, "inference_bench: %s\n", err.message[0] ? err.message : "failed");
  } else {
    fprintf(stderr, "inference_bench: out of memory\n");
  }
  if (yb) k->ops->buf_free(k, yb);
  if (xb) k->ops->buf_free(k, xb);
  if (weight) k->ops->weight_free(k, weight);
  md_kernels_free(k);
  free(w);
  free(x);
  return best;
}

static uint16_t bf16_varied(int64_t i) { return (uint16_t)(0x3c00 + (i % 64)); }
static uint16_t bf16_quarter(int64_t i) { (void)i; return 0x3e80; /* 0.25 */ }

/* The decode row's BF16 matrix-vector product over a 256 MiB matrix (not a
 * limit: a diagnostic of the decode kernel alone, next to sgemv). Best of 5. */
static double bf16_matvec_gbs(int threads) {
  int64_t rows = 16384, cols = 8192;
  double s = bf16_product_s(threads, false, 1, rows, cols, bf16_varied, 5);
  return s > 0 ? (double)rows * cols * sizeof(uint16_t) / s / 1e9 : 0.0;
}

/* ---- the compute peak -------------------------------------------------------- */

/* Twelve independent chains of acc = acc * a + b: enough to cover the FMA
 * latency on every port (4 cycles x 2 ports needs 8; 12 leaves room), and
 * 12 accumulators plus the two operands fit the 16 AVX2 registers, so
 * nothing spills (named variables, not an array: an array stays in memory
 * and the loop then measures store forwarding). a < 1 keeps the values
 * finite. Returns the FLOPs done. */
enum { ACCUMULATORS = 12 };

#define FMA_STEP(fmadd) \
  x0 = fmadd(x0, a, b); x1 = fmadd(x1, a, b); x2 = fmadd(x2, a, b); x3 = fmadd(x3, a, b); \
  x4 = fmadd(x4, a, b); x5 = fmadd(x5, a, b); x6 = fmadd(x6, a, b); x7 = fmadd(x7, a, b); \
  x8 = fmadd(x8, a, b); x9 = fmadd(x9, a, b); x10 = fmadd(x10, a, b); x11 = fmadd(x11, a, b);

#define FMA_BODY(vec, set1, fmadd, add, lanes)                                          \
  vec x0 = set1(1.00f), x1 = set1(1.01f), x2 = set1(1.02f), x3 = set1(1.03f);             \
  vec x4 = set1(1.04f), x5 = set1(1.05f), x6 = set1(1.06f), x7 = set1(1.07f);             \
  vec x8 = set1(1.08f), x9 = set1(1.09f), x10 = set1(1.10f), x11 = set1(1.11f);           \
  vec a = set1(0.999999f), b = set1(1e-6f);                                             \
  for (int64_t i = 0; i < iters; i++) {                                                 \
    FMA_STEP(fmadd)                                                                     \
  }                                                                                     \
  vec sum = add(add(add(x0, x1), add(x2, x3)), add(add(x4, x5), add(x6, x7)));          \
  sum = add(sum, add(add(x8, x9), add(x10, x11)));                                      \
  float out[lanes];                                                                     \
  memcpy(out, &sum, sizeof out);                                                        \
  *sink = out[0];                                                                       \
  return 2.0 * (lanes) * ACCUMULATORS * (double)iters;

#ifdef MD_BENCH_X86
/* The BF16 dot-product peak (vdpbf16ps: 16 lanes, two products and two
 * additions each, 64 flops an instruction), the limit of --bf16-gemm's
 * products, by the same twelve chains. */
__attribute__((target("avx512f,avx512bf16"))) static double dot_bf16(int64_t iters,
                                                                    volatile float *sink) {
#define DPBF16(acc, x, y) _mm512_dpbf16_ps(acc, (__m512bh)(x), (__m512bh)(y))
  __m512 x0 = _mm512_set1_ps(1.00f), x1 = _mm512_set1_ps(1.01f), x2 = _mm512_set1_ps(1.02f);
  __m512 x3 = _mm512_set1_ps(1.03f), x4 = _mm512_set1_ps(1.04f), x5 = _mm512_set1_ps(1.05f);
  __m512 x6 = _mm512_set1_ps(1.06f), x7 = _mm512_set1_ps(1.07f), x8 = _mm512_set1_ps(1.08f);
  __m512 x9 = _mm512_set1_ps(1.09f), x10 = _mm512_set1_ps(1.10f), x11 = _mm512_set1_ps(1.11f);
  /* bf16 pairs (1e-3, 1e-3): the sums grow slowly and stay finite. */
  __m512i a = _mm512_set1_epi32(0x3a833a83), b = _mm512_set1_epi32(0x3a833a83);
  for (int64_t i = 0; i < iters; i++) {
    x0 = DPBF16(x0, a, b); x1 = DPBF16(x1, a, b); x2 = DPBF16(x2, a, b); x3 = DPBF16(x3, a, b);
    x4 = DPBF16(x4, a, b); x5 = DPBF16(x5, a, b); x6 = DPBF16(x6, a, b); x7 = DPBF16(x7, a, b);
    x8 = DPBF16(x8, a, b); x9 = DPBF16(x9, a, b); x10 = DPBF16(x10, a, b); x11 = DPBF16(x11, a, b);
  }
#undef DPBF16
  __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(x0, x1), _mm512_add_ps(x2, x3)),
                             _mm512_add_ps(_mm512_add_ps(x4, x5), _mm512_add_ps(x6, x7)));
  sum = _mm512_add_ps(sum, _mm512_add_ps(_mm512_add_ps(x8, x9), _mm512_add_ps(x10, x11)));
  *sink = _mm512_reduce_add_ps(sum);
  return 64.0 * ACCUMULATORS * (double)iters;
}

__attribute__((target("avx512f"))) static double fma_avx512(int64_t iters, volatile float *sink) {
  FMA_BODY(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, 16)
}

__attribute__((target("avx2,fma"))) static double fma_avx2(int64_t iters, volatile float *sink) {
  FMA_BODY(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, 8)
}
#endif

static float scalar_set1(float x) { return x; }
static float scalar_add(float x, float y) { return x + y; }

static double fma_scalar(int64_t iters, volatile float *sink) {
  FMA_BODY(float, scalar_set1, fmaf, scalar_add, 1)
}

typedef double (*fma_loop)(int64_t iters, volatile float *sink);

/* The widest FMA this CPU runs, by CPUID (through the compiler's
 * __builtin_cpu_supports). On a CPU whose AVX-512 units are double-pumped
 * 256-bit ones (AMD Zen 4) the AVX-512 and AVX2 peaks are equal. */
static fma_loop widest_fma(const char **name) {
#ifdef MD_BENCH_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    *name = "avx512";
    return fma_avx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    *name = "avx2+fma";
    return fma_avx2;
  }
#endif
  *name = "scalar";
  return fma_scalar;
}

/* GFLOP/s of `loop` on `threads` threads at once, best of 5. */
static double loop_gflops(int threads, fma_loop loop) {
  volatile float sink[256];
  int64_t iters = 20000000; /* about 0.1 s per thread at 8 lanes, 3 GHz */
  double best = 0.0;
  for (int rep = 0; rep < 5; rep++) {
    double flops = 0.0, t0 = now();
#pragma omp parallel num_threads(threads) reduction(+ : flops)
    flops += loop(iters, &sink[omp_get_thread_num() % 256]);
    double rate = flops / (now() - t0) / 1e9;
    if (rate > best) best = rate;
  }
  return best;
}

/* FP32 GFLOP/s of the FMA loop on `threads` threads at once, best of 5. */
static double fma_peak_gflops(int threads, const char **isa) {
  return loop_gflops(threads, widest_fma(isa));
}

/* The prefill-sized product of sgemm_gflops by the back end's BF16 prompt
 * products (--bf16-gemm), best of 3; 0 on a CPU without AVX-512 BF16. */
static double bf16_gemm_gflops(int threads) {
  int64_t m = PRODUCT_M, n = PRODUCT_N, k = PRODUCT_K;
  double s = bf16_product_s(threads, true, m, n, k, bf16_quarter, 3);
  return s > 0 ? 2.0 * (double)(m * n * k) / s / 1e9 : 0.0;
}

/* Whether this CPU runs --bf16-gemm (the back end refuses it otherwise). */
static bool bf16_gemm_runs(int threads) {
  md_error err = {0};
  md_kernels *k = NULL;
  md_device_options device = {.device = "cpu", .threads = threads, .bf16_gemm = true};
  if (md_device_open(&device, &k, &err) != MD_OK) return false;
  md_kernels_free(k);
  return true;
}

/* The memory limits alone (a few seconds): the scripts read them again
 * beside each decode measurement, since a shared machine's bandwidth moves
 * within minutes and a decode run may catch a faster minute than the
 * start and the end did. */
static void print_bandwidth(int threads) {
  printf("triad_gbs %.3f\n", triad_gbs(threads));
  printf("read_gbs %.3f\n", read_gbs(threads));
  printf("sgemv_gbs %.3f\n", sgemv_gbs());
}

static int cmd_bandwidth(int threads) {
  openblas_set_num_threads(threads);
  printf("threads %d\n", threads);
  print_bandwidth(threads);
  return 0;
}

static int cmd_limits(int threads) {
  openblas_set_num_threads(threads);
  printf("threads %d\n", threads);
  const char *fma_isa;
  double peak = fma_peak_gflops(threads, &fma_isa);
  printf("fma_isa %s\n", fma_isa);
  printf("fma_peak_gflops %.3f\n", peak);
  printf("blas_core %s\n", openblas_get_corename());
  print_bandwidth(threads);
  printf("sgemm_gflops %.3f\n", sgemm_gflops());
  printf("bf16_matvec_gbs %.3f\n", bf16_matvec_gbs(threads));
#ifdef MD_BENCH_X86
  if (bf16_gemm_runs(threads)) {
    printf("bf16_dot_peak_gflops %.3f\n", loop_gflops(threads, dot_bf16));
    printf("bf16_gemm_gflops %.3f\n", bf16_gemm_gflops(threads));
  }
#endif
  return 0;
}

/* The prompt's token ids (raw little-endian int32) and their count, at
 * least one; NULL, said on stderr, when the file cannot be read. */
static int32_t *read_prompt(const char *path, int64_t *n) {
  FILE *fp = fopen(path, "rb");
  int32_t *tokens = NULL;
  if (fp && fseek(fp, 0, SEEK_END) == 0) {
    long bytes = ftell(fp);
    *n = bytes / 4;
    if (*n >= 1 && fseek(fp, 0, SEEK_SET) == 0 && (tokens = malloc((size_t)*n * 4)) &&
        fread(tokens, 4, (size_t)*n, fp) != (size_t)*n) {
      free(tokens);
      tokens = NULL;
    }
  }
  if (fp) fclose(fp);
  if (!tokens) fprintf(stderr, "inference_bench: cannot read %s\n", path);
  return tokens;
}

static int fail(const md_error *err) {
  fprintf(stderr, "inference_bench: %s\n", err->message);
  return 1;
}

/* Decode steps alternating capture off (even) and on (odd), as the collector
 * runs them on: the capture buffer zeroed, the row read back through
 * read_start / read_finish. Adds each half's total and fastest step. */
typedef struct capture_times {
  double off_s, on_s, off_best_s, on_best_s;
  int64_t steps;
  /* With a paired read stream (depth --paired): the medians over the steps
   * of each step's bytes per second over the stream's just before it, and
   * of the stream's GB/s. */
  double paired_off, paired_on, paired_read_gbs;
} capture_times;

/* A read stream run before every decode step, so that each step's rate
 * can be set against the memory's at that moment (the machine's speed can
 * move within seconds on a shared host, so a limit read minutes apart
 * says little about one step). */
typedef struct paired_stream {
  const float *data; /* NULL: none */
  size_t n;          /* floats, about a step's reads */
  int threads;
  read_pattern how;  /* the fastest way on this machine (fastest_read) */
  double step_bytes; /* what a decode step reads: weights and KV cache */
} paired_stream;

enum { PAIRED_STREAM_MAX_BYTES = 1 << 30 };

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of v[0 .. n-1] (sorted in place); 0 for n = 0. */
static double median(double *v, int64_t n) {
  if (n == 0) return 0.0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int capture_cost(md_qwen2_forward *fw, md_kernels *k, int layers, int32_t *token,
                        int64_t steps, const paired_stream *paired, capture_times *times) {
  md_error err;
  int64_t capacity = md_qwen2_capacity(fw);
  md_kbuf *received[2];
  float *row = malloc((size_t)capacity * sizeof(float));
  /* per step: its rate over the stream's, capture off and on; the
   * stream's GB/s */
  double *ratio[2] = {calloc((size_t)steps, sizeof(double)), calloc((size_t)steps, sizeof(double))};
  double *stream_gbs = calloc((size_t)steps, sizeof(double));
  int64_t n_ratio[2] = {0, 0};
  if (!ratio[0] || !ratio[1] || !stream_gbs) {
    fprintf(stderr, "inference_bench: out of memory\n");
    exit(1);
  }
  if (!row || k->ops->buf_new(k, (size_t)capacity, &received[0], &err) != MD_OK ||
      k->ops->buf_new(k, (size_t)capacity, &received[1], &err) != MD_OK)
    return fail(&err);
  *times = (capture_times){.off_best_s = 1e30, .on_best_s = 1e30, .steps = steps};
  for (int64_t s = 0; s < steps; s++) {
    int on = (int)(s & 1), slot = (int)((s >> 1) & 1);
    size_t visible = (size_t)md_qwen2_position(fw) + 1;
    double stream_s =
        paired->data ? read_pass_s(paired->data, paired->n, paired->threads, paired->how) : 0.0;
    double t0 = now();
    if (on) k->ops->buf_zero(k, received[slot], 0, visible);
    md_qwen2_capture capture = {.received = on ? received[slot] : NULL, .layer_begin = 0,
                                .layer_end = layers, .heads = MD_CAPTURE_HEADS_MEAN};
    if (md_qwen2_set_capture(fw, &capture, &err) != MD_OK ||
        md_qwen2_decode(fw, *token, &err) != MD_OK ||
        (on && k->ops->buf_read_start(k, received[slot], 0, visible, row, slot, &err) != MD_OK) ||
        (on && k->ops->buf_read_finish(k, slot, &err) != MD_OK) ||
        md_qwen2_greedy(fw, token, &err) != MD_OK)
      return fail(&err);
    double dt = now() - t0;
    double *total = on ? &times->on_s : &times->off_s, *best = on ? &times->on_best_s : &times->off_best_s;
    *total += dt;
    if (dt < *best) *best = dt;
    if (paired->data) {
      double stream_bps = (double)paired->n * sizeof(float) / stream_s;
      ratio[on][n_ratio[on]++] = paired->step_bytes / dt / stream_bps;
      stream_gbs[s] = stream_bps / 1e9;
    }
  }
  if (paired->data) {
    times->paired_off = median(ratio[0], n_ratio[0]);
    times->paired_on = median(ratio[1], n_ratio[1]);
    times->paired_read_gbs = median(stream_gbs, steps);
  }
  free(ratio[0]);
  free(ratio[1]);
  free(stream_gbs);
  md_qwen2_set_capture(fw, NULL, &err);
  k->ops->buf_free(k, received[0]);
  k->ops->buf_free(k, received[1]);
  free(row);
  return 0;
}

/* The parameters of the layers' seven matrices. */
static int64_t layer_params(const md_qwen2_model *model) {
  const md_qwen2_config *c = md_qwen2_model_config(model);
  const md_qwen2_weights *w = md_qwen2_model_weights(model);
  int64_t params = 0;
  for (int l = 0; l < c->num_hidden_layers; l++) {
    const md_qwen2_layer *L = &w->layers[l];
    const md_tensor *m[] = {&L->q_proj, &L->k_proj, &L->v_proj, &L->o_proj, &L->gate_proj, &L->up_proj, &L->down_proj};
    for (int i = 0; i < 7; i++) params += m[i]->shape[0] * m[i]->shape[1];
  }
  return params;
}

/* Bytes a decode step must read besides the KV cache: every layer matrix
 * and the whole LM head (tied: the embedding), in the file dtype. */
static int64_t decode_read_bytes(const md_qwen2_model *model) {
  const md_qwen2_weights *w = md_qwen2_model_weights(model);
  return layer_params(model) * (int64_t)md_dtype_size(w->dtype) + (int64_t)w->lm_head.nbytes;
}

/* The checkpoint, the CPU back end and a forward pass whose cache holds
 * `capacity` tokens: what every measuring command runs. */
typedef struct engine {
  md_qwen2_model *model;
  md_kernels *k;
  md_qwen2_forward *fw;
} engine;

/* What the back end records about itself (its facts op, as run.json has
 * them); "-" for what it does not say. */
static md_kernel_facts facts_of(const md_kernels *k) {
  md_kernel_facts facts = {0};
  if (k->ops->facts) k->ops->facts(k, &facts);
  if (!facts.cpu_kernels) facts.cpu_kernels = "-";
  if (!facts.prompt_products) facts.prompt_products = "-";
  if (!facts.prompt_gemm) facts.prompt_gemm = "-";
  return facts;
}

/* --bf16-gemm: the CPU back end's BF16 prompt products (md_device_options). */
static bool bf16_gemm;

/* With `profiled`, the back end is wrapped in an op profile (op_profile.h)
 * and e->k is the wrapper. */
static int engine_open(engine *e, const char *dir, int threads, int64_t capacity, bool profiled) {
  md_error err;
  *e = (engine){0};
  if (md_qwen2_model_open(dir, &e->model, &err) != MD_OK) return fail(&err);
  md_qwen2_forward_options options = {.capacity = capacity};
  /* Opened as the program's commands open it, MEMDECAY_CPU_KERNELS included. */
  md_device_options device = {.device = "cpu", .threads = threads, .bf16_gemm = bf16_gemm};
  if (md_device_open(&device, &e->k, &err) != MD_OK) return fail(&err);
  if (profiled && !(e->k = op_profile_wrap(e->k))) {
    fprintf(stderr, "inference_bench: out of memory\n");
    return 1;
  }
  if (md_qwen2_forward_new(md_qwen2_model_config(e->model), md_qwen2_model_weights(e->model), e->k,
                           &options, &e->fw, &err) != MD_OK)
    return fail(&err);
  return 0;
}

static void engine_close(engine *e) {
  md_qwen2_forward_free(e->fw);
  md_kernels_free(e->k);
  md_qwen2_model_close(e->model);
}

/* The KV cache a token takes: float32 keys and values of every layer's KV heads. */
static int64_t kv_bytes_per_token(const md_qwen2_config *c) {
  return (int64_t)c->num_hidden_layers * 2 * c->num_key_value_heads * c->head_dim * (int64_t)sizeof(float);
}

/* The capture on for the prompt: the prefill also sums the attention every
 * prompt token (n of them) receives into *received, as the collector's
 * prefill does. */
static int capture_prompt(engine *e, int64_t n, md_kbuf **received) {
  md_error err;
  md_kernels *k = e->k;
  const md_qwen2_config *c = md_qwen2_model_config(e->model);
  if (k->ops->buf_new(k, (size_t)md_qwen2_capacity(e->fw), received, &err) != MD_OK)
    return fail(&err);
  k->ops->buf_zero(k, *received, 0, (size_t)n);
  md_qwen2_capture capture = {.received = *received, .layer_begin = 0,
                              .layer_end = c->num_hidden_layers, .heads = MD_CAPTURE_HEADS_MEAN};
  if (md_qwen2_set_capture(e->fw, &capture, &err) != MD_OK) return fail(&err);
  return 0;
}

static int cmd_run(const char *dir, const char *prompt_path, int64_t decode_steps, int threads,
                   int64_t capture_steps, bool prefill_capture, bool warmup) {
  md_error err;
  int64_t n = 0;
  int32_t *prompt = read_prompt(prompt_path, &n);
  if (!prompt) return 1;
  engine e;
  if (engine_open(&e, dir, threads, n + decode_steps + capture_steps, false)) return 1;
  md_kernels *k = e.k;
  md_qwen2_forward *fw = e.fw;
  const md_qwen2_config *c = md_qwen2_model_config(e.model);
  const md_qwen2_weights *w = md_qwen2_model_weights(e.model);

  md_kbuf *received = NULL;
  if (prefill_capture && capture_prompt(&e, n, &received)) return 1;
  if (warmup) {
    if (md_qwen2_prefill(fw, prompt, n, NULL, &err) != MD_OK) return fail(&err);
    md_qwen2_reset(fw);
    if (received) k->ops->buf_zero(k, received, 0, (size_t)n);
  }
  double t0 = now();
  if (md_qwen2_prefill(fw, prompt, n, NULL, &err) != MD_OK) return fail(&err);
  double prefill_s = now() - t0;
  if (received) {
    md_qwen2_set_capture(fw, NULL, &err);
    k->ops->buf_free(k, received);
  }
  int32_t token;
  if (md_qwen2_greedy(fw, &token, &err) != MD_OK) return fail(&err);
  /* The fastest single step as well as the total: on a shared machine the
   * total includes other processes' bursts, the best step much less so (the
   * bandwidth limits are best-of-N figures too). */
  double decode_s = 0.0, best_step_s = 1e30;
  for (int64_t s = 0; s < decode_steps; s++) {
    t0 = now();
    if (md_qwen2_decode(fw, token, &err) != MD_OK || md_qwen2_greedy(fw, &token, &err) != MD_OK)
      return fail(&err);
    double step = now() - t0;
    decode_s += step;
    if (step < best_step_s) best_step_s = step;
  }

  capture_times capture = {0};
  const paired_stream no_stream = {0};
  if (capture_steps > 0 &&
      capture_cost(fw, k, c->num_hidden_layers, &token, capture_steps, &no_stream, &capture))
    return 1;

  md_kernel_facts facts = facts_of(k);
  printf("isa %s\n", facts.cpu_kernels);
  printf("prompt_products %s\n", facts.prompt_products);
  printf("prompt_gemm %s\n", facts.prompt_gemm);
  printf("threads %d\n", threads);
  printf("dtype %s\n", md_dtype_name(w->dtype));
  printf("prompt_tokens %lld\n", (long long)n);
  printf("prefill_capture %d\n", prefill_capture ? 1 : 0);
  printf("decode_steps %lld\n", (long long)decode_steps);
  printf("prefill_s %.4f\n", prefill_s);
  printf("decode_s %.4f\n", decode_s);
  printf("decode_best_step_s %.6f\n", decode_steps > 0 ? best_step_s : 0.0);
  printf("weight_bytes %llu\n", (unsigned long long)w->weight_bytes);
  printf("decode_read_bytes %lld\n", (long long)decode_read_bytes(e.model));
  printf("layer_params %lld\n", (long long)layer_params(e.model));
  printf("attn_flops_prefill %.6g\n", 2.0 * (double)n * (double)n * c->head_dim *
                                          c->num_attention_heads * c->num_hidden_layers);
  printf("kv_bytes %lld\n", (long long)(kv_bytes_per_token(c) * (n + decode_steps)));
  printf("peak_rss_kb %ld\n", peak_rss_kb());
  printf("capture_steps %lld\n", (long long)capture.steps);
  printf("capture_off_s %.4f\n", capture.off_s);
  printf("capture_on_s %.4f\n", capture.on_s);
  printf("capture_off_best_s %.6f\n", capture.steps ? capture.off_best_s : 0.0);
  printf("capture_on_best_s %.6f\n", capture.steps ? capture.on_best_s : 0.0);
  printf("last_token %d\n", token);
  engine_close(&e);
  free(prompt);
  return 0;
}

/* Where the time goes, op by op (op_profile.h): an untimed warm-up prefill,
 * then the prompt (the capture on with --prefill-capture) and N decode
 * steps, each call timed; prints one table per phase. The FMA peak is
 * measured first, on the same threads, for the prompt's fractions. */
static int cmd_ops(const char *dir, const char *prompt_path, int64_t decode_steps, int threads,
                   bool prefill_capture) {
  md_error err;
  int64_t n = 0;
  int32_t *prompt = read_prompt(prompt_path, &n);
  if (!prompt) return 1;
  const char *fma_isa;
  double peak = fma_peak_gflops(threads, &fma_isa);
  engine e;
  if (engine_open(&e, dir, threads, n + decode_steps + 1, true)) return 1;
  md_kernels *k = e.k;
  const md_qwen2_weights *w = md_qwen2_model_weights(e.model);
  md_kbuf *received = NULL;
  if (prefill_capture && capture_prompt(&e, n, &received)) return 1;
  if (md_qwen2_prefill(e.fw, prompt, n, NULL, &err) != MD_OK) return fail(&err);
  md_qwen2_reset(e.fw);
  if (received) k->ops->buf_zero(k, received, 0, (size_t)n);
  op_profile_reset(k);

  op_profile_set_phase(k, OP_PHASE_PROMPT);
  double t0 = now();
  if (md_qwen2_prefill(e.fw, prompt, n, NULL, &err) != MD_OK) return fail(&err);
  double prompt_s = now() - t0;
  if (received) {
    md_qwen2_set_capture(e.fw, NULL, &err);
    k->ops->buf_free(k, received);
  }
  int32_t token;
  if (md_qwen2_greedy(e.fw, &token, &err) != MD_OK) return fail(&err);
  op_profile_set_phase(k, OP_PHASE_DECODE);
  t0 = now();
  for (int64_t s = 0; s < decode_steps; s++)
    if (md_qwen2_decode(e.fw, token, &err) != MD_OK || md_qwen2_greedy(e.fw, &token, &err) != MD_OK)
      return fail(&err);
  double decode_s = now() - t0;

  printf("kernels %s; prompt gemm %s; threads %d; dtype %s; FMA peak %.1f GFLOP/s (%s)\n",
         facts_of(k).cpu_kernels, facts_of(k).prompt_gemm, threads,
         md_dtype_name(w->dtype), peak, fma_isa);
  printf("prompt of %lld tokens, capture %s: %.4f s, %.1f tok/s\n", (long long)n,
         prefill_capture ? "on" : "off", prompt_s, (double)n / prompt_s);
  op_profile_print(k, stdout, OP_PHASE_PROMPT, prompt_s, peak);
  if (decode_steps > 0) {
    printf("%lld decode steps after it, capture off: %.4f s, %.2f tok/s\n",
           (long long)decode_steps, decode_s, (double)decode_steps / decode_s);
    op_profile_print(k, stdout, OP_PHASE_DECODE, decode_s, peak);
  }
  engine_close(&e);
  free(prompt);
  return 0;
}

/* A fixed 64-bit LCG (Knuth's MMIX constants) for filler data whose
 * values do not matter to the speed: the next state. */
static uint64_t lcg_next(uint64_t *state) {
  *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
  return *state;
}

/* Token ids for filling the cache: the LCG over the vocabulary (only the
 * cache length matters to the speed). */
static void random_tokens(int32_t *out, int64_t n, int vocab, uint64_t *state) {
  for (int64_t i = 0; i < n; i++) out[i] = (int32_t)((lcg_next(state) >> 33) % (uint64_t)vocab);
}

static int cmd_depth(const char *dir, const char *depth_list, int64_t steps, int threads,
                     bool warmup, bool paired) {
  int64_t depths[16];
  int n_depths = 0;
  for (const char *p = depth_list; *p && n_depths < 16;) {
    char *end;
    long long d = strtoll(p, &end, 10);
    if (end == p || d < 0 || (n_depths > 0 && d < depths[n_depths - 1])) {
      fprintf(stderr, "inference_bench: --depths must be ascending integers >= 0: %s\n", depth_list);
      return 2;
    }
    depths[n_depths++] = d;
    p = *end == ',' ? end + 1 : end;
  }
  md_error err;
  /* The steps measured at one depth stay in the cache: the next depth is
   * reached from there. */
  engine e;
  if (engine_open(&e, dir, threads, depths[n_depths - 1] + steps * n_depths + 1, false)) return 1;
  md_kernels *k = e.k;
  md_qwen2_forward *fw = e.fw;
  const md_qwen2_config *c = md_qwen2_model_config(e.model);
  enum { CHUNK = 512 };
  int32_t chunk[CHUNK];
  uint64_t state = 2024;
  int32_t token = 1;
  printf("isa %s\n", facts_of(k).cpu_kernels);
  printf("prompt_products %s\n", facts_of(k).prompt_products);
  printf("threads %d\n", threads);
  printf("kv_bytes_per_token %lld\n", (long long)kv_bytes_per_token(c));
  if (warmup) {
    if (md_qwen2_decode(fw, token, &err) != MD_OK) return fail(&err);
    md_qwen2_reset(fw);
  }
  /* --paired: a stream of as many bytes as a step's weights, at most
   * PAIRED_STREAM_MAX_BYTES (a rate over 1 GiB is as good a reading as one
   * over more, and a larger model's copy would double its memory) */
  int64_t weights_read = decode_read_bytes(e.model);
  paired_stream stream = {0};
  float *stream_data = NULL;
  if (paired) {
    size_t bytes = (size_t)weights_read;
    if (bytes > PAIRED_STREAM_MAX_BYTES) bytes = PAIRED_STREAM_MAX_BYTES;
    stream.n = bytes / sizeof(float) / 64 * 64;
    stream.data = stream_data = filled(stream.n, 1.0f);
    stream.threads = threads;
    double best_s;
    stream.how = READ_PATTERNS[fastest_read(stream.data, stream.n, threads, 2, &best_s)];
    printf("paired_streams %d\npaired_ahead_floats %d\n", stream.how.streams, stream.how.ahead);
  }
  for (int i = 0; i < n_depths; i++) {
    double t0 = now();
    while (md_qwen2_position(fw) < depths[i]) {
      int64_t n = depths[i] - md_qwen2_position(fw);
      if (n > CHUNK) n = CHUNK;
      random_tokens(chunk, n, c->vocab_size, &state);
      if (md_qwen2_prefill(fw, chunk, n, NULL, &err) != MD_OK ||
          md_qwen2_greedy(fw, &token, &err) != MD_OK)
        return fail(&err);
    }
    double fill_s = now() - t0;
    int64_t at = md_qwen2_position(fw);
    fprintf(stderr, "depth %lld: cache filled in %.1f s, %lld decode steps ...\n", (long long)at,
            fill_s, (long long)steps);
    /* The steps ran at depths at .. at + steps - 1: a step reads the cache of
     * its mean depth. */
    double mean_depth = (double)at + (double)(steps - 1) / 2.0;
    double kv_read = mean_depth * (double)kv_bytes_per_token(c);
    stream.step_bytes = (double)weights_read + kv_read;
    capture_times times;
    if (capture_cost(fw, k, c->num_hidden_layers, &token, steps, &stream, &times)) return 1;
    printf("depth %lld off_s %.6f on_s %.6f off_best_s %.6f on_best_s %.6f steps %lld "
           "kv_read_bytes %.0f",
           (long long)depths[i], times.off_s, times.on_s, times.off_best_s, times.on_best_s,
           (long long)steps, kv_read);
    if (paired)
      printf(" paired_off %.4f paired_on %.4f paired_read_gbs %.2f", times.paired_off,
             times.paired_on, times.paired_read_gbs);
    printf("\n");
  }
  free(stream_data);
  engine_close(&e);
  return 0;
}

/* Decode attention alone, as a decode step runs it: one query row (n = 1)
 * against caches of `keys` positions, one cache after another so that each
 * comes from memory as a layer's does after the step's weights went
 * through (caches enough for 256 MiB, at least 4), on the back end the
 * program opens (MEMDECAY_CPU_KERNELS chooses the path). Prints the best of
 * `rounds` passes over all the caches, as GB/s of keys and values read. */
static int cmd_attention(int64_t keys, int heads, int kv_heads, int head_dim, int threads,
                         int rounds) {
  if (keys < 1 || kv_heads < 1 || heads < kv_heads || heads % kv_heads || head_dim < 1 ||
      rounds < 1) {
    fprintf(stderr, "inference_bench attention: needs --keys >= 1, --heads a multiple of "
                    "--kv-heads, --head-dim >= 1, --rounds >= 1\n");
    return 2;
  }
  md_error err;
  md_kernels *k = NULL;
  md_device_options device = {.device = "cpu", .threads = threads};
  if (md_device_open(&device, &k, &err) != MD_OK) return fail(&err);
  size_t cache_floats = (size_t)2 * (size_t)kv_heads * (size_t)keys * (size_t)head_dim;
  size_t cache_bytes = cache_floats * sizeof(float);
  int64_t caches = (int64_t)(((size_t)256 << 20) / cache_bytes) + 1;
  if (caches < 4) caches = 4;
  md_kbuf **cache = calloc((size_t)caches, sizeof *cache);
  size_t row_floats = (size_t)heads * (size_t)head_dim;
  float *host = malloc((cache_floats > row_floats ? cache_floats : row_floats) * sizeof(float));
  md_kbuf *q = NULL, *out = NULL;
  int status = 1;
  if (!cache || !host) {
    fprintf(stderr, "inference_bench: out of memory\n");
    goto done;
  }
  uint64_t state = 1;
  for (size_t i = 0; i < cache_floats; i++)
    host[i] = (float)((lcg_next(&state) >> 40) % 2001) * 1e-3f - 1.0f;
  for (int64_t c = 0; c < caches; c++)
    if (k->ops->buf_new(k, cache_floats, &cache[c], &err) != MD_OK ||
        k->ops->buf_write(k, cache[c], 0, cache_floats, host, &err) != MD_OK) {
      status = fail(&err);
      goto done;
    }
  if (k->ops->buf_new(k, row_floats, &q, &err) != MD_OK ||
      k->ops->buf_write(k, q, 0, row_floats, host, &err) != MD_OK ||
      k->ops->buf_new(k, row_floats, &out, &err) != MD_OK) {
    status = fail(&err);
    goto done;
  }
  md_attn_shape shape = {.n_heads = heads, .n_kv_heads = kv_heads, .head_dim = head_dim,
                         .capacity = keys};
  double best = INFINITY;
  for (int r = 0; r <= rounds; r++) { /* round 0 untimed */
    double t0 = now();
    for (int64_t c = 0; c < caches; c++)
      k->ops->attention(k, out, q, cache[c], &shape, keys - 1, 1, NULL, NULL);
    if (k->ops->sync(k, &err) != MD_OK) {
      status = fail(&err);
      goto done;
    }
    double t = now() - t0;
    if (r > 0 && t < best) best = t;
  }
  printf("attention_isa %s\nthreads %d\nkeys %lld\nheads %d\nkv_heads %d\nhead_dim %d\n"
         "caches %lld\ncall_us %.2f\nkv_gbs %.3f\n",
         facts_of(k).cpu_kernels, threads, (long long)keys, heads, kv_heads, head_dim,
         (long long)caches, best / (double)caches * 1e6,
         (double)caches * (double)cache_bytes / best / 1e9);
  status = 0;
done:
  if (cache)
    for (int64_t c = 0; c < caches; c++)
      if (cache[c]) k->ops->buf_free(k, cache[c]);
  if (q) k->ops->buf_free(k, q);
  if (out) k->ops->buf_free(k, out);
  free(cache);
  free(host);
  md_kernels_free(k);
  return status;
}

int main(int argc, char **argv) {
  int threads = omp_get_num_procs();
  int64_t decode_steps = 256, capture_steps = -1, depth_steps = 32;
  bool prefill_capture = false, warmup = false, paired = false;
  const char *depths = "0,1024,4096,16384";
  /* attention: Qwen2.5-0.5B's heads at 4,096 keys by default. */
  int64_t attn_keys = 4096;
  int attn_heads = 14, attn_kv_heads = 2, attn_head_dim = 64, attn_rounds = 5;
  const char *positional[3] = {0};
  int npos = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--decode") && i + 1 < argc) decode_steps = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--capture-steps") && i + 1 < argc) capture_steps = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--prefill-capture")) prefill_capture = true;
    else if (!strcmp(argv[i], "--warmup")) warmup = true;
    else if (!strcmp(argv[i], "--paired")) paired = true;
    else if (!strcmp(argv[i], "--bf16-gemm")) bf16_gemm = true;
    else if (!strcmp(argv[i], "--depths") && i + 1 < argc) depths = argv[++i];
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc) depth_steps = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--keys") && i + 1 < argc) attn_keys = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--heads") && i + 1 < argc) attn_heads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--kv-heads") && i + 1 < argc) attn_kv_heads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--head-dim") && i + 1 < argc) attn_head_dim = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) attn_rounds = atoi(argv[++i]);
    else if (npos < 3) positional[npos++] = argv[i];
  }
  if (threads < 1) threads = omp_get_num_procs();
  if (npos == 1 && !strcmp(positional[0], "limits")) return cmd_limits(threads);
  if (npos == 1 && !strcmp(positional[0], "bandwidth")) return cmd_bandwidth(threads);
  if (npos == 3 && !strcmp(positional[0], "run"))
    return cmd_run(positional[1], positional[2], decode_steps, threads,
                   capture_steps < 0 ? decode_steps : capture_steps, prefill_capture, warmup);
  if (npos == 3 && !strcmp(positional[0], "ops"))
    return cmd_ops(positional[1], positional[2], decode_steps, threads, prefill_capture);
  if (npos == 2 && !strcmp(positional[0], "depth") && depth_steps >= 2)
    return cmd_depth(positional[1], depths, depth_steps, threads, warmup, paired);
  if (npos == 1 && !strcmp(positional[0], "attention"))
    return cmd_attention(attn_keys, attn_heads, attn_kv_heads, attn_head_dim, threads, attn_rounds);
  fprintf(stderr, "usage: inference_bench limits [--threads N]\n"
                  "       inference_bench bandwidth [--threads N]\n"
                  "       inference_bench run CHECKPOINT PROMPT.i32 [--decode N] [--threads N]\n"
                  "                           [--capture-steps N] [--prefill-capture] [--warmup]\n"
                  "                           [--bf16-gemm]\n"
                  "       inference_bench ops CHECKPOINT PROMPT.i32 [--decode N] [--threads N]\n"
                  "                           [--prefill-capture] [--bf16-gemm]\n"
                  "       inference_bench depth CHECKPOINT [--depths 0,1024,4096,16384]\n"
                  "                             [--steps N (>= 2)] [--threads N] [--warmup]\n"
                  "                             [--paired]\n"
                  "       inference_bench attention [--keys 4096] [--heads 14] [--kv-heads 2]\n"
                  "                                 [--head-dim 64] [--rounds 5] [--threads N]\n");
  return 2;
}
