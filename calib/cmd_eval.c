/* memdecay-calibrate eval: the eviction-probe evaluation (collector/eval/eval.h,
 * memdecay-eval(5)). This file parses options, prints the recall table and
 * writes the results; the work is md_eval. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calib/cli.h"
#include "calib/commands.h"
#include "calib/progress.h"
#include "collector/eval/eval.h"
#include "io/files/output_guard.h"
#include "base/policy_defaults.h"
#include "base/timestamp.h"
#include "io/formats/eval_results.h"
#include "io/plot/plot.h"
#include "io/plot/plot_eval.h"
#include "runtime/policy_table.h"

static const char command[] = "eval";

typedef struct options {
  md_eval_options eval;
  const char *out;
  const char *plot;
  bool reproducible;
  bool quiet;
} options;

/* Writes `text` from column `column` on, breaking lines between words at
 * WRAP columns, continuation lines indented by `indent` spaces; ends the
 * line. */
enum { WRAP = 80 };
static void put_wrapped(FILE *out, size_t column, const char *text, size_t indent) {
  bool first = true;
  for (;;) {
    while (*text == ' ') text++;
    size_t word = strcspn(text, " ");
    if (!word) break;
    if (!first && column + 1 + word > WRAP) {
      fprintf(out, "\n%*s", (int)indent, "");
      column = indent;
    } else if (!first) {
      fputc(' ', out);
      column++;
    }
    fwrite(text, 1, word, out);
    column += word;
    text += word;
    first = false;
  }
  fputc('\n', out);
}

/* The names of the policy table (runtime/policy_table.h), "a, b, c": all of
 * them, or only those of eval's default set (not opt-in). */
static void policy_names(char *buffer, size_t size, bool default_set_only) {
  size_t used = 0;
  buffer[0] = '\0';
  for (size_t i = 0; i < md_policy_table_count && used < size; i++) {
    if (default_set_only && md_policy_table[i]->opt_in) continue;
    used += (size_t)snprintf(buffer + used, size - used, "%s%s", used ? ", " : "",
                             md_policy_table[i]->name);
  }
}

