#include "collector/tokenizer/episode_tokens.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static md_status episode_error(md_error *err, md_status status, const md_trace_episode *ep,
                               const char *what) {
  return md_fail(err, status, "%s:%zu: episode \"%s\": %s", ep->path ? ep->path : "?", ep->line,
                 ep->id ? ep->id : "?", what);
}

/* How many tokens md_tokenizer_encode_at_most may count for a text of an episode with
 * max_positions set: 0 for no limit. */
static size_t count_limit(size_t max_positions) {
  if (max_positions == 0 || max_positions > SIZE_MAX / MD_EPISODE_COUNT_FACTOR) return 0;
  return max_positions * MD_EPISODE_COUNT_FACTOR;
}

/* Encodes `len` bytes of `text` (`what`: "prompt" or "continuation"), counting at most
 * `limit` tokens unless it is 0. */
static md_status encode_text(const md_tokenizer *tok, const md_trace_episode *ep, const char *what,
                             const char *text, size_t len, size_t limit, size_t max_positions,
                             md_tokens *tokens, md_error *err) {
  md_error inner;
  bool over = false;
  md_status status = limit ? md_tokenizer_encode_at_most(tok, text, len, limit, tokens, &over, &inner)
                           : md_tokenizer_encode(tok, text, len, tokens, &inner);
  char message[MD_ERROR_MESSAGE_MAX];
  if (status != MD_OK) {
    snprintf(message, sizeof message, "%s: %.900s", what, inner.message);
    return episode_error(err, inner.status, ep, message);
  }
  if (over) {
    snprintf(message, sizeof message,
             "the %s has more than %zu tokens (counting stopped there), more than the model's "
             "max_position_embeddings (%zu)",
             what, limit, max_positions);
    return episode_error(err, MD_E_INVALID, ep, message);
  }
  return MD_OK;
}

/* Tokenises the prompt text into `tokens`. With max_positions set, a prompt that cannot fit
 * is refused from its length alone when that is enough, else once counting passes the
 * limit. */
static md_status encode_prompt(const md_tokenizer *tok, const md_trace_episode *ep,
                               const md_chat_prompt *prompt, size_t max_positions,
                               md_tokens *tokens, md_error *err) {
  size_t fewest = md_tokenizer_min_tokens(tok, prompt->length);
  if (max_positions && fewest > max_positions) {
    char what[256];
    snprintf(what, sizeof what,
             "the prompt's %zu bytes make at least %zu tokens, more than the model's "
             "max_position_embeddings (%zu)",
             prompt->length, fewest, max_positions);
    return episode_error(err, MD_E_INVALID, ep, what);
  }
  md_status status = encode_text(tok, ep, "prompt", prompt->text, prompt->length,
                                 count_limit(max_positions), max_positions, tokens, err);
  if (status != MD_OK) return status;
  if (tokens->count == 0) return episode_error(err, MD_E_INVALID, ep, "the prompt has no tokens");
  return MD_OK;
}

/* Copies the prompt's ids and labels each token with the region of the span
 * its first byte lies in. */
static md_status label_prompt(const md_trace_episode *ep, const md_tokens *tokens,
                              md_episode_tokens *out, md_error *err) {
  size_t n = tokens->count;
  size_t *start = calloc(n, sizeof *start), *span = calloc(n, sizeof *span);
  md_status status = MD_OK;
  md_error inner;
  if (!start || !span) {
    status = episode_error(err, MD_E_NOMEM, ep, "out of memory");
  } else {
    for (size_t i = 0; i < n; i++) start[i] = tokens->spans[i].start;
    status = md_chat_token_spans(out->prompt.spans, out->prompt.n_spans, start, n, span, &inner);
    if (status != MD_OK) status = episode_error(err, status, ep, inner.message);
  }
  if (status == MD_OK) {
    for (size_t i = 0; i < n; i++) out->regions[i] = out->prompt.spans[span[i]].region;
    memcpy(out->ids, tokens->ids, n * sizeof *out->ids);
    out->prompt_tokens = n;
    out->spans = span;
    out->starts = start;
    span = NULL;
    start = NULL;
  }
  free(start);
  free(span);
  return status;
}

/* The continuation's token count for the window (before the cap). Without a cap a
 * continuation counted past the limit cannot fit; with one, all of its first max_steps
 * tokens are needed, which a stopped count does not give. */
