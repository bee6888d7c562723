/* `extract` end to end on the seeded synthetic dataset of tests/extract
 * (written as a run directory), against what tests/extract/make_fixtures.R
 * computes in R from the definitions: every event row (both estimands, two
 * parameter sets), the token counts and refreshed shares per region, kappa
 * (type-7 quantile of the EWMA over unpinned tokens; once in one pass and
 * once forced into two), alpha, the mean uniform-relative attention per
 * region and its curve by age. Then `fit --calibration` and the config's
 * policy, model, workload and measured fields.
 *
 *   test_extract_r PROGRAM   (MD_SOURCE_ROOT, MD_BUILD_ROOT from meson) */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/formats/calibration.h"
#include "tests/run_dir/run_dir_writer.h"
#include "tests/test_util.h"

#define RTOL 1e-12

static const char *program, *source_root;
static char work[4096];

static int run(char *const argv[]) {
  pid_t pid = fork();
  if (pid == 0) {
    execv(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- CSV without quoting (the fixtures and our events' first columns) ------- */

typedef struct csv {
  size_t n_rows, n_columns;
  char **header;
  char ***rows;
  char *text;
} csv;

static int read_csv(const char *path, csv *out) {
  memset(out, 0, sizeof *out);
  FILE *fp = fopen(path, "rb");
  if (!fp) return 0;
  fseek(fp, 0, SEEK_END);
  long size = ftell(fp);
  rewind(fp);
  out->text = calloc((size_t)size + 1, 1);
  size_t got = fread(out->text, 1, (size_t)size, fp);
  fclose(fp);
  if (got != (size_t)size) return 0;
  size_t lines = 0;
  for (long i = 0; i < size; i++) lines += out->text[i] == '\n';
  out->rows = calloc(lines + 1, sizeof *out->rows);
  char *save = NULL;
  for (char *line = strtok_r(out->text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char **fields = calloc(16, sizeof *fields);
    size_t n = 0;
    fields[n++] = line;
    for (char *c = line; *c && n < 16; c++)
      if (*c == ',') *c = '\0', fields[n++] = c + 1;
    if (!out->header) {
      out->header = fields;
      out->n_columns = n;
    } else {
      out->rows[out->n_rows++] = fields;
    }
  }
  return 1;
}

static size_t column(const csv *table, const char *name) {
  for (size_t i = 0; i < table->n_columns; i++)
    if (!strcmp(table->header[i], name)) return i;
  fprintf(stderr, "no column %s\n", name);
  exit(1);
}

static void free_csv(csv *table) {
  for (size_t r = 0; r < table->n_rows; r++) free(table->rows[r]);
  free(table->rows);
  free(table->header);
  free(table->text);
}

static char *fixture(const char *name) {
  static char path[4300];
  snprintf(path, sizeof path, "%s/tests/extract/fixtures/%s", source_root, name);
  return path;
}

/* ---- comparisons ------------------------------------------------------------------- */

/* Same rows in the same order: R lists tokens in order, gaps in time order. */
static void compare_events(const char *ours_path, const char *reference) {
  csv ours, want;
  CHECK(read_csv(ours_path, &ours));
  CHECK(read_csv(fixture(reference), &want));
  CHECK_MSG(ours.n_rows == want.n_rows, "%s: %zu rows, R has %zu", reference, ours.n_rows,
            want.n_rows);
  const char *keys[] = {"episode", "pos", "region", "time", "event", "entry", "weight"};
  for (size_t r = 0; r < ours.n_rows && r < want.n_rows; r++) {
    for (size_t k = 0; k < 7; k++) {
      const char *a = ours.rows[r][column(&ours, keys[k])];
      const char *b = want.rows[r][column(&want, keys[k])];
      CHECK_MSG(!strcmp(a, b), "%s row %zu: %s is %s, R says %s", reference, r + 1, keys[k], a, b);
    }
  }
  free_csv(&ours);
  free_csv(&want);
}

static void compare_stats(const md_calibration *c, const char *reference) {
  csv want;
  CHECK(read_csv(fixture(reference), &want));
  size_t q = column(&want, "quantity"), rg = column(&want, "region"), v = column(&want, "value");
  for (size_t r = 0; r < want.n_rows; r++) {
    const char *quantity = want.rows[r][q], *name = want.rows[r][rg];
    double value = !strcmp(want.rows[r][v], "NA") ? NAN : strtod(want.rows[r][v], NULL);
    if (!strcmp(quantity, "kappa")) CHECK_REL(c->policy.kappa, value, RTOL);
    if (!strcmp(quantity, "kappa_samples")) CHECK(c->policy.kappa_samples == (uint64_t)value);
    if (!strcmp(quantity, "alpha")) CHECK_REL(c->policy.alpha, value, RTOL);
    if (!strcmp(quantity, "alpha_regions")) CHECK(c->policy.alpha_regions == (uint64_t)value);
    if (!name[0]) continue;
    const md_calibration_region *region = md_calibration_find(c, name);
    if (!strcmp(name, "tool_in")) {
      /* R's region table has a region no token belongs to; the run's has not. */
      CHECK_MSG(!region, "%s: a region without tokens is not in the run", name);
      continue;
    }
    CHECK_MSG(region != NULL, "%s missing", name);
    if (!region) continue;
    if (!strcmp(quantity, "tokens")) CHECK(region->tokens == (uint64_t)value);
    if (!strcmp(quantity, "observed")) CHECK(region->observed_tokens == (uint64_t)value);
    if (!strcmp(quantity, "refreshed")) CHECK(region->refreshed_tokens == (uint64_t)value);
    if (!strcmp(quantity, "share")) CHECK_REL(region->refreshed_share, value, RTOL);
    if (!strcmp(quantity, "base_priority")) CHECK_REL(region->base_priority, value, RTOL);
  }
  free_csv(&want);
}

static void compare_attention(const md_calibration *c) {
  csv means, curve;
  CHECK(read_csv(fixture("mean_relative_attention.csv"), &means));
  CHECK(read_csv(fixture("curve.csv"), &curve));
  for (size_t r = 0; r < means.n_rows; r++) {
    const md_calibration_region *region = md_calibration_find(c, means.rows[r][0]);
    CHECK(region != NULL);
    if (!region) continue;
    CHECK(region->visible_pairs == strtoull(means.rows[r][1], NULL, 10));
    CHECK_REL(region->mean_relative_attention, strtod(means.rows[r][2], NULL), RTOL);
  }
  size_t points = 0;
  for (size_t r = 0; r < curve.n_rows; r++) {
    const md_calibration_region *region = md_calibration_find(c, curve.rows[r][0]);
    size_t age = strtoul(curve.rows[r][1], NULL, 10);
    CHECK(region && age < region->curve_length);
    if (!region || age >= region->curve_length) continue;
    CHECK(region->curve_pairs[age] == strtoull(curve.rows[r][2], NULL, 10));
    CHECK_REL(region->curve_mean[age], strtod(curve.rows[r][3], NULL), RTOL);
    points++;
  }
  size_t ours = 0;
  for (size_t i = 0; i < c->n_regions; i++) ours += c->regions[i].curve_length;
  CHECK_MSG(ours == points, "%zu curve points, R has %zu", ours, points);
  free_csv(&means);
  free_csv(&curve);
}

/* ---- the runs -------------------------------------------------------------------------- */

typedef struct parameter_set {
  const char *name, *tau, *guard, *beta, *quantile;
  const char *memory;   /* --kappa-memory: "0" forces the second pass */
  int passes;
} parameter_set;

static void extract(const parameter_set *p, const char *estimand, const char *run_dir,
                    const char *events) {
  char *argv[] = {(char *)program, "extract", (char *)run_dir, "-o", (char *)events,
                  "--estimand", (char *)estimand, "--tau", (char *)p->tau, "--guard",
                  (char *)p->guard, "--ewma-beta", (char *)p->beta, "--quantile",
                  (char *)p->quantile, "--kappa-memory", (char *)p->memory, "--reproducible",
                  "--quiet", NULL};
  CHECK_MSG(run(argv) == 0, "extract %s %s failed", p->name, estimand);
}

static void check_set(const parameter_set *p, const char *run_dir) {
  const char *estimands[] = {"last-use", "gap"};
  for (int e = 0; e < 2; e++) {
    char events[4300], sidecar[4300], reference[64], stats[64];
    snprintf(events, sizeof events, "%s/%s-%s.csv", work, p->name, estimands[e]);
    snprintf(sidecar, sizeof sidecar, "%s/%s-%s.calibration.json", work, p->name, estimands[e]);
    snprintf(reference, sizeof reference, "events_%s_%s.csv", p->name, estimands[e]);
    snprintf(stats, sizeof stats, "stats_%s.csv", p->name);
    extract(p, estimands[e], run_dir, events);
    compare_events(events, reference);
    md_calibration c;
    md_error err = {0};
    CHECK_MSG(md_calibration_read(sidecar, &c, &err) == MD_OK, "%s", err.message);
    compare_stats(&c, stats);
    compare_attention(&c);
    CHECK(c.policy.passes == p->passes);
    CHECK(!strcmp(c.workload.estimand, estimands[e]));
    CHECK(c.workload.episodes == 6 && !strcmp(c.model.name, "fixture-model"));
    md_calibration_free(&c);
  }
}

static double user_mean_relative_attention(void) {
  csv means;
  double value = NAN;
  CHECK(read_csv(fixture("mean_relative_attention.csv"), &means));
  for (size_t r = 0; r < means.n_rows; r++)
    if (!strcmp(means.rows[r][0], "user")) value = strtod(means.rows[r][2], NULL);
  free_csv(&means);
  return value;
}

/* fit --calibration carries the sidecar into memdecay.json. */
static void check_fit(void) {
  char events[4300], sidecar[4300], config[4300];
  snprintf(events, sizeof events, "%s/A-last-use.csv", work);
  snprintf(sidecar, sizeof sidecar, "%s/A-last-use.calibration.json", work);
  snprintf(config, sizeof config, "%s/A.json", work);
  char *argv[] = {(char *)program, "fit", events, "--calibration", sidecar, "-o", config,
                  "--reproducible", "--quiet", NULL};
  CHECK(run(argv) == 0);
  json_t *root = json_load_file(config, 0, NULL);
  CHECK(root != NULL);
  double kappa = 0, alpha = 0, share = 0, mean = 0;
  const char *source = NULL, *bp_source = NULL, *model = NULL;
  json_int_t tokens = 0, episodes = 0, page_size = 0;
  CHECK(json_unpack(root, "{s:{s:s} s:{s:I} s:{s:s s:I s:F s:{s:F}} s:{s:{s:s s:F s:{s:F s:I}}}}",
                    "model", "name", &model, "workload", "episodes", &episodes, "policy",
                    "source", &source, "page_size", &page_size, "alpha", &alpha,
                    "attention_norm", "kappa", &kappa, "regions", "user",
                    "base_priority_source", &bp_source, "base_priority", &share, "measured",
                    "mean_relative_attention", &mean, "tokens", &tokens) == 0);
  CHECK(model && !strcmp(model, "fixture-model") && episodes == 6 && page_size == 16);
  CHECK(source && !strcmp(source, "measured") && bp_source && !strcmp(bp_source, "measured"));
  /* R: stats_A.csv and mean_relative_attention.csv */
  CHECK_REL(kappa, 2.5406396325292784, RTOL);
  CHECK_REL(alpha, 0.6875, RTOL);
  CHECK_REL(share, 0.89655172413793105, RTOL);
  CHECK(tokens == 29);
  CHECK_REL(mean, user_mean_relative_attention(), RTOL);
  json_decref(root);
}

int main(int argc, char **argv) {
  if (argc != 2) return fprintf(stderr, "usage: test_extract_r PROGRAM\n"), 2;
  program = argv[1];
  source_root = getenv("MD_SOURCE_ROOT") ? getenv("MD_SOURCE_ROOT") : ".";
  const char *build = getenv("MD_BUILD_ROOT") ? getenv("MD_BUILD_ROOT") : ".";
  snprintf(work, sizeof work, "%s/tests/extract_cli/r", build);
  char run_dir[4300];
  snprintf(run_dir, sizeof run_dir, "%s/run", work);
  test_run_write(work, &(test_run){0, NULL, 1, true, NULL, NULL});  /* the folder */
  CHECK(test_run_write_fixture(run_dir, source_root) == 0);
  const parameter_set a = {"A", "1", "4", "0.9", "0.95", "256", 1};
  const parameter_set b = {"B", "2", "0", "0.5", "0.5", "0", 2};
  check_set(&a, run_dir);
  check_set(&b, run_dir);
  check_fit();
  return md_test_finish("extract_r");
}
