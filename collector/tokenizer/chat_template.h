/* Rendering an episode into the text the model reads, with the region of
 * every byte: Qwen2.5's ChatML chat template (memdecay-traces(5),
 * memdecay-traces(5)). The text is byte-identical to what HF transformers'
 * apply_chat_template(..., add_generation_prompt=True) produces with the
 * chat_template of Qwen2.5-Instruct's tokenizer_config.json; tests/trace
 * checks it against renderings made that way.
 *
 *   <|im_start|>{role}\n{content}<|im_end|>\n           (system, user, assistant)
 *   <|im_start|>assistant[\n{content}]                     (assistant with tool calls)
 *     \n<tool_call>\n{"name": "{name}", "arguments": {tojson(arguments)}}\n</tool_call>
 *     ...<|im_end|>\n
 *   <|im_start|>user\n<tool_response>\n{content}\n</tool_response>...<|im_end|>\n
 *                                                          (a run of tool messages)
 *   <|im_start|>assistant\n                                (opens the decode window)
 *
 * Without a leading system message the template inserts Qwen's default one;
 * with "tools" it writes the tool signatures into the system turn.
 *
 * Template text takes the region of what it wraps: a turn's opening takes
 * the region of its first non-empty piece, its closing that of its last; the
 * markup around a tool call takes the call's region; the generation prompt
 * takes the continuation's region; the default system prompt and the tools
 * block are in region "system". The raw "spans" form is the spans' texts in
 * order, nothing added. */
#ifndef MD_COLLECTOR_TOKENIZER_CHAT_TEMPLATE_H
#define MD_COLLECTOR_TOKENIZER_CHAT_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "io/formats/trace.h"

/* Qwen2.5-Instruct's system prompt when the trace has none. */
#define MD_CHAT_DEFAULT_SYSTEM "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

#define MD_CHAT_NO_SOURCE SIZE_MAX

typedef struct md_chat_span {
  size_t start, end;  /* bytes [start, end) of the prompt text */
  const char *region; /* borrowed from the episode, or a static string */
  bool is_template;   /* written by the template, not taken from the trace */
  size_t source;      /* the message (messages form) or span (raw form) it comes
                         from; MD_CHAT_NO_SOURCE for the default system prompt, the
                         tools block and the generation prompt */
} md_chat_span;

typedef struct md_chat_prompt {
  char *text;          /* the prompt, NUL-terminated */
  size_t length;       /* bytes */
  md_chat_span *spans; /* in order; they cover [0, length) without gaps, none empty */
  size_t n_spans;
  /* The episode's continuation, decoded after the prompt and tokenised on its
   * own; its region is always set (scratchpad when the trace has none). */
  md_trace_continuation continuation;
} md_chat_prompt;

/* Renders `episode` in ChatML, which must outlive `prompt` (regions are
 * borrowed). */
md_status md_chat_render(const md_trace_episode *episode, md_chat_prompt *prompt, md_error *err);

/* A chat format: how an instruct model of a family is prompted. A model
 * family (collector/model/family.h) names its format; a new format is one
 * such constant beside md_chat_chatml, with its renderer. */
typedef struct md_chat_format {
  const char *name;  /* "chatml" */
  /* Renders an episode, as md_chat_render does for ChatML. */
  md_status (*render)(const md_trace_episode *episode, md_chat_prompt *prompt, md_error *err);
  /* A question asked after a rendered prompt, whose last turn (the
   * generation prompt) is open: question_head + question + question_tail,
   * the tail opening the turn the answer is generated in. */
  const char *question_head;
  const char *question_tail;
  /* The added tokens the format's markup needs (NULL-terminated), and those
   * that end a generated answer (NULL-terminated; each optional in a
   * tokenizer but the first). */
  const char *const *markup_tokens;
  const char *const *stop_tokens;
} md_chat_format;

/* Qwen2.5-Instruct's ChatML, above. */
extern const md_chat_format md_chat_chatml;
void md_chat_prompt_free(md_chat_prompt *prompt);

/* Aligns tokens to spans: token i takes the span its first byte lies in.
 * token_start[i] is the byte offset of token i in the prompt text; offsets
 * must not decrease (two tokens may start in the same byte when a tokenizer
 * splits one UTF-8 character) and must lie inside the text. Writes the span
 * index of each token to token_span[n_tokens]. */
md_status md_chat_token_spans(const md_chat_span *spans, size_t n_spans, const size_t *token_start,
                              size_t n_tokens, size_t *token_span, md_error *err);

/* The KV-cache page of a position: pages are page_size consecutive positions. */
static inline size_t md_chat_page(size_t position, size_t page_size) { return position / page_size; }

/* `value` serialised as transformers' tojson filter does (Python's
 * json.dumps(value, ensure_ascii=False)): ", " and ": " separators, keys in
 * their order, non-ASCII as is, \uXXXX in lower case for other control
 * characters, and reals as Python's repr (shortest round-trip digits,
 * "1e+16", "1e-05", "100.0"). Returns a malloc'd NUL-terminated string
 * (length in *length when not NULL), or NULL when out of memory. */
char *md_chat_tojson(const json_t *value, size_t *length);

#endif
