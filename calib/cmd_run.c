/* memdecay-calibrate run: collect + extract + fit in one command, keeping
 * the intermediate files in a work directory:
 *
 *   WORKDIR/run/                      the collector's run directory
 *   WORKDIR/events.csv                token lifetimes (extract)
 *   WORKDIR/events.calibration.json   the calibration sidecar (extract)
 *
 * WORKDIR defaults to the output's name with .json replaced by .run
 * (memdecay.json -> memdecay.run/). Each stage is the one its own command
 * runs (md_collect, md_extract, md_fit).
 *
 * A sharded calibration (collector/capture/shard.h) runs in two steps on one work
 * directory: `run --shard K/N` collects shard K into WORKDIR/shards/K-of-N/
 * and stops, once per shard (a Slurm array task each); then
 * `run --merge-shards` extracts every WORKDIR/shards/ directory together and
 * fits, with no model work. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calib/cli.h"
#include "calib/collect_options.h"
#include "calib/commands.h"
#include "calib/extract_options.h"
#include "calib/fit_options.h"
#include "calib/progress.h"
#include "calib/stage_report.h"
#include "collector/capture/collect.h"
#include "collector/model/model_dir.h"
#include "fit/extract/attention_norm.h"
#include "fit/extract/lifetimes.h"
#include "fit/regions/region_fits.h"
#include "io/files/dir_lock.h"
#include "io/files/output_guard.h"
#include "base/digest.h"
#include "base/policy_defaults.h"
#include "io/formats/priors.h"
#include "md_build_config.h"

static const char command[] = "run";

typedef struct run_options {
  md_collect_options collect;
  md_extract_options extract;
  md_fit_options fit;
  md_pin_override *pins;      /* shared by extract and fit */
  const char *output;
  const char *workdir;
  bool quiet;
  bool merge_shards;          /* --merge-shards: extract WORKDIR/shards/ and fit */
  bool made_workdir;          /* removed again when collect refuses its inputs */
  bool made_shards;           /* WORKDIR/shards, likewise */
  const char *collect_option; /* the first collect option given, for messages */
  const char *finish_option;  /* the first extract or fit option given */
  /* owned paths */
  char *workdir_owned, *run_dir, *events, *calibration;
  md_dir_lock workdir_lock;   /* held for the whole command (not by shard tasks) */
  char **shard_dirs;          /* --merge-shards: WORKDIR/shards/<each> */
  size_t n_shard_dirs;
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
      "                           (config.json, *.safetensors, tokenizer.json), or a\n"
      "                           GGUF file (or a directory holding one)\n"
      "      --traces FILE        agent traces, JSON Lines (memdecay-traces(5))\n"
      "  -o, --output FILE        the config to write (memdecay-config(5)); required\n"
      "      --workdir DIR        work directory (default: OUTPUT with .json -> .run)\n"
      "      --resume             continue the run in the work directory\n"
      " sharded (man: SHARDS):\n"
      "      --shard K/N          collect only shard K (0 to N-1) of N into\n"
      "                           WORKDIR/shards/K-of-N/ and stop (no -o needed)\n"
      "      --merge-shards       extract WORKDIR/shards/* together and fit: the config\n"
      "                           of the unsharded run, exactly (no model work)\n"
      "      --allow-partial      with --merge-shards: go on when shards are missing\n"
      " collect:\n"
      "      --device NAME        cpu (default), cuda or cuda:N\n"
      "      --threads N          CPU threads (default: all cores)\n"
      "      --exact-gemm         multiply in float32 (slower prompts and batches; the\n"
      "                           CPU's default but on AMD Zen 4/5)\n"
      "      --bf16-gemm          CPU: multiply a BF16 checkpoint's prompt and decode steps\n"
      "                           with AVX-512 BF16 (the default on AMD Zen 4/5; slower on\n"
      "                           the Intel Xeons measured)\n"
      "      --gguf-f32           a GGUF model's weight matrices dequantized to float32\n"
      "                           (default bfloat16: half the memory)\n"
      "      --no-cuda-graphs     CUDA: launch decode steps kernel by kernel, not as graphs\n"
      "      --cuda-graphs        the default; accepted for older scripts\n"
      "      --layers A:B         capture layers A to B-1 (default: all)\n"
      "      --heads mean|max     aggregate the heads by mean (default) or max\n"
      "      --page-size N        KV-cache page size (default " MD_DEFAULT_TEXT(MD_POLICY_PAGE_SIZE_DEFAULT) ")\n"
      "      --max-steps N        cap every decode window at N steps\n"
      "      --max-episodes N     use only the first N episodes of the traces\n"
      "      --batch N            episodes collected together, one decode step for all\n"
      "                           (default 8, CPU and CUDA; the same bytes)\n"
      "      --skip-invalid       skip invalid or over-long episodes instead of stopping\n"
      " extract:\n"
      "      --estimand NAME      gap (default) or last-use\n"
      "      --tau T              refresh threshold in uniform shares (default " MD_DEFAULT_TEXT(MD_POLICY_TAU_DEFAULT) ")\n"
      "      --guard N            censoring guard at the window end (default " MD_DEFAULT_TEXT(MD_LIFETIME_GUARD_DEFAULT) ")\n"
      "      --ewma-beta B        attention EWMA weight of the past (default " MD_DEFAULT_TEXT(MD_POLICY_EWMA_BETA_DEFAULT) ")\n"
      "      --quantile Q         quantile of the EWMA that becomes kappa (default " MD_DEFAULT_TEXT(MD_POLICY_NORM_QUANTILE_DEFAULT) ")\n"
      "      --kappa-memory MIB   memory for the exact kappa (default " MD_DEFAULT_TEXT(MD_ATTN_NORM_DEFAULT_MEMORY_MIB) ")\n"
      " fit:\n"
      "      --pin REGION         pin REGION (system by default); repeatable\n"
      "      --no-pin REGION      unpin REGION; repeatable\n"
      "      --priors FILE        base priorities and pinning from a JSON file\n"
      "      --level P            confidence level (default " MD_DEFAULT_TEXT(MD_REGIONS_LEVEL_DEFAULT) ")\n"
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
      "  " MD_PROGRAM " run --model M --traces T --workdir W --shard 2/4 --resume\n"
      "  " MD_PROGRAM " run --workdir W -o memdecay.json --merge-shards\n"
      "\n"
      "Manual: man memdecay-calibrate.\n",
      out);
}

