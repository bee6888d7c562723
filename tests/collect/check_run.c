/* Checks a run directory written by `collect` against the run-directory
 * contract (memdecay-run(5)) and against the HF references of
 * tests/collect/fixtures/<config>/ (made by tests/collect/make_fixtures.py):
 *
 *   check_run RUN_DIR FIXTURE_DIR [--created] [--skipped N]
 *   check_run RUN_DIR --contract
 *
 * run.json: every field (model shape from the checkpoint's config, settings,
 * the episodes in trace order with their lengths, complete, manifest_bytes =
 * the manifest's size, "created" only with --created, N skipped entries).
 * manifest.csv (read with libcsv, as readers do): the header, then per
 * episode P + S rows with pos, page = pos / page_size, birth, the token ids
 * and pieces of HF tokenizers, and regions (raw-form episodes; hand rule).
 * attn/<id>.npy: shape [S, P + S]; exact zeros after position P + t in row t;
 * each row within ATTN_TOL of HF's aggregated attention; with mean over
 * heads, each row sums to 1 (within ATTN_TOL), with max at least 1.
 * prefill/<id>.npy: shape [P]; within PREFILL_TOL of HF's column sums; the
 * sum is P (every prompt row sums to 1).
 *
 * With --contract (a real checkpoint without an HF reference): the same
 * checks of the files against each other and run.json (row counts, pos,
 * page, birth, ids within the vocabulary, region names, shapes, zeros
 * before birth, row sums, prefill sums), without the reference values.
 *
 * Tolerances (absolute): attention weights 1e-5 (our float32 vs torch's,
 * differing only in summation order; tests/model states the same bound);
 * prefill column sums 1e-4 (sums of up to ~240 weights). */
#include <csv.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/formats/npy.h"
#include "kernels/cpu/cpu.h"
#include "tests/test_util.h"

#define ATTN_TOL 1e-5
#define PREFILL_TOL 1e-4

/* ---- manifest.csv through libcsv ---------------------------------------------- */

typedef struct csv_table {
  char ***rows;    /* rows[i][j], NUL-terminated fields */
  size_t *widths;
  size_t n_rows, capacity;
  char **current;
  size_t current_width;
} csv_table;

static void on_field(void *data, size_t len, void *ctx) {
  csv_table *t = ctx;
  t->current = realloc(t->current, (t->current_width + 1) * sizeof *t->current);
  t->current[t->current_width] = strndup(data ? data : "", len);
  t->current_width++;
}

static void on_row(int c, void *ctx) {
  (void)c;
  csv_table *t = ctx;
  if (t->n_rows == t->capacity) {
    t->capacity = t->capacity ? 2 * t->capacity : 256;
    t->rows = realloc(t->rows, t->capacity * sizeof *t->rows);
    t->widths = realloc(t->widths, t->capacity * sizeof *t->widths);
  }
  t->rows[t->n_rows] = t->current;
  t->widths[t->n_rows] = t->current_width;
  t->n_rows++;
  t->current = NULL;
  t->current_width = 0;
}

static int read_csv(const char *path, csv_table *t) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return -1;
  struct csv_parser parser;
  csv_init(&parser, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL);
  char buffer[4096];
  size_t n;
  int bad = 0;
  while ((n = fread(buffer, 1, sizeof buffer, fp)) > 0)
    if (csv_parse(&parser, buffer, n, on_field, on_row, t) != n) bad = 1;
  if (csv_fini(&parser, on_field, on_row, t) != 0) bad = 1;
  csv_free(&parser);
  fclose(fp);
  return bad ? -1 : 0;
}

static void free_csv(csv_table *t) {
  for (size_t i = 0; i < t->n_rows; i++) {
    for (size_t j = 0; j < t->widths[i]; j++) free(t->rows[i][j]);
    free(t->rows[i]);
  }
  free(t->rows);
  free(t->widths);
}

/* ---- helpers ------------------------------------------------------------------ */

static char *path_of(const char *dir, const char *sub, const char *name, const char *suffix) {
  size_t n = strlen(dir) + strlen(sub) + strlen(name) + strlen(suffix) + 3;
  char *p = malloc(n);
  snprintf(p, n, "%s/%s%s%s%s", dir, sub, *sub ? "/" : "", name, suffix);
  return p;
}

