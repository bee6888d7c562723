#include "fit/extract/extract_stage.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/files/atomic_file.h"
#include "io/files/output_guard.h"
#include "base/timestamp.h"
#include "io/formats/events.h"
#include "io/formats/run_dir.h"
#include "io/formats/run_set.h"
#include "md_build_config.h"

typedef struct extract_state {
  const md_extract_options *job;
  md_run_set set;                /* the run directories, in merge order */
  bool *pinned;                  /* [n_regions] */
  md_region_table table;         /* names = set.regions */
  md_attn_norm *norm;
  md_atomic_file events_file;
  uint64_t *event_rows;          /* [n_regions] */
  uint64_t rows;
  md_events plot_events;         /* the rows again, in memory, for --plot */
  md_warnings warnings;
  size_t episodes_done;
} extract_state;

char *md_extract_calibration_path(const char *events_path) {
  size_t len = strlen(events_path);
  const char *suffix = ".calibration.json";
  if (len > 4 && !strcmp(events_path + len - 4, ".csv")) len -= 4;
  char *path = malloc(len + strlen(suffix) + 1);
  if (!path) return NULL;
  memcpy(path, events_path, len);
  strcpy(path + len, suffix);
  return path;
}

/* ---- the events CSV -------------------------------------------------------------- */

static md_status write_row(void *user, const md_event_row *row, md_error *err) {
  extract_state *st = user;
  FILE *fp = st->events_file.fp;
  md_events_write_row(fp, row->region_name, row->time, row->event, row->entry, row->weight,
                      row->episode, row->pos, row->page, row->token_id);
  if (ferror(fp)) {
    return md_fail(err, MD_E_IO, "%s: write failed: %s", st->job->events_path, strerror(errno));
  }
  st->event_rows[row->region]++;
  st->rows++;
  if (!st->job->plot) return MD_OK;
  return md_events_append(&st->plot_events, row->region_name, row->time, row->event, row->entry,
                          row->weight, err);
}

/* ---- the episodes ------------------------------------------------------------------ */

static void show_progress(const extract_state *st, int pass, bool last) {
  if (!st->job->progress) return;
  md_extract_progress progress = {.pass = pass,
                                  .episodes_done = st->episodes_done,
                                  .episodes_total = st->set.n_episodes,
                                  .pass_done = last};
  st->job->progress(st->job->context, &progress);
}

static md_status one_episode(extract_state *st, const md_run_info *run,
                             const md_run_episode_data *episode, int pass, md_error *err) {
  if (episode->steps == 0) {
    if (pass > 1) return MD_OK;
    return md_warnings_add(&st->warnings, err, "run: episode \"%s\" has no decode steps: none of "
                           "its tokens is observed", episode->meta->id);
  }
  md_attn_episode view = {.id = episode->meta->id,
                          .steps = episode->steps,
                          .tokens = episode->tokens,
                          .attn = episode->attn,
                          .region = episode->region,
                          .birth = episode->birth,
                          .page = episode->page,
                          .token_id = episode->token_id};
  md_status status = md_lifetimes_episode(&view, &st->table, &st->job->lifetimes,
                                          pass == 1 ? write_row : NULL, st, st->norm, err);
  if (status == MD_OK || status == MD_E_NOMEM) return status;
  return md_error_prefix(err, "%s/attn/%s.npy", run->dir, episode->meta->id);
}

/* One pass over every episode; the first also writes the rows. */
static md_status one_pass(extract_state *st, int pass, md_error *err) {
  md_run_set_reader *reader;
  md_status status = md_run_set_reader_open(&st->set, &reader, err);
  st->episodes_done = 0;
  while (status == MD_OK) {
    md_run_episode_data episode;
    const md_run_info *run = NULL;
    bool done;
    status = md_run_set_reader_next(reader, &episode, &run, &done, err);
    if (status != MD_OK || done) break;
    status = one_episode(st, run, &episode, pass, err);
    st->episodes_done++;
    show_progress(st, pass, false);
  }
  if (status == MD_OK) show_progress(st, pass, true);
  md_run_set_reader_close(reader);
  return status;
}

static md_status measure(extract_state *st, md_error *err) {
  FILE *fp = st->events_file.fp;
  if (fputs(MD_EVENTS_HEADER, fp) == EOF) {
    return md_fail(err, MD_E_IO, "%s: write failed", st->job->events_path);
  }
  md_status status = one_pass(st, 1, err);
  bool again = false;
  if (status == MD_OK) status = md_attn_norm_end_pass(st->norm, &again, err);
  if (status == MD_OK && again) status = one_pass(st, 2, err);
  if (status == MD_OK && again) status = md_attn_norm_end_pass(st->norm, &again, err);
  return status;
}

