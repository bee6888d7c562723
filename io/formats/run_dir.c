/* The run directory reader: run.json here, the manifest stream in
 * io/formats/run_manifest.c, the episodes' NPY files in md_run_reader_next. */
#include "io/formats/run_dir.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/files/json_fields.h"
#include "io/formats/npy.h"
#include "io/formats/run_manifest.h"

char *md_run_path(const char *dir, const char *sub, const char *id, const char *suffix) {
  size_t size = strlen(dir) + strlen(sub) + (id ? strlen(id) : 0) + strlen(suffix) + 4;
  char *path = malloc(size);
  if (!path) return NULL;
  if (id) {
    snprintf(path, size, "%s/%s/%s%s", dir, sub, id, suffix);
  } else {
    snprintf(path, size, "%s/%s%s", dir, sub, suffix);
  }
  return path;
}

/* ---- run.json --------------------------------------------------------------- */

static md_status read_model(const md_json_fields *f, const json_t *root, md_run_info *info) {
  const json_t *model = NULL;
  md_status s = md_json_object(f, root, "", "model", true, &model);
  if (s == MD_OK) s = md_json_string(f, model, "model", "name", true, &info->model.name);
  if (s == MD_OK)
    s = md_json_string(f, model, "model", "config_sha256", true, &info->model.config_sha256);
  if (s == MD_OK) s = md_json_string(f, model, "model", "path", false, &info->model.path);
  if (s == MD_OK)
    s = md_json_string(f, model, "model", "architecture", false, &info->model.architecture);
  if (s == MD_OK) s = md_json_string(f, model, "model", "dtype", false, &info->model.dtype);
  const struct {
    const char *key;
    long *out;
  } counts[] = {{"layers", &info->model.layers},
                {"heads", &info->model.heads},
                {"kv_heads", &info->model.kv_heads},
                {"hidden", &info->model.hidden},
                {"vocab", &info->model.vocab}};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0] && s == MD_OK; i++) {
    int64_t value = -1;
    s = md_json_integer(f, model, "model", counts[i].key, false, 1, &value);
    *counts[i].out = (long)value;
  }
  return s;
}

static md_status read_file_ref(const md_json_fields *f, const json_t *root, const char *key,
                               bool required, char **path, char **sha256) {
  const json_t *object = NULL;
  md_status s = md_json_object(f, root, "", key, required, &object);
  if (s == MD_OK && object) s = md_json_string(f, object, key, "path", required, path);
  if (s == MD_OK && object) s = md_json_string(f, object, key, "sha256", false, sha256);
  return s;
}

static md_status read_aggregation(const md_json_fields *f, const json_t *root,
                                  md_run_info *info) {
  const json_t *aggregation = NULL;
  info->aggregation.layers[0] = info->aggregation.layers[1] = -1;
  int64_t page_size = -1;
  md_status s = md_json_object(f, root, "", "aggregation", true, &aggregation);
  if (s == MD_OK)
    s = md_json_integer(f, aggregation, "aggregation", "page_size", true, 1, &page_size);
  info->aggregation.page_size = (long)page_size;
  if (s == MD_OK)
    s = md_json_string(f, aggregation, "aggregation", "heads", false, &info->aggregation.heads);
  /* Nothing below runs after an error: aggregation may then be a value of
   * the wrong kind. */
  if (s != MD_OK) return s;
  const json_t *layers = json_object_get(aggregation, "layers");
  if (!layers || json_is_null(layers)) return MD_OK;
  bool pair = json_is_array(layers) && json_array_size(layers) == 2 &&
              json_is_integer(json_array_get(layers, 0)) &&
              json_is_integer(json_array_get(layers, 1));
  json_int_t begin = pair ? json_integer_value(json_array_get(layers, 0)) : -1;
  json_int_t end = pair ? json_integer_value(json_array_get(layers, 1)) : -1;
  if (!pair || begin < 0 || end <= begin || end > 1 << 20)
    return md_json_bad(f, "aggregation", "layers", "[begin, end] with 0 <= begin < end", layers);
  info->aggregation.layers[0] = (long)begin;
  info->aggregation.layers[1] = (long)end;
  return MD_OK;
}

