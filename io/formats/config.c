#include "io/formats/config.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/files/json_fields.h"
#include "base/numfmt.h"
#include "base/policy_defaults.h"
#include "base/regions.h"

void md_config_policy_defaults(md_config_policy *policy) {
  *policy = (md_config_policy){
      .source = "defaults",
      .page_size = MD_POLICY_PAGE_SIZE_DEFAULT,
      .tau = MD_POLICY_TAU_DEFAULT,
      .ewma_beta = MD_POLICY_EWMA_BETA_DEFAULT,
      .alpha = MD_POLICY_ALPHA_DEFAULT,
      .attention_norm = {.kind = "uniform",
                         .kappa = MD_POLICY_KAPPA_DEFAULT,
                         .quantile = MD_POLICY_NORM_QUANTILE_DEFAULT},
  };
}

/* ---- writing -------------------------------------------------------------- */

/* Builds the document section by section; remembers which fields of the
 * current section were written as null so that a warning can name them. */
typedef struct emitter {
  bool out_of_memory;
  const char *section;   /* "regions.system", "tests.logrank", "policy", ... */
  char nulled[512];      /* "lambda, half_life, ..." for the current section */
  json_t *extra_warnings;
  const md_warnings *warnings;
} emitter;

static void set(emitter *e, json_t *object, const char *key, json_t *value) {
  if (!value || json_object_set_new(object, key, value) != 0) e->out_of_memory = true;
}

static void push(emitter *e, json_t *array, json_t *value) {
  if (!value || json_array_append_new(array, value) != 0) e->out_of_memory = true;
}

static void note_null(emitter *e, const char *field) {
  size_t used = strlen(e->nulled);
  snprintf(e->nulled + used, sizeof e->nulled - used, "%s%s", used ? ", " : "", field);
}

static json_t *real(emitter *e, const char *field, double value) {
  if (isfinite(value)) return json_real(value);
  note_null(e, field);
  return json_null();
}

static json_t *interval(emitter *e, const char *field, const double bounds[2]) {
  json_t *array = json_array();
  if (!array) return NULL;
  char name[96];
  for (int i = 0; i < 2; i++) {
    snprintf(name, sizeof name, "%s[%d]", field, i);
    push(e, array, real(e, name, bounds[i]));
  }
  return array;
}

/* An integer-valued count as a JSON integer (256, not 256.0). */
static json_t *count_value(double value) {
  if (value == floor(value) && fabs(value) < 9007199254740992.0)
    return json_integer((json_int_t)value);
  return json_real(value);
}

static json_t *text_or_null(const char *text) { return text ? json_string(text) : json_null(); }

static void begin_section(emitter *e, const char *section) {
  e->section = section;
  e->nulled[0] = '\0';
}

/* Every null gets a line in "warnings" naming it; the caller adds the
 * reasons (lines starting with the same "section:"). */
static void end_section(emitter *e) {
  if (!e->nulled[0]) return;
  char line[800];
  snprintf(line, sizeof line, "%s: written as null (not estimable from these data): %s",
           e->section, e->nulled);
  push(e, e->extra_warnings, json_string(line));
}

static json_t *emit_exponential(emitter *e, const md_config_exponential *fit) {
  json_t *o = json_object();
  if (!o) return NULL;
  set(e, o, "lambda", real(e, "fit.exponential.lambda", fit->lambda));
  set(e, o, "lambda_ci", interval(e, "fit.exponential.lambda_ci", fit->lambda_ci));
  set(e, o, "ci_method", text_or_null(fit->ci_method));
  set(e, o, "lambda_ci_profile",
      interval(e, "fit.exponential.lambda_ci_profile", fit->lambda_ci_profile));
  set(e, o, "loglik", real(e, "fit.exponential.loglik", fit->loglik));
  set(e, o, "aic", real(e, "fit.exponential.aic", fit->aic));
  return o;
}

