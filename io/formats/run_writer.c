#include "io/formats/run_writer.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utf8proc.h>

#include "io/files/atomic_file.h"
#include "io/files/csv.h"
#include "io/files/json_fields.h"

struct md_run_record {
  json_t *root;
};

/* ---- building ------------------------------------------------------------------ */

/* json_object_set_new that remembers a failure (out of memory) in *ok. */
static void put(json_t *object, const char *key, json_t *value, bool *ok) {
  if (!value || json_object_set_new(object, key, value) != 0) *ok = false;
}

static json_t *model_object(const md_run_model *m, bool *ok) {
  json_t *o = json_object();
  if (!o) {
    *ok = false;
    return NULL;
  }
  put(o, "path", json_string(m->path), ok);
  put(o, "name", json_string(m->name), ok);
  put(o, "architecture", json_string(m->architecture), ok);
  put(o, "config_sha256", json_string(m->config_sha256), ok);
  put(o, "dtype", json_string(m->dtype), ok);
  put(o, "layers", json_integer(m->layers), ok);
  put(o, "heads", json_integer(m->heads), ok);
  put(o, "kv_heads", json_integer(m->kv_heads), ok);
  put(o, "hidden", json_integer(m->hidden), ok);
  put(o, "vocab", json_integer(m->vocab), ok);
  put(o, "max_position_embeddings", json_integer(m->max_position_embeddings), ok);
  return o;
}

static json_t *path_hash(const char *path, const char *sha256, bool *ok) {
  json_t *o = json_object();
  if (!o) *ok = false;
  else {
    put(o, "path", json_string(path), ok);
    put(o, "sha256", json_string(sha256), ok);
  }
  return o;
}

static json_t *aggregation_object(const md_run_settings *s, bool *ok) {
  json_t *o = json_object();
  if (!o) {
    *ok = false;
    return NULL;
  }
  put(o, "layers", json_pack("[ii]", s->layer_begin, s->layer_end), ok);
  put(o, "heads", json_string(s->heads), ok);
  put(o, "page_size", json_integer(s->page_size), ok);
  return o;
}

static json_t *decode_object(const md_run_settings *s, bool *ok) {
  json_t *o = json_object();
  if (!o) {
    *ok = false;
    return NULL;
  }
  put(o, "max_steps", s->max_steps ? json_integer((json_int_t)s->max_steps) : json_null(), ok);
  put(o, "default_steps", json_integer((json_int_t)s->default_steps), ok);
  return o;
}

static json_t *shard_object(const md_run_shard *shard, bool *ok) {
  json_t *o = json_object(), *plan = json_object();
  if (!o || !plan) {
    json_decref(o);
    json_decref(plan);
    *ok = false;
    return NULL;
  }
  put(o, "index", json_integer((json_int_t)shard->index), ok);
  put(o, "count", json_integer((json_int_t)shard->count), ok);
  put(o, "episodes", json_integer((json_int_t)shard->episodes), ok);
  put(plan, "episodes", json_integer((json_int_t)shard->plan_episodes), ok);
  put(plan, "tokens", json_integer((json_int_t)shard->plan_tokens), ok);
  put(plan, "sha256", json_string(shard->plan_sha256), ok);
  put(o, "plan", plan, ok);
  return o;
}

static json_t *blas_object(const md_run_settings *s, bool *ok) {
  json_t *o = json_object();
  if (!o) {
    *ok = false;
    return NULL;
  }
  put(o, "library", json_string(s->blas_library), ok);
  put(o, "core", json_string(s->blas_core), ok);
  if (s->cpu_kernels) put(o, "kernels", json_string(s->cpu_kernels), ok);
  if (s->prompt_products) put(o, "prompt_products", json_string(s->prompt_products), ok);
  if (s->prompt_gemm) put(o, "prompt_gemm", json_string(s->prompt_gemm), ok);
  return o;
}

