/* An episode as the model sees it: the rendered prompt tokenised with the
 * checkpoint's own tokenizer.json, every token labelled with its region, and
 * the decode window that follows (memdecay-traces(5) and memdecay-run(5),
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
#ifndef MD_COLLECTOR_TOKENIZER_EPISODE_TOKENS_H
#define MD_COLLECTOR_TOKENIZER_EPISODE_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "collector/tokenizer/chat_template.h"
#include "collector/tokenizer/tokenizer.h"
#include "base/error.h"
#include "io/formats/trace.h"

/* Decode steps of an episode without a continuation (greedy). */
enum { MD_EPISODE_DEFAULT_STEPS = 256 };

/* With max_positions set, texts are counted up to this many times max_positions tokens:
 * an episode a little too long is refused with its exact count (by how much it is over),
 * a huge one after a bounded amount of work. */
enum { MD_EPISODE_COUNT_FACTOR = 4 };

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
  size_t max_positions; /* the model's max_position_embeddings, 0 = no limit: an episode
                           certain not to fit is refused without being tokenised in full
                           (see md_episode_tokenize); the exact check of prompt + window
                           stays the caller's (md_trace_check_positions) */
  const md_chat_format *chat; /* the model family's format; NULL = md_chat_chatml */
} md_episode_tokens_options;

/* Renders and tokenises `episode` (which must outlive `out`). Fails, naming
 * the trace file, line and episode, when the prompt tokenises to nothing,
 * when a token id is outside the model's vocabulary, or when the text is
 * refused by the tokenizer. On failure `out` is empty.
 *
 * With options->max_positions set, time and memory are bounded by it rather
 * than by the episode's text; an episode that cannot fit fails (MD_E_INVALID,
 * naming max_position_embeddings) when
 *   - the rendered prompt is too long for its fewest possible tokens
 *     (md_tokenizer_min_tokens) to fit: it is not tokenised at all;
 *   - the prompt, or a continuation text without max_steps, has more than
 *     MD_EPISODE_COUNT_FACTOR * max_positions tokens: counting stops there.
 * Up to that count the episode tokenises as without the option, and the
 * caller's check gives the exact numbers. */
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
