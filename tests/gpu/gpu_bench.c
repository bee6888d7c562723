/* Speed of the CUDA back end against the GPU's own limits, for
 * tests/gpu/check.sh (which prints the ratios and targets). Output is
 * "key value" lines.
 *
 *   gpu_bench limits [--device N]
 *       device-to-device copy bandwidth (cudaMemcpy of 2 GiB, read + write
 *       counted, best of 10: the HBM limit a decode step runs against), our
 *       BF16 GEMV on Qwen2.5-1.5B's matrix shapes, and the host cost of one
 *       kernel launch; and cuBLAS's n = 1 product on the same shapes, for
 *       comparison
 *   gpu_bench run DIR [--prompt N] [--decode S] [--gemm fast|exact] [--no-graphs] [--device N]
 *       DIR/prompt.i32's first N tokens: prefill with capture off and on,
 *       then S greedy decode steps with capture off, S with capture on as
 *       the collector runs them (two capture buffers, overlapped reads), and
 *       S teacher-forced steps with capture on and no per-step argmax (and
 *       the time spent queuing their kernels: when it is close to the total,
 *       decode is bound by kernel launches, not by the GPU); --no-graphs
 *       launches decode steps kernel by kernel instead of replaying them
 *       as CUDA graphs (the back end's default)
 *   gpu_bench batch DIR [--prompt N] [--decode S] [--device N]
 *       throughput of batched decode, as `collect --batch B` runs it, for
 *       B = 1, 8 and 64: B sequences each prefilled with the prompt's first
 *       N tokens (default 256), then S (default 64) greedy steps of all B
 *       as batched steps (md_qwen2_step), each sequence capturing into a
 *       buffer of its own; decode tokens per second = B * S / seconds */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "collector/model/qwen2_forward.h"
#include "collector/model/qwen2_model.h"
#include "kernels/cuda/cuda.h"
#include "tests/gpu/gpu_check.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static md_kernels *open_cuda(int device, md_cuda_gemm gemm, int graphs) {
  md_cuda_options options = {.device = device, .gemm = gemm, .no_graphs = !graphs};
  md_kernels *k = NULL;
  md_error err;
  if (md_kernels_cuda_new(&options, &k, &err) != MD_OK) gpu_die("md_kernels_cuda_new", &err);
  return k;
}

static void cuda_or_die(cudaError_t code, const char *what) {
  if (code == cudaSuccess) return;
  fprintf(stderr, "gpu_bench: %s: %s\n", what, cudaGetErrorString(code));
  exit(1);
}

