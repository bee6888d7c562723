/* Agent traces: the JSON Lines reader. The format and every rule checked
 * here are documented in man/memdecay-traces.5. */
#include "io/formats/trace.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "base/numfmt.h"

struct md_trace_reader {
  FILE *fp;
  char *path;
  md_trace_options options;
  char *line;      /* getline's buffer */
  size_t line_cap;
  size_t line_no;  /* lines read so far */
  json_t *seen_ids; /* id -> line of its first valid episode */
};

/* Where a parse is: enough to prefix every message. */
typedef struct parse_ctx {
  const char *path;
  size_t line;
  const char *id; /* NULL until the id is known */
  md_error *err;
} parse_ctx;

static const char *const role_names[] = {"system", "user", "assistant", "tool"};
static const char *const role_regions[] = {MD_REGION_SYSTEM, MD_REGION_USER, MD_REGION_SCRATCHPAD,
                                           MD_REGION_TOOL_OUT};
enum { n_roles = sizeof role_names / sizeof role_names[0] };

static const char *const episode_keys[] = {"id", "messages", "spans", "continuation", "probes",
                                           "tools", "meta", NULL};
static const char *const segment_keys[] = {"region", "text", NULL};
static const char *const continuation_keys[] = {"region", "text", "generate", NULL};

/* ChatML delimiters: inside message text they would end or open a turn that
 * the template did not write, and the regions would no longer match it. */
static const char *const chatml_delimiters[] = {"<|im_start|>", "<|im_end|>", NULL};

const char *md_trace_role_name(md_trace_role role) {
  return (unsigned)role < n_roles ? role_names[role] : "?";
}

bool md_trace_region_valid(const char *name) {
  size_t n = strlen(name);
  return n <= MD_TRACE_REGION_MAX && md_region_name_valid(name, n);
}

static bool is_alnum(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

/* Ids become file names (attn/<id>.npy) and CSV fields: keep them plain. */
static bool id_valid(const char *id) {
  size_t n = strlen(id);
  if (n == 0 || n > MD_TRACE_ID_MAX || !is_alnum(id[0])) return false;
  for (size_t i = 1; i < n; i++) {
    if (!is_alnum(id[i]) && id[i] != '.' && id[i] != '_' && id[i] != '-') return false;
  }
  return true;
}

/* The template writes the name between quotes without escaping it. */
static bool tool_name_valid(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > 64) return false;
  for (size_t i = 0; i < n; i++) {
    if (!is_alnum(name[i]) && name[i] != '.' && name[i] != '_' && name[i] != '-') return false;
  }
  return true;
}

/* A value quoted for a message: control characters escaped, cut after 40
 * bytes (at a UTF-8 character boundary) with "...". */
static const char *quoted(char *buf, size_t size, const char *text) {
  size_t out = 0, limit = size - 8;
  buf[out++] = '"';
  for (size_t i = 0; text[i] && out < limit; i++) {
    unsigned char ch = (unsigned char)text[i];
    if (i >= 40 && (ch & 0xC0) != 0x80) {
      out += (size_t)snprintf(buf + out, size - out, "...");
      break;
    }
    if (ch < 0x20 || ch == '"' || ch == '\\') {
      out += (size_t)snprintf(buf + out, size - out, ch < 0x20 ? "\\x%02x" : "\\%c", ch);
    } else {
      buf[out++] = (char)ch;
    }
  }
  snprintf(buf + out, size - out, "\"");
  return buf;
}

static const char *json_type_name(const json_t *value) {
  switch (json_typeof(value)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
  }
  return "?";
}

/* "path:line: episode "id": where: message" */
static md_status vbad(const parse_ctx *c, md_status status, const char *where, const char *fmt,
                      va_list ap) {
  char what[MD_ERROR_MESSAGE_MAX], id_part[MD_TRACE_ID_MAX + 16] = "", where_part[160] = "";
  vsnprintf(what, sizeof what, fmt, ap);
  if (c->id) snprintf(id_part, sizeof id_part, "episode \"%s\": ", c->id);
  if (where) snprintf(where_part, sizeof where_part, "%s: ", where);
  md_fail(c->err, status, "%s:%zu: %s%s%s", c->path, c->line, id_part, where_part, what);
  if (c->err) md_error_at(c->err, c->path, c->line, c->id);
  return status;
}

__attribute__((format(printf, 3, 4))) static md_status bad(const parse_ctx *c, const char *where,
                                                           const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  md_status status = vbad(c, MD_E_FORMAT, where, fmt, ap);
  va_end(ap);
  return status;
}

__attribute__((format(printf, 3, 4))) static md_status out_of_range(const parse_ctx *c,
                                                                    const char *where,
                                                                    const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  md_status status = vbad(c, MD_E_INVALID, where, fmt, ap);
  va_end(ap);
  return status;
}