static json_t *emit_weibull(emitter *e, const md_config_weibull *fit) {
  json_t *o = json_object();
  if (!o) return NULL;
  set(e, o, "shape", real(e, "fit.weibull.shape", fit->shape));
  set(e, o, "scale", real(e, "fit.weibull.scale", fit->scale));
  set(e, o, "shape_ci", interval(e, "fit.weibull.shape_ci", fit->shape_ci));
  set(e, o, "scale_ci", interval(e, "fit.weibull.scale_ci", fit->scale_ci));
  set(e, o, "loglik", real(e, "fit.weibull.loglik", fit->loglik));
  set(e, o, "aic", real(e, "fit.weibull.aic", fit->aic));
  set(e, o, "lrt_statistic", real(e, "fit.weibull.lrt_statistic", fit->lrt_statistic));
  set(e, o, "lrt_p", real(e, "fit.weibull.lrt_p", fit->lrt_p));
  return o;
}

static json_t *emit_km(emitter *e, const md_config_km *km) {
  json_t *o = json_object();
  if (!o) return NULL;
  set(e, o, "median", real(e, "fit.km.median", km->median));
  set(e, o, "median_ci", interval(e, "fit.km.median_ci", km->median_ci));
  set(e, o, "band", text_or_null(km->band));
  return o;
}

static json_t *emit_fit(emitter *e, const md_config_fit *fit) {
  json_t *o = json_object();
  if (!o) return NULL;
  set(e, o, "n", json_integer((json_int_t)fit->n));
  set(e, o, "weight", real(e, "fit.weight", fit->weight));
  set(e, o, "events", real(e, "fit.events", fit->events));
  set(e, o, "exposure", real(e, "fit.exposure", fit->exposure));
  set(e, o, "ci_level", real(e, "fit.ci_level", fit->ci_level));
  set(e, o, "exponential", emit_exponential(e, &fit->exponential));
  set(e, o, "weibull", emit_weibull(e, &fit->weibull));
  set(e, o, "km", emit_km(e, &fit->km));
  return o;
}

static json_t *emit_measured(emitter *e, const md_config_region_measured *measured) {
  json_t *o = json_object();
  if (!o) return NULL;
  set(e, o, "refreshed_share", real(e, "measured.refreshed_share", measured->refreshed_share));
  set(e, o, "mean_relative_attention",
      real(e, "measured.mean_relative_attention", measured->mean_relative_attention));
  set(e, o, "tokens", isfinite(measured->tokens) ? count_value(measured->tokens)
                                                  : real(e, "measured.tokens", measured->tokens));
  return o;
}

static json_t *emit_identification(emitter *e, const md_config_identification *id) {
  json_t *o = json_object();
  if (!o) return NULL;
  set(e, o, "identified", json_boolean(id->identified));
  set(e, o, "reason", text_or_null(id->reason));
  set(e, o, "window", real(e, "identification.window", id->window));
  set(e, o, "censored_share", real(e, "identification.censored_share", id->censored_share));
  set(e, o, "half_life_half_window",
      real(e, "identification.half_life_half_window", id->half_life_half_window));
  return o;
}

static json_t *emit_region(emitter *e, const md_config_region *region) {
  json_t *o = json_object();
  if (!o) return NULL;
  set(e, o, "pinned", json_boolean(region->pinned));
  set(e, o, "base_priority", real(e, "base_priority", region->base_priority));
  set(e, o, "base_priority_source", text_or_null(region->base_priority_source));
  set(e, o, "lambda", real(e, "lambda", region->lambda));
  set(e, o, "half_life", real(e, "half_life", region->half_life));
  set(e, o, "half_life_ci", interval(e, "half_life_ci", region->half_life_ci));
  if (region->identification.present)
    set(e, o, "identification", emit_identification(e, &region->identification));
  set(e, o, "fit", emit_fit(e, &region->fit));
  if (region->measured.present) set(e, o, "measured", emit_measured(e, &region->measured));
  return o;
}

