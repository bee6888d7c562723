/* An episode as the model sees it: the rendered prompt tokenised with the
 * checkpoint's own tokenizer.json, every token labelled with its region, and
 * the decode window that follows (DESIGN.md sections 3.1 and 3.2,
 * memdecay-run(5)).
 *
 *   positions 0 .. P-1        the prompt (md_chat_render, then one encode
 *                             call over the whole text: special tokens such
 *                             as <|im_start|> are recognised); a token takes
 *                             the region of the span its first byte lies in
 *   positions P .. P+S-1      the decode window of S steps: the continuation
 *                             text tokenised on its own (teacher-forced), or
 *                             S tokens decoded greedily, in the
 *                             continuation's region
 *
 * S is the continuation's length (its token count, or "generate": N, or
 * MD_EPISODE_DEFAULT_STEPS without a continuation), capped at max_steps. */
#ifndef MD_COLLECTOR_EPISODE_TOKENS_H
#define MD_COLLECTOR_EPISODE_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "collector/chat_template.h"
#include "collector/tokenizer.h"
#include "io/error.h"
#include "io/trace.h"

/* Decode steps of an episode without a continuation (greedy). */
enum { MD_EPISODE_DEFAULT_STEPS = 256 };

typedef struct md_episode_tokens {
  md_chat_prompt prompt;      /* the rendered text and its spans (owns the text) */
  int32_t *ids;               /* [P + S] prompt ids, then the continuation's; for a
                                 generated window the caller fills ids[P + t] */
  const char **regions;       /* [P + S] region of each position (borrowed from the
                                 episode or static strings) */
  size_t *spans;              /* [P] the prompt span (prompt.spans) each prompt token's
                                 first byte lies in: its message is spans[i]'s source */
  size_t *starts;             /* [P] byte offset of each prompt token in prompt.text */
  size_t prompt_tokens;       /* P */
  size_t decode_steps;        /* S >= 1 */
  size_t forced_tokens;       /* teacher-forced ids known in advance: S, or 0 when
                                 the window is generated */
  md_trace_continuation_kind kind; /* TEXT = teacher-forced; GENERATE or NONE = greedy */
  const char *continuation_region;
} md_episode_tokens;

typedef struct md_episode_tokens_options {
  size_t max_steps;  /* cap on S; 0 = no cap */
  size_t vocab_size; /* ids must be below it (the model's vocab_size); 0 = no check */
} md_episode_tokens_options;

/* Renders and tokenises `episode` (which must outlive `out`). Fails, naming
 * the trace file, line and episode, when the prompt tokenises to nothing,
 * when a token id is outside the model's vocabulary, or when the text is
 * refused by the tokenizer. On failure `out` is empty. */
md_status md_episode_tokenize(const md_tokenizer *tok, const md_trace_episode *episode,
                              const md_episode_tokens_options *options, md_episode_tokens *out,
                              md_error *err);
void md_episode_tokens_free(md_episode_tokens *tokens);

/* Total positions the episode occupies in the KV cache: P + S. */
static inline size_t md_episode_positions(const md_episode_tokens *t) {
  return t->prompt_tokens + t->decode_steps;
}

/* Whether the window is teacher-forced (ids known) or decoded greedily. */
static inline int md_episode_generated(const md_episode_tokens *t) { return t->forced_tokens == 0; }

#endif
