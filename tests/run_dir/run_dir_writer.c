#include "tests/run_dir/run_dir_writer.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/formats/npy.h"

static char *join(const char *dir, const char *name) {
  size_t size = strlen(dir) + strlen(name) + 2;
  char *path = malloc(size);
  snprintf(path, size, "%s/%s", dir, name);
  return path;
}

static int make_dir(const char *path) {
  if (mkdir(path, 0777) == 0 || errno == EEXIST) return 0;
  fprintf(stderr, "run_dir_writer: cannot create %s: %s\n", path, strerror(errno));
  return -1;
}

static int write_npy(const char *dir, const char *sub, const char *id, int ndim,
                     const int64_t *shape, const float *data) {
  char name[512];
  snprintf(name, sizeof name, "%s/%s.npy", sub, id);
  char *path = join(dir, name);
  md_error err = {0};
  int rc = md_npy_write_f32(path, ndim, shape, data, &err) == MD_OK ? 0 : -1;
  if (rc) fprintf(stderr, "run_dir_writer: %s\n", err.message);
  free(path);
  return rc;
}

/* ---- writing a run ------------------------------------------------------------- */

/* Pieces that need quoting: a comma and quotes every third token, and a
 * line feed in token 1 of the last episode only (so that the lines of the
 * other episodes' rows are 1 + the row number). */
static void write_rows(FILE *fp, size_t index, bool last, const test_episode *e, long page_size) {
  for (size_t pos = 0; pos < e->prompt + e->steps; pos++) {
    long birth = pos < e->prompt ? -1 : (long)(pos - e->prompt);
    const char *piece = pos % 3 == 0 ? "\"a,\"\"b\"\"\"" : "plain";
    if (last && pos == 1) piece = "\"x\ny\"";
    fprintf(fp, "%s,%zu,%s,%ld,%ld,%zu,%s\n", e->id, pos, e->region[pos], (long)pos / page_size,
            birth, 1000 * (index + 1) + pos, piece);
  }
}

static int write_episode_files(const char *dir, const test_episode *e) {
  int64_t attn_shape[2] = {(int64_t)e->steps, (int64_t)(e->prompt + e->steps)};
  int64_t prefill_shape[1] = {(int64_t)e->prompt};
  float *prefill = malloc((e->prompt + 1) * sizeof *prefill);
  for (size_t i = 0; i < e->prompt; i++) prefill[i] = 1.0f / (float)(i + 1);
  int rc = write_npy(dir, "attn", e->id, 2, attn_shape, e->attn);
  if (!rc) rc = write_npy(dir, "prefill", e->id, 1, prefill_shape, prefill);
  free(prefill);
  return rc;
}

static json_t *run_json(const test_run *run, long manifest_bytes) {
  json_t *episodes = json_array();
  for (size_t i = 0; i < run->n_episodes; i++) {
    const test_episode *e = &run->episodes[i];
    json_array_append_new(episodes,
                          json_pack("{ss si si si ss ss sb}", "id", e->id, "line", (int)(i + 1),
                                    "prompt_tokens", (int)e->prompt, "decode_steps", (int)e->steps,
                                    "continuation", "teacher-forced", "region", "scratchpad",
                                    "complete", 1));
  }
  return json_pack(
      "{ss s{ss ss} s{ss ss ss ss ss si si si si si si} s{ss ss} s{ss ss si}"
      " s{s[ii] ss si} ss si sI so s[] sb}",
      "format", "memdecay-run/1", "generator", "name", "memdecay-calibrate", "version", "0.1.0",
      "model", "path", "models/tiny", "name", run->model_name ? run->model_name : "tiny",
      "architecture", "Qwen2ForCausalLM", "config_sha256",
      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "dtype", "BF16",
      "layers", 2, "heads", 4, "kv_heads", 2, "hidden", 64, "vocab", 100000,
      "max_position_embeddings", 4096, "tokenizer", "path", "models/tiny/tokenizer.json",
      "sha256", "feed", "traces", "path", run->traces ? run->traces : "traces/test.jsonl",
      "sha256", "beef", "episodes", (int)run->n_episodes, "aggregation", "layers", 0, 2, "heads",
      "mean", "page_size", (int)run->page_size, "device", "cpu", "threads", 1, "manifest_bytes",
      (json_int_t)manifest_bytes, "episodes", episodes, "skipped", "complete", run->complete);
}

