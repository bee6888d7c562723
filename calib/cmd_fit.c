/* memdecay-calibrate fit: events CSV in, memdecay.json out (plus, on
 * request, the Kaplan-Meier curves as CSV and a figure). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "calib/cli.h"
#include "calib/fit_job.h"
#include "calib/fit_options.h"
#include "md_build_config.h"

typedef struct fit_options {
  md_fit_job job;
  md_pin_override *pins;    /* storage behind job.settings.pins */
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
      "      --calibration FILE what extract measured besides the lifetimes (its\n"
      "                         .calibration.json): carries the model, the workload, the\n"
      "                         measured base priorities, kappa and alpha into the config\n"
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
      "the measured share of --calibration, else the built-in prior of the region.\n"
      "\n"
      "Exit status: 0 success, 2 invalid usage or input, 3 output or internal failure.\n"
      "\n"
      "Example:\n"
      "  " MD_PROGRAM " fit data/events/demo-events.csv -o memdecay.json \\\n"
      "      --km-csv km.csv --plot survival.png\n"
      "  " MD_PROGRAM " fit events.csv --calibration events.calibration.json -o memdecay.json\n"
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
  OPT_CALIBRATION,
};

static const struct option long_options[] = {
    {"output", required_argument, NULL, 'o'},
    {"level", required_argument, NULL, OPT_LEVEL},
    {"band", required_argument, NULL, OPT_BAND},
    {"pin", required_argument, NULL, OPT_PIN},
    {"no-pin", required_argument, NULL, OPT_NO_PIN},
    {"priors", required_argument, NULL, OPT_PRIORS},
    {"calibration", required_argument, NULL, OPT_CALIBRATION},
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
  md_fit_job *job = &options->job;
  switch (code) {
    case 'o': job->output = value; return -1;
    case OPT_LEVEL: return md_fit_option_level("fit", value, &job->settings);
    case OPT_BAND: return md_fit_option_band("fit", value, &job->settings);
    case OPT_PIN:
    case OPT_NO_PIN:
      return md_fit_option_pin("fit", value, code == OPT_PIN, &job->settings, options->pins);
    case OPT_PRIORS: job->priors_path = value; return -1;
    case OPT_CALIBRATION: job->calibration_path = value; return -1;
    case OPT_KM_CSV: job->km_csv = value; return -1;
    case OPT_PLOT: return md_fit_option_plot("fit", value, &job->plot);
    case OPT_PLOT_LOG_TIME: job->plot_log_time = true; return -1;
    case OPT_REPRODUCIBLE: job->reproducible = true; return -1;
    case 'q': job->quiet = true; return -1;
    case 'h': print_help(stdout); return MD_EXIT_OK;
    case ':': return md_cli_usage_error("fit", "option '%s' needs a value", arg);
    default: return md_cli_usage_error("fit", "unknown option '%s'", arg);
  }
}

/* Returns -1 when the run should go on, else the exit code. */
static int parse_options(int argc, char **argv, fit_options *options) {
  md_fit_job *job = &options->job;
  job->command = "fit";
  job->settings.level = 0.95;
  job->settings.band = MD_KM_BAND_LOG;
  options->pins = calloc((size_t)argc + 1, sizeof *options->pins);
  if (!options->pins) return MD_EXIT_FAILURE;
  job->settings.pins = options->pins;
  opterr = 0;
  optind = 1;
  int code;
  while ((code = getopt_long(argc, argv, ":o:qh", long_options, NULL)) != -1) {
    int exit_code = take_option(code, optarg, argv[optind - 1], options);
    if (exit_code >= 0) return exit_code;
  }
  if (optind >= argc) return md_cli_usage_error("fit", "no events file given");
  job->inputs = (const char *const *)argv + optind;
  job->n_inputs = (size_t)(argc - optind);
  return -1;
}

int md_cmd_fit(int argc, char **argv) {
  fit_options options = {0};
  int exit_code = parse_options(argc, argv, &options);
  if (exit_code < 0) exit_code = md_fit_job_run(&options.job);
  free(options.pins);
  return exit_code;
}
