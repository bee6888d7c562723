/* The Qwen2 forward pass (Qwen2ForCausalLM, as HF transformers computes it
 * in float32): prefill of many tokens at once (matrix-matrix) and one-token
 * decode against the KV cache, greedy next token, logits for inspection, and
 * the attention hook through which the collector sees the softmax weights.
 * All arithmetic goes through a kernel back end (kernels/kernels.h).
 *
 * Usage:
 *   md_qwen2_forward_new(config, weights, kernels, NULL, &fw, &err);
 *   md_qwen2_prefill(fw, prompt, n, NULL, &err);     positions 0 .. n-1
 *   md_qwen2_greedy(fw, &next, &err);
 *   md_qwen2_decode(fw, next, &err);                 position n, and so on
 *
 * Memory: the weights stay where the loader mapped them; the KV cache is
 * float32, layers * 2 * n_kv_heads * head_dim * 4 bytes per position of
 * `capacity` (allocated lazily, so only positions used count towards RSS);
 * activations are ~(4 * hidden + 2 * (q + kv) + 2 * intermediate) floats per
 * row of a prefill chunk. */
#ifndef MD_COLLECTOR_QWEN2_FORWARD_H
#define MD_COLLECTOR_QWEN2_FORWARD_H

#include <stdint.h>

#include "collector/qwen2_model.h"
#include "io/error.h"
#include "kernels/kernels.h"

typedef struct md_qwen2_forward md_qwen2_forward;

typedef struct md_qwen2_forward_options {
  int64_t capacity;   /* positions the KV cache holds (prompt + decoded tokens);
                         0 = max_position_embeddings */
  int64_t max_batch;  /* tokens per prefill chunk (longer prompts are run in
                         chunks, with identical results); 0 = 1024 */
} md_qwen2_forward_options;

/* Checks that the weights' shapes agree with the config, prepares them for
 * the back end and allocates the run state. config, weights and kernels must
 * outlive the forward state; options may be NULL. */
md_status md_qwen2_forward_new(const md_qwen2_config *config, const md_qwen2_weights *weights,
                               md_kernels *kernels, const md_qwen2_forward_options *options,
                               md_qwen2_forward **forward, md_error *err);
void md_qwen2_forward_free(md_qwen2_forward *forward);

/* Runs tokens[0 .. n-1] at positions pos .. pos + n - 1, where pos is the
 * number of tokens already in the cache (0 for a fresh prompt), appending
 * them to the cache. Afterwards the logits of the last token are available
 * (md_qwen2_logits, md_qwen2_greedy). When all_logits is not NULL it receives
 * the logits of every token, [n, vocab_size]. Refuses an empty batch, a
 * token id outside [0, vocab_size) and positions beyond
 * max_position_embeddings or the cache's capacity; nothing is changed then. */
md_status md_qwen2_prefill(md_qwen2_forward *forward, const int32_t *tokens, int64_t n,
                           float *all_logits, md_error *err);

/* One decode step: md_qwen2_prefill of a single token. */
md_status md_qwen2_decode(md_qwen2_forward *forward, int32_t token, md_error *err);

/* As md_qwen2_prefill without any logits: the tokens enter the cache (and
 * the attention hook and capture see them) but the final norm and LM head
 * are not run, which saves a vocab x hidden matrix-vector product per step
 * when the next token is known (teacher forcing). md_qwen2_logits and
 * md_qwen2_greedy then fail until a token is run with logits. */
md_status md_qwen2_feed(md_qwen2_forward *forward, const int32_t *tokens, int64_t n, md_error *err);

/* Copies the logits of the last token run, [vocab_size] floats. */
md_status md_qwen2_logits(md_qwen2_forward *forward, float *logits, md_error *err);

/* The greedy next token: the first index of the largest logit of the last
 * token run (what torch.argmax returns). */
md_status md_qwen2_greedy(md_qwen2_forward *forward, int32_t *token, md_error *err);

/* Tokens in the cache: the position the next token will take. */
int64_t md_qwen2_position(const md_qwen2_forward *forward);

/* Empties the cache for a new sequence (the memory is kept). */
void md_qwen2_reset(md_qwen2_forward *forward);

/* Installs (or, with NULL, removes) the attention hook called by every later
 * prefill and decode: per (layer, head, query row), the softmax weights over
 * the visible tokens. The struct is copied. */
void md_qwen2_set_attn_hook(md_qwen2_forward *forward, const md_attn_hook *hook);

/* Fused attention capture (kernels/kernels.h, md_attn_capture) over the
 * layers [layer_begin, layer_end), each weighted 1 / (layer_end -
 * layer_begin): after a decode step, received[k] holds the attention the
 * step's query put on token k, averaged over the captured layers and
 * averaged (or maxed) over heads; after a prefill, the attention each
 * prompt token received from the prompt's queries, heads and layers
 * averaged. `received` is a back-end buffer of at least the cache's
 * capacity that the caller zeroes (buf_zero) before each step it wants
 * separately; it is accumulated into, never cleared here. */
typedef struct md_qwen2_capture {
  md_kbuf *received;          /* NULL: capture off */
  int layer_begin, layer_end; /* 0 .. num_hidden_layers */
  md_capture_heads heads;     /* decode rows: mean or max over heads */
} md_qwen2_capture;

/* Installs (NULL or received == NULL: removes) the capture for later steps;
 * refuses an empty or out-of-range layer range. The struct is copied. */
md_status md_qwen2_set_capture(md_qwen2_forward *forward, const md_qwen2_capture *capture,
                               md_error *err);

/* Capacity of the KV cache in positions (what a capture buffer must hold). */
int64_t md_qwen2_capacity(const md_qwen2_forward *forward);

#endif
