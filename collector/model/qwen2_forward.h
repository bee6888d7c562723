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
 * Positions and slots. Every token takes the next position (its RoPE
 * position, md_qwen2_position) and the next free slot of the KV cache.
 * md_qwen2_evict removes tokens from the cache: the kept ones move down to
 * fill the gaps, in order, with the keys they were stored with (rotated for
 * their original positions), and the next token still takes the next
 * position. So after an eviction slot s holds the token of position
 * md_qwen2_slot_positions(fw)[s], attention runs over the cached tokens
 * only, and the cache needs room for the tokens it holds, not for every
 * position run (capacity counts slots). This is HF's forward pass with the
 * evicted keys masked out of every later query (a 4-D attention mask) and
 * position_ids unchanged. Until the first eviction slot s holds position
 * s and nothing differs from a run without eviction.
 *
 * Memory: the weights stay where the loader mapped them; the KV cache is
 * float32, layers * 2 * n_kv_heads * head_dim * 4 bytes per slot of
 * `capacity` (allocated lazily, so only slots used count towards RSS);
 * activations are ~(4 * hidden + 2 * (q + kv) + 2 * intermediate) floats per
 * row of a prefill chunk. */
#ifndef MD_COLLECTOR_MODEL_QWEN2_FORWARD_H
#define MD_COLLECTOR_MODEL_QWEN2_FORWARD_H

#include <stdint.h>

#include "collector/model/qwen2_model.h"
#include "base/error.h"
#include "kernels/kernels.h"

typedef struct md_qwen2_forward md_qwen2_forward;

typedef struct md_qwen2_forward_options {
  int64_t capacity;   /* slots of the KV cache: tokens it holds at once (prompt +
                         decoded tokens, less those evicted);
                         0 = max_position_embeddings */
  int64_t max_batch;  /* most tokens per prefill chunk (longer prompts are run
                         in chunks of equal size, with identical results);
                         0 = 2048 */
} md_qwen2_forward_options;

/* Checks that the weights' shapes agree with the config, prepares them for
 * the back end and allocates the run state. config, weights and kernels must
 * outlive the forward state; options may be NULL. */
md_status md_qwen2_forward_new(const md_qwen2_config *config, const md_qwen2_weights *weights,
                               md_kernels *kernels, const md_qwen2_forward_options *options,
                               md_qwen2_forward **forward, md_error *err);
void md_qwen2_forward_free(md_qwen2_forward *forward);

/* Runs tokens[0 .. n-1] at positions pos .. pos + n - 1, where pos is the
 * number of tokens run so far in this sequence (md_qwen2_position; 0 for a
 * fresh prompt), appending them to the cache (slots cached .. cached + n - 1,
 * md_qwen2_cached). Afterwards the logits of the last token are available
 * (md_qwen2_logits, md_qwen2_greedy). When all_logits is not NULL it receives
 * the logits of every token, [n, vocab_size]. Refuses an empty batch, a
 * token id outside [0, vocab_size), positions beyond
 * max_position_embeddings (pos + n > max_position_embeddings) and more
 * tokens than the cache has free slots (cached + n > capacity); nothing is
 * changed then. */
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

/* Tokens run so far in this sequence (evicted ones included): the position
 * the next token will take. */
int64_t md_qwen2_position(const md_qwen2_forward *forward);

/* Empties the cache for a new sequence (the memory is kept). */
void md_qwen2_reset(md_qwen2_forward *forward);

/* ---- eviction ---------------------------------------------------------------
 * For KV-cache policies that drop tokens, and for probes asked from one
 * cache state and then forgotten. */

/* Slots in use: the tokens held by the cache (md_qwen2_position less the
 * evicted ones). */
int64_t md_qwen2_cached(const md_qwen2_forward *forward);

/* [md_qwen2_cached], strictly ascending: the original position of the token
 * in each slot. Owned by the forward state; valid until the next call that
 * runs tokens, evicts, rolls back or resets. */
const int64_t *md_qwen2_slot_positions(const md_qwen2_forward *forward);

/* Removes the tokens at these original positions (any order, no duplicates,
 * each cached) from every layer's keys and values; the kept slots move down
 * in order (memory is reused: the cache never needs more slots than the
 * tokens it holds); their keys keep the rotation of their original
 * positions; the next token still takes md_qwen2_position(). The logits of
 * the last token run stay readable. n = 0 does nothing. Refuses a position
 * that is not cached (never run, evicted before, negative) and a duplicate
 * (MD_E_INVALID), changing nothing. Uses the back end's kv_compact
 * (kernels.h), or without one copies each layer's cache through host
 * memory. Cost: one pass over the cache slots from the first evicted one. */
