/* The extract and fit stages as library calls (md_extract, md_fit), not
 * through the program: the hand-derived small run of tests/run_dir/README.md
 * goes through both; the events are byte for byte the ones derived by hand
 * (tests/extract_cli/data/small-events.csv), the sidecar's kappa and alpha
 * and the config's regions are the derivation's; progress comes through the
 * callback; refusals leave nothing behind and the inputs untouched. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fit/extract/extract_stage.h"
#include "fit/regions/fit_stage.h"
#include "tests/run_dir/run_dir_writer.h"
#include "tests/test_util.h"

static char base[4096], run_dir[4200], events[4200], sidecar[4200], config[4200];
static const char *source_root;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* The whole file, NUL-terminated; NULL when unreadable. */
static char *slurp(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  char *text = NULL;
  size_t size = 0, used = 0;
  for (;;) {
    if (used + 4096 + 1 > size) {
      size = (used + 4096 + 1) * 2;
      char *bigger = realloc(text, size);
      if (!bigger) break;
      text = bigger;
    }
    size_t n = fread(text + used, 1, 4096, fp);
    used += n;
    if (n == 0) break;
  }
  fclose(fp);
  if (text) text[used] = '\0';
  return text;
}

/* The hand derivation's parameters: last-use, tau 1, guard 1, beta 0,
 * quantile 0.5. */
static void hand_options(md_extract_options *o, const char *const *dirs) {
  md_extract_options_init(o);
  o->run_dirs = dirs;
  o->n_run_dirs = 1;
  o->events_path = events;
  o->lifetimes.estimand = MD_ESTIMAND_LAST_USE;
  o->lifetimes.tau = 1;
  o->lifetimes.guard = 1;
  o->norm.ewma_beta = 0;
  o->norm.quantile = 0.5;
  o->reproducible = true;
}

/* One call per episode, then one that ends the pass. */
typedef struct progress_log {
  size_t calls, passes_done, last_done, last_total;
} progress_log;

static void on_progress(void *context, const md_extract_progress *p) {
  progress_log *log = context;
  log->calls++;
  log->passes_done += p->pass_done;
  log->last_done = p->episodes_done;
  log->last_total = p->episodes_total;
}

static void test_extract(void) {
  const char *dirs[] = {run_dir};
  md_extract_options o;
  hand_options(&o, dirs);
  progress_log log = {0};
  o.progress = on_progress;
  o.context = &log;
  md_extract_outcome outcome;
  md_error err = {0};
  CHECK_MSG(md_extract(&o, &outcome, &err) == MD_OK, "md_extract: %s", err.message);
  char expected_path[4300];
  snprintf(expected_path, sizeof expected_path, "%s/tests/extract_cli/data/small-events.csv",
           source_root);
  char *got = slurp(events), *want = slurp(expected_path);
  CHECK(got && want && !strcmp(got, want));
  CHECK(outcome.rows == 6);
  CHECK(outcome.calibration_path && !strcmp(outcome.calibration_path, sidecar) && exists(sidecar));
  CHECK(outcome.calibration.workload.episodes == 2 && outcome.calibration.workload.tokens == 10);
  CHECK(outcome.calibration.policy.kappa == 0.75 && outcome.calibration.policy.alpha == 1.0);
  CHECK(outcome.calibration.policy.kappa_samples == 17 && outcome.calibration.policy.passes == 1);
  CHECK(outcome.calibration.created == NULL); /* reproducible */
  CHECK(log.calls == 3 && log.passes_done == 1 && log.last_done == 2 && log.last_total == 2);
  free(got);
  free(want);
  md_extract_outcome_free(&outcome);

  /* --kappa-memory 0: two passes, the same kappa. */
  hand_options(&o, dirs);
  o.norm.memory_bytes = 0;
  o.events_path = config; /* elsewhere; removed below */
  CHECK(md_extract(&o, &outcome, &err) == MD_OK);
  CHECK(outcome.calibration.policy.passes == 2 && outcome.calibration.policy.kappa == 0.75);
  remove(outcome.calibration_path);
  md_extract_outcome_free(&outcome);
  remove(config);
}

