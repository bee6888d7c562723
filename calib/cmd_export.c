/* memdecay-calibrate export: a calibrated memdecay.json and requests (agent
 * traces or OpenAI chat-completions request bodies) in, a serving stack's
 * retention settings out, one JSON line per request (export/export.h). This
 * file parses options and prints the tally; the rule is
 * md_retention_map_tokens (export/retention.h), the stacks' fields
 * export/formats/. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/cli.h"
#include "calib/commands.h"
#include "export/export.h"

static const char command[] = "export";

typedef struct options {
  md_export_options ex;
  const char **retrieval; /* --retrieval-tool, repeated */
  size_t n_retrieval;
  bool quiet;
} options;

static void print_help(FILE *out) {
  char names[128];
  fprintf(out,
      "Usage: " MD_PROGRAM " export REQUESTS.jsonl --config memdecay.json --model DIR\n"
      "           --format FORMAT -o OUT.jsonl [--step-ms X] [--block-size N]\n"
      "           [--input-format F] [--retrieval-tool NAME]... [--summary FILE] [--runs] [-q]\n"
      "\n"
      "Turns a calibrated memdecay.json into a serving stack's KV-cache retention\n"
      "settings, one JSON line per request. Each request is rendered with the model's\n"
      "chat template and tokenised with its tokenizer exactly as 'collect' renders an\n"
      "episode; every token takes its region, blocks of the stack's size take the most\n"
      "retained region among their tokens, and equal neighbouring blocks make one range.\n"
      "A region's priority is 100 when pinned, else 1 + round(98 x base_priority); its\n"
      "duration is its half-life times --step-ms (none when pinned or without a\n"
      "half-life). The rule in full, each format's fields and what each stack cannot\n"
      "express are in memdecay-calibrate(1), EXPORT.\n"
      "\n"
      "Formats (%s):\n",
      md_export_format_names(names, sizeof names));
  for (size_t i = 0; md_export_formats[i]; i++)
    fprintf(out, "  %-8s %s\n", md_export_formats[i]->name, md_export_formats[i]->summary);
  fputs(
      "\n"
      "Options:\n"
      "      --config FILE      the calibrated memdecay.json (memdecay-config(5))\n"
      "      --model DIR        the checkpoint whose tokenizer and chat template render the\n"
      "                         requests: a Hugging Face directory or a GGUF file\n"
      "      --format FORMAT    the stack: trtllm, vllm, sglang or dynamo\n"
      "  -o, --out FILE         the settings, JSON Lines, one per request (never an input)\n"
      "      --step-ms X        milliseconds per decode step, > 0: turns half-lives into\n"
      "                         durations (required by trtllm and vllm)\n"
      "      --block-size N     tokens per KV-cache block, 1 to 65536 (default: the\n"
      "                         stack's own: trtllm 32, vllm 16; sglang and dynamo take one\n"
      "                         priority per request and no blocks)\n"
      "      --input-format F   traces (memdecay-traces(5)), openai (chat-completions\n"
      "                         request bodies) or auto (default: openai when the first\n"
      "                         request has a \"model\" member, traces otherwise)\n"
      "      --retrieval-tool NAME  openai input: results of calls to the tool NAME are in\n"
      "                         region retrieval (repeatable)\n"
      "      --summary FILE     the mapping per region as JSON: priority, duration,\n"
      "                         pinning, identification, ranges and tokens, the priorities\n"
      "                         lowered, and what the stack approximates\n"
      "      --runs             add to each line the unaligned region runs of the prompt\n"
      "                         and the decode region, for cross-checks\n"
      "  -q, --quiet            print nothing but errors\n"
      "  -h, --help             this text\n"
      "\n"
      "Example (the shipped demo):\n"
      "  " MD_PROGRAM " export data/traces/agent-450.jsonl --format vllm --step-ms 25 \\\n"
      "      --config data/golden/qwen2-tiny-agent-450.json --model data/models/qwen2-tiny \\\n"
      "      -o retention.jsonl --summary retention-summary.json\n"
      "\n"
      "Exit status: 0 on success; 2 for a usage error or invalid input (the message names\n"
      "the file, line and request, or the config's field: a request without messages, an\n"
      "unknown role, a region the config lacks, malformed JSON); 3 when the output cannot\n"
      "be written. Nothing is written unless every request maps.\n",
      out);
}

enum {
  OPT_CONFIG, OPT_MODEL, OPT_FORMAT, OPT_OUT, OPT_STEP_MS, OPT_BLOCK_SIZE, OPT_INPUT_FORMAT,
  OPT_RETRIEVAL_TOOL, OPT_SUMMARY, OPT_RUNS, OPT_QUIET, OPT_HELP
};

static const md_opt export_table[] = {
    {"config", 0, OPT_CONFIG, "FILE"},
    {"model", 0, OPT_MODEL, "DIR"},
    {"format", 0, OPT_FORMAT, "FORMAT"},
    {"out", 'o', OPT_OUT, "FILE"},
    {"step-ms", 0, OPT_STEP_MS, "X"},
    {"block-size", 0, OPT_BLOCK_SIZE, "N"},
    {"input-format", 0, OPT_INPUT_FORMAT, "F"},
    {"retrieval-tool", 0, OPT_RETRIEVAL_TOOL, "NAME"},
    {"summary", 0, OPT_SUMMARY, "FILE"},
    {"runs", 0, OPT_RUNS, NULL},
    {"quiet", 'q', OPT_QUIET, NULL},
    {"help", 'h', OPT_HELP, NULL},
    {NULL, 0, 0, NULL},
};

