/* The export stage (export/export.h). */
#include "export/export.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/numfmt.h"
#include "collector/model/model_dir.h"
#include "collector/tokenizer/episode_tokens.h"
#include "export/openai_request.h"
#include "io/files/atomic_file.h"
#include "io/files/json_fields.h"
#include "io/files/output_guard.h"
#include "io/formats/config.h"

const char *md_export_input_name(md_export_input input) {
  switch (input) {
    case MD_EXPORT_INPUT_TRACES: return "traces";
    case MD_EXPORT_INPUT_OPENAI: return "openai";
    default: return "auto";
  }
}

typedef struct stage {
  const md_export_options *o;
  md_export_outcome *out;
  md_error *err;
  size_t block_size;
  md_config_summary config;
  json_t *config_json;             /* the config as JSON: its regions' "identification" */
  md_retention_region *regions;
  md_model_text model;
  md_atomic_file file;
  json_t *seen_ids;                /* openai input: id -> line of its first request */
} stage;

static bool blank(const char *line, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r' && line[i] != '\n') return false;
  return true;
}

static md_status check_options(stage *st) {
  const md_export_options *o = st->o;
  md_error *err = st->err;
  if (!o->format) return md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE, "no format given");
  if (!o->config_path || !o->model_path || !o->input_path || !o->output_path)
    return md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE, "the config, the model, the requests "
                        "and the output are all required");
  size_t b = o->block_size ? o->block_size : o->format->default_block_size;
  if (b > MD_EXPORT_BLOCK_SIZE_MAX)
    return md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE, "block size %zu is more than %d tokens",
                        b, MD_EXPORT_BLOCK_SIZE_MAX);
  if (o->format->power_of_two_blocks && (b < 2 || (b & (b - 1))))
    return md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE, "format %s: the block size must be a "
                        "power of two of at least 2 (%s's tokens_per_block), got %zu",
                        o->format->name, o->format->stack, b);
  if (!o->format->uses_blocks && o->block_size > 1)
    return md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE, "format %s: one priority per request, "
                        "no blocks: a block size of %zu means nothing to it", o->format->name,
                        o->block_size);
  st->block_size = o->format->uses_blocks ? b : 1;
  if (!isnan(o->step_ms) && !(isfinite(o->step_ms) && o->step_ms > 0))
    return md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE, "milliseconds per decode step must be "
                        "a finite number > 0, got %g", o->step_ms);
  if (o->format->durations && isnan(o->step_ms))
    return md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE, "format %s emits durations: the "
                        "milliseconds per decode step are required", o->format->name);
  md_path_role outputs[] = {{o->output_path, "-o", false}, {o->summary_path, "--summary", false}};
  md_path_role inputs[] = {{o->config_path, "--config", false}, {o->model_path, "--model", true},
                           {o->input_path, "the requests", false}};
  return md_outputs_check(outputs, o->summary_path ? 2 : 1, inputs, 3, err);
}

static md_status read_config(stage *st) {
  const char *path = st->o->config_path;
  md_status s = md_config_read(path, &st->config, st->err);
  if (s != MD_OK) return md_error_blame_input(st->err);
  if (st->config.n_regions == 0)
    return md_fail(st->err, MD_E_FORMAT, "%s: regions: the config has none", path);
  if ((s = md_json_load(path, &st->config_json, st->err)) != MD_OK) return s;
  size_t n = st->config.n_regions;
  st->regions = calloc(n, sizeof *st->regions);
  st->out->regions = calloc(n, sizeof *st->out->regions);
  if (!st->regions || !st->out->regions) return md_fail(st->err, MD_E_NOMEM, "out of memory");
  st->out->n_regions = n;
  for (size_t r = 0; r < n; r++) {
    const md_config_read_region *c = &st->config.regions[r];
    st->regions[r] = (md_retention_region){c->name, c->pinned, c->base_priority, c->half_life};
    st->out->regions[r].region = c->name;
    md_retention_setting setting;
    if ((s = md_retention_setting_of(&st->regions[r], st->o->step_ms, &setting, st->err)) != MD_OK) {
      md_error_prefix(st->err, "%s", path);
      return md_error_at(st->err, path, 0, NULL);
    }
  }
  return MD_OK;
}