/* "shard" (a shard of a larger collection; absent for a whole one). */
static md_status read_shard(const md_json_fields *f, const json_t *root, md_run_info *info) {
  const json_t *shard = NULL, *plan = NULL;
  md_status s = md_json_object(f, root, "", "shard", false, &shard);
  if (s != MD_OK || !shard) return s;
  int64_t index = 0, count = 0, episodes = 0, plan_episodes = 0, plan_tokens = 0;
  s = md_json_integer(f, shard, "shard", "index", true, 0, &index);
  if (s == MD_OK) s = md_json_integer(f, shard, "shard", "count", true, 1, &count);
  if (s == MD_OK) s = md_json_integer(f, shard, "shard", "episodes", true, 0, &episodes);
  if (s == MD_OK) s = md_json_object(f, shard, "shard", "plan", true, &plan);
  if (s == MD_OK) s = md_json_integer(f, plan, "shard.plan", "episodes", true, 1, &plan_episodes);
  if (s == MD_OK) s = md_json_integer(f, plan, "shard.plan", "tokens", true, 1, &plan_tokens);
  if (s == MD_OK) s = md_json_string(f, plan, "shard.plan", "sha256", true, &info->shard.plan_sha256);
  if (s != MD_OK) return s;
  const json_t *at_count = json_object_get(shard, "count");
  if (count > MD_RUN_SHARD_COUNT_MAX)
    return md_json_bad(f, "shard", "count", "a shard count from 1 to 65536", at_count);
  if (index >= count)
    return md_json_bad(f, "shard", "index", "an index below shard.count",
                       json_object_get(shard, "index"));
  if (episodes > plan_episodes)
    return md_json_bad(f, "shard", "episodes", "at most shard.plan.episodes",
                       json_object_get(shard, "episodes"));
  const char *hex = info->shard.plan_sha256;
  bool is_hex = strlen(hex) == 64;
  for (size_t i = 0; is_hex && i < 64; i++) is_hex = strchr("0123456789abcdef", hex[i]) != NULL;
  if (!is_hex)
    return md_json_bad(f, "shard.plan", "sha256", "64 lower-case hex digits",
                       json_object_get(plan, "sha256"));
  info->shard.present = true;
  info->shard.index = (size_t)index;
  info->shard.count = (size_t)count;
  info->shard.episodes = (size_t)episodes;
  info->shard.plan_episodes = (size_t)plan_episodes;
  info->shard.plan_tokens = (uint64_t)plan_tokens;
  return MD_OK;
}

/* Episode ids name files: attn/<id>.npy. */
static bool id_is_file_name(const char *id) {
  if (!strcmp(id, ".") || !strcmp(id, "..")) return false;
  for (const unsigned char *c = (const unsigned char *)id; *c; c++)
    if (*c == '/' || *c < 0x20 || *c == 0x7f) return false;
  return true;
}

static md_status read_episode(const md_json_fields *f, const json_t *value, size_t index,
                              md_run_episode_meta *episode) {
  char parent[48];
  snprintf(parent, sizeof parent, "episodes[%zu]", index);
  if (!json_is_object(value)) return md_json_bad(f, "episodes", parent + 9, "an object", value);
  int64_t prompt = 0, steps = 0, line = 0;
  md_status s = md_json_string(f, value, parent, "id", true, &episode->id);
  if (s == MD_OK && !id_is_file_name(episode->id))
    s = md_fail(f->err, MD_E_FORMAT, "%s: %s.id: \"%s\" cannot name a file (attn/<id>.npy)",
                f->path, parent, episode->id);
  if (s == MD_OK) s = md_json_integer(f, value, parent, "prompt_tokens", true, 1, &prompt);
  if (s == MD_OK) s = md_json_integer(f, value, parent, "decode_steps", true, 0, &steps);
  if (s == MD_OK) s = md_json_integer(f, value, parent, "line", false, 1, &line);
  if (s == MD_OK)
    s = md_json_string(f, value, parent, "continuation", false, &episode->continuation);
  const json_t *complete = json_object_get(value, "complete");
  if (s == MD_OK && complete && !json_is_true(complete))
    s = md_json_bad(f, parent, "complete", "true (run.json lists complete episodes only)",
                    complete);
  episode->prompt_tokens = (size_t)prompt;
  episode->decode_steps = (size_t)steps;
  episode->line = line < 0 ? 0 : (long)line;
  return s;
}

