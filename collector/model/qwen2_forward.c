/* The Qwen2 forward pass, read top to bottom (llama2.c style): flat structs,
 * one small function per step of a layer. HF's modeling_qwen2.py is the
 * reference; ARCHITECTURE.md, "The model", lists what differs from Llama (q/k/v
 * biases, NeoX RoPE, GQA). */
#include "collector/model/qwen2_forward.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MD_DEFAULT_MAX_BATCH 2048
#define MD_MAX_HEAD_DIM 1024 /* the CPU RoPE keeps half a head on the stack */

typedef struct layer_weights {
  md_kweight *input_norm;       /* [hidden] */
  md_kweight *q, *q_bias;       /* [n_heads*hd, hidden], [n_heads*hd] */
  md_kweight *k, *k_bias;       /* [n_kv*hd, hidden], [n_kv*hd] */
  md_kweight *v, *v_bias;       /* [n_kv*hd, hidden], [n_kv*hd] */
  md_kweight *o;                /* [hidden, n_heads*hd] */
  md_kweight *post_norm;        /* [hidden] */
  md_kweight *gate, *up;        /* [intermediate, hidden] */
  md_kweight *down;             /* [hidden, intermediate] */
} layer_weights;

/* One sequence: its KV cache and where it stands. pos is the RoPE position
 * of the next token (tokens appended so far), len the cache slots in use;
 * slot s holds the token of original position slot_pos[s] (ascending).
 * Until the first eviction len == pos and slot_pos[s] == s. */
struct md_qwen2_seq {
  md_kbuf **cache;              /* [n_layers] each [2][n_kv][capacity][hd] */
  int64_t pos, len;
  int64_t *slot_pos;            /* [capacity] */
  int64_t *keep;                /* [capacity] eviction scratch: slots kept */
  unsigned char *dropped;       /* [capacity] eviction scratch: slot marks */
  bool have_logits;
  md_qwen2_capture capture;     /* received NULL: no capture */
};

/* A row r of each activation buffer as a buffer of its own (kernels.h,
 * buf_view): what a batched step hands to the operations that take one
 * sequence's row. */
typedef struct row_views {
  md_kbuf *x, *xb, *q, *key, *value, *att, *gate, *up, *logits;
} row_views;

struct md_qwen2_forward {
  md_qwen2_config config;
  md_kernels *k;
  /* weights, prepared for the back end */
  md_kweight *embed;            /* [vocab, hidden] */
  layer_weights *layers;        /* [n_layers] */
  md_kweight *norm;             /* [hidden] */
  md_kweight *lm_head;          /* [vocab, hidden] */
  /* run state; "batch" = max_batch rows (prompt tokens of one sequence, or
   * one token of each sequence of a batched step) */
  md_kbuf *x;                   /* [batch, hidden] residual stream */
  md_kbuf *xb;                  /* [batch, hidden] normed input / block output */
  md_kbuf *q;                   /* [batch, n_heads*hd] queries */
  md_kbuf *key, *value;         /* [batch, n_kv*hd] new keys and values */
  md_kbuf *att;                 /* [batch, n_heads*hd] attention output */
  md_kbuf *gate, *up;           /* [batch, intermediate] */
  md_kbuf *logits;              /* [vocab] of the last token run */
  md_kbuf *batch_logits;        /* [rows_viewed, vocab] of a batched step, on demand */
  row_views *views;             /* [rows_viewed], made on demand */
  int64_t *greedy_index;        /* [rows_viewed]: greedy_rows' tokens */
  int64_t rows_viewed;
  int64_t capacity, max_batch;
  int64_t last_chunk;           /* rows of the last chunk run (its hidden states in x) */
  md_qwen2_seq own;             /* the sequence made with the forward state */
  md_qwen2_seq *seq;            /* the one the single-sequence calls act on */
  const md_qwen2_seq *logits_of; /* whose last token `logits` holds */
  md_attn_hook hook;            /* on_row NULL: nobody listens */
};

/* ---- setup ------------------------------------------------------------------ */

static md_status check_shape(const md_tensor *t, int ndim, int64_t d0, int64_t d1, md_error *err) {
  bool ok = t->data != NULL && t->ndim == ndim && t->shape[0] == d0 && (ndim == 1 || t->shape[1] == d1);
  if (ok) return MD_OK;
  if (ndim == 1)
    return md_fail(err, MD_E_INVALID, "tensor '%s': expected shape [%lld]", t->name ? t->name : "?",
                   (long long)d0);
  return md_fail(err, MD_E_INVALID, "tensor '%s': expected shape [%lld, %lld]",
                 t->name ? t->name : "?", (long long)d0, (long long)d1);
}

static md_status prepare(md_qwen2_forward *fw, const md_tensor *t, int ndim, int64_t d0, int64_t d1,
                         md_kweight **w, md_error *err) {
  md_status status = check_shape(t, ndim, d0, d1, err);
  if (status != MD_OK) return status;
  return fw->k->ops->weight_new(fw->k, t, w, err);
}

/* A q/k/v bias: prepared in families that have them, NULL (no bias) in the
 * others. */
static md_status prepare_bias(md_qwen2_forward *fw, const md_tensor *t, int64_t d0,
                              md_kweight **w, md_error *err) {
  if (!fw->config.family->attention_bias) return MD_OK;
  return prepare(fw, t, 1, d0, 0, w, err);
}

static md_status prepare_layer(md_qwen2_forward *fw, const md_qwen2_layer *src, layer_weights *w,
                               md_error *err) {
  const md_qwen2_config *c = &fw->config;
  int64_t hidden = c->hidden_size, q_dim = (int64_t)c->num_attention_heads * c->head_dim;
  int64_t kv_dim = (int64_t)c->num_key_value_heads * c->head_dim, inter = c->intermediate_size;
  md_status s;
  if ((s = prepare(fw, &src->input_layernorm, 1, hidden, 0, &w->input_norm, err)) ||
      (s = prepare(fw, &src->q_proj, 2, q_dim, hidden, &w->q, err)) ||
      (s = prepare_bias(fw, &src->q_bias, q_dim, &w->q_bias, err)) ||
      (s = prepare(fw, &src->k_proj, 2, kv_dim, hidden, &w->k, err)) ||
      (s = prepare_bias(fw, &src->k_bias, kv_dim, &w->k_bias, err)) ||
      (s = prepare(fw, &src->v_proj, 2, kv_dim, hidden, &w->v, err)) ||
      (s = prepare_bias(fw, &src->v_bias, kv_dim, &w->v_bias, err)) ||
      (s = prepare(fw, &src->o_proj, 2, hidden, q_dim, &w->o, err)) ||
      (s = prepare(fw, &src->post_attention_layernorm, 1, hidden, 0, &w->post_norm, err)) ||
      (s = prepare(fw, &src->gate_proj, 2, inter, hidden, &w->gate, err)) ||
      (s = prepare(fw, &src->up_proj, 2, inter, hidden, &w->up, err)) ||
      (s = prepare(fw, &src->down_proj, 2, hidden, inter, &w->down, err)))
    return s;
  return MD_OK;
}

