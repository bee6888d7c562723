/* memdecay-calibrate run: collect + extract + fit in one command, keeping
 * the intermediate files in a work directory:
 *
 *   WORKDIR/run/                      the collector's run directory
 *   WORKDIR/events.csv                token lifetimes (extract)
 *   WORKDIR/events.calibration.json   the calibration sidecar (extract)
 *
 * WORKDIR defaults to the output's name with .json replaced by .run
 * (memdecay.json -> memdecay.run/). Each stage is the one its own command
 * runs (md_collect, calib/extract_job.h, calib/fit_job.h). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calib/cli.h"
#include "calib/collect_options.h"
#include "calib/extract_job.h"
#include "calib/extract_options.h"
#include "calib/fit_job.h"
#include "calib/fit_options.h"
#include "calib/progress.h"
#include "collector/collect.h"
#include "io/priors.h"
#include "md_build_config.h"

static const char command[] = "run";

typedef struct run_options {
  md_collect_options collect;
  md_extract_job extract;
  md_fit_job fit;
  md_pin_override *pins;      /* shared by extract and fit */
  const char *output;
  const char *workdir;
  const char *priors_path;
  bool quiet;
  bool made_workdir;          /* removed again when collect refuses its inputs */
  /* owned paths */
  char *workdir_owned, *run_dir, *events, *calibration;
} run_options;

static void print_help(FILE *out) {
  fputs(
      "Usage: " MD_PROGRAM " run --model DIR --traces FILE.jsonl -o memdecay.json [OPTIONS]\n"
      "\n"
      "The whole calibration in one command: runs the checkpoint over the traces and\n"
      "captures attention (collect), turns it into token lifetimes and the calibration\n"
      "(extract), fits the decay per region and writes memdecay.json (fit). Prints the\n"
      "per-region half-life table on standard error; progress on a terminal.\n"
      "\n"
      "Work directory (--workdir, default: the output's name with .json replaced by .run,\n"
      "e.g. memdecay.run/): run/ (the collector's run directory), events.csv and\n"
      "events.calibration.json. It is kept: --resume continues an interrupted run in it\n"
      "(complete episodes are kept), and 'extract'/'fit' can be run on its files again.\n"
      "\n"
      "Options:\n"
      "      --model DIR          Hugging Face Qwen2/Qwen2.5 checkpoint directory\n"
      "                           (config.json, *.safetensors, tokenizer.json)\n"
      "      --traces FILE        agent traces, JSON Lines (memdecay-traces(5))\n"
      "  -o, --output FILE        the config to write (memdecay-config(5)); required\n"
      "      --workdir DIR        work directory (default: OUTPUT with .json -> .run)\n"
      "      --resume             continue the run in the work directory\n"
      " collect:\n"
      "      --device NAME        cpu (default), cuda or cuda:N\n"
      "      --threads N          CPU threads (default: all cores)\n"
      "      --exact-gemm         CUDA: multiply the prompt in float32 (slower prompts)\n"
      "      --cuda-graphs        CUDA: replay decode steps as CUDA graphs\n"
      "      --layers A:B         capture layers A to B-1 (default: all)\n"
      "      --heads mean|max     aggregate the heads by mean (default) or max\n"
      "      --page-size N        KV-cache page size (default 16)\n"
      "      --max-steps N        cap every decode window at N steps\n"
      "      --max-episodes N     use only the first N episodes of the traces\n"
      "      --skip-invalid       skip invalid or over-long episodes instead of stopping\n"
      " extract:\n"
      "      --estimand NAME      last-use (default) or gap\n"
      "      --tau T              refresh threshold in uniform shares (default 1.0)\n"
      "      --guard N            censoring guard at the window end (default 16)\n"
      "      --ewma-beta B        attention EWMA weight of the past (default 0.9)\n"
      "      --quantile Q         quantile of the EWMA that becomes kappa (default 0.95)\n"
      "      --kappa-memory MIB   memory for the exact kappa (default 256)\n"
      " fit:\n"
      "      --pin REGION         pin REGION (system by default); repeatable\n"
      "      --no-pin REGION      unpin REGION; repeatable\n"
      "      --priors FILE        base priorities and pinning from a JSON file\n"
      "      --level P            confidence level (default 0.95)\n"
      "      --band TYPE          Kaplan-Meier band: log, log-log or plain (default log)\n"
      "      --km-csv FILE        also write the Kaplan-Meier curves as CSV\n"
      "      --plot FILE          also draw survival and attention per region (.png, .svg,\n"
      "                           .pdf)\n"
      "      --plot-log-time      log scale for the survival panel's step axis\n"
      "      --reproducible       no timestamps in run.json, the sidecar and the config\n"
      "  -q, --quiet              print nothing on standard error but errors\n"
      "  -h, --help               show this help\n"
      "\n"
      "Exit status: 0 success, 2 invalid usage or input (traces, checkpoint, a work\n"
      "directory that already holds a run without --resume), 3 failure of the run\n"
      "(I/O, memory, device): continue it with --resume.\n"
      "\n"
      "Example:\n"
      "  " MD_PROGRAM " run --model data/models/qwen2-tiny --traces data/traces/agent-450.jsonl \\\n"
      "      -o memdecay.json --plot memdecay.png\n"
      "  " MD_PROGRAM " run --model ~/models/Qwen2.5-1.5B-Instruct \\\n"
      "      --traces my-agent.jsonl -o memdecay.json --device cuda\n"
      "\n"
      "Manual: man memdecay-calibrate.\n",
      out);
}