static md_status no_memory(const parse_ctx *c) {
  return md_fail(c->err, MD_E_NOMEM, "%s:%zu: out of memory", c->path, c->line);
}

static md_status check_keys(const parse_ctx *c, const char *where, const json_t *object,
                            const char *const *known) {
  const char *key;
  const json_t *value;
  json_object_foreach((json_t *)object, key, value) {
    bool found = false;
    for (size_t i = 0; known[i] && !found; i++) found = !strcmp(key, known[i]);
    if (found) continue;
    char list[256] = "", name[96];
    for (size_t i = 0; known[i]; i++) {
      size_t used = strlen(list);
      snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", known[i]);
    }
    return bad(c, where, "unknown key %s (known keys: %s)", quoted(name, sizeof name, key), list);
  }
  return MD_OK;
}

/* The string member `key`, or NULL when absent; a present non-string fails. */
static md_status get_string(const parse_ctx *c, const char *where, const json_t *object,
                            const char *key, const char **out) {
  const json_t *value = json_object_get(object, key);
  *out = NULL;
  if (!value) return MD_OK;
  if (!json_is_string(value)) {
    return bad(c, where, "\"%s\" must be a string, got %s", key, json_type_name(value));
  }
  *out = json_string_value(value);
  return MD_OK;
}

static md_status get_required_string(const parse_ctx *c, const char *where, const json_t *object,
                                     const char *key, const char **out) {
  md_status status = get_string(c, where, object, key, out);
  if (status == MD_OK && !*out) return bad(c, where, "missing \"%s\"", key);
  return status;
}

/* An optional region member: absent gives `fallback`. */
static md_status get_region(const parse_ctx *c, const char *where, const json_t *object,
                            const char *fallback, const char **out) {
  md_status status = get_string(c, where, object, "region", out);
  if (status != MD_OK) return status;
  if (!*out) {
    *out = fallback;
    return MD_OK;
  }
  if (!md_trace_region_valid(*out)) {
    char name[96];
    return bad(c, where, "invalid region name %s (a region is [a-z][a-z0-9_]*, at most %d bytes)",
               quoted(name, sizeof name, *out), MD_TRACE_REGION_MAX);
  }
  return MD_OK;
}

static md_status check_delimiters(const parse_ctx *c, const char *where, const char *text) {
  for (size_t i = 0; chatml_delimiters[i]; i++) {
    if (strstr(text, chatml_delimiters[i])) {
      return bad(c, where,
                 "text contains \"%s\", which would split the chat template's turns (render the "
                 "template yourself with the raw \"spans\" form to control it)",
                 chatml_delimiters[i]);
    }
  }
  return MD_OK;
}

/* Every string (and key) inside a JSON value, for tool arguments and tools. */
static md_status check_delimiters_json(const parse_ctx *c, const char *where, const json_t *value) {
  if (json_is_string(value)) return check_delimiters(c, where, json_string_value(value));
  md_status status = MD_OK;
  if (json_is_array(value)) {
    size_t i;
    const json_t *item;
    json_array_foreach((json_t *)value, i, item) {
      if ((status = check_delimiters_json(c, where, item)) != MD_OK) return status;
    }
  } else if (json_is_object(value)) {
    const char *key;
    const json_t *item;
    json_object_foreach((json_t *)value, key, item) {
      if ((status = check_delimiters(c, where, key)) != MD_OK) return status;
      if ((status = check_delimiters_json(c, where, item)) != MD_OK) return status;
    }
  }
  return status;
}

/* One {"region", "text"} segment; `fallback` is the region when absent
 * (the raw form passes NULL: its spans must name their region). */
static md_status parse_segment(const parse_ctx *c, const char *where, const json_t *object,
                               const char *fallback, md_trace_segment *segment) {
  if (!json_is_object(object)) {
    return bad(c, where, "a segment must be an object {\"region\", \"text\"}, got %s",
               json_type_name(object));
  }
  md_status status = check_keys(c, where, object, segment_keys);
  if (status == MD_OK && !fallback && !json_object_get(object, "region")) {
    status = bad(c, where, "missing \"region\"");
  }
  if (status == MD_OK) status = get_region(c, where, object, fallback, &segment->region);
  if (status == MD_OK) status = get_required_string(c, where, object, "text", &segment->text);
  if (status != MD_OK) return status;
  segment->length = strlen(segment->text);
  return MD_OK;
}

