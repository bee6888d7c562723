/* The trace reader: every field of the format on the fixture episodes, the
 * streaming details (BOM, CRLF, blank lines, line numbers), skip-invalid
 * mode, the validate-all pass, and one case per kind of bad input with the
 * message it must produce (file, line, column for JSON syntax, JSON path). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/formats/trace.h"
#include "tests/test_util.h"

static char tmp_dir[] = "/tmp/md-trace-XXXXXX";

static const char *source_path(const char *relative) {
  static char path[1024];
  const char *root = getenv("MD_SOURCE_ROOT");
  snprintf(path, sizeof path, "%s/%s", root ? root : ".", relative);
  return path;
}

static const char *write_case(const char *content) {
  static char path[256];
  snprintf(path, sizeof path, "%s/case.jsonl", tmp_dir);
  FILE *fp = fopen(path, "wb");
  fwrite(content, 1, strlen(content), fp);
  fclose(fp);
  return path;
}

/* Reads a file to the end in strict mode; returns the first failure. */
static md_status read_all(const char *path, size_t *episodes, md_error *err) {
  md_trace_reader *reader;
  md_status status = md_trace_open(path, NULL, &reader, err);
  if (status != MD_OK) return status;
  *episodes = 0;
  for (;;) {
    md_trace_episode episode;
    bool have;
    status = md_trace_next(reader, &episode, &have, err);
    if (status != MD_OK || !have) break;
    ++*episodes;
    md_trace_episode_free(&episode);
  }
  md_trace_close(reader);
  return status;
}

/* ---- the fixture episodes, field by field ---------------------------------- */

static md_trace_episode episodes[16];
static size_t n_episodes;

static const md_trace_episode *find(const char *id) {
  for (size_t i = 0; i < n_episodes; i++) {
    if (!strcmp(episodes[i].id, id)) return &episodes[i];
  }
  return NULL;
}

static void load_fixture(void) {
  md_trace_reader *reader;
  md_error err;
  CHECK(md_trace_open(source_path("tests/trace/data/render-episodes.jsonl"), NULL, &reader, &err) == MD_OK);
  bool have = true;
  while (have && n_episodes < 16) {
    md_status status = md_trace_next(reader, &episodes[n_episodes], &have, &err);
    CHECK_MSG(status == MD_OK, "%s", err.message);
    if (status != MD_OK) break;
    if (have) n_episodes++;
  }
  CHECK(n_episodes == 10);
  CHECK(md_trace_reader_line(reader) == 10);
  md_trace_close(reader);
}

static bool segment_is(const md_trace_segment *s, const char *region, const char *text) {
  return !strcmp(s->region, region) && !strcmp(s->text, text) && s->length == strlen(text);
}

static void test_plain(void) {
  const md_trace_episode *ep = find("plain");
  CHECK(ep && !ep->raw && ep->n_messages == 4 && ep->line == 1);
  if (!ep) return;
  CHECK(ep->messages[0].role == MD_ROLE_SYSTEM && ep->messages[0].n_segments == 1);
  CHECK(segment_is(&ep->messages[0].segments[0], "system",
                   "You are a careful travel agent. Never book red-eye flights."));
  CHECK(ep->messages[1].role == MD_ROLE_USER && !strcmp(ep->messages[1].region, "user"));
  CHECK(ep->messages[2].role == MD_ROLE_ASSISTANT && ep->messages[2].n_segments == 2);
  CHECK(!strcmp(ep->messages[2].region, "scratchpad"));
  CHECK(segment_is(&ep->messages[2].segments[0], "plan", "1. Search flights.\n2. Pick a morning one.\n"));
  CHECK(segment_is(&ep->messages[2].segments[1], "scratchpad", "The user wants Lisbon; no red-eyes."));
  CHECK(ep->continuation.kind == MD_CONTINUATION_TEXT);
  CHECK(!strcmp(ep->continuation.region, "scratchpad") && !strcmp(ep->continuation.text, "Next I will search."));
  CHECK(ep->n_probes == 1 && !strcmp(ep->probes[0].region, "user"));
  CHECK(!strcmp(ep->probes[0].question, "Which city?") && !strcmp(ep->probes[0].answer, "Lisbon"));
  CHECK(json_integer_value(json_object_get(ep->probes[0].object, "weight")) == 2);
  CHECK(ep->tools == NULL);
}