md_status md_run_record_new(const md_run_settings *s, md_run_record **record, md_error *err) {
  *record = NULL;
  bool ok = true;
  json_t *root = json_object();
  if (!root) return md_fail(err, MD_E_NOMEM, "run.json: out of memory");
  put(root, "format", json_string(MD_RUN_FORMAT), &ok);
  put(root, "generator", json_pack("{s:s, s:s}", "name", "memdecay-calibrate", "version", s->version),
      &ok);
  if (s->created) put(root, "created", json_string(s->created), &ok);
  put(root, "model", model_object(&s->model, &ok), &ok);
  put(root, "tokenizer", path_hash(s->tokenizer_path, s->tokenizer_sha256, &ok), &ok);
  json_t *traces = path_hash(s->traces_path, s->traces_sha256, &ok);
  if (traces) put(traces, "episodes", json_integer((json_int_t)s->traces_episodes), &ok);
  put(root, "traces", traces, &ok);
  put(root, "aggregation", aggregation_object(s, &ok), &ok);
  put(root, "decode", decode_object(s, &ok), &ok);
  if (s->shard) put(root, "shard", shard_object(s->shard, &ok), &ok);
  put(root, "device", json_string(s->device), &ok);
  put(root, "threads", json_integer(s->threads), &ok);
  if (s->blas_library && s->blas_core) put(root, "blas", blas_object(s, &ok), &ok);
  put(root, "manifest_bytes", json_integer(0), &ok);
  put(root, "episodes", json_array(), &ok);
  put(root, "skipped", json_array(), &ok);
  put(root, "complete", json_false(), &ok);
  if (!ok) {
    json_decref(root);
    return md_fail(err, MD_E_NOMEM, "run.json: out of memory");
  }
  *record = malloc(sizeof **record);
  if (!*record) {
    json_decref(root);
    return md_fail(err, MD_E_NOMEM, "run.json: out of memory");
  }
  (*record)->root = root;
  return MD_OK;
}

void md_run_record_free(md_run_record *record) {
  if (!record) return;
  json_decref(record->root);
  free(record);
}

/* ---- reading back ------------------------------------------------------------------ */

/* The value at a dotted key path ("model.config_sha256"), NULL when absent. */
static json_t *at(json_t *root, const char *dotted) {
  char key[64];
  json_t *value = root;
  for (const char *p = dotted; value && *p;) {
    size_t n = strcspn(p, ".");
    if (n >= sizeof key) return NULL;
    memcpy(key, p, n);
    key[n] = '\0';
    value = json_is_object(value) ? json_object_get(value, key) : NULL;
    p += n + (p[n] == '.');
  }
  return value;
}

typedef struct required_field {
  const char *key;
  json_type type; /* JSON_INTEGER accepts only integers; JSON_NULL: integer or null */
} required_field;

static const required_field REQUIRED[] = {
    {"model.config_sha256", JSON_STRING}, {"tokenizer.sha256", JSON_STRING},
    {"traces.sha256", JSON_STRING},       {"aggregation.layers", JSON_ARRAY},
    {"aggregation.heads", JSON_STRING},   {"aggregation.page_size", JSON_INTEGER},
    {"decode.max_steps", JSON_NULL},      {"decode.default_steps", JSON_INTEGER},
    {"manifest_bytes", JSON_INTEGER},     {"episodes", JSON_ARRAY},
    {"skipped", JSON_ARRAY},              {"complete", JSON_TRUE},
};

static bool has_type(const json_t *value, json_type type) {
  switch (type) {
    case JSON_NULL: return json_is_null(value) || json_is_integer(value);
    case JSON_TRUE: return json_is_boolean(value);
    default: return value && json_typeof(value) == type;
  }
}