static md_status check_config(const md_qwen2_config *c, md_error *err) {
  if (!c->family) return md_fail(err, MD_E_INVALID, "qwen2 config: no model family");
  if (c->hidden_size <= 0 || c->intermediate_size <= 0 || c->num_hidden_layers <= 0 ||
      c->num_attention_heads <= 0 || c->num_key_value_heads <= 0 || c->vocab_size <= 0 ||
      c->max_position_embeddings <= 0)
    return md_fail(err, MD_E_INVALID, "qwen2 config: sizes must be positive");
  if (c->num_attention_heads % c->num_key_value_heads != 0)
    return md_fail(err, MD_E_INVALID,
                   "qwen2 config: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                   c->num_attention_heads, c->num_key_value_heads);
  if (c->head_dim <= 0 || c->head_dim % 2 != 0 || c->head_dim > MD_MAX_HEAD_DIM)
    return md_fail(err, MD_E_UNSUPPORTED, "qwen2 config: head_dim %d must be even and at most %d",
                   c->head_dim, MD_MAX_HEAD_DIM);
  if (!(c->rope_theta > 0.0) || !(c->rms_norm_eps > 0.0))
    return md_fail(err, MD_E_INVALID, "qwen2 config: rope_theta and rms_norm_eps must be positive");
  return MD_OK;
}

static md_status prepare_weights(md_qwen2_forward *fw, const md_qwen2_weights *src, md_error *err) {
  const md_qwen2_config *c = &fw->config;
  md_status s;
  if ((s = prepare(fw, &src->embed_tokens, 2, c->vocab_size, c->hidden_size, &fw->embed, err)) ||
      (s = prepare(fw, &src->norm, 1, c->hidden_size, 0, &fw->norm, err)) ||
      (s = prepare(fw, &src->lm_head, 2, c->vocab_size, c->hidden_size, &fw->lm_head, err)))
    return s;
  fw->layers = calloc((size_t)c->num_hidden_layers, sizeof *fw->layers);
  if (!fw->layers) return md_fail(err, MD_E_NOMEM, "qwen2 forward: out of memory");
  for (int l = 0; l < c->num_hidden_layers; l++)
    if ((s = prepare_layer(fw, &src->layers[l], &fw->layers[l], err)) != MD_OK) return s;
  return MD_OK;
}

static md_status alloc_state(md_qwen2_forward *fw, md_error *err) {
  const md_qwen2_config *c = &fw->config;
  size_t batch = (size_t)fw->max_batch, hidden = (size_t)c->hidden_size;
  size_t q_dim = (size_t)c->num_attention_heads * (size_t)c->head_dim;
  size_t kv_dim = (size_t)c->num_key_value_heads * (size_t)c->head_dim;
  size_t inter = (size_t)c->intermediate_size;
  md_kernels *k = fw->k;
  md_status s;
  if ((s = k->ops->buf_new(k, batch * hidden, &fw->x, err)) ||
      (s = k->ops->buf_new(k, batch * hidden, &fw->xb, err)) ||
      (s = k->ops->buf_new(k, batch * q_dim, &fw->q, err)) ||
      (s = k->ops->buf_new(k, batch * kv_dim, &fw->key, err)) ||
      (s = k->ops->buf_new(k, batch * kv_dim, &fw->value, err)) ||
      (s = k->ops->buf_new(k, batch * q_dim, &fw->att, err)) ||
      (s = k->ops->buf_new(k, batch * inter, &fw->gate, err)) ||
      (s = k->ops->buf_new(k, batch * inter, &fw->up, err)) ||
      (s = k->ops->buf_new(k, (size_t)c->vocab_size, &fw->logits, err)))
    return s;
  return MD_OK;
}

/* A sequence's cache and bookkeeping (zeroed first by the caller). */
static md_status seq_alloc(md_qwen2_forward *fw, md_qwen2_seq *q, md_error *err) {
  const md_qwen2_config *c = &fw->config;
  size_t kv_dim = (size_t)c->num_key_value_heads * (size_t)c->head_dim;
  md_kernels *k = fw->k;
  q->cache = calloc((size_t)c->num_hidden_layers, sizeof *q->cache);
  q->slot_pos = malloc((size_t)fw->capacity * sizeof *q->slot_pos);
  q->keep = malloc((size_t)fw->capacity * sizeof *q->keep);
  q->dropped = calloc((size_t)fw->capacity, 1);
  if (!q->cache || !q->slot_pos || !q->keep || !q->dropped)
    return md_fail(err, MD_E_NOMEM, "qwen2 forward: out of memory");
  for (int l = 0; l < c->num_hidden_layers; l++) {
    md_status s = k->ops->buf_new(k, 2 * kv_dim * (size_t)fw->capacity, &q->cache[l], err);
    if (s != MD_OK) return md_error_prefix(err, "KV cache of %lld positions", (long long)fw->capacity);
  }
  return MD_OK;
}

static void seq_release(md_qwen2_forward *fw, md_qwen2_seq *q) {
  for (int l = 0; q->cache && l < fw->config.num_hidden_layers; l++) fw->k->ops->buf_free(fw->k, q->cache[l]);
  free(q->cache);
  free(q->slot_pos);
  free(q->keep);
  free(q->dropped);
}

md_status md_qwen2_forward_new(const md_qwen2_config *config, const md_qwen2_weights *weights,
                               md_kernels *kernels, const md_qwen2_forward_options *options,
                               md_qwen2_forward **forward, md_error *err) {
  *forward = NULL;
  md_status s = check_config(config, err);
  if (s != MD_OK) return s;
  int64_t capacity = options && options->capacity ? options->capacity : config->max_position_embeddings;
  int64_t max_batch = options && options->max_batch ? options->max_batch : MD_DEFAULT_MAX_BATCH;
  if (capacity < 1 || capacity > config->max_position_embeddings || max_batch < 1)
    return md_fail(err, MD_E_INVALID,
                   "qwen2 forward: capacity %lld must be in [1, max_position_embeddings = %d] and "
                   "max_batch %lld positive",
                   (long long)capacity, config->max_position_embeddings, (long long)max_batch);
  md_qwen2_forward *fw = calloc(1, sizeof *fw);
  if (!fw) return md_fail(err, MD_E_NOMEM, "qwen2 forward: out of memory");
  fw->config = *config;
  fw->k = kernels;
  fw->capacity = capacity;
  fw->max_batch = max_batch < capacity ? max_batch : capacity;
  fw->seq = &fw->own;
  if ((s = prepare_weights(fw, weights, err)) != MD_OK || (s = alloc_state(fw, err)) != MD_OK ||
      (s = seq_alloc(fw, &fw->own, err)) != MD_OK) {
    md_qwen2_forward_free(fw);
    return s;
  }
  *forward = fw;
  return MD_OK;
}

static void free_views(md_qwen2_forward *fw);

static void free_layer(md_kernels *k, layer_weights *w) {
  md_kweight *all[] = {w->input_norm, w->q, w->q_bias, w->k, w->k_bias, w->v, w->v_bias,
                       w->o, w->post_norm, w->gate, w->up, w->down};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) k->ops->weight_free(k, all[i]);
}