static void test_tool_calls(void) {
  const md_trace_episode *ep = find("tool-calls");
  CHECK(ep && ep->n_messages == 8 && ep->line == 3);
  if (!ep) return;
  const md_trace_message *m = &ep->messages[2];
  CHECK(m->n_tool_calls == 2 && !strcmp(m->tool_calls[0].name, "search_trains"));
  CHECK(!strcmp(m->tool_calls[0].region, "tool_in"));
  CHECK(json_is_object(m->tool_calls[0].arguments) && json_object_size(m->tool_calls[0].arguments) == 9);
  CHECK(!strcmp(m->tool_calls[1].name, "get_weather") && json_object_size(m->tool_calls[1].arguments) == 0);
  CHECK(segment_is(&ep->messages[4].segments[1], "retrieval", " Source: meteo.fr"));
  /* OpenAI form, arguments as a JSON string: parsed into an object */
  m = &ep->messages[5];
  CHECK(m->n_segments == 0 && m->n_tool_calls == 1 && !strcmp(m->tool_calls[0].name, "book_train"));
  CHECK(json_is_object(m->tool_calls[0].arguments));
  CHECK(json_integer_value(json_object_get(m->tool_calls[0].arguments, "seats")) == 2);
  CHECK(json_real_value(json_object_get(m->tool_calls[0].arguments, "price")) == 35.0);
  CHECK(ep->messages[6].role == MD_ROLE_TOOL && !strcmp(ep->messages[6].segments[0].region, "tool_out"));
}

static void test_other_forms(void) {
  const md_trace_episode *ep = find("no-system");
  CHECK(ep && ep->continuation.kind == MD_CONTINUATION_GENERATE && ep->continuation.generate == 16);
  CHECK(ep && !strcmp(ep->continuation.region, "scratchpad"));
  ep = find("with-tools");
  CHECK(ep && json_array_size(ep->tools) == 2);
  CHECK(ep && !strcmp(ep->messages[2].tool_calls[0].region, "tool_in"));
  ep = find("odd-turns");
  CHECK(ep && !strcmp(ep->messages[1].region, "plan") && !strcmp(ep->messages[1].segments[0].region, "plan"));
  CHECK(ep && ep->messages[4].n_segments == 0 && !strcmp(ep->messages[4].region, "retrieval"));
  CHECK(ep && !strcmp(ep->continuation.region, "plan"));
  ep = find("tools-empty");
  CHECK(ep && ep->continuation.kind == MD_CONTINUATION_NONE && !strcmp(ep->continuation.region, "scratchpad"));
  ep = find("raw");
  CHECK(ep && ep->raw && ep->n_spans == 4 && ep->n_messages == 0 && ep->line == 9);
  CHECK(ep && segment_is(&ep->spans[1], "user", "<|im_start|>user\nHi<|im_end|>\n"));
  CHECK(ep && segment_is(&ep->spans[2], "scratchpad", ""));
}

/* A segment without a region takes its message's region; free-form names. */
static void test_segment_defaults(void) {
  const char *path = write_case(
      "{\"id\": \"d\", \"messages\": [{\"role\": \"user\", \"region\": \"my_docs2\", \"content\": "
      "[{\"text\": \"a\"}, {\"region\": \"user\", \"text\": \"b\"}]}, {\"role\": \"tool\", \"content\": \"r\"}],"
      " \"continuation\": {\"region\": \"answer\", \"text\": \"x\"}, \"meta\": {\"anything\": [1]}}\n");
  md_trace_reader *reader;
  md_error err;
  CHECK(md_trace_open(path, NULL, &reader, &err) == MD_OK);
  md_trace_episode ep;
  bool have;
  CHECK(md_trace_next(reader, &ep, &have, &err) == MD_OK && have);
  CHECK(segment_is(&ep.messages[0].segments[0], "my_docs2", "a"));
  CHECK(segment_is(&ep.messages[0].segments[1], "user", "b"));
  CHECK(segment_is(&ep.messages[1].segments[0], "tool_out", "r"));
  CHECK(!strcmp(ep.continuation.region, "answer"));
  md_trace_episode_free(&ep);
  md_trace_close(reader);
}