static md_status read_episodes(const md_json_fields *f, const json_t *root, md_run_info *info) {
  const json_t *episodes = json_object_get(root, "episodes");
  if (!json_is_array(episodes)) return md_json_bad(f, "", "episodes", "an array", episodes);
  size_t n = json_array_size(episodes);
  info->episodes = calloc(n + 1, sizeof *info->episodes);
  if (!info->episodes) return md_fail(f->err, MD_E_NOMEM, "%s: out of memory", f->path);
  for (size_t i = 0; i < n; i++) {
    md_status s = read_episode(f, json_array_get(episodes, i), i, &info->episodes[i]);
    info->n_episodes++;
    if (s != MD_OK) return s;
    for (size_t j = 0; j < i; j++)
      if (!strcmp(info->episodes[j].id, info->episodes[i].id))
        return md_fail(f->err, MD_E_FORMAT, "%s: episodes[%zu].id: \"%s\" repeats episodes[%zu]",
                       f->path, i, info->episodes[i].id, j);
  }
  return MD_OK;
}

static md_status read_format(const md_json_fields *f, const json_t *root) {
  if (!json_is_object(root))
    return md_fail(f->err, MD_E_FORMAT, "%s: expected a JSON object, found %s", f->path,
                   md_json_kind(root));
  const json_t *format = json_object_get(root, "format");
  if (!json_is_string(format))
    return md_fail(f->err, MD_E_FORMAT, "%s: format: expected \"" MD_RUN_FORMAT "\", found %s "
                   "(is this a run directory written by memdecay-calibrate collect?)",
                   f->path, md_json_kind(format));
  if (strcmp(json_string_value(format), MD_RUN_FORMAT) != 0)
    return md_fail(f->err, MD_E_UNSUPPORTED, "%s: format \"%s\" is not supported (expected \""
                   MD_RUN_FORMAT "\")", f->path, json_string_value(format));
  return MD_OK;
}

static md_status read_top(const md_json_fields *f, const json_t *root, md_run_info *info) {
  md_status s = read_format(f, root);
  if (s == MD_OK) s = read_model(f, root, info);
  const json_t *generator = json_object_get(root, "generator");
  if (s == MD_OK && json_is_object(generator))
    s = md_json_string(f, generator, "generator", "version", false, &info->generator_version);
  if (s == MD_OK) s = md_json_string(f, root, "", "created", false, &info->created);
  if (s == MD_OK)
    s = read_file_ref(f, root, "tokenizer", false, &info->tokenizer.path, &info->tokenizer.sha256);
  if (s == MD_OK)
    s = read_file_ref(f, root, "traces", true, &info->traces.path, &info->traces.sha256);
  if (s == MD_OK) s = read_aggregation(f, root, info);
  if (s == MD_OK) s = read_shard(f, root, info);
  if (s == MD_OK) s = md_json_string(f, root, "", "device", false, &info->device);
  int64_t threads = -1, manifest_bytes = 0;
  if (s == MD_OK) s = md_json_integer(f, root, "", "threads", false, 1, &threads);
  info->threads = (long)threads;
  if (s == MD_OK) s = md_json_integer(f, root, "", "manifest_bytes", true, 0, &manifest_bytes);
  info->manifest_bytes = (uint64_t)(manifest_bytes < 0 ? 0 : manifest_bytes);
  if (s == MD_OK) s = md_json_boolean(f, root, "", "complete", &info->complete);
  const json_t *skipped = json_object_get(root, "skipped");
  if (s == MD_OK && skipped && !json_is_array(skipped))
    s = md_json_bad(f, "", "skipped", "an array", skipped);
  info->n_skipped = json_is_array(skipped) ? json_array_size(skipped) : 0;
  if (s == MD_OK) s = read_episodes(f, root, info);
  if (s == MD_OK && info->shard.present && info->complete &&
      info->n_episodes != info->shard.episodes)
    s = md_fail(f->err, MD_E_FORMAT, "%s: shard.episodes: the shard is complete with %zu "
                "episodes listed, not the %zu it states", f->path, info->n_episodes,
                info->shard.episodes);
  return s;
}