enum {
  OPT_MODEL,
  OPT_TRACES,
  OPT_OUTPUT,
  OPT_WORKDIR,
  OPT_RESUME,
  OPT_SKIP_INVALID,
  OPT_REPRODUCIBLE,
  OPT_MERGE_SHARDS,
  OPT_ALLOW_PARTIAL,
  OPT_QUIET,
  OPT_HELP,
};

static const md_opt own_options[] = {
    {"model", 0, OPT_MODEL, "DIR"},
    {"traces", 0, OPT_TRACES, "FILE"},
    {"output", 'o', OPT_OUTPUT, "FILE"},
    {"workdir", 0, OPT_WORKDIR, "DIR"},
    {"resume", 0, OPT_RESUME, NULL},
    {"skip-invalid", 0, OPT_SKIP_INVALID, NULL},
    {"reproducible", 0, OPT_REPRODUCIBLE, NULL},
    {"merge-shards", 0, OPT_MERGE_SHARDS, NULL},
    {"allow-partial", 0, OPT_ALLOW_PARTIAL, NULL},
    {"quiet", 'q', OPT_QUIET, NULL},
    {"help", 'h', OPT_HELP, NULL},
    {NULL, 0, 0, NULL},
};

/* Which stage an option belongs to, for --shard (collect only) and
 * --merge-shards (extract and fit only): the first of each is named in
 * messages. */
static void note_collect(run_options *r, const md_opt *opt) {
  if (!r->collect_option) r->collect_option = opt->name;
}

static void note_finish(run_options *r, const md_opt *opt) {
  if (!r->finish_option) r->finish_option = opt->name;
}

/* Handles one option; returns -1 to go on, or an exit code. */
static int take_own(void *context, const md_opt *opt, const char *value) {
  run_options *r = context;
  switch (opt->id) {
    case OPT_MODEL: r->collect.model_dir = value; return -1;
    case OPT_TRACES: r->collect.traces_path = value; return -1;
    case OPT_OUTPUT: r->output = value; return -1;
    case OPT_WORKDIR: r->workdir = value; return -1;
    case OPT_RESUME: note_collect(r, opt); r->collect.resume = true; return -1;
    case OPT_SKIP_INVALID: note_collect(r, opt); r->collect.skip_invalid = true; return -1;
    case OPT_REPRODUCIBLE: r->collect.reproducible = true; return -1;
    case OPT_MERGE_SHARDS: r->merge_shards = true; return -1;
    case OPT_ALLOW_PARTIAL: note_finish(r, opt); r->extract.allow_partial = true; return -1;
    case OPT_QUIET: r->quiet = true; return -1;
    case OPT_HELP: print_help(stdout); return MD_EXIT_OK;
    default: return md_cli_usage_error(command, "unknown option");
  }
}

