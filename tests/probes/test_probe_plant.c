/* Probes planted into traces (collector/eval/probe_plant.h), checked from the
 * outside: on the shipped agent-450 episodes with their probes stripped and
 * on hand-written episodes with multi-byte text (data/utf8.jsonl: both
 * forms, string and object tool arguments, an argument key already taken,
 * a region of its own, a raw span with no usable boundary), every planted
 * answer occurs exactly once in the rendered episode, inside a span of its
 * region, as text and as eval's normalised words; everything else of the
 * episode is the input's, field by field, and a planted text is the input's
 * with the inserted bytes at a sentence boundary; the same seed gives the
 * same bytes and another seed others; a value already in the episode is
 * drawn again; and the stage refuses an output that is its input, a missing
 * input, bad JSON and probes without `replace`, writing nothing. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utf8proc.h>

#include "collector/eval/eval.h"
#include "collector/eval/probe_plant.h"
#include "collector/tokenizer/chat_template.h"
#include "io/formats/trace.h"
#include "tests/test_util.h"

static char tmp_dir[] = "/tmp/md-probes-XXXXXX";

static const char *source_path(const char *relative) {
  static char path[1024];
  const char *root = getenv("MD_SOURCE_ROOT");
  snprintf(path, sizeof path, "%s/%s", root ? root : ".", relative);
  return path;
}

static char *temp_path(const char *name) {
  static char paths[32][512];
  static int next;
  char *path = paths[next++ % 32];
  snprintf(path, sizeof paths[0], "%s/%s", tmp_dir, name);
  return path;
}

static char *read_file(const char *path, size_t *length) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  char *data = NULL;
  size_t size = 0;
  FILE *mem = open_memstream(&data, &size);
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0) fwrite(chunk, 1, n, mem);
  fclose(fp);
  fclose(mem);
  if (length) *length = size;
  return data;
}

static void write_text(const char *path, const char *text) {
  FILE *fp = fopen(path, "wb");
  fputs(text, fp);
  fclose(fp);
}

enum { MAX_EPISODES = 32 };

/* Every episode of a trace file (strict). */
static size_t read_episodes(const char *path, md_trace_episode *episodes) {
  md_trace_reader *reader;
  md_error err;
  size_t n = 0;
  md_status s = md_trace_open(path, NULL, &reader, &err);
  CHECK_MSG(s == MD_OK, "%s", err.message);
  if (s != MD_OK) return 0;
  bool have = true;
  while (have && n < MAX_EPISODES) {
    s = md_trace_next(reader, &episodes[n], &have, &err);
    CHECK_MSG(s == MD_OK, "%s", err.message);
    if (s != MD_OK) break;
    n += have;
  }
  md_trace_close(reader);
  return n;
}

static void free_episodes(md_trace_episode *episodes, size_t n) {
  for (size_t i = 0; i < n; i++) md_trace_episode_free(&episodes[i]);
}

/* The trace file at `in` with every episode's probes removed, at `out`. */
static void write_stripped(const char *in, const char *out) {
  md_trace_episode episodes[MAX_EPISODES];
  size_t n = read_episodes(in, episodes);
  FILE *fp = fopen(out, "wb");
  for (size_t i = 0; i < n; i++) {
    json_object_del(episodes[i].root, "probes");
    char *line;
    md_error err;
    CHECK(md_trace_episode_dumps(&episodes[i], &line, &err) == MD_OK);
    fputs(line, fp);
    free(line);
  }
  fclose(fp);
  free_episodes(episodes, n);
}

/* ---- what a planted episode must be ------------------------------------------------------ */

static size_t count_nocase(const char *text, const char *needle) {
  size_t n = strlen(needle), count = 0;
  for (const char *at = text; *at; at++) count += strncasecmp(at, needle, n) == 0;
  return count;
}