/* A missing directory or run.json gets a message saying what is missing. */
static md_status check_dir(const char *dir, const char *json_path, md_error *err) {
  struct stat st;
  if (stat(dir, &st) != 0)
    return md_fail(err, MD_E_FORMAT, "%s: cannot open the run directory: %s", dir,
                   strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return md_fail(err, MD_E_FORMAT, "%s: not a directory (expected a run directory written by "
                   "memdecay-calibrate collect)", dir);
  if (stat(json_path, &st) != 0 && errno == ENOENT) {
    /* `run` keeps its run directory in WORKDIR/run: name it when that is what was given. */
    char *inner = md_run_path(dir, "run", "run", ".json");
    bool workdir = inner && stat(inner, &st) == 0;
    free(inner);
    if (workdir)
      return md_fail(err, MD_E_FORMAT, "%s: missing: %s is the work directory of 'run'; its run "
                     "directory is %s/run", json_path, dir, dir);
    return md_fail(err, MD_E_FORMAT, "%s: missing: not a run directory, or its collection has "
                   "not completed a first episode", json_path);
  }
  return MD_OK;
}

static md_status read_run_json(const char *dir, md_run_info *info, md_error *err) {
  char *path = md_run_path(dir, "run.json", NULL, "");
  if (!path) return md_fail(err, MD_E_NOMEM, "out of memory");
  json_t *root = NULL;
  md_status status = check_dir(dir, path, err);
  if (status == MD_OK) status = md_json_load(path, &root, err);
  if (status == MD_OK) {
    md_json_fields f = {.path = path, .err = err};
    status = read_top(&f, root, info);
  }
  json_decref(root);
  free(path);
  return status;
}

static void workload_totals(md_run_info *info) {
  info->min_decode_steps = info->n_episodes ? SIZE_MAX : 0;
  for (size_t i = 0; i < info->n_episodes; i++) {
    const md_run_episode_meta *e = &info->episodes[i];
    info->prompt_tokens += e->prompt_tokens;
    info->decode_steps += e->decode_steps;
    if (e->decode_steps > info->max_decode_steps) info->max_decode_steps = e->decode_steps;
    if (e->decode_steps < info->min_decode_steps) info->min_decode_steps = e->decode_steps;
  }
  info->tokens = info->prompt_tokens + info->decode_steps;
}

md_status md_run_info_read(const char *dir, md_run_info *info, md_error *err) {
  memset(info, 0, sizeof *info);
  info->threads = -1;
  info->dir = strdup(dir);
  if (!info->dir) return md_fail(err, MD_E_NOMEM, "out of memory");
  md_status status = read_run_json(dir, info, err);
  if (status == MD_OK) status = md_run_manifest_scan(info, err);
  if (status == MD_OK) workload_totals(info);
  if (status != MD_OK) md_run_info_free(info);
  return status;
}

void md_run_info_free(md_run_info *info) {
  char **strings[] = {&info->dir, &info->generator_version, &info->created, &info->model.path,
                      &info->model.name, &info->model.architecture, &info->model.config_sha256,
                      &info->model.dtype, &info->tokenizer.path, &info->tokenizer.sha256,
                      &info->traces.path, &info->traces.sha256, &info->aggregation.heads,
                      &info->device, &info->shard.plan_sha256};
  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) free(*strings[i]);
  for (size_t i = 0; i < info->n_episodes; i++) {
    free(info->episodes[i].id);
    free(info->episodes[i].continuation);
  }
  free(info->episodes);
  for (size_t i = 0; i < info->n_regions; i++) free(info->regions[i]);
  free(info->regions);
  memset(info, 0, sizeof *info);
}

