#include "io/formats/calibration.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/files/json_fields.h"
#include "base/numfmt.h"
#include "base/regions.h"

/* ---- writing ------------------------------------------------------------------- */

typedef struct builder {
  bool out_of_memory;
} builder;

static void set(builder *b, json_t *object, const char *key, json_t *value) {
  if (!value || json_object_set_new(object, key, value) != 0) b->out_of_memory = true;
}

static void push(builder *b, json_t *array, json_t *value) {
  if (!value || json_array_append_new(array, value) != 0) b->out_of_memory = true;
}

static json_t *real_or_null(double value) { return isfinite(value) ? json_real(value) : json_null(); }
static json_t *text_or_null(const char *text) { return text ? json_string(text) : json_null(); }
static json_t *count(uint64_t value) { return json_integer((json_int_t)value); }

static json_t *emit_run(builder *b, const md_calibration *c) {
  json_t *run = json_object(), *aggregation = json_object(), *layers = json_array();
  if (!run || !aggregation || !layers) {
    json_decref(run);
    json_decref(aggregation);
    json_decref(layers);
    return NULL;
  }
  set(b, run, "path", text_or_null(c->run.path));
  if (c->run.n_paths) {
    json_t *paths = json_array();
    for (size_t i = 0; paths && i < c->run.n_paths; i++) push(b, paths, json_string(c->run.paths[i]));
    set(b, run, "paths", paths);
  }
  set(b, run, "device", text_or_null(c->run.device));
  set(b, run, "complete", json_boolean(c->run.complete));
  if (c->run.layers[0] >= 0) {
    push(b, layers, json_integer(c->run.layers[0]));
    push(b, layers, json_integer(c->run.layers[1]));
    set(b, aggregation, "layers", layers);
  } else {
    json_decref(layers);
    set(b, aggregation, "layers", json_null());
  }
  set(b, aggregation, "heads", text_or_null(c->run.heads));
  set(b, aggregation, "page_size", json_integer(c->run.page_size));
  set(b, run, "aggregation", aggregation);
  return run;
}

static json_t *emit_model(builder *b, const md_calibration *c) {
  json_t *model = json_object();
  if (!model) return NULL;
  set(b, model, "name", text_or_null(c->model.name));
  set(b, model, "config_sha256", text_or_null(c->model.config_sha256));
  set(b, model, "path", text_or_null(c->model.path));
  set(b, model, "architecture", text_or_null(c->model.architecture));
  set(b, model, "dtype", text_or_null(c->model.dtype));
  return model;
}

static json_t *emit_workload(builder *b, const md_calibration *c) {
  json_t *w = json_object(), *sources = json_array(), *hashes = json_array();
  if (!w || !sources || !hashes) {
    json_decref(w);
    json_decref(sources);
    json_decref(hashes);
    return NULL;
  }
  for (size_t i = 0; i < c->workload.n_sources; i++) {
    push(b, sources, json_string(c->workload.sources[i]));
    push(b, hashes, text_or_null(c->workload.sources_sha256 ? c->workload.sources_sha256[i] : NULL));
  }
  set(b, w, "sources", sources);
  set(b, w, "sources_sha256", hashes);
  set(b, w, "episodes", count(c->workload.episodes));
  set(b, w, "tokens", count(c->workload.tokens));
  set(b, w, "prompt_tokens", count(c->workload.prompt_tokens));
  set(b, w, "decoded_tokens", count(c->workload.decoded_tokens));
  set(b, w, "decode_steps", count(c->workload.decode_steps));
  set(b, w, "decode_steps_min", count(c->workload.decode_steps_min));
  set(b, w, "estimand", text_or_null(c->workload.estimand));
  set(b, w, "tau", real_or_null(c->workload.tau));
  set(b, w, "guard", json_integer(c->workload.guard));
  return w;
}

