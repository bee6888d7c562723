/* memdecay-calibrate collect: runs a checkpoint over agent traces and writes
 * a run directory of attention per decode step (collector/capture/collect.h,
 * memdecay-run(5)). This file parses options and prints; the work is
 * md_collect. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/cli.h"
#include "calib/commands.h"
#include "calib/collect_options.h"
#include "calib/progress.h"
#include "collector/capture/collect.h"
#include "collector/tokenizer/episode_tokens.h"
#include "base/policy_defaults.h"

static const char command[] = "collect";

typedef struct options {
  md_collect_options collect;
  bool quiet;
} options;

static void print_help(FILE *out) {
  fprintf(
      out,
      "Usage: " MD_PROGRAM " collect --model DIR --traces FILE.jsonl --out RUN_DIR [OPTIONS]\n"
      "\n"
      "Runs a Qwen2/Qwen2.5 checkpoint over region-labelled agent traces and records, at\n"
      "every decode step, the attention each token of the context receives (averaged over\n"
      "heads and layers, captured inside the attention kernel). Writes the run directory\n"
      "that 'extract' reads (memdecay-run(5)):\n"
      "  RUN_DIR/run.json              model identity, settings, complete episodes\n"
      "  RUN_DIR/manifest.csv          one row per token: episode,pos,region,page,birth,token_id,piece\n"
      "  RUN_DIR/attn/EPISODE.npy      float32 [steps, tokens]: row t = attention of decode step t\n"
      "  RUN_DIR/prefill/EPISODE.npy   float32 [prompt tokens]: attention received in the prompt pass\n"
      "Every episode is validated, tokenised and checked against the model before any\n"
      "model work. An interrupted run is continued with --resume.\n"
      "\n"
      "Options:\n"
      "      --model DIR        Hugging Face checkpoint directory (config.json, *.safetensors,\n"
      "                         tokenizer.json), or a GGUF file (or a directory holding one)\n"
      "      --traces FILE      agent traces, JSON Lines (memdecay-traces(5))\n"
      "      --out RUN_DIR      the run directory to create (its parent must exist)\n"
      "      --device NAME      cpu (default), cuda or cuda:N\n"
      "      --threads N        CPU threads (default: all cores)\n"
      "      --exact-gemm       multiply in float32 (HF's products; slower prompts, and on\n"
      "                         the CPU slower batched decoding). Default: tensor cores on\n"
      "                         CUDA's prompts; BF16 on AMD Zen 4/5\n"
      "      --bf16-gemm        CPU: multiply a BF16 checkpoint's prompt and decode steps\n"
      "                         with AVX-512 BF16 (activations rounded to BF16 as on the\n"
      "                         GPU; the default on AMD Zen 4/5, slower on the Intel Xeons\n"
      "                         measured; needs a CPU with AVX-512 BF16). Default\n"
      "                         elsewhere: float32, as HF\n"
      "      --gguf-f32         a GGUF model's weight matrices dequantized to float32 (twice\n"
      "                         the memory of the default, bfloat16; run.json's model dtype)\n"
      "      --no-cuda-graphs   CUDA: launch decode steps kernel by kernel (default: each\n"
      "                         step recorded once as a CUDA graph and replayed)\n"
      "      --cuda-graphs      the default; accepted for older scripts\n"
      "      --layers A:B       capture layers A to B-1 (default: all; A: or :B allowed)\n"
      "      --heads mean|max   aggregate the heads of a decode row by mean (default) or max\n"
      "      --page-size N      KV-cache page of a token = position / N (default " MD_DEFAULT_TEXT(MD_POLICY_PAGE_SIZE_DEFAULT) ")\n"
      "      --max-steps N      cap every decode window at N steps (default: no cap)\n"
      "      --max-episodes N   collect only the first N episodes of the file\n"
      "      --batch N          episodes collected together, one decode step for all\n"
      "                         (default 8, CPU and CUDA; the same bytes)\n"
      "      --shard K/N        collect only shard K (0 to N-1) of N: a contiguous block of\n"
      "                         the episodes with about 1/N of the tokens; 'extract' reads\n"
      "                         the N run directories together (man: SHARDS)\n"
      "      --resume           continue RUN_DIR: keep its complete episodes, run the rest\n"
      "      --skip-invalid     skip (and report) invalid or over-long episodes instead of\n"
      "                         stopping; they are listed in run.json \"skipped\"\n"
      "      --reproducible     leave out run.json's 'created' timestamp\n"
      "  -q, --quiet            print nothing on standard error but errors\n"
      "  -h, --help             this text\n"
      "\n"
      "An episode's decode window is its teacher-forced continuation (tokenised on its\n"
      "own), or 'generate: N' greedy tokens, or %d greedy tokens when it has no\n"
      "continuation. Progress goes to standard error (a bar on a terminal); standard\n"
      "output stays empty.\n"
      "\n"
      "Example:\n"
      "  " MD_PROGRAM " collect --model Qwen2.5-0.5B-Instruct \\\n"
      "      --traces data/traces/agent-450.jsonl --out runs/agent-450 --max-steps 128\n"
      "  " MD_PROGRAM " collect --model Qwen2.5-0.5B-Instruct \\\n"
      "      --traces data/traces/agent-450.jsonl --out runs/agent-450 --max-steps 128 --resume\n"
      "\n"
      "Exit status: 0 on success (also when --skip-invalid skipped some episodes but ran at\n"
      "least one); 2 for a usage error or invalid input (traces, checkpoint, an existing run\n"
      "directory without --resume, a resume with another model or other settings); 3 when\n"
      "the run failed (I/O, memory, device): resume it with --resume.\n",
      (int)MD_EPISODE_DEFAULT_STEPS);
}

enum { OPT_MODEL, OPT_TRACES, OPT_OUT, OPT_RESUME, OPT_SKIP_INVALID, OPT_REPRODUCIBLE, OPT_QUIET,
       OPT_HELP };

static const md_opt own_options[] = {
    {"model", 0, OPT_MODEL, "DIR"},
    {"traces", 0, OPT_TRACES, "FILE"},
    {"out", 0, OPT_OUT, "RUN_DIR"},
    {"resume", 0, OPT_RESUME, NULL},
    {"skip-invalid", 0, OPT_SKIP_INVALID, NULL},
    {"reproducible", 0, OPT_REPRODUCIBLE, NULL},
    {"quiet", 'q', OPT_QUIET, NULL},
    {"help", 'h', OPT_HELP, NULL},
    {NULL, 0, 0, NULL},
};

/* Handles one option; returns -1 to go on, else the exit code. */
static int take_own(void *context, const md_opt *opt, const char *value) {
  options *o = context;
  md_collect_options *c = &o->collect;
  switch (opt->id) {
    case OPT_MODEL: c->model_dir = value; return -1;
    case OPT_TRACES: c->traces_path = value; return -1;
    case OPT_OUT: c->out_dir = value; return -1;
    case OPT_RESUME: c->resume = true; return -1;
    case OPT_SKIP_INVALID: c->skip_invalid = true; return -1;
    case OPT_REPRODUCIBLE: c->reproducible = true; return -1;
    case OPT_QUIET: o->quiet = true; return -1;
    case OPT_HELP: print_help(stdout); return MD_EXIT_OK;
    default: return md_cli_usage_error(command, "unknown option");
  }
}

