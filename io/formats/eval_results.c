/* memdecay-eval/1 writer and reader (io/formats/eval_results.h). */
#include "io/formats/eval_results.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/files/atomic_file.h"
#include "io/files/json_fields.h"
#include "base/numfmt.h"
#include "md_build_config.h"

int md_eval_run_index(const md_eval_results *r, const char *policy, double budget) {
  for (size_t i = 0; i < r->n_runs; i++)
    if (!strcmp(r->run_policy[i], policy) && fabs(r->run_budget[i] - budget) < 1e-9) return (int)i;
  return -1;
}

/* ---- writing --------------------------------------------------------------------------- */

typedef struct emitter {
  bool out_of_memory;
} emitter;

static void set(emitter *e, json_t *object, const char *key, json_t *value) {
  if (!value || json_object_set_new(object, key, value) != 0) e->out_of_memory = true;
}

static void push(emitter *e, json_t *array, json_t *value) {
  if (!value || json_array_append_new(array, value) != 0) e->out_of_memory = true;
}

static json_t *string_or_null(const char *s) { return s ? json_string(s) : json_null(); }

static json_t *ratio(size_t part, size_t whole) {
  return whole ? json_real((double)part / (double)whole) : json_null();
}

static json_t *counts(emitter *e, size_t recalled, size_t total) {
  json_t *o = json_object();
  if (!o) return NULL;
  set(e, o, "recalled", json_integer((json_int_t)recalled));
  set(e, o, "total", json_integer((json_int_t)total));
  return o;
}

static json_t *emit_summary(emitter *e, const md_eval_results *r) {
  json_t *summary = json_array();
  if (!summary) return NULL;
  for (size_t run = 0; run < r->n_runs; run++) {
    json_t *o = json_object(), *regions = json_object();
    if (!o || !regions) {
      json_decref(o);
      json_decref(regions);
      return summary;
    }
    size_t rec = 0, tot = 0, prec = 0, ptot = 0, erec = 0, etot = 0;
    for (size_t g = 0; g < r->n_regions; g++) {
      const md_eval_cell *c = md_eval_cell_at(r, run, g);
      rec += c->recalled;
      tot += c->total;
      erec += c->evicted_recalled;
      etot += c->evicted_total;
      if (r->pinned[g]) {
        prec += c->recalled;
        ptot += c->total;
      }
      json_t *cell = counts(e, c->recalled, c->total);
      if (cell) {
        set(e, cell, "flagged", json_integer((json_int_t)c->flagged));
        set(e, cell, "retention", ratio(c->answer_kept, c->answer_tokens));
      }
      set(e, regions, r->regions[g], cell);
    }
    set(e, o, "policy", json_string(r->run_policy[run]));
    set(e, o, "budget", json_real(r->run_budget[run]));
    set(e, o, "recalled", json_integer((json_int_t)rec));
    set(e, o, "total", json_integer((json_int_t)tot));
    set(e, o, "pinned", counts(e, prec, ptot));
    set(e, o, "unpinned", counts(e, rec - prec, tot - ptot));
    set(e, o, "answer_evicted", counts(e, erec, etot));
    set(e, o, "regions", regions);
    push(e, summary, o);
  }
  return summary;
}

static json_t *emit_run(emitter *e, const md_eval_results *r, const md_eval_episode *ep,
                        size_t run) {
  const md_eval_run *x = &ep->runs[run];
  json_t *o = json_object(), *probes = json_array();
  if (!o || !probes) {
    json_decref(o);
    json_decref(probes);
    return NULL;
  }
  set(e, o, "policy", json_string(r->run_policy[run]));
  set(e, o, "budget", json_real(r->run_budget[run]));
  set(e, o, "budget_pages", json_integer(x->budget_pages));
  set(e, o, "max_cached", json_integer(x->max_cached));
  set(e, o, "max_cached_after_eviction", json_integer(x->max_cached_after_eviction));
  set(e, o, "evicted", json_integer(x->evicted));
  set(e, o, "final_cached", json_integer(x->final_cached));
  for (size_t k = 0; k < ep->n_probes; k++) {
    const md_eval_probe *p = &x->probes[k];
    json_t *po = json_object();
    if (!po) {
      e->out_of_memory = true;
      break;
    }
    set(e, po, "correct", json_boolean(p->correct));
    /* A decoded answer may end inside a UTF-8 character: jansson refuses
     * invalid UTF-8, so such bytes are dropped from the copy written. */
    json_t *text = p->output ? json_string(p->output) : json_string("");
    if (!text && p->output) {
      size_t n = strlen(p->output);
      char *clean = malloc(n + 1);
      if (clean) {
        memcpy(clean, p->output, n + 1);
        while (n > 0 && !(text = json_string(clean))) clean[--n] = '\0';
        if (!text) text = json_string("");
        free(clean);
      }
    }
    set(e, po, "output", text);
    set(e, po, "answer_in_region", json_boolean(p->answer_in_region));
    set(e, po, "answer_tokens", json_integer((json_int_t)p->answer_tokens));
    set(e, po, "answer_kept", json_integer((json_int_t)p->answer_kept));
    push(e, probes, po);
  }
  set(e, o, "probes", probes);
  return o;
}

