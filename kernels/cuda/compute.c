/* The CUDA back end's matrix products (our matrix-vector kernel for decode,
 * cuBLAS for prefill in the precision md_cuda_options.gemm chooses) and
 * attention (the kernels of attention.cu, scratch memory, capture and the
 * hook). Design notes: kernels/cuda/cuda.h. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/backend.h"

#define CHECK(c, call) MD_CUDA_CHECK(&(c)->ctx, call)

/* EXACT prefill: weights converted to f32 at most this many floats at a
 * time (256 MiB). */
#define MD_CUDA_F32_TILE_FLOATS ((size_t)64 << 20)
/* Hook rows computed and copied to the host at a time (64 MiB). */
#define MD_CUDA_HOOK_FLOATS ((size_t)16 << 20)

/* ---- matrix products ------------------------------------------------------------ */

/* A cuBLAS call, accounted like a kernel launch (its kernels run on the
 * compute stream and fault the same way). */
static bool blas_ok(md_cuda_kernels *c, cublasStatus_t status, const char *call, const char *site) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    md_cuda_fail(&c->ctx, MD_E_DEVICE, "cuda:%d: %s failed at %s: %s (%s)", c->ctx.device, call,
                 md_cuda_short_site(site), cublasGetStatusString(status), cublasGetStatusName(status));
    return false;
  }
  c->ctx.launches++;
  c->ctx.last_kernel = call;
  c->ctx.last_site = site;
  if (c->ctx.sync_each_launch) return MD_CUDA_CHECK(&c->ctx, cudaStreamSynchronize(c->ctx.stream));
  return true;
}

/* y[i, r] (+)= sum_c W[r, c] x[i, c] for the `rows` rows of W at w, i < n;
 * y's rows are ldy floats apart. cuBLAS is column-major: y^T (rows x n,
 * ld ldy) = op_T(W^T as stored: cols x rows) * x^T (cols x n). */
