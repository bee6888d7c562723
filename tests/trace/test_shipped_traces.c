/* The shipped workloads in data/traces: every episode is valid, uses all
 * seven regions, has a teacher-forced scratchpad continuation and one probe
 * per region whose answer lies in that region's text and in no other, nor
 * in the continuation or the question (matched as eval scores answers:
 * md_eval_answer_matches), so that a probe tests its region alone; and each
 * rendered prompt has the length and FNV-1a hash of the prompt HF
 * transformers renders with Qwen2.5's template (data/shipped-prompts.jsonl,
 * from make_fixtures.py). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/eval/eval.h"
#include "collector/tokenizer/chat_template.h"
#include "tests/test_util.h"

static const char *const regions[] = {"system", "plan", "user", "tool_in", "tool_out", "retrieval", "scratchpad"};
enum { n_regions = 7 };

static const char *source_path(const char *relative) {
  static char path[1024];
  const char *root = getenv("MD_SOURCE_ROOT");
  snprintf(path, sizeof path, "%s/%s", root ? root : ".", relative);
  return path;
}

/* FNV-1a, 64 bits: offset basis 0xcbf29ce484222325, prime 0x100000001b3. */
static uint64_t fnv1a64(const char *data, size_t length) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < length; i++) hash = (hash ^ (unsigned char)data[i]) * 0x100000001b3ULL;
  return hash;
}

static json_t *expected_prompts;

static void load_expected(void) {
  expected_prompts = json_object();
  FILE *fp = fopen(source_path("tests/trace/data/shipped-prompts.jsonl"), "r");
  CHECK(fp != NULL);
  if (!fp) return;
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, fp) > 0) {
    json_t *row = json_loads(line, 0, NULL);
    char key[256];
    snprintf(key, sizeof key, "%s/%s", json_string_value(json_object_get(row, "file")),
             json_string_value(json_object_get(row, "id")));
    json_object_set(expected_prompts, key, row);
    json_decref(row);
  }
  free(line);
  fclose(fp);
}

/* The text of every span of `region`, concatenated. */
static char *region_text(const md_chat_prompt *p, const char *region) {
  char *text = calloc(1, p->length + 1);
  size_t at = 0;
  for (size_t i = 0; i < p->n_spans; i++) {
    if (strcmp(p->spans[i].region, region)) continue;
    memcpy(text + at, p->text + p->spans[i].start, p->spans[i].end - p->spans[i].start);
    at += p->spans[i].end - p->spans[i].start;
  }
  return text;
}

static void check_episode(const char *file, const md_trace_episode *ep, const md_chat_prompt *p) {
  CHECK_MSG(!ep->raw && ep->n_messages >= 8, "%s: form", ep->id);
  CHECK_MSG(ep->continuation.kind == MD_CONTINUATION_TEXT && !strcmp(ep->continuation.region, "scratchpad"),
            "%s: continuation", ep->id);
  size_t calls = 0;
  for (size_t i = 0; i < ep->n_messages; i++) calls += ep->messages[i].n_tool_calls;
  CHECK_MSG(calls >= 3, "%s: %zu tool calls", ep->id, calls);
  CHECK_MSG(ep->n_probes == n_regions, "%s: %zu probes", ep->id, ep->n_probes);
  char *texts[n_regions];
  for (int r = 0; r < n_regions; r++) {
    texts[r] = region_text(p, regions[r]);
    CHECK_MSG(texts[r][0] != '\0', "%s: no %s text", ep->id, regions[r]);
  }
  for (int r = 0; r < n_regions; r++) {
    int probes = 0;
    for (size_t k = 0; k < ep->n_probes; k++) {
      const md_trace_probe *probe = &ep->probes[k];
      if (strcmp(probe->region, regions[r])) continue;
      probes++;
      for (int other = 0; other < n_regions; other++)
        CHECK_MSG(md_eval_answer_matches(probe->answer, texts[other], strlen(texts[other])) == (other == r),
                  "%s: %s answer \"%s\" %s region %s", ep->id, regions[r], probe->answer,
                  other == r ? "not in its" : "also in", regions[other]);
      CHECK_MSG(!md_eval_answer_matches(probe->answer, ep->continuation.text, ep->continuation.length),
                "%s: %s answer \"%s\" in the continuation", ep->id, regions[r], probe->answer);
      CHECK_MSG(!md_eval_answer_matches(probe->answer, probe->question, strlen(probe->question)),
                "%s: %s answer \"%s\" in its question", ep->id, regions[r], probe->answer);
    }
    CHECK_MSG(probes == 1, "%s: %d probes in %s", ep->id, probes, regions[r]);
  }
  for (int r = 0; r < n_regions; r++) free(texts[r]);
  char key[256];
  snprintf(key, sizeof key, "%s/%s", file, ep->id);
  json_t *row = json_object_get(expected_prompts, key);
  CHECK_MSG(row != NULL, "%s: no reference rendering", key);
  if (!row) return;
  char hash[17];
  snprintf(hash, sizeof hash, "%016llx", (unsigned long long)fnv1a64(p->text, p->length));
  CHECK_MSG((json_int_t)p->length == json_integer_value(json_object_get(row, "length")), "%s: %zu bytes", key,
            p->length);
  CHECK_MSG(!strcmp(hash, json_string_value(json_object_get(row, "fnv1a64"))), "%s: hash %s", key, hash);
}

static void check_file(const char *file) {
  md_trace_summary summary;
  md_error err;
  CHECK_MSG(md_trace_scan(source_path(file), NULL, &summary, &err) == MD_OK, "%s", err.message);
  CHECK(summary.episodes >= 24 && summary.skipped == 0);
  md_trace_reader *reader;
  if (md_trace_open(source_path(file), NULL, &reader, &err) != MD_OK) return;
  size_t n = 0;
  for (;;) {
    md_trace_episode ep;
    bool have;
    if (md_trace_next(reader, &ep, &have, &err) != MD_OK || !have) break;
    md_chat_prompt prompt;
    CHECK(md_chat_render(&ep, &prompt, &err) == MD_OK);
    check_episode(file, &ep, &prompt);
    md_chat_prompt_free(&prompt);
    md_trace_episode_free(&ep);
    n++;
  }
  md_trace_close(reader);
  CHECK(n == summary.episodes);
}

int main(void) {
  load_expected();
  CHECK(json_object_size(expected_prompts) >= 48);
  check_file("data/traces/agent-450.jsonl");
  check_file("data/traces/agent-1700.jsonl");
  json_decref(expected_prompts);
  return md_test_finish("test_shipped_traces");
}