static size_t count_words(const char *normal_text, const char *answer) {
  char *normal = md_eval_normalise(answer, strlen(answer));
  size_t count = 0;
  for (const char *at = strstr(normal_text, normal); at; at = strstr(at + 1, normal)) count++;
  free(normal);
  return count;
}

static bool valid_utf8(const char *text, size_t length) {
  for (size_t i = 0; i < length;) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)text + i,
                                          (utf8proc_ssize_t)(length - i), &cp);
    if (k <= 0) return false;
    i += (size_t)k;
  }
  return true;
}

/* A sentence boundary as probe_plant.h defines it. */
static bool is_boundary(const char *text, size_t length, size_t at) {
  if (at == length) return true;
  if (at >= 1 && text[at - 1] == '\n') return true;
  if (at >= 2 && text[at - 1] == ' ' && strchr(".!?", text[at - 2])) return true;
  return at >= 3 && (!memcmp(text + at - 3, "。", 3) || !memcmp(text + at - 3, "！", 3) ||
                     !memcmp(text + at - 3, "？", 3));
}

/* Each planted answer: once in the rendered prompt and continuation, in any
 * case, and once as normalised words; the one occurrence inside a span of
 * the probe's region; the answers and the questions of one episode differ. */
static void check_answers(const md_probe_planted *p) {
  md_chat_prompt prompt;
  md_error err;
  md_status s = md_chat_render(&p->episode, &prompt, &err);
  CHECK_MSG(s == MD_OK, "%s", err.message);
  if (s != MD_OK) return;
  size_t size = prompt.length + 2 + (prompt.continuation.text ? prompt.continuation.length : 0);
  char *all = malloc(size);
  snprintf(all, size, "%s\n%s", prompt.text,
           prompt.continuation.kind == MD_CONTINUATION_TEXT ? prompt.continuation.text : "");
  char *normal = md_eval_normalise(all, strlen(all));
  for (size_t i = 0; i < p->n_sites; i++) {
    const md_probe_site *site = &p->sites[i];
    if (site->kind == MD_PROBE_SITE_NONE) continue;
    CHECK_MSG(count_nocase(all, site->answer) == 1, "%s: %s occurs %zu times", p->episode.id,
              site->answer, count_nocase(all, site->answer));
    CHECK_MSG(count_words(normal, site->answer) == 1, "%s: %s as words", p->episode.id, site->answer);
    const char *at = strstr(prompt.text, site->answer);
    const char *region = NULL;
    for (size_t k = 0; at && k < prompt.n_spans; k++)
      if ((size_t)(at - prompt.text) >= prompt.spans[k].start &&
          (size_t)(at - prompt.text) + strlen(site->answer) <= prompt.spans[k].end)
        region = prompt.spans[k].region;
    CHECK_MSG(region && !strcmp(region, site->region), "%s: %s found in region %s, planted in %s",
              p->episode.id, site->answer, region ? region : "(none)", site->region);
    for (size_t j = 0; j < i; j++)
      if (p->sites[j].kind != MD_PROBE_SITE_NONE) CHECK(strcmp(p->sites[j].answer, site->answer));
  }
  for (size_t i = 0; i < p->episode.n_probes; i++)
    for (size_t j = 0; j < i; j++)
      CHECK(strcmp(p->episode.probes[i].question, p->episode.probes[j].question));
  free(normal);
  free(all);
  md_chat_prompt_free(&prompt);
}

static const md_probe_site *site_at(const md_probe_planted *p, md_probe_site_kind kind,
                                    size_t message, size_t item) {
  for (size_t i = 0; i < p->n_sites; i++)
    if (p->sites[i].kind == kind && p->sites[i].item == item &&
        (kind == MD_PROBE_SITE_SPAN || p->sites[i].message == message))
      return &p->sites[i];
  return NULL;
}

/* A planted text: the input's, with the inserted bytes (holding the answer,
 * whole UTF-8) at a sentence boundary; an unplanted one: the input's. */
