/* OpenAI chat-completions requests read as trace episodes
 * (export/openai_request.h). The request becomes a trace line, which the
 * trace reader then validates and parses: one set of rules, one renderer. */
#include "export/openai_request.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct reader {
  const char *path;
  size_t line;
  const char *id; /* for messages; NULL before it is known */
  md_error *err;
} reader;

static md_status fail(const reader *r, md_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static md_status fail(const reader *r, md_status status, const char *fmt, ...) {
  char reason[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
  if (r->id)
    md_fail(r->err, status, "%s:%zu: request \"%s\": %s", r->path, r->line, r->id, reason);
  else
    md_fail(r->err, status, "%s:%zu: %s", r->path, r->line, reason);
  return md_error_at(r->err, r->path, r->line, r->id);
}

static bool named(const md_openai_options *o, const char *name) {
  for (size_t i = 0; o && name && i < o->n_retrieval_tools; i++)
    if (!strcmp(o->retrieval_tools[i], name)) return true;
  return false;
}

/* The name of the tool a call of an earlier assistant message with this
 * "id" called, or NULL. */
static const char *called_tool(const json_t *messages, size_t before, const char *call_id) {
  for (size_t i = before; call_id && i-- > 0;) {
    const json_t *calls = json_object_get(json_array_get(messages, i), "tool_calls");
    for (size_t j = 0; j < json_array_size(calls); j++) {
      const json_t *call = json_array_get(calls, j);
      const char *id = json_string_value(json_object_get(call, "id"));
      if (!id || strcmp(id, call_id)) continue;
      const json_t *function = json_object_get(call, "function");
      return json_string_value(json_object_get(json_is_object(function) ? function : call, "name"));
    }
  }
  return NULL;
}

/* A list of parts as one string: their texts joined with "\n". */
static md_status join_parts(const reader *r, size_t index, const json_t *parts, json_t **out) {
  size_t total = 1;
  for (size_t j = 0; j < json_array_size(parts); j++) {
    const json_t *part = json_array_get(parts, j);
    const json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
    if (!json_is_object(part))
      return fail(r, MD_E_FORMAT, "messages[%zu].content[%zu]: a part must be an object, got %s",
                  index, j, json_is_null(part) ? "null" : "another value");
    if (!json_is_string(type) || strcmp(json_string_value(type), "text"))
      return fail(r, MD_E_UNSUPPORTED, "messages[%zu].content[%zu].type: only \"text\" parts "
                  "are read (a chat template renders text), got %s", index, j,
                  json_is_string(type) ? json_string_value(type) : "no string");
    if (!json_is_string(text))
      return fail(r, MD_E_FORMAT, "messages[%zu].content[%zu].text: expected a string", index, j);
    total += json_string_length(text) + 1;
  }
  char *joined = malloc(total), *at = joined;
  if (!joined) return fail(r, MD_E_NOMEM, "out of memory");
  for (size_t j = 0; j < json_array_size(parts); j++) {
    const json_t *text = json_object_get(json_array_get(parts, j), "text");
    if (j) *at++ = '\n';
    memcpy(at, json_string_value(text), json_string_length(text));
    at += json_string_length(text);
  }
  *out = json_stringn(joined, (size_t)(at - joined));
  free(joined);
  return *out ? MD_OK : fail(r, MD_E_NOMEM, "out of memory");
}

static md_status convert_message(const reader *r, const json_t *messages, size_t index,
                                 const md_openai_options *options, json_t *out) {
  const json_t *m = json_array_get(messages, index);
  if (!json_is_object(m))
    return fail(r, MD_E_FORMAT, "messages[%zu]: a message must be an object", index);
  const char *role = json_string_value(json_object_get(m, "role"));
  if (!role) return fail(r, MD_E_FORMAT, "messages[%zu].role: missing or not a string", index);
  const char *trace_role = !strcmp(role, "developer") ? "system" : role;
  if (strcmp(trace_role, "system") && strcmp(trace_role, "user") && strcmp(trace_role, "assistant") &&
      strcmp(trace_role, "tool"))
    return fail(r, MD_E_FORMAT, "messages[%zu].role: unknown role \"%.64s\" (known roles: system, "
                "developer, user, assistant, tool)", index, role);
  json_t *message = json_object();
  if (!message || json_object_set_new(message, "role", json_string(trace_role)))
    return fail(r, MD_E_NOMEM, "out of memory");
  json_array_append_new(out, message);
  const json_t *content = json_object_get(m, "content");
  if (json_is_array(content)) {
    json_t *joined;
    md_status s = join_parts(r, index, content, &joined);
    if (s != MD_OK) return s;
    json_object_set_new(message, "content", joined);
  } else if (content) {
    json_object_set(message, "content", (json_t *)content);
  }
  const json_t *region = json_object_get(m, "region");
  if (region) {
    json_object_set(message, "region", (json_t *)region);
  } else if (!strcmp(trace_role, "tool")) {
    const char *call_id = json_string_value(json_object_get(m, "tool_call_id"));
    const char *tool = called_tool(messages, index, call_id);
    if (!tool) tool = json_string_value(json_object_get(m, "name"));
    if (named(options, tool)) json_object_set_new(message, "region", json_string(MD_REGION_RETRIEVAL));
  }
  const json_t *calls = json_object_get(m, "tool_calls");
  if (calls) json_object_set(message, "tool_calls", (json_t *)calls);
  return MD_OK;
}

/* The trace line of a request, in *episode_root. */
static md_status convert(const reader *r, const json_t *request, const char *id,
                         const md_openai_options *options, json_t **episode_root) {
  const json_t *messages = json_object_get(request, "messages");
  if (!messages) return fail(r, MD_E_FORMAT, "messages: missing (a request has a list of messages)");
  if (!json_is_array(messages) || json_array_size(messages) == 0)
    return fail(r, MD_E_FORMAT, "messages: expected a non-empty list");
  json_t *root = json_object(), *list = json_array();
  if (!root || !list || json_object_set_new(root, "id", json_string(id)) ||
      json_object_set_new(root, "messages", list)) {
    json_decref(root);
    return fail(r, MD_E_NOMEM, "out of memory");
  }
  md_status s = MD_OK;
  for (size_t i = 0; s == MD_OK && i < json_array_size(messages); i++)
    s = convert_message(r, messages, i, options, list);
  const json_t *tools = json_object_get(request, "tools");
  if (s == MD_OK && tools && !json_is_null(tools)) json_object_set(root, "tools", (json_t *)tools);
  if (s != MD_OK) {
    json_decref(root);
    return s;
  }
  *episode_root = root;
  return MD_OK;
}

md_status md_openai_request_parse(const char *path, size_t line, const char *text, size_t length,
                                  const md_openai_options *options, md_trace_episode *episode,
                                  md_error *err) {
  memset(episode, 0, sizeof *episode);
  reader r = {path, line, NULL, err};
  json_error_t jerr;
  json_t *request = json_loadb(text, length, JSON_REJECT_DUPLICATES, &jerr);
  if (!request) {
    md_fail(err, MD_E_FORMAT, "%s:%zu:%d: invalid JSON: %s", path, line, jerr.column, jerr.text);
    return md_error_at(err, path, line, NULL);
  }
  md_status s = MD_OK;
  char id[MD_TRACE_ID_MAX + 32];
  const json_t *given = json_object_get(request, "id");
  if (!json_is_object(request)) {
    s = fail(&r, MD_E_FORMAT, "a request must be a JSON object");
  } else if (given && !json_is_string(given)) {
    s = fail(&r, MD_E_FORMAT, "id: expected a string");
  } else if (given) {
    snprintf(id, sizeof id, "%s", json_string_value(given));
  } else {
    snprintf(id, sizeof id, "request-%zu", line);
  }
  if (s == MD_OK) r.id = id;
  json_t *root = NULL;
  if (s == MD_OK) s = convert(&r, request, id, options, &root);
  json_decref(request);
  if (s != MD_OK) return s;
  char *trace_line = json_dumps(root, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17) | JSON_COMPACT);
  json_decref(root);
  if (!trace_line) return fail(&r, MD_E_NOMEM, "out of memory");
  s = md_trace_parse_line(path, line, trace_line, strlen(trace_line), episode, err);
  free(trace_line);
  return s;
}

bool md_openai_request_detect(const char *text, size_t length) {
  json_t *object = json_loadb(text, length, 0, NULL);
  bool openai = json_is_object(object) && json_object_get(object, "model") != NULL;
  json_decref(object);
  return openai;
}