/* Bytes read and written by a device-to-device copy per second. */
static double copy_gbs(int device) {
  const size_t bytes = (size_t)2 << 30;
  void *a = NULL, *b = NULL;
  cuda_or_die(cudaSetDevice(device), "cudaSetDevice");
  cuda_or_die(cudaMalloc(&a, bytes), "cudaMalloc");
  cuda_or_die(cudaMalloc(&b, bytes), "cudaMalloc");
  cuda_or_die(cudaMemset(a, 1, bytes), "cudaMemset");
  cudaEvent_t start, stop;
  cuda_or_die(cudaEventCreate(&start), "cudaEventCreate");
  cuda_or_die(cudaEventCreate(&stop), "cudaEventCreate");
  float best_ms = 1e30f;
  for (int rep = 0; rep < 10; rep++) {
    cuda_or_die(cudaEventRecord(start, 0), "cudaEventRecord");
    cuda_or_die(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0), "cudaMemcpyAsync");
    cuda_or_die(cudaEventRecord(stop, 0), "cudaEventRecord");
    cuda_or_die(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    cuda_or_die(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    if (ms < best_ms) best_ms = ms;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * (double)bytes / (best_ms * 1e-3) / 1e9;
}

/* Our decode GEMV over one BF16 matrix: weight bytes per second, the mean
 * of 200 back-to-back products (launch overheads included, as in decode). */
static double gemv_gbs(md_kernels *k, int64_t rows, int64_t cols) {
  float *values;
  void *bits = gpu_random_weight(MD_DTYPE_BF16, (size_t)(rows * cols), &values);
  md_tensor t;
  md_kweight *w = gpu_weight(k, &t, bits, MD_DTYPE_BF16, rows, cols);
  float *x = gpu_random_floats((size_t)cols, -1.0f, 1.0f);
  md_kbuf *xb = gpu_upload(k, x, (size_t)cols), *yb = gpu_upload(k, NULL, (size_t)rows);
  md_error err;
  for (int rep = 0; rep < 10; rep++) k->ops->matmul(k, yb, xb, w, NULL, 1);
  if (k->ops->sync(k, &err) != MD_OK) gpu_die("gemv", &err);
  const int reps = 200;
  double t0 = now();
  for (int rep = 0; rep < reps; rep++) k->ops->matmul(k, yb, xb, w, NULL, 1);
  if (k->ops->sync(k, &err) != MD_OK) gpu_die("gemv", &err);
  double seconds = (now() - t0) / reps;
  k->ops->buf_free(k, xb);
  k->ops->buf_free(k, yb);
  k->ops->weight_free(k, w);
  free(bits);
  free(values);
  free(x);
  return (double)(rows * cols) * 2.0 / seconds / 1e9;
}

/* cuBLAS on the same product for comparison: cublasGemmEx with n = 1, the
 * BF16 weight and a BF16 vector (cuBLAS has no BF16 x F32 product), fp32
 * accumulation; weight bytes per second, mean of 200 calls. */
static double cublas_gemv_gbs(int device, int64_t rows, int64_t cols) {
  void *w = NULL, *x = NULL, *y = NULL;
  cublasHandle_t blas;
  cuda_or_die(cudaSetDevice(device), "cudaSetDevice");
  cuda_or_die(cudaMalloc(&w, (size_t)(rows * cols) * 2), "cudaMalloc");
  cuda_or_die(cudaMalloc(&x, (size_t)cols * 2), "cudaMalloc");
  cuda_or_die(cudaMalloc(&y, (size_t)rows * 4), "cudaMalloc");
  cuda_or_die(cudaMemset(w, 0x3c, (size_t)(rows * cols) * 2), "cudaMemset");
  cuda_or_die(cudaMemset(x, 0x3c, (size_t)cols * 2), "cudaMemset");
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "gpu_bench: cublasCreate failed\n");
    exit(1);
  }
  const float alpha = 1.0f, beta = 0.0f;
  double seconds = 0.0;
  for (int pass = 0; pass < 2; pass++) { /* a warm-up pass, then the timed one */
    cuda_or_die(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    double t0 = now();
    for (int rep = 0; rep < 200; rep++)
      if (cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, 1, (int)cols, &alpha, w, CUDA_R_16BF,
                       (int)cols, x, CUDA_R_16BF, (int)cols, &beta, y, CUDA_R_32F, (int)rows,
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "gpu_bench: cublasGemmEx failed\n");
        exit(1);
      }
    cuda_or_die(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    seconds = (now() - t0) / 200;
  }
  cublasDestroy(blas);
  cudaFree(w);
  cudaFree(x);
  cudaFree(y);
  return (double)(rows * cols) * 2.0 / seconds / 1e9;
}

/* Host time to queue one small kernel (a 1-float add), and the time per
 * kernel when the GPU runs 10,000 of them back to back. */
static void launch_cost(md_kernels *k, double *host_us, double *per_kernel_us) {
  md_kbuf *a = gpu_upload(k, NULL, 1), *b = gpu_upload(k, NULL, 1);
  md_error err;
  k->ops->sync(k, &err);
  const int n = 10000;
  double t0 = now();
  for (int i = 0; i < n; i++) k->ops->add(k, a, b, 1);
  double queued = now() - t0;
  if (k->ops->sync(k, &err) != MD_OK) gpu_die("add", &err);
  *host_us = queued / n * 1e6;
  *per_kernel_us = (now() - t0) / n * 1e6;
  k->ops->buf_free(k, a);
  k->ops->buf_free(k, b);
}

static int cmd_limits(int device) {
  md_kernels *k = open_cuda(device, MD_CUDA_GEMM_FAST, 0);
  printf("device %s\n", md_kernels_cuda_describe(k));
  printf("copy_gbs %.1f\n", copy_gbs(device));
  const int64_t shapes[][2] = {{1536, 1536}, {256, 1536}, {8960, 1536}, {1536, 8960}, {151936, 1536}};
  const char *names[] = {"q_o", "k_v", "gate_up", "down", "lm_head"};
  for (int i = 0; i < 5; i++) {
    printf("gemv_gbs_%s_%lldx%lld %.1f\n", names[i], (long long)shapes[i][0], (long long)shapes[i][1],
           gemv_gbs(k, shapes[i][0], shapes[i][1]));
    printf("cublas_gemv_gbs_%s_%lldx%lld %.1f\n", names[i], (long long)shapes[i][0],
           (long long)shapes[i][1], cublas_gemv_gbs(device, shapes[i][0], shapes[i][1]));
  }
  double host_us, kernel_us;
  launch_cost(k, &host_us, &kernel_us);
  printf("launch_host_us %.2f\n", host_us);
  printf("launch_total_us %.2f\n", kernel_us);
  md_kernels_free(k);
  return 0;
}

/* ---- the forward pass ----------------------------------------------------------------- */

typedef struct bench {
  md_kernels *k;
  md_qwen2_forward *fw;
  const md_qwen2_config *c;
  const int32_t *prompt;
  int64_t n;
  md_kbuf *received[2];
  float *host[2];
} bench;

static void die_if(md_status status, const md_error *err, const char *what) {
  if (status != MD_OK) gpu_die(what, err);
}

static void capture(bench *b, int which) {
  md_qwen2_capture cap = {.received = which >= 0 ? b->received[which] : NULL, .layer_begin = 0,
                          .layer_end = b->c->num_hidden_layers, .heads = MD_CAPTURE_HEADS_MEAN};
  md_error err;
  die_if(md_qwen2_set_capture(b->fw, &cap, &err), &err, "set_capture");
}

/* A fresh prefill of the prompt; returns seconds (synchronised). */
static double prefill(bench *b, bool with_capture, int32_t *next) {
  md_error err;
  md_qwen2_reset(b->fw);
  if (with_capture) b->k->ops->buf_zero(b->k, b->received[0], 0, (size_t)b->n);
  capture(b, with_capture ? 0 : -1);
  double t0 = now();
  die_if(md_qwen2_prefill(b->fw, b->prompt, b->n, NULL, &err), &err, "prefill");
  die_if(md_qwen2_greedy(b->fw, next, &err), &err, "greedy");
  return now() - t0;
}

typedef struct decode_stats {
  double total_s, best_step_s;
  double enqueue_s;  /* time inside md_qwen2_decode: queuing the step's kernels */
  uint64_t launches;
} decode_stats;

/* `steps` decode steps after a fresh prefill. Greedy: argmax every step
 * (synchronises, batch-1 latency). With capture, as the collector does:
 * step s captures into buffer s % 2 and starts its read in slot s % 2,
 * then finishes the previous step's read. */
static decode_stats decode(bench *b, int64_t steps, bool with_capture, bool greedy) {
  md_error err;
  int32_t token;
  prefill(b, false, &token);
  decode_stats st = {.best_step_s = 1e30};
  uint64_t launches0 = md_kernels_cuda_launches(b->k);
  double start = now();
  for (int64_t s = 0; s < steps; s++) {
    int which = (int)(s % 2);
    double t0 = now();
    size_t width = (size_t)(b->n + s + 1);
    if (with_capture) {
      b->k->ops->buf_zero(b->k, b->received[which], 0, width);
      capture(b, which);
    } else {
      capture(b, -1);
    }
    double q0 = now();
    die_if(md_qwen2_decode(b->fw, token, &err), &err, "decode");
    st.enqueue_s += now() - q0;
    if (greedy) die_if(md_qwen2_greedy(b->fw, &token, &err), &err, "greedy");
    else token = b->prompt[(s * 7919) % b->n]; /* teacher forcing: no wait for the argmax */
    if (with_capture) {
      die_if(b->k->ops->buf_read_start(b->k, b->received[which], 0, width, b->host[which], which, &err),
             &err, "read_start");
      if (s > 0) die_if(b->k->ops->buf_read_finish(b->k, 1 - which, &err), &err, "read_finish");
    }
    double step = now() - t0;
    if (step < st.best_step_s) st.best_step_s = step;
  }
  if (with_capture && steps > 0)
    die_if(b->k->ops->buf_read_finish(b->k, (int)((steps - 1) % 2), &err), &err, "read_finish");
  die_if(b->k->ops->sync(b->k, &err), &err, "sync");
  st.total_s = now() - start;
  st.launches = (md_kernels_cuda_launches(b->k) - launches0) / (uint64_t)(steps > 0 ? steps : 1);
  return st;
}

static int32_t *read_prompt(const char *path, int64_t *n) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  int32_t *tokens = malloc((size_t)*n * sizeof(int32_t));
  *n = (int64_t)fread(tokens, sizeof(int32_t), (size_t)*n, fp);
  fclose(fp);
  return tokens;
}

