/* The forward pass's speed against the machine's own limits. Run by
 * bench/inference_bench.sh, which prints the ratios; not a test.
 *
 *   inference_bench limits [--threads N]
 *       prints the memory bandwidth (a STREAM-style triad and one large
 *       f32 cblas_sgemv) and the cblas_sgemm rate on a prefill-sized product
 *   inference_bench run CHECKPOINT PROMPT.i32 [--decode N] [--threads N]
 *                       [--capture-steps N]
 *       prefill of the prompt (raw little-endian int32 token ids), then N
 *       greedy decode steps; prints times, sizes and peak RSS. Then the
 *       cost of the fused attention capture: N more decode steps (default
 *       the --decode count) that alternate capture off and capture on (mean
 *       over heads, all layers, the row read back through two buffers as
 *       the collector does), so that both see the same positions and the
 *       same machine noise; prints the time of each half.
 *
 * Output is "key value" lines for the script to read. */
#include <cblas.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "collector/model/qwen2_forward.h"
#include "collector/model/qwen2_model.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_internal.h"

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

/* C [m, n] = A [m, k] B^T with B [n, k]: Qwen2.5-0.5B's gate projection over
 * a 1,700-token prompt. Best of 3. */
static double sgemm_gflops(void) {
  int m = 1700, n = 4864, k = 896;
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

/* Our BF16 matrix-vector kernel over a 256 MiB matrix (not a limit: a
 * diagnostic of the decode kernel alone, next to sgemv). Best of 5. */
static double bf16_matvec_gbs(int threads) {
  int64_t rows = 16384, cols = 8192;
  uint16_t *w = malloc((size_t)rows * cols * sizeof(uint16_t));
  float *x = filled((size_t)cols, 1.0f), *y = filled((size_t)rows, 0.0f);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows * cols; i++) w[i] = (uint16_t)(0x3c00 + (i % 64));
  double best = 1e30;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = now();
    md_cpu_matvec(md_cpu_detect_isa(), threads, y, w, MD_DTYPE_BF16, rows, cols, x, NULL);
    double dt = now() - t0;
    if (dt < best) best = dt;
  }
  free(w);
  free(x);
  free(y);
  return (double)rows * cols * sizeof(uint16_t) / best / 1e9;
}

static int cmd_limits(int threads) {
  openblas_set_num_threads(threads);
  printf("threads %d\n", threads);
  printf("triad_gbs %.3f\n", triad_gbs(threads));
  printf("sgemv_gbs %.3f\n", sgemv_gbs());
  printf("sgemm_gflops %.3f\n", sgemm_gflops());
  printf("bf16_matvec_gbs %.3f\n", bf16_matvec_gbs(threads));
  return 0;
}

static int32_t *read_prompt(const char *path, int64_t *n) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  long bytes = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  int32_t *tokens = malloc((size_t)bytes);
  *n = bytes / 4;
  if (!tokens || fread(tokens, 4, (size_t)*n, fp) != (size_t)*n) {
    free(tokens);
    tokens = NULL;
  }
  fclose(fp);
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
} capture_times;

static int capture_cost(md_qwen2_forward *fw, md_kernels *k, int layers, int32_t *token,
                        int64_t steps, capture_times *times) {
  md_error err;
  int64_t capacity = md_qwen2_capacity(fw);
  md_kbuf *received[2];
  float *row = malloc((size_t)capacity * sizeof(float));
  if (!row || k->ops->buf_new(k, (size_t)capacity, &received[0], &err) != MD_OK ||
      k->ops->buf_new(k, (size_t)capacity, &received[1], &err) != MD_OK)
    return fail(&err);
  *times = (capture_times){.off_best_s = 1e30, .on_best_s = 1e30, .steps = steps};
  for (int64_t s = 0; s < steps; s++) {
    int on = (int)(s & 1), slot = (int)((s >> 1) & 1);
    size_t visible = (size_t)md_qwen2_position(fw) + 1;
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
  }
  md_qwen2_set_capture(fw, NULL, &err);
  k->ops->buf_free(k, received[0]);
  k->ops->buf_free(k, received[1]);
  free(row);
  return 0;
}

