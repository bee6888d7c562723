/* Fusions of a logged decode step. graph.c runs every logged step through
 * md_cuda_fuse, which recognises what the forward pass queues for one
 * token (collector/model/qwen2_forward.c) by the operations' kinds and
 * their buffers, and runs it as fewer launches that compute the same bits
 * and write every buffer the operations would have written:
 *
 *   rmsnorm; 1 to 3 matmuls of its output      one GEMV launch, the norm in
 *                                              its prologue (q/k/v)
 *   rmsnorm; 2 matmuls; swiglu of their outputs one GEMV launch, SwiGLU in
 *                                              its epilogue (gate/up)
 *   matmul; add of its output into x           one GEMV launch, the residual
 *                                              add in its epilogue (o, down)
 *   rope; kv_store of its key; attention of    two attention launches, RoPE
 *     its queries over that cache              and the store in the first
 *
 * A decode step of the forward pass is then 6 launches a layer (kernels.h
 * allows a back end to fuse: the operations' results are what it
 * promises). Anything that does not match, a pattern whose buffers
 * overlap where the fused kernel would race (an in-place norm, a product
 * whose output is its input), or a hooked attention, runs as logged. */
#include "kernels/cuda/backend.h"

static bool row_matmul(const md_cuda_op *op) { return op->kind == MD_CUDA_OP_MATMUL && op->n == 1; }

/* rmsnorm, then the matmuls that read its output (and a swiglu of two). */
static size_t fuse_norm(md_cuda_kernels *c, const md_cuda_op *ops, size_t n_ops, size_t i) {
  const md_cuda_op *norm = &ops[i];
  if (norm->kind != MD_CUDA_OP_RMSNORM || norm->n != 1 || norm->out == norm->in) return 0;
  const md_cuda_op *products[3];
  int count = 0;
  for (size_t j = i + 1; j < n_ops && count < 3; j++) {
    const md_cuda_op *p = &ops[j];
    if (!row_matmul(p) || p->in != norm->out || p->w->cols != norm->w->cols ||
        (count && p->w->dtype != products[0]->w->dtype) || p->out == norm->out ||
        (const md_kbuf *)p->out == norm->in)
      break;
    bool repeated = false;
    for (int m = 0; m < count; m++) repeated = repeated || products[m]->out == p->out;
    if (repeated) break;
    products[count++] = p;
  }
  if (count == 0) return 0;
  const size_t next = i + 1 + (size_t)count;
  if (count == 2 && next < n_ops) {
    const md_cuda_op *swiglu = &ops[next];
    const int64_t rows = products[0]->w->rows;
    if (swiglu->kind == MD_CUDA_OP_SWIGLU && swiglu->out == products[0]->out &&
        swiglu->in == products[1]->out && products[1]->w->rows == rows &&
        swiglu->count == (size_t)rows) {
      md_cuda_fused_gemv(c, norm, products, 2, MD_CUDA_GEMV_SWIGLU, swiglu);
      return next + 1 - i;
    }
  }
  md_cuda_fused_gemv(c, norm, products, count, MD_CUDA_GEMV_PLAIN, NULL);
  return next - i;
}

/* matmul, then x += its output. */
static size_t fuse_residual(md_cuda_kernels *c, const md_cuda_op *ops, size_t n_ops, size_t i) {
  const md_cuda_op *p = &ops[i];
  if (!row_matmul(p) || i + 1 >= n_ops) return 0;
  const md_cuda_op *add = &ops[i + 1];
  if (add->kind != MD_CUDA_OP_ADD || add->in != p->out || add->count != (size_t)p->w->rows ||
      (const md_kbuf *)add->out == p->in || add->out == p->out)
    return 0;
  md_cuda_fused_gemv(c, NULL, &p, 1, MD_CUDA_GEMV_RESIDUAL, add);
  return 2;
}

/* rope, kv_store of the rotated key, attention of the rotated queries, all
 * at the step's own position and slot. */
static size_t fuse_attention(md_cuda_kernels *c, const md_cuda_op *ops, size_t n_ops, size_t i) {
  if (i + 2 >= n_ops) return 0;
  const md_cuda_op *rope = &ops[i], *store = &ops[i + 1], *attn = &ops[i + 2];
  if (rope->kind != MD_CUDA_OP_ROPE || store->kind != MD_CUDA_OP_KV_STORE ||
      attn->kind != MD_CUDA_OP_ATTENTION)
    return 0;
  const md_attn_shape *shape = &attn->shape;
  if (rope->n != 1 || store->n != 1 || attn->n != 1 || attn->hook.on_row || rope->offset != 0 ||
      store->offset != 0 || attn->offset != 0)
    return 0;
  if (rope->out != attn->in || (const md_kbuf *)rope->out2 != store->in || store->out != attn->in2)
    return 0;
  if (store->shape.n_kv_heads != shape->n_kv_heads || store->shape.head_dim != shape->head_dim ||
      store->shape.capacity != shape->capacity || rope->ints[0] != shape->n_heads ||
      rope->ints[1] != shape->n_kv_heads || rope->ints[2] != shape->head_dim)
    return 0;
  const md_kbuf *q = rope->out, *key = rope->out2, *value = store->in2, *cache = store->out;
  const md_kbuf *out = attn->out;
  if (out == q || out == key || out == value || out == cache || q == key || q == value ||
      key == value || cache == q || cache == key || cache == value)
    return 0;
  md_cuda_fused_attention(c, rope, store, attn, c->step_pos, c->step_slot);
  return 3;
}

size_t md_cuda_fuse(md_cuda_kernels *c, const md_cuda_op *ops, size_t n_ops, size_t i) {
  size_t n = fuse_norm(c, ops, n_ops, i);
  if (!n) n = fuse_residual(c, ops, n_ops, i);
  if (!n) n = fuse_attention(c, ops, n_ops, i);
  return n;
}