/* A hash map of the ids seen, as the trace reader keeps one: a request log
 * may hold many thousands. */
static md_status remember_id(stage *st, const md_trace_episode *ep) {
  if (!st->seen_ids && !(st->seen_ids = json_object()))
    return md_fail(st->err, MD_E_NOMEM, "out of memory");
  const json_t *first = json_object_get(st->seen_ids, ep->id);
  if (first)
    return md_trace_episode_fail(st->err, MD_E_INVALID, ep, "id: the same as line %zu's",
                                 (size_t)json_integer_value(first));
  if (json_object_set_new(st->seen_ids, ep->id, json_integer((json_int_t)ep->line)))
    return md_fail(st->err, MD_E_NOMEM, "out of memory");
  return MD_OK;
}

static size_t region_index(const stage *st, const char *name) {
  for (size_t r = 0; r < st->config.n_regions; r++)
    if (!strcmp(st->config.regions[r].name, name)) return r;
  return SIZE_MAX;
}

static md_status missing_region(stage *st, const md_trace_episode *ep, const char *name,
                                const char *where) {
  char list[512];
  size_t used = 0;
  list[0] = '\0';
  for (size_t r = 0; r < st->config.n_regions && used < sizeof list; r++) {
    int n = snprintf(list + used, sizeof list - used, "%s%s", r ? ", " : "", st->config.regions[r].name);
    if (n < 0) break;
    used += (size_t)n;
  }
  return md_trace_episode_fail(st->err, MD_E_INVALID, ep, "region \"%s\" (%s) is not in the "
                               "config %s (its regions: %s)", name, where, st->o->config_path, list);
}

static json_t *runs_of(const md_episode_tokens *t) {
  json_t *runs = json_array();
  size_t start = 0;
  for (size_t i = 1; runs && i <= t->prompt_tokens; i++) {
    if (i < t->prompt_tokens && !strcmp(t->regions[i], t->regions[start])) continue;
    if (json_array_append_new(runs, json_pack("{sssIsI}", "region", t->regions[start], "start",
                                              (json_int_t)start, "end", (json_int_t)i))) {
      json_decref(runs);
      return NULL;
    }
    start = i;
  }
  return runs;
}

