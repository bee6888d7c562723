/* Agent traces (io/formats/trace.h), then the chat template (collector/tokenizer/chat_template.h),
 * the trace writer and the probes planted for eval (collector/eval/probe_plant.h) on every valid
 * episode.
 *
 * Invariants: the strict reader stops at the first bad episode with
 * MD_E_FORMAT or MD_E_INVALID (or MD_E_IO) naming the file; the skip-invalid reader returns
 * the valid episodes, each with an id of the documented form, valid region
 * names, a continuation of a known kind, and the line it came from; its
 * count matches md_trace_scan's; each episode renders into a prompt whose
 * spans cover the text without gaps, none empty, and whose length is the
 * text's; the writer's line reads back (md_trace_parse_line) into an
 * episode that the writer writes as the same bytes; planting probes
 * succeeds on every valid episode (probe_plant.c checks its own result: each
 * answer once, in its region, the planted line read back), and the episode
 * read back carries one probe per planted region. */
#include "collector/eval/probe_plant.h"
#include "collector/tokenizer/chat_template.h"
#include "fuzz_util.h"
#include "io/formats/trace.h"

typedef struct skip_count {
  size_t n;
  const char *path;
} skip_count;

static void on_skip(void *context, const md_error *reason) {
  skip_count *count = context;
  count->n++;
  FUZZ_CHECK(reason->message[0] != '\0');
  FUZZ_CHECK_MSG(strstr(reason->message, count->path) != NULL, "%s", reason->message);
}