static void check_text(const char *id, const md_trace_segment *in, const md_trace_segment *out,
                       const md_probe_site *site, bool raw) {
  CHECK(!strcmp(in->region, out->region));
  if (!site) {
    CHECK_MSG(in->length == out->length && !memcmp(in->text, out->text, in->length),
              "%s: an unplanted text changed", id);
    return;
  }
  size_t at = site->offset, added = site->inserted_length;
  CHECK(out->length == in->length + added);
  if (out->length != in->length + added || at > in->length) return;
  CHECK_MSG(!memcmp(in->text, out->text, at) &&
                !memcmp(in->text + at, out->text + at + added, in->length - at),
            "%s: the planted text is not the input's with an insertion", id);
  CHECK_MSG(is_boundary(in->text, in->length, at), "%s: inserted at %zu, not a sentence boundary",
            id, at);
  CHECK(valid_utf8(out->text + at, added) && valid_utf8(in->text, at));
  char *inserted = strndup(out->text + at, added);
  CHECK_MSG(strstr(inserted, site->answer) != NULL, "%s: inserted \"%s\"", id, inserted);
  const md_probe_phrasing *phrasing = md_probe_phrasing_for(site->region);
  char *before = md_probe_phrasing_text(phrasing->sentence_before, site->region);
  CHECK_MSG(strstr(inserted, before) != NULL, "%s: inserted \"%s\"", id, inserted);
  free(before);
  free(inserted);
  if (raw) {
    /* never right after a special token: the sentence would be between turns */
    size_t k = at;
    while (k > 0 && (in->text[k - 1] == '\n' || in->text[k - 1] == '\r')) k--;
    CHECK(!(k >= 2 && in->text[k - 2] == '|' && in->text[k - 1] == '>'));
  }
}

static bool json_equal_or_absent(const json_t *a, const json_t *b) {
  return (!a && !b) || (a && b && json_equal((json_t *)a, (json_t *)b));
}

static void check_call(const char *id, const md_trace_tool_call *in, const md_trace_tool_call *out,
                       const md_probe_site *site) {
  CHECK(!strcmp(in->name, out->name) && !strcmp(in->region, out->region));
  CHECK(in->arguments_string == out->arguments_string);
  if (!site) {
    CHECK_MSG(json_equal((json_t *)in->arguments, (json_t *)out->arguments),
              "%s: unplanted tool arguments changed", id);
    return;
  }
  /* the input's arguments plus the key, added last, holding the answer */
  CHECK(site->argument_key && !json_object_get(in->arguments, site->argument_key));
  const char *prefix = md_probe_phrasing_for(site->region)->argument_key;
  CHECK(!strncmp(site->argument_key, prefix, strlen(prefix)));
  const json_t *value = json_object_get(out->arguments, site->argument_key);
  CHECK(json_is_string(value) && !strcmp(json_string_value(value), site->answer));
  const char *last = NULL, *key;
  const json_t *member;
  json_object_foreach((json_t *)out->arguments, key, member) last = key;
  CHECK(last && !strcmp(last, site->argument_key));
  json_t *copy = json_deep_copy(out->arguments);
  json_object_del(copy, site->argument_key);
  CHECK(json_equal(copy, (json_t *)in->arguments));
  json_decref(copy);
}