enum {
  OPT_MODEL = 256,
  OPT_TRACES,
  OPT_WORKDIR,
  OPT_RESUME,
  OPT_SKIP_INVALID,
  OPT_PRIORS,
  OPT_LEVEL,
  OPT_BAND,
  OPT_KM_CSV,
  OPT_PLOT,
  OPT_PLOT_LOG_TIME,
  OPT_REPRODUCIBLE,
  OPT_COLLECT,            /* a collect option: its name is looked up */
  OPT_COLLECT_FLAG,       /* a collect flag (no value): its name is looked up */
  OPT_EXTRACT_FIRST = 300, /* calib/extract_options.h */
};

static const char *const collect_names[] = {"device",    "threads",   "layers",      "heads",
                                            "page-size", "max-steps", "max-episodes"};
enum { n_collect = sizeof collect_names / sizeof collect_names[0] };

static void long_options(struct option *o) {
  const struct option own[] = {
      {"model", required_argument, NULL, OPT_MODEL},
      {"traces", required_argument, NULL, OPT_TRACES},
      {"output", required_argument, NULL, 'o'},
      {"workdir", required_argument, NULL, OPT_WORKDIR},
      {"resume", no_argument, NULL, OPT_RESUME},
      {"skip-invalid", no_argument, NULL, OPT_SKIP_INVALID},
      {"priors", required_argument, NULL, OPT_PRIORS},
      {"level", required_argument, NULL, OPT_LEVEL},
      {"band", required_argument, NULL, OPT_BAND},
      {"km-csv", required_argument, NULL, OPT_KM_CSV},
      {"plot", required_argument, NULL, OPT_PLOT},
      {"plot-log-time", no_argument, NULL, OPT_PLOT_LOG_TIME},
      {"reproducible", no_argument, NULL, OPT_REPRODUCIBLE},
      {"exact-gemm", no_argument, NULL, OPT_COLLECT_FLAG},
      {"cuda-graphs", no_argument, NULL, OPT_COLLECT_FLAG},
      {"quiet", no_argument, NULL, 'q'},
      {"help", no_argument, NULL, 'h'},
  };
  size_t n = sizeof own / sizeof own[0];
  memcpy(o, own, sizeof own);
  for (size_t i = 0; i < n_collect; i++)
    o[n + i] = (struct option){collect_names[i], required_argument, NULL, OPT_COLLECT};
  md_extract_long_options(o + n + n_collect, OPT_EXTRACT_FIRST);
}

static int fit_option(int code, const char *value, run_options *r) {
  md_fit_settings *settings = &r->fit.settings;
  switch (code) {
    case OPT_LEVEL: return md_fit_option_level(command, value, settings);
    case OPT_BAND: return md_fit_option_band(command, value, settings);
    case OPT_PLOT: return md_fit_option_plot(command, value, &r->fit.plot);
    case OPT_KM_CSV: r->fit.km_csv = value; return -1;
    case OPT_PLOT_LOG_TIME: r->fit.plot_log_time = true; return -1;
    case OPT_PRIORS: r->priors_path = value; return -1;
    default: return md_cli_usage_error(command, "unknown option");
  }
}