static json_t *emit_policy(builder *b, const md_calibration *c) {
  json_t *policy = json_object(), *norm = json_object();
  if (!policy || !norm) {
    json_decref(policy);
    json_decref(norm);
    return NULL;
  }
  set(b, policy, "ewma_beta", real_or_null(c->policy.ewma_beta));
  set(b, policy, "alpha", real_or_null(c->policy.alpha));
  set(b, policy, "alpha_regions", count(c->policy.alpha_regions));
  set(b, norm, "kind", json_string("uniform"));
  set(b, norm, "kappa", real_or_null(c->policy.kappa));
  set(b, norm, "quantile", real_or_null(c->policy.quantile));
  set(b, norm, "samples", count(c->policy.kappa_samples));
  set(b, norm, "passes", json_integer(c->policy.passes));
  set(b, policy, "attention_norm", norm);
  return policy;
}

static json_t *emit_curve(builder *b, const md_calibration_region *r) {
  json_t *curve = json_object(), *mean = json_array(), *pairs = json_array();
  if (!curve || !mean || !pairs) {
    json_decref(curve);
    json_decref(mean);
    json_decref(pairs);
    return NULL;
  }
  for (size_t k = 0; k < r->curve_length; k++) {
    push(b, mean, real_or_null(r->curve_mean[k]));
    push(b, pairs, count(r->curve_pairs[k]));
  }
  set(b, curve, "mean", mean);
  set(b, curve, "pairs", pairs);
  return curve;
}

static json_t *emit_region(builder *b, const md_calibration_region *r) {
  json_t *o = json_object();
  if (!o) return NULL;
  set(b, o, "pinned", json_boolean(r->pinned));
  set(b, o, "tokens", count(r->tokens));
  set(b, o, "observed_tokens", count(r->observed_tokens));
  set(b, o, "refreshed_tokens", count(r->refreshed_tokens));
  set(b, o, "refreshed_share", real_or_null(r->refreshed_share));
  set(b, o, "base_priority", real_or_null(r->base_priority));
  set(b, o, "event_rows", count(r->event_rows));
  set(b, o, "visible_pairs", count(r->visible_pairs));
  set(b, o, "mean_relative_attention", real_or_null(r->mean_relative_attention));
  set(b, o, "curve", emit_curve(b, r));
  return o;
}

static json_t *emit_document(builder *b, const md_calibration *c) {
  json_t *root = json_object(), *generator = json_object(), *events = json_object(),
         *regions = json_object(), *warnings = json_array();
  if (!root || !generator || !events || !regions || !warnings) {
    json_decref(root);
    json_decref(generator);
    json_decref(events);
    json_decref(regions);
    json_decref(warnings);
    return NULL;
  }
  set(b, root, "format", json_string(MD_CALIBRATION_FORMAT));
  set(b, generator, "name", json_string("memdecay-calibrate"));
  set(b, generator, "version", text_or_null(c->generator_version));
  set(b, root, "generator", generator);
  if (c->created) set(b, root, "created", json_string(c->created));
  set(b, root, "run", emit_run(b, c));
  set(b, root, "model", emit_model(b, c));
  set(b, root, "workload", emit_workload(b, c));
  set(b, events, "path", text_or_null(c->events.path));
  set(b, events, "rows", count(c->events.rows));
  set(b, root, "events", events);
  set(b, root, "policy", emit_policy(b, c));
  for (size_t i = 0; i < c->n_regions; i++)
    set(b, regions, c->regions[i].name, emit_region(b, &c->regions[i]));
  set(b, root, "regions", regions);
  for (size_t i = 0; i < c->warnings.n; i++) push(b, warnings, json_string(c->warnings.lines[i]));
  set(b, root, "warnings", warnings);
  return root;
}

/* An array holding only numbers and nulls goes on one line: "[1, 2.5, null]".
 * The text only gets shorter, so it is rewritten in place. */