/* Handles one option; returns -1 to go on, else the exit code. */
static int take_option(void *context, const md_opt *option, const char *value) {
  options *opt = context;
  char names[128];
  long n;
  switch (option->id) {
    case OPT_CONFIG: opt->ex.config_path = value; return -1;
    case OPT_MODEL: opt->ex.model_path = value; return -1;
    case OPT_FORMAT:
      if (!(opt->ex.format = md_export_format_find(value)))
        return md_cli_usage_error(command, "--format: unknown format '%s' (formats: %s)", value,
                                  md_export_format_names(names, sizeof names));
      return -1;
    case OPT_OUT: opt->ex.output_path = value; return -1;
    case OPT_STEP_MS:
      if (!md_cli_parse_double(value, 0, 1e9, &opt->ex.step_ms) || !(opt->ex.step_ms > 0))
        return md_cli_usage_error(command, "--step-ms must be a number > 0 (milliseconds per "
                                  "decode step, at most 1e9), got '%s'", value);
      return -1;
    case OPT_BLOCK_SIZE:
      if (!md_cli_parse_long(value, 1, MD_EXPORT_BLOCK_SIZE_MAX, &n))
        return md_cli_usage_error(command, "--block-size must be a whole number from 1 to %d, "
                                  "got '%s'", MD_EXPORT_BLOCK_SIZE_MAX, value);
      opt->ex.block_size = (size_t)n;
      return -1;
    case OPT_INPUT_FORMAT:
      if (!strcmp(value, "traces")) opt->ex.input = MD_EXPORT_INPUT_TRACES;
      else if (!strcmp(value, "openai")) opt->ex.input = MD_EXPORT_INPUT_OPENAI;
      else if (!strcmp(value, "auto")) opt->ex.input = MD_EXPORT_INPUT_AUTO;
      else return md_cli_usage_error(command, "--input-format must be traces, openai or auto, "
                                     "got '%s'", value);
      return -1;
    case OPT_RETRIEVAL_TOOL: {
      const char **list = realloc(opt->retrieval, (opt->n_retrieval + 1) * sizeof *list);
      if (!list) return MD_EXIT_FAILURE;
      opt->retrieval = list;
      list[opt->n_retrieval++] = value;
      return -1;
    }
    case OPT_SUMMARY: opt->ex.summary_path = value; return -1;
    case OPT_RUNS: opt->ex.runs = true; return -1;
    case OPT_QUIET: opt->quiet = true; return -1;
    case OPT_HELP: print_help(stdout); return MD_EXIT_OK;
    default: return md_cli_usage_error(command, "unknown option");
  }
}

static const md_opt_group groups[] = {{export_table, take_option}, {NULL, NULL}};

const md_opt_command md_export_command = {"export", groups, print_help, 0};

/* Returns -1 when the run should go on, else the exit code. */
static int parse_options(int argc, char **argv, options *opt) {
  opt->ex.step_ms = NAN;
  char **args;
  int n_args;
  int code = md_opt_parse_or_report(&md_export_command, opt, argc, argv, &args, &n_args);
  if (code >= 0) return code;
  if (n_args != 1) return md_cli_usage_error(command, "expected one requests file, got %d", n_args);
  opt->ex.input_path = args[0];
  if (!opt->ex.config_path) return md_cli_usage_error(command, "--config memdecay.json is required");
  if (!opt->ex.model_path) return md_cli_usage_error(command, "--model DIR is required");
  if (!opt->ex.format) return md_cli_usage_error(command, "--format is required");
  if (!opt->ex.output_path) return md_cli_usage_error(command, "-o OUT.jsonl is required");
  if (opt->ex.format->durations && isnan(opt->ex.step_ms))
    return md_cli_usage_error(command, "--format %s emits durations: --step-ms X (milliseconds "
                              "per decode step) is required", opt->ex.format->name);
  opt->ex.retrieval_tools = opt->retrieval;
  opt->ex.n_retrieval_tools = opt->n_retrieval;
  return -1;
}

static void print_outcome(const options *opt, const md_export_outcome *o) {
  printf("%s: %zu requests (%s), %zu prompt tokens, format %s, block size %zu\n", command,
         o->requests, md_export_input_name(o->input), o->prompt_tokens, opt->ex.format->name,
         o->block_size);
  printf("%-16s %10s %8s %10s %8s\n", "region", "labelled", "ranges", "in ranges", "lowered");
  for (size_t r = 0; r < o->n_regions; r++) {
    const md_export_region_count *c = &o->regions[r];
    printf("%-16s %10zu %8zu %10zu %8zu\n", c->region, c->labelled_tokens, c->ranges, c->tokens,
           c->lowered);
  }
  printf("%s: wrote %s\n", command, opt->ex.output_path);
  if (opt->ex.summary_path) printf("%s: wrote %s\n", command, opt->ex.summary_path);
}

int md_cmd_export(int argc, char **argv) {
  options opt = {0};
  int code = parse_options(argc, argv, &opt);
  if (code < 0) {
    md_error err = {0};
    md_export_outcome outcome;
    if (md_export(&opt.ex, &outcome, &err) != MD_OK) {
      code = md_cli_report(&err);
    } else {
      for (size_t i = 0; i < outcome.warnings.n; i++)
        fprintf(stderr, MD_PROGRAM " %s: warning: %s\n", command, outcome.warnings.lines[i]);
      if (!opt.quiet) print_outcome(&opt, &outcome);
      md_export_outcome_free(&outcome);
      code = MD_EXIT_OK;
    }
  }
  free(opt.retrieval);
  return code;
}
