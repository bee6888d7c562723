/* Qwen2.5 ChatML rendering with region labels. The template this follows is
 * the chat_template of Qwen2.5-Instruct's tokenizer_config.json (a copy is
 * kept with the test fixtures, tests/trace/qwen2.5-chat-template.jinja). */
#include "collector/tokenizer/chat_template.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a text under construction, with its spans --------------------------- */

typedef struct builder {
  char *text;
  size_t length, capacity;
  md_chat_span *spans;
  size_t n_spans, spans_capacity;
  bool out_of_memory;
} builder;

static bool reserve(builder *b, size_t extra) {
  if (b->out_of_memory) return false;
  if (b->length + extra + 1 <= b->capacity) return true;
  size_t capacity = b->capacity ? b->capacity : 256;
  while (capacity < b->length + extra + 1) capacity *= 2;
  char *text = realloc(b->text, capacity);
  if (!text) {
    b->out_of_memory = true;
    return false;
  }
  b->text = text;
  b->capacity = capacity;
  return true;
}

static void append(builder *b, const char *text, size_t length) {
  if (!reserve(b, length)) return;
  memcpy(b->text + b->length, text, length);
  b->length += length;
  b->text[b->length] = '\0';
}

static void append_str(builder *b, const char *text) { append(b, text, strlen(text)); }

static bool same_span(const md_chat_span *span, const char *region, bool is_template, size_t source) {
  return !strcmp(span->region, region) && span->is_template == is_template && span->source == source;
}

/* Appends text with its label; a piece continuing the previous span's label
 * extends it, so spans are maximal runs. */
static void emit(builder *b, const char *text, size_t length, const char *region, bool is_template,
                 size_t source) {
  if (length == 0 || b->out_of_memory) return;
  size_t start = b->length;
  append(b, text, length);
  if (b->out_of_memory) return;
  if (b->n_spans && same_span(&b->spans[b->n_spans - 1], region, is_template, source)) {
    b->spans[b->n_spans - 1].end = b->length;
    return;
  }
  if (b->n_spans == b->spans_capacity) {
    size_t capacity = b->spans_capacity ? 2 * b->spans_capacity : 32;
    md_chat_span *spans = realloc(b->spans, capacity * sizeof *spans);
    if (!spans) {
      b->out_of_memory = true;
      return;
    }
    b->spans = spans;
    b->spans_capacity = capacity;
  }
  b->spans[b->n_spans++] = (md_chat_span){start, b->length, region, is_template, source};
}

static void emit_template(builder *b, const char *text, const char *region, size_t source) {
  emit(b, text, strlen(text), region, true, source);
}

/* ---- tojson: Python's json.dumps(value, ensure_ascii=False) ---------------- */

static void dump_string(builder *b, const char *text, size_t length) {
  append(b, "\"", 1);
  size_t run = 0; /* bytes copied as they are, flushed before each escape */
  for (size_t i = 0; i < length; i++) {
    unsigned char ch = (unsigned char)text[i];
    const char *escape = NULL;
    char hex[8];
    switch (ch) {
      case '"': escape = "\\\""; break;
      case '\\': escape = "\\\\"; break;
      case '\n': escape = "\\n"; break;
      case '\r': escape = "\\r"; break;
      case '\t': escape = "\\t"; break;
      case '\b': escape = "\\b"; break;
      case '\f': escape = "\\f"; break;
      default:
        if (ch < 0x20) {
          snprintf(hex, sizeof hex, "\\u%04x", ch);
          escape = hex;
        }
    }
    if (!escape) {
      run++;
      continue;
    }
    append(b, text + i - run, run);
    run = 0;
    append_str(b, escape);
  }
  append(b, text + length - run, run);
  append(b, "\"", 1);
}

/* The decimal digits d1 d2 ... dn of |x| (x finite, non-zero) with the
 * fewest n that read back as x, and the exponent e of d1.d2...dn x 10^e.
 * %.*e rounds correctly, so the nearest n-digit decimal is tried first; at a
 * power of two the interval of decimals that read back as x is wider above x
 * than below, so the next n-digit decimal up is tried too (as David Gay's
 * shortest mode, which Python's repr uses, would find it). */