void md_qwen2_forward_free(md_qwen2_forward *fw) {
  if (!fw) return;
  md_kernels *k = fw->k;
  for (int l = 0; fw->layers && l < fw->config.num_hidden_layers; l++) free_layer(k, &fw->layers[l]);
  free(fw->layers);
  k->ops->weight_free(k, fw->embed);
  k->ops->weight_free(k, fw->norm);
  k->ops->weight_free(k, fw->lm_head);
  free_views(fw);
  md_kbuf *bufs[] = {fw->x,   fw->xb,   fw->q,  fw->key,    fw->value,
                     fw->att, fw->gate, fw->up, fw->logits, fw->batch_logits};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) k->ops->buf_free(k, bufs[i]);
  seq_release(fw, &fw->own);
  free(fw);
}

/* ---- one layer ---------------------------------------------------------------- */

/* ys[i] = x ws[i]^T + biases[i] (biases may be NULL) through the back end's
 * matmul_shared, or matmul by matmul where it has none. */
static void matmul_shared(md_kernels *k, md_kbuf *const *ys, const md_kbuf *x,
                          const md_kweight *const *ws, const md_kweight *const *biases, int count,
                          int64_t n) {
  if (k->ops->matmul_shared) {
    k->ops->matmul_shared(k, ys, x, ws, biases, count, n);
    return;
  }
  for (int i = 0; i < count; i++) k->ops->matmul(k, ys[i], x, ws[i], biases ? biases[i] : NULL, n);
}

/* x += o_proj(attention(rope(q, k), v)) of rmsnorm(x), for n rows at
 * positions pos.. (RoPE) stored in slots len.. (cache, attention, capture
 * and hook: slot coordinates; the cache holds only kept tokens, in order,
 * so "causal" over slots is causal over the kept positions). */
static void attention_block(md_qwen2_forward *fw, int l, int64_t n) {
  const md_qwen2_config *c = &fw->config;
  const layer_weights *w = &fw->layers[l];
  md_kernels *k = fw->k;
  const md_kernel_ops *op = k->ops;
  md_attn_shape shape = {.layer = l, .n_heads = c->num_attention_heads,
                         .n_kv_heads = c->num_key_value_heads, .head_dim = c->head_dim,
                         .capacity = fw->capacity};
  op->rmsnorm(k, fw->xb, fw->x, w->input_norm, n, (float)c->rms_norm_eps);
  md_kbuf *qkv[] = {fw->q, fw->key, fw->value};
  const md_kweight *qkv_w[] = {w->q, w->k, w->v}, *qkv_bias[] = {w->q_bias, w->k_bias, w->v_bias};
  matmul_shared(k, qkv, fw->xb, qkv_w, qkv_bias, 3, n);
  op->rope(k, fw->q, fw->key, n, c->num_attention_heads, c->num_key_value_heads, c->head_dim,
           fw->seq->pos, c->rope_theta);
  op->kv_store(k, fw->seq->cache[l], fw->key, fw->value, &shape, fw->seq->len, n);
  const md_qwen2_capture *cap = &fw->seq->capture;
  bool captured = cap->received && l >= cap->layer_begin && l < cap->layer_end;
  md_attn_capture layer_capture = {
      .received = cap->received, .heads = cap->heads,
      .weight = captured ? 1.0f / (float)(cap->layer_end - cap->layer_begin) : 0.0f};
  op->attention(k, fw->att, fw->q, fw->seq->cache[l], &shape, fw->seq->len, n,
                fw->hook.on_row ? &fw->hook : NULL, captured ? &layer_capture : NULL);
  op->matmul(k, fw->xb, fw->att, w->o, NULL, n);
  op->add(k, fw->x, fw->xb, (size_t)n * (size_t)c->hidden_size);
}

/* x += down(silu(gate(h)) * up(h)) with h = rmsnorm(x). */
static void mlp_block(md_qwen2_forward *fw, int l, int64_t n) {
  const md_qwen2_config *c = &fw->config;
  const layer_weights *w = &fw->layers[l];
  md_kernels *k = fw->k;
  const md_kernel_ops *op = k->ops;
  op->rmsnorm(k, fw->xb, fw->x, w->post_norm, n, (float)c->rms_norm_eps);
  if (op->matmul_swiglu) {
    op->matmul_swiglu(k, fw->gate, fw->up, fw->xb, w->gate, w->up, n);
  } else {
    md_kbuf *gate_up[] = {fw->gate, fw->up};
    const md_kweight *gate_up_w[] = {w->gate, w->up};
    matmul_shared(k, gate_up, fw->xb, gate_up_w, NULL, 2, n);
    op->swiglu(k, fw->gate, fw->up, (size_t)n * (size_t)c->intermediate_size);
  }
  op->matmul(k, fw->xb, fw->gate, w->down, NULL, n);
  op->add(k, fw->x, fw->xb, (size_t)n * (size_t)c->hidden_size);
}

/* ---- prefill and decode --------------------------------------------------------- */