md_status md_qwen2_evict(md_qwen2_forward *forward, const int64_t *positions, int64_t n,
                         md_error *err);

/* A point of the sequence to come back to: md_qwen2_position and
 * md_qwen2_cached when it was taken. */
typedef struct md_qwen2_mark {
  int64_t pos, cached;
} md_qwen2_mark;

md_qwen2_mark md_qwen2_mark_get(const md_qwen2_forward *forward);

/* Drops every slot appended after the mark and rewinds the position to it:
 * probe answers are asked from one cache state, then rolled back, and the
 * run continues bit-identically to one without the probe (the kept slots'
 * keys and values are untouched; what the probe wrote beyond them is
 * overwritten by later tokens). Evictions since the mark of tokens appended
 * after it are allowed. Refuses (MD_E_INVALID), changing nothing, when an
 * eviction since the mark removed tokens the mark had cached (slots below
 * mark.cached), and a mark that does not fit this sequence (beyond its
 * position). A mark belongs to the sequence it was taken in: after
 * md_qwen2_reset it means nothing (not detected in every case). Afterwards
 * md_qwen2_logits and md_qwen2_greedy fail until a token is run (read the
 * logits before the probe if they are needed), unless nothing had been run
 * since the mark. */
md_status md_qwen2_rollback(md_qwen2_forward *forward, const md_qwen2_mark *mark, md_error *err);

/* Installs (or, with NULL, removes) the attention hook called by every later
 * prefill and decode: per (layer, head, query row), the softmax weights over
 * the visible tokens. Positions are slot coordinates: query_pos is the
 * query's slot and weights[s] the weight on slot s (n_keys = query_pos + 1);
 * md_qwen2_slot_positions maps slots to positions (equal until the first
 * eviction). The struct is copied. */
void md_qwen2_set_attn_hook(md_qwen2_forward *forward, const md_attn_hook *hook);

/* Fused attention capture (kernels/kernels.h, md_attn_capture) over the
 * layers [layer_begin, layer_end), each weighted 1 / (layer_end -
 * layer_begin): after a decode step, received[k] holds the attention the
 * step's query put on token k, averaged over the captured layers and
 * averaged (or maxed) over heads; after a prefill, the attention each
 * prompt token received from the prompt's queries, heads and layers
 * averaged. Indices are slots: received[s] is the attention on the token
 * in slot s (md_qwen2_slot_positions), for s < md_qwen2_cached after the
 * step; the rest is untouched. `received` is a back-end buffer of at least
 * the cache's capacity that the caller zeroes (buf_zero) before each step
 * it wants separately; it is accumulated into, never cleared here; an
 * eviction does not move what it holds. */
typedef struct md_qwen2_capture {
  md_kbuf *received;          /* NULL: capture off */
  int layer_begin, layer_end; /* 0 .. num_hidden_layers */
  md_capture_heads heads;     /* decode rows: mean or max over heads */
} md_qwen2_capture;

/* Installs (NULL or received == NULL: removes) the capture for later steps;
 * refuses an empty or out-of-range layer range. The struct is copied. */
md_status md_qwen2_set_capture(md_qwen2_forward *forward, const md_qwen2_capture *capture,
                               md_error *err);

/* Capacity of the KV cache in slots (what a capture buffer must hold). */
int64_t md_qwen2_capacity(const md_qwen2_forward *forward);

/* ---- several sequences -------------------------------------------------------
 * A forward state is made with one sequence (a KV cache and where it
 * stands), on which every call above acts. md_qwen2_seq_new makes more,
 * each with a cache of the same capacity (memory as for the first, see
 * the top of this file), and md_qwen2_select chooses the one the calls
 * above act on: prefill, feed, decode, logits, greedy, position, cached,
 * slot_positions, evict, mark, rollback, reset and set_capture (each
 * sequence has its own capture setting). md_qwen2_step runs one token of
 * each of several sequences as one step: each weight is read once for all
 * of them (the back end's matmul_rows), attention runs per sequence on its
 * own cache, and each sequence's cache, capture and next token are, bit
 * for bit, what a md_qwen2_decode (or md_qwen2_feed) of that sequence alone
 * gives. Sequences may sit at different positions and hold different
 * slots (evictions apply per sequence); a step may take any subset of
 * them, so a batch shrinks as sequences finish. The logits buffer is
 * shared: md_qwen2_logits and md_qwen2_greedy answer only for the
 * sequence whose tokens were run last with logits. */
