/* OpenAI chat-completions request bodies, one JSON object per line, read
 * as episodes of a trace (io/formats/trace.h), so that they are rendered
 * and tokenised exactly as the collector renders a trace
 * (collector/tokenizer/episode_tokens.h).
 *
 * Of a request only "messages", "tools" and "id" are read; the other keys
 * (model, temperature, ...) are ignored. The episode's id is the request's
 * "id" (a string of the trace format's form) or, absent, "request-LINE".
 * A message becomes a trace message:
 *
 *   role       system and developer -> system; user, assistant, tool as
 *              they are; any other role is an error
 *   content    a string, null (assistant messages with tool calls), or a
 *              list of parts {"type": "text", "text"}, whose texts are
 *              joined with "\n" (as vLLM joins them for templates that take
 *              a string); another part type is an error
 *   tool_calls as they are ({"id", "type": "function", "function": {"name",
 *              "arguments"}}; arguments as a string holding an object)
 *   region     the message's "region" when it has one; else by role:
 *              system -> system, user -> user, assistant -> scratchpad (its
 *              tool calls tool_in), tool -> tool_out, or retrieval when the
 *              message answers a call (its "tool_call_id", else its "name")
 *              to a tool named in options->retrieval_tools
 *
 * "tools" is written into the system turn as given (the trace format's
 * "tools"). The trace reader then checks the episode with all its rules;
 * every error names the file and line (and the field). */
#ifndef MD_EXPORT_OPENAI_REQUEST_H
#define MD_EXPORT_OPENAI_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "io/formats/trace.h"

typedef struct md_openai_options {
  const char *const *retrieval_tools; /* tools whose results are region retrieval */
  size_t n_retrieval_tools;
} md_openai_options;

/* Reads one line, text[0..length) without its line break, of `path` at
 * `line` (1-based) into `episode` (free it with md_trace_episode_free).
 * Fails with MD_E_FORMAT or MD_E_INVALID naming path, line and field, or
 * MD_E_NOMEM; `episode` is then empty. `options` may be NULL. */
md_status md_openai_request_parse(const char *path, size_t line, const char *text, size_t length,
                                  const md_openai_options *options, md_trace_episode *episode,
                                  md_error *err);

/* True when a request body: a JSON object with a "model" member (which the
 * OpenAI API requires and the trace format does not allow). */
bool md_openai_request_detect(const char *text, size_t length);

#endif
