/* Chat template rendering. The prompt texts are compared byte for byte with
 * renderings by HF transformers' apply_chat_template and Qwen2.5-Instruct's
 * template (data/render-expected.jsonl, from make_fixtures.py); tojson with
 * Python's json.dumps (data/tojson-cases.jsonl). The spans and regions are
 * hand-derived from the rules in chat_template.h, written out below. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/tokenizer/chat_template.h"
#include "base/policy_defaults.h"
#include "tests/test_util.h"

static const char *source_path(const char *relative) {
  static char path[1024];
  const char *root = getenv("MD_SOURCE_ROOT");
  snprintf(path, sizeof path, "%s/%s", root ? root : ".", relative);
  return path;
}

/* ---- tojson against Python ------------------------------------------------- */

static void test_tojson(void) {
  json_error_t jerr;
  FILE *fp = fopen(source_path("tests/trace/data/tojson-cases.jsonl"), "r");
  CHECK(fp != NULL);
  if (!fp) return;
  char *line = NULL;
  size_t cap = 0, n_cases = 0, mismatches = 0;
  while (getline(&line, &cap, fp) > 0) {
    json_t *row = json_loads(line, 0, &jerr);
    const char *input = json_string_value(json_object_get(row, "input"));
    const char *expected = json_string_value(json_object_get(row, "expected"));
    json_t *value = input ? json_loads(input, JSON_DECODE_ANY, &jerr) : NULL;
    char *got = value ? md_chat_tojson(value, NULL) : NULL;
    n_cases++;
    if (!got || !expected || strcmp(got, expected)) {
      if (++mismatches <= 10) {
        fprintf(stderr, "tojson(%s) = %s, expected %s\n", input ? input : "?", got ? got : "(null)",
                expected ? expected : "?");
      }
    }
    free(got);
    json_decref(value);
    json_decref(row);
  }
  free(line);
  fclose(fp);
  CHECK(n_cases >= 1800);
  CHECK_MSG(mismatches == 0, "%zu of %zu tojson cases differ from Python", mismatches, n_cases);
}

/* ---- the prompt text against transformers ---------------------------------- */

static md_trace_episode episodes[16];
static md_chat_prompt prompts[16];
static size_t n_episodes;

static void load_and_render(void) {
  md_trace_reader *reader;
  md_error err;
  CHECK(md_trace_open(source_path("tests/trace/data/render-episodes.jsonl"), NULL, &reader, &err) == MD_OK);
  bool have = true;
  while (n_episodes < 16) {
    if (md_trace_next(reader, &episodes[n_episodes], &have, &err) != MD_OK || !have) break;
    md_status status = md_chat_render(&episodes[n_episodes], &prompts[n_episodes], &err);
    CHECK_MSG(status == MD_OK, "%s", err.message);
    n_episodes++;
  }
  md_trace_close(reader);
  CHECK(n_episodes == 10);
}

static const md_chat_prompt *prompt_of(const char *id) {
  for (size_t i = 0; i < n_episodes; i++) {
    if (!strcmp(episodes[i].id, id)) return &prompts[i];
  }
  return NULL;
}

static void check_span_invariants(const md_chat_prompt *p, const char *id) {
  size_t at = 0;
  for (size_t i = 0; i < p->n_spans; i++) {
    CHECK_MSG(p->spans[i].start == at && p->spans[i].end > at, "%s: span %zu", id, i);
    CHECK_MSG(md_trace_region_valid(p->spans[i].region), "%s: span %zu region", id, i);
    at = p->spans[i].end;
  }
  CHECK_MSG(at == p->length && strlen(p->text) == p->length, "%s: spans cover %zu of %zu bytes", id, at,
            p->length);
}

static void test_against_transformers(void) {
  FILE *fp = fopen(source_path("tests/trace/data/render-expected.jsonl"), "r");
  CHECK(fp != NULL);
  if (!fp) return;
  char *line = NULL;
  size_t cap = 0, compared = 0;
  while (getline(&line, &cap, fp) > 0) {
    json_t *row = json_loads(line, 0, NULL);
    const char *id = json_string_value(json_object_get(row, "id"));
    const char *expected = json_string_value(json_object_get(row, "prompt"));
    const md_chat_prompt *p = id ? prompt_of(id) : NULL;
    CHECK_MSG(p && expected, "no rendering for %s", id ? id : "?");
    if (p && expected) {
      CHECK_MSG(!strcmp(p->text, expected), "%s:\n--- got:\n%s\n--- expected:\n%s", id, p->text, expected);
      check_span_invariants(p, id);
      compared++;
    }
    json_decref(row);
  }
  free(line);
  fclose(fp);
  CHECK(compared == n_episodes);
}