static void join_flat_arrays(char *json) {
  char *out = json;
  bool in_string = false;
  for (const char *in = json; *in;) {
    if (in_string) {
      if (*in == '\\' && in[1]) *out++ = *in++;
      else if (*in == '"') in_string = false;
      *out++ = *in++;
      continue;
    }
    if (*in == '"') in_string = true;
    size_t flat = 0;
    if (*in == '[') flat = strspn(in + 1, "0123456789+-.eE,nul \n");
    if (*in != '[' || in[1 + flat] != ']') {
      *out++ = *in++;
      continue;
    }
    const char *end = in + 1 + flat;
    *out++ = *in++;
    bool pending_space = false;
    for (; in < end; in++) {
      if (*in == ' ' || *in == '\n') continue;
      if (pending_space) *out++ = ' ';
      pending_space = *in == ',';
      *out++ = *in;
    }
  }
  *out = '\0';
}

md_status md_calibration_dump(const md_calibration *calibration, char **text, md_error *err) {
  *text = NULL;
  builder b = {0};
  json_t *root = emit_document(&b, calibration);
  char *dumped = root && !b.out_of_memory ? md_json_dumps_shortest(root) : NULL;
  json_decref(root);
  if (!dumped) return md_fail(err, MD_E_NOMEM, "out of memory writing the calibration");
  join_flat_arrays(dumped);
  *text = dumped;
  return MD_OK;
}

/* ---- reading -------------------------------------------------------------------- */

static md_status read_u64(const md_json_fields *f, const json_t *object, const char *parent,
                          const char *key, uint64_t *out) {
  int64_t value;
  md_status s = md_json_integer(f, object, parent, key, true, 0, &value);
  *out = s == MD_OK ? (uint64_t)value : 0;
  return s;
}

/* run.paths: absent, or the run directories (non-empty strings). */
static md_status read_run_paths(const md_json_fields *f, const json_t *run, md_calibration *c) {
  const json_t *paths = json_object_get(run, "paths");
  if (!paths) return MD_OK;
  if (!json_is_array(paths) || json_array_size(paths) < 1)
    return md_json_bad(f, "run", "paths", "a non-empty array of run directories", paths);
  size_t n = json_array_size(paths);
  c->run.paths = calloc(n, sizeof *c->run.paths);
  if (!c->run.paths) return md_fail(f->err, MD_E_NOMEM, "%s: out of memory", f->path);
  for (size_t i = 0; i < n; i++) {
    const json_t *path = json_array_get(paths, i);
    if (!json_is_string(path) || json_string_length(path) == 0 ||
        strlen(json_string_value(path)) != json_string_length(path))
      return md_fail(f->err, MD_E_FORMAT, "%s: run.paths[%zu]: expected a non-empty string "
                     "without NUL, found %s", f->path, i, md_json_kind(path));
    if (!(c->run.paths[i] = strdup(json_string_value(path))))
      return md_fail(f->err, MD_E_NOMEM, "%s: out of memory", f->path);
    c->run.n_paths++;
  }
  return MD_OK;
}

static md_status read_run(const md_json_fields *f, const json_t *root, md_calibration *c) {
  const json_t *run = NULL, *aggregation = NULL;
  int64_t page_size = 0;
  c->run.page_size = 0;
  c->run.layers[0] = c->run.layers[1] = -1;
  md_status s = md_json_object(f, root, "", "run", true, &run);
  if (s == MD_OK) s = md_json_string(f, run, "run", "path", false, &c->run.path);
  if (s == MD_OK) s = read_run_paths(f, run, c);
  if (s == MD_OK) s = md_json_string(f, run, "run", "device", false, &c->run.device);
  if (s == MD_OK) s = md_json_boolean(f, run, "run", "complete", &c->run.complete);
  if (s == MD_OK) s = md_json_object(f, run, "run", "aggregation", true, &aggregation);
  if (s == MD_OK)
    s = md_json_integer(f, aggregation, "run.aggregation", "page_size", true, 1, &page_size);
  c->run.page_size = (long)page_size;
  if (s == MD_OK) s = md_json_string(f, aggregation, "run.aggregation", "heads", false, &c->run.heads);
  /* Nothing below runs after an error: aggregation is set only once the
   * fields before it have been read. */
  if (s != MD_OK) return s;
  const json_t *layers = json_object_get(aggregation, "layers");
  if (!layers || json_is_null(layers)) return MD_OK;
  if (!json_is_array(layers) || json_array_size(layers) != 2 ||
      !json_is_integer(json_array_get(layers, 0)) || !json_is_integer(json_array_get(layers, 1)))
    return md_json_bad(f, "run.aggregation", "layers", "[begin, end] or null", layers);
  c->run.layers[0] = (long)json_integer_value(json_array_get(layers, 0));
  c->run.layers[1] = (long)json_integer_value(json_array_get(layers, 1));
  return MD_OK;
}