static md_status check_tokens(const md_qwen2_forward *fw, const int32_t *tokens, int64_t n,
                              md_error *err) {
  const md_qwen2_config *c = &fw->config;
  if (n < 1) return md_fail(err, MD_E_INVALID, "qwen2 forward: empty token sequence");
  if (fw->seq->pos + n > c->max_position_embeddings)
    return md_fail(err, MD_E_INVALID,
                   "qwen2 forward: %lld tokens after %lld reach position %lld, beyond the model's "
                   "max_position_embeddings (%d positions)",
                   (long long)n, (long long)fw->seq->pos, (long long)(fw->seq->pos + n - 1),
                   c->max_position_embeddings);
  if (fw->seq->len + n > fw->capacity)
    return md_fail(err, MD_E_INVALID,
                   "qwen2 forward: %lld tokens after %lld exceed the KV cache's capacity of %lld",
                   (long long)n, (long long)fw->seq->len, (long long)fw->capacity);
  for (int64_t i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
      return md_fail(err, MD_E_INVALID,
                     "qwen2 forward: token %lld has id %d, outside the vocabulary [0, %d)",
                     (long long)i, (int)tokens[i], c->vocab_size);
  return MD_OK;
}

/* Runs one chunk of at most max_batch tokens through every layer. */
static void forward_chunk(md_qwen2_forward *fw, const int32_t *tokens, int64_t n) {
  fw->k->ops->embed(fw->k, fw->x, fw->embed, tokens, n);
  for (int l = 0; l < fw->config.num_hidden_layers; l++) {
    attention_block(fw, l, n);
    mlp_block(fw, l, n);
  }
}

/* Logits of every row of the chunk into all_logits, or, without it, of the
 * last row only when this is the last chunk (a vocab-sized matvec saved). */
static md_status chunk_logits(md_qwen2_forward *fw, int64_t n, float *all_logits, bool last_chunk,
                              bool step, md_error *err) {
  md_kernels *k = fw->k;
  size_t vocab = (size_t)fw->config.vocab_size;
  float eps = (float)fw->config.rms_norm_eps;
  int64_t first_row = all_logits ? 0 : last_chunk ? n - 1 : n;
  for (int64_t row = first_row; row < n; row++) {
    k->ops->logits(k, fw->logits, fw->x, row, fw->norm, fw->lm_head, eps);
    if (all_logits) {
      md_status s = k->ops->buf_read(k, fw->logits, 0, vocab, all_logits + (size_t)row * vocab, err);
      if (s != MD_OK) return s;
    }
  }
  if (step) k->ops->step_end(k);
  /* Without logits (teacher-forced steps) nothing here needs the device to
   * finish: a device back end keeps queueing the next step while the
   * capture row is copied back (kernels.h, buf_read_start), and a deferred
   * failure surfaces at the next read, sync or argmax. */
  if (first_row >= n) return MD_OK;
  return k->ops->sync(k, err);
}

/* Runs the tokens chunk by chunk; logits: all rows into all_logits, or the
 * last token's only (want_last), or none. */
static md_status run_tokens(md_qwen2_forward *fw, const int32_t *tokens, int64_t n,
                            float *all_logits, bool want_last, md_error *err) {
  md_status s = check_tokens(fw, tokens, n, err);
  if (s != MD_OK) return s;
  size_t vocab = (size_t)fw->config.vocab_size;
  fw->seq->have_logits = false;
  /* Chunks of equal size: a short last chunk runs its matrix products at a
   * lower rate (the Qwen2.5-0.5B prefill of 1,700 tokens as 1,024 + 676 ran
   * 7% slower than as one chunk). */
  int64_t chunks = (n + fw->max_batch - 1) / fw->max_batch;
  for (int64_t done = 0, c = 0; done < n; c++) {
    int64_t chunk = (n - done + (chunks - c) - 1) / (chunks - c);
    /* A one-token step is bracketed for back ends that record and replay
     * steps (kernels.h, step_begin): its token position (rope) and its
     * slot (kv_store, attention), which differ once eviction has run. */
    bool step = n == 1 && !all_logits && fw->k->ops->step_begin && fw->k->ops->step_end;
    if (step) fw->k->ops->step_begin(fw->k, fw->seq->pos, fw->seq->len);
    forward_chunk(fw, tokens + done, chunk);
    fw->last_chunk = chunk;
    s = chunk_logits(fw, chunk, all_logits ? all_logits + (size_t)done * vocab : NULL,
                     want_last && done + chunk == n, step, err);
    if (s != MD_OK) return s;
    for (int64_t i = 0; i < chunk; i++) fw->seq->slot_pos[fw->seq->len + i] = fw->seq->pos + i;
    fw->seq->pos += chunk;
    fw->seq->len += chunk;
    done += chunk;
  }
  fw->seq->have_logits = want_last || all_logits;
  if (fw->seq->have_logits) fw->logits_of = fw->seq;
  return MD_OK;
}

md_status md_qwen2_prefill(md_qwen2_forward *fw, const int32_t *tokens, int64_t n,
                           float *all_logits, md_error *err) {
  return run_tokens(fw, tokens, n, all_logits, true, err);
}

md_status md_qwen2_feed(md_qwen2_forward *fw, const int32_t *tokens, int64_t n, md_error *err) {
  return run_tokens(fw, tokens, n, NULL, false, err);
}

md_status md_qwen2_decode(md_qwen2_forward *fw, int32_t token, md_error *err) {
  return md_qwen2_prefill(fw, &token, 1, NULL, err);
}

/* Whether `logits` holds the selected sequence's last token's logits. */
static bool have_logits(const md_qwen2_forward *fw) {
  return fw->seq->have_logits && fw->logits_of == fw->seq;
}

md_status md_qwen2_logits(md_qwen2_forward *fw, float *logits, md_error *err) {
  if (!have_logits(fw)) return md_fail(err, MD_E_INVALID, "qwen2 forward: no logits: no token has been run yet, or the last ones were fed without logits");
  return fw->k->ops->buf_read(fw->k, fw->logits, 0, (size_t)fw->config.vocab_size, logits, err);
}

md_status md_qwen2_greedy(md_qwen2_forward *fw, int32_t *token, md_error *err) {
  if (!have_logits(fw)) return md_fail(err, MD_E_INVALID, "qwen2 forward: no logits: no token has been run yet, or the last ones were fed without logits");
  int64_t index = 0;
  md_status s = fw->k->ops->argmax(fw->k, fw->logits, (size_t)fw->config.vocab_size, &index, err);
  if (s == MD_OK) *token = (int32_t)index;
  return s;
}

int64_t md_qwen2_position(const md_qwen2_forward *fw) { return fw->seq->pos; }
int64_t md_qwen2_capacity(const md_qwen2_forward *fw) { return fw->capacity; }

void md_qwen2_reset(md_qwen2_forward *fw) {
  fw->seq->pos = 0;
  fw->seq->len = 0;
  fw->seq->have_logits = false;
}

md_status md_qwen2_set_capture(md_qwen2_forward *fw, const md_qwen2_capture *capture,
                               md_error *err) {
  if (!capture || !capture->received) {
    memset(&fw->seq->capture, 0, sizeof fw->seq->capture);
    return MD_OK;
  }
  int layers = fw->config.num_hidden_layers;
  if (capture->layer_begin < 0 || capture->layer_end > layers ||
      capture->layer_begin >= capture->layer_end)
    return md_fail(err, MD_E_INVALID,
                   "layer range %d:%d is empty or outside the model's %d layers (0:%d)",
                   capture->layer_begin, capture->layer_end, layers, layers);
  if (capture->heads != MD_CAPTURE_HEADS_MEAN && capture->heads != MD_CAPTURE_HEADS_MAX)
    return md_fail(err, MD_E_INVALID, "unknown head aggregation %d", (int)capture->heads);
  fw->seq->capture = *capture;
  return MD_OK;
}

void md_qwen2_set_attn_hook(md_qwen2_forward *fw, const md_attn_hook *hook) {
  if (hook) fw->hook = *hook;
  else memset(&fw->hook, 0, sizeof fw->hook);
}

/* ---- eviction and rollback -------------------------------------------------------- */

int64_t md_qwen2_cached(const md_qwen2_forward *fw) { return fw->seq->len; }

const int64_t *md_qwen2_slot_positions(const md_qwen2_forward *fw) { return fw->seq->slot_pos; }

/* The slot holding original position `position`, or -1 (slot_pos ascends). */
static int64_t slot_of(const md_qwen2_forward *fw, int64_t position) {
  int64_t lo = 0, hi = fw->seq->len;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (fw->seq->slot_pos[mid] < position) lo = mid + 1;
    else hi = mid;
  }
  return lo < fw->seq->len && fw->seq->slot_pos[lo] == position ? lo : -1;
}

