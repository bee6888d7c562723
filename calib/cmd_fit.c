/* memdecay-calibrate fit: events CSV in, memdecay.json out (plus, on
 * request, the Kaplan-Meier curves as CSV and a figure). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calib/cli.h"
#include "calib/fit_regions.h"
#include "io/atomic_file.h"
#include "io/config.h"
#include "io/events.h"
#include "io/km_csv.h"
#include "io/plot.h"
#include "io/priors.h"
#include "io/regions.h"
#include "md_build_config.h"

typedef struct fit_options {
  const char *output;       /* NULL or "-": standard output */
  const char *priors_path;
  const char *km_csv;
  const char *plot;
  bool plot_log_time;
  bool reproducible;
  bool quiet;
  md_fit_settings settings;
  md_pin_override *pins;    /* storage behind settings.pins */
  const char *const *inputs;
  size_t n_inputs;
} fit_options;

static void print_help(FILE *out) {
  fputs(
      "Usage: " MD_PROGRAM " fit [OPTIONS] EVENTS.csv...\n"
      "\n"
      "Fits survival models to token lifetimes, one per prompt region, and writes\n"
      "the MemDecay config (memdecay.json) a runtime loads: per region the decay rate\n"
      "lambda per decode step, the half-life ln 2/lambda with its confidence interval,\n"
      "the base priority and whether the region is pinned, with the exponential,\n"
      "Weibull and Kaplan-Meier fits behind them and log-rank tests between regions.\n"
      "\n"
      "Reads: one or more events CSV files (memdecay-events(5)), merged; '-' reads\n"
      "standard input. Columns region, time, event; optional entry, weight.\n"
      "Writes: memdecay.json (memdecay-config(5)) to standard output or -o FILE, and a\n"
      "per-region table on standard error. Every file is written atomically: on any\n"
      "error no output file is created or changed.\n"
      "\n"
      "Options:\n"
      "  -o, --output FILE      write the config to FILE (default: standard output)\n"
      "      --level P          confidence level of every interval (default 0.95)\n"
      "      --band TYPE        Kaplan-Meier band: log, log-log or plain (default log)\n"
      "      --pin REGION       pin REGION (never evicted, base priority 1); repeatable;\n"
      "                         system is pinned by default\n"
      "      --no-pin REGION    unpin REGION (e.g. --no-pin system); repeatable\n"
      "      --priors FILE      base priorities and pinning per region from a JSON file:\n"
      "                         {\"regions\": {\"plan\": {\"base_priority\": 0.9, \"pinned\": true}}}\n"
      "                         (default: built-in priors, see memdecay-config(5))\n"
      "      --km-csv FILE      also write the Kaplan-Meier curves with their bands as CSV:\n"
      "                         region,time,n_risk,n_event,n_censor,surv,std_err,lower,upper\n"
      "      --plot FILE        also draw the survival curves; FILE ends in .png, .svg or .pdf\n"
      "      --plot-log-time    draw the decode-step axis of --plot on a log scale\n"
      "      --reproducible     leave out the 'created' timestamp (byte-identical output)\n"
      "  -q, --quiet            print nothing on standard error but errors\n"
      "  -h, --help             show this help\n"
      "\n"
      "Pinning: defaults, then --priors, then --pin/--no-pin in command-line order.\n"
      "Base priority: from --priors when it sets one, else 1 for a pinned region, else\n"
      "the built-in prior of the region.\n"
      "\n"
      "Exit status: 0 success, 2 invalid usage or input, 3 output or internal failure.\n"
      "\n"
      "Example:\n"
      "  " MD_PROGRAM " fit data/events/demo-events.csv -o memdecay.json \\\n"
      "      --km-csv km.csv --plot survival.png\n"
      "\n"
      "Manual: man memdecay-calibrate, memdecay-events(5), memdecay-config(5).\n",
      out);
}

enum {
  OPT_LEVEL = 256,
  OPT_BAND,
  OPT_PIN,
  OPT_NO_PIN,
  OPT_PRIORS,
  OPT_KM_CSV,
  OPT_PLOT,
  OPT_PLOT_LOG_TIME,
  OPT_REPRODUCIBLE,
};

