/* The CUDA back end's ops table: the instance (device checks, streams,
 * cuBLAS), device buffers, overlapped reads, weights and the element-wise
 * operations. Matrix products and attention are in compute.c, the kernels
 * in the .cu files. Design notes: kernels/cuda/cuda.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/backend.h"

#define CHECK(c, call) MD_CUDA_CHECK(&(c)->ctx, call)

/* ---- failures and bookkeeping ----------------------------------------------- */

/* Hands the recorded failure (if any) to the caller and clears it. */
static md_status report(md_cuda_kernels *c, md_error *err) {
  md_status status = c->ctx.status;
  if (status == MD_OK) return MD_OK;
  if (err) *err = c->ctx.error;
  c->ctx.status = MD_OK;
  return status;
}

/* After the compute stream has drained: an F16 prefill product whose
 * activations did not fit F16 is a failure, not a row of infinities. */
static void check_overflow(md_cuda_kernels *c) {
  if (!c->overflow_armed || c->ctx.status != MD_OK) return;
  int flag = 0;
  if (!CHECK(c, cudaMemcpyAsync(&flag, c->overflow, sizeof flag, cudaMemcpyDeviceToHost, c->ctx.stream)) ||
      !CHECK(c, cudaStreamSynchronize(c->ctx.stream)))
    return;
  c->overflow_armed = false;
  if (!flag) return;
  CHECK(c, cudaMemsetAsync(c->overflow, 0, sizeof(int), c->ctx.stream));
  md_cuda_fail(&c->ctx, MD_E_NUMERIC,
               "cuda:%d: prefill activations exceed the float16 range (|x| > 65504) in a product "
               "with F16 weights; use the exact GEMM mode (fp32) for this model",
               c->ctx.device);
}

/* Waits for the queued work and reports what failed. */
static md_status drain(md_cuda_kernels *c, md_error *err) {
  if (c->ctx.status == MD_OK && CHECK(c, cudaStreamSynchronize(c->ctx.stream))) check_overflow(c);
  return report(c, err);
}

bool md_cuda_enter(md_cuda_kernels *c) {
  if (c->ctx.status != MD_OK) return false;
  return CHECK(c, cudaSetDevice(c->ctx.device));
}

bool md_cuda_fits(md_cuda_kernels *c, const char *op, const char *name, const md_kbuf *buf,
                  size_t floats) {
  if (buf && buf->n >= floats) return true;
  md_cuda_fail(&c->ctx, MD_E_INVALID, "cuda kernels: %s: %s holds %zu floats, the operation needs %zu",
               op, name, buf ? buf->n : 0, floats);
  return false;
}

/* The buffer that owns buf's memory (buf itself unless a view). */
static const md_kbuf *owner_of(const md_kbuf *buf) { return buf && buf->owner ? buf->owner : buf; }

void md_cuda_guard_write(md_cuda_kernels *c, const md_kbuf *buf) {
  /* A read of any part of the memory (the buffer or a view of it) is waited
   * for: a view and its buffer overlap. */
  for (int i = 0; i < MD_KERNELS_READ_SLOTS; i++) {
    md_cuda_read_slot *slot = &c->slots[i];
    if (slot->pending && !slot->guarded && owner_of(slot->buf) == owner_of(buf)) {
      CHECK(c, cudaStreamWaitEvent(c->ctx.stream, slot->done, 0));
      slot->guarded = true;
    }
  }
}

void *md_cuda_scratch_get(md_cuda_kernels *c, md_cuda_scratch *s, size_t bytes, const char *what) {
  if (s->bytes >= bytes) return s->ptr;
  size_t grown = s->bytes + s->bytes / 2; /* geometric: decode scratch grows a key at a time */
  if (grown < bytes) grown = bytes;
  /* Queued kernels may still use the old block, and recorded steps hold
   * its address. */
  if (s->ptr && (!CHECK(c, cudaStreamSynchronize(c->ctx.stream)) || !CHECK(c, cudaFree(s->ptr))))
    return NULL;
  if (s->ptr) md_cuda_graphs_forget(c);
  s->ptr = NULL;
  s->bytes = 0;
  void *ptr = NULL;
  if (cudaMalloc(&ptr, grown) != cudaSuccess) {
    (void)cudaGetLastError();
    md_cuda_fail(&c->ctx, MD_E_NOMEM, "cuda:%d: cannot allocate %zu bytes of device memory for %s",
                 c->ctx.device, grown, what);
    return NULL;
  }
  s->ptr = ptr;
  s->bytes = grown;
  return ptr;
}

static void scratch_free(md_cuda_scratch *s) {
  if (s->ptr) cudaFree(s->ptr);
  s->ptr = NULL;
  s->bytes = 0;
}

static bool range_ok(const md_kbuf *buf, size_t offset, size_t n) {
  return offset <= buf->n && n <= buf->n - offset;
}

/* buf_read and buf_read_start: MD_OK when [offset, offset + n) lies
 * within buf, else MD_E_INVALID with the message in err. */
static md_status read_range_check(const md_kbuf *buf, size_t offset, size_t n, md_error *err) {
  if (range_ok(buf, offset, n)) return MD_OK;
  return md_fail(err, MD_E_INVALID, "cuda kernels: read of [%zu, %zu) from a buffer of %zu floats",
                 offset, offset + n, buf->n);
}

/* ---- memory ------------------------------------------------------------------- */