static md_status parse_segment_list(const parse_ctx *c, const char *where, const json_t *array,
                                    const char *fallback, md_trace_segment **out, size_t *n_out) {
  size_t n = json_array_size(array);
  *n_out = 0;
  *out = n ? calloc(n, sizeof **out) : NULL;
  if (n && !*out) return no_memory(c);
  for (size_t i = 0; i < n; i++) {
    char item_where[160];
    snprintf(item_where, sizeof item_where, "%s[%zu]", where, i);
    md_status status = parse_segment(c, item_where, json_array_get(array, i), fallback, &(*out)[i]);
    if (status != MD_OK) return status;
    *n_out = i + 1;
  }
  return MD_OK;
}

static md_status parse_role(const parse_ctx *c, const char *where, const json_t *message,
                            md_trace_role *role) {
  const char *name;
  md_status status = get_required_string(c, where, message, "role", &name);
  if (status != MD_OK) return status;
  for (int i = 0; i < n_roles; i++) {
    if (!strcmp(name, role_names[i])) {
      *role = (md_trace_role)i;
      return MD_OK;
    }
  }
  char shown[96];
  return bad(c, where, "unknown role %s (known roles: system, user, assistant, tool)",
             quoted(shown, sizeof shown, name));
}

/* content: a string (one segment in the message's region) or a list of
 * segments; null or absent only for an assistant message with tool calls. */
static md_status parse_content(const parse_ctx *c, const char *where, const json_t *message,
                               const char *region, bool has_tool_calls, md_trace_message *out) {
  const json_t *content = json_object_get(message, "content");
  char content_where[160];
  snprintf(content_where, sizeof content_where, "%s.content", where);
  if (!content || json_is_null(content)) {
    if (has_tool_calls) return MD_OK;
    return bad(c, where, "missing \"content\" (only an assistant message with tool calls may omit it)");
  }
  if (json_is_string(content)) {
    out->segments = calloc(1, sizeof *out->segments);
    if (!out->segments) return no_memory(c);
    out->n_segments = 1;
    out->segments[0] = (md_trace_segment){region, json_string_value(content),
                                          json_string_length(content)};
  } else if (json_is_array(content)) {
    md_status status = parse_segment_list(c, content_where, content, region, &out->segments,
                                          &out->n_segments);
    if (status != MD_OK) return status;
  } else {
    return bad(c, content_where, "must be a string or a list of {\"region\", \"text\"} segments, got %s",
               json_type_name(content));
  }
  for (size_t i = 0; i < out->n_segments; i++) {
    md_status status = check_delimiters(c, content_where, out->segments[i].text);
    if (status != MD_OK) return status;
  }
  return MD_OK;
}

/* Tool arguments as an object. OpenAI-style logs carry them as a JSON
 * string; serving stacks parse that string before applying Qwen2.5's
 * template (which runs tojson on it), so it is parsed here too and the
 * object replaces the string in the episode's JSON, which then owns it. */
static md_status parse_arguments(const parse_ctx *c, const char *where, json_t *call,
                                 const json_t **out, bool *was_string) {
  json_t *arguments = json_object_get(call, "arguments");
  if (!arguments) return bad(c, where, "missing \"arguments\" (use {} for a call without arguments)");
  if (json_is_string(arguments)) {
    json_error_t jerr;
    json_t *parsed = json_loadb(json_string_value(arguments), json_string_length(arguments),
                                JSON_REJECT_DUPLICATES, &jerr);
    if (!parsed || !json_is_object(parsed)) {
      json_decref(parsed);
      return bad(c, where, "\"arguments\" is a string but not a JSON object%s%s",
                 parsed ? "" : ": ", parsed ? "" : jerr.text);
    }
    if (json_object_set_new(call, "arguments", parsed)) return no_memory(c);
    arguments = parsed;
    *was_string = true;
  } else if (!json_is_object(arguments)) {
    return bad(c, where, "\"arguments\" must be an object or a string holding one, got %s",
               json_type_name(arguments));
  }
  *out = arguments;
  return check_delimiters_json(c, where, arguments);
}

/* {"name", "arguments", "region"?} or the OpenAI form
 * {"type": "function", "function": {"name", "arguments"}, "region"?}. */
static md_status parse_tool_call(const parse_ctx *c, const char *where, json_t *call,
                                 md_trace_tool_call *out) {
  if (!json_is_object(call)) {
    return bad(c, where, "a tool call must be an object, got %s", json_type_name(call));
  }
  md_status status = get_region(c, where, call, MD_REGION_TOOL_IN, &out->region);
  if (status != MD_OK) return status;
  json_t *function = json_object_get(call, "function");
  if (function && !json_is_object(function)) {
    return bad(c, where, "\"function\" must be an object, got %s", json_type_name(function));
  }
  json_t *body = function ? function : call;
  if ((status = get_required_string(c, where, body, "name", &out->name)) != MD_OK) return status;
  if (!tool_name_valid(out->name)) {
    char shown[96];
    return bad(c, where, "invalid tool name %s (letters, digits, '_', '.', '-'; 1 to 64 bytes)",
               quoted(shown, sizeof shown, out->name));
  }
  return parse_arguments(c, where, body, &out->arguments, &out->arguments_string);
}

