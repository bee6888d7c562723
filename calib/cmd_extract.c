/* memdecay-calibrate extract: collector run directories in (one, the shards
 * of a sharded collection, or runs to pool), the events CSV and the
 * calibration sidecar out (fit/extract/extract_stage.h does the work). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/cli.h"
#include "calib/commands.h"
#include "calib/extract_options.h"
#include "calib/fit_options.h"
#include "calib/stage_report.h"
#include "fit/extract/attention_norm.h"
#include "fit/extract/lifetimes.h"
#include "base/policy_defaults.h"
#include "md_build_config.h"

static void print_help(FILE *out) {
  fputs(
      "Usage: " MD_PROGRAM " extract [OPTIONS] RUN_DIR... -o EVENTS.csv\n"
      "\n"
      "Turns the attention a collector run captured (RUN_DIR, written by '" MD_PROGRAM "\n"
      "collect') into token lifetimes and the calibration a MemDecay runtime needs\n"
      "besides the decay rates. A token is refreshed at a decode step where it gets at\n"
      "least tau times the uniform share of attention (a * n_visible >= tau); its\n"
      "lifetime runs from its time origin (decode start, or its birth for a decoded\n"
      "token) to its last refresh, censored when that falls within the last GUARD\n"
      "steps of the window. Never-refreshed tokens are not lifetimes: they lower the\n"
      "region's base priority, the share of its tokens refreshed at least once.\n"
      "\n"
      "Several run directories are read as one collection: the N shards of a sharded\n"
      "collection ('collect --shard K/N'; merged in shard order, the result is exactly\n"
      "that of the unsharded run), or runs of the same model and capture settings to\n"
      "pool (in the order given). Runs that do not belong together (another model,\n"
      "other layers, heads or page size), a repeated or missing shard and an episode\n"
      "in two directories are refused.\n"
      "\n"
      "Writes: EVENTS.csv (memdecay-events(5): region,time,event,entry,weight and\n"
      "episode,pos,page,token_id), the input of 'fit'; and the calibration sidecar\n"
      "EVENTS.calibration.json (memdecay-calibration(5)): model and workload, base\n"
      "priorities, kappa and alpha, the mean uniform-relative attention per region and\n"
      "its curve by age. Both are written atomically; a summary goes to standard error.\n"
      "\n"
      "Options:\n"
      "  -o, --output FILE        the events CSV to write (required)\n"
      "      --calibration FILE   the sidecar (default: EVENTS.csv with .csv replaced by\n"
      "                           .calibration.json)\n"
      "      --estimand NAME      gap (intervals between refreshes, the default) or\n"
      "                           last-use (lifetime to the last refresh)\n"
      "      --tau T              refresh threshold in uniform shares, > 0 (default " MD_DEFAULT_TEXT(MD_POLICY_TAU_DEFAULT) ")\n"
      "      --guard N            steps at the window end within which a last refresh is\n"
      "                           censored, >= 0 (default " MD_DEFAULT_TEXT(MD_LIFETIME_GUARD_DEFAULT) ")\n"
      "      --ewma-beta B        weight of the past in the attention EWMA, in [0, 1)\n"
      "                           (default " MD_DEFAULT_TEXT(MD_POLICY_EWMA_BETA_DEFAULT) ")\n"
      "      --quantile Q         quantile of the EWMA over unpinned tokens that becomes\n"
      "                           kappa, in (0, 1) (default " MD_DEFAULT_TEXT(MD_POLICY_NORM_QUANTILE_DEFAULT) ")\n"
      "      --kappa-memory MIB   memory for the exact kappa quantile; past it the run is\n"
      "                           read a second time (default " MD_DEFAULT_TEXT(MD_ATTN_NORM_DEFAULT_MEMORY_MIB) "; 0 forces two passes)\n"
      "      --pin REGION         pin REGION (left out of kappa and alpha; base priority 1);\n"
      "                           repeatable; system is pinned by default\n"
      "      --no-pin REGION      unpin REGION (e.g. --no-pin system); repeatable\n"
      "      --allow-incomplete   use the complete episodes of an unfinished collection\n"
      "      --allow-partial      use the shards given when some of a collection's are\n"
      "                           missing (the sidecar and the config say which)\n"
      "      --plot FILE          also draw the survival curves (fits of these events) and\n"
      "                           the mean attention per region by age; .png, .svg or .pdf\n"
      "      --plot-log-time      draw the survival panel's step axis on a log scale\n"
      "      --reproducible       leave out the 'created' timestamp\n"
      "  -q, --quiet              print nothing on standard error but errors\n"
      "  -h, --help               show this help\n"
      "\n"
      "Use the same --pin/--no-pin with 'fit' as here: kappa and alpha are measured\n"
      "over the unpinned regions.\n"
      "\n"
      "Exit status: 0 success, 2 invalid usage or input (a missing, incomplete or\n"
      "inconsistent run directory), 3 output or internal failure.\n"
      "\n"
      "Example:\n"
      "  " MD_PROGRAM " extract memdecay.run/run -o events.csv --plot attention.png\n"
      "  " MD_PROGRAM " fit events.csv --calibration events.calibration.json -o memdecay.json\n"
      "  " MD_PROGRAM " extract shards/0-of-4 shards/1-of-4 shards/2-of-4 shards/3-of-4 \\\n"
      "      -o events.csv\n"
      "\n"
      "Manual: man memdecay-calibrate, memdecay-events(5), memdecay-calibration(5).\n",
      out);
}

typedef struct extract_options {
  md_extract_options stage;
  md_pin_override *pins;
  bool quiet;
} extract_options;

enum {
  OPT_OUTPUT,
  OPT_CALIBRATION,
  OPT_ALLOW_INCOMPLETE,
  OPT_ALLOW_PARTIAL,
  OPT_PLOT,
  OPT_PLOT_LOG_TIME,
  OPT_REPRODUCIBLE,
  OPT_QUIET,
  OPT_HELP,
};

static const md_opt own_options[] = {
    {"output", 'o', OPT_OUTPUT, "FILE"},
    {"calibration", 0, OPT_CALIBRATION, "FILE"},
    {"allow-incomplete", 0, OPT_ALLOW_INCOMPLETE, NULL},
    {"allow-partial", 0, OPT_ALLOW_PARTIAL, NULL},
    {"plot", 0, OPT_PLOT, "FILE"},
    {"plot-log-time", 0, OPT_PLOT_LOG_TIME, NULL},
    {"reproducible", 0, OPT_REPRODUCIBLE, NULL},
    {"quiet", 'q', OPT_QUIET, NULL},
    {"help", 'h', OPT_HELP, NULL},
    {NULL, 0, 0, NULL},
};

/* Handles one option; returns -1 to go on, or an exit code. */
static int take_own(void *context, const md_opt *opt, const char *value) {
  extract_options *options = context;
  md_extract_options *job = &options->stage;
  switch (opt->id) {
    case OPT_OUTPUT: job->events_path = value; return -1;
    case OPT_CALIBRATION: job->calibration_path = value; return -1;
    case OPT_ALLOW_INCOMPLETE: job->allow_incomplete = true; return -1;
    case OPT_ALLOW_PARTIAL: job->allow_partial = true; return -1;
    case OPT_PLOT: return md_fit_option_plot("extract", value, &job->plot);
    case OPT_PLOT_LOG_TIME: job->plot_log_time = true; return -1;
    case OPT_REPRODUCIBLE: job->reproducible = true; return -1;
    case OPT_QUIET: options->quiet = true; return -1;
    case OPT_HELP: print_help(stdout); return MD_EXIT_OK;
    default: return md_cli_usage_error("extract", "unknown option");
  }
}