static bool id_valid(const char *id) {
  size_t len = strlen(id);
  if (len == 0 || len > MD_TRACE_ID_MAX) return false;
  for (size_t i = 0; i < len; i++) {
    char c = id[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-'))) return false;
  }
  return true;
}

static void check_region(const char *region) {
  FUZZ_CHECK(region && md_trace_region_valid(region));
  FUZZ_CHECK(strlen(region) <= MD_TRACE_REGION_MAX);
}

static void check_episode(const md_trace_episode *e, const char *path) {
  FUZZ_CHECK(e->id && id_valid(e->id));
  FUZZ_CHECK(e->path && !strcmp(e->path, path));
  FUZZ_CHECK(e->line >= 1);
  FUZZ_CHECK(e->root != NULL);
  if (e->raw) {
    FUZZ_CHECK(e->n_messages == 0);
    for (size_t i = 0; i < e->n_spans; i++) {
      check_region(e->spans[i].region);
      FUZZ_CHECK(strlen(e->spans[i].text) == e->spans[i].length);
    }
  } else {
    for (size_t i = 0; i < e->n_messages; i++) {
      const md_trace_message *m = &e->messages[i];
      check_region(m->region);
      FUZZ_CHECK(m->role <= MD_ROLE_TOOL);
      for (size_t s = 0; s < m->n_segments; s++) {
        check_region(m->segments[s].region);
        FUZZ_CHECK(strlen(m->segments[s].text) == m->segments[s].length);
      }
      FUZZ_CHECK(m->n_tool_calls == 0 || m->role == MD_ROLE_ASSISTANT);
      for (size_t t = 0; t < m->n_tool_calls; t++) {
        check_region(m->tool_calls[t].region);
        FUZZ_CHECK(m->tool_calls[t].name && m->tool_calls[t].name[0]);
        FUZZ_CHECK(strlen(m->tool_calls[t].name) <= 64);
        FUZZ_CHECK(json_is_object(m->tool_calls[t].arguments));
      }
    }
  }
  const md_trace_continuation *c = &e->continuation;
  check_region(c->region);
  FUZZ_CHECK(c->kind == MD_CONTINUATION_NONE || c->kind == MD_CONTINUATION_TEXT ||
             c->kind == MD_CONTINUATION_GENERATE);
  if (c->kind == MD_CONTINUATION_TEXT) FUZZ_CHECK(c->text && c->length > 0);
  if (c->kind == MD_CONTINUATION_GENERATE)
    FUZZ_CHECK(c->generate >= 1 && c->generate <= MD_TRACE_GENERATE_MAX);
  for (size_t i = 0; i < e->n_probes; i++) {
    check_region(e->probes[i].region);
    FUZZ_CHECK(e->probes[i].question && e->probes[i].answer);
  }
}

static void check_render(const md_trace_episode *e) {
  md_chat_prompt prompt;
  md_error err = {0};
  md_status status = md_chat_render(e, &prompt, &err);
  FUZZ_CHECK_MSG(status == MD_OK || status == MD_E_NOMEM,
                 "a valid episode does not render: %s", err.message);
  if (status != MD_OK) return;
  FUZZ_CHECK(prompt.text && strlen(prompt.text) == prompt.length);
  size_t at = 0;
  for (size_t i = 0; i < prompt.n_spans; i++) {
    const md_chat_span *span = &prompt.spans[i];
    FUZZ_CHECK_MSG(span->start == at, "span %zu starts at %zu, not %zu", i, span->start, at);
    FUZZ_CHECK(span->end > span->start);
    FUZZ_CHECK(span->region != NULL);
    at = span->end;
  }
  FUZZ_CHECK(at == prompt.length);
  FUZZ_CHECK(prompt.continuation.region != NULL);
  /* Token alignment over one token per span start. */
  if (prompt.n_spans > 0) {
    size_t *starts = calloc(prompt.n_spans, sizeof *starts);
    size_t *which = calloc(prompt.n_spans, sizeof *which);
    FUZZ_CHECK(starts && which);
    for (size_t i = 0; i < prompt.n_spans; i++) starts[i] = prompt.spans[i].start;
    FUZZ_CHECK(md_chat_token_spans(prompt.spans, prompt.n_spans, starts, prompt.n_spans, which,
                                   &err) == MD_OK);
    for (size_t i = 0; i < prompt.n_spans; i++) FUZZ_CHECK(which[i] == i);
    free(starts);
    free(which);
  }
  md_chat_prompt_free(&prompt);
}

/* The writer's line reads back into an episode it writes as the same bytes. */
static void check_dump(const md_trace_episode *e) {
  char *line = NULL, *again = NULL;
  md_error err = {0};
  md_status status = md_trace_episode_dumps(e, &line, &err);
  FUZZ_CHECK(status == MD_OK || status == MD_E_NOMEM);
  if (status != MD_OK) return;
  size_t length = strlen(line);
  FUZZ_CHECK(length >= 2 && line[length - 1] == '\n' && !memchr(line, '\n', length - 1));
  md_trace_episode back;
  status = md_trace_parse_line(e->path, e->line, line, length - 1, &back, &err);
  FUZZ_CHECK_MSG(status == MD_OK || status == MD_E_NOMEM, "the written line does not read back: %s",
                 err.message);
  if (status == MD_OK) {
    status = md_trace_episode_dumps(&back, &again, &err);
    FUZZ_CHECK(status == MD_OK || status == MD_E_NOMEM);
    FUZZ_CHECK(status != MD_OK || !strcmp(line, again));
    md_trace_episode_free(&back);
  }
  free(again);
  free(line);
}

/* Probes planted into every region, then into two named ones. */
static void check_plant(const md_trace_episode *e, uint64_t seed) {
  static const char *const some[] = {"user", "tool_in"};
  md_probe_plant_settings every = {.seed = seed, .replace = true};
  md_probe_plant_settings named = {.seed = seed, .regions = some, .n_regions = 2, .replace = true};
  const md_probe_plant_settings *settings[] = {&every, &named};
  for (size_t k = 0; k < 2; k++) {
    md_probe_planted planted;
    md_error err = {0};
    md_status status = md_probe_plant_episode(e, settings[k], &planted, &err);
    FUZZ_CHECK_MSG(status == MD_OK || status == MD_E_NOMEM, "planting failed: %s", err.message);
    if (status != MD_OK) continue;
    FUZZ_CHECK(planted.episode.n_probes == planted.n_planted);
    FUZZ_CHECK(planted.n_planted <= planted.n_sites);
    FUZZ_CHECK(k == 0 || planted.n_sites == 2);
    md_probe_planted_free(&planted);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_input_file(data, size, ".jsonl");
  /* Values out of range (continuation.generate) are MD_E_INVALID. */
  const unsigned failures = FUZZ_ST(MD_E_FORMAT) | FUZZ_ST(MD_E_INVALID) | FUZZ_ST(MD_E_IO);
  md_error err = {0};

  /* Strict: episodes until the first bad one. */
  md_trace_reader *reader = NULL;
  md_status status = md_trace_open(path, NULL, &reader, &err);
  if (status != MD_OK) {
    fuzz_check_failure(status, &err, failures, path);
    FUZZ_CHECK(reader == NULL);
    return 0;
  }
  size_t strict = 0;
  bool strict_failed = false;
  for (;;) {
    md_trace_episode episode;
    bool have = false;
    status = md_trace_next(reader, &episode, &have, &err);
    if (status != MD_OK) {
      fuzz_check_failure(status, &err, failures, path);
      strict_failed = true;
      break;
    }
    if (!have) break;
    strict++;
    md_trace_episode_free(&episode);
  }
  md_trace_close(reader);

  /* Skip-invalid: every valid episode, rendered. */
  skip_count skipped = {0, path};
  md_trace_options options = {.skip_invalid = true, .on_skip = on_skip,
                              .on_skip_context = &skipped};
  FUZZ_CHECK(md_trace_open(path, &options, &reader, &err) == MD_OK);
  size_t valid = 0;
  size_t last_line = 0;
  for (;;) {
    md_trace_episode episode;
    bool have = false;
    status = md_trace_next(reader, &episode, &have, &err);
    if (status != MD_OK) {
      fuzz_check_failure(status, &err, failures, path);
      break;
    }
    if (!have) break;
    valid++;
    check_episode(&episode, path);
    FUZZ_CHECK(episode.line > last_line);
    FUZZ_CHECK(episode.line <= md_trace_reader_line(reader));
    last_line = episode.line;
    check_render(&episode);
    check_dump(&episode);
    check_plant(&episode, size);
    md_trace_episode_free(&episode);
  }
  md_trace_close(reader);
  FUZZ_CHECK(strict <= valid);
  if (!strict_failed) FUZZ_CHECK(strict == valid && skipped.n == 0);
  if (strict_failed) FUZZ_CHECK(skipped.n > 0 || status != MD_OK);

  md_trace_summary summary;
  skip_count scan_skipped = {0, path};
  options.on_skip_context = &scan_skipped;
  status = md_trace_scan(path, &options, &summary, &err);
  if (status == MD_OK) {
    FUZZ_CHECK(summary.episodes == valid && summary.episodes > 0);
    FUZZ_CHECK(summary.skipped == skipped.n);
  } else {
    fuzz_check_failure(status, &err, failures, path);
    FUZZ_CHECK(valid == 0 || status == MD_E_IO);
  }
  return 0;
}