/* ---- streaming: BOM, CRLF, blank lines, line numbers ---------------------- */

static const char good_a[] = "{\"id\": \"a\", \"spans\": [{\"region\": \"user\", \"text\": \"x\"}]}";
static const char good_b[] = "{\"id\": \"b\", \"spans\": [{\"region\": \"user\", \"text\": \"y\"}]}";

static void test_streaming(void) {
  char content[512];
  snprintf(content, sizeof content, "\xEF\xBB\xBF%s\r\n\r\n   \t\n\n%s", good_a, good_b); /* no final newline */
  const char *path = write_case(content);
  md_trace_reader *reader;
  md_error err;
  CHECK(md_trace_open(path, NULL, &reader, &err) == MD_OK);
  md_trace_episode ep;
  bool have;
  CHECK(md_trace_next(reader, &ep, &have, &err) == MD_OK && have && !strcmp(ep.id, "a") && ep.line == 1);
  md_trace_episode_free(&ep);
  CHECK(md_trace_next(reader, &ep, &have, &err) == MD_OK && have && !strcmp(ep.id, "b") && ep.line == 5);
  CHECK(ep.path && strstr(ep.path, "case.jsonl"));
  md_trace_episode_free(&ep);
  CHECK(md_trace_next(reader, &ep, &have, &err) == MD_OK && !have);
  CHECK(md_trace_next(reader, &ep, &have, &err) == MD_OK && !have); /* stays at the end */
  md_trace_close(reader);

  md_trace_summary summary;
  CHECK(md_trace_scan(path, NULL, &summary, &err) == MD_OK);
  CHECK(summary.episodes == 2 && summary.skipped == 0 && summary.lines == 5 && summary.text_bytes == 2);
}

/* ---- skip-invalid mode ------------------------------------------------------ */

typedef struct skips {
  int count;
  char messages[4][MD_ERROR_MESSAGE_MAX];
} skips;

static void record_skip(void *context, const md_error *reason) {
  skips *s = context;
  if (s->count < 4) snprintf(s->messages[s->count], MD_ERROR_MESSAGE_MAX, "%s", reason->message);
  s->count++;
}

static void test_skip_invalid(void) {
  char content[1024];
  snprintf(content, sizeof content, "%s\n{\"id\": \"c\"\n%s\n{\"id\": \"d\", \"messages\": []}\n%s\n", good_a,
           good_a, good_b);
  const char *path = write_case(content);
  skips seen = {0};
  md_trace_options options = {true, record_skip, &seen};
  md_trace_summary summary;
  md_error err;
  CHECK(md_trace_scan(path, &options, &summary, &err) == MD_OK);
  CHECK(summary.episodes == 2 && summary.skipped == 3 && summary.lines == 5);
  CHECK(seen.count == 3);
  CHECK_MSG(strstr(seen.messages[0], "case.jsonl:2:10: invalid JSON: '}' expected at the end of the line"), "%s", seen.messages[0]);
  CHECK_MSG(strstr(seen.messages[1], "case.jsonl:3: episode \"a\": duplicate episode id (first used on line 1)"),
            "%s", seen.messages[1]);
  CHECK_MSG(strstr(seen.messages[2], "case.jsonl:4: episode \"d\": messages: empty episode"), "%s",
            seen.messages[2]);

  /* the same file in strict mode stops at line 2 */
  size_t n = 0;
  CHECK(read_all(path, &n, &err) == MD_E_FORMAT && n == 1);
  CHECK_MSG(strstr(err.message, "case.jsonl:2:10: invalid JSON: '}' expected at the end of the line"), "%s", err.message);
  CHECK(md_trace_scan(path, NULL, &summary, &err) == MD_E_FORMAT);

  /* the reader alone, skip mode without a callback */
  md_trace_options quiet = {true, NULL, NULL};
  md_trace_reader *reader;
  CHECK(md_trace_open(path, &quiet, &reader, &err) == MD_OK);
  md_trace_episode ep;
  bool have;
  CHECK(md_trace_next(reader, &ep, &have, &err) == MD_OK && have && !strcmp(ep.id, "a"));
  md_trace_episode_free(&ep);
  CHECK(md_trace_next(reader, &ep, &have, &err) == MD_OK && have && !strcmp(ep.id, "b") && ep.line == 5);
  md_trace_episode_free(&ep);
  CHECK(md_trace_next(reader, &ep, &have, &err) == MD_OK && !have);
  md_trace_close(reader);
}