static int take_extract(void *context, const md_opt *opt, const char *value) {
  extract_options *options = context;
  return md_extract_option("extract", opt, value, &options->stage, options->pins);
}

static const md_opt_group groups[] = {
    {own_options, take_own},
    {md_extract_option_table, take_extract},
    {NULL, NULL},
};

const md_opt_command md_extract_command = {"extract", groups, print_help, 0};

static int parse_options(int argc, char **argv, extract_options *options) {
  md_extract_options *job = &options->stage;
  md_extract_options_init(job);
  options->pins = calloc((size_t)argc + 1, sizeof *options->pins);
  if (!options->pins) return MD_EXIT_FAILURE;
  job->settings.pins = options->pins;
  char **args;
  int n_args;
  int exit_code = md_opt_parse_or_report(&md_extract_command, options, argc, argv, &args, &n_args);
  if (exit_code >= 0) return exit_code;
  if (n_args == 0) return md_cli_usage_error("extract", "no run directory given");
  if (!job->events_path) return md_cli_usage_error("extract", "no output given (-o EVENTS.csv)");
  if (!strcmp(job->events_path, "-"))
    return md_cli_usage_error("extract", "-o must name a file (the sidecar goes beside it)");
  job->run_dirs = (const char *const *)args;
  job->n_run_dirs = (size_t)n_args;
  if (!options->quiet && md_cli_stderr_is_tty()) {
    job->progress = md_report_extract_progress;
    job->context = (void *)"extract";
  }
  return -1;
}

static int extract(const extract_options *options) {
  md_error err = {0};
  md_extract_outcome outcome;
  if (md_extract(&options->stage, &outcome, &err) != MD_OK) return md_cli_report(&err);
  if (!options->quiet) md_report_extract(stderr, "extract", &options->stage, &outcome);
  md_extract_outcome_free(&outcome);
  return MD_EXIT_OK;
}

int md_cmd_extract(int argc, char **argv) {
  extract_options options = {0};
  int exit_code = parse_options(argc, argv, &options);
  if (exit_code < 0) exit_code = extract(&options);
  free(options.pins);
  return exit_code;
}