static json_t *emit_episodes(emitter *e, const md_eval_results *r) {
  json_t *episodes = json_array();
  if (!episodes) return NULL;
  for (size_t i = 0; i < r->n_episodes; i++) {
    const md_eval_episode *ep = &r->episodes[i];
    json_t *o = json_object(), *probes = json_array(), *runs = json_array();
    if (!o || !probes || !runs) {
      json_decref(o);
      json_decref(probes);
      json_decref(runs);
      e->out_of_memory = true;
      break;
    }
    set(e, o, "id", json_string(ep->id));
    set(e, o, "line", json_integer((json_int_t)ep->line));
    set(e, o, "prompt_tokens", json_integer((json_int_t)ep->prompt_tokens));
    set(e, o, "continuation_tokens", json_integer((json_int_t)ep->continuation_tokens));
    set(e, o, "chunks", json_integer((json_int_t)ep->chunks));
    set(e, o, "pages", json_integer(ep->pages));
    for (size_t k = 0; k < ep->n_probes; k++) {
      json_t *po = json_object();
      if (!po) {
        e->out_of_memory = true;
        break;
      }
      set(e, po, "region", json_string(ep->probes[k].region));
      set(e, po, "question", json_string(ep->probes[k].question));
      set(e, po, "answer", json_string(ep->probes[k].answer));
      push(e, probes, po);
    }
    set(e, o, "probes", probes);
    for (size_t run = 0; run < r->n_runs; run++) push(e, runs, emit_run(e, r, ep, run));
    set(e, o, "runs", runs);
    push(e, episodes, o);
  }
  return episodes;
}

static json_t *emit_document(emitter *e, const md_eval_results *r, bool reproducible) {
  json_t *root = json_object();
  if (!root) return NULL;
  set(e, root, "format", json_string(MD_EVAL_FORMAT));
  json_t *gen = json_object();
  if (gen) {
    set(e, gen, "name", json_string("memdecay-calibrate"));
    set(e, gen, "version", json_string(MD_VERSION));
  }
  set(e, root, "generator", gen);
  if (r->created && !reproducible) set(e, root, "created", json_string(r->created));
  json_t *model = json_object(), *traces = json_object(), *config = json_object();
  if (model) {
    set(e, model, "path", string_or_null(r->model_path));
    set(e, model, "name", string_or_null(r->model_name));
    set(e, model, "config_sha256", string_or_null(r->model_config_sha256));
  }
  if (traces) {
    set(e, traces, "path", string_or_null(r->traces_path));
    set(e, traces, "sha256", string_or_null(r->traces_sha256));
  }
  if (config) {
    set(e, config, "path", string_or_null(r->config_path));
    set(e, config, "sha256", string_or_null(r->config_sha256));
  }
  set(e, root, "model", model);
  set(e, root, "traces", traces);
  set(e, root, "config", config);
  json_t *settings = json_object();
  if (settings) {
    set(e, settings, "device", json_string(r->device));
    set(e, settings, "threads", json_integer(r->threads));
    if (r->prompt_products[0])
      set(e, settings, "prompt_products", json_string(r->prompt_products));
    set(e, settings, "page_size", json_integer(r->page_size));
    set(e, settings, "max_answer_tokens", json_integer((json_int_t)r->max_answer_tokens));
    set(e, settings, "seed", json_integer((json_int_t)r->seed));
    set(e, settings, "sink_tokens", json_integer(r->sink_tokens));
  }
  set(e, root, "settings", settings);
  json_t *regions = json_array();
  for (size_t g = 0; regions && g < r->n_regions; g++) {
    json_t *o = json_object();
    if (o) {
      set(e, o, "name", json_string(r->regions[g]));
      set(e, o, "pinned", json_boolean(r->pinned[g]));
    }
    push(e, regions, o);
  }
  set(e, root, "regions", regions);
  set(e, root, "episodes_evaluated", json_integer((json_int_t)r->n_episodes));
  set(e, root, "episodes_skipped", json_integer((json_int_t)r->episodes_skipped));
  if (!reproducible && isfinite(r->seconds)) set(e, root, "seconds", json_real(r->seconds));
  set(e, root, "summary", emit_summary(e, r));
  set(e, root, "episodes", emit_episodes(e, r));
  return root;
}

