/* The compute interface between the model code (collector/) and a back end
 * (kernels/cpu, kernels/cuda). The collector never calls BLAS or CUDA
 * itself: it calls the operations below through a back end's ops table.
 *
 * Memory. Activations live in opaque buffers (md_kbuf) owned by the back end:
 * plain float arrays on the CPU, device memory on a GPU. The model code never
 * dereferences them; it reads results back with buf_read. Weights are
 * prepared once with weight_new (md_kweight), which copies them: the CPU
 * back end 2-D weights of a file mapping in their file dtype (F32, F16 or
 * BF16) into its own memory (kernels/cpu/backend.c says why; the copies of
 * one tensor are shared, and the mapping's pages are dropped as it is
 * copied), the CUDA back end to device memory (2-D weights in that dtype);
 * both convert 1-D ones to F32. The CPU back end reads 2-D weights where
 * they lie when they are not in a file mapping (memory the model owns, such
 * as a GGUF checkpoint's dequantized tensors: a copy would only hold them
 * twice), and all of them with MD_CPU_WEIGHTS_MAPPED
 * (MEMDECAY_CPU_WEIGHTS=mapped); weight_new's contract (the tensor outlives
 * the weight) covers every case. All activations are float32, row-major.
 *
 * Shapes. A "row" is one token. A matrix of n rows and d columns is n*d
 * consecutive floats. Weight matrices are [out, in] row-major as in the
 * checkpoint; matmul computes y = x W^T + b.
 *
 * KV cache. One buffer per layer holding keys then values, head-major:
 *   [2][n_kv_heads][capacity][head_dim] floats,
 * so the keys of one KV head are a contiguous [capacity, head_dim] matrix.
 * Its size per token is layers * 2 * n_kv_heads * head_dim * 4 bytes
 * (Qwen2.5-0.5B: 24 * 2 * 2 * 64 * 4 = 24 KiB per token).
 *
 * Errors. Compute operations return nothing: a back end records the first
 * failure (a device error, or scratch memory it could not allocate) and
 * reports it from sync, and from buf_read and argmax, which synchronise.
 * Callers check sync once per forward step.
 *
 * Threads. One back end instance runs one operation at a time (it owns
 * scratch memory); use one instance per concurrent model run. */
#ifndef MD_KERNELS_KERNELS_H
#define MD_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/tensor.h"

typedef struct md_kernels md_kernels; /* a back end instance */

/* Products of one input in one matmul_shared call at most. */
#define MD_KERNELS_MAX_SHARED 3
/* Slots for overlapped reads (buf_read_start / buf_read_finish). */
#define MD_KERNELS_READ_SLOTS 4
typedef struct md_kbuf md_kbuf;       /* float32 activations, back-end memory */
typedef struct md_kweight md_kweight; /* a weight tensor prepared for the back end */

/* The attention hook: called with the softmax weights that one query row of
 * one (layer, head) has just put on the keys 0 .. n_keys-1 (n_keys =
 * query_pos + 1, causal). The weights are fp32 and sum to 1; the pointer is
 * valid only during the call. Calls are never concurrent (a back end that
 * computes heads in parallel serialises them) but their order across heads
 * and query rows within one attention call is unspecified, so consumers
 * accumulate (sum, max) rather than rely on order. One attention call covers
 * one layer, and the forward pass runs the layers in order, so every call for
 * layer l comes before any for layer l + 1 (a max over heads can be folded
 * into a per-layer buffer). Prefill calls it once per (layer, head, prompt
 * row), decode once per (layer, head). A NULL hook costs one pointer test
 * per row. */
typedef struct md_attn_hook {
  void (*on_row)(void *ctx, int layer, int head, int64_t query_pos,
                 const float *weights, int64_t n_keys);
  void *ctx;
} md_attn_hook;

/* Fused attention capture: the aggregate the collector records (memdecay-calibrate(1),
 * EXTRACT), accumulated inside the attention computation so that no
 * softmax row ever leaves the kernel and no n x n matrix exists.
 *
 * Decode (n = 1): received[k] += weight * A_h(w_h[k]) for every visible key
 *   k, where w_h is the softmax row of query head h and A_h is the mean over
 *   the n_heads query heads (MD_CAPTURE_HEADS_MEAN) or their maximum
 *   (MD_CAPTURE_HEADS_MAX).
 * Prefill (n > 1): received[k] += weight * (1 / n_heads) * sum over heads h
 *   and over the batch's query rows q of w_{h,q}[k]: the attention each key
 *   received from the prompt, heads averaged (the H2O accumulator's start).
 *   The head mode does not apply to prefill.
 * The collector passes weight = 1 / (number of captured layers) for each
 * captured layer and zeroes `received` itself (buf_zero) before a step. */