/* The planted episode, field by field, against its input. */
static void check_unchanged(const md_trace_episode *in, const md_probe_planted *p) {
  const md_trace_episode *out = &p->episode;
  CHECK(!strcmp(in->id, out->id) && in->raw == out->raw);
  CHECK(in->n_messages == out->n_messages && in->n_spans == out->n_spans);
  CHECK(in->continuation.kind == out->continuation.kind &&
        !strcmp(in->continuation.region, out->continuation.region));
  if (in->continuation.kind == MD_CONTINUATION_TEXT && out->continuation.kind == MD_CONTINUATION_TEXT)
    CHECK(!strcmp(in->continuation.text, out->continuation.text));
  CHECK(json_equal_or_absent(in->tools, out->tools));
  CHECK(json_equal_or_absent(json_object_get(in->root, "meta"), json_object_get(out->root, "meta")));
  /* the members in the input's order, "probes" added last when new */
  const char *key;
  json_t *value;
  size_t k = 0;
  const char *out_keys[16];
  json_object_foreach(out->root, key, value) if (k < 16) out_keys[k++] = key;
  size_t j = 0;
  json_object_foreach(in->root, key, value) {
    if (!strcmp(key, "probes") && !json_object_get(out->root, "probes")) continue;
    CHECK_MSG(j < k && !strcmp(out_keys[j], key), "%s: member %s out of order", in->id, key);
    j++;
  }
  for (size_t s = 0; s < in->n_spans && s < out->n_spans; s++)
    check_text(in->id, &in->spans[s], &out->spans[s], site_at(p, MD_PROBE_SITE_SPAN, 0, s), true);
  for (size_t m = 0; m < in->n_messages && m < out->n_messages; m++) {
    const md_trace_message *a = &in->messages[m], *b = &out->messages[m];
    CHECK(a->role == b->role && !strcmp(a->region, b->region));
    CHECK(a->n_segments == b->n_segments && a->n_tool_calls == b->n_tool_calls);
    for (size_t s = 0; s < a->n_segments && s < b->n_segments; s++)
      check_text(in->id, &a->segments[s], &b->segments[s],
                 site_at(p, MD_PROBE_SITE_SEGMENT, m, s), false);
    for (size_t c = 0; c < a->n_tool_calls && c < b->n_tool_calls; c++)
      check_call(in->id, &a->tool_calls[c], &b->tool_calls[c],
                 site_at(p, MD_PROBE_SITE_ARGUMENTS, m, c));
  }
  /* the probes: one per planted site, in order, with the region's question */
  CHECK(out->n_probes == p->n_planted);
  size_t probe = 0;
  for (size_t i = 0; i < p->n_sites && probe < out->n_probes; i++) {
    const md_probe_site *site = &p->sites[i];
    if (site->kind == MD_PROBE_SITE_NONE) continue;
    const md_trace_probe *q = &out->probes[probe++];
    char *question = md_probe_phrasing_text(md_probe_phrasing_for(site->region)->question, site->region);
    CHECK(!strcmp(q->region, site->region) && !strcmp(q->answer, site->answer));
    CHECK_MSG(!strcmp(q->question, question), "%s: question \"%s\"", in->id, q->question);
    free(question);
  }
}

static md_probe_plant_settings seeded(uint64_t seed) {
  return (md_probe_plant_settings){.seed = seed};
}

static void plant_and_check(const md_trace_episode *in, const md_probe_plant_settings *settings,
                            md_probe_planted *out) {
  md_error err;
  md_status s = md_probe_plant_episode(in, settings, out, &err);
  CHECK_MSG(s == MD_OK, "%s", err.message);
  if (s != MD_OK) return;
  check_unchanged(in, out);
  check_answers(out);
}

/* ---- the cases ----------------------------------------------------------------------------- */

static void test_shipped(const char *stripped) {
  md_trace_episode episodes[MAX_EPISODES];
  size_t n = read_episodes(stripped, episodes);
  CHECK(n == 24);
  for (size_t e = 0; e < n; e++) {
    CHECK(episodes[e].n_probes == 0);
    md_probe_planted a, b, other;
    md_probe_plant_settings seven = seeded(7), eight = seeded(8);
    plant_and_check(&episodes[e], &seven, &a);
    /* all seven regions; tool_in's fact in a call's arguments, the others in text */
    CHECK_MSG(a.n_sites == 7 && a.n_planted == 7, "%s: %zu of %zu", episodes[e].id, a.n_planted,
              a.n_sites);
    for (size_t i = 0; i < a.n_sites; i++)
      CHECK((a.sites[i].kind == MD_PROBE_SITE_ARGUMENTS) == !strcmp(a.sites[i].region, "tool_in"));
    plant_and_check(&episodes[e], &seven, &b);
    CHECK(a.line && b.line && !strcmp(a.line, b.line));
    plant_and_check(&episodes[e], &eight, &other);
    CHECK(a.line && other.line && strcmp(a.line, other.line));
    md_probe_planted_free(&a);
    md_probe_planted_free(&b);
    md_probe_planted_free(&other);
  }
  free_episodes(episodes, n);
}

