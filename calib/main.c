/* memdecay-calibrate: measures per-region KV-cache decay rates for MemDecay.
 * This file picks OpenBLAS's kernels and bounds OpenMP's spinning (either
 * may execute the program again) and dispatches to the subcommands in
 * calib/cmd_*.c. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib/cli.h"
#include "io/files/atomic_file.h"
#include "kernels/device.h"
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
    {"probes", md_cmd_probes, "plant a fact per region into your traces, with probes for eval"},
    {"export", md_cmd_export, "turn a memdecay.json into a serving stack's retention settings"},
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

/* The commands whose OpenMP threads wait between parallel regions: the
 * model commands, and devices, which reports how they wait. */
static bool waits_in_openmp(int argc, char **argv) {
  static const char *const names[] = {"run", "collect", "eval", "devices"};
  for (size_t i = 0; argc > 1 && i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(argv[1], names[i])) return true;
  return false;
}

/* Restores a variable as it was before setenv (value NULL: unset). */
static void restore_env(const char *name, const char *value) {
  if (value) setenv(name, value, 1);
  else unsetenv(name);
}

/* What the OpenMP runtime and OpenBLAS read only when they load, chosen
 * before anything calls them (kernels/device.h decides; this does what it
 * says): OpenBLAS's kernels (warn, or set the variables) and the bound on
 * OpenMP's spinning; when either set a variable, the program executes
 * itself again, once. */
static void choose_startup_environment(int argc, char **argv) {
  md_device_blas_startup startup;
  md_device_blas_startup_decide(&startup);
  if (startup.warning[0]) fprintf(stderr, MD_PROGRAM ": warning: %s\n", startup.warning);
  bool omp_wait = waits_in_openmp(argc, argv) && md_device_omp_wait_startup();
  if (!startup.reexec && !omp_wait) return;
  /* Copies: setenv may free what getenv returned. */
  const char *coretype = getenv(MD_DEVICE_ENV_BLAS_CORETYPE), *from = getenv(MD_DEVICE_ENV_BLAS_FROM);
  char *old_coretype = coretype ? strdup(coretype) : NULL;
  char *old_from = from ? strdup(from) : NULL;
  bool ready = true;
  if (startup.reexec)
    ready = setenv(MD_DEVICE_ENV_BLAS_CORETYPE, startup.coretype, 1) == 0 &&
            setenv(MD_DEVICE_ENV_BLAS_FROM, startup.from, 1) == 0;
  if (ready && omp_wait)
    ready = setenv(MD_DEVICE_ENV_GOMP_SPINCOUNT, MD_DEVICE_OMP_SPINCOUNT, 1) == 0 &&
            setenv(MD_DEVICE_ENV_KMP_BLOCKTIME, MD_DEVICE_OMP_BLOCKTIME, 1) == 0 &&
            setenv(MD_DEVICE_ENV_OMP_WAIT_FROM, MD_PROGRAM, 1) == 0;
  if (ready) execv("/proc/self/exe", argv);
  /* Could not execute again: go on with what the libraries chose when they
   * loaded, and leave the variables as they were, so that nothing this
   * program starts is misled. */
  perror(MD_PROGRAM ": warning: cannot execute again to set OpenBLAS's kernels or OpenMP's "
         "waiting");
  restore_env(MD_DEVICE_ENV_BLAS_CORETYPE, old_coretype);
  restore_env(MD_DEVICE_ENV_BLAS_FROM, old_from);
  if (omp_wait) {
    unsetenv(MD_DEVICE_ENV_GOMP_SPINCOUNT);
    unsetenv(MD_DEVICE_ENV_KMP_BLOCKTIME);
    unsetenv(MD_DEVICE_ENV_OMP_WAIT_FROM);
  }
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
  choose_startup_environment(argc, argv);
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