/* The policies' names and lines come from the table (runtime/policy_table.h). */
static void print_help(FILE *out) {
  fputs(
      "Usage: " MD_PROGRAM " eval --model DIR --traces FILE.jsonl --config memdecay.json\n"
      "           -o RESULTS.json [OPTIONS]\n"
      "\n"
      "Measures what a KV-cache budget costs: feeds every episode of the traces to the\n"
      "model message by message, evicts pages down to a budget after every chunk and\n"
      "decode step with each policy, then asks the episode's probes (a fact planted per\n"
      "region) from that cache and scores the greedy answers. The full cache is always\n"
      "run as the ceiling. Prints one table per budget on standard error (a row per\n"
      "region, a column per policy, recalled/total) and writes every probe's outcome to\n"
      "RESULTS.json (memdecay-eval(5)). The protocol is in memdecay-calibrate(1), EVAL.\n"
      "Each finished episode is kept in RESULTS.json.record until RESULTS.json is\n"
      "written: an interrupted eval continues with --resume.\n"
      "\n"
      "Options:\n"
      "      --model DIR          Hugging Face Qwen2/Qwen2.5 checkpoint directory, or a\n"
      "                           GGUF file (or a directory holding one)\n"
      "      --traces FILE        agent traces with probes (memdecay-traces(5))\n"
      "      --config FILE        memdecay.json: the policy MemDecay evicts by\n"
      "  -o, --out FILE           the results file to write\n",
      out);
  char names[1024], defaults[1024], text[2200];
  policy_names(names, sizeof names, false);
  policy_names(defaults, sizeof defaults, true);
  snprintf(text, sizeof text, "comma-separated, from %s, or all (default: %s; the others are opt-in)",
           names, defaults);
  fputs("      --policies LIST      ", out);
  put_wrapped(out, 27, text, 27);
  fputs(
      "      --budget LIST        comma-separated fractions of each episode's length in\n"
      "                           (0, 1] (default " MD_DEFAULT_TEXT(MD_EVAL_DEFAULT_BUDGET_SMALL) ","
      MD_DEFAULT_TEXT(MD_EVAL_DEFAULT_BUDGET_LARGE) ")\n"
      "      --page-size N        eviction granularity in tokens (default: the config's\n"
      "                           policy.page_size; 1 makes every policy token-granular)\n"
      "      --plot FILE          also draw recall per region and policy (PNG, SVG or PDF)\n"
      "      --device NAME        cpu (default), cuda or cuda:N\n"
      "      --threads N          CPU threads (default: all cores)\n"
      "      --exact-gemm         multiply in float32 (default on CPUs other than AMD\n"
      "                           Zen 4/5)\n"
      "      --bf16-gemm          CPU: multiply a BF16 checkpoint's prompts and decode steps\n"
      "                           with AVX-512 BF16 (the default on AMD Zen 4/5; slower on\n"
      "                           the Intel Xeons measured)\n"
      "      --gguf-f32           a GGUF model's weight matrices dequantized to float32\n"
      "                           (default bfloat16: half the memory)\n"
      "      --max-answer-tokens N  greedy tokens per answer (default " MD_DEFAULT_TEXT(MD_EVAL_DEFAULT_ANSWER_TOKENS) ")\n"
      "      --max-episodes N     evaluate only the first N episodes\n"
      "      --seed N             seed of the random policy (default 0; episode e uses N+e)\n"
      "      --batch N            runs of an episode stepped together, each weight read\n"
      "                           once for all of them (default: every run; 1: one at a\n"
      "                           time); the results are the same\n"
      "      --skip-invalid       skip (and report) invalid episodes instead of stopping\n"
      "      --reproducible       leave out the timestamp and timing from RESULTS.json\n"
      "      --resume             continue an interrupted eval from RESULTS.json.record (its\n"
      "                           inputs and settings must be the same); the results are\n"
      "                           those of an uninterrupted run\n"
      "  -q, --quiet              print nothing on standard error but errors\n"
      "  -h, --help               this text\n"
      "\n",
      out);
  fputs("Policies, in the order eval runs them (opt-in: only when --policies names it):\n", out);
  /* the names' column: the longest name and two spaces */
  int name_width = 0;
  for (size_t i = 0; i < md_policy_table_count; i++)
    if ((int)strlen(md_policy_table[i]->name) + 2 > name_width)
      name_width = (int)strlen(md_policy_table[i]->name) + 2;
  for (size_t i = 0; i < md_policy_table_count; i++) {
    const md_policy_class *c = md_policy_table[i];
    const char *parameters = c->parameters ? c->parameters : "";
    snprintf(text, sizeof text, "%s%s%s%s%s%s", c->description,
             c->parameters || c->opt_in ? " (" : "", parameters,
             c->parameters && c->opt_in ? "; " : "", c->opt_in ? "opt-in" : "",
             c->parameters || c->opt_in ? ")" : "");
    fprintf(out, "  %-*s", name_width, c->name);
    put_wrapped(out, 2 + (size_t)name_width, text, 2 + (size_t)name_width);
  }
  fputs("\n", out);
  fputs(
      "Example (the shipped checkpoint, its golden config and the short traces):\n"
      "  " MD_PROGRAM " eval --model data/models/qwen2-tiny \\\n"
      "      --traces data/traces/agent-450.jsonl \\\n"
      "      --config data/golden/qwen2-tiny-agent-450.json -o eval.json --plot eval.png\n"
      "\n"
      "Exit status: 0 on success; 2 for a usage error or invalid input (traces without\n"
      "probes, a probe's region absent from its episode, a region the config lacks, a\n"
      "budget outside (0, 1], an unreadable checkpoint or config); 3 when the run failed\n"
      "(I/O, memory, device).\n",
      out);
}

enum {
  OPT_MODEL, OPT_TRACES, OPT_CONFIG, OPT_OUT, OPT_POLICIES, OPT_BUDGET, OPT_PAGE_SIZE, OPT_PLOT,
  OPT_DEVICE, OPT_THREADS, OPT_EXACT_GEMM, OPT_BF16_GEMM, OPT_GGUF_F32, OPT_MAX_ANSWER, OPT_MAX_EPISODES, OPT_SEED, OPT_BATCH,
  OPT_SKIP_INVALID, OPT_REPRODUCIBLE, OPT_RESUME, OPT_QUIET, OPT_HELP,
};