static md_status read_model(const md_json_fields *f, const json_t *root, md_calibration *c) {
  const json_t *model = NULL;
  md_status s = md_json_object(f, root, "", "model", true, &model);
  if (s == MD_OK) s = md_json_string(f, model, "model", "name", true, &c->model.name);
  if (s == MD_OK)
    s = md_json_string(f, model, "model", "config_sha256", true, &c->model.config_sha256);
  if (s == MD_OK) s = md_json_string(f, model, "model", "path", false, &c->model.path);
  if (s == MD_OK)
    s = md_json_string(f, model, "model", "architecture", false, &c->model.architecture);
  if (s == MD_OK) s = md_json_string(f, model, "model", "dtype", false, &c->model.dtype);
  return s;
}

static md_status read_sources(const md_json_fields *f, const json_t *w, md_calibration *c) {
  const json_t *sources = json_object_get(w, "sources");
  const json_t *hashes = json_object_get(w, "sources_sha256");
  if (!json_is_array(sources)) return md_json_bad(f, "workload", "sources", "an array", sources);
  size_t n = json_array_size(sources);
  if (!json_is_array(hashes) || json_array_size(hashes) != n)
    return md_json_bad(f, "workload", "sources_sha256", "an array as long as sources", hashes);
  c->workload.sources = calloc(n + 1, sizeof *c->workload.sources);
  c->workload.sources_sha256 = calloc(n + 1, sizeof *c->workload.sources_sha256);
  if (!c->workload.sources || !c->workload.sources_sha256)
    return md_fail(f->err, MD_E_NOMEM, "%s: out of memory", f->path);
  for (size_t i = 0; i < n; i++) {
    const json_t *source = json_array_get(sources, i), *hash = json_array_get(hashes, i);
    if (!json_is_string(source) || json_string_length(source) == 0)
      return md_fail(f->err, MD_E_FORMAT, "%s: workload.sources[%zu]: expected a non-empty "
                     "string, found %s", f->path, i, md_json_kind(source));
    if (!json_is_string(hash) && !json_is_null(hash))
      return md_fail(f->err, MD_E_FORMAT, "%s: workload.sources_sha256[%zu]: expected a string "
                     "or null, found %s", f->path, i, md_json_kind(hash));
    c->workload.n_sources++;
    c->workload.sources[i] = strdup(json_string_value(source));
    c->workload.sources_sha256[i] = json_is_string(hash) ? strdup(json_string_value(hash)) : NULL;
    if (!c->workload.sources[i] || (json_is_string(hash) && !c->workload.sources_sha256[i]))
      return md_fail(f->err, MD_E_NOMEM, "%s: out of memory", f->path);
  }
  return MD_OK;
}