static md_status check_loaded(json_t *root, const char *path, md_error *err) {
  const char *format = json_string_value(json_object_get(root, "format"));
  if (!format || strcmp(format, MD_RUN_FORMAT) != 0)
    return md_fail(err, MD_E_FORMAT, "%s: 'format' is not \"%s\": not a run directory's run.json",
                   path, MD_RUN_FORMAT);
  for (size_t i = 0; i < sizeof REQUIRED / sizeof REQUIRED[0]; i++) {
    json_t *value = at(root, REQUIRED[i].key);
    if (!value || !has_type(value, REQUIRED[i].type))
      return md_fail(err, MD_E_FORMAT, "%s: '%s' is missing or of the wrong type", path,
                     REQUIRED[i].key);
  }
  if (json_integer_value(json_object_get(root, "manifest_bytes")) < 0)
    return md_fail(err, MD_E_FORMAT, "%s: 'manifest_bytes' is negative", path);
  size_t i;
  json_t *episode;
  json_array_foreach(json_object_get(root, "episodes"), i, episode) {
    if (!json_is_string(json_object_get(episode, "id")))
      return md_fail(err, MD_E_FORMAT, "%s: 'episodes[%zu].id' is missing or not a string", path, i);
  }
  return MD_OK;
}

md_status md_run_record_load(const char *path, md_run_record **record, md_error *err) {
  *record = NULL;
  json_t *root;
  md_status loaded = md_json_load(path, &root, err);
  if (loaded != MD_OK) return loaded;
  md_status status = json_is_object(root) ? check_loaded(root, path, err)
                                          : md_fail(err, MD_E_FORMAT, "%s: not a JSON object", path);
  if (status == MD_OK && !(*record = malloc(sizeof **record)))
    status = md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  if (status != MD_OK) {
    json_decref(root);
    return status;
  }
  (*record)->root = root;
  return MD_OK;
}

/* ---- resume ------------------------------------------------------------------------ */

static md_status differs(const char *path, const char *what, const char *was, const char *now,
                         const char *hint, md_error *err) {
  return md_fail(err, MD_E_INVALID,
                 "%s: this run was collected with %s %s, this run has %s: %s", path, what, was, now,
                 hint);
}

static md_status same_string(json_t *root, const char *key, const char *now, const char *path,
                             const char *what, const char *hint, md_error *err) {
  const char *was = json_string_value(at(root, key));
  if (was && !strcmp(was, now)) return MD_OK;
  char was_q[160], now_q[160];
  snprintf(was_q, sizeof was_q, "'%.140s'", was ? was : "?");
  snprintf(now_q, sizeof now_q, "'%.140s'", now);
  return differs(path, what, was_q, now_q, hint, err);
}

static md_status same_integer(json_t *root, const char *key, long long now, const char *path,
                              const char *what, md_error *err) {
  json_t *value = at(root, key);
  long long was = json_is_integer(value) ? (long long)json_integer_value(value) : 0;
  if (was == now) return MD_OK;
  char was_s[48], now_s[48];
  snprintf(was_s, sizeof was_s, "%lld", was);
  snprintf(now_s, sizeof now_s, "%lld", now);
  if (!strcmp(what, "--max-steps")) {
    if (was == 0) snprintf(was_s, sizeof was_s, "none");
    if (now == 0) snprintf(now_s, sizeof now_s, "none");
  }
  return differs(path, what, was_s, now_s, "resume with the same settings, or start a new run directory",
                 err);
}

/* "shard 1/4 of the plan 3fa2c0d1", or "no shard" when count is 0. */
static void shard_name(long long index, long long count, const char *sha256, char out[80]) {
  if (count == 0) snprintf(out, 80, "no shard");
  else snprintf(out, 80, "shard %lld/%lld of the plan %.8s", index, count, sha256 ? sha256 : "?");
}

static md_status same_shard(json_t *root, const md_run_shard *now, const char *path,
                            md_error *err) {
  json_t *shard = json_object_get(root, "shard");
  json_t *index = json_object_get(shard, "index"), *count = json_object_get(shard, "count");
  const char *sha256 = json_string_value(at(root, "shard.plan.sha256"));
  bool recorded = json_is_integer(index) && json_is_integer(count);
  bool same = now ? recorded && sha256 && (size_t)json_integer_value(index) == now->index &&
                        (size_t)json_integer_value(count) == now->count &&
                        !strcmp(sha256, now->plan_sha256)
                  : shard == NULL;
  if (same) return MD_OK;
  char was[80], is[80];
  shard_name(recorded ? (long long)json_integer_value(index) : 0,
             recorded ? (long long)json_integer_value(count) : 0, sha256, was);
  shard_name(now ? (long long)now->index : 0, now ? (long long)now->count : 0,
             now ? now->plan_sha256 : NULL, is);
  return md_fail(err, MD_E_INVALID, "%s: this run was collected as %s, this run is %s: a shard "
                 "resumes as the same shard of the same plan (the same traces, options and shard "
                 "count), or start a new run directory", path, was, is);
}