static const md_opt eval_table[] = {
    {"model", 0, OPT_MODEL, "DIR"},
    {"traces", 0, OPT_TRACES, "FILE"},
    {"config", 0, OPT_CONFIG, "FILE"},
    {"out", 'o', OPT_OUT, "FILE"},
    {"policies", 0, OPT_POLICIES, "LIST"},
    {"budget", 0, OPT_BUDGET, "LIST"},
    {"page-size", 0, OPT_PAGE_SIZE, "N"},
    {"plot", 0, OPT_PLOT, "FILE"},
    {"device", 0, OPT_DEVICE, "NAME"},
    {"threads", 0, OPT_THREADS, "N"},
    {"exact-gemm", 0, OPT_EXACT_GEMM, NULL},
    {"bf16-gemm", 0, OPT_BF16_GEMM, NULL},
    {"gguf-f32", 0, OPT_GGUF_F32, NULL},
    {"max-answer-tokens", 0, OPT_MAX_ANSWER, "N"},
    {"max-episodes", 0, OPT_MAX_EPISODES, "N"},
    {"seed", 0, OPT_SEED, "N"},
    {"batch", 0, OPT_BATCH, "N"},
    {"skip-invalid", 0, OPT_SKIP_INVALID, NULL},
    {"reproducible", 0, OPT_REPRODUCIBLE, NULL},
    {"resume", 0, OPT_RESUME, NULL},
    {"quiet", 'q', OPT_QUIET, NULL},
    {"help", 'h', OPT_HELP, NULL},
    {NULL, 0, 0, NULL},
};

static int parse_policies(const char *text, md_eval_options *o) {
  /* "all": every policy of the table, the opt-in ones too, in its order */
  if (strcmp(text, "all") == 0) {
    o->n_policies = 0;
    for (size_t i = 0; i < md_policy_table_count && o->n_policies < MD_EVAL_MAX_POLICIES; i++)
      o->policies[o->n_policies++] = md_policy_table[i];
    return -1;
  }
  char *copy = strdup(text);
  if (!copy) return md_cli_usage_error(command, "out of memory");
  o->n_policies = 0;
  int code = -1;
  char *save = NULL;
  for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    const md_policy_class *policy = md_policy_find(item);
    if (strcmp(item, "all") == 0) {
      code = md_cli_usage_error(command, "--policies all names every policy: list nothing with it");
      break;
    }
    if (!policy) {
      char names[1024];
      policy_names(names, sizeof names, false);
      code = md_cli_usage_error(command, "unknown policy '%s' (known: %s)", item, names);
      break;
    }
    for (size_t i = 0; i < o->n_policies; i++)
      if (o->policies[i] == policy) code = md_cli_usage_error(command, "policy '%s' is listed twice", item);
    if (code >= 0) break;
    if (o->n_policies == MD_EVAL_MAX_POLICIES) {
      code = md_cli_usage_error(command, "at most %d policies", MD_EVAL_MAX_POLICIES);
      break;
    }
    o->policies[o->n_policies++] = policy;
  }
  if (code < 0 && o->n_policies == 0) code = md_cli_usage_error(command, "--policies is empty");
  free(copy);
  return code;
}

static int parse_budgets(const char *text, md_eval_options *o) {
  char *copy = strdup(text);
  if (!copy) return md_cli_usage_error(command, "out of memory");
  o->n_budgets = 0;
  int code = -1;
  char *save = NULL;
  for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    double b = 0;
    if (!md_cli_parse_double(item, 0.0, 1.0, &b) || b <= 0.0) {
      code = md_cli_usage_error(command, "--budget: '%s' is not a fraction in (0, 1]", item);
      break;
    }
    for (size_t i = 0; i < o->n_budgets; i++)
      if (o->budgets[i] == b) code = md_cli_usage_error(command, "--budget: %s is listed twice", item);
    if (code >= 0) break;
    if (o->n_budgets == MD_EVAL_MAX_BUDGETS) {
      code = md_cli_usage_error(command, "at most %d budgets", MD_EVAL_MAX_BUDGETS);
      break;
    }
    o->budgets[o->n_budgets++] = b;
  }
  if (code < 0 && o->n_budgets == 0) code = md_cli_usage_error(command, "--budget is empty");
  free(copy);
  return code;
}