/* Handles one option; returns -1 to go on, or an exit code. */
static int take_option(int code, const char *name, const char *value, const char *arg,
                       run_options *r) {
  if (code >= OPT_EXTRACT_FIRST)
    return md_extract_option(code - OPT_EXTRACT_FIRST, value, command, &r->extract, r->pins);
  switch (code) {
    case OPT_MODEL: r->collect.model_dir = value; return -1;
    case OPT_TRACES: r->collect.traces_path = value; return -1;
    case 'o': r->output = value; return -1;
    case OPT_WORKDIR: r->workdir = value; return -1;
    case OPT_RESUME: r->collect.resume = true; return -1;
    case OPT_SKIP_INVALID: r->collect.skip_invalid = true; return -1;
    case OPT_REPRODUCIBLE: r->collect.reproducible = true; return -1;
    case OPT_COLLECT: {
      char option[64];
      snprintf(option, sizeof option, "--%s", name);
      return md_collect_option(command, option, value, &r->collect);
    }
    case OPT_COLLECT_FLAG: {
      char flag[64];
      snprintf(flag, sizeof flag, "--%s", name);
      md_collect_flag(flag, &r->collect);
      return -1;
    }
    case 'q': r->quiet = true; return -1;
    case 'h': print_help(stdout); return MD_EXIT_OK;
    case ':': return md_cli_usage_error(command, "option '%s' needs a value", arg);
    case '?': return md_cli_usage_error(command, "unknown option '%s'", arg);
    default: return fit_option(code, value, r);
  }
}

/* "DIR/memdecay.json" -> "DIR/memdecay.run"; other names get ".run" appended. */
static char *default_workdir(const char *output) {
  size_t len = strlen(output);
  if (len > 5 && !strcmp(output + len - 5, ".json")) len -= 5;
  char *dir = malloc(len + 5);
  if (!dir) return NULL;
  memcpy(dir, output, len);
  strcpy(dir + len, ".run");
  return dir;
}

static char *join(const char *dir, const char *name) {
  size_t size = strlen(dir) + strlen(name) + 2;
  char *path = malloc(size);
  if (path) snprintf(path, size, "%s/%s", dir, name);
  return path;
}

static int check_required(run_options *r) {
  if (!r->collect.model_dir || !r->collect.traces_path)
    return md_cli_usage_error(command, "--model and --traces are required");
  if (!r->output) return md_cli_usage_error(command, "no output given (-o memdecay.json)");
  if (!strcmp(r->output, "-"))
    return md_cli_usage_error(command, "-o must name a file (the work directory goes beside it)");
  if (!r->workdir) r->workdir = r->workdir_owned = default_workdir(r->output);
  r->run_dir = r->workdir ? join(r->workdir, "run") : NULL;
  r->events = r->workdir ? join(r->workdir, "events.csv") : NULL;
  r->calibration = r->workdir ? join(r->workdir, "events.calibration.json") : NULL;
  if (!r->run_dir || !r->events || !r->calibration) return MD_EXIT_FAILURE;
  return -1;
}

static int parse_options(int argc, char **argv, run_options *r) {
  md_collect_options_init(&r->collect);
  md_extract_job_defaults(&r->extract, command);
  r->pins = calloc((size_t)argc + 1, sizeof *r->pins);
  if (!r->pins) return MD_EXIT_FAILURE;
  r->extract.settings.pins = r->pins;
  r->fit.settings = r->extract.settings; /* level, band, pins */
  struct option options[48] = {{0}};
  long_options(options);
  opterr = 0;
  optind = 1;
  int code, index = 0;
  while ((code = getopt_long(argc, argv, ":o:qh", options, &index)) != -1) {
    const char *name =
        code == OPT_COLLECT || code == OPT_COLLECT_FLAG ? options[index].name : NULL;
    int exit_code = take_option(code, name, optarg, argv[optind - 1], r);
    if (exit_code >= 0) return exit_code;
  }
  if (optind < argc) return md_cli_usage_error(command, "unexpected argument '%s'", argv[optind]);
  return check_required(r);
}

/* ---- the stages ------------------------------------------------------------------ */