/* Without the back end's kv_compact: the whole cache of each layer through
 * host memory (correct, slow; a back end should provide kv_compact). */
static md_status compact_through_host(md_qwen2_forward *fw, int64_t n_keep, md_error *err) {
  const md_qwen2_config *c = &fw->config;
  md_kernels *k = fw->k;
  size_t hd = (size_t)c->head_dim, cap = (size_t)fw->capacity;
  size_t planes = 2 * (size_t)c->num_key_value_heads, floats = planes * cap * hd;
  float *host = malloc(floats * sizeof *host);
  if (!host) return md_fail(err, MD_E_NOMEM, "qwen2 forward: out of memory for the KV cache's copy");
  md_status s = MD_OK;
  for (int l = 0; l < c->num_hidden_layers && s == MD_OK; l++) {
    s = k->ops->buf_read(k, fw->seq->cache[l], 0, floats, host, err);
    for (size_t p = 0; s == MD_OK && p < planes; p++)
      for (int64_t j = 0; j < n_keep; j++)
        if (fw->seq->keep[j] != j)
          memcpy(host + (p * cap + (size_t)j) * hd, host + (p * cap + (size_t)fw->seq->keep[j]) * hd,
                 hd * sizeof *host);
    if (s == MD_OK) s = k->ops->buf_write(k, fw->seq->cache[l], 0, floats, host, err);
  }
  free(host);
  return s;
}

md_status md_qwen2_evict(md_qwen2_forward *fw, const int64_t *positions, int64_t n, md_error *err) {
  if (n < 0 || (n > 0 && !positions))
    return md_fail(err, MD_E_INVALID, "qwen2 forward: evict: %lld positions%s", (long long)n,
                   n < 0 ? " (a negative count)" : " without an array");
  /* Check everything before changing anything: marks go into `dropped`
   * and are cleared again on a refusal. */
  md_status s = MD_OK;
  int64_t i = 0;
  for (; i < n; i++) {
    int64_t slot = slot_of(fw, positions[i]);
    if (slot < 0) {
      s = md_fail(err, MD_E_INVALID,
                  "qwen2 forward: evict: position %lld is not in the cache (%lld tokens run, "
                  "%lld cached)",
                  (long long)positions[i], (long long)fw->seq->pos, (long long)fw->seq->len);
      break;
    }
    if (fw->seq->dropped[slot]) {
      s = md_fail(err, MD_E_INVALID, "qwen2 forward: evict: position %lld is listed twice",
                  (long long)positions[i]);
      break;
    }
    fw->seq->dropped[slot] = 1;
  }
  if (s != MD_OK) {
    for (int64_t j = 0; j < i; j++) fw->seq->dropped[slot_of(fw, positions[j])] = 0;
    return s;
  }
  if (n == 0) return MD_OK;
  int64_t n_keep = 0;
  for (int64_t slot = 0; slot < fw->seq->len; slot++) {
    if (!fw->seq->dropped[slot]) fw->seq->keep[n_keep++] = slot;
    fw->seq->dropped[slot] = 0;
  }
  md_kernels *k = fw->k;
  const md_qwen2_config *c = &fw->config;
  if (k->ops->kv_compact) {
    md_attn_shape shape = {.n_heads = c->num_attention_heads, .n_kv_heads = c->num_key_value_heads,
                           .head_dim = c->head_dim, .capacity = fw->capacity};
    for (int l = 0; l < c->num_hidden_layers; l++) {
      shape.layer = l;
      k->ops->kv_compact(k, fw->seq->cache[l], &shape, fw->seq->keep, n_keep);
    }
    s = k->ops->sync(k, err);
  } else {
    s = compact_through_host(fw, n_keep, err);
  }
  /* The bookkeeping follows the cache even on a device failure (the cache
   * is then unreliable anyway; the caller sees the error). */
  for (int64_t j = 0; j < n_keep; j++) fw->seq->slot_pos[j] = fw->seq->slot_pos[fw->seq->keep[j]];
  fw->seq->len = n_keep;
  return s;
}

md_qwen2_mark md_qwen2_mark_get(const md_qwen2_forward *fw) {
  return (md_qwen2_mark){.pos = fw->seq->pos, .cached = fw->seq->len};
}

md_status md_qwen2_rollback(md_qwen2_forward *fw, const md_qwen2_mark *mark, md_error *err) {
  int64_t c = mark->cached;
  if (mark->pos < 0 || mark->pos > fw->seq->pos || c < 0 || c > mark->pos)
    return md_fail(err, MD_E_INVALID,
                   "qwen2 forward: rollback to position %lld with %lld cached: not a mark of this "
                   "sequence (%lld tokens run)",
                   (long long)mark->pos, (long long)c, (long long)fw->seq->pos);
  /* The slots below the mark are intact exactly when slot c - 1 still holds
   * a token from before the mark: slots only ever lose tokens (the rest move
   * down in order), and tokens appended since have positions >= mark->pos. */
  if (fw->seq->len < c || (c > 0 && fw->seq->slot_pos[c - 1] >= mark->pos))
    return md_fail(err, MD_E_INVALID,
                   "qwen2 forward: rollback to position %lld: an eviction since the mark removed "
                   "tokens it had cached",
                   (long long)mark->pos);
  if (fw->seq->pos == mark->pos) return MD_OK; /* nothing run since the mark */
  fw->seq->pos = mark->pos;
  fw->seq->len = c;
  fw->seq->have_logits = false; /* the last token run is gone */
  return MD_OK;
}