/* ---- set-up ------------------------------------------------------------------------ */

static md_status set_up(extract_state *st, md_error *err) {
  const md_extract_options *job = st->job;
  md_run_set_options options = {.allow_incomplete = job->allow_incomplete,
                                .allow_partial = job->allow_partial,
                                .traces_sha256 = job->expect_traces_sha256,
                                .config_sha256 = job->expect_config_sha256};
  md_status status = md_run_set_read(job->run_dirs, job->n_run_dirs, &options, &st->set, err);
  if (status != MD_OK) return status;
  size_t n = st->set.n_regions;
  st->pinned = calloc(n + 1, sizeof *st->pinned);
  st->event_rows = calloc(n + 1, sizeof *st->event_rows);
  if (!st->pinned || !st->event_rows) return md_fail(err, MD_E_NOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) st->pinned[i] = md_regions_pinned(st->set.regions[i], &job->settings);
  st->table = (md_region_table){.n = n,
                                .names = (const char *const *)st->set.regions,
                                .pinned = st->pinned};
  return md_attn_norm_new(&st->table, &job->norm, &st->norm, err);
}

static void tear_down(extract_state *st) {
  md_atomic_abort(&st->events_file);
  md_attn_norm_free(st->norm);
  md_events_free(&st->plot_events);
  md_warnings_free(&st->warnings);
  free(st->pinned);
  free(st->event_rows);
  md_run_set_free(&st->set);
}

/* ---- the calibration --------------------------------------------------------------- */

static char *copy(const char *text, bool *failed) {
  if (!text) return NULL;
  char *duplicate = strdup(text);
  if (!duplicate) *failed = true;
  return duplicate;
}

static void fill_identity(const extract_state *st, const char *calibration_events_path,
                          md_calibration *c, bool *failed) {
  const md_run_info *info = &st->set.runs[0];
  char created[32];
  md_timestamp_now(created);
  c->generator_version = copy(MD_VERSION, failed);
  c->created = st->job->reproducible ? NULL : copy(created, failed);
  c->run.path = copy(info->dir, failed);
  if (st->set.n_runs > 1) {
    c->run.paths = calloc(st->set.n_runs, sizeof *c->run.paths);
    if (!c->run.paths) *failed = true;
    for (size_t r = 0; c->run.paths && r < st->set.n_runs; r++) {
      c->run.paths[r] = copy(st->set.runs[r].dir, failed);
      c->run.n_paths++;
    }
  }
  c->run.device = copy(info->device, failed);
  c->run.complete = st->set.complete;
  c->run.layers[0] = info->aggregation.layers[0];
  c->run.layers[1] = info->aggregation.layers[1];
  c->run.heads = copy(info->aggregation.heads, failed);
  c->run.page_size = info->aggregation.page_size;
  c->model.name = copy(info->model.name, failed);
  c->model.config_sha256 = copy(info->model.config_sha256, failed);
  c->model.path = copy(info->model.path, failed);
  c->model.architecture = copy(info->model.architecture, failed);
  c->model.dtype = copy(info->model.dtype, failed);
  c->events.path = copy(calibration_events_path, failed);
}

static void fill_workload(const extract_state *st, md_calibration *c, bool *failed) {
  const md_run_set *info = &st->set;
  c->workload.sources = calloc(info->n_traces + 1, sizeof *c->workload.sources);
  c->workload.sources_sha256 = calloc(info->n_traces + 1, sizeof *c->workload.sources_sha256);
  if (!c->workload.sources || !c->workload.sources_sha256) {
    *failed = true;
    return;
  }
  c->workload.n_sources = info->n_traces;
  for (size_t t = 0; t < info->n_traces; t++) {
    c->workload.sources[t] = copy(info->traces_path[t], failed);
    c->workload.sources_sha256[t] = copy(info->traces_sha256[t], failed);
  }
  c->workload.episodes = info->n_episodes;
  c->workload.tokens = info->tokens;
  c->workload.prompt_tokens = info->prompt_tokens;
  c->workload.decoded_tokens = info->decode_steps;
  c->workload.decode_steps = info->max_decode_steps;
  c->workload.decode_steps_min = info->min_decode_steps;
  c->workload.estimand = copy(md_estimand_name(st->job->lifetimes.estimand), failed);
  c->workload.tau = st->job->lifetimes.tau;
  c->workload.guard = st->job->lifetimes.guard;
  c->events.rows = st->rows;
}