static void shortest_digits(double x, char *digits, int *exponent) {
  double magnitude = fabs(x);
  char buf[40];
  for (int n = 1; n <= 17; n++) {
    snprintf(buf, sizeof buf, "%.*e", n - 1, magnitude);
    char *e = strchr(buf, 'e');
    int exp10 = atoi(e + 1);
    size_t k = 0;
    for (const char *p = buf; p < e; p++) {
      if (*p != '.') digits[k++] = *p;
    }
    digits[k] = '\0';
    if (strtod(buf, NULL) != magnitude && n < 17) {
      /* digits + 1 ulp in the last place, with carry */
      size_t i = k;
      while (i > 0 && digits[i - 1] == '9') digits[--i] = '0';
      if (i == 0) {
        memmove(digits + 1, digits, k + 1);
        digits[0] = '1';
        digits[k] = '\0';
        exp10++;
      } else {
        digits[i - 1]++;
      }
      snprintf(buf, sizeof buf, "%c.%se%d", digits[0], digits + 1, exp10);
      if (strtod(buf, NULL) != magnitude) continue;
    }
    while (k > 1 && digits[k - 1] == '0') digits[--k] = '\0';
    *exponent = exp10;
    return;
  }
}

/* Python's float.__repr__ (format_float_short, mode 'r'): digits as above,
 * in exponent notation when the decimal point would sit more than 16 places
 * right of the first digit or 4 or more places left of it ("1e+16",
 * "1e-05"), otherwise positional with at least one digit after the point
 * ("100.0", "0.0001"). */
static void format_real(double x, char *out, size_t size) {
  if (x == 0) {
    snprintf(out, size, "%s", signbit(x) ? "-0.0" : "0.0");
    return;
  }
  char digits[32];
  int exp10 = 0;
  shortest_digits(x, digits, &exp10);
  int n = (int)strlen(digits), point = exp10 + 1; /* digits before the decimal point */
  size_t used = (size_t)snprintf(out, size, "%s", x < 0 ? "-" : "");
  if (point <= -4 || point > 16) {
    snprintf(out + used, size - used, "%c%s%se%c%02d", digits[0], n > 1 ? "." : "", digits + 1,
             exp10 < 0 ? '-' : '+', abs(exp10));
  } else if (point <= 0) {
    used += (size_t)snprintf(out + used, size - used, "0.");
    for (int i = 0; i < -point; i++) out[used++] = '0';
    snprintf(out + used, size - used, "%s", digits);
  } else if (point >= n) {
    used += (size_t)snprintf(out + used, size - used, "%s", digits);
    for (int i = n; i < point; i++) out[used++] = '0';
    snprintf(out + used, size - used, ".0");
  } else {
    snprintf(out + used, size - used, "%.*s.%s", point, digits, digits + point);
  }
}

static void dump_value(builder *b, const json_t *value) {
  char number[48];
  switch (json_typeof(value)) {
    case JSON_OBJECT: {
      const char *key;
      const json_t *item;
      bool first = true;
      append_str(b, "{");
      json_object_foreach((json_t *)value, key, item) {
        if (!first) append_str(b, ", ");
        first = false;
        dump_string(b, key, strlen(key));
        append_str(b, ": ");
        dump_value(b, item);
      }
      append_str(b, "}");
      break;
    }
    case JSON_ARRAY: {
      size_t i;
      const json_t *item;
      append_str(b, "[");
      json_array_foreach((json_t *)value, i, item) {
        if (i) append_str(b, ", ");
        dump_value(b, item);
      }
      append_str(b, "]");
      break;
    }
    case JSON_STRING: dump_string(b, json_string_value(value), json_string_length(value)); break;
    case JSON_INTEGER:
      snprintf(number, sizeof number, "%" JSON_INTEGER_FORMAT, json_integer_value(value));
      append_str(b, number);
      break;
    case JSON_REAL:
      format_real(json_real_value(value), number, sizeof number);
      append_str(b, number);
      break;
    case JSON_TRUE: append_str(b, "true"); break;
    case JSON_FALSE: append_str(b, "false"); break;
    case JSON_NULL: append_str(b, "null"); break;
  }
}

char *md_chat_tojson(const json_t *value, size_t *length) {
  builder b = {0};
  reserve(&b, 0);
  dump_value(&b, value);
  if (b.out_of_memory) {
    free(b.text);
    return NULL;
  }
  if (length) *length = b.length;
  return b.text;
}

static void emit_json(builder *b, const json_t *value, const char *region, size_t source) {
  char *text = md_chat_tojson(value, NULL);
  if (!text) {
    b->out_of_memory = true;
    return;
  }
  emit(b, text, strlen(text), region, false, source);
  free(text);
}

/* ---- the template ---------------------------------------------------------- */

