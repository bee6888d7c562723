#include "calib/fit_job.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calib/cli.h"
#include "io/base/output_guard.h"
#include "io/base/atomic_file.h"
#include "io/formats/calibration.h"
#include "io/formats/config.h"
#include "io/formats/events.h"
#include "io/formats/km_csv.h"
#include "io/formats/priors.h"
#include "md_build_config.h"

void md_timestamp_now(char out[32]) {
  time_t now = time(NULL);
  struct tm utc;
  gmtime_r(&now, &utc);
  strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &utc);
}

/* ---- outputs -------------------------------------------------------------- */

static md_status render_km_csv(const md_regions_results *results, const char *path,
                               md_atomic_file *file, md_error *err) {
  md_status status = md_atomic_open(file, path, err);
  if (status != MD_OK) return status;
  const char **names = calloc(results->n_regions + 1, sizeof *names);
  const md_km_curve **curves = calloc(results->n_regions + 1, sizeof *curves);
  if (!names || !curves) {
    status = md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  } else {
    for (size_t i = 0; i < results->n_regions; i++) {
      names[i] = results->regions[i].name;
      curves[i] = &results->regions[i].km;
    }
    status = md_km_csv_write(file->fp, path, names, curves, results->n_regions, err);
  }
  free(names);
  free(curves);
  if (status != MD_OK) md_atomic_abort(file);
  return status;
}

static bool to_stdout(const char *output) { return !output || !strcmp(output, "-"); }

/* All outputs are prepared before any is committed, so a failure leaves
 * none of them behind. */
static int write_outputs(const md_regions_results *results, const md_fit_job *job, const char *json) {
  md_error err = {0};
  md_atomic_file km_file = {0};
  md_atomic_file json_file = {0};
  md_status status = MD_OK;
  if (job->km_csv) status = render_km_csv(results, job->km_csv, &km_file, &err);
  if (status == MD_OK && !to_stdout(job->output)) {
    status = md_atomic_open(&json_file, job->output, &err);
    if (status == MD_OK && fputs(json, json_file.fp) == EOF) {
      status = md_fail(&err, MD_E_IO, "%s: write failed", job->output);
    }
  }
  if (status == MD_OK && job->plot)
    status = md_regions_plot(results, job->settings.calibration, job->plot, job->plot_log_time, &err);
  if (status == MD_OK && job->km_csv) status = md_atomic_commit(&km_file, &err);
  if (status == MD_OK && !to_stdout(job->output)) status = md_atomic_commit(&json_file, &err);
  if (status != MD_OK) {
    md_atomic_abort(&km_file);
    md_atomic_abort(&json_file);
    return md_cli_report(&err);
  }
  if (to_stdout(job->output) && (fputs(json, stdout) == EOF || fflush(stdout) != 0)) {
    fprintf(stderr, MD_PROGRAM " %s: cannot write the config to standard output\n", job->command);
    return MD_EXIT_FAILURE;
  }
  return MD_EXIT_OK;
}

/* ---- the run -------------------------------------------------------------- */

static md_status build_json(const md_regions_results *results, const md_fit_job *job,
                            const md_events *events, char **json, md_error *err) {
  char created[32];
  md_timestamp_now(created);
  md_config config = {
      .generator_version = MD_VERSION,
      .created = job->reproducible ? NULL : created,
      .workload = {.n_sources = job->n_inputs,
                   .sources = job->inputs,
                   .rows = events->n_rows,
                   .episodes = NAN,
                   .tokens = NAN,
                   .decode_steps = NAN,
                   .tau = NAN,
                   .guard = NAN},
  };
  double weight = 0.0;
  for (size_t i = 0; i < results->n_regions; i++) weight += results->regions[i].totals.weight;
  config.workload.weight = weight;
  md_regions_config_storage storage = {0};
  md_status status = md_regions_config(results, &job->settings, &config, &storage, err);
  if (status == MD_OK) status = md_config_dump(&config, json, err);
  md_regions_config_free(&storage);
  return status;
}

static void report(const md_regions_results *results, const md_fit_job *job) {
  if (job->quiet) return;
  md_regions_print_table(stderr, results, job->settings.level);
  for (size_t i = 0; i < results->warnings.n; i++) {
    fprintf(stderr, MD_PROGRAM " %s: warning: %s\n", job->command, results->warnings.lines[i]);
  }
  if (!to_stdout(job->output)) {
    fprintf(stderr, "wrote %s (%zu regions)\n", job->output, results->n_regions);
  }
}

static int read_inputs(md_fit_job *job, md_priors *priors, md_calibration *calibration,
                       md_events *events) {
  md_error err = {0};
  if (job->priors_path && md_priors_read(job->priors_path, priors, &err) != MD_OK)
    return md_cli_report(&err);
  job->settings.priors = priors;
  if (job->calibration_path) {
    if (md_calibration_read(job->calibration_path, calibration, &err) != MD_OK)
      return md_cli_report(&err);
    job->settings.calibration = calibration;
    job->settings.calibration_path = job->calibration_path;
  }
  if (md_events_read(events, job->inputs, job->n_inputs, &err) != MD_OK)
    return md_cli_report(&err);
  return -1;
}

static int fit_and_write(md_fit_job *job, const md_events *events) {
  md_error err = {0};
  md_regions_results results;
  job->settings.drop_curves = !job->km_csv && !job->plot;
  md_status status = md_regions_fit_all(events, &job->settings, &results, &err);
  if (status != MD_OK) return md_cli_report(&err);
  char *json = NULL;
  status = build_json(&results, job, events, &json, &err);
  int exit_code = status == MD_OK ? write_outputs(&results, job, json) : md_cli_report(&err);
  if (exit_code == MD_EXIT_OK) report(&results, job);
  free(json);
  md_regions_results_free(&results);
  return exit_code;
}

/* Outputs never replace inputs or each other (io/base/output_guard.h),
 * checked before anything is read. */
static int check_outputs(const md_fit_job *job) {
  md_path_role outputs[] = {{job->output, "-o", false}, {job->km_csv, "--km-csv", false},
                            {job->plot, "--plot", false}};
  md_path_role *inputs = calloc(job->n_inputs + 2, sizeof *inputs);
  if (!inputs) return MD_EXIT_FAILURE;
  size_t n = 0;
  for (size_t i = 0; i < job->n_inputs; i++) inputs[n++] = (md_path_role){job->inputs[i], "events", false};
  inputs[n++] = (md_path_role){job->priors_path, "--priors", false};
  inputs[n++] = (md_path_role){job->calibration_path, "--calibration", false};
  md_error err = {0};
  md_status s = md_outputs_check(outputs, sizeof outputs / sizeof outputs[0], inputs, n, &err);
  free(inputs);
  return s == MD_OK ? -1 : md_cli_report(&err);
}

int md_fit_job_run(md_fit_job *job) {
  md_priors priors = {0};
  md_calibration calibration = {0};
  md_events events = {0};
  int exit_code = check_outputs(job);
  if (exit_code < 0) exit_code = read_inputs(job, &priors, &calibration, &events);
  if (exit_code < 0) exit_code = fit_and_write(job, &events);
  md_events_free(&events);
  md_calibration_free(&calibration);
  md_priors_free(&priors);
  job->settings.priors = NULL;
  job->settings.calibration = NULL;
  return exit_code;
}