static int parse_count(const char *name, const char *text, long min, long max, long *out) {
  if (!md_cli_parse_long(text, min, max, out))
    return md_cli_usage_error(command, "%s must be an integer in [%ld, %ld], got '%s'", name, min,
                              max, text);
  return -1;
}

/* Handles one option; returns -1 to go on, else the exit code. */
static int take_option(void *context, const md_opt *option, const char *value) {
  options *opt = context;
  md_eval_options *o = &opt->eval;
  int code = -1;
  long number = 0;
  switch (option->id) {
    case OPT_MODEL: o->model_dir = value; break;
    case OPT_TRACES: o->traces_path = value; break;
    case OPT_CONFIG: o->config_path = value; break;
    case OPT_OUT: opt->out = value; break;
    case OPT_POLICIES: code = parse_policies(value, o); break;
    case OPT_BUDGET: code = parse_budgets(value, o); break;
    case OPT_PAGE_SIZE:
      if ((code = parse_count("--page-size", value, 1, 1 << 20, &number)) < 0) o->page_size = (int)number;
      break;
    case OPT_PLOT: opt->plot = value; break;
    case OPT_DEVICE: o->device = value; break;
    case OPT_THREADS:
      if ((code = parse_count("--threads", value, 0, 4096, &number)) < 0) o->threads = (int)number;
      break;
    case OPT_EXACT_GEMM: o->exact_gemm = true; break;
    case OPT_BF16_GEMM: o->bf16_gemm = true; break;
    case OPT_GGUF_F32: o->gguf_f32 = true; break;
    case OPT_MAX_ANSWER:
      if ((code = parse_count("--max-answer-tokens", value, 1, 4096, &number)) < 0)
        o->max_answer_tokens = (size_t)number;
      break;
    case OPT_MAX_EPISODES:
      if ((code = parse_count("--max-episodes", value, 1, 1L << 30, &number)) < 0)
        o->max_episodes = (size_t)number;
      break;
    case OPT_SEED:
      if ((code = parse_count("--seed", value, 0, 1L << 53, &number)) < 0) o->seed = (uint64_t)number;
      break;
    case OPT_BATCH:
      if ((code = parse_count("--batch", value, 1, 4096, &number)) < 0) o->batch = (size_t)number;
      break;
    case OPT_SKIP_INVALID: o->skip_invalid = true; break;
    case OPT_REPRODUCIBLE: opt->reproducible = true; break;
    case OPT_RESUME: o->resume = true; break;
    case OPT_QUIET: opt->quiet = true; break;
    case OPT_HELP: print_help(stdout); return MD_EXIT_OK;
    default: return md_cli_usage_error(command, "unknown option");
  }
  return code;
}

static const md_opt_group groups[] = {{eval_table, take_option}, {NULL, NULL}};

const md_opt_command md_eval_command = {"eval", groups, print_help, 0};

/* Returns -1 to go on, else the exit code. */
static int parse_options(int argc, char **argv, options *opt) {
  memset(opt, 0, sizeof *opt);
  md_eval_options_init(&opt->eval);
  md_eval_options *o = &opt->eval;
  char **args;
  int n_args;
  int code = md_opt_parse_or_report(&md_eval_command, opt, argc, argv, &args, &n_args);
  if (code >= 0) return code;
  if (n_args > 0) return md_cli_usage_error(command, "unexpected argument '%s'", args[0]);
  if (!o->model_dir || !o->traces_path || !o->config_path || !opt->out)
    return md_cli_usage_error(command, "--model, --traces, --config and -o are required");
  return -1;
}

/* ---- the table ----------------------------------------------------------------------------- */

/* The share of the answers' tokens still cached when the questions were
 * asked, per region and policy at one budget: what each policy kept,
 * whatever the model then made of it. */
static void print_retention(const md_eval_results *r, const char *const *policies,
                            size_t n_policies, int column, double budget) {
  fprintf(stderr, "answer tokens still cached at %g%%:\n", 100.0 * budget);
  for (size_t g = 0; g < r->n_regions; g++) {
    if (md_eval_cell_at(r, 0, g)->total == 0) continue;
    char label[64];
    snprintf(label, sizeof label, "%s%s", r->regions[g], r->pinned[g] ? " (pinned)" : "");
    fprintf(stderr, "%-22s %-8s", label, "");
    for (size_t p = 0; p < n_policies; p++) {
      int run = md_eval_run_index(r, policies[p], budget);
      const md_eval_cell *c = run >= 0 ? md_eval_cell_at(r, (size_t)run, g) : NULL;
      char cell[32] = "-";
      if (c && c->answer_tokens)
        snprintf(cell, sizeof cell, "%.0f%%", 100.0 * (double)c->answer_kept / (double)c->answer_tokens);
      fprintf(stderr, " %-*s", column, cell);
    }
    fputc('\n', stderr);
  }
}