static md_status parse_tool_calls(const parse_ctx *c, const char *where, const json_t *message,
                                  md_trace_role role, md_trace_message *out) {
  json_t *calls = json_object_get(message, "tool_calls");
  char calls_where[160];
  snprintf(calls_where, sizeof calls_where, "%s.tool_calls", where);
  if (!calls || json_is_null(calls)) return MD_OK;
  if (role != MD_ROLE_ASSISTANT) return bad(c, calls_where, "only assistant messages make tool calls");
  if (!json_is_array(calls)) return bad(c, calls_where, "must be a list, got %s", json_type_name(calls));
  size_t n = json_array_size(calls);
  if (n == 0) return MD_OK;
  out->tool_calls = calloc(n, sizeof *out->tool_calls);
  if (!out->tool_calls) return no_memory(c);
  for (size_t i = 0; i < n; i++) {
    char call_where[192];
    snprintf(call_where, sizeof call_where, "%s[%zu]", calls_where, i);
    md_status status = parse_tool_call(c, call_where, json_array_get(calls, i), &out->tool_calls[i]);
    if (status != MD_OK) return status;
    out->n_tool_calls = i + 1;
  }
  return MD_OK;
}

static md_status parse_message(const parse_ctx *c, size_t index, const json_t *message,
                               md_trace_message *out) {
  char where[64];
  snprintf(where, sizeof where, "messages[%zu]", index);
  if (!json_is_object(message)) {
    return bad(c, where, "a message must be an object, got %s", json_type_name(message));
  }
  md_status status = parse_role(c, where, message, &out->role);
  const char *region = NULL;
  if (status == MD_OK) status = get_region(c, where, message, role_regions[out->role], &region);
  out->region = region;
  if (status == MD_OK) status = parse_tool_calls(c, where, message, out->role, out);
  if (status == MD_OK) status = parse_content(c, where, message, region, out->n_tool_calls > 0, out);
  return status;
}

static md_status parse_messages(const parse_ctx *c, const json_t *messages, md_trace_episode *ep) {
  if (!json_is_array(messages)) {
    return bad(c, "messages", "must be a list of messages, got %s", json_type_name(messages));
  }
  size_t n = json_array_size(messages);
  if (n == 0) return bad(c, "messages", "empty episode: the list of messages is empty");
  ep->messages = calloc(n, sizeof *ep->messages);
  if (!ep->messages) return no_memory(c);
  for (size_t i = 0; i < n; i++) {
    md_status status = parse_message(c, i, json_array_get(messages, i), &ep->messages[i]);
    ep->n_messages = i + 1;
    if (status != MD_OK) return status;
  }
  return MD_OK;
}

static md_status parse_spans(const parse_ctx *c, const json_t *spans, md_trace_episode *ep) {
  if (!json_is_array(spans)) {
    return bad(c, "spans", "must be a list of {\"region\", \"text\"} spans, got %s",
               json_type_name(spans));
  }
  if (json_array_size(spans) == 0) return bad(c, "spans", "empty episode: the list of spans is empty");
  ep->raw = true;
  return parse_segment_list(c, "spans", spans, NULL, &ep->spans, &ep->n_spans);
}

static md_status parse_generate(const parse_ctx *c, const json_t *generate, long *out) {
  if (!json_is_integer(generate)) {
    return bad(c, "continuation.generate", "must be a whole number of tokens, got %s",
               json_type_name(generate));
  }
  json_int_t count = json_integer_value(generate);
  if (count < 1) {
    return out_of_range(c, "continuation.generate", "must be at least 1 token, got %" JSON_INTEGER_FORMAT,
                        count);
  }
  if (count > MD_TRACE_GENERATE_MAX) {
    return out_of_range(c, "continuation.generate",
                        "%" JSON_INTEGER_FORMAT " tokens is more than the limit of %d",
                        count, MD_TRACE_GENERATE_MAX);
  }
  *out = (long)count;
  return MD_OK;
}

