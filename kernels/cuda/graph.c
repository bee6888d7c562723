/* Recorded decode steps: CUDA graphs of a whole decode step, so that a
 * step costs one launch instead of one per kernel (a 28-layer model queues
 * 170 fused kernels per token, about 450 unfused; at a few microseconds
 * each, the host rather than the GPU would set the pace).
 *
 * Between step_begin and step_end (kernels.h) the operations are logged,
 * not run. At step_end the log is compared (memcmp) with the recorded
 * steps (up to MD_CUDA_GRAPH_CACHE, least recently used replaced: the
 * collector alternates two capture buffers): on a match, the step's
 * position, slot and token go into pinned memory and the graph is
 * launched; its first node copies position and slot to device memory,
 * from where rope (the position) and kv_store and attention (the slot)
 * read them, and embed copies the token. Otherwise the log is run, fused
 * (fuse.c), under stream capture, with decode grids sized for the cache's
 * capacity (blocks beyond the visible keys return at once), the graph
 * instantiated and launched. Rope is logged relative to the step's
 * position and kv_store and attention relative to its slot, so one
 * recording serves steps before and after evictions (which move the slots
 * behind the positions). A step with an attention hook, or whose
 * operations are not one-token decode operations at the step's position
 * and slot, is run as logged (fused where it can be), without recording.
 * Scratch memory is reserved before a capture, and buffers with pending
 * overlapped reads are guarded before a launch, since neither may happen
 * inside a graph. When scratch memory or the RoPE table is reallocated (it
 * grew, e.g. for a later prefill chunk) the recordings, which hold its old
 * address, are dropped and recorded again; so are those that name a buffer
 * or weight when it is freed, since a log names them by their host
 * addresses, which a later allocation may reuse. kv_compact is never
 * logged. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/backend.h"

#define CHECK(c, call) MD_CUDA_CHECK(&(c)->ctx, call)

void md_cuda_step_begin(md_kernels *k, int64_t pos, int64_t slot) {
  md_cuda_kernels *c = md_cuda_of(k);
  if (!c->graphs || c->ctx.status != MD_OK) return;
  c->logging = true;
  c->replayable = true;
  c->log_n = 0;
  c->step_pos = pos;
  c->step_slot = slot;
  c->step_token = -1;
}

/* The step's coordinate an operation's pos0 is given in: the token
 * position (rope) or the cache slot (kv_store, attention); the others have
 * none (0). Logged relative to it, so that the logs of two steps compare
 * equal. */
static bool positioned(md_cuda_op_kind kind) {
  return kind == MD_CUDA_OP_ROPE || kind == MD_CUDA_OP_KV_STORE || kind == MD_CUDA_OP_ATTENTION;
}

static int64_t step_origin(const md_cuda_kernels *c, md_cuda_op_kind kind) {
  if (!positioned(kind)) return 0;
  return kind == MD_CUDA_OP_ROPE ? c->step_pos : c->step_slot;
}

/* Whether op may be part of a recorded step. */
static bool recordable(const md_cuda_op *op, int64_t pos0, int64_t origin) {
  switch (op->kind) {
  case MD_CUDA_OP_EMBED:
  case MD_CUDA_OP_MATMUL: return op->n == 1;
  case MD_CUDA_OP_ROPE:
  case MD_CUDA_OP_KV_STORE: return op->n == 1 && pos0 == origin;
  case MD_CUDA_OP_ATTENTION: return op->n == 1 && pos0 == origin && !op->hook.on_row;
  default: return true;
  }
}

bool md_cuda_log(md_cuda_kernels *c, const md_cuda_op *logged) {
  if (!c->logging) return false;
  if (c->log_n == c->log_capacity) {
    size_t grown = c->log_capacity ? 2 * c->log_capacity : 1024;
    md_cuda_op *log = realloc(c->log, grown * sizeof *log);
    if (!log) {
      md_cuda_fail(&c->ctx, MD_E_NOMEM, "cuda kernels: out of memory for the decode step's log");
      return true;
    }
    c->log = log;
    c->log_capacity = grown;
  }
  md_cuda_op *op = &c->log[c->log_n++];
  memcpy(op, logged, sizeof *op); /* padding included: logs compare with memcmp */
  int64_t pos0 = (int64_t)op->offset, origin = step_origin(c, op->kind);
  if (!recordable(op, pos0, origin)) c->replayable = false;
  if (positioned(op->kind)) op->offset = (size_t)(pos0 - origin);
  if (op->kind == MD_CUDA_OP_EMBED) { /* the ids are the step's, not the log's */
    c->step_tokens = op->tokens;
    if (op->n == 1) c->step_token = op->tokens[0];
    op->tokens = NULL;
  }
  return true;
}

/* Runs logged operations (positions relative to the step's, token ids
 * the step's), fused where fuse.c finds a pattern. */