static int take_collect(void *context, const md_opt *opt, const char *value) {
  return md_collect_option(command, opt, value, &((options *)context)->collect);
}

static const md_opt_group groups[] = {
    {own_options, take_own},
    {md_collect_option_table, take_collect},
    {NULL, NULL},
};

/* "option --page-size needs a value" unquoted, as its tests check. */
const md_opt_command md_collect_command = {"collect", groups, print_help,
                                           MD_OPT_KEEP_NEEDS_VALUE_WORDING};

/* Parses the options; returns -1 to go on, else the exit code. */
static int parse_options(int argc, char **argv, options *opt) {
  memset(opt, 0, sizeof *opt);
  md_collect_options_init(&opt->collect);
  char **args;
  int n_args;
  int code = md_opt_parse_or_report(&md_collect_command, opt, argc, argv, &args, &n_args);
  if (code >= 0) return code;
  if (n_args > 0) return md_cli_usage_error(command, "unexpected argument '%s'", args[0]);
  const md_collect_options *c = &opt->collect;
  if (!c->model_dir || !c->traces_path || !c->out_dir)
    return md_cli_usage_error(command, "--model, --traces and --out are required");
  return -1;
}

int md_cmd_collect(int argc, char **argv) {
  options opt;
  int code = parse_options(argc, argv, &opt);
  if (code >= 0) return code;
  md_progress_options progress_options = {.label = command, .quiet = opt.quiet};
  md_progress *bar = md_progress_new(&progress_options);
  opt.collect.progress = md_progress_collect;
  opt.collect.on_warning = md_progress_warning;
  opt.collect.context = bar;
  md_error err = {0};
  md_collect_summary summary;
  md_status status = md_collect(&opt.collect, &summary, &err);
  md_progress_end(bar);
  md_progress_free(bar);
  if (status != MD_OK) return md_cli_report(&err);
  if (!opt.quiet && opt.collect.shard.count)
    fprintf(stderr, MD_PROGRAM " collect: shard %zu/%zu: %zu of the %zu episodes in %s\n",
            opt.collect.shard.index, opt.collect.shard.count, summary.episodes_total,
            summary.plan_episodes, opt.collect.out_dir);
  if (!opt.quiet && summary.episodes_skipped)
    fprintf(stderr, MD_PROGRAM " collect: %zu of %zu episodes skipped (listed in %s/run.json)\n",
            summary.episodes_skipped, summary.episodes_in_file, opt.collect.out_dir);
  return MD_EXIT_OK;
}