static int take_collect(void *context, const md_opt *opt, const char *value) {
  run_options *r = context;
  if (opt->id != MD_COLLECT_OPT_SHARD) note_collect(r, opt);
  return md_collect_option(command, opt, value, &r->collect);
}

static int take_extract(void *context, const md_opt *opt, const char *value) {
  run_options *r = context;
  note_finish(r, opt);
  return md_extract_option(command, opt, value, &r->extract, r->pins);
}

static int take_fit(void *context, const md_opt *opt, const char *value) {
  run_options *r = context;
  note_finish(r, opt);
  return md_fit_option(command, opt, value, &r->fit);
}

/* run = its own options + collect's + extract's + fit's. */
static const md_opt_group groups[] = {
    {own_options, take_own},
    {md_collect_option_table, take_collect},
    {md_extract_option_table, take_extract},
    {md_fit_option_table, take_fit},
    {NULL, NULL},
};

const md_opt_command md_run_command = {"run", groups, print_help, 0};

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

/* WORKDIR/shards/K-of-N */
static char *shard_dir(const char *workdir, const md_shard *shard) {
  char name[64];
  snprintf(name, sizeof name, "shards/%zu-of-%zu", shard->index, shard->count);
  return join(workdir, name);
}

static int check_sharding(run_options *r) {
  bool shard = r->collect.shard.count > 0;
  if (shard && r->merge_shards)
    return md_cli_usage_error(command, "--shard collects one shard and --merge-shards finishes "
                              "the calibration: give one of them");
  if (shard && r->finish_option)
    return md_cli_usage_error(command, "--%s is an option of extract or fit, which a --shard run "
                              "does not do: give it to the --merge-shards run", r->finish_option);
  if (r->merge_shards && r->collect_option)
    return md_cli_usage_error(command, "--%s is an option of collect, which --merge-shards does not "
                              "do: give it to the --shard runs", r->collect_option);
  if (r->extract.allow_partial && !r->merge_shards)
    return md_cli_usage_error(command, "--allow-partial goes with --merge-shards");
  if (shard && !r->workdir && !r->output)
    return md_cli_usage_error(command, "--shard needs the shared work directory (--workdir DIR, "
                              "or -o to name it after)");
  return -1;
}

/* Before any work: outputs never replace inputs or each other, the work
 * directory is not inside an input directory, and every output's
 * directory can be written (io/files/output_guard.h). */
static int check_outputs(const run_options *r) {
  char *shards = r->merge_shards && r->workdir ? join(r->workdir, "shards") : NULL;
  const md_path_role outputs[] = {{r->output, "-o", false},
                                  {r->fit.plot, "--plot", false},
                                  {r->fit.km_csv, "--km-csv", false},
                                  {r->merge_shards ? NULL : r->workdir, "--workdir", true}};
  const md_path_role inputs[] = {{r->collect.model_dir, "--model", true},
                                 {r->collect.traces_path, "--traces", false},
                                 {r->fit.priors_path, "--priors", false},
                                 {shards, "the shards", true}};
  md_error err = {0};
  md_status s = md_outputs_check(outputs, 4, inputs, 4, &err);
  free(shards);
  return s == MD_OK ? -1 : md_cli_report(&err);
}

static int check_required(run_options *r) {
  int exit_code = check_sharding(r);
  if (exit_code >= 0) return exit_code;
  bool shard = r->collect.shard.count > 0;
  if (!r->merge_shards && (!r->collect.model_dir || !r->collect.traces_path))
    return md_cli_usage_error(command, "--model and --traces are required");
  if (!r->output && !shard) return md_cli_usage_error(command, "no output given (-o memdecay.json)");
  if (r->output && !strcmp(r->output, "-"))
    return md_cli_usage_error(command, "-o must name a file (the work directory goes beside it)");
  if (!r->workdir) r->workdir = r->workdir_owned = default_workdir(r->output);
  if (shard) r->run_dir = r->workdir ? shard_dir(r->workdir, &r->collect.shard) : NULL;
  else r->run_dir = r->workdir ? join(r->workdir, "run") : NULL;
  r->events = r->workdir ? join(r->workdir, "events.csv") : NULL;
  r->calibration = r->workdir ? join(r->workdir, "events.calibration.json") : NULL;
  if (!r->run_dir || !r->events || !r->calibration) return MD_EXIT_FAILURE;
  return check_outputs(r);
}