static json_t *emit_regions(emitter *e, const md_config *config) {
  json_t *o = json_object();
  if (!o) return NULL;
  for (size_t i = 0; i < config->n_regions; i++) {
    const md_config_region *region = &config->regions[i];
    char section[96];
    snprintf(section, sizeof section, "regions.%s", region->name);
    begin_section(e, section);
    set(e, o, region->name, emit_region(e, region));
    end_section(e);
  }
  return o;
}

static json_t *emit_pooled(emitter *e, const md_config_pooled *pooled) {
  json_t *o = json_object();
  json_t *regions = json_array();
  json_t *fit = json_object();
  if (!o || !regions || !fit) {
    json_decref(o);
    json_decref(regions);
    json_decref(fit);
    return NULL;
  }
  begin_section(e, "pooled");
  for (size_t i = 0; i < pooled->n_regions; i++) push(e, regions, json_string(pooled->regions[i]));
  set(e, o, "regions", regions);
  set(e, o, "lambda", real(e, "lambda", pooled->lambda));
  set(e, o, "half_life", real(e, "half_life", pooled->half_life));
  set(e, o, "half_life_ci", interval(e, "half_life_ci", pooled->half_life_ci));
  set(e, fit, "n", json_integer((json_int_t)pooled->n));
  set(e, fit, "weight", real(e, "fit.weight", pooled->weight));
  set(e, fit, "events", real(e, "fit.events", pooled->events));
  set(e, fit, "exposure", real(e, "fit.exposure", pooled->exposure));
  set(e, fit, "ci_level", real(e, "fit.ci_level", pooled->ci_level));
  set(e, fit, "exponential", emit_exponential(e, &pooled->exponential));
  set(e, o, "fit", fit);
  end_section(e);
  return o;
}

static json_t *emit_logrank_result(emitter *e, const md_config_logrank *test, const char *field,
                                   bool pair) {
  json_t *o = json_object();
  if (!o) return NULL;
  char name[160];
  if (pair) {
    json_t *regions = json_array();
    if (regions) {
      push(e, regions, json_string(test->regions[0]));
      push(e, regions, json_string(test->regions[1]));
    }
    set(e, o, "regions", regions);
  }
  snprintf(name, sizeof name, "%s.statistic", field);
  set(e, o, "statistic", real(e, name, test->statistic));
  set(e, o, "df", json_integer(test->df));
  snprintf(name, sizeof name, "%s.p", field);
  set(e, o, "p", real(e, name, test->p));
  return o;
}

static json_t *emit_tests(emitter *e, const md_config_tests *tests) {
  json_t *logrank = json_object();
  json_t *regions = json_array();
  json_t *pairwise = json_array();
  json_t *o = json_object();
  if (!logrank || !regions || !pairwise || !o) {
    json_decref(logrank);
    json_decref(regions);
    json_decref(pairwise);
    json_decref(o);
    return NULL;
  }
  begin_section(e, "tests.logrank");
  set(e, logrank, "rho", json_integer(0));
  for (size_t i = 0; i < tests->n_regions; i++) push(e, regions, json_string(tests->regions[i]));
  set(e, logrank, "regions", regions);
  set(e, logrank, "overall", emit_logrank_result(e, &tests->overall, "overall", false));
  for (size_t i = 0; i < tests->n_pairwise; i++) {
    const md_config_logrank *pair = &tests->pairwise[i];
    char field[160];
    snprintf(field, sizeof field, "pairwise[%s,%s]", pair->regions[0], pair->regions[1]);
    push(e, pairwise, emit_logrank_result(e, pair, field, true));
  }
  set(e, logrank, "pairwise", pairwise);
  end_section(e);
  set(e, o, "logrank", logrank);
  return o;
}