static md_status window_length(const md_tokenizer *tok, const md_trace_episode *ep,
                               const md_chat_prompt *prompt, size_t max_steps, size_t max_positions,
                               md_tokens *continuation, size_t *steps, md_error *err) {
  const md_trace_continuation *c = &prompt->continuation;
  if (c->kind == MD_CONTINUATION_GENERATE) {
    *steps = (size_t)c->generate;
  } else if (c->kind == MD_CONTINUATION_NONE) {
    *steps = MD_EPISODE_DEFAULT_STEPS;
  } else {
    size_t limit = max_steps ? 0 : count_limit(max_positions);
    md_status status = encode_text(tok, ep, "continuation", c->text, c->length, limit,
                                   max_positions, continuation, err);
    if (status != MD_OK) return status;
    if (continuation->count == 0)
      return episode_error(err, MD_E_INVALID, ep, "the continuation text has no tokens");
    *steps = continuation->count;
  }
  return MD_OK;
}

static md_status check_vocab(const md_tokenizer *tok, const md_trace_episode *ep,
                             const md_episode_tokens *t, size_t count, size_t vocab_size,
                             md_error *err) {
  for (size_t i = 0; vocab_size && i < count; i++) {
    if ((size_t)t->ids[i] < vocab_size) continue;
    const char *piece = md_tokenizer_piece(tok, t->ids[i]);
    char what[512];
    snprintf(what, sizeof what,
             "token %zu (id %d, \"%.64s\") is outside the model's vocabulary of %zu ids: "
             "tokenizer.json and the checkpoint do not belong together",
             i, (int)t->ids[i], piece ? piece : "", vocab_size);
    return episode_error(err, MD_E_INVALID, ep, what);
  }
  return MD_OK;
}

static md_status allocate(md_episode_tokens *out, size_t positions, const md_trace_episode *ep,
                          md_error *err) {
  out->ids = calloc(positions, sizeof *out->ids);
  out->regions = calloc(positions, sizeof *out->regions);
  if (!out->ids || !out->regions) return episode_error(err, MD_E_NOMEM, ep, "out of memory");
  return MD_OK;
}

md_status md_episode_tokenize(const md_tokenizer *tok, const md_trace_episode *episode,
                              const md_episode_tokens_options *options, md_episode_tokens *out,
                              md_error *err) {
  memset(out, 0, sizeof *out);
  size_t max_steps = options ? options->max_steps : 0;
  size_t vocab_size = options ? options->vocab_size : 0;
  size_t max_positions = options ? options->max_positions : 0;
  md_tokens prompt_tokens = {0}, continuation = {0};
  size_t steps = 0;
  const md_chat_format *chat = options && options->chat ? options->chat : &md_chat_chatml;
  md_status status = chat->render(episode, &out->prompt, err);
  if (status == MD_OK)
    status = encode_prompt(tok, episode, &out->prompt, max_positions, &prompt_tokens, err);
  if (status == MD_OK)
    status = window_length(tok, episode, &out->prompt, max_steps, max_positions, &continuation,
                           &steps, err);
  if (status == MD_OK) {
    if (max_steps && steps > max_steps) steps = max_steps;
    out->decode_steps = steps;
    out->kind = out->prompt.continuation.kind;
    out->continuation_region = out->prompt.continuation.region;
    out->forced_tokens = out->kind == MD_CONTINUATION_TEXT ? steps : 0;
    status = allocate(out, prompt_tokens.count + steps, episode, err);
  }
  if (status == MD_OK) status = label_prompt(episode, &prompt_tokens, out, err);
  if (status == MD_OK) {
    size_t positions = md_episode_positions(out);
    for (size_t i = out->prompt_tokens; i < positions; i++) out->regions[i] = out->continuation_region;
    if (out->forced_tokens)
      memcpy(out->ids + out->prompt_tokens, continuation.ids, out->forced_tokens * sizeof *out->ids);
    status = check_vocab(tok, episode, out, out->prompt_tokens + out->forced_tokens, vocab_size, err);
  }
  md_tokens_free(&prompt_tokens);
  md_tokens_free(&continuation);
  if (status != MD_OK) md_episode_tokens_free(out);
  return status;
}

void md_episode_tokens_free(md_episode_tokens *t) {
  if (!t) return;
  md_chat_prompt_free(&t->prompt);
  free(t->ids);
  free(t->regions);
  free(t->spans);
  free(t->starts);
  memset(t, 0, sizeof *t);
}