static size_t content_length(const md_trace_message *m) {
  size_t length = 0;
  for (size_t i = 0; i < m->n_segments; i++) length += m->segments[i].length;
  return length;
}

/* The region of a message's first (or last) non-empty piece: its segments,
 * then its tool calls; the message's own region when it has none. */
static const char *edge_region(const md_trace_message *m, bool last) {
  if (last && m->n_tool_calls) return m->tool_calls[m->n_tool_calls - 1].region;
  for (size_t k = 0; k < m->n_segments; k++) {
    const md_trace_segment *s = &m->segments[last ? m->n_segments - 1 - k : k];
    if (s->length) return s->region;
  }
  if (m->n_tool_calls) return m->tool_calls[0].region;
  return m->region;
}

static void emit_segments(builder *b, const md_trace_message *m, size_t source) {
  for (size_t i = 0; i < m->n_segments; i++) {
    emit(b, m->segments[i].text, m->segments[i].length, m->segments[i].region, false, source);
  }
}

/* <|im_start|>{role}\n{content}<|im_end|>\n */
static void emit_plain_turn(builder *b, const md_trace_message *m, size_t source) {
  const char *open = edge_region(m, false), *close = edge_region(m, true);
  emit_template(b, "<|im_start|>", open, source);
  emit_template(b, md_trace_role_name(m->role), open, source);
  emit_template(b, "\n", open, source);
  emit_segments(b, m, source);
  emit_template(b, "<|im_end|>\n", close, source);
}

static void emit_tool_call(builder *b, const md_trace_tool_call *call, size_t source) {
  emit_template(b, "\n<tool_call>\n{\"name\": \"", call->region, source);
  emit(b, call->name, strlen(call->name), call->region, false, source);
  emit_template(b, "\", \"arguments\": ", call->region, source);
  emit_json(b, call->arguments, call->region, source);
  emit_template(b, "}\n</tool_call>", call->region, source);
}

/* <|im_start|>assistant[\n{content}] + the calls + <|im_end|>\n */
static void emit_tool_call_turn(builder *b, const md_trace_message *m, size_t source) {
  const char *open = edge_region(m, false);
  emit_template(b, content_length(m) ? "<|im_start|>assistant\n" : "<|im_start|>assistant", open, source);
  emit_segments(b, m, source);
  for (size_t i = 0; i < m->n_tool_calls; i++) emit_tool_call(b, &m->tool_calls[i], source);
  emit_template(b, "<|im_end|>\n", edge_region(m, true), source);
}

/* A run of tool messages is one user turn of <tool_response> blocks. */
static void emit_tool_response(builder *b, const md_trace_message *m, size_t source, bool first_in_run,
                               bool last_in_run) {
  const char *open = edge_region(m, false), *close = edge_region(m, true);
  if (first_in_run) emit_template(b, "<|im_start|>user", open, source);
  emit_template(b, "\n<tool_response>\n", open, source);
  emit_segments(b, m, source);
  emit_template(b, "\n</tool_response>", close, source);
  if (last_in_run) emit_template(b, "<|im_end|>\n", close, source);
}