/* ---- sequences and batched steps --------------------------------------------------- */

md_status md_qwen2_seq_new(md_qwen2_forward *fw, md_qwen2_seq **out, md_error *err) {
  *out = NULL;
  md_qwen2_seq *q = calloc(1, sizeof *q);
  if (!q) return md_fail(err, MD_E_NOMEM, "qwen2 forward: out of memory");
  md_status s = seq_alloc(fw, q, err);
  if (s != MD_OK) {
    seq_release(fw, q);
    free(q);
    return s;
  }
  *out = q;
  return MD_OK;
}

void md_qwen2_seq_free(md_qwen2_forward *fw, md_qwen2_seq *q) {
  if (!q || q == &fw->own) return;
  if (fw->seq == q) fw->seq = &fw->own;
  seq_release(fw, q);
  free(q);
}

md_qwen2_seq *md_qwen2_seq_own(md_qwen2_forward *fw) { return &fw->own; }

void md_qwen2_select(md_qwen2_forward *fw, md_qwen2_seq *q) { fw->seq = q ? q : &fw->own; }

md_qwen2_seq *md_qwen2_selected(md_qwen2_forward *fw) { return fw->seq; }

md_status md_qwen2_seq_copy(md_qwen2_forward *fw, md_qwen2_seq *dst, const md_qwen2_seq *src,
                            md_error *err) {
  if (dst == src) return MD_OK;
  const md_qwen2_config *c = &fw->config;
  md_kernels *k = fw->k;
  size_t hd = (size_t)c->head_dim, cap = (size_t)fw->capacity;
  size_t planes = 2 * (size_t)c->num_key_value_heads, used = (size_t)src->len * hd;
  md_status s = MD_OK;
  if (used > 0) {
    /* Each plane's used slots, through host memory: a copy per fork of an
     * eviction run, small against the steps it runs afterwards. */
    float *host = malloc(used * sizeof *host);
    if (!host) return md_fail(err, MD_E_NOMEM, "qwen2 forward: out of memory for a cache copy");
    for (int l = 0; l < c->num_hidden_layers && s == MD_OK; l++)
      for (size_t p = 0; p < planes && s == MD_OK; p++) {
        s = k->ops->buf_read(k, src->cache[l], p * cap * hd, used, host, err);
        if (s == MD_OK) s = k->ops->buf_write(k, dst->cache[l], p * cap * hd, used, host, err);
      }
    free(host);
  }
  if (s != MD_OK) return s;
  memcpy(dst->slot_pos, src->slot_pos, (size_t)src->len * sizeof *dst->slot_pos);
  dst->pos = src->pos;
  dst->len = src->len;
  dst->have_logits = false; /* the logits buffer belongs to the last sequence run */
  return MD_OK;
}

static void free_views(md_qwen2_forward *fw) {
  md_kernels *k = fw->k;
  for (int64_t r = 0; r < fw->rows_viewed; r++) {
    row_views *v = &fw->views[r];
    md_kbuf *all[] = {v->x, v->xb, v->q, v->key, v->value, v->att, v->gate, v->up, v->logits};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
      if (all[i]) k->ops->buf_free(k, all[i]);
  }
  free(fw->views);
  free(fw->greedy_index);
  fw->views = NULL;
  fw->greedy_index = NULL;
  fw->rows_viewed = 0;
}

/* Views of rows 0 .. n-1 of every activation buffer and a logits buffer
 * of n rows, made once for the widest batch seen. */
static md_status ensure_views(md_qwen2_forward *fw, int64_t n, md_error *err) {
  if (n <= fw->rows_viewed) return MD_OK;
  const md_qwen2_config *c = &fw->config;
  md_kernels *k = fw->k;
  free_views(fw);
  if (fw->batch_logits) k->ops->buf_free(k, fw->batch_logits);
  fw->batch_logits = NULL;
  size_t hidden = (size_t)c->hidden_size, vocab = (size_t)c->vocab_size;
  size_t q_dim = (size_t)c->num_attention_heads * (size_t)c->head_dim;
  size_t kv_dim = (size_t)c->num_key_value_heads * (size_t)c->head_dim;
  size_t inter = (size_t)c->intermediate_size;
  md_status s = k->ops->buf_new(k, (size_t)n * vocab, &fw->batch_logits, err);
  if (s != MD_OK) return md_error_prefix(err, "logits of a batch of %lld sequences", (long long)n);
  fw->views = calloc((size_t)n, sizeof *fw->views);
  fw->greedy_index = calloc((size_t)n, sizeof *fw->greedy_index);
  if (!fw->views || !fw->greedy_index) {
    free_views(fw);
    return md_fail(err, MD_E_NOMEM, "qwen2 forward: out of memory");
  }
  fw->rows_viewed = n;
  for (int64_t r = 0; r < n && s == MD_OK; r++) {
    row_views *v = &fw->views[r];
    size_t at = (size_t)r;
    if ((s = k->ops->buf_view(k, fw->x, at * hidden, hidden, &v->x, err)) ||
        (s = k->ops->buf_view(k, fw->xb, at * hidden, hidden, &v->xb, err)) ||
        (s = k->ops->buf_view(k, fw->q, at * q_dim, q_dim, &v->q, err)) ||
        (s = k->ops->buf_view(k, fw->key, at * kv_dim, kv_dim, &v->key, err)) ||
        (s = k->ops->buf_view(k, fw->value, at * kv_dim, kv_dim, &v->value, err)) ||
        (s = k->ops->buf_view(k, fw->att, at * q_dim, q_dim, &v->att, err)) ||
        (s = k->ops->buf_view(k, fw->gate, at * inter, inter, &v->gate, err)) ||
        (s = k->ops->buf_view(k, fw->up, at * inter, inter, &v->up, err)) ||
        (s = k->ops->buf_view(k, fw->batch_logits, at * vocab, vocab, &v->logits, err)))
      break;
  }
  if (s != MD_OK) free_views(fw);
  return s;
}