static void test_scan_failures(void) {
  md_trace_summary summary;
  md_error err;
  CHECK(md_trace_scan(write_case(""), NULL, &summary, &err) == MD_E_FORMAT);
  CHECK_MSG(strstr(err.message, "case.jsonl: no episodes (the file is empty"), "%s", err.message);
  CHECK(md_trace_scan(write_case("\n  \n\r\n"), NULL, &summary, &err) == MD_E_FORMAT);
  CHECK(summary.lines == 3);
  md_trace_options skip = {true, NULL, NULL};
  CHECK(md_trace_scan(write_case("[]\n{}\n"), &skip, &summary, &err) == MD_E_FORMAT);
  CHECK_MSG(strstr(err.message, "case.jsonl: no valid episodes (2 invalid ones skipped)"), "%s", err.message);

  md_trace_reader *reader;
  char missing[300];
  snprintf(missing, sizeof missing, "%s/absent.jsonl", tmp_dir);
  CHECK(md_trace_open(missing, NULL, &reader, &err) == MD_E_IO && reader == NULL);
  CHECK_MSG(strstr(err.message, "cannot open") && strstr(err.message, "absent.jsonl: No such file"), "%s",
            err.message);
  size_t n;
  CHECK(read_all(tmp_dir, &n, &err) == MD_E_IO); /* a directory */
  CHECK_MSG(strstr(err.message, ":1: read error: Is a directory"), "%s", err.message);
}

static void test_check_positions(void) {
  const md_trace_episode *ep = find("plain");
  md_error err;
  if (!ep) return;
  CHECK(md_trace_check_positions(ep, 32000, 768, 32768, &err) == MD_OK);
  CHECK(md_trace_check_positions(ep, 32000, 769, 32768, &err) == MD_E_INVALID);
  CHECK_MSG(strstr(err.message, "render-episodes.jsonl:1: episode \"plain\": 32000 prompt tokens + 769 decode "
                                "steps = 32769 positions, more than the model's max_position_embeddings (32768)"),
            "%s", err.message);
}

/* ---- bad input: one case per rule ------------------------------------------ */

typedef struct bad_case {
  const char *content;
  const char *message; /* must appear in the error */
} bad_case;

#define SPANS "\"spans\": [{\"region\": \"user\", \"text\": \"x\"}]"
#define USER "{\"role\": \"user\", \"content\": \"hi\"}"