/* Renders, tokenises, maps and writes one request. */
static md_status export_one(stage *st, const md_trace_episode *ep) {
  const md_qwen2_config *mc = &st->model.config;
  md_episode_tokens_options topt = {.max_steps = 1, .vocab_size = (size_t)mc->vocab_size,
                                    .max_positions = (size_t)mc->max_position_embeddings,
                                    .chat = mc->family ? mc->family->chat : NULL};
  md_episode_tokens t;
  md_status s = md_episode_tokenize(st->model.tokenizer, ep, &topt, &t, st->err);
  if (s != MD_OK) return s;
  size_t n = t.prompt_tokens, *token_region = malloc(n * sizeof *token_region);
  if (!token_region) s = md_fail(st->err, MD_E_NOMEM, "out of memory");
  else s = md_trace_check_positions(ep, n, 1, (size_t)mc->max_position_embeddings, st->err);
  for (size_t i = 0; s == MD_OK && i < n; i++) {
    char where[64];
    snprintf(where, sizeof where, "prompt token %zu", i);
    if ((token_region[i] = region_index(st, t.regions[i])) == SIZE_MAX)
      s = missing_region(st, ep, t.regions[i], where);
  }
  size_t decode = s == MD_OK ? region_index(st, t.continuation_region) : 0;
  if (s == MD_OK && decode == SIZE_MAX) s = missing_region(st, ep, t.continuation_region, "decoded tokens");
  md_retention_map map = {0};
  if (s == MD_OK)
    s = md_retention_map_tokens(st->regions, st->config.n_regions, token_region, n, decode,
                                st->block_size, st->o->step_ms, &map, st->err);
  json_t *settings = NULL, *line = NULL;
  size_t *lowered = s == MD_OK ? calloc(st->config.n_regions, sizeof *lowered) : NULL;
  if (s == MD_OK && !lowered) s = md_fail(st->err, MD_E_NOMEM, "out of memory");
  if (s == MD_OK) {
    md_export_request request = {ep->id, &map, st->regions, st->config.n_regions};
    md_export_adjustments adjust = {lowered, &st->out->warnings};
    s = st->o->format->settings(&request, &settings, &adjust, st->err);
  }
  if (s == MD_OK) {
    line = json_pack("{sssssIsIsO}", "id", ep->id, "format", st->o->format->name, "prompt_tokens",
                     (json_int_t)n, "block_size", (json_int_t)st->block_size,
                     st->o->format->field, settings);
    if (line && st->o->runs) {
      json_t *runs = runs_of(&t);
      if (!runs || json_object_set_new(line, "runs", runs) ||
          json_object_set_new(line, "decode_region", json_string(t.continuation_region))) {
        json_decref(line);
        line = NULL;
      }
    }
    char *text = line ? md_json_dumps_line(line, false) : NULL;
    if (!text) {
      s = md_fail(st->err, MD_E_NOMEM, "out of memory");
    } else {
      if (fputs(text, st->file.fp) == EOF || fputc('\n', st->file.fp) == EOF)
        s = md_fail_kind(st->err, MD_E_IO, MD_KIND_IO, "%s: cannot write", st->o->output_path);
      free(text);
    }
  }
  if (s == MD_OK) {
    md_export_outcome *out = st->out;
    out->requests++;
    out->prompt_tokens += n;
    for (size_t i = 0; i < n; i++) out->regions[token_region[i]].labelled_tokens++;
    for (size_t j = 0; j < map.n_ranges; j++) {
      out->regions[map.ranges[j].region].ranges++;
      out->regions[map.ranges[j].region].tokens += map.ranges[j].end - map.ranges[j].start;
    }
    for (size_t r = 0; r < st->config.n_regions; r++) out->regions[r].lowered += lowered[r];
  }
  json_decref(line);
  json_decref(settings);
  free(lowered);
  md_retention_map_free(&map);
  free(token_region);
  md_episode_tokens_free(&t);
  return s;
}

static md_status export_traces(stage *st) {
  md_trace_reader *reader = NULL;
  md_status s = md_trace_open(st->o->input_path, NULL, &reader, st->err);
  for (bool have = true; s == MD_OK && have;) {
    md_trace_episode ep;
    s = md_trace_next(reader, &ep, &have, st->err);
    if (s == MD_OK && have) {
      s = export_one(st, &ep);
      md_trace_episode_free(&ep);
    }
  }
  md_trace_close(reader);
  return s;
}

static md_status export_openai(stage *st, FILE *in) {
  md_openai_options opt = {st->o->retrieval_tools, st->o->n_retrieval_tools};
  char *line = NULL;
  size_t cap = 0, number = 0;
  ssize_t len;
  md_status s = MD_OK;
  while (s == MD_OK && (len = getline(&line, &cap, in)) != -1) {
    number++;
    char *text = line;
    size_t n = (size_t)len;
    if (number == 1 && n >= 3 && !memcmp(text, "\xef\xbb\xbf", 3)) text += 3, n -= 3;
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r')) n--;
    if (blank(text, n)) continue;
    md_trace_episode ep;
    s = md_openai_request_parse(st->o->input_path, number, text, n, &opt, &ep, st->err);
    if (s != MD_OK) break;
    s = remember_id(st, &ep);
    if (s == MD_OK) s = export_one(st, &ep);
    md_trace_episode_free(&ep);
  }
  if (s == MD_OK && ferror(in))
    s = md_fail_kind(st->err, MD_E_IO, MD_KIND_INPUT, "%s: cannot read", st->o->input_path);
  free(line);
  return s;
}