static void print_table(const md_eval_results *r) {
  /* budgets in run order, after the full cache (run 0) */
  double budgets[MD_EVAL_MAX_RUNS];
  size_t n_budgets = 0;
  for (size_t run = 1; run < r->n_runs; run++) {
    bool seen = false;
    for (size_t b = 0; b < n_budgets; b++) seen |= budgets[b] == r->run_budget[run];
    if (!seen) budgets[n_budgets++] = r->run_budget[run];
  }
  /* policies in run order */
  const char *policies[MD_EVAL_MAX_RUNS];
  size_t n_policies = 0;
  for (size_t run = 1; run < r->n_runs; run++) {
    bool seen = false;
    for (size_t p = 0; p < n_policies; p++) seen |= !strcmp(policies[p], r->run_policy[run]);
    if (!seen) policies[n_policies++] = r->run_policy[run];
  }
  /* a column per policy: 12 wide, or its longest name's width */
  int column = 12;
  for (size_t p = 0; p < n_policies; p++)
    if ((int)strlen(policies[p]) > column) column = (int)strlen(policies[p]);
  for (size_t b = 0; b < (n_budgets ? n_budgets : 1); b++) {
    if (n_budgets)
      fprintf(stderr, "recall at a budget of %g%% of each episode (recalled/total):\n",
              100.0 * budgets[b]);
    else
      fprintf(stderr, "recall with the full cache (recalled/total):\n");
    fprintf(stderr, "%-22s %-8s", "region", r->run_policy[0]);
    for (size_t p = 0; p < n_policies; p++) fprintf(stderr, " %-*s", column, policies[p]);
    fputc('\n', stderr);
    size_t tot_rec[MD_EVAL_MAX_RUNS] = {0}, tot_all[MD_EVAL_MAX_RUNS] = {0};
    size_t un_rec[MD_EVAL_MAX_RUNS] = {0}, un_all[MD_EVAL_MAX_RUNS] = {0};
    size_t ev_rec[MD_EVAL_MAX_RUNS] = {0}, ev_all[MD_EVAL_MAX_RUNS] = {0};
    for (size_t g = 0; g < r->n_regions; g++) {
      const md_eval_cell *full = md_eval_cell_at(r, 0, g);
      if (full->total == 0) continue;
      char label[64], cell[32];
      snprintf(label, sizeof label, "%s%s", r->regions[g], r->pinned[g] ? " (pinned)" : "");
      snprintf(cell, sizeof cell, "%zu/%zu", full->recalled, full->total);
      fprintf(stderr, "%-22s %-8s", label, cell);
      for (size_t p = 0; p <= n_policies; p++) {
        const md_eval_cell *c = full;
        if (p > 0) {
          int run = n_budgets ? md_eval_run_index(r, policies[p - 1], budgets[b]) : -1;
          if (run < 0) continue;
          c = md_eval_cell_at(r, (size_t)run, g);
          snprintf(cell, sizeof cell, "%zu/%zu", c->recalled, c->total);
          fprintf(stderr, " %-*s", column, cell);
        }
        tot_rec[p] += c->recalled;
        tot_all[p] += c->total;
        ev_rec[p] += c->evicted_recalled;
        ev_all[p] += c->evicted_total;
        if (!r->pinned[g]) {
          un_rec[p] += c->recalled;
          un_all[p] += c->total;
        }
      }
      fputc('\n', stderr);
    }
    /* all, unpinned, and the probes whose answer was wholly evicted (none
     * with the full cache) */
    const char *labels[3] = {"all", "unpinned", "answer evicted"};
    for (int line = 0; line < (n_budgets ? 3 : 2); line++) {
      const size_t *rec = line == 2 ? ev_rec : line ? un_rec : tot_rec;
      const size_t *all = line == 2 ? ev_all : line ? un_all : tot_all;
      char cell[32];
      snprintf(cell, sizeof cell, "%zu/%zu", rec[0], all[0]);
      fprintf(stderr, "%-22s %-8s", labels[line], line == 2 ? "" : cell);
      for (size_t p = 1; p <= n_policies; p++) {
        snprintf(cell, sizeof cell, "%zu/%zu", rec[p], all[p]);
        fprintf(stderr, " %-*s", column, cell);
      }
      fputc('\n', stderr);
    }
    if (n_budgets) print_retention(r, policies, n_policies, column, budgets[b]);
  }
  size_t flagged = 0;
  for (size_t g = 0; g < r->n_regions; g++) flagged += md_eval_cell_at(r, 0, g)->flagged;
  if (flagged)
    fprintf(stderr, MD_PROGRAM " eval: warning: %zu probes' answers were not found in their "
            "region's text (flagged in the results: answer_in_region false)\n", flagged);
}