static const bad_case bad_cases[] = {
    /* JSON syntax: the column (in characters) where jansson stopped */
    {"{\"id\": \"a\", \"messages\": [}\n", "case.jsonl:1:26: invalid JSON: unexpected token near '}'"},
    {"{\"id\": \"a\", " SPANS "} x\n", "case.jsonl:1:57: invalid JSON: end of file expected near 'x'"},
    {"{\"id\": \"a\", \"id\": \"b\", " SPANS "}\n", "case.jsonl:1:16: invalid JSON: duplicate object key"},
    {"{\"id\": \"a\", \"spans\": [{\"region\": \"user\", \"text\": \"\xff\"}]}\n",
     "case.jsonl:1:50: invalid JSON: unable to decode byte 0xff"},
    {"{\"id\": \"a\", \"spans\": [{\"region\": \"user\", \"text\": \"a\\u0000b\"}]}\n",
     "case.jsonl:1:59: invalid JSON: \\u0000 is not allowed"},
    {"\n\n{\"id\": \"é\", x}\n", "case.jsonl:3:13: invalid JSON: string or '}' expected near 'x'"},
    {"{\"id\": \"a\", " SPANS "}\n\xEF\xBB\xBF{\"id\": \"b\", " SPANS "}\n", "case.jsonl:2:1: invalid JSON"},
    {"[1, 2]\n", "case.jsonl:1: an episode must be a JSON object, got an array"},
    /* id */
    {"{" SPANS "}\n", "case.jsonl:1: missing \"id\""},
    {"{\"id\": 7, " SPANS "}\n", "case.jsonl:1: \"id\" must be a string, got an integer"},
    {"{\"id\": \"../etc\", " SPANS "}\n", "case.jsonl:1: invalid episode id \"../etc\" (ids name output files"},
    {"{\"id\": \"\", " SPANS "}\n", "case.jsonl:1: invalid episode id \"\""},
    {"{\"id\": \"a\", " SPANS "}\n\n{\"id\": \"b\", " SPANS "}\n{\"id\": \"a\", " SPANS "}\n",
     "case.jsonl:4: episode \"a\": duplicate episode id (first used on line 1)"},
    {"{\"id\": \"Ep.1\", " SPANS "}\n{\"id\": \"ep.1\", " SPANS "}\n",
     "case.jsonl:2: episode \"ep.1\": episode id differs only by case from \"Ep.1\" on line 1 (their "
     "output files would be one on a case-insensitive file system)"},
    /* episode keys and forms */
    {"{\"id\": \"a\", " SPANS ", \"contination\": {}}\n",
     "case.jsonl:1: episode \"a\": unknown key \"contination\" (known keys: id, messages, spans, continuation, "
     "probes, tools, meta)"},
    {"{\"id\": \"a\"}\n", "case.jsonl:1: episode \"a\": missing \"messages\" (or \"spans\" for the raw form)"},
    {"{\"id\": \"a\", " SPANS ", \"messages\": [" USER "]}\n",
     "case.jsonl:1: episode \"a\": has both \"messages\" and \"spans\""},
    /* messages */
    {"{\"id\": \"a\", \"messages\": {}}\n", "episode \"a\": messages: must be a list of messages, got an object"},
    {"{\"id\": \"a\", \"messages\": []}\n", "episode \"a\": messages: empty episode: the list of messages is empty"},
    {"{\"id\": \"a\", \"messages\": [\"hi\"]}\n", "messages[0]: a message must be an object, got a string"},
    {"{\"id\": \"a\", \"messages\": [{\"content\": \"hi\"}]}\n", "messages[0]: missing \"role\""},
    {"{\"id\": \"a\", \"messages\": [" USER ", {\"role\": \"bot\", \"content\": \"x\"}]}\n",
     "case.jsonl:1: episode \"a\": messages[1]: unknown role \"bot\" (known roles: system, user, assistant, tool)"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": 1, \"content\": \"x\"}]}\n",
     "messages[0]: \"role\" must be a string, got an integer"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"user\"}]}\n",
     "messages[0]: missing \"content\" (only an assistant message with tool calls may omit it)"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"assistant\", \"content\": null}]}\n", "messages[0]: missing \"content\""},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": 42}]}\n",
     "messages[0].content: must be a string or a list of {\"region\", \"text\"} segments, got an integer"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"\"}, {\"role\": \"user\", \"content\": []}]}\n",
     "messages: empty episode: no message has any text or tool call"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"hi <|im_end|> there\"}]}\n",
     "messages[0].content: text contains \"<|im_end|>\", which would split the chat template's turns"},
    /* segments and regions */
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": [{\"region\": \"user\"}]}]}\n",
     "messages[0].content[0]: missing \"text\""},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": [\"hi\"]}]}\n",
     "messages[0].content[0]: a segment must be an object {\"region\", \"text\"}, got a string"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": [{\"text\": 5}]}]}\n",
     "messages[0].content[0]: \"text\" must be a string, got an integer"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": [{\"txt\": \"x\"}]}]}\n",
     "messages[0].content[0]: unknown key \"txt\" (known keys: region, text)"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": [{\"text\": \"x\"}, "
     "{\"region\": \"Tool Out\", \"text\": \"y\"}]}]}\n",
     "messages[0].content[1]: invalid region name \"Tool Out\" (a region is [a-z][a-z0-9_]*, at most 64 bytes)"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"region\": \"9lives\", \"content\": \"x\"}]}\n",
     "messages[0]: invalid region name \"9lives\""},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"region\": 3, \"content\": \"x\"}]}\n",
     "messages[0]: \"region\" must be a string, got an integer"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"region\": "
     "\"a2345678901234567890123456789012345678901234567890123456789012345\", \"content\": \"x\"}]}\n",
     "messages[0]: invalid region name \"a234567890123456789012345678901234567890...\""},
    /* the raw form */
    {"{\"id\": \"a\", \"spans\": []}\n", "spans: empty episode: the list of spans is empty"},
    {"{\"id\": \"a\", \"spans\": \"text\"}\n", "spans: must be a list of {\"region\", \"text\"} spans, got a string"},
    {"{\"id\": \"a\", \"spans\": [{\"text\": \"x\"}]}\n", "episode \"a\": spans[0]: missing \"region\""},
    {"{\"id\": \"a\", \"spans\": [{\"region\": \"user\", \"text\": \"\"}]}\n",
     "spans: empty episode: every span's text is empty"},
    {"{\"id\": \"a\", " SPANS ", \"tools\": []}\n", "tools: belongs to the messages form"},
    /* tool calls */
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"x\", \"tool_calls\": []}]}\n",
     "messages[0].tool_calls: only assistant messages make tool calls"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"assistant\", \"content\": \"x\", \"tool_calls\": {}}]}\n",
     "messages[0].tool_calls: must be a list, got an object"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"assistant\", \"tool_calls\": [\"f\"]}]}\n",
     "messages[0].tool_calls[0]: a tool call must be an object, got a string"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"arguments\": {}}]}]}\n",
     "messages[0].tool_calls[0]: missing \"name\""},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"name\": \"get weather\", "
     "\"arguments\": {}}]}]}\n",
     "messages[0].tool_calls[0]: invalid tool name \"get weather\""},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"name\": \"f\"}]}]}\n",
     "messages[0].tool_calls[0]: missing \"arguments\" (use {} for a call without arguments)"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"name\": \"f\", "
     "\"arguments\": \"{'a': 1}\"}]}]}\n",
     "messages[0].tool_calls[0]: \"arguments\" is a string but not a JSON object: string or '}' expected"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"name\": \"f\", "
     "\"arguments\": \"[1]\"}]}]}\n",
     "messages[0].tool_calls[0]: \"arguments\" is a string but not a JSON object"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"name\": \"f\", "
     "\"arguments\": [1]}]}]}\n",
     "messages[0].tool_calls[0]: \"arguments\" must be an object or a string holding one, got an array"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"function\": \"f\"}]}]}\n",
     "messages[0].tool_calls[0]: \"function\" must be an object, got a string"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"name\": \"f\", "
     "\"arguments\": {\"q\": [\"<|im_start|>\"]}}]}]}\n",
     "messages[0].tool_calls[0]: text contains \"<|im_start|>\""},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"name\": \"f\", "
     "\"arguments\": {\"n\": 12345678901234567890}}]}]}\n",
     "case.jsonl:1:115: invalid JSON: too big integer"},
    {"{\"id\": \"a\", \"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"name\": \"f\", "
     "\"arguments\": {}, \"region\": \"Tool\"}]}]}\n",
     "messages[0].tool_calls[0]: invalid region name \"Tool\""},
    /* tools */
    {"{\"id\": \"a\", \"messages\": [" USER "], \"tools\": {}}\n", "tools: must be a list of function signatures"},
    {"{\"id\": \"a\", \"messages\": [" USER "], \"tools\": [\"f\"]}\n", "tools[0]: must be an object, got a string"},
    /* continuation */
    {"{\"id\": \"a\", " SPANS ", \"continuation\": \"go\"}\n", "continuation: must be an object, got a string"},
    {"{\"id\": \"a\", " SPANS ", \"continuation\": {\"text\": \"x\", \"generate\": 4}}\n",
     "continuation: has both \"text\" and \"generate\""},
    {"{\"id\": \"a\", " SPANS ", \"continuation\": {\"region\": \"scratchpad\"}}\n",
     "continuation: needs \"text\" (teacher-forced) or \"generate\" (tokens to decode)"},
    {"{\"id\": \"a\", " SPANS ", \"continuation\": {\"generate\": 0}}\n",
     "continuation.generate: must be at least 1 token, got 0"},
    {"{\"id\": \"a\", " SPANS ", \"continuation\": {\"generate\": -5}}\n",
     "continuation.generate: must be at least 1 token, got -5"},
    {"{\"id\": \"a\", " SPANS ", \"continuation\": {\"generate\": 10000000}}\n",
     "continuation.generate: 10000000 tokens is more than the limit of 131072"},
    {"{\"id\": \"a\", " SPANS ", \"continuation\": {\"generate\": 2.5}}\n",
     "continuation.generate: must be a whole number of tokens, got a real number"},
    {"{\"id\": \"a\", " SPANS ", \"continuation\": {\"generate\": \"256\"}}\n",
     "continuation.generate: must be a whole number of tokens, got a string"},
    {"{\"id\": \"a\", " SPANS ", \"continuation\": {\"text\": \"\"}}\n", "continuation.text: is empty"},
    {"{\"id\": \"a\", " SPANS ", \"continuation\": {\"text\": 3}}\n",
     "continuation: \"text\" must be a string, got an integer"},
    {"{\"id\": \"a\", " SPANS ", \"continuation\": {\"text\": \"x\", \"steps\": 3}}\n",
     "continuation: unknown key \"steps\" (known keys: region, text, generate)"},
    {"{\"id\": \"a\", \"messages\": [" USER "], \"continuation\": {\"text\": \"<|im_end|>\"}}\n",
     "continuation.text: text contains \"<|im_end|>\""},
    /* probes */
    {"{\"id\": \"a\", " SPANS ", \"probes\": {}}\n", "probes: must be a list, got an object"},
    {"{\"id\": \"a\", " SPANS ", \"probes\": [{\"region\": \"user\", \"question\": \"q\"}]}\n",
     "probes[0]: missing \"answer\""},
    {"{\"id\": \"a\", " SPANS ", \"probes\": [{\"question\": \"q\", \"answer\": \"a\"}]}\n",
     "probes[0]: missing \"region\""},
    {"{\"id\": \"a\", " SPANS ", \"probes\": [{\"region\": \"user\", \"question\": \"q<|im_end|>\", "
     "\"answer\": \"a\"}]}\n",
     "probes[0].question: text contains \"<|im_end|>\""},
    {"{\"id\": \"a\", " SPANS ", \"probes\": [{\"region\": \"user\", \"question\": \"q\", "
     "\"answer\": \"<|im_start|>a\"}]}\n",
     "probes[0].answer: text contains \"<|im_start|>\""},
    {"{\"id\": \"a\", " SPANS ", \"probes\": [{\"region\": \"user\", \"question\": \"q\", \"answer\": "
     "\"a\"}, {\"region\": \"user\", \"question\": \"q\", \"answer\": \"b\"}]}\n",
     "probes[1]: the same region and question as probes[0]: a probe asked twice would count twice"},
    {"{\"id\": \"a\", " SPANS ", \"probes\": [{\"region\": \"User\", \"question\": \"q\", \"answer\": \"a\"}]}\n",
     "probes[0]: invalid region name \"User\""},
    {"{\"id\": \"a\", " SPANS ", \"probes\": [7]}\n", "probes[0]: a probe must be an object"},
};

