/* OpenAI chat-completions requests (export/openai_request.h):
 * md_openai_request_parse on one line, with "search_docs" a retrieval tool.
 *
 * Invariants: a failure is MD_E_FORMAT, MD_E_INVALID or MD_E_UNSUPPORTED
 * naming the file and line, the episode left empty; on success the episode
 * is of the messages form with as many messages as the request, each of a
 * trace role, its id the request's or "request-LINE", the detection agrees
 * with a "model" member, and the chat template renders it with spans that
 * cover the text without gaps. */
#include <jansson.h>

#include "collector/tokenizer/chat_template.h"
#include "export/openai_request.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *const retrieval[] = {"search_docs"};
  const md_openai_options options = {retrieval, 1};
  const char *text = (const char *)data;
  md_trace_episode ep;
  md_error err = {0};
  md_status status = md_openai_request_parse("requests.jsonl", 7, text, size, &options, &ep, &err);
  if (status != MD_OK) {
    fuzz_check_failure(status, &err,
                       FUZZ_ST(MD_E_FORMAT) | FUZZ_ST(MD_E_INVALID) | FUZZ_ST(MD_E_UNSUPPORTED),
                       "requests.jsonl:7");
    FUZZ_CHECK(ep.root == NULL && ep.messages == NULL && ep.n_messages == 0);
    return 0;
  }
  json_t *request = json_loadb(text, size, 0, NULL);
  FUZZ_CHECK(json_is_object(request));
  FUZZ_CHECK(md_openai_request_detect(text, size) == (json_object_get(request, "model") != NULL));
  const json_t *messages = json_object_get(request, "messages");
  FUZZ_CHECK(!ep.raw && ep.n_messages == json_array_size(messages) && ep.n_messages > 0);
  const char *id = json_string_value(json_object_get(request, "id"));
  FUZZ_CHECK(id ? !strcmp(ep.id, id) : !strcmp(ep.id, "request-7"));
  for (size_t i = 0; i < ep.n_messages; i++) {
    const char *role = json_string_value(json_object_get(json_array_get(messages, i), "role"));
    FUZZ_CHECK(role != NULL);
    md_trace_role want = !strcmp(role, "developer") || !strcmp(role, "system") ? MD_ROLE_SYSTEM
                         : !strcmp(role, "user")                              ? MD_ROLE_USER
                         : !strcmp(role, "assistant")                         ? MD_ROLE_ASSISTANT
                                                                              : MD_ROLE_TOOL;
    FUZZ_CHECK(ep.messages[i].role == want);
    FUZZ_CHECK(ep.messages[i].region && fuzz_region_name(ep.messages[i].region, strlen(ep.messages[i].region)));
  }
  md_chat_prompt prompt;
  status = md_chat_render(&ep, &prompt, &err);
  if (status == MD_OK) {
    size_t at = 0;
    for (size_t s = 0; s < prompt.n_spans; s++) {
      FUZZ_CHECK(prompt.spans[s].start == at && prompt.spans[s].end > at);
      at = prompt.spans[s].end;
    }
    FUZZ_CHECK(at == prompt.length);
    md_chat_prompt_free(&prompt);
  } else {
    FUZZ_CHECK(status == MD_E_NOMEM);
  }
  json_decref(request);
  md_trace_episode_free(&ep);
  return 0;
}
