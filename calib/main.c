/* memdecay-calibrate: measures per-region KV-cache decay rates for MemDecay.
 * This file picks OpenBLAS's kernels (which may execute the program again)
 * and dispatches to the subcommands in calib/cmd_*.c. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib/cli.h"
#include "io/base/atomic_file.h"
#include "kernels/cpu/blas_core.h"
#include "md_build_config.h"

typedef struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} command;

static const command commands[] = {
    {"run", md_cmd_run, "collect + extract + fit: traces and a checkpoint in, memdecay.json out"},
    {"collect", md_cmd_collect, "run a checkpoint over agent traces and record attention"},
    {"extract", md_cmd_extract, "turn a collector run into token lifetimes and the calibration"},
    {"fit", md_cmd_fit, "fit survival models to token lifetimes and write memdecay.json"},
    {"eval", md_cmd_eval, "evict by a memdecay.json and measure recall of planted facts"},
    {"check", md_cmd_check, "compare a config with a golden one (CI drift check)"},
    {"tokenize", md_cmd_tokenize, "tokenize JSON Lines texts with a model's tokenizer.json"},
    {"devices", md_cmd_devices, "list the compute back ends (CPU, CUDA) usable here"},
};
enum { n_commands = sizeof commands / sizeof commands[0] };

static void print_usage(FILE *out) {
  fprintf(out,
          "Usage: " MD_PROGRAM " COMMAND [OPTIONS] [ARGS]\n"
          "\n"
          "Measures how long each region of an agent's prompt (system, plan, user,\n"
          "tool_in, tool_out, retrieval, scratchpad) keeps receiving attention, and\n"
          "writes the per-region decay rates a MemDecay KV-cache runtime needs.\n"
          "\n"
          "Commands:\n");
  for (int i = 0; i < n_commands; i++) fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(out,
          "\n"
          "Example (the shipped demo checkpoint and traces, a few seconds):\n"
          "  " MD_PROGRAM " run --model data/models/qwen2-tiny \\\n"
          "      --traces data/traces/agent-450.jsonl -o memdecay.json\n"
          "\n"
          "Run '" MD_PROGRAM " COMMAND --help' for a command's options.\n"
          "Options: -h, --help  this text;  -V, --version  the version.\n"
          "Manual: man memdecay-calibrate (or man -l man/memdecay-calibrate.1).\n");
}

/* OpenBLAS chose its kernels when it loaded, before main, and reads
 * OPENBLAS_CORETYPE only then: when it chose narrower kernels than this CPU
 * runs (a library older than the CPU falls back to SSE3), set the variable
 * and execute the program again. kernels/cpu/blas_core.h decides; this
 * does what it says. Nothing has called OpenBLAS yet. */
static void choose_blas_core(char **argv) {
  md_blas_env env = {.coretype = getenv(MD_BLAS_ENV_CORETYPE),
                     .setting = getenv(MD_BLAS_ENV_SETTING),
                     .from = getenv(MD_BLAS_ENV_FROM)};
  const char *current = md_blas_core_current();
  md_cpu_facts facts = md_cpu_read_facts();
  md_blas_decision d = md_blas_core_decide(&env, current, &facts);
  switch (d.action) {
    case MD_BLAS_STAY: return;
    case MD_BLAS_WARN_WEAK:
      fprintf(stderr, MD_PROGRAM ": warning: OpenBLAS has no %s kernels for this CPU: matrix products "
              "run on its %s kernels\n", d.requested, current);
      return;
    case MD_BLAS_WARN_SETTING:
      fprintf(stderr, MD_PROGRAM ": warning: " MD_BLAS_ENV_SETTING "=%s: not an OpenBLAS core this CPU "
              "runs (expected auto, keep, simulate-weak or a core such as %s): OpenBLAS keeps its %s "
              "kernels\n", d.requested, d.best ? d.best : "Prescott", current);
      return;
    case MD_BLAS_REPLACE:
      fprintf(stderr, MD_PROGRAM ": warning: " MD_BLAS_ENV_CORETYPE "=%s names OpenBLAS kernels this "
              "CPU cannot run (they would stop the program on an illegal instruction): using its "
              "%s kernels instead\n", d.requested, d.coretype);
      break;
    case MD_BLAS_REEXEC: break;
  }
  /* Copies: setenv may free what getenv returned. */
  char *old_coretype = env.coretype ? strdup(env.coretype) : NULL;
  char *old_from = env.from ? strdup(env.from) : NULL;
  const char *from = d.from == env.from ? old_from : d.from;
  if (setenv(MD_BLAS_ENV_CORETYPE, d.coretype, 1) == 0 && setenv(MD_BLAS_ENV_FROM, from, 1) == 0)
    execv("/proc/self/exe", argv);
  /* Could not execute again: go on with the kernels loaded, and leave the
   * variables as they were, so that nothing this program starts is misled. */
  perror(MD_PROGRAM ": warning: cannot switch OpenBLAS's kernels, executing again failed");
  if (old_coretype) setenv(MD_BLAS_ENV_CORETYPE, old_coretype, 1);
  else unsetenv(MD_BLAS_ENV_CORETYPE);
  if (old_from) setenv(MD_BLAS_ENV_FROM, old_from, 1);
  else unsetenv(MD_BLAS_ENV_FROM);
  free(old_coretype);
  free(old_from);
}

/* What a command printed must have reached standard output: a full disk,
 * a closed pipe or /dev/full make the run fail (exit 3), whatever the
 * command's own verdict, so that a script never takes a lost report for
 * success. */
static int finish_stdout(int code) {
  errno = 0;
  if (fflush(stdout) == 0 && !ferror(stdout)) return code;
  fprintf(stderr, MD_PROGRAM ": cannot write standard output: %s\n",
          errno ? strerror(errno) : "write error");
  return MD_EXIT_FAILURE;
}

/* SIGTERM (scancel, a job's time limit), SIGINT and SIGHUP: the outputs
 * being written are left as they were (their temporaries removed), then
 * the process dies of the signal as it would have. Collections keep their
 * finished episodes either way (--resume). */
static void on_termination(int sig) {
  md_atomic_remove_pending();
  signal(sig, SIG_DFL);
  raise(sig);
}

static void catch_termination(void) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_termination;
  sigemptyset(&action.sa_mask);
  const int signals[] = {SIGTERM, SIGINT, SIGHUP};
  for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) sigaction(signals[i], &action, NULL);
}

static int run_command(int argc, char **argv) {
  choose_blas_core(argv);
  if (argc < 2) {
    print_usage(stderr);
    return MD_EXIT_INPUT;
  }
  const char *name = argv[1];
  if (!strcmp(name, "-h") || !strcmp(name, "--help") || !strcmp(name, "help")) {
    print_usage(stdout);
    return MD_EXIT_OK;
  }
  if (!strcmp(name, "-V") || !strcmp(name, "--version")) {
    printf(MD_PROGRAM " %s\n", MD_VERSION);
    return MD_EXIT_OK;
  }
  for (int i = 0; i < n_commands; i++) {
    if (!strcmp(name, commands[i].name)) return commands[i].run(argc - 1, argv + 1);
  }
  fprintf(stderr, MD_PROGRAM ": unknown command '%s'\n", name);
  print_usage(stderr);
  return MD_EXIT_INPUT;
}

int main(int argc, char **argv) {
  catch_termination();
  return finish_stdout(run_command(argc, argv));
}