static void test_bad_cases(void) {
  size_t n = sizeof bad_cases / sizeof bad_cases[0];
  for (size_t i = 0; i < n; i++) {
    md_error err;
    md_error_clear(&err);
    size_t episodes = 0;
    md_status status = read_all(write_case(bad_cases[i].content), &episodes, &err);
    CHECK_MSG(status == MD_E_FORMAT || status == MD_E_INVALID, "case %zu: status %d", i, (int)status);
    CHECK_MSG(strstr(err.message, bad_cases[i].message) != NULL, "case %zu:\n  got:      %s\n  expected: %s", i,
              err.message, bad_cases[i].message);
  }
}

/* The writer: each fixture line, written by Python's json.dumps, is
 * written back byte for byte, but for tool-calls, whose reals are written
 * with other digits for the same doubles ("1e+16" as 10000000000000000.0)
 * and whose string-form arguments come back as a string holding the same
 * object; what the writer writes reads back into an episode it writes as
 * the same bytes; and parse_line applies the reader's rules. */
static void test_writer(void) {
  FILE *fp = fopen(source_path("tests/trace/data/render-episodes.jsonl"), "rb");
  CHECK(fp != NULL);
  if (!fp) return;
  char *input = NULL;
  size_t capacity = 0, i = 0;
  ssize_t length;
  while ((length = getline(&input, &capacity, fp)) > 0 && i < n_episodes) {
    const md_trace_episode *ep = &episodes[i++];
    char *line = NULL, *again = NULL;
    md_error err;
    CHECK(md_trace_episode_dumps(ep, &line, &err) == MD_OK);
    if (!line) continue;
    if (strcmp(ep->id, "tool-calls") != 0) {
      CHECK_MSG(!strcmp(line, input), "%s:\n  read:    %s  written: %s", ep->id, input, line);
    } else {
      json_t *a = json_loads(input, 0, NULL), *b = json_loads(line, 0, NULL);
      CHECK(a && b && json_equal(a, b));
      json_decref(a);
      json_decref(b);
      CHECK(strstr(line, "\"arguments\": \"{\\\"train\\\":\\\"TGV-6601\\\",\\\"seats\\\":2,"
                         "\\\"price\\\":35.0}\"") != NULL);
    }
    md_trace_episode back;
    CHECK(md_trace_parse_line("again.jsonl", 7, line, strlen(line) - 1, &back, &err) == MD_OK);
    CHECK(back.line == 7 && !strcmp(back.path, "again.jsonl") && !strcmp(back.id, ep->id));
    CHECK(md_trace_episode_dumps(&back, &again, &err) == MD_OK && again && !strcmp(line, again));
    if (!strcmp(ep->id, "tool-calls"))
      CHECK(back.n_messages == 8 && back.messages[5].tool_calls[0].arguments_string &&
            !back.messages[2].tool_calls[0].arguments_string);
    md_trace_episode_free(&back);
    free(line);
    free(again);
  }
  CHECK(i == n_episodes);
  free(input);
  fclose(fp);
  md_trace_episode bad;
  md_error err;
  const char *no_id = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}";
  CHECK(md_trace_parse_line("t.jsonl", 4, no_id, strlen(no_id), &bad, &err) == MD_E_FORMAT);
  CHECK_MSG(strstr(err.message, "t.jsonl:4: missing \"id\"") != NULL, "%s", err.message);
  CHECK(bad.root == NULL && bad.path == NULL);
}

int main(void) {
  if (!mkdtemp(tmp_dir)) return 1;
  load_fixture();
  test_plain();
  test_tool_calls();
  test_other_forms();
  test_segment_defaults();
  test_streaming();
  test_skip_invalid();
  test_scan_failures();
  test_check_positions();
  test_bad_cases();
  test_writer();
  for (size_t i = 0; i < n_episodes; i++) md_trace_episode_free(&episodes[i]);
  char path[300];
  snprintf(path, sizeof path, "%s/case.jsonl", tmp_dir);
  unlink(path);
  rmdir(tmp_dir);
  return md_test_finish("test_trace");
}