/* ---- spans, hand-derived --------------------------------------------------- */

typedef struct piece {
  const char *text;
  const char *region;
  char kind; /* 'T' template, 'C' trace content */
  size_t source;
} piece;

#define NONE MD_CHAT_NO_SOURCE

static void check_pieces(const char *id, const piece *pieces, size_t n) {
  const md_chat_prompt *p = prompt_of(id);
  CHECK_MSG(p != NULL, "%s not rendered", id);
  if (!p) return;
  CHECK_MSG(p->n_spans == n, "%s: %zu spans, expected %zu", id, p->n_spans, n);
  for (size_t i = 0; i < n && i < p->n_spans; i++) {
    const md_chat_span *s = &p->spans[i];
    size_t length = strlen(pieces[i].text);
    bool same_text = s->end - s->start == length && !memcmp(p->text + s->start, pieces[i].text, length);
    CHECK_MSG(same_text, "%s: span %zu is \"%.*s\", expected \"%s\"", id, i, (int)(s->end - s->start),
              p->text + s->start, pieces[i].text);
    CHECK_MSG(!strcmp(s->region, pieces[i].region), "%s: span %zu region %s, expected %s", id, i, s->region,
              pieces[i].region);
    CHECK_MSG(s->is_template == (pieces[i].kind == 'T'), "%s: span %zu kind", id, i);
    CHECK_MSG(s->source == pieces[i].source, "%s: span %zu source %zu, expected %zu", id, i, s->source,
              pieces[i].source);
  }
}

static void test_spans_plain(void) {
  static const piece pieces[] = {
      {"<|im_start|>system\n", "system", 'T', 0},
      {"You are a careful travel agent. Never book red-eye flights.", "system", 'C', 0},
      {"<|im_end|>\n", "system", 'T', 0},
      {"<|im_start|>user\n", "user", 'T', 1},
      {"Find me a flight from SFO to Lisbon on 12 May.", "user", 'C', 1},
      {"<|im_end|>\n", "user", 'T', 1},
      {"<|im_start|>assistant\n", "plan", 'T', 2}, /* the first segment's region */
      {"1. Search flights.\n2. Pick a morning one.\n", "plan", 'C', 2},
      {"The user wants Lisbon; no red-eyes.", "scratchpad", 'C', 2},
      {"<|im_end|>\n", "scratchpad", 'T', 2}, /* the last segment's region */
      {"<|im_start|>user\n", "user", 'T', 3},
      {"Thanks!", "user", 'C', 3},
      {"<|im_end|>\n", "user", 'T', 3},
      {"<|im_start|>assistant\n", "scratchpad", 'T', NONE}, /* the continuation's region */
  };
  check_pieces("plain", pieces, sizeof pieces / sizeof pieces[0]);
}