static void run_log(md_cuda_kernels *c, const md_cuda_op *ops, size_t n_ops) {
  md_kernels *k = &c->base;
  const md_kernel_ops *f = k->ops;
  for (size_t i = 0; i < n_ops && c->ctx.status == MD_OK; i++) {
    size_t fused = md_cuda_fuse(c, ops, n_ops, i);
    if (fused) {
      i += fused - 1;
      continue;
    }
    const md_cuda_op *op = &ops[i];
    int64_t pos0 = step_origin(c, op->kind) + (int64_t)op->offset;
    switch (op->kind) {
    case MD_CUDA_OP_EMBED: f->embed(k, op->out, op->w, c->step_tokens, op->n); break;
    case MD_CUDA_OP_RMSNORM: f->rmsnorm(k, op->out, op->in, op->w, op->n, op->eps); break;
    case MD_CUDA_OP_MATMUL: f->matmul(k, op->out, op->in, op->w, op->w2, op->n); break;
    case MD_CUDA_OP_ROPE:
      f->rope(k, op->out, op->out2, op->n, op->ints[0], op->ints[1], op->ints[2], pos0, op->theta);
      break;
    case MD_CUDA_OP_KV_STORE:
      f->kv_store(k, op->out, op->in, op->in2, &op->shape, pos0, op->n);
      break;
    case MD_CUDA_OP_ATTENTION:
      f->attention(k, op->out, op->in, op->in2, &op->shape, pos0, op->n,
                   op->hook.on_row ? &op->hook : NULL, op->capture.received ? &op->capture : NULL);
      break;
    case MD_CUDA_OP_SWIGLU: f->swiglu(k, op->out, op->in, op->count); break;
    case MD_CUDA_OP_ADD: f->add(k, op->out, op->in, op->count); break;
    case MD_CUDA_OP_LOGITS: f->logits(k, op->out, op->in, op->row, op->w, op->w2, op->eps); break;
    case MD_CUDA_OP_ZERO: f->buf_zero(k, op->out, op->offset, op->count); break;
    }
  }
}

/* The compute stream waits for pending reads of every buffer the step
 * writes (outside any capture: a graph cannot wait for outside events). */
static void guard_outputs(md_cuda_kernels *c, const md_cuda_op *ops, size_t n_ops) {
  for (size_t i = 0; i < n_ops; i++) {
    if (ops[i].out) md_cuda_guard_write(c, ops[i].out);
    if (ops[i].out2) md_cuda_guard_write(c, ops[i].out2);
    if (ops[i].capture.received) md_cuda_guard_write(c, ops[i].capture.received);
  }
}

/* Scratch and tables a capture must not allocate: reserved beforehand, by
 * running what allocates them outside the capture. */
static bool reserve(md_cuda_kernels *c) {
  for (size_t i = 0; i < c->log_n; i++) {
    const md_cuda_op *op = &c->log[i];
    if (op->kind == MD_CUDA_OP_ATTENTION &&
        !md_cuda_scratch_get(c, &c->attn,
                             md_cuda_decode_scratch_bytes(op->shape.n_heads, op->shape.head_dim,
                                                          op->shape.capacity),
                             "decode attention"))
      return false;
    if (op->kind == MD_CUDA_OP_EMBED && !md_cuda_scratch_get(c, &c->tokens, sizeof(int32_t), "token ids"))
      return false;
    if (op->kind == MD_CUDA_OP_ROPE && !md_cuda_rope_table(c, op->ints[2], op->theta)) return false;
  }
  if (!c->step_params && !CHECK(c, cudaMallocHost((void **)&c->step_params, sizeof *c->step_params)))
    return false;
  if (!c->step_pos_dev && !CHECK(c, cudaMalloc((void **)&c->step_pos_dev, 2 * sizeof(int64_t))))
    return false;
  return c->ctx.status == MD_OK;
}

static md_cuda_graph *find(md_cuda_kernels *c) {
  for (int i = 0; i < MD_CUDA_GRAPH_CACHE; i++) {
    md_cuda_graph *g = &c->graph_cache[i];
    if (g->exec && g->n_ops == c->log_n && memcmp(g->ops, c->log, c->log_n * sizeof *c->log) == 0)
      return g;
  }
  return NULL;
}

static void graph_release(md_cuda_graph *g) {
  if (g->exec) cudaGraphExecDestroy(g->exec);
  free(g->ops);
  memset(g, 0, sizeof *g);
}