/* A work directory that already holds a run needs --resume: its episodes
 * may have cost hours of model time. */
static int prepare_workdir(run_options *r) {
  struct stat st;
  if (stat(r->run_dir, &st) == 0 && !r->collect.resume) {
    fprintf(stderr, MD_PROGRAM " run: %s already holds a run: pass --resume to continue it "
            "(a finished run is then only extracted and fitted again), or remove %s\n",
            r->run_dir, r->workdir);
    return MD_EXIT_INPUT;
  }
  if (mkdir(r->workdir, 0777) == 0) {
    r->made_workdir = true;
  } else if (errno != EEXIST) {
    fprintf(stderr, MD_PROGRAM " run: cannot create the work directory %s: %s\n", r->workdir,
            strerror(errno));
    return MD_EXIT_FAILURE;
  }
  return -1;
}

static int collect_stage(run_options *r, md_progress *bar) {
  md_progress_tracker state = {.bar = bar};
  r->collect.out_dir = r->run_dir;
  r->collect.progress = md_progress_tracker_collect;
  r->collect.on_warning = md_progress_tracker_warning;
  r->collect.context = &state;
  md_error err = {0};
  md_collect_summary summary;
  md_status status = md_collect(&r->collect, &summary, &err);
  md_progress_end(bar);
  if (status == MD_OK) return -1;
  if (state.started) return md_cli_report(&err);
  /* Refused before any work: leave no empty work directory behind. */
  if (r->made_workdir) rmdir(r->workdir);
  return md_cli_report_input(&err);
}

static int extract_stage(run_options *r, md_progress *bar) {
  md_extract_job *job = &r->extract;
  job->run_dir = r->run_dir;
  job->events_path = r->events;
  job->calibration_path = r->calibration;
  job->reproducible = r->collect.reproducible;
  job->quiet = true;  /* its numbers go into the config and the table */
  job->progress = false;
  md_extract_outcome outcome;
  int exit_code = md_extract_job_run(job, &outcome);
  if (exit_code != MD_EXIT_OK) return exit_code;
  char note[256];
  snprintf(note, sizeof note, "extract: %zu episodes, %llu tokens, %llu lifetimes; kappa %.4g, "
           "alpha %.4g", outcome.episodes, (unsigned long long)outcome.tokens,
           (unsigned long long)outcome.rows, outcome.kappa, outcome.alpha);
  md_progress_note(bar, note);
  return -1;
}

static int fit_stage(run_options *r) {
  const char *inputs[] = {r->events};
  md_fit_job *job = &r->fit;
  job->command = command;
  job->inputs = inputs;
  job->n_inputs = 1;
  job->output = r->output;
  job->priors_path = r->priors_path;
  job->calibration_path = r->calibration;
  job->reproducible = r->collect.reproducible;
  job->quiet = r->quiet;
  job->settings.pins = r->pins;
  job->settings.n_pins = r->extract.settings.n_pins;
  return md_fit_job_run(job);
}

/* extract must pin as fit will: the priors file's "pinned" entries too. */
static int load_priors(const run_options *r, md_priors *priors) {
  md_error err = {0};
  if (r->priors_path && md_priors_read(r->priors_path, priors, &err) != MD_OK)
    return md_cli_report_input(&err);
  return -1;
}

static int run_stages(run_options *r) {
  md_priors priors = {0};
  int exit_code = load_priors(r, &priors);
  if (exit_code < 0) exit_code = prepare_workdir(r);
  r->extract.settings.priors = &priors;
  md_progress_options progress_options = {.label = command, .quiet = r->quiet};
  md_progress *bar = md_progress_new(&progress_options);
  if (exit_code < 0) exit_code = collect_stage(r, bar);
  if (exit_code < 0) exit_code = extract_stage(r, bar);
  md_progress_free(bar);
  if (exit_code < 0) exit_code = fit_stage(r);
  md_priors_free(&priors);
  return exit_code;
}

int md_cmd_run(int argc, char **argv) {
  run_options r;
  memset(&r, 0, sizeof r);
  int exit_code = parse_options(argc, argv, &r);
  if (exit_code < 0) exit_code = run_stages(&r);
  free(r.pins);
  free(r.workdir_owned);
  free(r.run_dir);
  free(r.events);
  free(r.calibration);
  return exit_code;
}