static uint64_t decode_read_bytes(const md_qwen2_config *c, const md_qwen2_weights *w) {
  uint64_t params = 0;
  for (int l = 0; l < c->num_hidden_layers; l++) {
    const md_qwen2_layer *L = &w->layers[l];
    const md_tensor *m[] = {&L->q_proj, &L->k_proj, &L->v_proj, &L->o_proj, &L->gate_proj, &L->up_proj, &L->down_proj};
    for (int i = 0; i < 7; i++) params += (uint64_t)(m[i]->shape[0] * m[i]->shape[1]);
  }
  return params * md_dtype_size(w->dtype) + w->lm_head.nbytes;
}

static int cmd_run(const char *dir, int64_t prompt_len, int64_t steps, md_cuda_gemm gemm, int graphs,
                   int device) {
  md_error err;
  md_qwen2_model *model = NULL;
  die_if(md_qwen2_model_open(dir, &model, &err), &err, dir);
  char path[4096];
  snprintf(path, sizeof path, "%s/prompt.i32", dir);
  bench b = {.n = prompt_len};
  int32_t *prompt = read_prompt(path, &b.n);
  if (!prompt || b.n < 2) {
    fprintf(stderr, "gpu_bench: cannot read %s\n", path);
    return 1;
  }
  b.prompt = prompt;
  b.c = md_qwen2_model_config(model);
  const md_qwen2_weights *w = md_qwen2_model_weights(model);
  b.k = open_cuda(device, gemm, graphs);
  md_qwen2_forward_options options = {.capacity = b.n + steps};
  double t0 = now();
  die_if(md_qwen2_forward_new(b.c, w, b.k, &options, &b.fw, &err), &err, "forward");
  double upload_s = now() - t0;
  for (int i = 0; i < 2; i++) {
    b.received[i] = gpu_upload(b.k, NULL, (size_t)(b.n + steps));
    b.host[i] = malloc((size_t)(b.n + steps) * sizeof(float));
  }
  int32_t token;
  prefill(&b, true, &token); /* warm-up: cuBLAS initialisation, first-touch */
  double prefill_off = prefill(&b, false, &token), prefill_on = prefill(&b, true, &token);
  decode_stats greedy_off = decode(&b, steps, false, true);
  decode_stats greedy_on = decode(&b, steps, true, true);
  decode_stats forced_on = decode(&b, steps, true, false);
  printf("device %s\n", md_kernels_cuda_describe(b.k));
  printf("gemm %s\n", gemm == MD_CUDA_GEMM_EXACT ? "exact" : "fast");
  printf("graphs %d\n", graphs);
  printf("dtype %s\n", md_dtype_name(w->dtype));
  printf("prompt_tokens %lld\n", (long long)b.n);
  printf("decode_steps %lld\n", (long long)steps);
  printf("upload_s %.3f\n", upload_s);
  printf("prefill_s %.5f\n", prefill_off);
  printf("prefill_capture_s %.5f\n", prefill_on);
  printf("decode_s %.5f\n", greedy_off.total_s);
  printf("decode_best_step_s %.6f\n", greedy_off.best_step_s);
  printf("decode_capture_s %.5f\n", greedy_on.total_s);
  printf("decode_capture_best_step_s %.6f\n", greedy_on.best_step_s);
  printf("decode_forced_capture_s %.5f\n", forced_on.total_s);
  printf("decode_forced_enqueue_s %.5f\n", forced_on.enqueue_s);
  printf("launches_per_step %llu\n", (unsigned long long)greedy_on.launches);
  printf("kernels_per_step %llu\n", (unsigned long long)(graphs ? md_kernels_cuda_step_kernels(b.k)
                                                                  : greedy_on.launches));
  printf("layers %d\n", b.c->num_hidden_layers);
  printf("decode_read_bytes %llu\n", (unsigned long long)decode_read_bytes(b.c, w));
  printf("weight_bytes %llu\n", (unsigned long long)w->weight_bytes);
  printf("last_token %d\n", token);
  for (int i = 0; i < 2; i++) {
    b.k->ops->buf_free(b.k, b.received[i]);
    free(b.host[i]);
  }
  md_qwen2_forward_free(b.fw);
  md_kernels_free(b.k);
  md_qwen2_model_close(model);
  free(prompt);
  return 0;
}

