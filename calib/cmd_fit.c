/* memdecay-calibrate fit: events CSV in, memdecay.json out (plus, on
 * request, the Kaplan-Meier curves as CSV and a figure). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__ /* defined by the headers above */
#include <malloc.h>
#endif

#include "calib/cli.h"
#include "calib/commands.h"
#include "calib/fit_options.h"
#include "calib/stage_report.h"
#include "fit/regions/region_fits.h"
#include "base/policy_defaults.h"
#include "md_build_config.h"

typedef struct fit_options {
  md_fit_options stage;
  md_pin_override *pins;    /* storage behind stage.settings.pins */
  bool quiet;
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
      "      --level P          confidence level of every interval (default " MD_DEFAULT_TEXT(MD_REGIONS_LEVEL_DEFAULT) ")\n"
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

enum { OPT_OUTPUT, OPT_PIN, OPT_NO_PIN, OPT_CALIBRATION, OPT_REPRODUCIBLE, OPT_QUIET, OPT_HELP };

static const md_opt own_options[] = {
    {"output", 'o', OPT_OUTPUT, "FILE"},
    {"pin", 0, OPT_PIN, "REGION"},
    {"no-pin", 0, OPT_NO_PIN, "REGION"},
    {"calibration", 0, OPT_CALIBRATION, "FILE"},
    {"reproducible", 0, OPT_REPRODUCIBLE, NULL},
    {"quiet", 'q', OPT_QUIET, NULL},
    {"help", 'h', OPT_HELP, NULL},
    {NULL, 0, 0, NULL},
};

/* Handles one option; returns -1 to go on, or an exit code. */
static int take_own(void *context, const md_opt *opt, const char *value) {
  fit_options *options = context;
  md_fit_options *job = &options->stage;
  switch (opt->id) {
    case OPT_OUTPUT: job->output = value; return -1;
    case OPT_PIN:
    case OPT_NO_PIN:
      return md_fit_option_pin("fit", value, opt->id == OPT_PIN, &job->settings, options->pins);
    case OPT_CALIBRATION: job->calibration_path = value; return -1;
    case OPT_REPRODUCIBLE: job->reproducible = true; return -1;
    case OPT_QUIET: options->quiet = true; return -1;
    case OPT_HELP: print_help(stdout); return MD_EXIT_OK;
    default: return md_cli_usage_error("fit", "unknown option");
  }
}

static int take_fit(void *context, const md_opt *opt, const char *value) {
  return md_fit_option("fit", opt, value, &((fit_options *)context)->stage);
}

static const md_opt_group groups[] = {
    {own_options, take_own},
    {md_fit_option_table, take_fit},
    {NULL, NULL},
};

const md_opt_command md_fit_command = {"fit", groups, print_help, 0};

/* Returns -1 when the run should go on, else the exit code. */
static int parse_options(int argc, char **argv, fit_options *options) {
  md_fit_options *job = &options->stage;
  md_fit_options_init(job);
  options->pins = calloc((size_t)argc + 1, sizeof *options->pins);
  if (!options->pins) return MD_EXIT_FAILURE;
  job->settings.pins = options->pins;
  char **args;
  int n_args;
  int exit_code = md_opt_parse_or_report(&md_fit_command, options, argc, argv, &args, &n_args);
  if (exit_code >= 0) return exit_code;
  if (n_args == 0) return md_cli_usage_error("fit", "no events file given");
  job->inputs = (const char *const *)args;
  job->n_inputs = (size_t)n_args;
  return -1;
}

/* fit allocates and frees arrays of a region's size many times over (the
 * sort's scratch, the Kaplan-Meier curve and its quantiles, the risk sets).
 * glibc serves blocks above its mmap threshold (dynamic, 128 KiB up to
 * 32 MiB) with fresh mappings and unmaps them on free, so every such array
 * faults in newly zeroed pages (on 10 million distinct times, about a
 * seventh of the run). Kept in the heap instead (up to 32 MiB a block,
 * glibc's largest threshold; freed memory kept for reuse up to 512 MiB),
 * for less system time at some cost in peak memory. Process-wide settings,
 * so made here and not in the library, and only when the user has not set
 * glibc's own. */
static void keep_freed_memory(void) {
#ifdef __GLIBC__
  /* Settings the user made through glibc's own variables stand. */
  const char *tunables = getenv("GLIBC_TUNABLES");
  if (getenv("MALLOC_MMAP_THRESHOLD_") || getenv("MALLOC_TRIM_THRESHOLD_") ||
      (tunables && strstr(tunables, "glibc.malloc.")))
    return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
}

static int fit(const fit_options *options) {
  md_error err = {0};
  md_fit_outcome outcome;
  if (md_fit(&options->stage, &outcome, &err) != MD_OK) return md_cli_report(&err);
  int exit_code = md_report_fit_stdout("fit", &options->stage, &outcome);
  if (exit_code == MD_EXIT_OK && !options->quiet) md_report_fit(stderr, "fit", &options->stage, &outcome);
  md_fit_outcome_free(&outcome);
  return exit_code;
}

int md_cmd_fit(int argc, char **argv) {
  keep_freed_memory();
  fit_options options = {0};
  int exit_code = parse_options(argc, argv, &options);
  if (exit_code < 0) exit_code = fit(&options);
  free(options.pins);
  return exit_code;
}
