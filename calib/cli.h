/* Shared pieces of the command-line program: exit codes, error printing and
 * option-value parsing. Every subcommand lives in calib/cmd_<name>.c. */
#ifndef MD_CALIB_CLI_H
#define MD_CALIB_CLI_H

#include <stdbool.h>

#include "base/error.h"

/* Exit codes, documented in memdecay-calibrate(1). */
enum {
  MD_EXIT_OK = 0,
  MD_EXIT_DRIFT = 1,   /* check: a region drifted or is missing */
  MD_EXIT_INPUT = 2,   /* usage error or invalid/unreadable input */
  MD_EXIT_FAILURE = 3, /* the run failed: I/O, memory, numerical or device failure */
};

#define MD_PROGRAM "memdecay-calibrate"

/* The exit code of an error of `kind`: usage and input errors
 * MD_EXIT_INPUT, the others MD_EXIT_FAILURE. Every exit code of a failure
 * comes from here. */
int md_cli_exit_code(md_error_kind kind);

/* Prints "memdecay-calibrate: <message>" to stderr and returns the exit code
 * of the error's kind (md_cli_exit_code); MD_EXIT_FAILURE when no kind was
 * recorded, so a failure never exits 0. */
int md_cli_report(const md_error *err);

/* Prints "memdecay-calibrate <command>: <message>" plus a hint to run
 * --help, and returns MD_EXIT_INPUT. */
int md_cli_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Strict number parsing for option values: the whole string must be a
 * finite number within [min, max]. */
bool md_cli_parse_double(const char *text, double min, double max, double *out);
bool md_cli_parse_long(const char *text, long min, long max, long *out);

/* True when stderr is a terminal (progress bars, colour). */
bool md_cli_stderr_is_tty(void);

/* Subcommands: each takes argv with argv[0] = the subcommand's name. */
int md_cmd_extract(int argc, char **argv);
int md_cmd_run(int argc, char **argv);
int md_cmd_fit(int argc, char **argv);
int md_cmd_check(int argc, char **argv);
int md_cmd_tokenize(int argc, char **argv);
int md_cmd_collect(int argc, char **argv);
int md_cmd_devices(int argc, char **argv);
int md_cmd_eval(int argc, char **argv);
int md_cmd_probes(int argc, char **argv);
int md_cmd_export(int argc, char **argv);

#endif