/* ---- main --------------------------------------------------------------------------------- */

int md_cmd_eval(int argc, char **argv) {
  options opt;
  int code = parse_options(argc, argv, &opt);
  if (code >= 0) return code;
  md_error err = {0};
  if (opt.plot && md_plot_check_path(opt.plot, &err) != MD_OK)
    return md_cli_usage_error(command, "--plot: %s", err.message);
  /* Before any episode runs: outputs never replace inputs or each other,
   * and their directories can be written (io/files/output_guard.h). */
  /* The record of finished episodes, beside the results (for --resume). */
  char *record = malloc(strlen(opt.out) + sizeof ".record");
  if (!record) return MD_EXIT_FAILURE;
  sprintf(record, "%s.record", opt.out);
  const md_path_role outputs[] = {
      {opt.out, "-o", false}, {opt.plot, "--plot", false}, {record, "the eval record", false}};
  const md_path_role inputs[] = {{opt.eval.model_dir, "--model", true},
                                 {opt.eval.traces_path, "--traces", false},
                                 {opt.eval.config_path, "--config", false}};
  if (md_outputs_check(outputs, 3, inputs, 3, &err) != MD_OK) {
    free(record);
    return md_cli_report(&err);
  }
  /* Standard output and special files get no record: nothing to resume. */
  struct stat st;
  bool special = !strcmp(opt.out, "-") || (stat(opt.out, &st) == 0 && !S_ISREG(st.st_mode));
  opt.eval.record_path = special ? NULL : record;
  md_progress_options progress_options = {.label = command, .quiet = opt.quiet};
  md_progress *bar = md_progress_new(&progress_options);
  opt.eval.progress = md_progress_collect;
  opt.eval.on_warning = md_progress_warning;
  opt.eval.context = bar;
  md_eval_results results;
  md_status status = md_eval(&opt.eval, &results, &err);
  md_progress_end(bar);
  md_progress_free(bar);
  if (status != MD_OK) {
    free(record);
    return md_cli_report(&err);
  }
  char created[32];
  md_timestamp_now(created);
  results.created = strdup(created);
  status = md_eval_results_write(opt.out, &results, opt.reproducible, &err);
  if (status == MD_OK && opt.eval.record_path) unlink(opt.eval.record_path); /* written: done */
  if (status == MD_OK && opt.plot) {
    /* the figure's colours: the policy table's */
    md_plot_policy_color colors[MD_EVAL_MAX_POLICIES];  /* the table fits (tests/runtime) */
    size_t n_colors = 0;
    for (size_t i = 0; i < md_policy_table_count && n_colors < MD_EVAL_MAX_POLICIES; i++) {
      const md_policy_class *c = md_policy_table[i];
      colors[n_colors++] = (md_plot_policy_color){c->name, {c->color[0], c->color[1], c->color[2]}};
    }
    status = md_plot_eval(opt.plot, &results, colors, n_colors, &err);
  }
  if (status == MD_OK && !opt.quiet) {
    print_table(&results);
    fprintf(stderr, MD_PROGRAM " eval: %zu episodes in %.1f s; wrote %s%s%s\n",
            results.n_episodes, results.seconds, opt.out, opt.plot ? " and " : "",
            opt.plot ? opt.plot : "");
  }
  md_eval_results_free(&results);
  free(record);
  return status == MD_OK ? MD_EXIT_OK : md_cli_report(&err);
}