/* B sequences, S batched greedy steps with capture: decode tokens/s. */
static double batch_tokens_s(md_qwen2_forward *fw, md_kernels *k, const md_qwen2_config *c,
                             const int32_t *prompt, int64_t n, int64_t steps, int64_t batch) {
  md_error err;
  md_qwen2_seq **seqs = calloc((size_t)batch, sizeof *seqs);
  md_kbuf **received = calloc((size_t)batch, sizeof *received);
  int32_t *tokens = malloc((size_t)batch * sizeof(int32_t)), *out = malloc((size_t)batch * sizeof(int32_t));
  for (int64_t b = 0; b < batch; b++) {
    if (b == 0) seqs[b] = md_qwen2_seq_own(fw);
    else die_if(md_qwen2_seq_new(fw, &seqs[b], &err), &err, "seq_new");
    received[b] = gpu_upload(k, NULL, (size_t)(n + steps));
    md_qwen2_select(fw, seqs[b]);
    md_qwen2_reset(fw);
    md_qwen2_capture cap = {.received = received[b], .layer_begin = 0,
                            .layer_end = c->num_hidden_layers, .heads = MD_CAPTURE_HEADS_MEAN};
    die_if(md_qwen2_set_capture(fw, &cap, &err), &err, "set_capture");
    die_if(md_qwen2_prefill(fw, prompt, n, NULL, &err), &err, "prefill");
    die_if(md_qwen2_greedy(fw, &tokens[b], &err), &err, "greedy");
  }
  md_qwen2_select(fw, NULL);
  die_if(k->ops->sync(k, &err), &err, "sync");
  double t0 = now();
  for (int64_t s = 0; s < steps; s++) {
    for (int64_t b = 0; b < batch; b++) k->ops->buf_zero(k, received[b], 0, (size_t)(n + s + 1));
    die_if(md_qwen2_step(fw, seqs, tokens, batch, out, &err), &err, "step");
    memcpy(tokens, out, (size_t)batch * sizeof(int32_t));
  }
  die_if(k->ops->sync(k, &err), &err, "sync");
  double seconds = now() - t0;
  for (int64_t b = 0; b < batch; b++) {
    md_qwen2_select(fw, seqs[b]);
    md_qwen2_set_capture(fw, NULL, NULL);
    k->ops->buf_free(k, received[b]);
    if (b > 0) md_qwen2_seq_free(fw, seqs[b]);
  }
  md_qwen2_select(fw, NULL);
  free(seqs);
  free(received);
  free(tokens);
  free(out);
  return (double)(batch * steps) / seconds;
}