static json_t *emit_policy(emitter *e, const md_config_policy *policy) {
  json_t *o = json_object();
  json_t *norm = json_object();
  if (!o || !norm) {
    json_decref(o);
    json_decref(norm);
    return NULL;
  }
  begin_section(e, "policy");
  set(e, o, "source", text_or_null(policy->source));
  set(e, o, "page_size", json_integer(policy->page_size));
  set(e, o, "tau", real(e, "tau", policy->tau));
  set(e, o, "ewma_beta", real(e, "ewma_beta", policy->ewma_beta));
  set(e, o, "alpha", real(e, "alpha", policy->alpha));
  set(e, norm, "kind", text_or_null(policy->attention_norm.kind));
  set(e, norm, "kappa", real(e, "attention_norm.kappa", policy->attention_norm.kappa));
  set(e, norm, "quantile", real(e, "attention_norm.quantile", policy->attention_norm.quantile));
  set(e, o, "attention_norm", norm);
  end_section(e);
  return o;
}

static json_t *emit_traces(emitter *e, const md_config_workload *workload) {
  json_t *traces = json_array();
  if (!traces) return NULL;
  for (size_t i = 0; i < workload->n_traces; i++) {
    json_t *trace = json_object();
    if (trace) {
      set(e, trace, "path", json_string(workload->traces[i].path));
      set(e, trace, "sha256", text_or_null(workload->traces[i].sha256));
    }
    push(e, traces, trace);
  }
  return traces;
}

/* Only what is known is written: unknown workload facts are left out. */
static json_t *emit_workload(emitter *e, const md_config_workload *workload) {
  json_t *o = json_object();
  json_t *sources = json_array();
  if (!o || !sources) {
    json_decref(o);
    json_decref(sources);
    return NULL;
  }
  for (size_t i = 0; i < workload->n_sources; i++) push(e, sources, json_string(workload->sources[i]));
  set(e, o, "sources", sources);
  if (workload->n_traces) set(e, o, "traces", emit_traces(e, workload));
  set(e, o, "rows", json_integer((json_int_t)workload->rows));
  if (isfinite(workload->weight)) set(e, o, "weight", json_real(workload->weight));
  if (workload->estimand) set(e, o, "estimand", json_string(workload->estimand));
  const struct {
    const char *key;
    double value;
    bool is_count;
  } facts[] = {{"episodes", workload->episodes, true},
               {"tokens", workload->tokens, true},
               {"decode_steps", workload->decode_steps, true},
               {"tau", workload->tau, false},
               {"guard", workload->guard, true}};
  for (size_t i = 0; i < sizeof facts / sizeof facts[0]; i++) {
    if (!isfinite(facts[i].value)) continue;
    set(e, o, facts[i].key, facts[i].is_count ? count_value(facts[i].value) : json_real(facts[i].value));
  }
  return o;
}

static json_t *emit_model(emitter *e, const md_config *config) {
  if (!config->model_name) return json_null();
  json_t *o = json_object();
  if (!o) return NULL;
  set(e, o, "name", json_string(config->model_name));
  set(e, o, "config_sha256", text_or_null(config->model_config_sha256));
  return o;
}

static json_t *emit_warnings(emitter *e) {
  json_t *array = json_array();
  if (!array) return NULL;
  for (size_t i = 0; e->warnings && i < e->warnings->n; i++) {
    push(e, array, json_string(e->warnings->lines[i]));
  }
  size_t index;
  json_t *line;
  json_array_foreach(e->extra_warnings, index, line) push(e, array, json_incref(line));
  return array;
}

static json_t *emit_document(emitter *e, const md_config *config) {
  json_t *root = json_object();
  json_t *generator = json_object();
  if (!root || !generator) {
    json_decref(root);
    json_decref(generator);
    return NULL;
  }
  set(e, root, "format", json_string(MD_CONFIG_FORMAT));
  set(e, generator, "name", json_string("memdecay-calibrate"));
  set(e, generator, "version", json_string(config->generator_version));
  set(e, root, "generator", generator);
  if (config->created) set(e, root, "created", json_string(config->created));
  set(e, root, "model", emit_model(e, config));
  set(e, root, "workload", emit_workload(e, &config->workload));
  set(e, root, "policy", emit_policy(e, &config->policy));
  set(e, root, "regions", emit_regions(e, config));
  if (config->pooled.present) set(e, root, "pooled", emit_pooled(e, &config->pooled));
  if (config->tests.present) set(e, root, "tests", emit_tests(e, &config->tests));
  set(e, root, "warnings", emit_warnings(e));
  return root;
}