static int write_json(const char *path, json_t *root) {
  int rc = json_dump_file(root, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0 ? 0 : -1;
  if (rc) fprintf(stderr, "run_dir_writer: cannot write %s\n", path);
  return rc;
}

int test_run_write(const char *dir, const test_run *run) {
  char *attn = join(dir, "attn"), *prefill = join(dir, "prefill");
  char *manifest = join(dir, "manifest.csv"), *json = join(dir, "run.json");
  int rc = make_dir(dir);
  if (!rc) rc = make_dir(attn);
  if (!rc) rc = make_dir(prefill);
  FILE *fp = rc ? NULL : fopen(manifest, "wb");
  if (!rc && !fp) rc = -1;
  if (fp) {
    fputs("episode,pos,region,page,birth,token_id,piece\n", fp);
    for (size_t i = 0; i < run->n_episodes && !rc; i++) {
      write_rows(fp, i, i + 1 == run->n_episodes, &run->episodes[i], run->page_size);
      rc = write_episode_files(dir, &run->episodes[i]);
    }
    long bytes = ftell(fp);
    fclose(fp);
    json_t *root = run_json(run, bytes);
    if (!rc) rc = root ? write_json(json, root) : -1;
    json_decref(root);
  }
  free(attn);
  free(prefill);
  free(manifest);
  free(json);
  return rc;
}

/* ---- the hand-derived run -------------------------------------------------------- */

/* Dyadic attention values, so that a * n is exact and every threshold
 * comparison is unambiguous. See tests/run_dir/README.md. */
static const char *const small_regions_1[] = {"system", "user", "user",
                                              "scratchpad", "scratchpad", "scratchpad"};
static const float small_attn_1[3 * 6] = {
    0.5f,   0.25f,   0.125f,  0.125f, 0.0f,   0.0f,    /* n = 4 */
    0.125f, 0.125f,  0.25f,   0.25f,  0.25f,  0.0f,    /* n = 5 */
    0.5f,   0.0625f, 0.0625f, 0.125f, 0.125f, 0.125f,  /* n = 6 */
};
static const char *const small_regions_2[] = {"system", "retrieval", "scratchpad", "scratchpad"};
static const float small_attn_2[2 * 4] = {
    0.5f,  0.25f, 0.25f,   0.0f,    /* n = 3 */
    0.25f, 0.5f,  0.125f,  0.125f,  /* n = 4 */
};
static const test_episode small_episodes[] = {
    {"e1", 3, 3, small_regions_1, small_attn_1},
    {"e2", 2, 2, small_regions_2, small_attn_2},
};
static const test_run small_run = {2, small_episodes, 2, true, "tiny", "traces/small.jsonl"};

const test_run *test_run_small(void) { return &small_run; }

/* ---- the R fixture as a run -------------------------------------------------------- */

typedef struct fixture_episode {
  char id[32];
  size_t prompt, steps, tokens;
  char **region;
  float *attn;
} fixture_episode;

/* attn_synthetic.csv: episode,step,token,region,birth,attn, one row per
 * visible (step, token); episodes are contiguous. Two readings: sizes,
 * then values. */
static int read_fixture(FILE *fp, fixture_episode *episodes, size_t *n, bool fill) {
  char line[256], episode[32], region[32];
  size_t step, token;
  long birth;
  double a;
  rewind(fp);
  if (!fgets(line, sizeof line, fp)) return -1;
  size_t count = 0;
  while (fgets(line, sizeof line, fp)) {
    if (sscanf(line, "%31[^,],%zu,%zu,%31[^,],%ld,%lf", episode, &step, &token, region, &birth,
               &a) != 6)
      return -1;
    if (count == 0 || strcmp(episodes[count - 1].id, episode) != 0) {
      if (!fill) snprintf(episodes[count].id, sizeof episodes[count].id, "%s", episode);
      count++;
    }
    fixture_episode *e = &episodes[count - 1];
    if (!fill) {
      if (step + 1 > e->steps) e->steps = step + 1;
      if (token + 1 > e->tokens) e->tokens = token + 1;
      if (birth < 0 && token + 1 > e->prompt) e->prompt = token + 1;
      continue;
    }
    e->attn[step * e->tokens + token] = (float)a;
    if (!e->region[token]) e->region[token] = strdup(region);
  }
  *n = count;
  return 0;
}

int test_run_write_fixture(const char *dir, const char *source_root) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/extract/fixtures/attn_synthetic.csv", source_root);
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    fprintf(stderr, "run_dir_writer: cannot open %s\n", path);
    return -1;
  }
  fixture_episode episodes[16];
  memset(episodes, 0, sizeof episodes);
  size_t n = 0;
  int rc = read_fixture(fp, episodes, &n, false);
  for (size_t i = 0; i < n && !rc; i++) {
    episodes[i].region = calloc(episodes[i].tokens, sizeof *episodes[i].region);
    episodes[i].attn = calloc(episodes[i].steps * episodes[i].tokens, sizeof *episodes[i].attn);
  }
  if (!rc) rc = read_fixture(fp, episodes, &n, true);
  fclose(fp);
  test_episode list[16];
  for (size_t i = 0; i < n; i++)
    list[i] = (test_episode){episodes[i].id, episodes[i].prompt, episodes[i].steps,
                             (const char *const *)episodes[i].region, episodes[i].attn};
  test_run run = {n, list, 16, true, "fixture-model", "traces/fixture.jsonl"};
  if (!rc) rc = test_run_write(dir, &run);
  /* The fixture's rows are drawn values, not softmax averages (zeros and
   * threshold values are planted, so rows sum to 0.3 .. 1.1): a run that
   * does not state its head aggregation gets no row-sum check. */
  if (!rc) rc = test_run_json_edit(dir, "aggregation.heads", NULL);
  for (size_t i = 0; i < n; i++) {
    for (size_t t = 0; t < episodes[i].tokens; t++) free(episodes[i].region[t]);
    free(episodes[i].region);
    free(episodes[i].attn);
  }
  return rc;
}