static md_status check_identity(json_t *root, const md_run_settings *s, const char *path,
                                md_error *err) {
  static const char new_dir[] = "resume with the same inputs, or start a new run directory";
  md_status st;
  if ((st = same_string(root, "model.config_sha256", s->model.config_sha256, path,
                        "a model whose config.json has sha256", new_dir, err)) ||
      (st = same_string(root, "model.dtype", s->model.dtype, path,
                        "the weight matrices held in", new_dir, err)) ||
      (st = same_string(root, "tokenizer.sha256", s->tokenizer_sha256, path,
                        "a tokenizer.json with sha256", new_dir, err)) ||
      (st = same_string(root, "traces.sha256", s->traces_sha256, path,
                        "a trace file with sha256", new_dir, err)))
    return st;
  json_t *layers = at(root, "aggregation.layers");
  long long begin = json_integer_value(json_array_get(layers, 0));
  long long end = json_integer_value(json_array_get(layers, 1));
  if (json_array_size(layers) != 2 || begin != s->layer_begin || end != s->layer_end) {
    char was[48], now[48];
    snprintf(was, sizeof was, "%lld:%lld", begin, end);
    snprintf(now, sizeof now, "%d:%d", s->layer_begin, s->layer_end);
    return differs(path, "--layers", was, now,
                   "resume with the same settings, or start a new run directory", err);
  }
  if ((st = same_string(root, "aggregation.heads", s->heads, path, "--heads",
                        "resume with the same settings, or start a new run directory", err)) ||
      (st = same_integer(root, "aggregation.page_size", s->page_size, path, "--page-size", err)) ||
      (st = same_integer(root, "decode.max_steps", (long long)s->max_steps, path, "--max-steps", err)) ||
      (st = same_integer(root, "decode.default_steps", (long long)s->default_steps, path,
                         "default decode steps", err)))
    return st;
  return same_shard(root, s->shard, path, err);
}

/* The new run's "blas" (or none) in place of the record's, right after
 * "threads" as a fresh record has it: the object is rebuilt, since keys
 * keep the order they were added in. False when out of memory. */
static bool replace_blas(md_run_record *record, const md_run_settings *s) {
  bool ok = true;
  json_t *blas = s->blas_library && s->blas_core ? blas_object(s, &ok) : NULL;
  json_t *root = json_object();
  if (!ok || !root) {
    json_decref(blas);
    json_decref(root);
    return false;
  }
  const char *key;
  json_t *value;
  json_object_foreach(record->root, key, value) {
    if (!strcmp(key, "blas")) continue;
    put(root, key, json_incref(value), &ok);
    if (!strcmp(key, "threads") && blas) {
      put(root, "blas", blas, &ok);
      blas = NULL;
    }
  }
  if (blas) put(root, "blas", blas, &ok); /* a record without "threads" cannot load */
  if (!ok) {
    json_decref(root);
    return false;
  }
  json_decref(record->root);
  record->root = root;
  return true;
}

md_status md_run_record_resume(md_run_record *record, const md_run_settings *s, const char *path,
                               md_error *err) {
  md_status status = check_identity(record->root, s, path, err);
  if (status != MD_OK) return status;
  bool ok = true;
  json_t *root = record->root;
  put(at(root, "model"), "path", json_string(s->model.path), &ok);
  put(at(root, "model"), "name", json_string(s->model.name), &ok);
  put(at(root, "tokenizer"), "path", json_string(s->tokenizer_path), &ok);
  put(at(root, "traces"), "path", json_string(s->traces_path), &ok);
  put(root, "device", json_string(s->device), &ok);
  put(root, "threads", json_integer(s->threads), &ok);
  if (ok) ok = replace_blas(record, s);
  return ok ? MD_OK : md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
}