md_status md_eval_results_dump(const md_eval_results *r, bool reproducible, char **text,
                               md_error *err) {
  *text = NULL;
  emitter e = {0};
  json_t *root = emit_document(&e, r, reproducible);
  char *dumped = root && !e.out_of_memory ? md_json_dumps_shortest(root) : NULL;
  json_decref(root);
  if (!dumped) return md_fail(err, MD_E_NOMEM, "out of memory writing the results");
  *text = dumped;
  return MD_OK;
}

md_status md_eval_results_write(const char *path, const md_eval_results *r, bool reproducible,
                                md_error *err) {
  char *text = NULL;
  md_status s = md_eval_results_dump(r, reproducible, &text, err);
  if (s == MD_OK) s = md_write_file_atomic(path, text, strlen(text), err);
  free(text);
  return s;
}

/* ---- reading ---------------------------------------------------------------------------- */

static md_status read_count(const md_json_fields *f, const json_t *o, const char *parent,
                            const char *key, size_t *out) {
  int64_t v = 0;
  md_status s = md_json_integer(f, o, parent, key, true, 0, &v);
  if (s == MD_OK) *out = (size_t)v;
  return s;
}

static md_status read_regions(const md_json_fields *f, const json_t *root, md_eval_results *r) {
  const json_t *regions = json_object_get(root, "regions");
  if (!json_is_array(regions)) return md_json_bad(f, "", "regions", "an array", regions);
  size_t n = json_array_size(regions);
  r->regions = calloc(n ? n : 1, sizeof *r->regions);
  r->pinned = calloc(n ? n : 1, sizeof *r->pinned);
  if (!r->regions || !r->pinned) return md_fail(f->err, MD_E_NOMEM, "out of memory");
  for (size_t g = 0; g < n; g++) {
    char parent[32];
    snprintf(parent, sizeof parent, "regions[%zu]", g);
    const json_t *o = json_array_get(regions, g);
    if (!json_is_object(o)) return md_json_bad(f, "", parent, "an object", o);
    md_status s = md_json_string(f, o, parent, "name", true, &r->regions[g]);
    if (s != MD_OK) return s;
    r->n_regions = g + 1;
    for (size_t h = 0; h < g; h++)
      if (!strcmp(r->regions[h], r->regions[g]))
        return md_fail(f->err, MD_E_FORMAT, "%s: %s.name: region \"%s\" is listed twice", f->path,
                       parent, r->regions[g]);
    if ((s = md_json_boolean(f, o, parent, "pinned", &r->pinned[g])) != MD_OK) return s;
  }
  return MD_OK;
}

static md_status read_summary(const md_json_fields *f, const json_t *root, md_eval_results *r) {
  const json_t *summary = json_object_get(root, "summary");
  if (!json_is_array(summary)) return md_json_bad(f, "", "summary", "an array", summary);
  size_t n = json_array_size(summary);
  if (n == 0 || n > MD_EVAL_MAX_RUNS)
    return md_fail(f->err, MD_E_FORMAT, "%s: summary: expected 1 to %d runs, found %zu", f->path,
                   MD_EVAL_MAX_RUNS, n);
  r->cells = calloc(n * (r->n_regions ? r->n_regions : 1), sizeof *r->cells);
  if (!r->cells) return md_fail(f->err, MD_E_NOMEM, "out of memory");
  for (size_t run = 0; run < n; run++) {
    char parent[48];
    snprintf(parent, sizeof parent, "summary[%zu]", run);
    const json_t *o = json_array_get(summary, run);
    if (!json_is_object(o)) return md_json_bad(f, "", parent, "an object", o);
    char *policy = NULL;
    md_status s = md_json_string(f, o, parent, "policy", true, &policy);
    if (s != MD_OK) return s;
    size_t len = strlen(policy);
    if (len >= MD_EVAL_POLICY_NAME_MAX) {
      free(policy);
      return md_fail(f->err, MD_E_FORMAT, "%s: %s.policy: longer than %d bytes", f->path, parent,
                     MD_EVAL_POLICY_NAME_MAX - 1);
    }
    memcpy(r->run_policy[run], policy, len + 1);
    free(policy);
    double budget = 0;
    if ((s = md_json_number(f, o, parent, "budget", false, &budget)) != MD_OK) return s;
    if (!(budget > 0 && budget <= 1))
      return md_fail(f->err, MD_E_FORMAT, "%s: %s.budget: %g is outside (0, 1]", f->path, parent,
                     budget);
    r->run_budget[run] = budget;
    if (md_eval_run_index(r, r->run_policy[run], budget) >= 0)
      return md_fail(f->err, MD_E_FORMAT, "%s: %s: policy %s at budget %g is listed twice",
                     f->path, parent, r->run_policy[run], budget);
    r->n_runs = run + 1;
    const json_t *regions = NULL;
    if ((s = md_json_object(f, o, parent, "regions", true, &regions)) != MD_OK) return s;
    char rparent[96];
    snprintf(rparent, sizeof rparent, "%s.regions", parent);
    for (size_t g = 0; g < r->n_regions; g++) {
      const json_t *cell = NULL;
      if ((s = md_json_object(f, regions, rparent, r->regions[g], true, &cell)) != MD_OK) return s;
      char cparent[192];
      snprintf(cparent, sizeof cparent, "%s.%s", rparent, r->regions[g]);
      md_eval_cell *c = md_eval_cell_at(r, run, g);
      if ((s = read_count(f, cell, cparent, "recalled", &c->recalled)) != MD_OK ||
          (s = read_count(f, cell, cparent, "total", &c->total)) != MD_OK ||
          (s = read_count(f, cell, cparent, "flagged", &c->flagged)) != MD_OK)
        return s;
      /* The retention comes back as a share out of a fixed 10^6 "tokens":
       * the reader has the ratio, not the counts. */
      double retention = NAN;
      if ((s = md_json_number(f, cell, cparent, "retention", true, &retention)) != MD_OK) return s;
      if (!isnan(retention) && !(retention >= 0.0 && retention <= 1.0))
        return md_fail(f->err, MD_E_FORMAT, "%s: %s.retention: %g is outside [0, 1]", f->path,
                       cparent, retention);
      if (!isnan(retention)) {
        c->answer_tokens = 1000000;
        c->answer_kept = (size_t)llround(retention * 1e6);
      }
      if (c->recalled > c->total)
        return md_fail(f->err, MD_E_FORMAT, "%s: %s.recalled: %zu is more than total %zu", f->path,
                       cparent, c->recalled, c->total);
    }
  }
  return MD_OK;
}