md_status md_config_dump(const md_config *config, char **text, md_error *err) {
  *text = NULL;
  emitter e = {.warnings = config->warnings, .extra_warnings = json_array()};
  json_t *root = e.extra_warnings ? emit_document(&e, config) : NULL;
  char *dumped = root && !e.out_of_memory ? md_json_dumps_shortest(root) : NULL;
  json_decref(root);
  json_decref(e.extra_warnings);
  if (!dumped) return md_fail(err, MD_E_NOMEM, "out of memory writing the config");
  *text = dumped;
  return MD_OK;
}

/* ---- reading ---------------------------------------------------------------- */

static const char *json_kind(const json_t *value) {
  switch (json_typeof(value)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
  }
  return "something else";
}

/* Reads a number (or null, when allowed) at `field`; NaN stands for null. */
static md_status read_number(const char *path, const char *field, const json_t *value,
                             bool null_ok, double *out, md_error *err) {
  *out = NAN;
  if (value && json_is_number(value)) {
    *out = json_number_value(value);
    return MD_OK;
  }
  if (null_ok && value && json_is_null(value)) {
    *out = NAN;
    return MD_OK;
  }
  if (!value) return md_fail(err, MD_E_FORMAT, "%s: %s: missing", path, field);
  return md_fail(err, MD_E_FORMAT, "%s: %s: expected a number%s, found %s", path, field,
                 null_ok ? " or null" : "", json_kind(value));
}

static md_status read_interval(const char *path, const char *field, const json_t *value,
                               double out[2], md_error *err) {
  out[0] = out[1] = NAN;
  if (value && json_is_null(value)) return MD_OK;
  if (!value || !json_is_array(value) || json_array_size(value) != 2) {
    return md_fail(err, MD_E_FORMAT, "%s: %s: expected [lower, upper] or null, found %s", path,
                   field, value ? json_kind(value) : "nothing");
  }
  for (size_t i = 0; i < 2; i++) {
    char name[192];
    snprintf(name, sizeof name, "%s[%zu]", field, i);
    md_status status = read_number(path, name, json_array_get(value, i), true, &out[i], err);
    if (status != MD_OK) return status;
  }
  return MD_OK;
}

/* Reads an int at `field` (a JSON integer within int's range). */
static md_status read_int(const char *path, const char *field, const json_t *value, int *out,
                          md_error *err) {
  *out = 0;
  if (value && json_is_integer(value) && json_integer_value(value) >= INT_MIN &&
      json_integer_value(value) <= INT_MAX) {
    *out = (int)json_integer_value(value);
    return MD_OK;
  }
  if (!value) return md_fail(err, MD_E_FORMAT, "%s: %s: missing", path, field);
  if (json_is_integer(value)) {
    return md_fail(err, MD_E_FORMAT, "%s: %s: %" JSON_INTEGER_FORMAT " is out of range", path,
                   field, json_integer_value(value));
  }
  return md_fail(err, MD_E_FORMAT, "%s: %s: expected an integer, found %s", path, field,
                 json_is_number(value) ? "a fraction" : json_kind(value));
}

/* A field only the runtime needs: validated when `strict` (MD_CONFIG_READ_POLICY);
 * otherwise taken when it is a number and NaN when not, so that `check`
 * accepts exactly what it always did. */
static md_status read_runtime_number(const char *path, const char *field, const json_t *value,
                                     bool null_ok, bool strict, double *out, md_error *err) {
  if (strict) return read_number(path, field, value, null_ok, out, err);
  *out = value && json_is_number(value) ? json_number_value(value) : NAN;
  return MD_OK;
}