static md_status parse_continuation(const parse_ctx *c, const json_t *object, md_trace_episode *ep) {
  md_trace_continuation *cont = &ep->continuation;
  cont->kind = MD_CONTINUATION_NONE;
  cont->region = MD_REGION_SCRATCHPAD;
  if (!object) return MD_OK;
  if (!json_is_object(object)) {
    return bad(c, "continuation", "must be an object, got %s", json_type_name(object));
  }
  md_status status = check_keys(c, "continuation", object, continuation_keys);
  if (status == MD_OK) status = get_region(c, "continuation", object, MD_REGION_SCRATCHPAD, &cont->region);
  if (status != MD_OK) return status;
  const json_t *text = json_object_get(object, "text"), *generate = json_object_get(object, "generate");
  if (text && generate) {
    return bad(c, "continuation", "has both \"text\" and \"generate\" (teacher-forced text or greedy "
                                  "decoding, not both)");
  }
  if (!text && !generate) {
    return bad(c, "continuation", "needs \"text\" (teacher-forced) or \"generate\" (tokens to decode)");
  }
  if (generate) {
    cont->kind = MD_CONTINUATION_GENERATE;
    return parse_generate(c, generate, &cont->generate);
  }
  cont->kind = MD_CONTINUATION_TEXT;
  if ((status = get_string(c, "continuation", object, "text", &cont->text)) != MD_OK) return status;
  cont->length = strlen(cont->text);
  if (cont->length == 0) {
    return bad(c, "continuation.text", "is empty (omit the continuation, or use \"generate\")");
  }
  return ep->raw ? MD_OK : check_delimiters(c, "continuation.text", cont->text);
}

static md_status parse_probe(const parse_ctx *c, const char *where, const json_t *object,
                             md_trace_probe *probe) {
  if (!json_is_object(object)) {
    return bad(c, where, "a probe must be an object {\"region\", \"question\", \"answer\"}, got %s",
               json_type_name(object));
  }
  probe->object = object;
  if (!json_object_get(object, "region")) return bad(c, where, "missing \"region\"");
  md_status status = get_region(c, where, object, NULL, &probe->region);
  if (status == MD_OK) status = get_required_string(c, where, object, "question", &probe->question);
  if (status == MD_OK) status = get_required_string(c, where, object, "answer", &probe->answer);
  /* eval asks every probe as a ChatML turn, raw episodes' too. */
  char field[64];
  snprintf(field, sizeof field, "%s.question", where);
  if (status == MD_OK) status = check_delimiters(c, field, probe->question);
  snprintf(field, sizeof field, "%s.answer", where);
  if (status == MD_OK) status = check_delimiters(c, field, probe->answer);
  return status;
}

static md_status parse_probes(const parse_ctx *c, const json_t *probes, md_trace_episode *ep) {
  if (!probes) return MD_OK;
  if (!json_is_array(probes)) return bad(c, "probes", "must be a list, got %s", json_type_name(probes));
  size_t n = json_array_size(probes);
  if (n == 0) return MD_OK;
  ep->probes = calloc(n, sizeof *ep->probes);
  if (!ep->probes) return no_memory(c);
  for (size_t i = 0; i < n; i++) {
    char where[48];
    snprintf(where, sizeof where, "probes[%zu]", i);
    md_status status = parse_probe(c, where, json_array_get(probes, i), &ep->probes[i]);
    if (status != MD_OK) return status;
    /* A probe asked twice would count twice in its region's recall. */
    for (size_t j = 0; j < i; j++)
      if (!strcmp(ep->probes[j].region, ep->probes[i].region) &&
          !strcmp(ep->probes[j].question, ep->probes[i].question))
        return bad(c, where, "the same region and question as probes[%zu]: a probe asked twice "
                   "would count twice", j);
    ep->n_probes = i + 1;
  }
  return MD_OK;
}

static md_status parse_tools(const parse_ctx *c, const json_t *tools, md_trace_episode *ep) {
  if (!tools) return MD_OK;
  if (ep->raw) return bad(c, "tools", "belongs to the messages form (the raw form has no template)");
  if (!json_is_array(tools)) return bad(c, "tools", "must be a list of function signatures, got %s",
                                        json_type_name(tools));
  size_t i;
  const json_t *tool;
  json_array_foreach((json_t *)tools, i, tool) {
    char where[48];
    snprintf(where, sizeof where, "tools[%zu]", i);
    if (!json_is_object(tool)) return bad(c, where, "must be an object, got %s", json_type_name(tool));
    md_status status = check_delimiters_json(c, where, tool);
    if (status != MD_OK) return status;
  }
  ep->tools = tools;
  return MD_OK;
}

static bool segments_have_text(const md_trace_segment *segments, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (segments[i].length) return true;
  }
  return false;
}

static md_status check_not_empty(const parse_ctx *c, const md_trace_episode *ep) {
  if (ep->raw) {
    if (segments_have_text(ep->spans, ep->n_spans)) return MD_OK;
    return bad(c, "spans", "empty episode: every span's text is empty");
  }
  for (size_t i = 0; i < ep->n_messages; i++) {
    const md_trace_message *m = &ep->messages[i];
    if (m->n_tool_calls || segments_have_text(m->segments, m->n_segments)) return MD_OK;
  }
  return bad(c, "messages", "empty episode: no message has any text or tool call");
}