/* ---- episodes -------------------------------------------------------------------- */

size_t md_run_record_episode_count(const md_run_record *record) {
  return json_array_size(json_object_get(record->root, "episodes"));
}

bool md_run_record_has_episode(const md_run_record *record, const char *id) {
  size_t i;
  json_t *episode;
  json_array_foreach(json_object_get(record->root, "episodes"), i, episode) {
    const char *listed = json_string_value(json_object_get(episode, "id"));
    if (listed && !strcmp(listed, id)) return true;
  }
  return false;
}

uint64_t md_run_record_manifest_bytes(const md_run_record *record) {
  return (uint64_t)json_integer_value(json_object_get(record->root, "manifest_bytes"));
}

md_status md_run_record_add_episode(md_run_record *record, const md_run_episode *e,
                                    uint64_t manifest_bytes, md_error *err) {
  bool ok = true;
  json_t *entry = json_object();
  if (!entry) ok = false;
  else {
    put(entry, "id", json_string(e->id), &ok);
    put(entry, "line", json_integer((json_int_t)e->line), &ok);
    put(entry, "prompt_tokens", json_integer((json_int_t)e->prompt_tokens), &ok);
    put(entry, "decode_steps", json_integer((json_int_t)e->decode_steps), &ok);
    put(entry, "continuation", json_string(e->continuation), &ok);
    put(entry, "region", json_string(e->region), &ok);
    put(entry, "complete", json_true(), &ok);
  }
  if (ok && json_array_append_new(json_object_get(record->root, "episodes"), entry) != 0) ok = false;
  else if (!ok) json_decref(entry);
  put(record->root, "manifest_bytes", json_integer((json_int_t)manifest_bytes), &ok);
  return ok ? MD_OK : md_fail(err, MD_E_NOMEM, "run.json: out of memory");
}

md_status md_run_record_clear_skipped(md_run_record *record, md_error *err) {
  bool ok = true;
  put(record->root, "skipped", json_array(), &ok);
  return ok ? MD_OK : md_fail(err, MD_E_NOMEM, "run.json: out of memory");
}

md_status md_run_record_add_skipped(md_run_record *record, const char *id, size_t line,
                                    const char *reason, md_error *err) {
  json_t *entry = json_pack("{s:o, s:I, s:s}", "id", id ? json_string(id) : json_null(), "line",
                            (json_int_t)line, "reason", reason);
  if (!entry || json_array_append_new(json_object_get(record->root, "skipped"), entry) != 0)
    return md_fail(err, MD_E_NOMEM, "run.json: out of memory");
  return MD_OK;
}

void md_run_record_set_complete(md_run_record *record, bool complete) {
  json_object_set_new(record->root, "complete", json_boolean(complete));
}

bool md_run_record_complete(const md_run_record *record) {
  return json_is_true(json_object_get(record->root, "complete"));
}

md_status md_run_record_write(const md_run_record *record, const char *path, md_error *err) {
  char *text = json_dumps(record->root, JSON_INDENT(2));
  if (!text) return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  size_t length = strlen(text);
  char *with_newline = realloc(text, length + 2);
  if (!with_newline) {
    free(text);
    return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  }
  with_newline[length] = '\n';
  with_newline[length + 1] = '\0';
  md_status status = md_write_file_atomic(path, with_newline, length + 1, err);
  free(with_newline);
  return status;
}

/* ---- manifest.csv ------------------------------------------------------------------ */

struct md_manifest {
  FILE *fp;
  char *path;
  char *piece;          /* scratch: a piece made valid UTF-8 */
  size_t piece_capacity;
};

static md_status manifest_fail(md_manifest *m, const char *what, md_error *err) {
  return md_fail(err, MD_E_IO, "%s: %s: %s", m->path, what, strerror(errno));
}