static md_status read_region(const char *path, const char *name, const json_t *value,
                             bool strict, md_config_read_region *region, md_error *err) {
  char field[160];
  region->name = NULL;
  region->pinned = false;
  region->base_priority = region->half_life = region->lambda = NAN;
  region->half_life_ci[0] = region->half_life_ci[1] = NAN;
  if (!md_region_name_valid(name, strlen(name))) {
    return md_fail(err, MD_E_FORMAT, "%s: regions: \"%s\" is not a valid region name", path, name);
  }
  if (!json_is_object(value)) {
    return md_fail(err, MD_E_FORMAT, "%s: regions.%s: expected an object, found %s", path, name,
                   json_kind(value));
  }
  region->name = strdup(name);
  if (!region->name) return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  const json_t *pinned = json_object_get(value, "pinned");
  if (!json_is_boolean(pinned)) {
    return md_fail(err, MD_E_FORMAT, "%s: regions.%s.pinned: expected true or false, found %s",
                   path, name, pinned ? json_kind(pinned) : "nothing");
  }
  region->pinned = json_is_true(pinned);
  snprintf(field, sizeof field, "regions.%s.base_priority", name);
  md_status status = read_number(path, field, json_object_get(value, "base_priority"), false,
                                 &region->base_priority, err);
  if (status != MD_OK) return status;
  snprintf(field, sizeof field, "regions.%s.half_life", name);
  status = read_number(path, field, json_object_get(value, "half_life"), true, &region->half_life,
                       err);
  if (status != MD_OK) return status;
  snprintf(field, sizeof field, "regions.%s.half_life_ci", name);
  status = read_interval(path, field, json_object_get(value, "half_life_ci"), region->half_life_ci,
                         err);
  if (status != MD_OK) return status;
  snprintf(field, sizeof field, "regions.%s.lambda", name);
  return read_runtime_number(path, field, json_object_get(value, "lambda"), true, strict,
                             &region->lambda, err);
}

static md_status read_policy(const char *path, const json_t *policy, bool strict,
                             md_config_summary *summary, md_error *err) {
  summary->alpha = summary->kappa = NAN;
  summary->page_size = 0;
  summary->tau = summary->ewma_beta = NAN;
  if (!strict && (!policy || json_is_null(policy))) return MD_OK;
  if (!policy) return md_fail(err, MD_E_FORMAT, "%s: policy: missing", path);
  if (!json_is_object(policy)) {
    return md_fail(err, MD_E_FORMAT, "%s: policy: expected an object, found %s", path,
                   json_kind(policy));
  }
  const json_t *page_size = json_object_get(policy, "page_size");
  md_status status = MD_OK;
  if (strict) {
    status = read_int(path, "policy.page_size", page_size, &summary->page_size, err);
  } else if (read_int(path, "policy.page_size", page_size, &summary->page_size, NULL) != MD_OK) {
    summary->page_size = 0;
  }
  if (status == MD_OK) {
    status = read_runtime_number(path, "policy.tau", json_object_get(policy, "tau"), false, strict,
                                 &summary->tau, err);
  }
  if (status == MD_OK) {
    status = read_runtime_number(path, "policy.ewma_beta", json_object_get(policy, "ewma_beta"),
                                 false, strict, &summary->ewma_beta, err);
  }
  if (status != MD_OK) return status;
  const json_t *alpha = json_object_get(policy, "alpha");
  if (alpha || strict) {
    status = read_number(path, "policy.alpha", alpha, true, &summary->alpha, err);
    if (status != MD_OK) return status;
  }
  const json_t *norm = json_object_get(policy, "attention_norm");
  if (strict && !norm) return md_fail(err, MD_E_FORMAT, "%s: policy.attention_norm: missing", path);
  if (!strict && (!norm || json_is_null(norm))) return MD_OK;
  if (!json_is_object(norm)) {
    return md_fail(err, MD_E_FORMAT, "%s: policy.attention_norm: expected an object, found %s",
                   path, json_kind(norm));
  }
  const json_t *kappa = json_object_get(norm, "kappa");
  if (!kappa && !strict) return MD_OK;
  return read_number(path, "policy.attention_norm.kappa", kappa, true, &summary->kappa, err);
}

