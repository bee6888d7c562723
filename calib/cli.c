#include "calib/cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The one place where an error's kind becomes an exit code
 * (memdecay-calibrate(1), EXIT STATUS). */
int md_cli_exit_code(md_error_kind kind) {
  switch (kind) {
    case MD_KIND_NONE: return MD_EXIT_OK;
    case MD_KIND_USAGE:
    case MD_KIND_INPUT: return MD_EXIT_INPUT;
    case MD_KIND_IO:
    case MD_KIND_RESOURCE:
    case MD_KIND_COMPUTE:
    case MD_KIND_DEVICE: return MD_EXIT_FAILURE;
  }
  return MD_EXIT_FAILURE;
}

int md_cli_report(const md_error *err) {
  fprintf(stderr, MD_PROGRAM ": %s\n", err->message[0] ? err->message : md_status_name(err->status));
  /* Called for a failure: one whose error was never recorded (kind none)
   * still must not exit 0. */
  return err->kind == MD_KIND_NONE ? MD_EXIT_FAILURE : md_cli_exit_code(err->kind);
}

int md_cli_usage_error(const char *command, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, MD_PROGRAM " %s: ", command);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\nTry '" MD_PROGRAM " %s --help'.\n", command);
  va_end(ap);
  return md_cli_exit_code(MD_KIND_USAGE);
}

bool md_cli_parse_double(const char *text, double min, double max, double *out) {
  if (!text || !*text) return false;
  char *end = NULL;
  errno = 0;
  double value = strtod(text, &end);
  if (errno != 0 || *end != '\0' || !isfinite(value) || value < min || value > max) return false;
  *out = value;
  return true;
}

bool md_cli_parse_long(const char *text, long min, long max, long *out) {
  if (!text || !*text) return false;
  char *end = NULL;
  errno = 0;
  long value = strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < min || value > max) return false;
  *out = value;
  return true;
}

bool md_cli_stderr_is_tty(void) { return isatty(STDERR_FILENO) == 1; }