static md_status parse_id(parse_ctx *c, const json_t *root) {
  const char *id;
  md_status status = get_required_string(c, NULL, root, "id", &id);
  if (status != MD_OK) return status;
  if (!id_valid(id)) {
    char shown[96];
    return bad(c, NULL,
               "invalid episode id %s (ids name output files: letters, digits, '.', '_', '-', "
               "starting with a letter or digit, at most %d bytes)",
               quoted(shown, sizeof shown, id), MD_TRACE_ID_MAX);
  }
  c->id = id;
  return MD_OK;
}

static md_status parse_body(parse_ctx *c, md_trace_episode *ep) {
  const json_t *root = ep->root;
  if (!json_is_object(root)) {
    return bad(c, NULL, "an episode must be a JSON object, got %s", json_type_name(root));
  }
  md_status status = parse_id(c, root);
  if (status == MD_OK) status = check_keys(c, NULL, root, episode_keys);
  if (status != MD_OK) return status;
  ep->id = c->id;
  const json_t *messages = json_object_get(root, "messages"), *spans = json_object_get(root, "spans");
  if (messages && spans) {
    return bad(c, NULL, "has both \"messages\" and \"spans\" (an episode is either the messages form "
                        "or the raw spans form)");
  }
  if (!messages && !spans) return bad(c, NULL, "missing \"messages\" (or \"spans\" for the raw form)");
  status = messages ? parse_messages(c, messages, ep) : parse_spans(c, spans, ep);
  if (status == MD_OK) status = check_not_empty(c, ep);
  if (status == MD_OK) status = parse_continuation(c, json_object_get(root, "continuation"), ep);
  if (status == MD_OK) status = parse_tools(c, json_object_get(root, "tools"), ep);
  if (status == MD_OK) status = parse_probes(c, json_object_get(root, "probes"), ep);
  return status;
}

static md_status parse_episode(parse_ctx *c, const char *text, size_t length, md_trace_episode *ep) {
  json_error_t jerr;
  ep->root = json_loadb(text, length, JSON_REJECT_DUPLICATES, &jerr);
  if (!ep->root) {
    if (json_error_code(&jerr) == json_error_out_of_memory) return no_memory(c);
    /* jansson sees one line as a whole document: its "end of file" is the end of the line */
    char *eof = strstr(jerr.text, " near end of file");
    if (eof) snprintf(eof, sizeof jerr.text - (size_t)(eof - jerr.text), " at the end of the line");
    return md_fail(c->err, MD_E_FORMAT, "%s:%zu:%d: invalid JSON: %s", c->path, c->line, jerr.column,
                   jerr.text);
  }
  ep->line = c->line;
  ep->path = strdup(c->path);
  if (!ep->path) return no_memory(c);
  return parse_body(c, ep);
}

void md_trace_episode_free(md_trace_episode *episode) {
  if (!episode) return;
  for (size_t i = 0; i < episode->n_messages; i++) {
    free(episode->messages[i].segments);
    free(episode->messages[i].tool_calls);
  }
  free(episode->messages);
  free(episode->spans);
  free(episode->probes);
  free(episode->path);
  json_decref(episode->root);
  memset(episode, 0, sizeof *episode);
}

md_status md_trace_parse_line(const char *path, size_t line, const char *text, size_t length,
                              md_trace_episode *episode, md_error *err) {
  memset(episode, 0, sizeof *episode);
  parse_ctx c = {path, line, NULL, err};
  md_status status = parse_episode(&c, text, length, episode);
  if (status != MD_OK) md_trace_episode_free(episode);
  return status;
}

/* ---- the writer ---------------------------------------------------------- */

/* The tool call object messages[i].tool_calls[j] of `root`, or its
 * "function" member in the OpenAI form: where its "arguments" are. */
static json_t *call_body(json_t *root, size_t message, size_t call) {
  json_t *calls = json_object_get(json_array_get(json_object_get(root, "messages"), message),
                                  "tool_calls");
  json_t *object = json_array_get(calls, call);
  json_t *function = json_object_get(object, "function");
  return json_is_object(function) ? function : object;
}

/* Arguments the trace wrote as a string go back into `root` as a string
 * (the reader replaced each with the object it holds). */
static md_status restore_argument_strings(const md_trace_episode *ep, json_t *root) {
  for (size_t i = 0; i < ep->n_messages; i++) {
    for (size_t j = 0; j < ep->messages[i].n_tool_calls; j++) {
      if (!ep->messages[i].tool_calls[j].arguments_string) continue;
      json_t *body = call_body(root, i, j);
      json_t *arguments = json_object_get(body, "arguments");
      if (!json_is_object(arguments)) continue;
      char *text = md_json_dumps_line(arguments, true);
      if (!text) return MD_E_NOMEM;
      json_t *string = json_string(text);
      free(text);
      if (!string || json_object_set_new(body, "arguments", string)) return MD_E_NOMEM;
    }
  }
  return MD_OK;
}