/* Captures the logged step into a graph and keeps it in the cache. */
static md_cuda_graph *record(md_cuda_kernels *c) {
  if (!reserve(c)) return NULL;
  md_cuda_op *ops = malloc(c->log_n * sizeof *ops);
  if (!ops) {
    md_cuda_fail(&c->ctx, MD_E_NOMEM, "cuda kernels: out of memory for a decode step's graph");
    return NULL;
  }
  memcpy(ops, c->log, c->log_n * sizeof *ops);
  guard_outputs(c, ops, c->log_n); /* none may be pending inside the capture */
  cudaGraph_t graph = NULL;
  if (!CHECK(c, cudaStreamBeginCapture(c->ctx.stream, cudaStreamCaptureModeRelaxed))) {
    free(ops);
    return NULL;
  }
  c->capturing = true;
  const uint64_t launches = c->ctx.launches;
  CHECK(c, cudaMemcpyAsync(c->step_pos_dev, &c->step_params->pos, 2 * sizeof(int64_t),
                           cudaMemcpyHostToDevice, c->ctx.stream));
  run_log(c, ops, c->log_n);
  c->capturing = false;
  const uint64_t kernels = c->ctx.launches - launches;
  cudaError_t ended = cudaStreamEndCapture(c->ctx.stream, &graph); /* always ends the capture */
  md_cuda_check(&c->ctx, ended, "cudaStreamEndCapture(c->ctx.stream, &graph)", MD_CUDA_SITE);
  cudaGraphExec_t exec = NULL;
  bool ok = c->ctx.status == MD_OK && CHECK(c, cudaGraphInstantiateWithFlags(&exec, graph, 0));
  if (graph) cudaGraphDestroy(graph);
  if (!ok) {
    free(ops);
    return NULL;
  }
  md_cuda_graph *slot = &c->graph_cache[0];
  for (int i = 1; i < MD_CUDA_GRAPH_CACHE; i++)
    if (c->graph_cache[i].last_use < slot->last_use) slot = &c->graph_cache[i];
  graph_release(slot);
  slot->ops = ops;
  slot->n_ops = c->log_n;
  slot->exec = exec;
  slot->kernels = kernels;
  return slot;
}

static void replay(md_cuda_kernels *c, md_cuda_graph *g) {
  guard_outputs(c, g->ops, g->n_ops);
  /* The previous replay has read the parameters (its first node) long
   * before it completes; waiting for its completion keeps this simple. */
  if (!CHECK(c, cudaEventSynchronize(c->graph_done))) return;
  c->step_params->pos = c->step_pos;
  c->step_params->slot = c->step_slot;
  c->step_params->token = c->step_token;
  if (!CHECK(c, cudaGraphLaunch(g->exec, c->ctx.stream))) return;
  CHECK(c, cudaEventRecord(c->graph_done, c->ctx.stream));
  c->ctx.launches++;
  c->ctx.last_kernel = "a recorded decode step (CUDA graph)";
  c->ctx.last_site = MD_CUDA_SITE;
  g->last_use = ++c->graph_clock;
  c->step_kernels = g->kernels;
}

void md_cuda_step_end(md_kernels *k) {
  md_cuda_kernels *c = md_cuda_of(k);
  if (!c->logging) return;
  c->logging = false;
  if (c->ctx.status != MD_OK) return;
  if (!c->replayable || c->step_token < 0) {
    run_log(c, c->log, c->log_n);
    return;
  }
  md_cuda_graph *g = find(c);
  if (!g) g = record(c);
  if (g) replay(c, g);
}

void md_cuda_flush_log(md_cuda_kernels *c) {
  if (!c->logging) return;
  c->logging = false;
  run_log(c, c->log, c->log_n);
}

void md_cuda_graphs_forget(md_cuda_kernels *c) {
  for (int i = 0; i < MD_CUDA_GRAPH_CACHE; i++) graph_release(&c->graph_cache[i]);
}

/* Whether op reads or writes buf or w. */
static bool op_names(const md_cuda_op *op, const md_kbuf *buf, const md_kweight *w) {
  if (buf && (op->out == buf || op->out2 == buf || op->in == buf || op->in2 == buf ||
              op->capture.received == buf))
    return true;
  return w && (op->w == w || op->w2 == w);
}

void md_cuda_graphs_forget_uses(md_cuda_kernels *c, const md_kbuf *buf, const md_kweight *w) {
  for (int i = 0; i < MD_CUDA_GRAPH_CACHE; i++) {
    md_cuda_graph *g = &c->graph_cache[i];
    for (size_t j = 0; g->exec && j < g->n_ops; j++)
      if (op_names(&g->ops[j], buf, w)) {
        graph_release(g);
        break;
      }
  }
}

void md_cuda_graphs_free(md_cuda_kernels *c) {
  md_cuda_graphs_forget(c);
  free(c->log);
  c->log = NULL;
  if (c->step_params) cudaFreeHost(c->step_params);
  if (c->step_pos_dev) cudaFree(c->step_pos_dev);
  if (c->graph_done) cudaEventDestroy(c->graph_done);
}
