#include "fit/regions/fit_stage.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/files/atomic_file.h"
#include "io/files/output_guard.h"
#include "base/timestamp.h"
#include "io/formats/km_csv.h"
#include "md_build_config.h"

void md_fit_options_init(md_fit_options *options) {
  *options = (md_fit_options){.settings = {.level = MD_REGIONS_LEVEL_DEFAULT,
                                           .band = MD_KM_BAND_LOG}};
}

void md_fit_outcome_free(md_fit_outcome *outcome) {
  if (!outcome) return;
  md_regions_results_free(&outcome->results);
  free(outcome->json);
  md_events_free(&outcome->events);
  md_calibration_free(&outcome->calibration);
  md_priors_free(&outcome->priors);
  memset(outcome, 0, sizeof *outcome);
}

static bool to_stdout(const char *output) { return !output || !strcmp(output, "-"); }

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

/* All outputs are prepared before any is committed, so a failure leaves
 * none of them behind. */
static md_status write_outputs(const md_regions_results *results, const md_fit_options *options,
                               const md_regions_settings *settings, const char *json,
                               md_error *err) {
  md_atomic_file km_file = {0};
  md_atomic_file json_file = {0};
  md_status status = MD_OK;
  if (options->km_csv) status = render_km_csv(results, options->km_csv, &km_file, err);
  if (status == MD_OK && !to_stdout(options->output)) {
    status = md_atomic_open(&json_file, options->output, err);
    if (status == MD_OK && fputs(json, json_file.fp) == EOF) {
      status = md_fail(err, MD_E_IO, "%s: write failed", options->output);
    }
  }
  if (status == MD_OK && options->plot)
    status = md_regions_plot(results, settings->calibration, options->plot,
                             options->plot_log_time, err);
  if (status == MD_OK && options->km_csv) status = md_atomic_commit(&km_file, err);
  if (status == MD_OK && !to_stdout(options->output)) status = md_atomic_commit(&json_file, err);
  md_atomic_abort(&km_file);
  md_atomic_abort(&json_file);
  return status;
}

/* ---- the config ----------------------------------------------------------- */

static md_status build_json(const md_regions_results *results, const md_fit_options *options,
                            const md_regions_settings *settings, const md_events *events,
                            char **json, md_error *err) {
  char created[32];
  md_timestamp_now(created);
  md_config config = {
      .generator_version = MD_VERSION,
      .created = options->reproducible ? NULL : created,
      .workload = {.n_sources = options->n_inputs,
                   .sources = options->inputs,
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
  md_status status = md_regions_config(results, settings, &config, &storage, err);
  if (status == MD_OK) status = md_config_dump(&config, json, err);
  md_regions_config_free(&storage);
  return status;
}

/* ---- the stage ------------------------------------------------------------ */

/* Outputs never replace inputs or each other (io/files/output_guard.h),
 * checked before anything is read. */
static md_status check_outputs(const md_fit_options *options, md_error *err) {
  md_path_role outputs[] = {{options->output, "-o", false},
                            {options->km_csv, "--km-csv", false},
                            {options->plot, "--plot", false}};
  md_path_role *inputs = calloc(options->n_inputs + 2, sizeof *inputs);
  if (!inputs) return md_fail(err, MD_E_NOMEM, "out of memory");
  size_t n = 0;
  for (size_t i = 0; i < options->n_inputs; i++)
    inputs[n++] = (md_path_role){options->inputs[i], "events", false};
  inputs[n++] = (md_path_role){options->priors_path, "--priors", false};
  inputs[n++] = (md_path_role){options->calibration_path, "--calibration", false};
  md_status s = md_outputs_check(outputs, sizeof outputs / sizeof outputs[0], inputs, n, err);
  free(inputs);
  return s;
}

static md_status read_inputs(const md_fit_options *options, md_regions_settings *settings,
                             md_fit_outcome *outcome, md_error *err) {
  if (options->priors_path) {
    md_status status = md_priors_read(options->priors_path, &outcome->priors, err);
    if (status != MD_OK) return status;
  }
  settings->priors = &outcome->priors;
  settings->calibration = NULL;
  settings->calibration_path = NULL;
  if (options->calibration_path) {
    md_status status = md_calibration_read(options->calibration_path, &outcome->calibration, err);
    if (status != MD_OK) return status;
    settings->calibration = &outcome->calibration;
    settings->calibration_path = options->calibration_path;
  }
  return md_events_read(&outcome->events, options->inputs, options->n_inputs, err);
}

md_status md_fit(const md_fit_options *options, md_fit_outcome *outcome, md_error *err) {
  memset(outcome, 0, sizeof *outcome);
  md_regions_settings settings = options->settings;
  settings.drop_curves = !options->km_csv && !options->plot;
  md_status status = check_outputs(options, err);
  if (status == MD_OK) status = read_inputs(options, &settings, outcome, err);
  if (status == MD_OK) status = md_regions_fit_all(&outcome->events, &settings, &outcome->results, err);
  if (status == MD_OK)
    status = build_json(&outcome->results, options, &settings, &outcome->events, &outcome->json, err);
  if (status == MD_OK) status = write_outputs(&outcome->results, options, &settings, outcome->json, err);
  if (status != MD_OK) md_fit_outcome_free(outcome); /* each part is empty or whole */
  return status;
}