static int parse_options(int argc, char **argv, run_options *r) {
  md_collect_options_init(&r->collect);
  md_extract_options_init(&r->extract);
  md_fit_options_init(&r->fit);
  r->pins = calloc((size_t)argc + 1, sizeof *r->pins);
  if (!r->pins) return MD_EXIT_FAILURE;
  r->extract.settings.pins = r->pins;
  r->fit.settings = r->extract.settings; /* level, band, pins */
  char **args;
  int n_args;
  int exit_code = md_opt_parse_or_report(&md_run_command, r, argc, argv, &args, &n_args);
  if (exit_code >= 0) return exit_code;
  if (n_args > 0) return md_cli_usage_error(command, "unexpected argument '%s'", args[0]);
  return check_required(r);
}

/* ---- the stages ------------------------------------------------------------------ */

static int make_dir(const char *path, bool *made) {
  if (mkdir(path, 0777) == 0) {
    *made = true;
  } else if (errno != EEXIST) {
    fprintf(stderr, MD_PROGRAM " run: cannot create the work directory %s: %s\n", path,
            strerror(errno));
    return MD_EXIT_FAILURE;
  }
  return -1;
}

/* A work directory that already holds a run needs --resume: its episodes
 * may have cost hours of model time. Shards of one calibration share the
 * work directory, so its shards/ may exist already (another task made it). */
/* The file that marks a directory as a work directory of run. */
#define WORKDIR_MARKER ".memdecay-workdir"

static bool path_exists(const char *dir, const char *name) {
  char *path = join(dir, name);
  bool exists = path && access(path, F_OK) == 0;
  free(path);
  return exists;
}

/* A work directory must be missing, empty, or one of ours (its marker, or
 * for work directories of older versions what run leaves in one: run/
 * with its run.json, or shards/): run writes events.csv and its sidecar
 * into it, which must not replace a user's files. */
static int check_workdir(const run_options *r) {
  const int empty = md_dir_lock_empty(r->workdir);
  if (empty < 0) {
    if (errno == ENOENT) return -1;
    fprintf(stderr, MD_PROGRAM " run: --workdir %s: %s\n", r->workdir, strerror(errno));
    return MD_EXIT_INPUT;
  }
  if (empty || path_exists(r->workdir, WORKDIR_MARKER) || path_exists(r->workdir, "run/run.json") ||
      path_exists(r->workdir, "shards"))
    return -1;
  fprintf(stderr, MD_PROGRAM " run: --workdir %s is not empty and is not a work directory of "
          "run (it has no " WORKDIR_MARKER "): run writes events.csv and more into it; choose a "
          "new or an empty directory\n", r->workdir);
  return MD_EXIT_INPUT;
}

/* Marks the work directory as ours (several shard tasks may race to). */
static void mark_workdir(const run_options *r) {
  char *path = join(r->workdir, WORKDIR_MARKER);
  int fd = path ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666) : -1;
  if (fd >= 0) {
    static const char text[] = "a work directory of memdecay-calibrate run\n";
    if (write(fd, text, sizeof text - 1) < 0) { /* the marker's presence is what counts */ }
    close(fd);
  }
  free(path);
}

/* One run at a time in a work directory (io/files/dir_lock.h), but for
 * the tasks of a sharded collection, which share it by design (each locks
 * its own shard's run directory). */
static int lock_workdir(run_options *r) {
  if (r->collect.shard.count > 0) return -1;
  md_error err = {0};
  return md_dir_lock_take(r->workdir, &r->workdir_lock, &err) == MD_OK ? -1 : md_cli_report(&err);
}