typedef enum md_capture_heads {
  MD_CAPTURE_HEADS_MEAN = 0,
  MD_CAPTURE_HEADS_MAX = 1,
} md_capture_heads;

typedef struct md_attn_capture {
  md_kbuf *received;       /* [>= pos0 + n] floats, accumulated into */
  float weight;            /* scale of this layer's contribution */
  md_capture_heads heads;  /* decode rows only */
} md_attn_capture;

/* What an attention call needs to know about the model and the cache. */
typedef struct md_attn_shape {
  int layer;          /* reported to the hook */
  int n_heads;        /* query heads */
  int n_kv_heads;     /* query head h reads KV head h / (n_heads / n_kv_heads) */
  int head_dim;
  int64_t capacity;   /* positions held by each layer's cache buffer */
} md_attn_shape;

/* What a run records about the back end that computed it (run.json): each
 * NULL where it does not apply or is not known. */
typedef struct md_kernel_facts {
  const char *blas_library;    /* the BLAS that multiplies prompts, with its version */
  const char *blas_core;       /* the kernels that BLAS runs ("Zen", "SkylakeX") */
  const char *cpu_kernels;     /* our kernels' path: "avx512", "avx2", "portable" */
  const char *prompt_products; /* "fp32", or "bf16" (--bf16-gemm) */
  const char *prompt_gemm;     /* who multiplies float32 prompts: "own" or "blas" */
} md_kernel_facts;