static void fill_region(const extract_state *st, const md_region_attn_stats *stats, size_t i,
                        md_calibration_region *r, bool *failed) {
  r->name = copy(stats->name, failed);
  r->pinned = stats->pinned;
  r->tokens = stats->tokens;
  r->observed_tokens = stats->observed_tokens;
  r->refreshed_tokens = stats->refreshed_tokens;
  r->refreshed_share = stats->share_defined ? stats->refreshed_share : NAN;
  r->base_priority = stats->pinned ? 1.0 : r->refreshed_share;
  r->event_rows = st->event_rows[i];
  r->visible_pairs = stats->visible_pairs;
  r->mean_relative_attention = stats->visible_pairs ? stats->mean_relative_attention : NAN;
  r->curve_length = stats->curve_length;
  r->curve_mean = malloc((stats->curve_length + 1) * sizeof *r->curve_mean);
  r->curve_pairs = malloc((stats->curve_length + 1) * sizeof *r->curve_pairs);
  if (!r->curve_mean || !r->curve_pairs) {
    *failed = true;
    r->curve_length = 0;
    return;
  }
  memcpy(r->curve_mean, stats->curve_mean, stats->curve_length * sizeof *r->curve_mean);
  memcpy(r->curve_pairs, stats->curve_pairs, stats->curve_length * sizeof *r->curve_pairs);
}

/* Warnings the sidecar carries: why a quantity is null, what is missing. */
static md_status calibration_warnings(const extract_state *st, const md_attn_norm_result *result,
                                      md_calibration *c, md_error *err) {
  md_warnings *w = &c->warnings;
  md_status s = MD_OK;
  for (size_t i = 0; i < st->warnings.n && s == MD_OK; i++)
    s = md_warnings_add(w, err, "%s", st->warnings.lines[i]);
  const md_run_set *set = &st->set;
  bool unfinished = false;
  for (size_t r = 0; r < set->n_runs; r++) unfinished = unfinished || !set->runs[r].complete;
  if (s == MD_OK && unfinished)
    s = md_warnings_add(w, err, "run: the collection is not complete: %zu episodes done",
                        set->n_episodes);
  if (s == MD_OK && set->shards_missing)
    s = md_warnings_add(w, err, "run: %zu shard%s of the collection %s missing (%s): the "
                        "calibration covers the other shards' episodes only", set->shards_missing,
                        set->shards_missing == 1 ? "" : "s", set->shards_missing == 1 ? "is" : "are",
                        set->missing_list);
  if (s == MD_OK && set->devices_differ)
    s = md_warnings_add(w, err, "run: the runs were collected on different devices or CPU "
                        "thread counts: their attention differs by each one's rounding");
  if (s == MD_OK && set->n_skipped)
    s = md_warnings_add(w, err, "run: the collector skipped %zu episodes of the traces (listed "
                        "in run.json)", set->n_skipped);
  for (size_t i = 0; i < result->n_regions && s == MD_OK; i++)
    if (!result->regions[i].share_defined)
      s = md_warnings_add(w, err, "regions.%s: no token could be refreshed (each was born at the "
                          "last decode step): refreshed_share is null", result->regions[i].name);
  if (s == MD_OK && result->kappa_status != MD_KAPPA_OK)
    s = md_warnings_add(w, err, "policy: attention_norm.kappa cannot be estimated: %s",
                        md_kappa_status_message(result->kappa_status));
  if (s == MD_OK && !result->alpha_defined)
    s = md_warnings_add(w, err, "policy: alpha cannot be estimated: no unpinned region has an "
                        "observed token");
  return s;
}

static md_status build_calibration(const extract_state *st, const md_attn_norm_result *result,
                                   md_calibration *c, md_error *err) {
  memset(c, 0, sizeof *c);
  bool failed = false;
  fill_identity(st, st->job->events_path, c, &failed);
  fill_workload(st, c, &failed);
  c->policy.ewma_beta = result->ewma_beta;
  c->policy.alpha = result->alpha_defined ? result->alpha : NAN;
  c->policy.alpha_regions = result->alpha_regions;
  c->policy.kappa = result->kappa_status == MD_KAPPA_OK ? result->kappa : NAN;
  c->policy.quantile = result->quantile;
  c->policy.kappa_samples = result->kappa_samples;
  c->policy.passes = result->passes;
  c->regions = calloc(result->n_regions + 1, sizeof *c->regions);
  if (!c->regions) failed = true;
  for (size_t i = 0; c->regions && i < result->n_regions; i++) {
    fill_region(st, &result->regions[i], i, &c->regions[i], &failed);
    c->n_regions++;
  }
  md_status status = failed ? md_fail(err, MD_E_NOMEM, "out of memory") : MD_OK;
  if (status == MD_OK) status = calibration_warnings(st, result, c, err);
  return status;
}