static int prepare_workdir(run_options *r) {
  struct stat st;
  bool shard = r->collect.shard.count > 0;
  int checked = check_workdir(r);
  if (checked >= 0) return checked;
  if (stat(r->run_dir, &st) == 0 && !r->collect.resume) {
    if (shard)
      fprintf(stderr, MD_PROGRAM " run: %s already holds shard %zu/%zu: pass --resume to "
              "continue it, or remove it\n", r->run_dir, r->collect.shard.index,
              r->collect.shard.count);
    else if (!path_exists(r->run_dir, "run.json"))
      fprintf(stderr, MD_PROGRAM " run: %s exists and is not a run directory (no run.json): remove "
              "it, or choose another --workdir\n", r->run_dir);
    else
      fprintf(stderr, MD_PROGRAM " run: %s already holds a run: pass --resume to continue it "
              "(a finished run is then only extracted and fitted again), or remove %s\n",
              r->run_dir, r->workdir);
    return MD_EXIT_INPUT;
  }
  int exit_code = make_dir(r->workdir, &r->made_workdir);
  if (exit_code < 0) {
    mark_workdir(r);
    exit_code = lock_workdir(r);
  }
  if (exit_code < 0 && shard) {
    char *shards = join(r->workdir, "shards");
    exit_code = shards ? make_dir(shards, &r->made_shards) : MD_EXIT_FAILURE;
    free(shards);
  }
  return exit_code;
}

static int collect_stage(run_options *r, md_progress *bar) {
  r->collect.out_dir = r->run_dir;
  r->collect.progress = md_progress_collect;
  r->collect.on_warning = md_progress_warning;
  r->collect.context = bar;
  md_error err = {0};
  md_collect_summary summary;
  md_status status = md_collect(&r->collect, &summary, &err);
  md_progress_end(bar);
  if (status == MD_OK) return -1;
  if (summary.started) return md_cli_report(&err);
  /* Refused before any work: leave no empty work directory behind. */
  if (r->made_shards) {
    char *shards = join(r->workdir, "shards");
    if (shards) rmdir(shards);
    free(shards);
  }
  if (r->made_workdir) {
    char *marker = join(r->workdir, WORKDIR_MARKER);
    if (marker) unlink(marker);
    free(marker);
    md_dir_lock_release(&r->workdir_lock); /* removes its file */
    rmdir(r->workdir);
  }
  return md_cli_report(&err);
}

/* Its numbers go into the config and the fit's table: one line of its own. */
static int extract_stage(run_options *r, md_progress *bar) {
  md_extract_options *stage = &r->extract;
  const char *one[] = {r->run_dir};
  stage->run_dirs = r->merge_shards ? (const char *const *)r->shard_dirs : one;
  stage->n_run_dirs = r->merge_shards ? r->n_shard_dirs : 1;
  stage->events_path = r->events;
  stage->calibration_path = r->calibration;
  stage->reproducible = r->collect.reproducible;
  md_error err = {0};
  md_extract_outcome outcome;
  if (md_extract(stage, &outcome, &err) != MD_OK) return md_cli_report(&err);
  const md_calibration *c = &outcome.calibration;
  char note[256];
  snprintf(note, sizeof note, "extract: %zu episodes, %llu tokens, %llu lifetimes; kappa %.4g, "
           "alpha %.4g", (size_t)c->workload.episodes, (unsigned long long)c->workload.tokens,
           (unsigned long long)outcome.rows, c->policy.kappa, c->policy.alpha);
  md_progress_note(bar, note);
  md_extract_outcome_free(&outcome);
  return -1;
}

static int fit_stage(run_options *r) {
  const char *inputs[] = {r->events};
  md_fit_options *stage = &r->fit;
  stage->inputs = inputs;
  stage->n_inputs = 1;
  stage->output = r->output;
  stage->calibration_path = r->calibration;
  stage->reproducible = r->collect.reproducible;
  stage->settings.pins = r->pins;
  stage->settings.n_pins = r->extract.settings.n_pins;
  md_error err = {0};
  md_fit_outcome outcome;
  if (md_fit(stage, &outcome, &err) != MD_OK) return md_cli_report(&err);
  if (!r->quiet) md_report_fit(stderr, command, stage, &outcome);
  md_fit_outcome_free(&outcome);
  return MD_EXIT_OK;
}