static void test_spans_tool_calls(void) {
  static const piece pieces[] = {
      {"<|im_start|>system\n", "system", 'T', 0},
      {"You book trains.", "system", 'C', 0},
      {"<|im_end|>\n", "system", 'T', 0},
      {"<|im_start|>user\n", "user", 'T', 1},
      {"Book Paris to Lyon.\n", "user", 'C', 1},
      {"Doc 1: TGV fares start at 29 EUR.\nDoc 2: Ouigo is cheaper.", "retrieval", 'C', 1},
      {"<|im_end|>\n", "retrieval", 'T', 1},
      {"<|im_start|>assistant\n", "plan", 'T', 2},
      {"Search, then book.", "plan", 'C', 2},
      {"\n<tool_call>\n{\"name\": \"", "tool_in", 'T', 2},
      {"search_trains", "tool_in", 'C', 2},
      {"\", \"arguments\": ", "tool_in", 'T', 2},
      {"{\"from\": \"Paris Gare de Lyon\", \"to\": \"Lyon Part-Dieu\", \"date\": \"2025-05-12\", "
       "\"max_price\": 45.5, \"passengers\": 2, \"flexible\": true, \"classes\": [\"2nd\", \"1st\"], "
       "\"filters\": {\"direct\": true, \"note\": \"\xC3\xA9t\xC3\xA9 \\\"quiet\\\" car\\tplease\\u0001\", "
       "\"via\": null}, \"scores\": [0.1, 1e+16, 1e-05, 0.0001, 123456789.0, -0.0, 2.5e-300, "
       "1.7976931348623157e+308, 100.0]}",
       "tool_in", 'C', 2},
      {"}\n</tool_call>\n<tool_call>\n{\"name\": \"", "tool_in", 'T', 2}, /* two calls' markup, merged */
      {"get_weather", "tool_in", 'C', 2},
      {"\", \"arguments\": ", "tool_in", 'T', 2},
      {"{}", "tool_in", 'C', 2},
      {"}\n</tool_call><|im_end|>\n", "tool_in", 'T', 2},
      {"<|im_start|>user\n<tool_response>\n", "tool_out", 'T', 3},
      {"{\"trains\": [{\"id\": \"TGV-6601\", \"price\": 35}]}", "tool_out", 'C', 3},
      {"\n</tool_response>", "tool_out", 'T', 3},
      {"\n<tool_response>\n", "tool_out", 'T', 4},
      {"Sunny, 24 C.", "tool_out", 'C', 4},
      {" Source: meteo.fr", "retrieval", 'C', 4},
      {"\n</tool_response><|im_end|>\n", "retrieval", 'T', 4},
      /* no content: no newline after the role; the call's region opens the turn */
      {"<|im_start|>assistant\n<tool_call>\n{\"name\": \"", "tool_in", 'T', 5},
      {"book_train", "tool_in", 'C', 5},
      {"\", \"arguments\": ", "tool_in", 'T', 5},
      {"{\"train\": \"TGV-6601\", \"seats\": 2, \"price\": 35.0}", "tool_in", 'C', 5},
      {"}\n</tool_call><|im_end|>\n", "tool_in", 'T', 5},
      {"<|im_start|>user\n<tool_response>\n", "tool_out", 'T', 6},
      {"Booked: code QX7P2L", "tool_out", 'C', 6},
      {"\n</tool_response><|im_end|>\n", "tool_out", 'T', 6},
      {"<|im_start|>assistant\n", "scratchpad", 'T', 7},
      {"Your train is booked (code QX7P2L).", "scratchpad", 'C', 7},
      {"<|im_end|>\n", "scratchpad", 'T', 7},
      {"<|im_start|>assistant\n", "scratchpad", 'T', NONE},
  };
  check_pieces("tool-calls", pieces, sizeof pieces / sizeof pieces[0]);
}

static void test_spans_tools(void) {
  static const piece pieces[] = {
      {"<|im_start|>system\n", "system", 'T', 0},
      {"You are a support agent.", "system", 'C', 0},
      {" Always check the order first.", "plan", 'C', 0},
      {"\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
       "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n",
       "system", 'T', NONE},
      {"{\"type\": \"function\", \"function\": {\"name\": \"lookup_order\", \"description\": \"Find an order by "
       "id.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"order_id\": {\"type\": \"string\"}}, "
       "\"required\": [\"order_id\"]}}}",
       "system", 'C', NONE},
      {"\n", "system", 'T', NONE},
      {"{\"type\": \"function\", \"function\": {\"name\": \"refund\", \"description\": \"Refund <= 100 EUR & log "
       "it.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"amount\": {\"type\": \"number\", "
       "\"maximum\": 100.0}}}}}",
       "system", 'C', NONE},
      {"\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
       "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
       "<args-json-object>}\n</tool_call><|im_end|>\n",
       "system", 'T', NONE},
      {"<|im_start|>user\n", "user", 'T', 1},
      {"Where is order 8812?", "user", 'C', 1},
      {"<|im_end|>\n", "user", 'T', 1},
      {"<|im_start|>assistant\n<tool_call>\n{\"name\": \"", "tool_in", 'T', 2},
      {"lookup_order", "tool_in", 'C', 2},
      {"\", \"arguments\": ", "tool_in", 'T', 2},
      {"{\"order_id\": \"8812\"}", "tool_in", 'C', 2},
      {"}\n</tool_call><|im_end|>\n", "tool_in", 'T', 2},
      {"<|im_start|>user\n<tool_response>\n", "tool_out", 'T', 3},
      {"shipped", "tool_out", 'C', 3},
      {"\n</tool_response><|im_end|>\n", "tool_out", 'T', 3},
      {"<|im_start|>assistant\n", "scratchpad", 'T', NONE},
  };
  check_pieces("with-tools", pieces, sizeof pieces / sizeof pieces[0]);
}