static md_status read_workload(const md_json_fields *f, const json_t *root, md_calibration *c) {
  const json_t *w = NULL;
  int64_t guard = 0;
  md_status s = md_json_object(f, root, "", "workload", true, &w);
  if (s == MD_OK) s = read_sources(f, w, c);
  const struct {
    const char *key;
    uint64_t *out;
  } counts[] = {{"episodes", &c->workload.episodes},
                {"tokens", &c->workload.tokens},
                {"prompt_tokens", &c->workload.prompt_tokens},
                {"decoded_tokens", &c->workload.decoded_tokens},
                {"decode_steps", &c->workload.decode_steps},
                {"decode_steps_min", &c->workload.decode_steps_min}};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0] && s == MD_OK; i++)
    s = read_u64(f, w, "workload", counts[i].key, counts[i].out);
  if (s == MD_OK) s = md_json_string(f, w, "workload", "estimand", true, &c->workload.estimand);
  if (s == MD_OK && strcmp(c->workload.estimand, "last-use") != 0 &&
      strcmp(c->workload.estimand, "gap") != 0)
    s = md_fail(f->err, MD_E_FORMAT, "%s: workload.estimand: \"%s\" is neither last-use nor gap",
                f->path, c->workload.estimand);
  if (s == MD_OK) s = md_json_number(f, w, "workload", "tau", false, &c->workload.tau);
  if (s == MD_OK && !(c->workload.tau > 0))
    s = md_json_bad(f, "workload", "tau", "a number > 0", json_object_get(w, "tau"));
  if (s == MD_OK) s = md_json_integer(f, w, "workload", "guard", true, 0, &guard);
  c->workload.guard = (long)guard;
  return s;
}

static md_status read_policy(const md_json_fields *f, const json_t *root, md_calibration *c) {
  const json_t *policy = NULL, *norm = NULL;
  int64_t passes = 0;
  md_status s = md_json_object(f, root, "", "policy", true, &policy);
  if (s == MD_OK) s = md_json_number(f, policy, "policy", "ewma_beta", false, &c->policy.ewma_beta);
  if (s == MD_OK) s = md_json_number(f, policy, "policy", "alpha", true, &c->policy.alpha);
  if (s == MD_OK) s = read_u64(f, policy, "policy", "alpha_regions", &c->policy.alpha_regions);
  if (s == MD_OK) s = md_json_object(f, policy, "policy", "attention_norm", true, &norm);
  const char *parent = "policy.attention_norm";
  if (s == MD_OK) s = md_json_number(f, norm, parent, "kappa", true, &c->policy.kappa);
  if (s == MD_OK) s = md_json_number(f, norm, parent, "quantile", false, &c->policy.quantile);
  if (s == MD_OK) s = read_u64(f, norm, parent, "samples", &c->policy.kappa_samples);
  if (s == MD_OK) s = md_json_integer(f, norm, parent, "passes", true, 1, &passes);
  c->policy.passes = (int)passes;
  if (s == MD_OK && !(c->policy.ewma_beta >= 0 && c->policy.ewma_beta < 1))
    s = md_json_bad(f, "policy", "ewma_beta", "a number in [0, 1)", json_object_get(policy, "ewma_beta"));
  if (s == MD_OK && !(c->policy.quantile > 0 && c->policy.quantile < 1))
    s = md_json_bad(f, parent, "quantile", "a number in (0, 1)", json_object_get(norm, "quantile"));
  if (s == MD_OK && !(isnan(c->policy.kappa) || c->policy.kappa > 0))
    s = md_json_bad(f, parent, "kappa", "a number > 0 or null", json_object_get(norm, "kappa"));
  return s;
}