/* "pooled", when present: strict (the runtime) insists on an object with
 * lambda and half_life, numbers or null; `check` takes what is there. */
static md_status read_pooled(const char *path, const json_t *pooled, bool strict,
                             md_config_summary *summary, md_error *err) {
  summary->has_pooled = false;
  summary->pooled_lambda = summary->pooled_half_life = NAN;
  if (!pooled) return MD_OK;
  if (!json_is_object(pooled)) {
    if (!strict) return MD_OK;
    return md_fail(err, MD_E_FORMAT, "%s: pooled: expected an object, found %s", path,
                   json_kind(pooled));
  }
  summary->has_pooled = true;
  md_status status = read_runtime_number(path, "pooled.lambda", json_object_get(pooled, "lambda"),
                                         true, strict, &summary->pooled_lambda, err);
  if (status != MD_OK) return status;
  return read_runtime_number(path, "pooled.half_life", json_object_get(pooled, "half_life"), true,
                             strict, &summary->pooled_half_life, err);
}

static md_status read_document(const char *path, const json_t *root, bool strict,
                               md_config_summary *summary, md_error *err) {
  if (!json_is_object(root)) {
    return md_fail(err, MD_E_FORMAT, "%s: expected a JSON object at the top, found %s", path,
                   json_kind(root));
  }
  const json_t *format = json_object_get(root, "format");
  if (!json_is_string(format)) {
    return md_fail(err, MD_E_FORMAT, "%s: format: expected the string \"" MD_CONFIG_FORMAT
                   "\" (is this a memdecay.json?)", path);
  }
  if (strcmp(json_string_value(format), MD_CONFIG_FORMAT) != 0) {
    return md_fail(err, MD_E_UNSUPPORTED, "%s: format \"%s\" is not supported (expected \"%s\")",
                   path, json_string_value(format), MD_CONFIG_FORMAT);
  }
  const json_t *warnings = json_object_get(root, "warnings");
  if (warnings && !json_is_array(warnings)) {
    return md_fail(err, MD_E_FORMAT, "%s: warnings: expected an array, found %s", path,
                   json_kind(warnings));
  }
  const json_t *regions = json_object_get(root, "regions");
  if (!json_is_object(regions)) {
    return md_fail(err, MD_E_FORMAT, "%s: regions: expected an object, found %s", path,
                   regions ? json_kind(regions) : "nothing");
  }
  summary->regions = calloc(json_object_size(regions) + 1, sizeof *summary->regions);
  if (!summary->regions) return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  const char *name;
  json_t *value;
  json_object_foreach((json_t *)regions, name, value) {
    md_status status =
        read_region(path, name, value, strict, &summary->regions[summary->n_regions], err);
    summary->n_regions++;
    if (status != MD_OK) return status;
  }
  md_status status = read_pooled(path, json_object_get(root, "pooled"), strict, summary, err);
  if (status != MD_OK) return status;
  return read_policy(path, json_object_get(root, "policy"), strict, summary, err);
}

md_status md_config_read(const char *path, md_config_summary *summary, md_error *err) {
  return md_config_read_as(path, MD_CONFIG_READ_CHECK, summary, err);
}

md_status md_config_read_as(const char *path, md_config_read_mode mode,
                            md_config_summary *summary, md_error *err) {
  memset(summary, 0, sizeof *summary);
  json_t *root;
  md_status status = md_json_load(path, &root, err);
  if (status != MD_OK) return status;
  status = read_document(path, root, mode == MD_CONFIG_READ_POLICY, summary, err);
  json_decref(root);
  if (status != MD_OK) md_config_summary_free(summary);
  return status;
}

void md_config_summary_free(md_config_summary *summary) {
  for (size_t i = 0; i < summary->n_regions; i++) free(summary->regions[i].name);
  free(summary->regions);
  memset(summary, 0, sizeof *summary);
}