static const struct option long_options[] = {
    {"output", required_argument, NULL, 'o'},
    {"level", required_argument, NULL, OPT_LEVEL},
    {"band", required_argument, NULL, OPT_BAND},
    {"pin", required_argument, NULL, OPT_PIN},
    {"no-pin", required_argument, NULL, OPT_NO_PIN},
    {"priors", required_argument, NULL, OPT_PRIORS},
    {"km-csv", required_argument, NULL, OPT_KM_CSV},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"plot-log-time", no_argument, NULL, OPT_PLOT_LOG_TIME},
    {"reproducible", no_argument, NULL, OPT_REPRODUCIBLE},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Handles one option; returns -1 to go on, or an exit code. */
static int take_option(int code, const char *value, const char *arg, fit_options *options) {
  switch (code) {
    case 'o': options->output = value; return -1;
    case OPT_LEVEL:
      if (!md_cli_parse_double(value, 0.0, 1.0, &options->settings.level) ||
          options->settings.level <= 0.0 || options->settings.level >= 1.0) {
        return md_cli_usage_error("fit", "--level must be a number between 0 and 1, got '%s'",
                                  value);
      }
      return -1;
    case OPT_BAND:
      if (!md_km_band_parse(value, &options->settings.band)) {
        return md_cli_usage_error("fit", "--band must be log, log-log or plain, got '%s'", value);
      }
      return -1;
    case OPT_PIN:
    case OPT_NO_PIN:
      if (!md_region_name_valid(value, strlen(value))) {
        return md_cli_usage_error("fit", "'%s' is not a region name ([a-z][a-z0-9_]*)", value);
      }
      options->pins[options->settings.n_pins++] =
          (md_pin_override){.region = value, .pinned = code == OPT_PIN};
      return -1;
    case OPT_PRIORS: options->priors_path = value; return -1;
    case OPT_KM_CSV: options->km_csv = value; return -1;
    case OPT_PLOT: {
      md_error err = {0};
      if (md_plot_check_path(value, &err) != MD_OK) {
        return md_cli_usage_error("fit", "--plot: %s", err.message);
      }
      options->plot = value;
      return -1;
    }
    case OPT_PLOT_LOG_TIME: options->plot_log_time = true; return -1;
    case OPT_REPRODUCIBLE: options->reproducible = true; return -1;
    case 'q': options->quiet = true; return -1;
    case 'h': print_help(stdout); return MD_EXIT_OK;
    case ':': return md_cli_usage_error("fit", "option '%s' needs a value", arg);
    default: return md_cli_usage_error("fit", "unknown option '%s'", arg);
  }
}

/* Returns -1 when the run should go on, else the exit code. */
static int parse_options(int argc, char **argv, fit_options *options) {
  options->settings.level = 0.95;
  options->settings.band = MD_KM_BAND_LOG;
  options->pins = calloc((size_t)argc + 1, sizeof *options->pins);
  if (!options->pins) return MD_EXIT_FAILURE;
  options->settings.pins = options->pins;
  opterr = 0;
  optind = 1;
  int code;
  while ((code = getopt_long(argc, argv, ":o:qh", long_options, NULL)) != -1) {
    int exit_code = take_option(code, optarg, argv[optind - 1], options);
    if (exit_code >= 0) return exit_code;
  }
  if (optind >= argc) return md_cli_usage_error("fit", "no events file given");
  options->inputs = (const char *const *)argv + optind;
  options->n_inputs = (size_t)(argc - optind);
  return -1;
}

/* ---- outputs -------------------------------------------------------------- */