static void test_utf8(void) {
  md_trace_episode episodes[MAX_EPISODES];
  size_t n = read_episodes(source_path("tests/probes/data/utf8.jsonl"), episodes);
  CHECK(n == 3);
  bool string_call_planted = false, taken_key_seen = false;
  for (uint64_t seed = 0; seed < 40; seed++) {
    md_probe_plant_settings settings = seeded(seed);
    for (size_t e = 0; e < n; e++) {
      md_probe_planted p;
      plant_and_check(&episodes[e], &settings, &p);
      const char *id = episodes[e].id;
      if (!strcmp(id, "utf8-messages")) {
        /* memo has only an empty text; scratchpad only the continuation */
        const char *want[] = {"system", "plan", "user", "tool_in", "tool_out", "retrieval", "notes"};
        CHECK(p.n_sites == 7 && p.n_planted == 7);
        for (size_t i = 0; i < p.n_sites && i < 7; i++) CHECK(!strcmp(p.sites[i].region, want[i]));
        const md_probe_site *tool = &p.sites[3];
        CHECK(tool->kind == MD_PROBE_SITE_ARGUMENTS && tool->message == 2);
        if (tool->kind == MD_PROBE_SITE_ARGUMENTS && tool->item == 0) {
          string_call_planted = true;
          CHECK(strstr(p.line, "\"arguments\": \"{\\\"von\\\":\\\"Zürich\\\"") != NULL);
          CHECK(!strcmp(tool->argument_key, "audit_ref"));
        }
        if (tool->kind == MD_PROBE_SITE_ARGUMENTS && tool->item == 1) {
          taken_key_seen = true;
          CHECK(!strcmp(tool->argument_key, "audit_ref_2"));
        }
      } else if (!strcmp(id, "utf8-raw")) {
        /* plan's only span is "<|im_end|>\n": no boundary inside a turn */
        CHECK(p.n_sites == 4 && p.n_planted == 3);
        for (size_t i = 0; i < p.n_sites; i++)
          CHECK((p.sites[i].kind == MD_PROBE_SITE_NONE) == !strcmp(p.sites[i].region, "plan"));
      } else {
        CHECK(p.n_sites == 2 && p.n_planted == 2);
      }
      md_probe_planted_free(&p);
    }
  }
  CHECK(string_call_planted && taken_key_seen);
  /* --regions: only those asked for, a missing one not planted */
  const char *asked[] = {"retrieval", "notes", "user"};
  md_probe_plant_settings some = {.seed = 1, .regions = asked, .n_regions = 3};
  md_probe_planted p;
  plant_and_check(&episodes[1], &some, &p);
  CHECK(p.n_sites == 3 && p.n_planted == 1);
  CHECK(p.n_sites == 3 && !strcmp(p.sites[0].region, "user") && p.sites[0].kind == MD_PROBE_SITE_SPAN);
  md_probe_planted_free(&p);
  free_episodes(episodes, n);
}

/* A value the episode already holds, in another case and with other
 * separators, is not drawn: the same seed then gives another value. */