/* ---- damage -------------------------------------------------------------------------- */

static json_t *walk(json_t *node, char *part) {
  char *bracket = strchr(part, '[');
  if (bracket) *bracket = '\0';
  if (*part) node = json_object_get(node, part);
  while (node && bracket) {
    node = json_array_get(node, strtoul(bracket + 1, NULL, 10));
    bracket = strchr(bracket + 1, '[');
  }
  return node;
}

int test_run_json_edit(const char *dir, const char *path, const char *value) {
  char *file = join(dir, "run.json");
  json_t *root = json_load_file(file, 0, NULL);
  char buffer[256];
  snprintf(buffer, sizeof buffer, "%s", path);
  char *key = strrchr(buffer, '.');
  json_t *parent = root;
  if (key) {
    *key++ = '\0';
    char *save = NULL;
    for (char *part = strtok_r(buffer, ".", &save); part && parent;
         part = strtok_r(NULL, ".", &save))
      parent = walk(parent, part);
  } else {
    key = buffer;
  }
  int rc = parent ? 0 : -1;
  if (!rc && value) {
    json_t *new_value = json_loads(value, JSON_DECODE_ANY, NULL);
    rc = new_value ? json_object_set_new(parent, key, new_value) : -1;
  } else if (!rc) {
    rc = json_object_del(parent, key);
  }
  if (!rc) rc = write_json(file, root);
  if (rc) fprintf(stderr, "run_dir_writer: cannot edit %s in %s\n", path, file);
  json_decref(root);
  free(file);
  return rc;
}

int test_manifest_replace_line(const char *dir, size_t line, const char *text) {
  char *path = join(dir, "manifest.csv");
  FILE *fp = fopen(path, "rb");
  char *old = NULL;
  long size = 0;
  if (fp) {
    fseek(fp, 0, SEEK_END);
    size = ftell(fp);
    rewind(fp);
    old = calloc((size_t)size + 1, 1);
    if (fread(old, 1, (size_t)size, fp) != (size_t)size) size = -1;
    fclose(fp);
  }
  fp = old && size >= 0 ? fopen(path, "wb") : NULL;
  int rc = fp ? 0 : -1;
  size_t current = 1;
  for (char *c = old; fp && c && *c; current++) {
    char *end = strchr(c, '\n');
    size_t len = end ? (size_t)(end - c) + 1 : strlen(c);
    if (current == line) fprintf(fp, "%s\n", text);
    else fwrite(c, 1, len, fp);
    c += len;
  }
  long bytes = fp ? ftell(fp) : 0;
  if (fp) fclose(fp);
  char value[32];
  snprintf(value, sizeof value, "%ld", bytes);
  if (!rc) rc = test_run_json_edit(dir, "manifest_bytes", value);
  free(old);
  free(path);
  return rc;
}

int test_truncate(const char *dir, const char *file, long size) {
  char *path = join(dir, file);
  int rc = size < 0 ? unlink(path) : truncate(path, size);
  if (rc) fprintf(stderr, "run_dir_writer: cannot truncate %s: %s\n", path, strerror(errno));
  free(path);
  return rc;
}

int test_write_npy(const char *dir, const char *sub, const char *id, int ndim,
                   const long *shape, float value, long index) {
  int64_t dims[8];
  size_t count = 1;
  for (int d = 0; d < ndim; d++) {
    dims[d] = shape[d];
    count *= (size_t)shape[d];
  }
  float *data = calloc(count + 1, sizeof *data);
  if (index >= 0 && (size_t)index < count) data[index] = value;
  int rc = write_npy(dir, sub, id, ndim, dims, data);
  free(data);
  return rc;
}