static bool has_argument_strings(const md_trace_episode *ep) {
  for (size_t i = 0; i < ep->n_messages; i++)
    for (size_t j = 0; j < ep->messages[i].n_tool_calls; j++)
      if (ep->messages[i].tool_calls[j].arguments_string) return true;
  return false;
}

md_status md_trace_episode_dumps(const md_trace_episode *episode, char **line, md_error *err) {
  *line = NULL;
  json_t *root = episode->root;
  bool copied = has_argument_strings(episode);
  if (copied) {
    /* A copy: the episode's parsed fields point into the objects of its own root. */
    root = json_deep_copy(episode->root);
    if (!root || restore_argument_strings(episode, root) != MD_OK) {
      json_decref(root);
      return md_fail(err, MD_E_NOMEM, "out of memory");
    }
  }
  char *text = md_json_dumps_line(root, false);
  if (copied) json_decref(root);
  size_t length = text ? strlen(text) : 0;
  char *with_newline = text ? realloc(text, length + 2) : NULL;
  if (!with_newline) {
    free(text);
    return md_fail(err, MD_E_NOMEM, "out of memory");
  }
  with_newline[length] = '\n';
  with_newline[length + 1] = '\0';
  *line = with_newline;
  return MD_OK;
}

/* ---- the reader ---------------------------------------------------------- */

md_status md_trace_open(const char *path, const md_trace_options *options, md_trace_reader **reader,
                        md_error *err) {
  *reader = NULL;
  md_trace_reader *r = calloc(1, sizeof *r);
  if (!r) return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  r->path = strdup(path);
  r->seen_ids = json_object();
  if (options) r->options = *options;
  if (!r->path || !r->seen_ids) {
    md_trace_close(r);
    return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  }
  r->fp = fopen(path, "rb");
  if (!r->fp) {
    int saved = errno;
    md_trace_close(r);
    return md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "cannot open %s: %s", path, strerror(saved));
  }
  *reader = r;
  return MD_OK;
}

void md_trace_close(md_trace_reader *reader) {
  if (!reader) return;
  if (reader->fp) fclose(reader->fp);
  free(reader->line);
  free(reader->path);
  json_decref(reader->seen_ids);
  free(reader);
}

size_t md_trace_reader_line(const md_trace_reader *reader) { return reader->line_no; }

static bool is_blank(const char *text, size_t length) {
  for (size_t i = 0; i < length; i++) {
    if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r' && text[i] != '\n') return false;
  }
  return true;
}

/* Ids are unique within a file, also ignoring case: output files are named
 * after them, and on a case-insensitive file system (macOS, Windows shares)
 * "Ep1" and "ep1" would be one file. seen_ids maps the id in lower case to
 * [line, id as written]. */
static md_status check_unique_id(md_trace_reader *r, const parse_ctx *c) {
  char folded[MD_TRACE_ID_MAX + 1];
  size_t n = strlen(c->id);
  if (n > MD_TRACE_ID_MAX) n = MD_TRACE_ID_MAX;
  for (size_t i = 0; i < n; i++) folded[i] = (char)tolower((unsigned char)c->id[i]);
  folded[n] = '\0';
  const json_t *first = json_object_get(r->seen_ids, folded);
  if (first) {
    const char *written = json_string_value(json_array_get(first, 1));
    json_int_t line = json_integer_value(json_array_get(first, 0));
    if (written && strcmp(written, c->id) != 0)
      return bad(c, NULL, "episode id differs only by case from \"%s\" on line %" JSON_INTEGER_FORMAT
                 " (their output files would be one on a case-insensitive file system)", written, line);
    return bad(c, NULL, "duplicate episode id (first used on line %" JSON_INTEGER_FORMAT ")", line);
  }
  json_t *entry = json_pack("[Is]", (json_int_t)c->line, c->id);
  if (!entry || json_object_set_new(r->seen_ids, folded, entry)) return no_memory(c);
  return MD_OK;
}