static const char tools_preamble[] =
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
static const char tools_postamble[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
    "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";

/* The system turn with the tool signatures (the template's "if tools" branch). */
static void emit_tools_system_turn(builder *b, const md_trace_episode *ep, bool has_system) {
  const md_trace_message *system = has_system ? &ep->messages[0] : NULL;
  const char *open = system ? edge_region(system, false) : MD_REGION_SYSTEM;
  emit_template(b, "<|im_start|>system\n", open, system ? 0 : MD_CHAT_NO_SOURCE);
  if (system) {
    emit_segments(b, system, 0);
  } else {
    emit_template(b, MD_CHAT_DEFAULT_SYSTEM, MD_REGION_SYSTEM, MD_CHAT_NO_SOURCE);
  }
  emit_template(b, tools_preamble, MD_REGION_SYSTEM, MD_CHAT_NO_SOURCE);
  size_t i;
  const json_t *tool;
  json_array_foreach((json_t *)ep->tools, i, tool) {
    emit_template(b, "\n", MD_REGION_SYSTEM, MD_CHAT_NO_SOURCE);
    emit_json(b, tool, MD_REGION_SYSTEM, MD_CHAT_NO_SOURCE);
  }
  emit_template(b, tools_postamble, MD_REGION_SYSTEM, MD_CHAT_NO_SOURCE);
}

static void emit_system_turn(builder *b, const md_trace_episode *ep) {
  bool has_system = ep->n_messages && ep->messages[0].role == MD_ROLE_SYSTEM;
  if (ep->tools && json_array_size(ep->tools)) {
    emit_tools_system_turn(b, ep, has_system);
  } else if (has_system) {
    emit_plain_turn(b, &ep->messages[0], 0);
  } else {
    emit_template(b, "<|im_start|>system\n" MD_CHAT_DEFAULT_SYSTEM "<|im_end|>\n", MD_REGION_SYSTEM,
                  MD_CHAT_NO_SOURCE);
  }
}

static void render_messages(builder *b, const md_trace_episode *ep, const char *decode_region) {
  emit_system_turn(b, ep);
  size_t n = ep->n_messages;
  for (size_t i = 0; i < n; i++) {
    const md_trace_message *m = &ep->messages[i];
    if (m->role == MD_ROLE_SYSTEM && i == 0) continue; /* written above */
    if (m->role == MD_ROLE_TOOL) {
      bool first = i == 0 || ep->messages[i - 1].role != MD_ROLE_TOOL;
      bool last = i + 1 == n || ep->messages[i + 1].role != MD_ROLE_TOOL;
      emit_tool_response(b, m, i, first, last);
    } else if (m->role == MD_ROLE_ASSISTANT && m->n_tool_calls) {
      emit_tool_call_turn(b, m, i);
    } else {
      emit_plain_turn(b, m, i);
    }
  }
  emit_template(b, "<|im_start|>assistant\n", decode_region, MD_CHAT_NO_SOURCE);
}

static void render_raw(builder *b, const md_trace_episode *ep) {
  for (size_t i = 0; i < ep->n_spans; i++) {
    emit(b, ep->spans[i].text, ep->spans[i].length, ep->spans[i].region, false, i);
  }
}

md_status md_chat_render(const md_trace_episode *episode, md_chat_prompt *prompt, md_error *err) {
  memset(prompt, 0, sizeof *prompt);
  builder b = {0};
  reserve(&b, 0);
  prompt->continuation = episode->continuation;
  if (!prompt->continuation.region) prompt->continuation.region = MD_REGION_SCRATCHPAD;
  if (episode->raw) {
    render_raw(&b, episode);
  } else {
    render_messages(&b, episode, prompt->continuation.region);
  }
  if (b.out_of_memory || b.length == 0) {
    free(b.text);
    free(b.spans);
    if (b.out_of_memory) {
      return md_fail(err, MD_E_NOMEM, "%s:%zu: episode \"%s\": out of memory rendering the prompt",
                     episode->path, episode->line, episode->id);
    }
    return md_fail(err, MD_E_FORMAT, "%s:%zu: episode \"%s\": the prompt is empty", episode->path,
                   episode->line, episode->id);
  }
  prompt->text = b.text;
  prompt->length = b.length;
  prompt->spans = b.spans;
  prompt->n_spans = b.n_spans;
  return MD_OK;
}

static const char *const chatml_markup[] = {"<|im_start|>", "<|im_end|>", NULL};
static const char *const chatml_stops[] = {"<|im_end|>", "<|endoftext|>", NULL};

const md_chat_format md_chat_chatml = {
    .name = "chatml",
    .render = md_chat_render,
    .question_head = "<|im_end|>\n<|im_start|>user\n",
    .question_tail = "<|im_end|>\n<|im_start|>assistant\n",
    .markup_tokens = chatml_markup,
    .stop_tokens = chatml_stops,
};

void md_chat_prompt_free(md_chat_prompt *prompt) {
  if (!prompt) return;
  free(prompt->text);
  free(prompt->spans);
  memset(prompt, 0, sizeof *prompt);
}

md_status md_chat_token_spans(const md_chat_span *spans, size_t n_spans, const size_t *token_start,
                              size_t n_tokens, size_t *token_span, md_error *err) {
  size_t length = n_spans ? spans[n_spans - 1].end : 0, span = 0;
  for (size_t i = 0; i < n_tokens; i++) {
    size_t start = token_start[i];
    if (start >= length) {
      return md_fail(err, MD_E_INVALID, "token %zu starts at byte %zu, past the end of the %zu-byte prompt",
                     i, start, length);
    }
    if (i && start < token_start[i - 1]) {
      return md_fail(err, MD_E_INVALID,
                     "token %zu starts at byte %zu, before token %zu (byte %zu): offsets must not decrease",
                     i, start, i - 1, token_start[i - 1]);
    }
    while (spans[span].end <= start) span++;
    token_span[i] = span;
  }
  return MD_OK;
}