static md_status render_km_csv(const md_fit_results *results, const char *path,
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

static md_status draw_plot(const md_fit_results *results, const fit_options *options,
                           md_error *err) {
  md_plot_survival_series *series = calloc(results->n_regions + 1, sizeof *series);
  if (!series) return md_fail(err, MD_E_NOMEM, "%s: out of memory", options->plot);
  for (size_t i = 0; i < results->n_regions; i++) {
    const md_region_fit *fit = &results->regions[i];
    bool estimable = fit->exponential.estimable;
    series[i] = (md_plot_survival_series){
        .region = fit->name,
        .km = fit->km.n_times ? &fit->km : NULL,
        .lambda = estimable ? fit->exponential.lambda : NAN,
        .half_life = estimable ? md_half_life(fit->exponential.lambda) : NAN,
        .pinned = fit->pinned,
    };
    if (estimable) md_half_life_ci(fit->exponential.lambda_ci_wald, series[i].half_life_ci);
  }
  md_plot_request request = {.survival = series,
                             .n_survival = results->n_regions,
                             .log_time = options->plot_log_time,
                             .censor_marks = true};
  md_status status = md_plot_write(options->plot, &request, err);
  free(series);
  return status;
}

static bool to_stdout(const char *output) { return !output || !strcmp(output, "-"); }

/* All outputs are prepared before any is committed, so a failure leaves
 * none of them behind. */
static int write_outputs(const md_fit_results *results, const fit_options *options,
                         const char *json) {
  md_error err = {0};
  md_atomic_file km_file = {0};
  md_atomic_file json_file = {0};
  md_status status = MD_OK;
  if (options->km_csv) status = render_km_csv(results, options->km_csv, &km_file, &err);
  if (status == MD_OK && !to_stdout(options->output)) {
    status = md_atomic_open(&json_file, options->output, &err);
    if (status == MD_OK && fputs(json, json_file.fp) == EOF) {
      status = md_fail(&err, MD_E_IO, "%s: write failed", options->output);
    }
  }
  if (status == MD_OK && options->plot) status = draw_plot(results, options, &err);
  if (status == MD_OK && options->km_csv) status = md_atomic_commit(&km_file, &err);
  if (status == MD_OK && !to_stdout(options->output)) status = md_atomic_commit(&json_file, &err);
  if (status != MD_OK) {
    md_atomic_abort(&km_file);
    md_atomic_abort(&json_file);
    return md_cli_report(&err);
  }
  if (to_stdout(options->output) && (fputs(json, stdout) == EOF || fflush(stdout) != 0)) {
    fprintf(stderr, MD_PROGRAM " fit: cannot write the config to standard output\n");
    return MD_EXIT_FAILURE;
  }
  return MD_EXIT_OK;
}

/* ---- the run -------------------------------------------------------------- */

static void timestamp_now(char out[32]) {
  time_t now = time(NULL);
  struct tm utc;
  gmtime_r(&now, &utc);
  strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &utc);
}

static md_status build_json(const md_fit_results *results, const fit_options *options,
                            const md_events *events, char **json, md_error *err) {
  char created[32];
  timestamp_now(created);
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
  md_config_policy_defaults(&config.policy);
  md_fit_config_storage storage = {0};
  md_status status = md_fit_config(results, &options->settings, &config, &storage, err);
  if (status == MD_OK) status = md_config_dump(&config, json, err);
  md_fit_config_free(&storage);
  return status;
}

static void report(const md_fit_results *results, const fit_options *options) {
  if (options->quiet) return;
  md_fit_print_table(stderr, results, options->settings.level);
  for (size_t i = 0; i < results->warnings.n; i++) {
    fprintf(stderr, MD_PROGRAM " fit: warning: %s\n", results->warnings.lines[i]);
  }
  if (!to_stdout(options->output)) {
    fprintf(stderr, "wrote %s (%zu regions)\n", options->output, results->n_regions);
  }
}

static int run(fit_options *options, md_priors *priors) {
  md_error err = {0};
  if (options->priors_path && md_priors_read(options->priors_path, priors, &err) != MD_OK) {
    return md_cli_report_input(&err);
  }
  options->settings.priors = priors;
  md_events events;
  if (md_events_read(&events, options->inputs, options->n_inputs, &err) != MD_OK) {
    return md_cli_report_input(&err);
  }
  md_fit_results results;
  md_status status = md_fit_all(&events, &options->settings, &results, &err);
  bool fitted = status == MD_OK;
  char *json = NULL;
  if (fitted) status = build_json(&results, options, &events, &json, &err);
  int exit_code = status == MD_OK ? write_outputs(&results, options, json) : md_cli_report(&err);
  if (exit_code == MD_EXIT_OK) report(&results, options);
  free(json);
  if (fitted) md_fit_results_free(&results);
  md_events_free(&events);
  return exit_code;
}

int md_cmd_fit(int argc, char **argv) {
  fit_options options = {0};
  int exit_code = parse_options(argc, argv, &options);
  if (exit_code < 0) {
    md_priors priors = {0};
    exit_code = run(&options, &priors);
    md_priors_free(&priors);
  }
  free(options.pins);
  return exit_code;
}