static void test_spans_odd_turns(void) {
  static const piece pieces[] = {
      {"<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n",
       "system", 'T', NONE},
      {"<|im_start|>user\n", "user", 'T', 0},
      {"First.", "user", 'C', 0},
      {"<|im_end|>\n", "user", 'T', 0},
      {"<|im_start|>system\n", "plan", 'T', 1}, /* a later system message, region overridden */
      {"A late system note.", "plan", 'C', 1},
      {"<|im_end|>\n", "plan", 'T', 1},
      {"<|im_start|>assistant\n<|im_end|>\n", "scratchpad", 'T', 2}, /* empty: the message's region */
      {"<|im_start|>assistant\n", "scratchpad", 'T', 3},             /* empty segments do not count */
      {"thinking", "scratchpad", 'C', 3},
      {"<|im_end|>\n", "scratchpad", 'T', 3},
      {"<|im_start|>user\n<|im_end|>\n", "retrieval", 'T', 4},
      {"<|im_start|>user\n", "user", 'T', 5},
      {"Last: \xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x81\xF0\x9F\x99\x82 e\xCC\x81",
       "user", 'C', 5},
      {"<|im_end|>\n", "user", 'T', 5},
      {"<|im_start|>assistant\n", "plan", 'T', NONE},
  };
  check_pieces("odd-turns", pieces, sizeof pieces / sizeof pieces[0]);
}

static void test_spans_tool_first_and_raw(void) {
  static const piece tool_first[] = {
      {"<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n",
       "system", 'T', NONE},
      {"<|im_start|>user\n<tool_response>\n", "tool_out", 'T', 0},
      {"orphan result", "tool_out", 'C', 0},
      {"\n</tool_response>", "tool_out", 'T', 0},
      {"\n<tool_response>\n", "tool_out", 'T', 1},
      {"second", "tool_out", 'C', 1},
      {"\n</tool_response><|im_end|>\n", "tool_out", 'T', 1},
      {"<|im_start|>user\n", "user", 'T', 2},
      {"What now?", "user", 'C', 2},
      {"<|im_end|>\n", "user", 'T', 2},
      {"<|im_start|>assistant\n", "scratchpad", 'T', NONE},
  };
  check_pieces("tool-first", tool_first, sizeof tool_first / sizeof tool_first[0]);
  static const piece raw[] = {
      {"<|im_start|>system\nBe brief.<|im_end|>\n", "system", 'C', 0},
      {"<|im_start|>user\nHi<|im_end|>\n", "user", 'C', 1},
      {"<|im_start|>assistant\n", "scratchpad", 'C', 3}, /* the empty span 2 leaves no span */
  };
  check_pieces("raw", raw, sizeof raw / sizeof raw[0]);
  const md_chat_prompt *p = prompt_of("raw");
  CHECK(p && p->continuation.kind == MD_CONTINUATION_TEXT && !strcmp(p->continuation.text, "Hello."));
  p = prompt_of("no-system");
  CHECK(p && p->continuation.kind == MD_CONTINUATION_GENERATE && p->continuation.generate == 16);
  CHECK(p && !strcmp(p->continuation.region, "scratchpad"));
}

/* The example of memdecay-traces(5), with the regions its EXAMPLES section lists. */
static void test_spans_man_example(void) {
  static const piece pieces[] = {
      {"<|im_start|>system\n", "system", 'T', 0},
      {"You book trains.", "system", 'C', 0},
      {"<|im_end|>\n", "system", 'T', 0},
      {"<|im_start|>user\n", "user", 'T', 1},
      {"Paris to Lyon, please.\n", "user", 'C', 1},
      {"Doc 1: TGV fares start at 29 EUR.", "retrieval", 'C', 1},
      {"<|im_end|>\n", "retrieval", 'T', 1},
      {"<|im_start|>assistant\n", "plan", 'T', 2},
      {"Search, then book.", "plan", 'C', 2},
      {"\n<tool_call>\n{\"name\": \"", "tool_in", 'T', 2},
      {"search_trains", "tool_in", 'C', 2},
      {"\", \"arguments\": ", "tool_in", 'T', 2},
      {"{\"from\": \"Paris\", \"max_price\": 45.0}", "tool_in", 'C', 2},
      {"}\n</tool_call><|im_end|>\n", "tool_in", 'T', 2},
      {"<|im_start|>user\n<tool_response>\n", "tool_out", 'T', 3},
      {"{\"train\": \"TGV-6601\"}", "tool_out", 'C', 3},
      {"\n</tool_response><|im_end|>\n", "tool_out", 'T', 3},
      {"<|im_start|>assistant\n", "scratchpad", 'T', NONE},
  };
  check_pieces("ep-0007", pieces, sizeof pieces / sizeof pieces[0]);
}