size_t md_run_region_index(const md_run_info *info, const char *name) {
  for (size_t i = 0; i < info->n_regions; i++)
    if (!strcmp(info->regions[i], name)) return i;
  return info->n_regions;
}

/* ---- episodes ------------------------------------------------------------------ */

struct md_run_reader {
  const md_run_info *info;
  md_run_manifest_stream *manifest;
  md_run_token_arrays tokens;  /* the current episode's manifest columns */
  md_npy_array attn, prefill;
};

md_status md_run_reader_open(const md_run_info *info, md_run_reader **out, md_error *err) {
  *out = NULL;
  md_run_reader *reader = calloc(1, sizeof *reader);
  if (!reader) return md_fail(err, MD_E_NOMEM, "out of memory");
  reader->info = info;
  md_status status = md_run_manifest_open(info, &reader->tokens, &reader->manifest, err);
  if (status != MD_OK) {
    free(reader);
    return status;
  }
  *out = reader;
  return MD_OK;
}

static md_status load_matrix(const char *dir, const char *sub, const md_run_episode_meta *meta,
                             int ndim, const int64_t *shape, md_npy_array *array, md_error *err) {
  char *path = md_run_path(dir, sub, meta->id, ".npy");
  if (!path) return md_fail(err, MD_E_NOMEM, "out of memory");
  md_npy_free(array);
  md_status status = md_npy_read(path, array, err);
  if (status == MD_OK && array->dtype != MD_NPY_F32)
    status = md_fail(err, MD_E_FORMAT, "%s: dtype %s, expected float32 ('<f4')", path,
                     md_npy_dtype_descr(array->dtype));
  bool same = status == MD_OK && array->ndim == ndim;
  for (int d = 0; same && d < ndim; d++) same = array->shape[d] == shape[d];
  if (status == MD_OK && !same) {
    char got[96] = "", want[64];
    for (int d = 0; d < array->ndim; d++) {
      size_t used = strlen(got);
      snprintf(got + used, sizeof got - used, "%s%lld", d ? ", " : "", (long long)array->shape[d]);
    }
    if (ndim == 2) {
      snprintf(want, sizeof want, "%lld, %lld", (long long)shape[0], (long long)shape[1]);
    } else {
      snprintf(want, sizeof want, "%lld", (long long)shape[0]);
    }
    status = md_fail(err, MD_E_FORMAT, "%s: shape [%s], but run.json and manifest.csv give "
                     "episode \"%s\" %zu prompt tokens and %zu decode steps: expected [%s]",
                     path, got, meta->id, meta->prompt_tokens, meta->decode_steps, want);
  }
  if (status != MD_OK) md_npy_free(array);
  free(path);
  return status;
}

size_t md_run_shard_owner(uint64_t before, uint64_t weight, uint64_t total, size_t position,
                          size_t n, size_t count) {
  /* 2 C_i + w_i < 2 W whenever w_i > 0, so the shard is below N; the clamp
   * is for a zero-weight episode at the very end. A plan of zero weights
   * (not one the collector makes) splits by index. */
  uint64_t middle = total ? 2 * before + weight : 2 * (uint64_t)position + 1;
  uint64_t whole_span = total ? 2 * total : 2 * (uint64_t)n;
  uint64_t k = whole_span ? middle * count / whole_span : 0;
  return k < count ? (size_t)k : count - 1;
}

/* Each row of attn is one decode step's softmax attention, averaged over
 * the captured layers of the heads' mean or maximum (memdecay-run(5),
 * TERMS): run_dir.h says which sums that allows. Summed in double in column
 * order, so the verdict does not depend on the machine. */