static md_status cuda_buf_new(md_kernels *k, size_t n, md_kbuf **out, md_error *err) {
  md_cuda_kernels *c = md_cuda_of(k);
  md_cuda_flush_log(c);
  if (!md_cuda_enter(c)) return report(c, err);
  md_kbuf *buf = calloc(1, sizeof *buf);
  if (!buf) return md_fail(err, MD_E_NOMEM, "cuda kernels: out of memory");
  size_t bytes = (n ? n : 1) * sizeof(float);
  if (cudaMalloc((void **)&buf->data, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    free(buf);
    return md_fail(err, MD_E_NOMEM,
                   "cuda:%d: cannot allocate a buffer of %zu floats (%.1f MiB; %.1f of %.1f MiB "
                   "free on the device)",
                   c->ctx.device, n, (double)bytes / 1048576.0, (double)free_bytes / 1048576.0,
                   (double)total_bytes / 1048576.0);
  }
  buf->n = n;
  if (!CHECK(c, cudaMemsetAsync(buf->data, 0, bytes, c->ctx.stream))) {
    cudaFree(buf->data);
    free(buf);
    return report(c, err);
  }
  *out = buf;
  return MD_OK;
}

static void cuda_buf_free(md_kernels *k, md_kbuf *buf) {
  md_cuda_kernels *c = md_cuda_of(k);
  if (!buf) return;
  md_cuda_flush_log(c);
  for (int i = 0; i < MD_KERNELS_READ_SLOTS; i++)
    if (c->slots[i].pending && c->slots[i].buf == buf) {
      CHECK(c, cudaEventSynchronize(c->slots[i].done));
      c->slots[i].buf = NULL; /* the read still completes into dst at finish */
    }
  md_cuda_graphs_forget_uses(c, buf, NULL);
  if (buf->owner) { /* a view: the memory is its owner's */
    free(buf);
    return;
  }
  CHECK(c, cudaStreamSynchronize(c->ctx.stream));
  cudaFree(buf->data);
  free(buf);
}

static md_status cuda_buf_view(md_kernels *k, md_kbuf *buf, size_t offset, size_t n, md_kbuf **view,
                               md_error *err) {
  (void)k; /* a view is host bookkeeping: no device work */
  if (!range_ok(buf, offset, n))
    return md_fail(err, MD_E_INVALID, "cuda kernels: a view of [%zu, %zu) of a buffer of %zu floats",
                   offset, offset + n, buf->n);
  md_kbuf *v = calloc(1, sizeof *v);
  if (!v) return md_fail(err, MD_E_NOMEM, "cuda kernels: out of memory");
  v->data = buf->data + offset;
  v->n = n;
  v->owner = (md_kbuf *)owner_of(buf);
  *view = v;
  return MD_OK;
}

static md_status cuda_buf_read(md_kernels *k, const md_kbuf *buf, size_t offset, size_t n,
                               float *dst, md_error *err) {
  md_cuda_kernels *c = md_cuda_of(k);
  md_cuda_flush_log(c);
  if (read_range_check(buf, offset, n, err) != MD_OK) return MD_E_INVALID;
  if (md_cuda_enter(c) && n > 0)
    CHECK(c, cudaMemcpyAsync(dst, buf->data + offset, n * sizeof(float), cudaMemcpyDeviceToHost,
                             c->ctx.stream));
  return drain(c, err);
}

/* From pageable memory, cudaMemcpyAsync returns once src has been staged:
 * src may be reused at once, and the copy is ordered with the kernels. */
static md_status cuda_buf_write(md_kernels *k, md_kbuf *buf, size_t offset, size_t n,
                                const float *src, md_error *err) {
  md_cuda_kernels *c = md_cuda_of(k);
  md_cuda_flush_log(c);
  if (!range_ok(buf, offset, n))
    return md_fail(err, MD_E_INVALID, "cuda kernels: write of [%zu, %zu) to a buffer of %zu floats",
                   offset, offset + n, buf->n);
  if (md_cuda_enter(c) && n > 0) {
    md_cuda_guard_write(c, buf);
    CHECK(c, cudaMemcpyAsync(buf->data + offset, src, n * sizeof(float), cudaMemcpyHostToDevice,
                             c->ctx.stream));
  }
  return report(c, err);
}

static void cuda_buf_zero(md_kernels *k, md_kbuf *buf, size_t offset, size_t n) {
  md_cuda_kernels *c = md_cuda_of(k);
  MD_CUDA_LOG_OR_RUN(c, op, MD_CUDA_OP_ZERO, op.out = buf; op.offset = offset; op.count = n);
  if (!range_ok(buf, offset, n)) {
    md_cuda_fail(&c->ctx, MD_E_INVALID, "cuda kernels: zeroing [%zu, %zu) of a buffer of %zu floats",
                 offset, offset + n, buf->n);
    return;
  }
  if (!md_cuda_enter(c) || n == 0) return;
  md_cuda_guard_write(c, buf);
  CHECK(c, cudaMemsetAsync(buf->data + offset, 0, n * sizeof(float), c->ctx.stream));
}

/* ---- overlapped reads ----------------------------------------------------------- */

static md_status slot_check(int slot, md_error *err) {
  if (slot < 0 || slot >= MD_KERNELS_READ_SLOTS)
    return md_fail(err, MD_E_INVALID, "cuda kernels: read slot %d out of range", slot);
  return MD_OK;
}

static bool staging_reserve(md_cuda_kernels *c, md_cuda_read_slot *slot, size_t n) {
  if (slot->staging_floats >= n) return true;
  if (slot->staging) CHECK(c, cudaFreeHost(slot->staging));
  slot->staging = NULL;
  slot->staging_floats = 0;
  if (!CHECK(c, cudaMallocHost((void **)&slot->staging, n * sizeof(float)))) return false;
  slot->staging_floats = n;
  return true;
}

static md_status cuda_buf_read_start(md_kernels *k, const md_kbuf *buf, size_t offset, size_t n,
                                     float *dst, int slot_index, md_error *err) {
  md_cuda_kernels *c = md_cuda_of(k);
  md_cuda_flush_log(c);
  if (slot_check(slot_index, err) != MD_OK) return MD_E_INVALID;
  md_cuda_read_slot *slot = &c->slots[slot_index];
  if (slot->pending)
    return md_fail(err, MD_E_INVALID, "cuda kernels: read slot %d already holds a read", slot_index);
  if (read_range_check(buf, offset, n, err) != MD_OK) return MD_E_INVALID;
  if (!md_cuda_enter(c) || !staging_reserve(c, slot, n ? n : 1)) return report(c, err);
  /* ready: everything queued so far (the values) is done; the copy stream
   * waits for it, copies, and marks done. */
  if (CHECK(c, cudaEventRecord(slot->ready, c->ctx.stream)) &&
      CHECK(c, cudaStreamWaitEvent(c->copy_stream, slot->ready, 0)) &&
      (n == 0 || CHECK(c, cudaMemcpyAsync(slot->staging, buf->data + offset, n * sizeof(float),
                                          cudaMemcpyDeviceToHost, c->copy_stream))) &&
      CHECK(c, cudaEventRecord(slot->done, c->copy_stream))) {
    slot->dst = dst;
    slot->n = n;
    slot->buf = buf;
    slot->pending = true;
    slot->guarded = false;
  }
  return report(c, err);
}

static md_status cuda_buf_read_finish(md_kernels *k, int slot_index, md_error *err) {
  md_cuda_kernels *c = md_cuda_of(k);
  if (slot_check(slot_index, err) != MD_OK) return MD_E_INVALID;
  md_cuda_read_slot *slot = &c->slots[slot_index];
  if (!slot->pending) return report(c, err);
  slot->pending = false;
  if (CHECK(c, cudaEventSynchronize(slot->done)) && slot->n > 0)
    memcpy(slot->dst, slot->staging, slot->n * sizeof(float));
  return report(c, err);
}

/* ---- weights --------------------------------------------------------------------- */

static md_cuda_upload *upload_find(md_cuda_kernels *c, const md_tensor *t) {
  for (md_cuda_upload *u = c->uploads; u; u = u->next)
    if (u->host == t->data && u->nbytes == t->nbytes && u->dtype == t->dtype) return u;
  return NULL;
}

static md_cuda_upload *upload_new(md_cuda_kernels *c, const md_tensor *t, md_error *err) {
  md_cuda_upload *u = calloc(1, sizeof *u);
  if (!u) {
    md_fail(err, MD_E_NOMEM, "cuda kernels: out of memory");
    return NULL;
  }
  if (cudaMalloc(&u->device, t->nbytes ? t->nbytes : 1) != cudaSuccess) {
    (void)cudaGetLastError();
    free(u);
    md_fail(err, MD_E_NOMEM, "cuda:%d: cannot allocate %.1f MiB of device memory for tensor '%s'",
            c->ctx.device, (double)t->nbytes / 1048576.0, t->name ? t->name : "?");
    return NULL;
  }
  if (t->nbytes &&
      !CHECK(c, cudaMemcpy(u->device, t->data, t->nbytes, cudaMemcpyHostToDevice))) {
    cudaFree(u->device);
    free(u);
    report(c, err);
    md_error_prefix(err, "uploading tensor '%s'", t->name ? t->name : "?");
    return NULL;
  }
  u->host = t->data;
  u->nbytes = t->nbytes;
  u->dtype = t->dtype;
  u->next = c->uploads;
  c->uploads = u;
  return u;
}

static md_status weight_1d(md_cuda_kernels *c, const md_tensor *t, md_kweight *w, md_error *err) {
  size_t count = (size_t)t->shape[0];
  float *host = malloc((count ? count : 1) * sizeof(float));
  if (!host) return md_fail(err, MD_E_NOMEM, "cuda kernels: out of memory for '%s'", t->name ? t->name : "?");
  for (size_t i = 0; i < count; i++) {
    if (t->dtype == MD_DTYPE_F32) host[i] = ((const float *)t->data)[i];
    else if (t->dtype == MD_DTYPE_BF16) host[i] = md_bf16_to_f32(((const uint16_t *)t->data)[i]);
    else host[i] = md_f16_to_f32(((const uint16_t *)t->data)[i]);
  }
  void *device = NULL;
  md_status status = MD_OK;
  if (!CHECK(c, cudaMalloc(&device, (count ? count : 1) * sizeof(float))) ||
      !CHECK(c, cudaMemcpy(device, host, count * sizeof(float), cudaMemcpyHostToDevice))) {
    if (device) cudaFree(device);
    status = report(c, err);
    md_error_prefix(err, "tensor '%s'", t->name ? t->name : "?");
  }
  free(host);
  w->data = device;
  w->dtype = MD_DTYPE_F32;
  return status;
}

static md_status cuda_weight_new(md_kernels *k, const md_tensor *t, md_kweight **out, md_error *err) {
  md_cuda_kernels *c = md_cuda_of(k);
  md_cuda_flush_log(c);
  if (t->ndim != 1 && t->ndim != 2)
    return md_fail(err, MD_E_UNSUPPORTED, "cuda kernels: tensor '%s' has %d dimensions, not 1 or 2",
                   t->name ? t->name : "?", t->ndim);
  if (!md_cuda_enter(c)) return report(c, err);
  md_kweight *w = calloc(1, sizeof *w);
  if (!w) return md_fail(err, MD_E_NOMEM, "cuda kernels: out of memory");
  w->dtype = t->dtype;
  w->rows = t->ndim == 2 ? t->shape[0] : 1;
  w->cols = t->ndim == 2 ? t->shape[1] : t->shape[0];
  if (t->ndim == 1) {
    md_status status = weight_1d(c, t, w, err);
    if (status != MD_OK) {
      free(w);
      return status;
    }
  } else {
    w->upload = upload_find(c, t);
    if (!w->upload) w->upload = upload_new(c, t, err);
    if (!w->upload) {
      free(w);
      return err ? err->status : MD_E_DEVICE;
    }
    w->upload->refs++;
    w->data = w->upload->device;
  }
  *out = w;
  return MD_OK;
}

static void cuda_weight_free(md_kernels *k, md_kweight *w) {
  md_cuda_kernels *c = md_cuda_of(k);
  if (!w) return;
  md_cuda_flush_log(c);
  md_cuda_graphs_forget_uses(c, NULL, w);
  CHECK(c, cudaStreamSynchronize(c->ctx.stream));
  if (!w->upload) {
    cudaFree((void *)w->data);
  } else if (--w->upload->refs == 0) {
    for (md_cuda_upload **p = &c->uploads; *p; p = &(*p)->next)
      if (*p == w->upload) {
        *p = w->upload->next;
        break;
      }
    cudaFree(w->upload->device);
    free(w->upload);
  }
  free(w);
}

/* ---- element-wise and per-row ops --------------------------------------------------- */

/* The token ids go through pinned staging (so the copy is asynchronous);
 * the staging is rewritten only after the previous copy from it is done.
 * In a recorded step the id comes from the replay's pinned parameters. */
static void cuda_embed(md_kernels *k, md_kbuf *x, const md_kweight *table, const int32_t *tokens,
                       int64_t n) {
  md_cuda_kernels *c = md_cuda_of(k);
  MD_CUDA_LOG_OR_RUN(c, op, MD_CUDA_OP_EMBED, op.out = x; op.w = table; op.tokens = tokens;
                     op.n = n);
  if (n <= 0 || !md_cuda_fits(c, "embed", "x", x, (size_t)n * (size_t)table->cols) ||
      !md_cuda_enter(c))
    return;
  md_cuda_guard_write(c, x);
  if (c->capturing) {
    int32_t *device = md_cuda_scratch_get(c, &c->tokens, sizeof(int32_t), "token ids");
    if (device && CHECK(c, cudaMemcpyAsync(device, &c->step_params->token, sizeof(int32_t),
                                           cudaMemcpyHostToDevice, c->ctx.stream)))
      md_cuda_embed(&c->ctx, x->data, table->data, table->dtype, device, 1, table->cols);
    return;
  }
  if (!CHECK(c, cudaEventSynchronize(c->tokens_copied))) return;
  if (c->tokens_pinned_n < (size_t)n) {
    if (c->tokens_pinned) CHECK(c, cudaFreeHost(c->tokens_pinned));
    c->tokens_pinned = NULL;
    c->tokens_pinned_n = 0;
    if (!CHECK(c, cudaMallocHost((void **)&c->tokens_pinned, (size_t)n * sizeof(int32_t)))) return;
    c->tokens_pinned_n = (size_t)n;
  }
  int32_t *device = md_cuda_scratch_get(c, &c->tokens, (size_t)n * sizeof(int32_t), "token ids");
  if (!device) return;
  memcpy(c->tokens_pinned, tokens, (size_t)n * sizeof(int32_t));
  if (!CHECK(c, cudaMemcpyAsync(device, c->tokens_pinned, (size_t)n * sizeof(int32_t),
                                cudaMemcpyHostToDevice, c->ctx.stream)) ||
      !CHECK(c, cudaEventRecord(c->tokens_copied, c->ctx.stream)))
    return;
  md_cuda_embed(&c->ctx, x->data, table->data, table->dtype, device, n, table->cols);
}

static void cuda_rmsnorm(md_kernels *k, md_kbuf *out, const md_kbuf *x, const md_kweight *weight,
                         int64_t n, float eps) {
  md_cuda_kernels *c = md_cuda_of(k);
  MD_CUDA_LOG_OR_RUN(c, op, MD_CUDA_OP_RMSNORM, op.out = out; op.in = x; op.w = weight; op.n = n;
                     op.eps = eps);
  size_t count = (size_t)n * (size_t)weight->cols;
  if (!md_cuda_fits(c, "rmsnorm", "x", x, count) || !md_cuda_fits(c, "rmsnorm", "out", out, count) ||
      !md_cuda_enter(c))
    return;
  md_cuda_guard_write(c, out);
  md_cuda_rmsnorm(&c->ctx, out->data, x->data, weight->data, n, weight->cols, eps);
}

/* inv_freq[i] = 1 / theta^(2i / head_dim) in float32, computed here with
 * the same expression as the CPU back end so that both see the same bits. */
const float *md_cuda_rope_table(md_cuda_kernels *c, int head_dim, double theta) {
  if (c->inv_freq && c->inv_freq_dim == head_dim && c->inv_freq_theta == theta) return c->inv_freq;
  int half = head_dim / 2;
  float *host = malloc((size_t)half * sizeof(float));
  if (!host) {
    md_cuda_fail(&c->ctx, MD_E_NOMEM, "cuda kernels: out of memory");
    return NULL;
  }
  for (int i = 0; i < half; i++) host[i] = 1.0f / powf((float)theta, (float)(2 * i) / (float)head_dim);
  const float *result = NULL;
  if (CHECK(c, cudaStreamSynchronize(c->ctx.stream))) { /* the old table may still be in use */
    if (c->inv_freq) {
      cudaFree(c->inv_freq);
      md_cuda_graphs_forget(c); /* recorded steps read the old table */
    }
    c->inv_freq = NULL;
    if (CHECK(c, cudaMalloc((void **)&c->inv_freq, (size_t)half * sizeof(float))) &&
        CHECK(c, cudaMemcpy(c->inv_freq, host, (size_t)half * sizeof(float), cudaMemcpyHostToDevice))) {
      c->inv_freq_dim = head_dim;
      c->inv_freq_theta = theta;
      result = c->inv_freq;
    }
  }
  free(host);
  return result;
}

static void cuda_rope(md_kernels *k, md_kbuf *q, md_kbuf *kk, int64_t n, int n_heads,
                      int n_kv_heads, int head_dim, int64_t pos0, double theta) {
  md_cuda_kernels *c = md_cuda_of(k);
  MD_CUDA_LOG_OR_RUN(c, op, MD_CUDA_OP_ROPE, op.out = q; op.out2 = kk; op.n = n;
                     op.ints[0] = n_heads; op.ints[1] = n_kv_heads; op.ints[2] = head_dim;
                     op.offset = (size_t)pos0; op.theta = theta);
  if (head_dim <= 0 || head_dim % 2 != 0) {
    md_cuda_fail(&c->ctx, MD_E_INVALID, "cuda kernels: rope: head_dim %d is not even", head_dim);
    return;
  }
  if (!md_cuda_fits(c, "rope", "q", q, (size_t)n * (size_t)n_heads * (size_t)head_dim) ||
      !md_cuda_fits(c, "rope", "k", kk, (size_t)n * (size_t)n_kv_heads * (size_t)head_dim) ||
      !md_cuda_enter(c))
    return;
  const float *inv_freq = md_cuda_rope_table(c, head_dim, theta);
  if (!inv_freq) return;
  md_cuda_guard_write(c, q);
  md_cuda_guard_write(c, kk);
  md_cuda_rope(&c->ctx, q->data, kk->data, inv_freq, n, n_heads, n_kv_heads, head_dim, pos0,
               c->capturing ? md_cuda_step_pos_dev(c) : NULL);
}

static void cuda_kv_store(md_kernels *k, md_kbuf *cache, const md_kbuf *key, const md_kbuf *value,
                          const md_attn_shape *s, int64_t pos0, int64_t n) {
  md_cuda_kernels *c = md_cuda_of(k);
  MD_CUDA_LOG_OR_RUN(c, op, MD_CUDA_OP_KV_STORE, op.out = cache; op.in = key; op.in2 = value;
                     op.shape = *s; op.offset = (size_t)pos0; op.n = n);
  size_t row = (size_t)s->n_kv_heads * (size_t)s->head_dim;
  if (pos0 < 0 || pos0 + n > s->capacity) {
    md_cuda_fail(&c->ctx, MD_E_INVALID,
                 "cuda kernels: kv_store of positions [%lld, %lld) beyond the capacity %lld",
                 (long long)pos0, (long long)(pos0 + n), (long long)s->capacity);
    return;
  }
  if (!md_cuda_fits(c, "kv_store", "cache", cache, 2 * row * (size_t)s->capacity) ||
      !md_cuda_fits(c, "kv_store", "key", key, (size_t)n * row) ||
      !md_cuda_fits(c, "kv_store", "value", value, (size_t)n * row) || !md_cuda_enter(c))
    return;
  md_cuda_guard_write(c, cache);
  md_cuda_kv_store(&c->ctx, cache->data, key->data, value->data, s->n_kv_heads, s->head_dim,
                   s->capacity, pos0, c->capturing ? md_cuda_step_slot_dev(c) : NULL, n);
}

/* Through scratch: the kept rows (from the first that moves) are gathered
 * out of the cache, then copied back to their new slots, two launches that
 * are correct whatever order their blocks run in. The indices go through
 * cudaMemcpyAsync from pageable memory, which returns once they are staged.
 * Called between steps, never logged (kernels.h). */
static void cuda_kv_compact(md_kernels *k, md_kbuf *cache, const md_attn_shape *s,
                            const int64_t *keep, int64_t n_keep) {
  md_cuda_kernels *c = md_cuda_of(k);
  md_cuda_flush_log(c);
  const int64_t cap = s->capacity;
  bool ok = n_keep >= 0 && n_keep <= cap && s->n_kv_heads > 0 && s->head_dim > 0;
  for (int64_t j = 0; ok && j < n_keep; j++) ok = keep[j] >= (j ? keep[j - 1] + 1 : 0) && keep[j] < cap;
  if (!ok) {
    md_cuda_fail(&c->ctx, MD_E_INVALID,
                 "cuda kernels: kv_compact: %lld slots to keep are not ascending slots below the "
                 "capacity %lld",
                 (long long)n_keep, (long long)cap);
    return;
  }
  const int planes = 2 * s->n_kv_heads;
  const size_t hd = (size_t)s->head_dim;
  if (!md_cuda_fits(c, "kv_compact", "cache", cache, (size_t)planes * (size_t)cap * hd) ||
      !md_cuda_enter(c))
    return;
  int64_t first = 0;
  while (first < n_keep && keep[first] == first) first++;
  const int64_t moved = n_keep - first;
  if (moved == 0) return;
  float *rows = md_cuda_scratch_get(c, &c->compact, (size_t)planes * (size_t)moved * hd * sizeof(float),
                                    "KV cache compaction");
  int64_t *index = md_cuda_scratch_get(c, &c->compact_rows, (size_t)moved * sizeof(int64_t),
                                       "KV cache compaction indices");
  if (!rows || !index) return;
  md_cuda_guard_write(c, cache);
  if (!CHECK(c, cudaMemcpyAsync(index, keep + first, (size_t)moved * sizeof(int64_t),
                                cudaMemcpyHostToDevice, c->ctx.stream)))
    return;
  md_cuda_rows_gather(&c->ctx, rows, moved, cache->data, cap, index, moved, planes, s->head_dim);
  md_cuda_rows_gather(&c->ctx, cache->data + (size_t)first * hd, cap, rows, moved, NULL, moved, planes,
                      s->head_dim);
}

/* swiglu (gate = silu(gate) * up) and add (x += y): in place on `out`, with
 * `in` read; recorded, checked and launched alike. */
typedef void (*elementwise_fn)(md_cuda_ctx *ctx, float *out, const float *in, size_t count);

static void elementwise(md_kernels *k, md_cuda_op_kind kind, const char *name, const char *out_name,
                        const char *in_name, elementwise_fn launch, md_kbuf *out,
                        const md_kbuf *in, size_t count) {
  md_cuda_kernels *c = md_cuda_of(k);
  MD_CUDA_LOG_OR_RUN(c, op, kind, op.out = out; op.in = in; op.count = count);
  if (!md_cuda_fits(c, name, out_name, out, count) || !md_cuda_fits(c, name, in_name, in, count) ||
      !md_cuda_enter(c))
    return;
  md_cuda_guard_write(c, out);
  launch(&c->ctx, out->data, in->data, count);
}

static void cuda_swiglu(md_kernels *k, md_kbuf *gate, const md_kbuf *up, size_t count) {
  elementwise(k, MD_CUDA_OP_SWIGLU, "swiglu", "gate", "up", md_cuda_swiglu, gate, up, count);
}

static void cuda_add(md_kernels *k, md_kbuf *x, const md_kbuf *y, size_t count) {
  elementwise(k, MD_CUDA_OP_ADD, "add", "x", "y", md_cuda_add, x, y, count);
}

static void cuda_logits(md_kernels *k, md_kbuf *logits, const md_kbuf *x, int64_t row,
                        const md_kweight *norm, const md_kweight *lm_head, float eps) {
  md_cuda_kernels *c = md_cuda_of(k);
  MD_CUDA_LOG_OR_RUN(c, op, MD_CUDA_OP_LOGITS, op.out = logits; op.in = x; op.row = row;
                     op.w = norm; op.w2 = lm_head; op.eps = eps);
  size_t dim = (size_t)norm->cols;
  if (row < 0 || !md_cuda_fits(c, "logits", "x", x, ((size_t)row + 1) * dim) ||
      !md_cuda_fits(c, "logits", "logits", logits, (size_t)lm_head->rows) || !md_cuda_enter(c))
    return;
  md_cuda_guard_write(c, logits);
  /* The final norm and the LM head in one launch: every block normalises
   * the row into shared memory (rmsnorm's bits) before its rows. */
  md_cuda_gemv_args g = {.count = 1, .w = {lm_head->data}, .rows = {lm_head->rows},
                         .y = {logits->data}, .dtype = lm_head->dtype, .cols = lm_head->cols,
                         .x = x->data + (size_t)row * dim, .norm_weight = norm->data, .eps = eps};
  md_cuda_gemv_fused(&c->ctx, &g);
}

static md_status cuda_argmax(md_kernels *k, const md_kbuf *v, size_t n, int64_t *index,
                             md_error *err) {
  md_cuda_kernels *c = md_cuda_of(k);
  md_cuda_flush_log(c);
  if (n == 0 || n > v->n)
    return md_fail(err, MD_E_INVALID, "cuda kernels: argmax over %zu of %zu floats", n, v->n);
  if (md_cuda_enter(c)) {
    md_cuda_argmax(&c->ctx, v->data, (int64_t)n, c->argmax_index, &c->argmax_blocks);
    if (c->ctx.status == MD_OK)
      CHECK(c, cudaMemcpyAsync(c->argmax_host, c->argmax_index, sizeof(int64_t),
                               cudaMemcpyDeviceToHost, c->ctx.stream));
  }
  md_status status = drain(c, err);
  if (status == MD_OK) *index = *c->argmax_host;
  return status;
}

/* greedy_rows: logits_rows, then every row's first largest in one launch
 * (argmax's choice) and one copy of the n tokens, instead of a launch, a
 * copy and a wait per row. */
static md_status cuda_greedy_rows(md_kernels *k, int64_t *index, md_kbuf *logits,
                                  const md_kbuf *x, int64_t n, const md_kweight *norm,
                                  const md_kweight *lm_head, float eps, md_error *err) {
  md_cuda_kernels *c = md_cuda_of(k);
  size_t vocab = (size_t)lm_head->rows;
  if (n < 1 || (size_t)n * vocab > logits->n)
    return md_fail(err, MD_E_INVALID, "cuda kernels: greedy tokens of %lld rows of %zu logits in "
                   "%zu floats", (long long)n, vocab, logits->n);
  md_cuda_op_logits_rows(k, logits, x, n, norm, lm_head, eps);
  size_t bytes = (size_t)n * sizeof(int64_t);
  if (md_cuda_enter(c)) {
    int64_t *device = md_cuda_scratch_get(c, &c->greedy, bytes, "greedy tokens");
    if (device && c->greedy_host_n < (size_t)n) {
      /* the queued work may still write the old copy: wait before freeing it
       * (after a failed wait it stays, for cuda_destroy) */
      if (c->greedy_host && CHECK(c, cudaStreamSynchronize(c->ctx.stream))) {
        CHECK(c, cudaFreeHost(c->greedy_host));
        c->greedy_host = NULL;
        c->greedy_host_n = 0;
      }
      if (c->ctx.status == MD_OK && CHECK(c, cudaMallocHost((void **)&c->greedy_host, bytes)))
        c->greedy_host_n = (size_t)n;
    }
    if (device && c->ctx.status == MD_OK) {
      md_cuda_argmax_rows(&c->ctx, logits->data, n, (int64_t)vocab, device);
      if (c->ctx.status == MD_OK)
        CHECK(c, cudaMemcpyAsync(c->greedy_host, device, bytes, cudaMemcpyDeviceToHost,
                                 c->ctx.stream));
    }
  }
  md_status status = drain(c, err);
  if (status == MD_OK) memcpy(index, c->greedy_host, bytes);
  return status;
}

static md_status cuda_sync(md_kernels *k, md_error *err) {
  md_cuda_kernels *c = md_cuda_of(k);
  md_cuda_flush_log(c);
  if (c->ctx.status == MD_OK) md_cuda_enter(c);
  return drain(c, err);
}

/* ---- the instance ----------------------------------------------------------------------- */

static void cuda_destroy(md_kernels *k) {
  md_cuda_kernels *c = md_cuda_of(k);
  cudaSetDevice(c->ctx.device);
  if (c->ctx.stream) cudaStreamSynchronize(c->ctx.stream);
  if (c->copy_stream) cudaStreamSynchronize(c->copy_stream);
  for (int i = 0; i < MD_KERNELS_READ_SLOTS; i++) {
    if (c->slots[i].staging) cudaFreeHost(c->slots[i].staging);
    if (c->slots[i].ready) cudaEventDestroy(c->slots[i].ready);
    if (c->slots[i].done) cudaEventDestroy(c->slots[i].done);
  }
  md_cuda_scratch *scratch[] = {&c->half_act, &c->f32_tiles,    &c->attn,      &c->hook_rows,
                                &c->tokens,   &c->compact,      &c->compact_rows, &c->norm_rows,
                                &c->greedy};
  for (size_t i = 0; i < sizeof scratch / sizeof scratch[0]; i++) scratch_free(scratch[i]);
  while (c->uploads) { /* weights the caller did not free */
    md_cuda_upload *next = c->uploads->next;
    cudaFree(c->uploads->device);
    free(c->uploads);
    c->uploads = next;
  }
  free(c->hook_host);
  if (c->tokens_pinned) cudaFreeHost(c->tokens_pinned);
  if (c->tokens_copied) cudaEventDestroy(c->tokens_copied);
  if (c->inv_freq) cudaFree(c->inv_freq);
  if (c->overflow) cudaFree(c->overflow);
  if (c->argmax_index) cudaFree(c->argmax_index);
  if (c->argmax_blocks.block_value) cudaFree(c->argmax_blocks.block_value);
  if (c->argmax_blocks.block_index) cudaFree(c->argmax_blocks.block_index);
  if (c->argmax_blocks.done) cudaFree(c->argmax_blocks.done);
  if (c->argmax_host) cudaFreeHost(c->argmax_host);
  if (c->greedy_host) cudaFreeHost(c->greedy_host);
  md_cuda_graphs_free(c);
  if (c->blas) cublasDestroy(c->blas);
  if (c->copy_stream) cudaStreamDestroy(c->copy_stream);
  if (c->ctx.stream) cudaStreamDestroy(c->ctx.stream);
  free(c);
}

/* One line: the device, its memory and capability (made when it opened). */
static void cuda_describe(const md_kernels *k, int threads, char *text, size_t size) {
  (void)threads;
  if (size) snprintf(text, size, "%s\n", ((const md_cuda_kernels *)k)->description);
}

static const md_kernel_ops cuda_ops = {
  .name = "cuda",
  .destroy = cuda_destroy,
  .buf_new = cuda_buf_new,
  .buf_free = cuda_buf_free,
  .buf_read = cuda_buf_read,
  .buf_write = cuda_buf_write,
  .buf_zero = cuda_buf_zero,
  .buf_read_start = cuda_buf_read_start,
  .buf_read_finish = cuda_buf_read_finish,
  .buf_view = cuda_buf_view,
  .weight_new = cuda_weight_new,
  .weight_free = cuda_weight_free,
  .embed = cuda_embed,
  .rmsnorm = cuda_rmsnorm,
  .matmul = md_cuda_op_matmul,
  .matmul_rows = md_cuda_op_matmul_rows,
  .logits_rows = md_cuda_op_logits_rows,
  .rope = cuda_rope,
  .kv_store = cuda_kv_store,
  .kv_compact = cuda_kv_compact,
  .attention = md_cuda_op_attention,
  .swiglu = cuda_swiglu,
  .add = cuda_add,
  .logits = cuda_logits,
  .argmax = cuda_argmax,
  .greedy_rows = cuda_greedy_rows,
  .sync = cuda_sync,
  .step_begin = md_cuda_step_begin,
  .step_end = md_cuda_step_end,
  .describe = cuda_describe,
};

/* The device the back end may use, or why none: the checks a user on a
 * machine without a usable GPU sees, in the order they can fail. */
static md_status pick_device(int device, struct cudaDeviceProp *prop, md_error *err) {
  int count = 0;
  cudaError_t code = cudaGetDeviceCount(&count);
  if (code != cudaSuccess) {
    (void)cudaGetLastError();
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    return md_fail(err, MD_E_DEVICE,
                   "cuda:%d: no usable CUDA device: cudaGetDeviceCount failed: %s (%s)%s", device,
                   cudaGetErrorString(code), cudaGetErrorName(code),
                   code == cudaErrorInsufficientDriver
                       ? "; is an NVIDIA driver installed, new enough for this CUDA runtime?"
                       : "");
  }
  if (count == 0) return md_fail(err, MD_E_DEVICE, "cuda:%d: no CUDA device found", device);
  if (device >= count)
    return md_fail(err, MD_E_DEVICE,
                   "cuda:%d: no such device: this machine has %d CUDA device%s (cuda:0 to cuda:%d)",
                   device, count, count == 1 ? "" : "s", count - 1);
  code = cudaGetDeviceProperties(prop, device);
  if (code != cudaSuccess) {
    (void)cudaGetLastError();
    return md_fail(err, MD_E_DEVICE, "cuda:%d: cudaGetDeviceProperties failed: %s (%s)", device,
                   cudaGetErrorString(code), cudaGetErrorName(code));
  }
  if (prop->major < 8)
    return md_fail(err, MD_E_DEVICE,
                   "cuda:%d: %s has compute capability %d.%d; the CUDA back end needs 8.0 or newer "
                   "(Ampere or later)",
                   device, prop->name, prop->major, prop->minor);
  return MD_OK;
}

/* A switch from the environment: `fallback` when unset or empty, else on
 * unless set to 0. */
static bool env_on(const char *name, bool fallback) {
  const char *value = getenv(name);
  if (!value || !value[0]) return fallback;
  return strcmp(value, "0") != 0;
}

/* Streams, events, cuBLAS and the small fixed buffers; false with a
 * recorded failure. */
static bool create_resources(md_cuda_kernels *c) {
  if (!CHECK(c, cudaSetDevice(c->ctx.device)) ||
      !CHECK(c, cudaStreamCreateWithFlags(&c->ctx.stream, cudaStreamNonBlocking)) ||
      !CHECK(c, cudaStreamCreateWithFlags(&c->copy_stream, cudaStreamNonBlocking)) ||
      !CHECK(c, cudaEventCreateWithFlags(&c->tokens_copied, cudaEventDisableTiming)) ||
      !CHECK(c, cudaEventCreateWithFlags(&c->graph_done, cudaEventDisableTiming)))
    return false;
  for (int i = 0; i < MD_KERNELS_READ_SLOTS; i++)
    if (!CHECK(c, cudaEventCreateWithFlags(&c->slots[i].ready, cudaEventDisableTiming)) ||
        !CHECK(c, cudaEventCreateWithFlags(&c->slots[i].done, cudaEventDisableTiming)))
      return false;
  cublasStatus_t blas = cublasCreate(&c->blas);
  if (blas != CUBLAS_STATUS_SUCCESS) {
    c->blas = NULL;
    md_cuda_fail(&c->ctx, MD_E_DEVICE, "cuda:%d: cublasCreate failed: %s (%s)", c->ctx.device,
                 cublasGetStatusString(blas), cublasGetStatusName(blas));
    return false;
  }
  if (cublasSetStream(c->blas, c->ctx.stream) != CUBLAS_STATUS_SUCCESS ||
      cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS) {
    md_cuda_fail(&c->ctx, MD_E_DEVICE, "cuda:%d: cannot set up the cuBLAS handle", c->ctx.device);
    return false;
  }
  if (!CHECK(c, cudaMalloc((void **)&c->overflow, sizeof(int))) ||
      !CHECK(c, cudaMemset(c->overflow, 0, sizeof(int))) ||
      !CHECK(c, cudaMalloc((void **)&c->argmax_index, sizeof(int64_t))) ||
      !CHECK(c, cudaMallocHost((void **)&c->argmax_host, sizeof(int64_t))) ||
      !CHECK(c, cudaMalloc((void **)&c->argmax_blocks.block_value, MD_CUDA_ARGMAX_BLOCKS * sizeof(float))) ||
      !CHECK(c, cudaMalloc((void **)&c->argmax_blocks.block_index, MD_CUDA_ARGMAX_BLOCKS * sizeof(int64_t))) ||
      !CHECK(c, cudaMalloc((void **)&c->argmax_blocks.done, sizeof(unsigned))) ||
      !CHECK(c, cudaMemset(c->argmax_blocks.done, 0, sizeof(unsigned))))
    return false;
  md_cuda_attention_init(&c->ctx);
  md_cuda_gemv_init(&c->ctx);
  return c->ctx.status == MD_OK;
}

md_status md_kernels_cuda_new(const md_cuda_options *options, md_kernels **k, md_error *err) {
  md_cuda_options defaults = {0};
  if (!options) options = &defaults;
  if (options->device < 0)
    return md_fail(err, MD_E_INVALID, "cuda:%d: a device number is at least 0", options->device);
  if (options->gemm != MD_CUDA_GEMM_FAST && options->gemm != MD_CUDA_GEMM_EXACT &&
      options->gemm != MD_CUDA_GEMM_TF32)
    return md_fail(err, MD_E_INVALID, "cuda kernels: unknown GEMM mode %d", (int)options->gemm);
  const char *gemv = getenv("MD_CUDA_GEMV");
  if (gemv && *gemv && strcmp(gemv, "groups") != 0 && strcmp(gemv, "rows") != 0)
    return md_fail(err, MD_E_INVALID, "MD_CUDA_GEMV is '%s'; expected groups or rows", gemv);
  struct cudaDeviceProp prop;
  md_status status = pick_device(options->device, &prop, err);
  if (status != MD_OK) return status;
  md_cuda_kernels *c = calloc(1, sizeof *c);
  if (!c) return md_fail(err, MD_E_NOMEM, "cuda kernels: out of memory");
  c->base.ops = &cuda_ops;
  c->ctx.device = options->device;
  c->ctx.sync_each_launch = options->sync_each_launch || env_on("MD_CUDA_SYNC", false);
  /* A graph cannot be captured while every launch synchronises. */
  c->graphs = !options->no_graphs && env_on("MD_CUDA_GRAPHS", true) && !c->ctx.sync_each_launch;
  /* Programmatic launches need Hopper (compute capability 9.0). */
  c->ctx.pdl = !options->no_pdl && env_on("MD_CUDA_PDL", true) && prop.major >= 9;
  c->ctx.gemv_rows = gemv && strcmp(gemv, "rows") == 0;
  c->ctx.max_smem_optin = prop.sharedMemPerBlockOptin;
  c->ctx.sms = prop.multiProcessorCount;
  c->gemm = options->gemm;
  snprintf(c->description, sizeof c->description,
           "cuda:%d %.200s, compute capability %d.%d, %d SMs, %.1f GiB", options->device, prop.name,
           prop.major, prop.minor, prop.multiProcessorCount,
           (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
  if (!create_resources(c)) {
    status = report(c, err);
    cuda_destroy(&c->base);
    return status;
  }
  *k = &c->base;
  return MD_OK;
}

const char *md_kernels_cuda_describe(const md_kernels *k) {
  return ((const md_cuda_kernels *)k)->description;
}

uint64_t md_kernels_cuda_launches(const md_kernels *k) {
  return ((const md_cuda_kernels *)k)->ctx.launches;
}

uint64_t md_kernels_cuda_step_kernels(const md_kernels *k) {
  return ((const md_cuda_kernels *)k)->step_kernels;
}