static md_status check_step(const md_qwen2_forward *fw, md_qwen2_seq *const *seqs,
                            const int32_t *tokens, int64_t n, md_error *err) {
  const md_qwen2_config *c = &fw->config;
  if (n < 1 || n > fw->max_batch)
    return md_fail(err, MD_E_INVALID,
                   "qwen2 forward: a batched step of %lld sequences (1 to %lld: the forward "
                   "state's max_batch)", (long long)n, (long long)fw->max_batch);
  if (fw->hook.on_row)
    return md_fail(err, MD_E_INVALID, "qwen2 forward: a batched step with an attention hook "
                   "installed (the hook cannot tell the sequences apart)");
  for (int64_t b = 0; b < n; b++) {
    const md_qwen2_seq *q = seqs[b];
    if (!q) return md_fail(err, MD_E_INVALID, "qwen2 forward: batched step: sequence %lld is NULL", (long long)b);
    for (int64_t a = 0; a < b; a++)
      if (seqs[a] == q)
        return md_fail(err, MD_E_INVALID, "qwen2 forward: batched step: sequence %lld is also "
                       "sequence %lld", (long long)b, (long long)a);
    if (q->pos + 1 > c->max_position_embeddings)
      return md_fail(err, MD_E_INVALID, "qwen2 forward: batched step: sequence %lld is at position "
                     "%lld, the model's max_position_embeddings", (long long)b, (long long)q->pos);
    if (q->len + 1 > fw->capacity)
      return md_fail(err, MD_E_INVALID, "qwen2 forward: batched step: sequence %lld fills the KV "
                     "cache's %lld slots", (long long)b, (long long)fw->capacity);
    if (tokens[b] < 0 || tokens[b] >= c->vocab_size)
      return md_fail(err, MD_E_INVALID, "qwen2 forward: batched step: token %d of sequence %lld "
                     "is outside the vocabulary [0, %d)", (int)tokens[b], (long long)b, c->vocab_size);
  }
  return MD_OK;
}

/* The capture of sequence q for layer l, or NULL. */
static const md_attn_capture *layer_capture(const md_qwen2_seq *q, int l, md_attn_capture *out) {
  const md_qwen2_capture *cap = &q->capture;
  if (!cap->received || l < cap->layer_begin || l >= cap->layer_end) return NULL;
  *out = (md_attn_capture){.received = cap->received, .heads = cap->heads,
                           .weight = 1.0f / (float)(cap->layer_end - cap->layer_begin)};
  return out;
}

/* Sequence b's rope, cache store and attention on row b of q, key, value
 * and att, at its own position and slot, with its own capture. */
static void step_attention(md_qwen2_forward *fw, int l, md_qwen2_seq *const *seqs, int64_t n) {
  const md_qwen2_config *c = &fw->config;
  md_kernels *k = fw->k;
  const md_kernel_ops *op = k->ops;
  md_attn_shape shape = {.layer = l, .n_heads = c->num_attention_heads,
                         .n_kv_heads = c->num_key_value_heads, .head_dim = c->head_dim,
                         .capacity = fw->capacity};
  for (int64_t b = 0; b < n; b++) {
    md_qwen2_seq *q = seqs[b];
    row_views *v = &fw->views[b];
    op->rope(k, v->q, v->key, 1, c->num_attention_heads, c->num_key_value_heads, c->head_dim,
             q->pos, c->rope_theta);
    op->kv_store(k, q->cache[l], v->key, v->value, &shape, q->len, 1);
    md_attn_capture capture;
    op->attention(k, v->att, v->q, q->cache[l], &shape, q->len, 1, NULL,
                  layer_capture(q, l, &capture));
  }
}

/* One layer of a batched step with the back end's matmul_rows: every
 * weight read once for the n rows. */
static void step_layer_rows(md_qwen2_forward *fw, int l, md_qwen2_seq *const *seqs, int64_t n) {
  const md_qwen2_config *c = &fw->config;
  const layer_weights *w = &fw->layers[l];
  md_kernels *k = fw->k;
  const md_kernel_ops *op = k->ops;
  float eps = (float)c->rms_norm_eps;
  op->rmsnorm(k, fw->xb, fw->x, w->input_norm, n, eps);
  md_kbuf *qkv[] = {fw->q, fw->key, fw->value};
  const md_kweight *qkv_w[] = {w->q, w->k, w->v}, *qkv_bias[] = {w->q_bias, w->k_bias, w->v_bias};
  op->matmul_rows(k, qkv, fw->xb, qkv_w, qkv_bias, 3, n);
  step_attention(fw, l, seqs, n);
  md_kbuf *o[] = {fw->xb};
  const md_kweight *o_w[] = {w->o};
  op->matmul_rows(k, o, fw->att, o_w, NULL, 1, n);
  op->add(k, fw->x, fw->xb, (size_t)n * (size_t)c->hidden_size);
  op->rmsnorm(k, fw->xb, fw->x, w->post_norm, n, eps);
  md_kbuf *gate_up[] = {fw->gate, fw->up};
  const md_kweight *gate_up_w[] = {w->gate, w->up};
  op->matmul_rows(k, gate_up, fw->xb, gate_up_w, NULL, 2, n);
  op->swiglu(k, fw->gate, fw->up, (size_t)n * (size_t)c->intermediate_size);
  md_kbuf *down[] = {fw->xb};
  const md_kweight *down_w[] = {w->down};
  op->matmul_rows(k, down, fw->gate, down_w, NULL, 1, n);
  op->add(k, fw->x, fw->xb, (size_t)n * (size_t)c->hidden_size);
}

/* One layer of a batched step without matmul_rows: each row through the
 * one-row operations of attention_block and mlp_block, so each sequence
 * gets the bits of a step of its own. */
static void step_layer_each(md_qwen2_forward *fw, int l, md_qwen2_seq *const *seqs, int64_t n) {
  const md_qwen2_config *c = &fw->config;
  const layer_weights *w = &fw->layers[l];
  md_kernels *k = fw->k;
  const md_kernel_ops *op = k->ops;
  float eps = (float)c->rms_norm_eps;
  for (int64_t b = 0; b < n; b++) {
    row_views *v = &fw->views[b];
    op->rmsnorm(k, v->xb, v->x, w->input_norm, 1, eps);
    md_kbuf *qkv[] = {v->q, v->key, v->value};
    const md_kweight *qkv_w[] = {w->q, w->k, w->v}, *qkv_bias[] = {w->q_bias, w->k_bias, w->v_bias};
    matmul_shared(k, qkv, v->xb, qkv_w, qkv_bias, 3, 1);
  }
  step_attention(fw, l, seqs, n);
  for (int64_t b = 0; b < n; b++) {
    row_views *v = &fw->views[b];
    op->matmul(k, v->xb, v->att, w->o, NULL, 1);
    op->add(k, v->x, v->xb, (size_t)c->hidden_size);
    op->rmsnorm(k, v->xb, v->x, w->post_norm, 1, eps);
    if (op->matmul_swiglu) {
      op->matmul_swiglu(k, v->gate, v->up, v->xb, w->gate, w->up, 1);
    } else {
      md_kbuf *gate_up[] = {v->gate, v->up};
      const md_kweight *gate_up_w[] = {w->gate, w->up};
      matmul_shared(k, gate_up, v->xb, gate_up_w, NULL, 2, 1);
      op->swiglu(k, v->gate, v->up, (size_t)c->intermediate_size);
    }
    op->matmul(k, v->xb, v->gate, w->down, NULL, 1);
    op->add(k, v->x, v->xb, (size_t)c->hidden_size);
  }
}