typedef struct md_kernel_ops {
  const char *name; /* "cpu", "cuda" */
  void (*destroy)(md_kernels *k);

  /* --- memory ------------------------------------------------------------ */
  /* A zero-filled buffer of n floats. */
  md_status (*buf_new)(md_kernels *k, size_t n, md_kbuf **buf, md_error *err);
  void (*buf_free)(md_kernels *k, md_kbuf *buf);
  /* Copies floats [offset, offset + n) of buf to host memory. */
  md_status (*buf_read)(md_kernels *k, const md_kbuf *buf, size_t offset, size_t n,
                        float *dst, md_error *err);
  /* Copies n host floats into buf at [offset, offset + n). */
  md_status (*buf_write)(md_kernels *k, md_kbuf *buf, size_t offset, size_t n,
                         const float *src, md_error *err);
  /* Sets floats [offset, offset + n) of buf to zero (queued like compute). */
  void (*buf_zero)(md_kernels *k, md_kbuf *buf, size_t offset, size_t n);
  /* Starts copying floats [offset, offset + n) of buf to host memory dst,
   * ordered after the work queued so far, into one of MD_KERNELS_READ_SLOTS
   * slots; buf_read_finish(slot) waits for it. A device back end returns at
   * once so the copy overlaps the next step's work (dst must stay valid and
   * unread until finish); the CPU back end copies immediately. Queued work
   * may overwrite buf again only after the slot's finish. A slot holds one
   * read at a time. */
  md_status (*buf_read_start)(md_kernels *k, const md_kbuf *buf, size_t offset, size_t n,
                              float *dst, int slot, md_error *err);
  md_status (*buf_read_finish)(md_kernels *k, int slot, md_error *err);
  /* A view of floats [offset, offset + n) of buf: a buffer of n floats that
   * every operation accepts, sharing buf's memory (writes to either are
   * seen in both); buf_free releases the view and leaves buf alone. Valid
   * while buf lives. A batched decode step hands one sequence's row to the
   * operations that take one sequence (rope, kv_store, attention).
   * Optional: NULL makes the forward pass run a batch's sequences one
   * after another. */
  md_status (*buf_view)(md_kernels *k, md_kbuf *buf, size_t offset, size_t n, md_kbuf **view,
                        md_error *err);
  /* Prepares a 1-D (norm weight, bias) or 2-D ([out, in] matrix, embedding)
   * tensor. The tensor's memory must outlive the weight. */
  md_status (*weight_new)(md_kernels *k, const md_tensor *t, md_kweight **w, md_error *err);
  void (*weight_free)(md_kernels *k, md_kweight *w);

  /* --- compute ----------------------------------------------------------- */
  /* x[i, :] = table[tokens[i], :] converted to f32; x is [n, dim]. Token ids
   * must already be validated (0 <= id < rows of table). */
  void (*embed)(md_kernels *k, md_kbuf *x, const md_kweight *table,
                const int32_t *tokens, int64_t n);
  /* out[i, :] = x[i, :] / sqrt(mean(x[i, :]^2) + eps) * weight, in fp32;
   * x and out are [n, dim] with dim = length of weight; out may be x. */
  void (*rmsnorm)(md_kernels *k, md_kbuf *out, const md_kbuf *x, const md_kweight *weight,
                  int64_t n, float eps);
  /* y = x W^T + bias: x [n, in], W [out, in] (F32/F16/BF16), bias [out] or
   * NULL, y [n, out]. n = 1 is the decode matrix-vector product, n > 1 the
   * prefill matrix-matrix product. */
  void (*matmul)(md_kernels *k, md_kbuf *y, const md_kbuf *x, const md_kweight *w,
                 const md_kweight *bias, int64_t n);
  /* Several products of one x: ys[i] = x ws[i]^T + biases[i] for
   * i < count, 1 <= count <= MD_KERNELS_MAX_SHARED (biases NULL, or any of
   * its entries NULL: no bias), each W [out_i, in]; the same products as
   * count matmul calls, to the order of the float32 sums. The forward pass
   * uses it for q/k/v and gate/up. A back end may do the work on x once:
   * the CPU back end's own float32 GEMM (the avx2 path's default,
   * MEMDECAY_CPU_GEMM) and --bf16-gemm's run the products in one parallel
   * region over one list of work items (the BF16 one packs x once).
   * Optional: NULL makes the forward pass call matmul for each. */
  void (*matmul_shared)(md_kernels *k, md_kbuf *const *ys, const md_kbuf *x,
                        const md_kweight *const *ws, const md_kweight *const *biases, int count,
                        int64_t n);
  /* The MLP's first half: gate = silu(x W_gate^T) * (x W_up^T), x [n, in],
   * W_gate and W_up [out, in] (F32/F16/BF16), gate and up [n, out]; up is
   * the back end's scratch (undefined after). The bits of matmul_shared on
   * {W_gate, W_up} followed by swiglu; a back end may fuse them (the CPU
   * back end's own float32 GEMM on the avx2 path multiplies SiLU in as it
   * stores the up product's tiles, which are never stored). Optional: NULL
   * makes the forward pass call those two. */
  void (*matmul_swiglu)(md_kernels *k, md_kbuf *gate, md_kbuf *up, const md_kbuf *x,
                        const md_kweight *w_gate, const md_kweight *w_up, int64_t n);
  /* n decode rows, one per sequence of a batched step: row r of each ys[i]
   * holds, bit for bit, what matmul_shared writes for row r of x alone
   * (n = 1), each W read once for all n rows (memory-bound products become
   * n times cheaper per row). 1 <= count <= MD_KERNELS_MAX_SHARED. With it
   * the forward pass also relies on embed, rmsnorm, swiglu and add giving
   * every row (element) the bits it gets in a call of its own, and on
   * swiglu after matmul_rows of {W_gate, W_up} giving matmul_swiglu's
   * (n = 1) bits. Optional: NULL makes a batched step run each sequence's
   * row through the one-row operations (buf_view). */
  void (*matmul_rows)(md_kernels *k, md_kbuf *const *ys, const md_kbuf *x,
                      const md_kweight *const *ws, const md_kweight *const *biases, int count,
                      int64_t n);
  /* logits [n, vocab] = row r of what `logits` writes for row r of x, for
   * r < n, bit for bit; the LM head read once for the n rows. Optional
   * (with matmul_rows): NULL makes a batched step call logits row by row. */
  void (*logits_rows)(md_kernels *k, md_kbuf *logits, const md_kbuf *x, int64_t n,
                      const md_kweight *norm, const md_kweight *lm_head, float eps);
  /* Rotary embedding, "rotate_half" (NeoX) layout, in place on the queries
   * q [n, n_heads * head_dim] and keys kk [n, n_kv_heads * head_dim] of the
   * positions pos0 .. pos0 + n - 1: element j pairs with j + head_dim / 2,
   * angle = pos * theta^(-2j / head_dim), computed in float32 as HF does. */
  void (*rope)(md_kernels *k, md_kbuf *q, md_kbuf *kk, int64_t n, int n_heads,
               int n_kv_heads, int head_dim, int64_t pos0, double theta);
  /* Writes the keys and values [n, n_kv_heads * head_dim] of positions
   * pos0 .. pos0 + n - 1 into one layer's cache buffer. Here and in
   * attention a "position" is a cache slot; rope's positions are the
   * tokens' own. They are the same number until the forward pass evicts
   * tokens (kv_compact), after which slots run behind positions. */
  void (*kv_store)(md_kernels *k, md_kbuf *cache, const md_kbuf *key, const md_kbuf *value,
                   const md_attn_shape *shape, int64_t pos0, int64_t n);
  /* Moves the slots keep[0 .. n_keep-1] (host memory, strictly ascending
   * slot indices below the capacity) of one layer's cache buffer to slots
   * 0 .. n_keep-1, keys and values of every KV head alike: what eviction
   * does (collector/model/qwen2_forward.h, md_qwen2_evict). Slots from n_keep on
   * are left undefined. Since keep ascends, keep[j] >= j: a slot is read
   * before any write lands on it when the slots are moved in order, so the
   * CPU back end works in place; a device back end whose threads run in
   * any order gathers through scratch memory. A back end may skip the
   * leading slots with keep[j] == j. Never part of a recorded step
   * (step_begin): it is called between steps. Optional: NULL makes the
   * forward pass copy the cache through buf_read and buf_write (correct,
   * slow). Bad indices are a failure reported by the next sync. */
  void (*kv_compact)(md_kernels *k, md_kbuf *cache, const md_attn_shape *shape,
                     const int64_t *keep, int64_t n_keep);
  /* Causal GQA attention of the queries q [n, n_heads * head_dim] at
   * positions pos0 .. pos0 + n - 1 against the cache (which must already
   * hold positions 0 .. pos0 + n - 1): out [n, n_heads * head_dim]. Scores
   * are q.k / sqrt(head_dim), softmax in fp32. n > 1 is prefill, n = 1 the
   * decode step. Memory is O(n * head_dim) per head: no n x n matrix. hook
   * (softmax rows to host code; tests and diagnostics) and capture (the
   * fused aggregate above; what the collector uses) may each be NULL. */
  void (*attention)(md_kernels *k, md_kbuf *out, const md_kbuf *q, const md_kbuf *cache,
                    const md_attn_shape *shape, int64_t pos0, int64_t n,
                    const md_attn_hook *hook, const md_attn_capture *capture);
  /* gate = silu(gate) * up, elementwise over count floats (SwiGLU). */
  void (*swiglu)(md_kernels *k, md_kbuf *gate, const md_kbuf *up, size_t count);
  /* x += y over count floats (the residual stream). */
  void (*add)(md_kernels *k, md_kbuf *x, const md_kbuf *y, size_t count);
  /* logits [vocab] = lm_head(rmsnorm(x[row, :], norm, eps)): the final norm
   * and LM head for one row of the hidden states x. */
  void (*logits)(md_kernels *k, md_kbuf *logits, const md_kbuf *x, int64_t row,
                 const md_kweight *norm, const md_kweight *lm_head, float eps);
  /* The index of the first largest of v[0 .. n-1] (greedy decoding). */
  md_status (*argmax)(md_kernels *k, const md_kbuf *v, size_t n, int64_t *index, md_error *err);
  /* index[r] = the greedy token of row r of x, r < n: what argmax over the
   * vocabulary gives after logits_rows (or logits, row by row), without
   * promising those logits: `logits` [n, vocab] is scratch whose contents
   * are unspecified afterwards, so a back end may search a head's nonzero
   * rows alone. Synchronises, as argmax. Optional: NULL makes a step write
   * the logits and take each row's argmax. */
  md_status (*greedy_rows)(md_kernels *k, int64_t *index, md_kbuf *logits, const md_kbuf *x,
                           int64_t n, const md_kweight *norm, const md_kweight *lm_head, float eps,
                           md_error *err);
  /* Waits for queued work; reports a deferred device failure. */
  md_status (*sync)(md_kernels *k, md_error *err);

  /* --- decode steps (optional: NULL when a back end has no use for them) -- */
  /* The forward pass brackets each one-token step with these: step_begin
   * before the step's first operation, with the step's token position (pos0
   * of its rope call) and its cache slot (pos0 of its kv_store and
   * attention calls; the same number until an eviction has moved the slots
   * behind the positions), step_end after its last (the logits) and before
   * it synchronises. A back end may record the step's operations once and
   * replay the recording in later steps (the CUDA back end's graphs); it
   * compares the operations and their arguments with the recording and
   * replays only when nothing but the position, the slot and the token id
   * differs. It may also run the step's operations fused into fewer
   * kernels, as long as every buffer ends as the operations leave it.
   * Failures are reported by the next sync. */
  void (*step_begin)(md_kernels *k, int64_t pos, int64_t slot);
  void (*step_end)(md_kernels *k);

  /* --- facts (optional: NULL when a back end has none to record) --------- */
  /* Fills *facts (zeroed first by the caller); the strings live as long as
   * the back end. */
  void (*facts)(const md_kernels *k, md_kernel_facts *facts);

  /* --- description (optional: NULL prints the name alone) -------------- */
  /* What `devices` prints about this back end (md_device_describe): lines
   * ending in '\n', written into text, truncated to size and
   * NUL-terminated. `threads` is what was asked for (0: all cores). */
  void (*describe)(const md_kernels *k, int threads, char *text, size_t size);
} md_kernel_ops;

/* Every back end instance starts with this header. */
struct md_kernels {
  const md_kernel_ops *ops;
};

/* Releases a back end made by md_kernels_cpu_new (or another back end). */
static inline void md_kernels_free(md_kernels *k) {
  if (k) k->ops->destroy(k);
}

#endif