static md_status check_attn_rows(const md_run_info *info, const md_run_episode_meta *meta,
                                 const float *attn, md_error *err) {
  size_t prompt = meta->prompt_tokens, steps = meta->decode_steps, columns = prompt + steps;
  bool max_heads = info->aggregation.heads && !strcmp(info->aggregation.heads, "max");
  double low = 1.0 - MD_RUN_ATTN_ROW_TOLERANCE, high = 1.0 + MD_RUN_ATTN_ROW_TOLERANCE;
  if (!info->aggregation.heads) low = -INFINITY, high = INFINITY; /* not stated: not known */
  if (max_heads) high = info->model.heads > 0 ? (double)info->model.heads + MD_RUN_ATTN_ROW_TOLERANCE
                                              : INFINITY;
  for (size_t t = 0; t < steps; t++) {
    const float *row = attn + t * columns;
    double sum = 0.0;
    const char *bad = NULL;
    size_t at = 0;
    for (size_t j = 0; j < columns && !bad; j++) {
      if (!(row[j] >= 0.0f) || isinf(row[j])) bad = "is not a finite number >= 0";
      else if (row[j] != 0.0f && j > prompt + t) bad = "is on a token not yet born (position "
                                                       "after P + t): must be 0";
      at = j;
      sum += row[j];
    }
    if (!bad && sum >= low && sum <= high) continue;
    char *path = md_run_path(info->dir, "attn", meta->id, ".npy");
    if (bad) {
      md_status s = md_fail(err, MD_E_FORMAT, "%s: row %zu (decode step %zu), column %zu: %g %s",
                            path ? path : info->dir, t, t, at, (double)row[at], bad);
      free(path);
      return s;
    }
    {
      md_status s;
      if (max_heads)
        s = md_fail(err, MD_E_FORMAT, "%s: row %zu (decode step %zu) sums to %.9g: a decode "
                    "step's attention, the maximum over heads averaged over layers, sums to "
                    "from 1 to the %ld query heads (within %g)", path ? path : info->dir, t, t,
                    sum, info->model.heads, MD_RUN_ATTN_ROW_TOLERANCE);
      else
        s = md_fail(err, MD_E_FORMAT, "%s: row %zu (decode step %zu) sums to %.9g: a decode "
                    "step's attention, softmax weights averaged over heads and layers, sums to "
                    "1 (within %g)", path ? path : info->dir, t, t, sum,
                    MD_RUN_ATTN_ROW_TOLERANCE);
      free(path);
      return s;
    }
  }
  return MD_OK;
}

md_status md_run_reader_next(md_run_reader *reader, md_run_episode_data *episode, bool *done,
                             md_error *err) {
  memset(episode, 0, sizeof *episode);
  size_t index;
  md_status status = md_run_manifest_next(reader->manifest, &index, done, err);
  if (status != MD_OK || *done) return status;
  const md_run_episode_meta *meta = &reader->info->episodes[index];
  size_t prompt = meta->prompt_tokens, steps = meta->decode_steps;
  int64_t attn_shape[2] = {(int64_t)steps, (int64_t)(prompt + steps)};
  int64_t prefill_shape[1] = {(int64_t)prompt};
  status = load_matrix(reader->info->dir, "attn", meta, 2, attn_shape, &reader->attn, err);
  if (status == MD_OK) status = check_attn_rows(reader->info, meta, reader->attn.data, err);
  if (status == MD_OK)
    status = load_matrix(reader->info->dir, "prefill", meta, 1, prefill_shape, &reader->prefill,
                         err);
  if (status != MD_OK) return status;
  *episode = (md_run_episode_data){
      .meta = meta,
      .index = index,
      .steps = steps,
      .tokens = prompt + steps,
      .prompt_tokens = prompt,
      .attn = reader->attn.data,
      .prefill = reader->prefill.data,
      .region = reader->tokens.region,
      .birth = reader->tokens.birth,
      .page = reader->tokens.page,
      .token_id = reader->tokens.token_id,
  };
  return MD_OK;
}

void md_run_reader_close(md_run_reader *reader) {
  if (!reader) return;
  md_run_manifest_close(reader->manifest);
  md_run_token_arrays_free(&reader->tokens);
  md_npy_free(&reader->attn);
  md_npy_free(&reader->prefill);
  free(reader);
}