/* The greedy tokens of the n rows of x after the last layer: the back
 * end's greedy_rows, or the LM head into batch_logits (logits_rows, or
 * logits row by row without matmul_rows) and each row's argmax; the same
 * tokens either way (kernels.h). */
static md_status greedy_tokens(md_qwen2_forward *fw, int64_t n, int32_t *greedy, md_error *err) {
  md_kernels *k = fw->k;
  const md_kernel_ops *op = k->ops;
  float eps = (float)fw->config.rms_norm_eps;
  md_status s = MD_OK;
  if (op->matmul_rows && op->greedy_rows) {
    s = op->greedy_rows(k, fw->greedy_index, fw->batch_logits, fw->x, n, fw->norm, fw->lm_head,
                        eps, err);
    for (int64_t b = 0; b < n && s == MD_OK; b++) greedy[b] = (int32_t)fw->greedy_index[b];
    return s;
  }
  if (op->matmul_rows && op->logits_rows)
    op->logits_rows(k, fw->batch_logits, fw->x, n, fw->norm, fw->lm_head, eps);
  else
    for (int64_t b = 0; b < n; b++)
      op->logits(k, fw->views[b].logits, fw->x, b, fw->norm, fw->lm_head, eps);
  size_t vocab = (size_t)fw->config.vocab_size;
  for (int64_t b = 0; b < n && s == MD_OK; b++) {
    int64_t index = 0;
    s = op->argmax(k, fw->views[b].logits, vocab, &index, err);
    greedy[b] = (int32_t)index;
  }
  return s;
}

/* One sequence's tokens run alone (a batch on a back end without the
 * batched ops), its greedy token read when greedy is not NULL; afterwards
 * it has no logits, as after a batched step. The selection is kept. */
static md_status run_alone(md_qwen2_forward *fw, md_qwen2_seq *seq, const int32_t *tokens,
                           int64_t n, int32_t *greedy, md_error *err) {
  md_qwen2_seq *selected = fw->seq;
  fw->seq = seq;
  md_status s = run_tokens(fw, tokens, n, NULL, greedy != NULL, err);
  if (s == MD_OK && greedy) s = md_qwen2_greedy(fw, greedy, err);
  seq->have_logits = false;
  fw->seq = selected;
  return s;
}

md_status md_qwen2_step(md_qwen2_forward *fw, md_qwen2_seq *const *seqs, const int32_t *tokens,
                        int64_t n, int32_t *greedy, md_error *err) {
  md_status s = check_step(fw, seqs, tokens, n, err);
  if (s != MD_OK) return s;
  md_kernels *k = fw->k;
  const md_kernel_ops *op = k->ops;
  if (!op->buf_view) { /* sequence after sequence */
    for (int64_t b = 0; b < n && s == MD_OK; b++)
      s = run_alone(fw, seqs[b], tokens + b, 1, greedy ? greedy + b : NULL, err);
    return s;
  }
  if ((s = ensure_views(fw, n, err)) != MD_OK) return s;
  op->embed(k, fw->x, fw->embed, tokens, n);
  for (int l = 0; l < fw->config.num_hidden_layers; l++) {
    if (op->matmul_rows) step_layer_rows(fw, l, seqs, n);
    else step_layer_each(fw, l, seqs, n);
  }
  for (int64_t b = 0; b < n; b++) {
    md_qwen2_seq *q = seqs[b];
    q->slot_pos[q->len] = q->pos;
    q->pos++;
    q->len++;
    q->have_logits = false;
  }
  if (!greedy) return op->sync(k, err);
  return greedy_tokens(fw, n, greedy, err);
}

md_status md_qwen2_prefill_greedy(md_qwen2_forward *fw, md_qwen2_seq *const *seqs,
                                  const int32_t *const *tokens, const int64_t *lengths,
                                  int64_t n, int32_t *greedy, md_error *err) {
  md_kernels *k = fw->k;
  const md_kernel_ops *op = k->ops;
  md_qwen2_seq *selected = fw->seq;
  md_status s = MD_OK;
  if (n < 1 || n > fw->max_batch)
    return md_fail(err, MD_E_INVALID, "qwen2 forward: a batched prefill of %lld sequences (1 to "
                   "%lld)", (long long)n, (long long)fw->max_batch);
  if (!(op->buf_view && op->matmul_rows && op->logits_rows)) { /* sequence after sequence */
    for (int64_t b = 0; b < n && s == MD_OK; b++)
      s = run_alone(fw, seqs[b], tokens[b], lengths[b], greedy + b, err);
    return s;
  }
  if ((s = ensure_views(fw, n, err)) != MD_OK) return s;
  size_t hidden = (size_t)fw->config.hidden_size;
  float *last = malloc((size_t)n * hidden * sizeof *last);
  if (!last) return md_fail(err, MD_E_NOMEM, "qwen2 forward: out of memory");
  /* Each sequence's tokens through the layers (its own matrix products),
   * its last hidden row kept; then the final norm and LM head of the n rows
   * at once: each row's logits are what md_qwen2_prefill computes. */
  for (int64_t b = 0; b < n && s == MD_OK; b++) {
    fw->seq = seqs[b];
    s = run_tokens(fw, tokens[b], lengths[b], NULL, false, err);
    if (s == MD_OK)
      s = op->buf_read(k, fw->x, (size_t)(fw->last_chunk - 1) * hidden, hidden,
                       last + (size_t)b * hidden, err);
  }
  fw->seq = selected;
  if (s == MD_OK) s = op->buf_write(k, fw->x, 0, (size_t)n * hidden, last, err);
  free(last);
  if (s != MD_OK) return s;
  return greedy_tokens(fw, n, greedy, err);
}

size_t md_qwen2_seq_bytes(const md_qwen2_config *c, int64_t capacity) {
  size_t slots = capacity > 0 ? (size_t)capacity : 0;
  size_t kv = (size_t)c->num_hidden_layers * 2 * (size_t)c->num_key_value_heads *
              (size_t)c->head_dim * sizeof(float);
  return slots * (kv + 2 * sizeof(int64_t) + 1);
}

size_t md_qwen2_step_bytes(const md_qwen2_config *c, int64_t n) {
  size_t rows = n > 0 ? (size_t)n : 0;
  return rows * ((size_t)c->vocab_size + (size_t)c->hidden_size) * sizeof(float);
}