static md_status open_fresh(md_manifest *m, md_error *err) {
  m->fp = fopen(m->path, "wb");
  if (!m->fp) return manifest_fail(m, "cannot create", err);
  if (fputs(MD_RUN_MANIFEST_HEADER, m->fp) == EOF) return manifest_fail(m, "write failed", err);
  return MD_OK;
}

static md_status open_kept(md_manifest *m, uint64_t keep_bytes, md_error *err) {
  struct stat info;
  if (stat(m->path, &info) != 0) return manifest_fail(m, "cannot read", err);
  if ((uint64_t)info.st_size < keep_bytes)
    return md_fail(err, MD_E_FORMAT,
                   "%s: %lld bytes, shorter than the %llu bytes run.json records for its complete "
                   "episodes: the run directory is damaged",
                   m->path, (long long)info.st_size, (unsigned long long)keep_bytes);
  if (truncate(m->path, (off_t)keep_bytes) != 0) return manifest_fail(m, "cannot truncate", err);
  m->fp = fopen(m->path, "ab");
  if (!m->fp) return manifest_fail(m, "cannot open", err);
  return MD_OK;
}

md_status md_manifest_open(const char *path, bool fresh, uint64_t keep_bytes, md_manifest **out,
                           md_error *err) {
  *out = NULL;
  md_manifest *m = calloc(1, sizeof *m);
  if (!m || !(m->path = strdup(path))) {
    free(m);
    return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  }
  md_status status = fresh ? open_fresh(m, err) : open_kept(m, keep_bytes, err);
  if (status != MD_OK) {
    md_manifest_close(m);
    return status;
  }
  *out = m;
  return MD_OK;
}

/* The piece as valid UTF-8 without NUL: every byte that does not start a
 * complete character becomes U+FFFD. */
static const char *readable(md_manifest *m, const char *bytes, size_t length, size_t *out_length) {
  size_t need = 3 * length + 1;
  if (need > m->piece_capacity) {
    char *grown = realloc(m->piece, need);
    if (!grown) return NULL;
    m->piece = grown;
    m->piece_capacity = need;
  }
  size_t n = 0;
  for (size_t i = 0; i < length;) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k =
        utf8proc_iterate((const utf8proc_uint8_t *)bytes + i, (utf8proc_ssize_t)(length - i), &cp);
    if (k > 0 && cp != 0) {
      memcpy(m->piece + n, bytes + i, (size_t)k);
      n += (size_t)k;
      i += (size_t)k;
    } else {
      memcpy(m->piece + n, "\xef\xbf\xbd", 3);
      n += 3;
      i++;
    }
  }
  m->piece[n] = '\0';
  *out_length = n;
  return m->piece;
}

md_status md_manifest_append(md_manifest *m, const char *episode, size_t pos, const char *region,
                             size_t page, int64_t birth, int32_t token_id, const char *piece,
                             size_t piece_length, md_error *err) {
  size_t length = 0;
  const char *text = readable(m, piece ? piece : "", piece ? piece_length : 0, &length);
  if (!text) return md_fail(err, MD_E_NOMEM, "%s: out of memory", m->path);
  if (fprintf(m->fp, "%s,%zu,%s,%zu,%lld,%d,", episode, pos, region, page, (long long)birth,
              (int)token_id) < 0 ||
      md_csv_write_field(m->fp, text, length) != 0 || fputc('\n', m->fp) == EOF)
    return manifest_fail(m, "write failed", err);
  return MD_OK;
}

md_status md_manifest_sync(md_manifest *m, uint64_t *bytes, md_error *err) {
  if (fflush(m->fp) != 0) return manifest_fail(m, "write failed", err);
  if (fsync(fileno(m->fp)) != 0) return manifest_fail(m, "fsync failed", err);
  struct stat info;
  if (fstat(fileno(m->fp), &info) != 0) return manifest_fail(m, "cannot stat", err);
  *bytes = (uint64_t)info.st_size;
  return MD_OK;
}

void md_manifest_close(md_manifest *m) {
  if (!m) return;
  if (m->fp) fclose(m->fp);
  free(m->path);
  free(m->piece);
  free(m);
}