static int cmd_batch(const char *dir, int64_t prompt_len, int64_t steps, int device) {
  md_error err;
  md_qwen2_model *model = NULL;
  die_if(md_qwen2_model_open(dir, &model, &err), &err, dir);
  char path[4096];
  snprintf(path, sizeof path, "%s/prompt.i32", dir);
  int64_t n = prompt_len;
  int32_t *prompt = read_prompt(path, &n);
  if (!prompt || n < 2) {
    fprintf(stderr, "gpu_bench: cannot read %s\n", path);
    return 1;
  }
  const md_qwen2_config *c = md_qwen2_model_config(model);
  md_kernels *k = open_cuda(device, MD_CUDA_GEMM_FAST, 1);
  md_qwen2_forward_options options = {.capacity = n + steps};
  md_qwen2_forward *fw = NULL;
  die_if(md_qwen2_forward_new(c, md_qwen2_model_weights(model), k, &options, &fw, &err), &err, "forward");
  printf("device %s\n", md_kernels_cuda_describe(k));
  printf("prompt_tokens %lld\n", (long long)n);
  printf("decode_steps %lld\n", (long long)steps);
  batch_tokens_s(fw, k, c, prompt, n, 4, 8); /* warm-up */
  const int64_t batches[] = {1, 8, 64};
  for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++)
    printf("batch_%lld_tokens_s %.1f\n", (long long)batches[i],
           batch_tokens_s(fw, k, c, prompt, n, steps, batches[i]));
  md_qwen2_forward_free(fw);
  md_kernels_free(k);
  md_qwen2_model_close(model);
  free(prompt);
  return 0;
}