/* The input's format: the option's, or from its first non-blank line. */
static md_status resolve_input(stage *st, FILE *in) {
  md_export_input input = st->o->input;
  if (input == MD_EXPORT_INPUT_AUTO) {
    input = MD_EXPORT_INPUT_TRACES;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, in)) != -1) {
      if (blank(line, (size_t)len)) continue;
      size_t skip = len >= 3 && !memcmp(line, "\xef\xbb\xbf", 3) ? 3 : 0;
      if (md_openai_request_detect(line + skip, (size_t)len - skip)) input = MD_EXPORT_INPUT_OPENAI;
      break;
    }
    free(line);
    rewind(in);
  }
  st->out->input = input;
  return MD_OK;
}

static json_t *summary_json(stage *st) {
  const md_export_options *o = st->o;
  const md_export_outcome *out = st->out;
  json_t *root = json_object(), *regions = json_object(), *notes = json_array(),
         *approx = json_array();
  if (!root || !regions || !notes || !approx) goto fail;
  json_object_set_new(root, "format", json_string(o->format->name));
  json_object_set_new(root, "stack", json_string(o->format->stack));
  json_object_set_new(root, "field", json_string(o->format->field));
  json_object_set_new(root, "config", json_string(o->config_path));
  json_object_set_new(root, "model", json_string(o->model_path));
  json_object_set_new(root, "input", json_string(o->input_path));
  json_object_set_new(root, "input_format", json_string(md_export_input_name(out->input)));
  json_object_set_new(root, "block_size", json_integer((json_int_t)out->block_size));
  json_object_set_new(root, "step_ms", isnan(o->step_ms) ? json_null() : json_real(o->step_ms));
  json_object_set_new(root, "requests", json_integer((json_int_t)out->requests));
  json_object_set_new(root, "prompt_tokens", json_integer((json_int_t)out->prompt_tokens));
  const json_t *config_regions = json_object_get(st->config_json, "regions");
  for (size_t r = 0; r < out->n_regions; r++) {
    md_retention_setting set;
    md_error ignored = {0};
    md_retention_setting_of(&st->regions[r], o->step_ms, &set, &ignored);
    const md_retention_region *g = &st->regions[r];
    const md_export_region_count *c = &out->regions[r];
    json_t *e = json_pack("{sb sf so si so sI sI sI sI}", "pinned", g->pinned, "base_priority",
                          g->base_priority, "half_life",
                          isfinite(g->half_life) ? json_real(g->half_life) : json_null(),
                          "priority", set.priority, "duration_ms",
                          set.duration_ms == MD_RETENTION_NO_EXPIRY
                              ? json_null() : json_integer((json_int_t)set.duration_ms),
                          "labelled_tokens", (json_int_t)c->labelled_tokens, "ranges",
                          (json_int_t)c->ranges, "tokens", (json_int_t)c->tokens, "lowered",
                          (json_int_t)c->lowered);
    if (!e) goto fail;
    json_t *id = json_object_get(json_object_get(config_regions, g->name), "identification");
    if (id) json_object_set(e, "identification", id);
    json_object_set_new(regions, g->name, e);
  }
  json_object_set_new(root, "regions", regions);
  regions = NULL;
  for (size_t i = 0; i < out->warnings.n; i++) json_array_append_new(notes, json_string(out->warnings.lines[i]));
  json_object_set_new(root, "adjustments", notes);
  notes = NULL;
  static const char *const general[] = {
      "priorities are MemDecay's base priorities on the stack's 1 to 99 scale, pinned regions "
      "100; a block that mixes regions takes the most retained one",
      "regions come from the chat template's rendering: template text takes the region of "
      "what it wraps, and a token that straddles two regions belongs to the first",
      NULL,
  };
  for (size_t i = 0; general[i]; i++) json_array_append_new(approx, json_string(general[i]));
  for (size_t i = 0; o->format->approximations[i]; i++)
    json_array_append_new(approx, json_string(o->format->approximations[i]));
  json_object_set_new(root, "approximations", approx);
  return root;
fail:
  json_decref(root);
  json_decref(regions);
  json_decref(notes);
  json_decref(approx);
  return NULL;
}