/* ---- outputs ----------------------------------------------------------------------- */

static md_status draw(const extract_state *st, const md_calibration *calibration, md_error *err) {
  md_regions_settings settings = st->job->settings;
  settings.calibration = NULL;  /* the figure's fits need only the rows */
  md_regions_results results;
  md_status status = md_regions_fit_all(&st->plot_events, &settings, &results, err);
  if (status != MD_OK) return status;
  status = md_regions_plot(&results, calibration, st->job->plot, st->job->plot_log_time, err);
  md_regions_results_free(&results);
  return status;
}

static md_status write_outputs(extract_state *st, const md_calibration *calibration,
                               const char *calibration_path, md_error *err) {
  char *text = NULL;
  md_atomic_file file = {0};
  md_status status = md_calibration_dump(calibration, &text, err);
  if (status == MD_OK) status = md_atomic_open(&file, calibration_path, err);
  if (status == MD_OK && fputs(text, file.fp) == EOF)
    status = md_fail(err, MD_E_IO, "%s: write failed", calibration_path);
  if (status == MD_OK && st->job->plot) status = draw(st, calibration, err);
  if (status == MD_OK) status = md_atomic_commit(&st->events_file, err);
  if (status == MD_OK) status = md_atomic_commit(&file, err);
  md_atomic_abort(&file);
  free(text);
  return status;
}

static md_status finish(extract_state *st, const char *calibration_path,
                        md_extract_outcome *outcome, md_error *err) {
  md_attn_norm_result result;
  md_status status = md_attn_norm_finish(st->norm, &result, err);
  if (status != MD_OK) return status;
  status = build_calibration(st, &result, &outcome->calibration, err);
  if (status == MD_OK) status = write_outputs(st, &outcome->calibration, calibration_path, err);
  outcome->rows = st->rows;
  md_attn_norm_result_free(&result);
  return status;
}

/* Outputs never replace inputs or each other, nor land inside a run
 * directory (io/files/output_guard.h), checked before anything is read. */
static md_status check_outputs(const md_extract_options *job, const char *calibration_path,
                               md_error *err) {
  md_path_role outputs[] = {{job->events_path, "-o", false},
                            {calibration_path, "--calibration", false},
                            {job->plot, "--plot", false}};
  md_path_role *inputs = calloc(job->n_run_dirs ? job->n_run_dirs : 1, sizeof *inputs);
  if (!inputs) return md_fail(err, MD_E_NOMEM, "out of memory");
  for (size_t i = 0; i < job->n_run_dirs; i++)
    inputs[i] = (md_path_role){job->run_dirs[i], "run directory", true};
  md_status s = md_outputs_check(outputs, sizeof outputs / sizeof outputs[0], inputs, job->n_run_dirs, err);
  free(inputs);
  return s;
}

void md_extract_options_init(md_extract_options *options) {
  *options = (md_extract_options){.lifetimes = MD_LIFETIME_PARAMS_DEFAULT,
                                  .norm = MD_ATTN_NORM_PARAMS_DEFAULT,
                                  .settings = {.level = MD_REGIONS_LEVEL_DEFAULT,
                                               .band = MD_KM_BAND_LOG}};
}

void md_extract_outcome_free(md_extract_outcome *outcome) {
  if (!outcome) return;
  md_calibration_free(&outcome->calibration);
  free(outcome->calibration_path);
  memset(outcome, 0, sizeof *outcome);
}

md_status md_extract(const md_extract_options *options, md_extract_outcome *outcome,
                     md_error *err) {
  memset(outcome, 0, sizeof *outcome);
  outcome->calibration_path = options->calibration_path
                                  ? strdup(options->calibration_path)
                                  : md_extract_calibration_path(options->events_path);
  if (!outcome->calibration_path) return md_fail(err, MD_E_NOMEM, "out of memory");
  extract_state st = {.job = options};
  md_status status = check_outputs(options, outcome->calibration_path, err);
  if (status == MD_OK) {
    status = set_up(&st, err);
    if (status != MD_OK) md_error_blame_input(err); /* the run directories and settings were being checked */
  }
  if (status == MD_OK) status = md_atomic_open(&st.events_file, options->events_path, err);
  if (status == MD_OK) status = measure(&st, err);
  if (status == MD_OK) status = finish(&st, outcome->calibration_path, outcome, err);
  tear_down(&st);
  if (status != MD_OK) md_extract_outcome_free(outcome);
  return status;
}