int main(int argc, char **argv) {
  const char *command = argc > 1 ? argv[1] : "", *dir = NULL;
  int64_t prompt_len = 0, steps = 0; /* 0: the command's default */
  int device = 0;
  md_cuda_gemm gemm = MD_CUDA_GEMM_FAST;
  int graphs = 1;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--device") && i + 1 < argc) device = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--prompt") && i + 1 < argc) prompt_len = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--decode") && i + 1 < argc) steps = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--gemm") && i + 1 < argc) {
      i++;
      gemm = !strcmp(argv[i], "exact") ? MD_CUDA_GEMM_EXACT : MD_CUDA_GEMM_FAST;
    } else if (!strcmp(argv[i], "--no-graphs")) graphs = 0;
    else if (!dir) dir = argv[i];
    else command = "";
  }
  bool batch = !strcmp(command, "batch");
  if (!prompt_len) prompt_len = batch ? 256 : 2048;
  if (!steps) steps = batch ? 64 : 128;
  if (!strcmp(command, "limits") && !dir) return cmd_limits(device);
  if (!strcmp(command, "run") && dir && prompt_len > 1 && steps > 0)
    return cmd_run(dir, prompt_len, steps, gemm, graphs, device);
  if (batch && dir && prompt_len > 1 && steps > 0) return cmd_batch(dir, prompt_len, steps, device);
  fprintf(stderr, "usage: gpu_bench limits [--device N]\n"
                  "       gpu_bench run DIR [--prompt N] [--decode S] [--gemm fast|exact] [--no-graphs] [--device N]\n"
                  "       gpu_bench batch DIR [--prompt N] [--decode S] [--device N]\n");
  return 2;
}