static void test_value_taken(void) {
  md_trace_episode episodes[MAX_EPISODES];
  size_t n = read_episodes(source_path("tests/probes/data/utf8.jsonl"), episodes);
  md_probe_plant_settings settings = seeded(11);
  md_probe_planted first;
  plant_and_check(&episodes[2], &settings, &first);
  CHECK(first.n_planted == 2 && !strcmp(first.sites[1].region, "scratchpad"));
  char code[16];
  snprintf(code, sizeof code, "%s", first.sites[1].answer); /* "ABC-1234" */
  for (char *c = code; *c; c++) *c = *c == '-' ? ' ' : (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
  json_t *root = json_deep_copy(episodes[2].root);
  json_t *user = json_array_get(json_object_get(root, "messages"), 0);
  char text[128];
  snprintf(text, sizeof text, "Ünïcödé only 🙂 (ref %s)", code);
  json_object_set_new(user, "content", json_string(text));
  char *line = json_dumps(root, 0);
  json_decref(root);
  md_trace_episode changed;
  md_error err;
  CHECK(md_trace_parse_line("changed.jsonl", 1, line, strlen(line), &changed, &err) == MD_OK);
  md_probe_planted second;
  plant_and_check(&changed, &settings, &second);
  CHECK(second.n_planted == 2 && strcmp(second.sites[1].answer, first.sites[1].answer) != 0);
  /* the region before it drew as it did */
  CHECK(second.n_planted == 2 && !strcmp(second.sites[0].answer, first.sites[0].answer));
  md_probe_planted_free(&first);
  md_probe_planted_free(&second);
  md_trace_episode_free(&changed);
  free(line);
  free_episodes(episodes, n);
}

static void test_existing_probes(void) {
  md_trace_episode episodes[MAX_EPISODES];
  size_t n = read_episodes(source_path("data/traces/agent-450.jsonl"), episodes);
  CHECK(n == 24 && episodes[0].n_probes == 7);
  md_probe_plant_settings keep = seeded(0), replace = {.seed = 0, .replace = true};
  md_probe_planted p;
  md_error err;
  CHECK(md_probe_plant_episode(&episodes[0], &keep, &p, &err) == MD_E_INVALID);
  CHECK_MSG(strstr(err.message, "agent-450.jsonl:1: episode \"ep450-000-travel\": has 7 probes") != NULL,
            "%s", err.message);
  CHECK(err.line == 1 && !strcmp(err.record, "ep450-000-travel") && err.kind == MD_KIND_INPUT);
  CHECK(p.line == NULL && p.n_sites == 0);
  /* replaced: only the new probes, none of the old answers among them */
  plant_and_check(&episodes[0], &replace, &p);
  CHECK(p.episode.n_probes == 7);
  for (size_t i = 0; i < p.episode.n_probes; i++)
    for (size_t j = 0; j < episodes[0].n_probes; j++)
      CHECK(strcmp(p.episode.probes[i].answer, episodes[0].probes[j].answer));
  md_probe_planted_free(&p);
  free_episodes(episodes, n);
}

static bool exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

/* No ".name.XXXXXX" temporary left in the test directory. */
static bool no_temporaries(void) {
  char command[600];
  snprintf(command, sizeof command, "ls -A %s | grep -Eq '^\\..+\\.[A-Za-z0-9]{6}$'", tmp_dir);
  return system(command) != 0;
}

static void test_stage(const char *stripped) {
  md_probe_plant_options options = {.traces_path = stripped, .output_path = temp_path("a.jsonl"),
                                    .settings = seeded(5)};
  md_probe_plant_outcome outcome;
  md_error err;
  md_status s = md_probe_plant(&options, &outcome, &err);
  CHECK_MSG(s == MD_OK, "%s", err.message);
  CHECK(outcome.episodes == 24 && outcome.probes == 168 && outcome.episodes_without_probes == 0);
  CHECK(outcome.n_regions == 7);
  for (size_t i = 0; i < outcome.n_regions; i++) {
    CHECK(outcome.regions[i].planted == 24 && outcome.regions[i].without == 0);
    CHECK(outcome.regions[i].in_arguments == (strcmp(outcome.regions[i].region, "tool_in") ? 0u : 24u));
  }
  CHECK(!strcmp(outcome.regions[0].region, "system") && !strcmp(outcome.regions[6].region, "scratchpad"));
  md_probe_plant_outcome_free(&outcome);
  /* the output passes the reader; every episode as md_probe_plant_episode planted it */
  md_trace_summary summary;
  CHECK(md_trace_scan(options.output_path, NULL, &summary, &err) == MD_OK && summary.episodes == 24);
  md_trace_episode in[MAX_EPISODES], out[MAX_EPISODES];
  size_t n_in = read_episodes(stripped, in), n_out = read_episodes(options.output_path, out);
  CHECK(n_in == 24 && n_out == 24);
  for (size_t e = 0; e < n_in && e < n_out; e++) {
    md_probe_planted p;
    plant_and_check(&in[e], &options.settings, &p);
    CHECK(out[e].n_probes == 7);
    for (size_t i = 0; i < out[e].n_probes && i < p.episode.n_probes; i++)
      CHECK(!strcmp(out[e].probes[i].answer, p.episode.probes[i].answer));
    md_probe_planted_free(&p);
  }
  free_episodes(in, n_in);
  free_episodes(out, n_out);
  /* the same seed, the same bytes; another seed, others; the input untouched */
  size_t len_a, len_b, len_c, len_in_before, len_in_after;
  char *input_before = read_file(stripped, &len_in_before);
  options.output_path = temp_path("b.jsonl");
  CHECK(md_probe_plant(&options, &outcome, &err) == MD_OK);
  md_probe_plant_outcome_free(&outcome);
  options.output_path = temp_path("c.jsonl");
  options.settings.seed = 6;
  CHECK(md_probe_plant(&options, &outcome, &err) == MD_OK);
  md_probe_plant_outcome_free(&outcome);
  char *a = read_file(temp_path("a.jsonl"), &len_a), *b = read_file(temp_path("b.jsonl"), &len_b);
  char *c = read_file(temp_path("c.jsonl"), &len_c), *input_after = read_file(stripped, &len_in_after);
  CHECK(a && b && len_a == len_b && !memcmp(a, b, len_a));
  CHECK(a && c && (len_a != len_c || memcmp(a, c, len_a)));
  CHECK(len_in_before == len_in_after && !memcmp(input_before, input_after, len_in_before));
  free(a);
  free(b);
  free(c);
  free(input_before);
  free(input_after);

  /* --regions: a region no episode has is reported, with no probe */
  const char *asked[] = {"user", "notes"};
  options.settings = (md_probe_plant_settings){.seed = 1, .regions = asked, .n_regions = 2};
  options.output_path = temp_path("d.jsonl");
  CHECK(md_probe_plant(&options, &outcome, &err) == MD_OK);
  CHECK(outcome.probes == 24 && outcome.n_regions == 2);
  CHECK(outcome.n_regions == 2 && !strcmp(outcome.regions[0].region, "user") &&
        outcome.regions[0].planted == 24 && !strcmp(outcome.regions[1].region, "notes") &&
        outcome.regions[1].planted == 0 && outcome.regions[1].without == 24);
  md_probe_plant_outcome_free(&outcome);
  const char *bad_names[] = {"user", "User"}, *twice[] = {"user", "user"};
  options.settings.regions = bad_names;
  options.output_path = temp_path("never.jsonl");
  CHECK(md_probe_plant(&options, &outcome, &err) == MD_E_INVALID && err.kind == MD_KIND_USAGE);
  options.settings.regions = twice;
  CHECK(md_probe_plant(&options, &outcome, &err) == MD_E_INVALID && err.kind == MD_KIND_USAGE);
  CHECK(!exists(temp_path("never.jsonl")));
}

static void test_refusals(const char *stripped) {
  md_probe_plant_outcome outcome;
  md_error err;
  /* the output is the input: refused before anything is read or written */
  char *copy = temp_path("input.jsonl");
  size_t len_before, len_after;
  char *before = read_file(stripped, &len_before);
  write_text(copy, before);
  md_probe_plant_options options = {.traces_path = copy, .output_path = copy};
  CHECK(md_probe_plant(&options, &outcome, &err) == MD_E_INVALID);
  CHECK_MSG(strstr(err.message, "same file") != NULL, "%s", err.message);
  char *link = temp_path("link.jsonl");
  CHECK(symlink(copy, link) == 0);
  options.output_path = link;
  CHECK(md_probe_plant(&options, &outcome, &err) == MD_E_INVALID);
  char *after = read_file(copy, &len_after);
  CHECK(len_before == len_after && !memcmp(before, after, len_before));
  free(before);
  free(after);

  /* a missing input: the user's fault (exit 2), no output */
  options = (md_probe_plant_options){.traces_path = temp_path("missing.jsonl"),
                                     .output_path = temp_path("out.jsonl")};
  CHECK(md_probe_plant(&options, &outcome, &err) == MD_E_IO && err.kind == MD_KIND_INPUT);
  CHECK(strstr(err.message, "missing.jsonl") != NULL);
  CHECK(!exists(temp_path("out.jsonl")));

  /* bad JSON on line 2, probes on line 3: the reader's message, nothing written */
  write_text(temp_path("bad.jsonl"),
             "{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"Hi. There.\"}]}\n"
             "{\"id\": \"b\", \"messages\": [}\n");
  options.traces_path = temp_path("bad.jsonl");
  CHECK(md_probe_plant(&options, &outcome, &err) == MD_E_FORMAT);
  CHECK_MSG(strstr(err.message, "bad.jsonl:2:") != NULL, "%s", err.message);
  CHECK(!exists(temp_path("out.jsonl")) && no_temporaries());
  write_text(temp_path("probed.jsonl"),
             "{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"Hi. There.\"}]}\n"
             "\n"
             "{\"id\": \"c\", \"messages\": [{\"role\": \"user\", \"content\": \"Code K7.\"}], "
             "\"probes\": [{\"region\": \"user\", \"question\": \"Code?\", \"answer\": \"K7\"}]}\n");
  options.traces_path = temp_path("probed.jsonl");
  CHECK(md_probe_plant(&options, &outcome, &err) == MD_E_INVALID);
  CHECK_MSG(strstr(err.message, "probed.jsonl:3: episode \"c\": has 1 probe already") != NULL, "%s",
            err.message);
  CHECK(!exists(temp_path("out.jsonl")) && no_temporaries());
  options.settings.replace = true;
  CHECK(md_probe_plant(&options, &outcome, &err) == MD_OK);
  CHECK(outcome.episodes == 2 && outcome.probes == 2 && outcome.replaced == 1);
  md_probe_plant_outcome_free(&outcome);
  /* an empty file */
  write_text(temp_path("empty.jsonl"), "\n");
  options.traces_path = temp_path("empty.jsonl");
  options.output_path = temp_path("empty-out.jsonl");
  CHECK(md_probe_plant(&options, &outcome, &err) == MD_E_FORMAT);
  CHECK(!exists(temp_path("empty-out.jsonl")));
}

int main(void) {
  if (!mkdtemp(tmp_dir)) return 99;
  char *stripped = strdup(temp_path("agent-450-stripped.jsonl"));
  write_stripped(source_path("data/traces/agent-450.jsonl"), stripped);
  test_shipped(stripped);
  test_utf8();
  test_value_taken();
  test_existing_probes();
  test_stage(stripped);
  test_refusals(stripped);
  char command[600];
  snprintf(command, sizeof command, "rm -rf %s", tmp_dir);
  free(stripped);
  if (system(command) != 0) return 99;
  return md_test_finish("probes_plant");
}