/* Reads one line; *text = NULL at the end of the file. */
static md_status read_line(md_trace_reader *r, const char **text, size_t *length, md_error *err) {
  errno = 0;
  ssize_t n = getline(&r->line, &r->line_cap, r->fp);
  if (n < 0) {
    if (ferror(r->fp) || errno == ENOMEM || errno == EOVERFLOW) {
      int saved = errno;
      if (saved == ENOMEM) return md_fail(err, MD_E_NOMEM, "%s:%zu: out of memory", r->path, r->line_no + 1);
      return md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s:%zu: read error: %s", r->path, r->line_no + 1,
                     strerror(saved ? saved : EIO));
    }
    *text = NULL;
    return MD_OK;
  }
  r->line_no++;
  *text = r->line;
  *length = (size_t)n;
  /* without the line break, jansson's columns stay on this line */
  while (*length && ((*text)[*length - 1] == '\n' || (*text)[*length - 1] == '\r')) --*length;
  if (r->line_no == 1 && *length >= 3 && !memcmp(*text, "\xEF\xBB\xBF", 3)) {
    *text += 3;
    *length -= 3;
  }
  return MD_OK;
}

md_status md_trace_next(md_trace_reader *reader, md_trace_episode *episode, bool *have,
                        md_error *err) {
  memset(episode, 0, sizeof *episode);
  *have = false;
  for (;;) {
    const char *text = NULL;
    size_t length = 0;
    md_status status = read_line(reader, &text, &length, err);
    if (status != MD_OK || !text) return status;
    if (is_blank(text, length)) continue;
    md_error reason;
    md_error_clear(&reason);
    parse_ctx c = {reader->path, reader->line_no, NULL, &reason};
    status = parse_episode(&c, text, length, episode);
    if (status == MD_OK) status = check_unique_id(reader, &c);
    if (status == MD_OK) {
      *have = true;
      return MD_OK;
    }
    md_trace_episode_free(episode);
    if (status == MD_E_NOMEM || !reader->options.skip_invalid) {
      if (err) *err = reason;
      return status;
    }
    if (reader->options.on_skip) reader->options.on_skip(reader->options.on_skip_context, &reason);
  }
}

static size_t episode_text_bytes(const md_trace_episode *ep) {
  size_t bytes = ep->continuation.length;
  for (size_t i = 0; i < ep->n_spans; i++) bytes += ep->spans[i].length;
  for (size_t i = 0; i < ep->n_messages; i++) {
    for (size_t j = 0; j < ep->messages[i].n_segments; j++) bytes += ep->messages[i].segments[j].length;
  }
  return bytes;
}

typedef struct scan_state {
  md_trace_options user; /* the caller's callback, chained */
  size_t skipped;
} scan_state;

static void count_skip(void *context, const md_error *reason) {
  scan_state *state = context;
  state->skipped++;
  if (state->user.on_skip) state->user.on_skip(state->user.on_skip_context, reason);
}

md_status md_trace_scan(const char *path, const md_trace_options *options, md_trace_summary *summary,
                        md_error *err) {
  memset(summary, 0, sizeof *summary);
  scan_state state = {0};
  if (options) state.user = *options;
  md_trace_options counting = {state.user.skip_invalid, count_skip, &state};
  md_trace_reader *reader;
  md_status status = md_trace_open(path, &counting, &reader, err);
  if (status != MD_OK) return status;
  for (;;) {
    md_trace_episode episode;
    bool have;
    if ((status = md_trace_next(reader, &episode, &have, err)) != MD_OK || !have) break;
    summary->episodes++;
    summary->text_bytes += episode_text_bytes(&episode);
    md_trace_episode_free(&episode);
  }
  summary->lines = md_trace_reader_line(reader);
  summary->skipped = state.skipped;
  md_trace_close(reader);
  if (status == MD_OK && summary->episodes == 0) {
    if (state.skipped) {
      return md_fail(err, MD_E_FORMAT, "%s: no valid episodes (%zu invalid ones skipped)", path,
                     state.skipped);
    }
    return md_fail(err, MD_E_FORMAT, "%s: no episodes (the file is empty or has only blank lines)", path);
  }
  return status;
}

md_status md_trace_check_positions(const md_trace_episode *episode, size_t prompt_tokens,
                                   size_t decode_steps, size_t max_positions, md_error *err) {
  size_t positions = prompt_tokens + decode_steps;
  if (positions <= max_positions) return MD_OK;
  return md_fail(err, MD_E_INVALID,
                 "%s:%zu: episode \"%s\": %zu prompt tokens + %zu decode steps = %zu positions, more "
                 "than the model's max_position_embeddings (%zu)",
                 episode->path ? episode->path : "?", episode->line, episode->id ? episode->id : "?",
                 prompt_tokens, decode_steps, positions, max_positions);
}

md_status md_trace_episode_fail(md_error *err, md_status status, const md_trace_episode *episode,
                                const char *fmt, ...) {
  char what[MD_ERROR_MESSAGE_MAX / 2];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  md_fail(err, status, "%s:%zu: episode \"%s\": %s", episode->path, episode->line, episode->id,
          what);
  if (err) md_error_at(err, episode->path, episode->line, episode->id);
  return status;
}