static md_status read_curve(const md_json_fields *f, const json_t *value, const char *parent,
                            md_calibration_region *r) {
  const json_t *curve = NULL;
  char name[160];
  md_status s = md_json_object(f, value, parent, "curve", true, &curve);
  if (s != MD_OK) return s;
  snprintf(name, sizeof name, "%s.curve", parent);
  const json_t *mean = json_object_get(curve, "mean"), *pairs = json_object_get(curve, "pairs");
  if (!json_is_array(mean)) return md_json_bad(f, name, "mean", "an array", mean);
  size_t n = json_array_size(mean);
  if (!json_is_array(pairs) || json_array_size(pairs) != n)
    return md_json_bad(f, name, "pairs", "an array as long as mean", pairs);
  r->curve_mean = calloc(n + 1, sizeof *r->curve_mean);
  r->curve_pairs = calloc(n + 1, sizeof *r->curve_pairs);
  if (!r->curve_mean || !r->curve_pairs) return md_fail(f->err, MD_E_NOMEM, "out of memory");
  r->curve_length = n;
  for (size_t k = 0; k < n; k++) {
    const json_t *m = json_array_get(mean, k), *p = json_array_get(pairs, k);
    if (!json_is_number(m) && !json_is_null(m))
      return md_fail(f->err, MD_E_FORMAT, "%s: %s.mean[%zu]: expected a number or null, found %s",
                     f->path, name, k, md_json_kind(m));
    if (!json_is_integer(p) || json_integer_value(p) < 0)
      return md_fail(f->err, MD_E_FORMAT, "%s: %s.pairs[%zu]: expected an integer >= 0, found %s",
                     f->path, name, k, md_json_kind(p));
    r->curve_mean[k] = json_is_null(m) ? NAN : json_number_value(m);
    r->curve_pairs[k] = (uint64_t)json_integer_value(p);
  }
  return MD_OK;
}

static md_status read_region(const md_json_fields *f, const char *name, const json_t *value,
                             md_calibration_region *r) {
  char parent[128];
  snprintf(parent, sizeof parent, "regions.%s", name);
  if (!md_region_name_valid(name, strlen(name)))
    return md_fail(f->err, MD_E_FORMAT, "%s: regions: \"%s\" is not a valid region name", f->path,
                   name);
  if (!json_is_object(value)) return md_json_bad(f, "regions", name, "an object", value);
  r->name = strdup(name);
  if (!r->name) return md_fail(f->err, MD_E_NOMEM, "out of memory");
  md_status s = md_json_boolean(f, value, parent, "pinned", &r->pinned);
  const struct {
    const char *key;
    uint64_t *out;
  } counts[] = {{"tokens", &r->tokens},
                {"observed_tokens", &r->observed_tokens},
                {"refreshed_tokens", &r->refreshed_tokens},
                {"event_rows", &r->event_rows},
                {"visible_pairs", &r->visible_pairs}};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0] && s == MD_OK; i++)
    s = read_u64(f, value, parent, counts[i].key, counts[i].out);
  if (s == MD_OK)
    s = md_json_number(f, value, parent, "refreshed_share", true, &r->refreshed_share);
  if (s == MD_OK) s = md_json_number(f, value, parent, "base_priority", true, &r->base_priority);
  if (s == MD_OK)
    s = md_json_number(f, value, parent, "mean_relative_attention", true,
                       &r->mean_relative_attention);
  if (s == MD_OK && !(isnan(r->refreshed_share) ||
                      (r->refreshed_share >= 0 && r->refreshed_share <= 1)))
    s = md_json_bad(f, parent, "refreshed_share", "a number in [0, 1] or null",
                    json_object_get(value, "refreshed_share"));
  if (s == MD_OK) s = read_curve(f, value, parent, r);
  return s;
}

static md_status read_regions(const md_json_fields *f, const json_t *root, md_calibration *c) {
  const json_t *regions = NULL;
  md_status s = md_json_object(f, root, "", "regions", true, &regions);
  if (s != MD_OK) return s;
  c->regions = calloc(json_object_size(regions) + 1, sizeof *c->regions);
  if (!c->regions) return md_fail(f->err, MD_E_NOMEM, "out of memory");
  const char *name;
  json_t *value;
  json_object_foreach((json_t *)regions, name, value) {
    s = read_region(f, name, value, &c->regions[c->n_regions]);
    c->n_regions++;
    if (s != MD_OK) return s;
  }
  return MD_OK;
}

static md_status read_warnings(const md_json_fields *f, const json_t *root, md_calibration *c) {
  const json_t *warnings = json_object_get(root, "warnings");
  if (!json_is_array(warnings)) return md_json_bad(f, "", "warnings", "an array", warnings);
  size_t i;
  const json_t *line;
  json_array_foreach(warnings, i, line) {
    if (!json_is_string(line))
      return md_fail(f->err, MD_E_FORMAT, "%s: warnings[%zu]: expected a string, found %s",
                     f->path, i, md_json_kind(line));
    md_status s = md_warnings_add(&c->warnings, f->err, "%s", json_string_value(line));
    if (s != MD_OK) return s;
  }
  return MD_OK;
}