static bool blas_gemm(md_cuda_kernels *c, float *y, int ldy, const void *w, const void *x,
                      cudaDataType_t type, int rows, int n, int cols, float beta,
                      cublasComputeType_t compute) {
  const float alpha = 1.0f;
  return blas_ok(c,
                 cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, cols, &alpha, w, type, cols,
                              x, type, cols, &beta, y, CUDA_R_32F, ldy, compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx", MD_CUDA_SITE);
}

/* F32 weights: fp32 GEMM, or TF32 tensor cores when asked for. */
static void gemm_f32(md_cuda_kernels *c, float *y, const float *x, const md_kweight *w, int n,
                     float beta) {
  cublasComputeType_t compute =
      c->gemm == MD_CUDA_GEMM_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  blas_gemm(c, y, (int)w->rows, w->data, x, CUDA_R_32F, (int)w->rows, n, (int)w->cols, beta, compute);
}

/* BF16/F16 weights on tensor cores: x rounded to the weight's dtype, fp32
 * accumulation and output. */
static void gemm_half(md_cuda_kernels *c, float *y, const float *x, const md_kweight *w, int n,
                      float beta) {
  size_t count = (size_t)n * (size_t)w->cols;
  uint16_t *act = md_cuda_scratch_get(c, &c->half_act, count * sizeof(uint16_t), "prefill activations");
  if (!act) return;
  md_cuda_to_half(&c->ctx, act, x, count, w->dtype, c->overflow);
  if (w->dtype == MD_DTYPE_F16) c->overflow_armed = true;
  cudaDataType_t type = w->dtype == MD_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
  blas_gemm(c, y, (int)w->rows, w->data, act, type, (int)w->rows, n, (int)w->cols, beta,
            CUBLAS_COMPUTE_32F);
}

/* BF16/F16 weights in fp32: equal tiles of rows converted to f32, then an
 * fp32 GEMM per tile (the CPU back end's method). */
static void gemm_exact(md_cuda_kernels *c, float *y, const float *x, const md_kweight *w, int n,
                       float beta) {
  int64_t rows = w->rows, cols = w->cols;
  int64_t max_tile = (int64_t)(MD_CUDA_F32_TILE_FLOATS / (size_t)cols);
  if (max_tile < 1) max_tile = 1;
  int64_t tiles = (rows + max_tile - 1) / max_tile, tile = (rows + tiles - 1) / tiles;
  float *converted = md_cuda_scratch_get(c, &c->f32_tiles, (size_t)tile * (size_t)cols * sizeof(float),
                                         "f32 weight tiles");
  if (!converted) return;
  for (int64_t r0 = 0; r0 < rows && c->ctx.status == MD_OK; r0 += tile) {
    int64_t r1 = r0 + tile < rows ? r0 + tile : rows;
    md_cuda_rows_to_f32(&c->ctx, converted, w->data, w->dtype, cols, r0, r1);
    if (c->ctx.status != MD_OK) return;
    blas_gemm(c, y + r0, (int)rows, converted, x, CUDA_R_32F, (int)(r1 - r0), n, (int)cols, beta,
              CUBLAS_COMPUTE_32F);
  }
}

/* What matmul checks before it runs (a failure recorded when not): the
 * bias's length, sizes cuBLAS takes, and the buffers' lengths. Fused
 * products (md_cuda_fused_gemv) check each of theirs the same way. */
static bool matmul_args_ok(md_cuda_kernels *c, const md_kbuf *y, const md_kbuf *x, const md_kweight *w,
                           const md_kweight *bias, int64_t n) {
  const int64_t rows = w->rows, cols = w->cols;
  if (bias && bias->cols != rows) {
    md_cuda_fail(&c->ctx, MD_E_INVALID, "cuda kernels: matmul: bias of %lld for %lld rows",
                 (long long)bias->cols, (long long)rows);
    return false;
  }
  if (rows > INT_MAX || cols > INT_MAX || n > INT_MAX) {
    md_cuda_fail(&c->ctx, MD_E_UNSUPPORTED, "cuda kernels: matmul of [%lld x %lld] by %lld rows is too large",
                 (long long)rows, (long long)cols, (long long)n);
    return false;
  }
  return md_cuda_fits(c, "matmul", "x", x, (size_t)n * (size_t)cols) &&
         md_cuda_fits(c, "matmul", "y", y, (size_t)n * (size_t)rows);
}

void md_cuda_op_matmul(md_kernels *k, md_kbuf *y, const md_kbuf *x, const md_kweight *w,
                       const md_kweight *bias, int64_t n) {
  md_cuda_kernels *c = md_cuda_of(k);
  MD_CUDA_LOG_OR_RUN(c, op, MD_CUDA_OP_MATMUL, op.out = y; op.in = x; op.w = w; op.w2 = bias;
                     op.n = n);
  int64_t rows = w->rows, cols = w->cols;
  if (n <= 0) return;
  if (!matmul_args_ok(c, y, x, w, bias, n) || !md_cuda_enter(c)) return;
  md_cuda_guard_write(c, y);
  const float *b = bias ? bias->data : NULL;
  if (n == 1) {
    md_cuda_gemv(&c->ctx, y->data, w->data, w->dtype, rows, cols, x->data, b);
    return;
  }
  float beta = 0.0f;
  if (b) {
    md_cuda_fill_rows(&c->ctx, y->data, b, n, rows);
    beta = 1.0f;
  }
  if (c->ctx.status != MD_OK) return;
  if (w->dtype == MD_DTYPE_F32) gemm_f32(c, y->data, x->data, w, (int)n, beta);
  else if (c->gemm == MD_CUDA_GEMM_EXACT) gemm_exact(c, y->data, x->data, w, (int)n, beta);
  else gemm_half(c, y->data, x->data, w, (int)n, beta);
}

/* matmul_rows: n decode rows, one per sequence of a batched step, through
 * md_cuda_gemv_batch (each W read once per 8 rows; row r the bits of the
 * one-row product). Products that cannot share a launch (more than three,
 * or of different dtypes or widths) run one matrix at a time, which gives
 * the same bits. Outside a recorded step: a step's log is run first. */
void md_cuda_op_matmul_rows(md_kernels *k, md_kbuf *const *ys, const md_kbuf *x,
                            const md_kweight *const *ws, const md_kweight *const *biases, int count,
                            int64_t n) {
  md_cuda_kernels *c = md_cuda_of(k);
  md_cuda_flush_log(c);
  if (n <= 0 || count <= 0) return;
  bool shared = count <= 3;
  for (int m = 0; m < count; m++) {
    const md_kweight *b = biases ? biases[m] : NULL;
    if (!matmul_args_ok(c, ys[m], x, ws[m], b, n)) return;
    shared = shared && ws[m]->dtype == ws[0]->dtype && ws[m]->cols == ws[0]->cols;
  }
  if (!md_cuda_enter(c)) return;
  if (!shared) {
    for (int m = 0; m < count; m++)
      md_cuda_op_matmul_rows(k, &ys[m], x, &ws[m], biases ? &biases[m] : NULL, 1, n);
    return;
  }
  md_cuda_gemv_args g = {.count = count, .dtype = ws[0]->dtype, .cols = ws[0]->cols, .x = x->data};
  for (int m = 0; m < count; m++) {
    const md_kweight *b = biases ? biases[m] : NULL;
    md_cuda_guard_write(c, ys[m]);
    g.w[m] = ws[m]->data;
    g.rows[m] = ws[m]->rows;
    g.bias[m] = b ? b->data : NULL;
    g.y[m] = ys[m]->data;
  }
  md_cuda_gemv_batch(&c->ctx, &g, n);
}

/* logits_rows: the final norm of the n rows (rmsnorm_kernel, whose bits the
 * fused norm of `logits` reproduces), then the LM head read once per 8
 * rows. */
void md_cuda_op_logits_rows(md_kernels *k, md_kbuf *logits, const md_kbuf *x, int64_t n,
                            const md_kweight *norm, const md_kweight *lm_head, float eps) {
  md_cuda_kernels *c = md_cuda_of(k);
  md_cuda_flush_log(c);
  if (n <= 0) return;
  const size_t dim = (size_t)norm->cols, vocab = (size_t)lm_head->rows;
  if ((size_t)lm_head->cols != dim) {
    md_cuda_fail(&c->ctx, MD_E_INVALID, "cuda kernels: logits_rows: norm of %zu for an LM head of "
                 "%lld columns", dim, (long long)lm_head->cols);
    return;
  }
  if (!md_cuda_fits(c, "logits_rows", "x", x, (size_t)n * dim) ||
      !md_cuda_fits(c, "logits_rows", "logits", logits, (size_t)n * vocab) || !md_cuda_enter(c))
    return;
  float *normed = md_cuda_scratch_get(c, &c->norm_rows, (size_t)n * dim * sizeof(float), "normalised rows");
  if (!normed) return;
  md_cuda_guard_write(c, logits);
  md_cuda_rmsnorm(&c->ctx, normed, x->data, norm->data, n, (int64_t)dim, eps);
  md_cuda_gemv_args g = {.count = 1, .w = {lm_head->data}, .rows = {lm_head->rows},
                         .y = {logits->data}, .dtype = lm_head->dtype, .cols = lm_head->cols,
                         .x = normed};
  md_cuda_gemv_batch(&c->ctx, &g, n);
}

/* ---- attention ------------------------------------------------------------------ */

static bool attention_args_ok(md_cuda_kernels *c, const md_kbuf *out, const md_kbuf *q,
                              const md_kbuf *cache, const md_attn_shape *s, int64_t pos0, int64_t n,
                              const md_attn_capture *capture) {
  if (s->n_heads <= 0 || s->n_kv_heads <= 0 || s->n_heads % s->n_kv_heads != 0 || s->head_dim <= 0 ||
      s->head_dim % 2 != 0 || s->head_dim > MD_CUDA_MAX_HEAD_DIM) {
    md_cuda_fail(&c->ctx, MD_E_UNSUPPORTED,
                 "cuda kernels: attention with %d heads, %d KV heads and head_dim %d (the CUDA "
                 "kernels need whole GQA groups and an even head_dim of at most %d)",
                 s->n_heads, s->n_kv_heads, s->head_dim, MD_CUDA_MAX_HEAD_DIM);
    return false;
  }
  if (n < 1 || pos0 < 0 || pos0 + n > s->capacity) {
    md_cuda_fail(&c->ctx, MD_E_INVALID,
                 "cuda kernels: attention over positions [%lld, %lld) with a capacity of %lld",
                 (long long)pos0, (long long)(pos0 + n), (long long)s->capacity);
    return false;
  }
  size_t q_floats = (size_t)n * (size_t)s->n_heads * (size_t)s->head_dim;
  size_t cache_floats = 2 * (size_t)s->n_kv_heads * (size_t)s->capacity * (size_t)s->head_dim;
  return md_cuda_fits(c, "attention", "q", q, q_floats) &&
         md_cuda_fits(c, "attention", "out", out, q_floats) &&
         md_cuda_fits(c, "attention", "cache", cache, cache_floats) &&
         (!capture || md_cuda_fits(c, "attention", "capture", capture->received, (size_t)(pos0 + n)));
}

/* Copies `rows` rows of `width` floats to the host (synchronously). */
static const float *rows_to_host(md_cuda_kernels *c, const float *device, size_t rows, size_t width) {
  size_t floats = rows * width;
  if (c->hook_host_floats < floats) {
    float *grown = realloc(c->hook_host, floats * sizeof(float));
    if (!grown) {
      md_cuda_fail(&c->ctx, MD_E_NOMEM, "cuda kernels: out of memory for attention rows");
      return NULL;
    }
    c->hook_host = grown;
    c->hook_host_floats = floats;
  }
  if (c->ctx.status != MD_OK ||
      !CHECK(c, cudaMemcpyAsync(c->hook_host, device, floats * sizeof(float), cudaMemcpyDeviceToHost,
                                c->ctx.stream)) ||
      !CHECK(c, cudaStreamSynchronize(c->ctx.stream)))
    return NULL;
  return c->hook_host;
}

size_t md_cuda_decode_scratch_bytes(int n_heads, int head_dim, int64_t max_keys) {
  const size_t heads = (size_t)n_heads, hd = (size_t)head_dim, n_keys = (size_t)max_keys;
  const size_t chunks = (size_t)md_cuda_decode_chunks(max_keys);
  return (heads * n_keys + 2 * chunks * heads + chunks * heads * hd) * sizeof(float);
}

/* The scratch is laid out for max_keys keys: the visible ones (pos0 + 1),
 * or the cache's capacity in a recorded step, whose slot is read on the
 * device. rope: RoPE and the KV store fused in (md_cuda_decode_rope). */
static void decode(md_cuda_kernels *c, md_cuda_attn_args *a, int layer, int64_t capacity,
                   const md_attn_hook *hook, const md_attn_capture *capture,
                   const md_cuda_decode_rope *rope) {
  if (c->capturing) a->pos_dev = md_cuda_step_slot_dev(c);
  const int64_t max_keys = c->capturing ? capacity : a->pos0 + 1;
  const size_t heads = (size_t)a->n_heads, n_keys = (size_t)max_keys;
  const size_t chunks = (size_t)md_cuda_decode_chunks(max_keys);
  float *base = md_cuda_scratch_get(c, &c->attn, md_cuda_decode_scratch_bytes(a->n_heads, a->head_dim, max_keys),
                                    "decode attention");
  if (!base) return;
  md_cuda_decode_scratch s = {.scores = base};
  s.part_max = s.scores + heads * n_keys;
  s.part_sum = s.part_max + chunks * heads;
  s.part_out = s.part_sum + chunks * heads;
  md_cuda_decode_weights f = {
      .write_rows = hook != NULL, .received = capture ? capture->received->data : NULL,
      .weight = capture ? capture->weight : 0.0f,
      .heads_max = capture && capture->heads == MD_CAPTURE_HEADS_MAX};
  md_cuda_attn_decode(&c->ctx, a, &s, max_keys, rope, hook || capture ? &f : NULL);
  if (!hook) return;
  const size_t visible = (size_t)(a->pos0 + 1); /* hooked steps are never recorded */
  const float *rows = rows_to_host(c, s.scores, heads, visible);
  for (size_t h = 0; rows && h < heads; h++)
    hook->on_row(hook->ctx, layer, (int)h, a->pos0, rows + h * visible, (int64_t)visible);
}

/* The hook's rows, a block of query rows at a time. */
static void prefill_hook(md_cuda_kernels *c, const md_cuda_attn_args *a, int layer,
                         const md_attn_hook *hook, const float *row_max, const float *row_sum) {
  const size_t heads = (size_t)a->n_heads, n_keys = (size_t)(a->pos0 + a->n);
  size_t block = MD_CUDA_HOOK_FLOATS / (heads * n_keys);
  if (block < 1) block = 1;
  if (block > (size_t)a->n) block = (size_t)a->n;
  float *device = md_cuda_scratch_get(c, &c->hook_rows, block * heads * n_keys * sizeof(float),
                                      "attention rows for the hook");
  for (int64_t i0 = 0; device && i0 < a->n; i0 += (int64_t)block) {
    int64_t rows = a->n - i0 < (int64_t)block ? a->n - i0 : (int64_t)block;
    md_cuda_attn_prefill_rows(&c->ctx, a, row_max, row_sum, i0, rows, device);
    const float *host = rows_to_host(c, device, (size_t)rows * heads, n_keys);
    if (!host) return;
    for (int64_t r = 0; r < rows; r++) {
      int64_t pos = a->pos0 + i0 + r;
      for (size_t h = 0; h < heads; h++)
        hook->on_row(hook->ctx, layer, (int)h, pos, host + ((size_t)r * heads + h) * n_keys, pos + 1);
    }
  }
}

static void prefill(md_cuda_kernels *c, const md_cuda_attn_args *a, int layer,
                    const md_attn_hook *hook, const md_attn_capture *capture) {
  const size_t heads = (size_t)a->n_heads, n_keys = (size_t)(a->pos0 + a->n);
  const size_t stats = (size_t)a->n * heads, colsum = capture ? heads * n_keys : 0;
  float *base = md_cuda_scratch_get(c, &c->attn, (2 * stats + colsum) * sizeof(float),
                                    "prefill attention");
  if (!base) return;
  float *row_max = base, *row_sum = base + stats, *columns = base + 2 * stats;
  md_cuda_attn_prefill(&c->ctx, a, row_max, row_sum);
  if (capture)
    md_cuda_attn_prefill_colsum(&c->ctx, a, row_max, row_sum, columns, capture->received->data,
                                capture->weight / (float)a->n_heads);
  if (hook) prefill_hook(c, a, layer, hook, row_max, row_sum);
}

static md_cuda_attn_args attn_args(md_kbuf *out, const md_kbuf *q, const md_kbuf *cache,
                                    const md_attn_shape *shape, int64_t pos0, int64_t n) {
  md_cuda_attn_args a = {
      .out = out->data, .q = q->data, .cache = cache->data, .n_heads = shape->n_heads,
      .n_kv_heads = shape->n_kv_heads, .head_dim = shape->head_dim, .capacity = shape->capacity,
      .pos0 = pos0, .n = n, .scale = (float)pow((double)shape->head_dim, -0.5)};
  return a;
}

void md_cuda_op_attention(md_kernels *k, md_kbuf *out, const md_kbuf *q, const md_kbuf *cache,
                          const md_attn_shape *shape, int64_t pos0, int64_t n,
                          const md_attn_hook *hook, const md_attn_capture *capture) {
  md_cuda_kernels *c = md_cuda_of(k);
  if (capture && !capture->received) capture = NULL;
  if (hook && !hook->on_row) hook = NULL;
  MD_CUDA_LOG_OR_RUN(c, op, MD_CUDA_OP_ATTENTION, op.out = out; op.in = q; op.in2 = cache;
                     op.shape = *shape; op.offset = (size_t)pos0; op.n = n;
                     if (capture) op.capture = *capture;
                     if (hook) op.hook = *hook);
  if (!attention_args_ok(c, out, q, cache, shape, pos0, n, capture) || !md_cuda_enter(c)) return;
  md_cuda_guard_write(c, out);
  if (capture) md_cuda_guard_write(c, capture->received);
  md_cuda_attn_args a = attn_args(out, q, cache, shape, pos0, n);
  if (n == 1) decode(c, &a, shape->layer, shape->capacity, hook, capture, NULL);
  else prefill(c, &a, shape->layer, hook, capture);
}

/* ---- fused decode operations (fuse.c finds them in a logged step) ---------------- */

void md_cuda_fused_attention(md_cuda_kernels *c, const md_cuda_op *rope, const md_cuda_op *store,
                             const md_cuda_op *attn, int64_t pos, int64_t slot) {
  const md_attn_shape *shape = &attn->shape;
  const int hd = shape->head_dim;
  const md_attn_capture *capture = attn->capture.received ? &attn->capture : NULL;
  if (!attention_args_ok(c, attn->out, attn->in, attn->in2, shape, slot, 1, capture)) return;
  const size_t kv_row = (size_t)shape->n_kv_heads * (size_t)hd;
  if (!md_cuda_fits(c, "rope", "k", rope->out2, kv_row) ||
      !md_cuda_fits(c, "kv_store", "value", store->in2, kv_row) || !md_cuda_enter(c))
    return;
  const float *inv_freq = md_cuda_rope_table(c, hd, rope->theta);
  if (!inv_freq) return;
  md_cuda_guard_write(c, rope->out);
  md_cuda_guard_write(c, rope->out2);
  md_cuda_guard_write(c, store->out);
  md_cuda_guard_write(c, attn->out);
  if (capture) md_cuda_guard_write(c, capture->received);
  md_cuda_attn_args a = attn_args(attn->out, attn->in, attn->in2, shape, slot, 1);
  md_cuda_decode_rope r = {.inv_freq = inv_freq, .key = rope->out2->data, .value = store->in2->data,
                           .pos = pos, .pos_dev = c->capturing ? md_cuda_step_pos_dev(c) : NULL};
  decode(c, &a, shape->layer, shape->capacity, NULL, capture, &r);
}

void md_cuda_fused_gemv(md_cuda_kernels *c, const md_cuda_op *norm, const md_cuda_op *const *products,
                        int count, md_cuda_gemv_epilogue epilogue, const md_cuda_op *tail) {
  const md_kbuf *x = norm ? norm->in : products[0]->in;
  const int64_t cols = products[0]->w->cols;
  md_cuda_gemv_args g = {.count = count, .dtype = products[0]->w->dtype, .cols = cols,
                         .x = x->data, .epilogue = epilogue};
  if (norm && (!md_cuda_fits(c, "rmsnorm", "x", x, (size_t)cols) ||
               !md_cuda_fits(c, "rmsnorm", "out", norm->out, (size_t)cols)))
    return;
  for (int m = 0; m < count; m++) {
    const md_cuda_op *p = products[m];
    if (!matmul_args_ok(c, p->out, p->in, p->w, p->w2, 1)) return;
    g.w[m] = p->w->data;
    g.rows[m] = p->w->rows;
    g.bias[m] = p->w2 ? p->w2->data : NULL;
    g.y[m] = p->out->data;
  }
  /* The tail's own checks: add (x += y) or swiglu (gate, up). */
  const bool add = epilogue == MD_CUDA_GEMV_RESIDUAL;
  if (tail && (!md_cuda_fits(c, add ? "add" : "swiglu", add ? "x" : "gate", tail->out, tail->count) ||
               !md_cuda_fits(c, add ? "add" : "swiglu", add ? "y" : "up", tail->in, tail->count)))
    return;
  if (!md_cuda_enter(c)) return;
  if (norm) {
    g.norm_weight = norm->w->data;
    g.eps = norm->eps;
    g.norm_out = norm->out->data;
    md_cuda_guard_write(c, norm->out);
  }
  for (int m = 0; m < count; m++) md_cuda_guard_write(c, products[m]->out);
  if (epilogue == MD_CUDA_GEMV_RESIDUAL) {
    g.residual = tail->out->data;
    md_cuda_guard_write(c, tail->out);
  }
  md_cuda_gemv_fused(&c->ctx, &g);
}