static void test_extract_refusals(void) {
  md_extract_options o;
  md_extract_outcome outcome;
  md_error err = {0};
  /* A missing run directory: the input's fault; nothing written. */
  char missing[4300];
  snprintf(missing, sizeof missing, "%s/no-such-run", base);
  const char *gone[] = {missing};
  hand_options(&o, gone);
  o.events_path = config;
  CHECK(md_extract(&o, &outcome, &err) != MD_OK && err.kind == MD_KIND_INPUT);
  CHECK(strstr(err.message, "no-such-run") != NULL);
  CHECK(!exists(config) && outcome.calibration_path == NULL);
  /* An output inside the run directory (its manifest): refused before
   * anything is read, the manifest untouched. */
  char manifest[4300];
  snprintf(manifest, sizeof manifest, "%s/manifest.csv", run_dir);
  char *before = slurp(manifest);
  const char *dirs[] = {run_dir};
  hand_options(&o, dirs);
  o.events_path = manifest;
  err = (md_error){0};
  CHECK(md_extract(&o, &outcome, &err) != MD_OK && err.kind == MD_KIND_USAGE);
  char *after = slurp(manifest);
  CHECK(before && after && !strcmp(before, after));
  free(before);
  free(after);
}

static void test_fit(void) {
  const char *inputs[] = {events};
  md_fit_options o;
  md_fit_options_init(&o);
  o.inputs = inputs;
  o.n_inputs = 1;
  o.calibration_path = sidecar;
  o.output = config;
  o.reproducible = true;
  md_fit_outcome outcome;
  md_error err = {0};
  CHECK_MSG(md_fit(&o, &outcome, &err) == MD_OK, "md_fit: %s", err.message);
  char *written = slurp(config);
  CHECK(written && outcome.json && !strcmp(written, outcome.json));
  CHECK(outcome.json && strstr(outcome.json, "\"kappa\": 0.75") != NULL);
  CHECK(outcome.results.n_regions == 4); /* system, user, retrieval, scratchpad */
  bool system_pinned = false;
  for (size_t i = 0; i < outcome.results.n_regions; i++)
    if (!strcmp(outcome.results.regions[i].name, "system"))
      system_pinned = outcome.results.regions[i].pinned;
  CHECK(system_pinned);
  md_fit_outcome_free(&outcome);

  /* No output path: the text comes back and no file is written. */
  remove(config);
  o.output = NULL;
  CHECK(md_fit(&o, &outcome, &err) == MD_OK && outcome.json && !strcmp(outcome.json, written));
  CHECK(!exists(config));
  md_fit_outcome_free(&outcome);
  free(written);

  /* The config over its own input: refused, the events untouched. */
  char *before = slurp(events);
  o.output = events;
  err = (md_error){0};
  CHECK(md_fit(&o, &outcome, &err) != MD_OK && err.kind == MD_KIND_USAGE);
  char *after = slurp(events);
  CHECK(before && after && !strcmp(before, after));
  free(before);
  free(after);
  /* A malformed sidecar: the input's fault, named; nothing written. */
  o.output = config;
  o.calibration_path = events; /* CSV, not JSON */
  err = (md_error){0};
  CHECK(md_fit(&o, &outcome, &err) != MD_OK && err.kind == MD_KIND_INPUT);
  CHECK(strstr(err.message, "events.csv") != NULL && !exists(config));
}

int main(void) {
  const char *build_root = getenv("MD_BUILD_ROOT");
  source_root = getenv("MD_SOURCE_ROOT");
  if (!source_root) source_root = ".";
  snprintf(base, sizeof base, "%s/tests/extract/stages", build_root ? build_root : ".");
  nftw(base, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  mkdir(base, 0777);
  snprintf(run_dir, sizeof run_dir, "%s/run", base);
  snprintf(events, sizeof events, "%s/events.csv", base);
  snprintf(sidecar, sizeof sidecar, "%s/events.calibration.json", base);
  snprintf(config, sizeof config, "%s/memdecay.json", base);
  CHECK(test_run_write(run_dir, test_run_small()) == 0);
  test_extract();
  test_extract_refusals();
  test_fit();
  return md_test_finish("stages");
}