static md_status read_document(const md_json_fields *f, const json_t *root, md_calibration *c) {
  if (!json_is_object(root))
    return md_fail(f->err, MD_E_FORMAT, "%s: expected a JSON object, found %s", f->path,
                   md_json_kind(root));
  const json_t *format = json_object_get(root, "format");
  if (!json_is_string(format))
    return md_fail(f->err, MD_E_FORMAT, "%s: format: expected \"" MD_CALIBRATION_FORMAT
                   "\" (is this a calibration file written by memdecay-calibrate extract?)",
                   f->path);
  if (strcmp(json_string_value(format), MD_CALIBRATION_FORMAT) != 0)
    return md_fail(f->err, MD_E_UNSUPPORTED, "%s: format \"%s\" is not supported (expected \""
                   MD_CALIBRATION_FORMAT "\")", f->path, json_string_value(format));
  const json_t *generator = json_object_get(root, "generator");
  const json_t *events = NULL;
  md_status s = MD_OK;
  if (json_is_object(generator))
    s = md_json_string(f, generator, "generator", "version", false, &c->generator_version);
  if (s == MD_OK) s = md_json_string(f, root, "", "created", false, &c->created);
  if (s == MD_OK) s = read_run(f, root, c);
  if (s == MD_OK) s = read_model(f, root, c);
  if (s == MD_OK) s = read_workload(f, root, c);
  if (s == MD_OK) s = md_json_object(f, root, "", "events", true, &events);
  if (s == MD_OK) s = md_json_string(f, events, "events", "path", false, &c->events.path);
  if (s == MD_OK) s = read_u64(f, events, "events", "rows", &c->events.rows);
  if (s == MD_OK) s = read_policy(f, root, c);
  if (s == MD_OK) s = read_regions(f, root, c);
  if (s == MD_OK) s = read_warnings(f, root, c);
  return s;
}

md_status md_calibration_read(const char *path, md_calibration *calibration, md_error *err) {
  memset(calibration, 0, sizeof *calibration);
  json_t *root;
  md_status status = md_json_load(path, &root, err);
  if (status != MD_OK) return status;
  md_json_fields f = {.path = path, .err = err};
  status = read_document(&f, root, calibration);
  json_decref(root);
  if (status != MD_OK) md_calibration_free(calibration);
  return status;
}

const md_calibration_region *md_calibration_find(const md_calibration *calibration,
                                                 const char *name) {
  for (size_t i = 0; i < calibration->n_regions; i++)
    if (!strcmp(calibration->regions[i].name, name)) return &calibration->regions[i];
  return NULL;
}

void md_calibration_free(md_calibration *c) {
  char *strings[] = {c->generator_version, c->created, c->run.path, c->run.device, c->run.heads,
                     c->model.name, c->model.config_sha256, c->model.path,
                     c->model.architecture, c->model.dtype, c->workload.estimand,
                     c->events.path};
  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) free(strings[i]);
  for (size_t i = 0; i < c->run.n_paths; i++) free(c->run.paths[i]);
  free(c->run.paths);
  for (size_t i = 0; i < c->workload.n_sources; i++) {
    free(c->workload.sources[i]);
    if (c->workload.sources_sha256) free(c->workload.sources_sha256[i]);
  }
  free(c->workload.sources);
  free(c->workload.sources_sha256);
  for (size_t i = 0; i < c->n_regions; i++) {
    free(c->regions[i].name);
    free(c->regions[i].curve_mean);
    free(c->regions[i].curve_pairs);
  }
  free(c->regions);
  md_warnings_free(&c->warnings);
  memset(c, 0, sizeof *c);
}