md_status md_eval_results_read(const char *path, md_eval_results *r, md_error *err) {
  memset(r, 0, sizeof *r);
  r->seconds = NAN;
  json_t *root = NULL;
  md_status s = md_json_load(path, &root, err);
  if (s != MD_OK) return s;
  md_json_fields f = {.path = path, .err = err};
  char *format = NULL;
  if (!json_is_object(root)) {
    s = md_json_bad(&f, "", "", "an object", root);
  } else if ((s = md_json_string(&f, root, "", "format", true, &format)) == MD_OK &&
             strcmp(format, MD_EVAL_FORMAT) != 0) {
    s = md_fail(err, MD_E_FORMAT, "%s: format: \"%s\" is not %s", path, format, MD_EVAL_FORMAT);
  }
  free(format);
  const json_t *model = NULL, *settings = NULL;
  if (s == MD_OK) s = md_json_object(&f, root, "", "model", true, &model);
  if (s == MD_OK) s = md_json_string(&f, model, "model", "name", false, &r->model_name);
  if (s == MD_OK) s = md_json_string(&f, model, "model", "config_sha256", false, &r->model_config_sha256);
  if (s == MD_OK) s = md_json_object(&f, root, "", "settings", true, &settings);
  int64_t page = 0;
  if (s == MD_OK) s = md_json_integer(&f, settings, "settings", "page_size", true, 1, &page);
  if (s == MD_OK) r->page_size = page > 1 << 30 ? 1 << 30 : (int)page;
  int64_t episodes = 0;
  if (s == MD_OK) s = md_json_integer(&f, root, "", "episodes_evaluated", true, 0, &episodes);
  if (s == MD_OK) r->n_episodes = (size_t)episodes;
  if (s == MD_OK) s = read_regions(&f, root, r);
  if (s == MD_OK) s = read_summary(&f, root, r);
  json_decref(root);
  if (s != MD_OK) md_eval_results_free(r);
  return s;
}

void md_eval_results_free(md_eval_results *r) {
  if (!r) return;
  for (size_t i = 0; r->episodes && i < r->n_episodes; i++) {
    md_eval_episode *e = &r->episodes[i];
    for (size_t k = 0; e->probes && k < e->n_probes; k++) {
      free(e->probes[k].region);
      free(e->probes[k].question);
      free(e->probes[k].answer);
    }
    for (size_t run = 0; e->runs && run < r->n_runs; run++) {
      for (size_t k = 0; e->runs[run].probes && k < e->n_probes; k++)
        free(e->runs[run].probes[k].output);
      free(e->runs[run].probes);
    }
    free(e->probes);
    free(e->runs);
    free(e->id);
  }
  free(r->episodes);
  for (size_t g = 0; r->regions && g < r->n_regions; g++) free(r->regions[g]);
  free(r->regions);
  free(r->pinned);
  free(r->cells);
  free(r->created);
  free(r->model_path);
  free(r->model_name);
  free(r->model_config_sha256);
  free(r->traces_path);
  free(r->traces_sha256);
  free(r->config_path);
  free(r->config_sha256);
  memset(r, 0, sizeof *r);
}