typedef struct md_qwen2_seq md_qwen2_seq;

/* A new, empty sequence of this forward state; free it with
 * md_qwen2_seq_free before the forward state. */
md_status md_qwen2_seq_new(md_qwen2_forward *forward, md_qwen2_seq **seq, md_error *err);
/* Releases a sequence made by md_qwen2_seq_new (the forward state's own is
 * left alone); if it was selected, the forward state's own is selected. */
void md_qwen2_seq_free(md_qwen2_forward *forward, md_qwen2_seq *seq);
/* The sequence the forward state was made with. */
md_qwen2_seq *md_qwen2_seq_own(md_qwen2_forward *forward);
/* Makes the single-sequence calls act on seq (NULL: the forward state's own). */
void md_qwen2_select(md_qwen2_forward *forward, md_qwen2_seq *seq);
md_qwen2_seq *md_qwen2_selected(md_qwen2_forward *forward);

/* dst becomes what src is: its cached keys and values, slots, positions
 * (a fork: both then run on independently, bit for bit as src would
 * alone). dst keeps its own capture setting; its logits are not copied. */
md_status md_qwen2_seq_copy(md_qwen2_forward *forward, md_qwen2_seq *dst, const md_qwen2_seq *src,
                            md_error *err);

/* One step of n sequences (distinct, 1 <= n <= max_batch): tokens[b] is
 * run in seqs[b] at its next position and slot, with that sequence's
 * capture. greedy NULL: no logits (as md_qwen2_feed); otherwise greedy[b]
 * receives seqs[b]'s greedy next token (as md_qwen2_decode then
 * md_qwen2_greedy). Afterwards md_qwen2_logits and md_qwen2_greedy fail
 * for these sequences until a token is run in them alone. Refuses, changing
 * nothing, what md_qwen2_decode refuses for any of them, a sequence listed
 * twice, and a step while an attention hook is installed (the hook cannot
 * tell the sequences apart). */
md_status md_qwen2_step(md_qwen2_forward *forward, md_qwen2_seq *const *seqs,
                        const int32_t *tokens, int64_t n, int32_t *greedy, md_error *err);

/* The memory of a sequence holding `capacity` tokens: its KV cache
 * (num_hidden_layers * 2 * num_key_value_heads * head_dim floats a slot:
 * 24 KiB for Qwen2.5-0.5B, 56 KiB for 1.5B) and its slot bookkeeping (17
 * bytes a slot). Pages are touched as slots fill, so a sequence costs this
 * for the slots it has held at most. A caller capturing attention adds
 * its capture buffer (4 bytes a slot). */
size_t md_qwen2_seq_bytes(const md_qwen2_config *config, int64_t capacity);

/* The scratch a batched step or prefill of n sequences adds to the forward
 * state's (made on the first such step, kept for the widest): the logits
 * of n rows and one hidden row each (4 * n * (vocab_size + hidden_size)
 * bytes: 2.4 MiB a sequence for Qwen2.5). */
size_t md_qwen2_step_bytes(const md_qwen2_config *config, int64_t n);

/* Runs tokens[b][0 .. lengths[b]-1] in seqs[b] (distinct, 1 <= n <=
 * max_batch), each sequence's tokens in its own matrix products as
 * md_qwen2_prefill runs them, and gives each one's greedy next token, the
 * final norm and LM head run once for the n last rows (the back end's
 * logits_rows): greedy[b] is what md_qwen2_prefill then md_qwen2_greedy of
 * seqs[b] alone give. Afterwards md_qwen2_logits and md_qwen2_greedy fail
 * for these sequences. Refuses what md_qwen2_prefill refuses; on a refusal
 * the sequences before the refused one have run their tokens. */
md_status md_qwen2_prefill_greedy(md_qwen2_forward *forward, md_qwen2_seq *const *seqs,
                                  const int32_t *const *tokens, const int64_t *lengths,
                                  int64_t n, int32_t *greedy, md_error *err);

#endif