static int cmd_run(const char *dir, const char *prompt_path, int64_t decode_steps, int threads,
                   int64_t capture_steps) {
  md_error err;
  int64_t n = 0;
  int32_t *prompt = read_prompt(prompt_path, &n);
  if (!prompt || n < 1) {
    fprintf(stderr, "inference_bench: cannot read %s\n", prompt_path);
    return 1;
  }
  md_qwen2_model *model;
  md_kernels *k;
  md_qwen2_forward *fw;
  if (md_qwen2_model_open(dir, &model, &err) != MD_OK) return fail(&err);
  const md_qwen2_config *c = md_qwen2_model_config(model);
  const md_qwen2_weights *w = md_qwen2_model_weights(model);
  md_cpu_options cpu_options = {.threads = threads};
  md_qwen2_forward_options options = {.capacity = n + decode_steps + capture_steps};
  if (md_kernels_cpu_new(&cpu_options, &k, &err) != MD_OK ||
      md_qwen2_forward_new(c, w, k, &options, &fw, &err) != MD_OK)
    return fail(&err);

  double t0 = now();
  if (md_qwen2_prefill(fw, prompt, n, NULL, &err) != MD_OK) return fail(&err);
  double prefill_s = now() - t0;
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
  if (capture_steps > 0 && capture_cost(fw, k, c->num_hidden_layers, &token, capture_steps, &capture))
    return 1;

  int64_t kv_bytes_per_token = (int64_t)c->num_hidden_layers * 2 * c->num_key_value_heads * c->head_dim * 4;
  int64_t layer_params = 0;
  for (int l = 0; l < c->num_hidden_layers; l++) {
    const md_qwen2_layer *L = &w->layers[l];
    const md_tensor *m[] = {&L->q_proj, &L->k_proj, &L->v_proj, &L->o_proj, &L->gate_proj, &L->up_proj, &L->down_proj};
    for (int i = 0; i < 7; i++) layer_params += m[i]->shape[0] * m[i]->shape[1];
  }
  /* Bytes a decode step must read: every layer matrix and the whole LM head
   * (tied: the embedding), in the file dtype. */
  int64_t lm_head_bytes = (int64_t)w->lm_head.nbytes;
  printf("isa %s\n", md_kernels_cpu_isa(k));
  printf("threads %d\n", threads);
  printf("dtype %s\n", md_dtype_name(w->dtype));
  printf("prompt_tokens %lld\n", (long long)n);
  printf("decode_steps %lld\n", (long long)decode_steps);
  printf("prefill_s %.4f\n", prefill_s);
  printf("decode_s %.4f\n", decode_s);
  printf("decode_best_step_s %.6f\n", decode_steps > 0 ? best_step_s : 0.0);
  printf("weight_bytes %llu\n", (unsigned long long)w->weight_bytes);
  printf("decode_read_bytes %lld\n",
         (long long)(layer_params * (int64_t)md_dtype_size(w->dtype) + lm_head_bytes));
  printf("layer_params %lld\n", (long long)layer_params);
  printf("attn_flops_prefill %.6g\n", 2.0 * (double)n * (double)n * c->head_dim *
                                          c->num_attention_heads * c->num_hidden_layers);
  printf("kv_bytes %lld\n", (long long)(kv_bytes_per_token * (n + decode_steps)));
  printf("peak_rss_kb %ld\n", peak_rss_kb());
  printf("capture_steps %lld\n", (long long)capture.steps);
  printf("capture_off_s %.4f\n", capture.off_s);
  printf("capture_on_s %.4f\n", capture.on_s);
  printf("capture_off_best_s %.6f\n", capture.steps ? capture.off_best_s : 0.0);
  printf("capture_on_best_s %.6f\n", capture.steps ? capture.on_best_s : 0.0);
  printf("last_token %d\n", token);
  md_qwen2_forward_free(fw);
  md_kernels_free(k);
  md_qwen2_model_close(model);
  free(prompt);
  return 0;
}

int main(int argc, char **argv) {
  int threads = omp_get_num_procs();
  int64_t decode_steps = 256, capture_steps = -1;
  const char *positional[3] = {0};
  int npos = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--decode") && i + 1 < argc) decode_steps = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--capture-steps") && i + 1 < argc) capture_steps = atoll(argv[++i]);
    else if (npos < 3) positional[npos++] = argv[i];
  }
  if (threads < 1) threads = omp_get_num_procs();
  if (npos == 1 && !strcmp(positional[0], "limits")) return cmd_limits(threads);
  if (npos == 3 && !strcmp(positional[0], "run"))
    return cmd_run(positional[1], positional[2], decode_steps, threads,
                   capture_steps < 0 ? decode_steps : capture_steps);
  fprintf(stderr, "usage: inference_bench limits [--threads N]\n"
                  "       inference_bench run CHECKPOINT PROMPT.i32 [--decode N] [--threads N]\n"
                  "                           [--capture-steps N]\n");
  return 2;
}