/* ---- tokens to regions ------------------------------------------------------ */

static void test_token_spans(void) {
  /* spans [0,5) A, [5,9) B, [9,12) C */
  const md_chat_span spans[] = {{0, 5, "system", true, 0}, {5, 9, "user", false, 0}, {9, 12, "plan", false, 1}};
  /* token 1 covers bytes 3..6, straddling A|B: its first byte is in A.
   * tokens 3 and 4 start in the same byte (a UTF-8 character split in two). */
  const size_t starts[] = {0, 3, 7, 9, 10, 10, 11};
  const size_t want[] = {0, 0, 1, 2, 2, 2, 2};
  size_t got[7];
  md_error err;
  CHECK(md_chat_token_spans(spans, 3, starts, 7, got, &err) == MD_OK);
  for (int i = 0; i < 7; i++) CHECK_MSG(got[i] == want[i], "token %d: span %zu, expected %zu", i, got[i], want[i]);
  const size_t boundary[] = {4, 5, 8, 9};
  const size_t boundary_want[] = {0, 1, 1, 2};
  CHECK(md_chat_token_spans(spans, 3, boundary, 4, got, &err) == MD_OK);
  for (int i = 0; i < 4; i++) CHECK(got[i] == boundary_want[i]);

  const size_t past_end[] = {0, 12};
  CHECK(md_chat_token_spans(spans, 3, past_end, 2, got, &err) == MD_E_INVALID);
  CHECK_MSG(strstr(err.message, "token 1 starts at byte 12, past the end of the 12-byte prompt"), "%s", err.message);
  const size_t backwards[] = {0, 6, 5};
  CHECK(md_chat_token_spans(spans, 3, backwards, 3, got, &err) == MD_E_INVALID);
  CHECK_MSG(strstr(err.message, "token 2 starts at byte 5, before token 1 (byte 6)"), "%s", err.message);
  CHECK(md_chat_token_spans(spans, 3, starts, 0, got, &err) == MD_OK);

  /* on a rendered prompt: the token starting at "Thanks!" is user content,
   * the one at the final "<|im_start|>" is the generation prompt */
  const md_chat_prompt *p = prompt_of("plain");
  if (!p) return;
  const char *thanks = strstr(p->text, "Thanks!");
  size_t rendered[] = {0, (size_t)(thanks - p->text), p->length - strlen("<|im_start|>assistant\n")};
  CHECK(md_chat_token_spans(p->spans, p->n_spans, rendered, 3, got, &err) == MD_OK);
  CHECK(!strcmp(p->spans[got[0]].region, "system") && p->spans[got[0]].is_template);
  CHECK(!strcmp(p->spans[got[1]].region, "user") && !p->spans[got[1]].is_template);
  CHECK(got[2] == p->n_spans - 1 && p->spans[got[2]].source == MD_CHAT_NO_SOURCE);
}

static void test_pages(void) {
  CHECK(MD_POLICY_PAGE_SIZE_DEFAULT == 16);
  CHECK(md_chat_page(0, 16) == 0 && md_chat_page(15, 16) == 0 && md_chat_page(16, 16) == 1);
  CHECK(md_chat_page(33, 16) == 2 && md_chat_page(33, 8) == 4);
}

int main(void) {
  test_tojson();
  load_and_render();
  test_against_transformers();
  test_spans_plain();
  test_spans_tool_calls();
  test_spans_tools();
  test_spans_odd_turns();
  test_spans_tool_first_and_raw();
  test_spans_man_example();
  test_token_spans();
  test_pages();
  for (size_t i = 0; i < n_episodes; i++) {
    md_chat_prompt_free(&prompts[i]);
    md_trace_episode_free(&episodes[i]);
  }
  return md_test_finish("test_chat_template");
}