/* extract must pin as fit will: the priors file's "pinned" entries too. */
static int load_priors(const run_options *r, md_priors *priors) {
  md_error err = {0};
  if (r->fit.priors_path && md_priors_read(r->fit.priors_path, priors, &err) != MD_OK)
    return md_cli_report(&err);
  return -1;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* --merge-shards: every directory in WORKDIR/shards/ (their run.json says
 * which shard each is; extract puts them in order and finds gaps). */
static int list_shards(run_options *r) {
  char *shards = join(r->workdir, "shards");
  DIR *dir = shards ? opendir(shards) : NULL;
  if (!dir) {
    fprintf(stderr, MD_PROGRAM " run: %s: %s: collect the shards first (run --shard K/N "
            "--workdir %s)\n", shards ? shards : r->workdir, strerror(errno), r->workdir);
    free(shards);
    return MD_EXIT_INPUT;
  }
  int exit_code = -1;
  struct dirent *entry;
  while (exit_code < 0 && (entry = readdir(dir))) {
    if (entry->d_name[0] == '.') continue;
    char *path = join(shards, entry->d_name);
    struct stat st;
    if (path && stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) {
      free(path);
      continue;
    }
    char **grown = path ? realloc(r->shard_dirs, (r->n_shard_dirs + 1) * sizeof *grown) : NULL;
    if (!grown) {
      free(path);
      exit_code = MD_EXIT_FAILURE;
      break;
    }
    r->shard_dirs = grown;
    r->shard_dirs[r->n_shard_dirs++] = path;
  }
  closedir(dir);
  if (exit_code < 0 && r->n_shard_dirs == 0) {
    fprintf(stderr, MD_PROGRAM " run: %s holds no shard: collect them first (run --shard K/N "
            "--workdir %s)\n", shards, r->workdir);
    exit_code = MD_EXIT_INPUT;
  }
  free(shards);
  if (exit_code < 0) qsort(r->shard_dirs, r->n_shard_dirs, sizeof *r->shard_dirs, by_name);
  return exit_code;
}

/* --shard: collect, then say what is left to do. */
static int shard_stage(run_options *r, md_progress *bar) {
  int exit_code = collect_stage(r, bar);
  if (exit_code >= 0) return exit_code;
  if (!r->quiet)
    fprintf(stderr, MD_PROGRAM " run: shard %zu/%zu collected in %s; when all %zu are done: "
          MD_PROGRAM " run --workdir %s -o OUTPUT.json --merge-shards\n", r->collect.shard.index,
            r->collect.shard.count, r->run_dir, r->collect.shard.count, r->workdir);
  return MD_EXIT_OK;
}

/* --merge-shards with --model or --traces: the shards must be of them. */
static int expected_identity(run_options *r, char traces[MD_SHA256_HEX],
                             char config[MD_SHA256_HEX]) {
  md_error err = {0};
  if (r->collect.traces_path) {
    if (md_sha256_file(r->collect.traces_path, traces, &err) != MD_OK) return md_cli_report(&err);
    r->extract.expect_traces_sha256 = traces;
  }
  if (r->collect.model_dir) {
    if (md_model_identity(r->collect.model_dir, config, &err) != MD_OK) return md_cli_report(&err);
    r->extract.expect_config_sha256 = config;
  }
  return -1;
}

static int run_stages(run_options *r) {
  md_priors priors = {0};
  int exit_code = load_priors(r, &priors);
  char traces_sha256[MD_SHA256_HEX], config_sha256[MD_SHA256_HEX];
  if (exit_code < 0 && r->merge_shards) exit_code = expected_identity(r, traces_sha256, config_sha256);
  if (exit_code < 0 && r->merge_shards) exit_code = lock_workdir(r);
  if (exit_code < 0) exit_code = r->merge_shards ? list_shards(r) : prepare_workdir(r);
  r->extract.settings.priors = &priors;
  md_progress_options progress_options = {.label = command, .quiet = r->quiet};
  md_progress *bar = md_progress_new(&progress_options);
  if (exit_code < 0 && r->collect.shard.count) exit_code = shard_stage(r, bar);
  if (exit_code < 0 && !r->merge_shards) exit_code = collect_stage(r, bar);
  if (exit_code < 0) exit_code = extract_stage(r, bar);
  md_progress_free(bar);
  if (exit_code < 0) exit_code = fit_stage(r);
  md_priors_free(&priors);
  return exit_code;
}

int md_cmd_run(int argc, char **argv) {
  run_options r;
  memset(&r, 0, sizeof r);
  r.workdir_lock = MD_DIR_LOCK_NONE;
  int exit_code = parse_options(argc, argv, &r);
  if (exit_code < 0) exit_code = run_stages(&r);
  md_dir_lock_release(&r.workdir_lock);
  free(r.pins);
  free(r.workdir_owned);
  free(r.run_dir);
  free(r.events);
  free(r.calibration);
  for (size_t i = 0; i < r.n_shard_dirs; i++) free(r.shard_dirs[i]);
  free(r.shard_dirs);
  return exit_code;
}