static long long json_int(json_t *object, const char *key) {
  return (long long)json_integer_value(json_object_get(object, key));
}

static const char *json_str(json_t *object, const char *key) {
  const char *s = json_string_value(json_object_get(object, key));
  return s ? s : "(missing)";
}

static int is_hex64(const char *s) {
  if (strlen(s) != 64) return 0;
  for (int i = 0; i < 64; i++)
    if (!strchr("0123456789abcdef", s[i])) return 0;
  return 1;
}

static md_npy_array load_npy(const char *path, int ndim) {
  md_npy_array a;
  md_error err;
  memset(&a, 0, sizeof a);
  if (md_npy_read(path, &a, &err) != MD_OK) {
    CHECK_MSG(0, "%s", err.message);
    return a;
  }
  CHECK_MSG(a.dtype == MD_NPY_F32 && a.ndim == ndim, "%s: dtype %d ndim %d", path, a.dtype, a.ndim);
  return a;
}

/* ---- run.json ------------------------------------------------------------------- */

static void check_run_json(json_t *run, json_t *want, int created, long long skipped,
                           long long manifest_size) {
  CHECK(!strcmp(json_str(run, "format"), "memdecay-run/1"));
  CHECK(!strcmp(json_str(json_object_get(run, "generator"), "name"), "memdecay-calibrate"));
  CHECK_MSG(created == (json_object_get(run, "created") != NULL), "created present: %d",
            json_object_get(run, "created") != NULL);
  json_t *model = json_object_get(run, "model"), *want_model = json_object_get(want, "model");
  const char *keys[] = {"layers", "heads", "kv_heads", "hidden", "vocab", "max_position_embeddings"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    CHECK_MSG(json_int(model, keys[i]) == json_int(want_model, keys[i]), "model.%s = %lld", keys[i],
              json_int(model, keys[i]));
  CHECK(!strcmp(json_str(model, "architecture"), "Qwen2ForCausalLM"));
  CHECK(is_hex64(json_str(model, "config_sha256")));
  CHECK(is_hex64(json_str(json_object_get(run, "tokenizer"), "sha256")));
  CHECK(is_hex64(json_str(json_object_get(run, "traces"), "sha256")));
  json_t *agg = json_object_get(run, "aggregation");
  json_t *layers = json_object_get(agg, "layers"), *want_layers = json_object_get(want, "layers");
  CHECK(json_equal(layers, want_layers));
  CHECK(!strcmp(json_str(agg, "heads"), json_str(want, "heads")));
  CHECK(json_int(agg, "page_size") == json_int(want, "page_size"));
  CHECK(json_int(json_object_get(run, "decode"), "max_steps") == json_int(want, "max_steps"));
  CHECK(json_int(json_object_get(run, "decode"), "default_steps") == 256);
  CHECK(json_is_true(json_object_get(run, "complete")));
  /* The CPU back end's BLAS, for the record (optional in the format; this
   * build links OpenBLAS, which always names its core). */
  json_t *blas = json_object_get(run, "blas");
  if (!strcmp(json_str(run, "device"), "cpu")) {
    CHECK_MSG(json_is_object(blas) && json_object_size(blas) == 5, "blas: an object of 5 keys");
    /* These runs multiply in float32 (--bf16-gemm: tests/collect/bf16_gemm.sh). */
    CHECK_MSG(!strcmp(json_str(blas, "prompt_products"), "fp32"), "blas.prompt_products '%s'",
              json_str(blas, "prompt_products"));
    CHECK_MSG(!strncmp(json_str(blas, "library"), "OpenBLAS ", 9), "blas.library '%s'",
              json_str(blas, "library"));
    json_t *core = json_object_get(blas, "core");
    CHECK_MSG(json_is_string(core) && json_string_length(core) > 0, "blas.core: a name");
    const char *kernels = json_str(blas, "kernels");
    CHECK_MSG(!strcmp(kernels, "avx512") || !strcmp(kernels, "avx2") || !strcmp(kernels, "portable"),
              "blas.kernels '%s'", kernels);
    /* The path the run was told to use, when it was told. */
    const char *asked = getenv("MEMDECAY_CPU_KERNELS");
    if (asked && *asked && strcmp(asked, "best"))
      CHECK_MSG(!strcmp(kernels, asked), "blas.kernels '%s', MEMDECAY_CPU_KERNELS '%s'", kernels, asked);
    /* Who multiplied the prompt: by default ours on the avx2 path and on
     * the avx512 path of an AMD Zen 5 or later (family 26 on), OpenBLAS
     * elsewhere; MEMDECAY_CPU_GEMM=own or blas as asked. */
    const char *gemm = json_str(blas, "prompt_gemm"), *asked_gemm = getenv("MEMDECAY_CPU_GEMM");
    md_cpu_facts here = md_cpu_read_facts();
    bool zen5 = here.vendor == MD_CPU_VENDOR_AMD && here.family >= 26;
    bool own_default = !strcmp(kernels, "avx2") || (!strcmp(kernels, "avx512") && zen5);
    const char *want_gemm = asked_gemm && (!strcmp(asked_gemm, "own") || !strcmp(asked_gemm, "blas"))
                                ? asked_gemm
                                : own_default ? "own" : "blas";
    CHECK_MSG(!strcmp(gemm, want_gemm), "blas.prompt_gemm '%s' on the %s path, want '%s'", gemm,
              kernels, want_gemm);
  }
  CHECK_MSG(json_int(run, "manifest_bytes") == manifest_size, "manifest_bytes %lld, file %lld",
            json_int(run, "manifest_bytes"), manifest_size);
  CHECK_MSG((long long)json_array_size(json_object_get(run, "skipped")) == skipped, "%zu skipped",
            json_array_size(json_object_get(run, "skipped")));
  json_t *episodes = json_object_get(run, "episodes"), *want_episodes = json_object_get(want, "episodes");
  CHECK_MSG(json_array_size(episodes) == json_array_size(want_episodes), "%zu episodes listed",
            json_array_size(episodes));
  for (size_t i = 0; i < json_array_size(episodes) && i < json_array_size(want_episodes); i++) {
    json_t *e = json_array_get(episodes, i), *w = json_array_get(want_episodes, i);
    CHECK_MSG(!strcmp(json_str(e, "id"), json_str(w, "id")), "episode %zu is %s", i, json_str(e, "id"));
    const char *ints[] = {"line", "prompt_tokens", "decode_steps"};
    for (size_t k = 0; k < 3; k++)
      CHECK_MSG(json_int(e, ints[k]) == json_int(w, ints[k]), "%s: %s = %lld, expected %lld",
                json_str(w, "id"), ints[k], json_int(e, ints[k]), json_int(w, ints[k]));
    CHECK(!strcmp(json_str(e, "continuation"), json_str(w, "continuation")));
    CHECK(!strcmp(json_str(e, "region"), json_str(w, "region")));
    CHECK(json_is_true(json_object_get(e, "complete")));
  }
}

/* ---- manifest.csv --------------------------------------------------------------------- */

static int field_is(const csv_table *t, size_t row, size_t col, const char *want) {
  return row < t->n_rows && col < t->widths[row] && !strcmp(t->rows[row][col], want);
}

static long long field_int(const csv_table *t, size_t row, size_t col) {
  if (row >= t->n_rows || col >= t->widths[row]) return -999;
  return strtoll(t->rows[row][col], NULL, 10);
}

/* Rows of one episode, from `row`; returns the next row. */
static size_t check_manifest_episode(const csv_table *t, size_t row, json_t *w, long long page_size) {
  const char *id = json_str(w, "id");
  long long prompt = json_int(w, "prompt_tokens"), steps = json_int(w, "decode_steps");
  json_t *ids = json_object_get(w, "ids"), *pieces = json_object_get(w, "pieces");
  json_t *regions = json_object_get(w, "regions");
  int bad = 0;
  for (long long pos = 0; pos < prompt + steps; pos++, row++) {
    int ok = row < t->n_rows && t->widths[row] == 7 && field_is(t, row, 0, id) &&
             field_int(t, row, 1) == pos && field_int(t, row, 3) == pos / page_size &&
             field_int(t, row, 4) == (pos < prompt ? -1 : pos - prompt) &&
             field_int(t, row, 5) == json_integer_value(json_array_get(ids, (size_t)pos)) &&
             field_is(t, row, 6, json_string_value(json_array_get(pieces, (size_t)pos)));
    if (ok && json_is_array(regions))
      ok = field_is(t, row, 2, json_string_value(json_array_get(regions, (size_t)pos)));
    if (ok && pos >= prompt) ok = field_is(t, row, 2, json_str(w, "region"));
    if (!ok && bad++ < 3)
      CHECK_MSG(0, "manifest row %zu (%s pos %lld) differs from the reference", row, id, pos);
  }
  CHECK_MSG(bad == 0, "%s: %d manifest rows differ", id, bad);
  return row;
}

static void check_manifest(const char *run_dir, json_t *want) {
  char *path = path_of(run_dir, "", "manifest.csv", "");
  csv_table t = {0};
  CHECK_MSG(read_csv(path, &t) == 0, "%s: not valid CSV", path);
  const char *header[] = {"episode", "pos", "region", "page", "birth", "token_id", "piece"};
  for (size_t j = 0; j < 7; j++) CHECK_MSG(field_is(&t, 0, j, header[j]), "header field %zu", j);
  size_t row = 1;
  json_t *episodes = json_object_get(want, "episodes");
  for (size_t i = 0; i < json_array_size(episodes); i++)
    row = check_manifest_episode(&t, row, json_array_get(episodes, i), json_int(want, "page_size"));
  CHECK_MSG(row == t.n_rows, "manifest has %zu rows, expected %zu", t.n_rows, row);
  free_csv(&t);
  free(path);
}

/* ---- attention ------------------------------------------------------------------------- */

typedef struct worst {
  double attn, prefill, row_sum, prefill_sum;
} worst;

static void check_attn(const char *run_dir, const char *fixture, json_t *w, int heads_max, worst *e) {
  const char *id = json_str(w, "id");
  long long prompt = json_int(w, "prompt_tokens"), steps = json_int(w, "decode_steps");
  char *got_path = path_of(run_dir, "attn", id, ".npy"), *want_path = path_of(fixture, "", id, ".attn.npy");
  md_npy_array got = load_npy(got_path, 2), ref = load_npy(want_path, 2);
  long long width = prompt + steps;
  if (got.data && ref.data && got.shape[0] == steps && got.shape[1] == width &&
      ref.count == got.count) {
    const float *a = got.data, *b = ref.data;
    for (long long t = 0; t < steps; t++) {
      double sum = 0.0;
      for (long long j = 0; j < width; j++) {
        float v = a[t * width + j];
        if (j > prompt + t) {
          CHECK_MSG(v == 0.0f, "%s: attn[%lld][%lld] = %g before birth", id, t, j, v);
          continue;
        }
        sum += v;
        e->attn = fmax(e->attn, fabs((double)v - (double)b[t * width + j]));
      }
      double off = heads_max ? fmax(0.0, 1.0 - sum) : fabs(sum - 1.0);
      e->row_sum = fmax(e->row_sum, off);
    }
  } else {
    CHECK_MSG(0, "%s: shape [%lld, %lld], expected [%lld, %lld]", got_path, (long long)got.shape[0],
              (long long)got.shape[1], steps, width);
  }
  md_npy_free(&got);
  md_npy_free(&ref);
  free(got_path);
  free(want_path);
}

static void check_prefill(const char *run_dir, const char *fixture, json_t *w, worst *e) {
  const char *id = json_str(w, "id");
  long long prompt = json_int(w, "prompt_tokens");
  char *got_path = path_of(run_dir, "prefill", id, ".npy");
  char *want_path = path_of(fixture, "", id, ".prefill.npy");
  md_npy_array got = load_npy(got_path, 1), ref = load_npy(want_path, 1);
  if (got.data && ref.data && got.shape[0] == prompt && ref.count == got.count) {
    const float *a = got.data, *b = ref.data;
    double sum = 0.0;
    for (long long j = 0; j < prompt; j++) {
      sum += a[j];
      e->prefill = fmax(e->prefill, fabs((double)a[j] - (double)b[j]));
    }
    e->prefill_sum = fmax(e->prefill_sum, fabs(sum - (double)prompt) / (double)prompt);
  } else {
    CHECK_MSG(0, "%s: shape [%lld], expected [%lld]", got_path, (long long)got.shape[0], prompt);
  }
  md_npy_free(&got);
  md_npy_free(&ref);
  free(got_path);
  free(want_path);
}

/* ---- contract only ------------------------------------------------------------------- */

static int region_name_ok(const char *name) {
  if (!name[0] || name[0] < 'a' || name[0] > 'z') return 0;
  for (const char *c = name; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return 0;
  return 1;
}

static size_t contract_manifest_episode(const csv_table *t, size_t row, json_t *e, long long page_size,
                                        long long vocab) {
  const char *id = json_str(e, "id");
  long long prompt = json_int(e, "prompt_tokens"), steps = json_int(e, "decode_steps");
  int bad = 0;
  for (long long pos = 0; pos < prompt + steps; pos++, row++) {
    long long token = field_int(t, row, 5);
    int ok = row < t->n_rows && t->widths[row] == 7 && field_is(t, row, 0, id) &&
             field_int(t, row, 1) == pos && field_int(t, row, 3) == pos / page_size &&
             field_int(t, row, 4) == (pos < prompt ? -1 : pos - prompt) && token >= 0 &&
             token < vocab && region_name_ok(t->rows[row][2]);
    if (ok && pos >= prompt) ok = field_is(t, row, 2, json_str(e, "region"));
    if (!ok && bad++ < 3) CHECK_MSG(0, "manifest row %zu (%s pos %lld) breaks the contract", row, id, pos);
  }
  return row;
}

static void contract_attn(const char *run_dir, json_t *e, int heads_max, worst *w) {
  const char *id = json_str(e, "id");
  long long prompt = json_int(e, "prompt_tokens"), steps = json_int(e, "decode_steps");
  char *path = path_of(run_dir, "attn", id, ".npy");
  md_npy_array a = load_npy(path, 2);
  if (a.data && a.shape[0] == steps && a.shape[1] == prompt + steps) {
    const float *v = a.data;
    for (long long t = 0; t < steps; t++) {
      double sum = 0.0;
      for (long long j = 0; j < prompt + steps; j++) {
        float x = v[t * (prompt + steps) + j];
        if (j > prompt + t) CHECK_MSG(x == 0.0f, "%s: attn[%lld][%lld] = %g before birth", id, t, j, x);
        else sum += x;
      }
      w->row_sum = fmax(w->row_sum, heads_max ? fmax(0.0, 1.0 - sum) : fabs(sum - 1.0));
    }
  } else {
    CHECK_MSG(0, "%s: not float32 [%lld, %lld]", path, steps, prompt + steps);
  }
  md_npy_free(&a);
  free(path);
  path = path_of(run_dir, "prefill", id, ".npy");
  a = load_npy(path, 1);
  if (a.data && a.shape[0] == prompt) {
    double sum = 0.0;
    for (long long j = 0; j < prompt; j++) sum += ((const float *)a.data)[j];
    w->prefill_sum = fmax(w->prefill_sum, fabs(sum - (double)prompt) / (double)prompt);
  } else {
    CHECK_MSG(0, "%s: not float32 [%lld]", path, prompt);
  }
  md_npy_free(&a);
  free(path);
}

static int check_contract(const char *run_dir) {
  char *run_path = path_of(run_dir, "", "run.json", ""), *manifest_path = path_of(run_dir, "", "manifest.csv", "");
  json_error_t jerr;
  json_t *run = json_load_file(run_path, 0, &jerr);
  struct stat info;
  if (!run || stat(manifest_path, &info) != 0) {
    fprintf(stderr, "check_run: cannot read %s or %s\n", run_path, manifest_path);
    return 1;
  }
  CHECK(!strcmp(json_str(run, "format"), "memdecay-run/1"));
  CHECK(json_is_true(json_object_get(run, "complete")));
  CHECK(json_int(run, "manifest_bytes") == (long long)info.st_size);
  json_t *agg = json_object_get(run, "aggregation"), *episodes = json_object_get(run, "episodes");
  long long page_size = json_int(agg, "page_size"), vocab = json_int(json_object_get(run, "model"), "vocab");
  int heads_max = !strcmp(json_str(agg, "heads"), "max");
  CHECK(json_array_size(episodes) > 0 && page_size > 0 && vocab > 0);
  csv_table t = {0};
  CHECK_MSG(read_csv(manifest_path, &t) == 0, "%s: not valid CSV", manifest_path);
  size_t row = 1;
  worst w = {0};
  for (size_t i = 0; i < json_array_size(episodes); i++) {
    json_t *e = json_array_get(episodes, i);
    row = contract_manifest_episode(&t, row, e, page_size, vocab);
    contract_attn(run_dir, e, heads_max, &w);
  }
  CHECK_MSG(row == t.n_rows, "manifest has %zu rows, run.json accounts for %zu", t.n_rows, row);
  printf("%s: %zu episodes, %zu manifest rows; max row-sum error %.3g, prefill sum relative error %.3g\n",
         run_dir, json_array_size(episodes), t.n_rows, w.row_sum, w.prefill_sum);
  CHECK_MSG(w.row_sum <= ATTN_TOL, "row sums off by %g", w.row_sum);
  CHECK_MSG(w.prefill_sum <= 1e-5, "prefill sums off by %g", w.prefill_sum);
  free_csv(&t);
  json_decref(run);
  free(run_path);
  free(manifest_path);
  return md_test_finish("check_run --contract");
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: check_run RUN_DIR FIXTURE_DIR [--created] [--skipped N]\n"
                    "       check_run RUN_DIR --contract\n");
    return 2;
  }
  const char *run_dir = argv[1], *fixture = argv[2];
  if (!strcmp(fixture, "--contract")) return check_contract(run_dir);
  int created = 0;
  long long skipped = 0;
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "--created")) created = 1;
    else if (!strcmp(argv[i], "--skipped") && i + 1 < argc) skipped = atoll(argv[++i]);
  }
  char *want_path = path_of(fixture, "", "expected.json", "");
  char *run_path = path_of(run_dir, "", "run.json", "");
  char *manifest_path = path_of(run_dir, "", "manifest.csv", "");
  json_error_t jerr;
  json_t *want = json_load_file(want_path, 0, &jerr), *run = json_load_file(run_path, 0, &jerr);
  struct stat info;
  if (!want || !run || stat(manifest_path, &info) != 0) {
    fprintf(stderr, "check_run: cannot read %s, %s or %s\n", want_path, run_path, manifest_path);
    return 1;
  }
  check_run_json(run, want, created, skipped, (long long)info.st_size);
  check_manifest(run_dir, want);
  int heads_max = !strcmp(json_str(want, "heads"), "max");
  worst e = {0};
  json_t *episodes = json_object_get(want, "episodes");
  for (size_t i = 0; i < json_array_size(episodes); i++) {
    check_attn(run_dir, fixture, json_array_get(episodes, i), heads_max, &e);
    check_prefill(run_dir, fixture, json_array_get(episodes, i), &e);
  }
  printf("%s vs HF: max |attn - ref| %.3g, max row-sum error %.3g, max |prefill - ref| %.3g, "
         "prefill sum relative error %.3g\n", fixture, e.attn, e.row_sum, e.prefill, e.prefill_sum);
  CHECK_MSG(e.attn <= ATTN_TOL, "attention off by %g", e.attn);
  CHECK_MSG(e.row_sum <= ATTN_TOL, "row sums off by %g", e.row_sum);
  CHECK_MSG(e.prefill <= PREFILL_TOL, "prefill off by %g", e.prefill);
  CHECK_MSG(e.prefill_sum <= 1e-5, "prefill sums off by %g", e.prefill_sum);
  json_decref(want);
  json_decref(run);
  free(want_path);
  free(run_path);
  free(manifest_path);
  return md_test_finish("check_run");
}