md_status md_export(const md_export_options *o, md_export_outcome *out, md_error *err) {
  *out = (md_export_outcome){0};
  stage st = {.o = o, .out = out, .err = err};
  md_status s = check_options(&st);
  out->block_size = st.block_size;
  if (s == MD_OK) s = read_config(&st);
  FILE *in = NULL;
  if (s == MD_OK && !(in = fopen(o->input_path, "rb")))
    s = md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: cannot open the requests", o->input_path);
  if (s == MD_OK) s = resolve_input(&st, in);
  if (s == MD_OK && (s = md_model_text_open(o->model_path, "export", &st.model, err)) != MD_OK)
    md_error_blame_input(err);
  bool opened = false;
  if (s == MD_OK) opened = (s = md_atomic_open(&st.file, o->output_path, err)) == MD_OK;
  if (s == MD_OK)
    s = out->input == MD_EXPORT_INPUT_OPENAI ? export_openai(&st, in) : export_traces(&st);
  if (s == MD_OK && out->requests == 0)
    s = md_fail(err, MD_E_FORMAT, "%s: no requests", o->input_path);
  char *summary = NULL;
  if (s == MD_OK && o->summary_path) {
    json_t *root = summary_json(&st);
    summary = root ? md_json_dumps_shortest(root) : NULL;
    json_decref(root);
    if (!summary) s = md_fail(err, MD_E_NOMEM, "out of memory");
  }
  /* Both outputs complete in their temporaries before either is renamed into
   * place: a failure while writing either leaves neither. */
  md_atomic_file summary_file = {0};
  bool summary_opened = false;
  if (s == MD_OK && summary) {
    summary_opened = (s = md_atomic_open(&summary_file, o->summary_path, err)) == MD_OK;
    if (s == MD_OK && fwrite(summary, 1, strlen(summary), summary_file.fp) != strlen(summary))
      s = md_fail_kind(err, MD_E_IO, MD_KIND_IO, "%s: cannot write the summary", o->summary_path);
  }
  if (opened) {
    if (s == MD_OK) s = md_atomic_commit(&st.file, err);
    else md_atomic_abort(&st.file);
  }
  if (summary_opened) {
    if (s == MD_OK) s = md_atomic_commit(&summary_file, err);
    else md_atomic_abort(&summary_file);
  }
  free(summary);
  if (in) fclose(in);
  md_model_text_close(&st.model);
  json_decref(st.seen_ids);
  json_decref(st.config_json);
  free(st.regions);
  /* The outcome keeps the region names: copies, the config summary goes. */
  if (s == MD_OK && out->n_regions) {
    out->region_names = calloc(out->n_regions, sizeof *out->region_names);
    for (size_t r = 0; out->region_names && r < out->n_regions; r++) {
      out->region_names[r] = strdup(out->regions[r].region);
      out->regions[r].region = out->region_names[r] ? out->region_names[r] : "?";
    }
  }
  md_config_summary_free(&st.config);
  if (s != MD_OK) {
    md_export_outcome_free(out);
  }
  return s;
}

void md_export_outcome_free(md_export_outcome *out) {
  for (size_t r = 0; out->region_names && r < out->n_regions; r++) free(out->region_names[r]);
  free(out->region_names);
  free(out->regions);
  md_warnings_free(&out->warnings);
  *out = (md_export_outcome){0};
}
