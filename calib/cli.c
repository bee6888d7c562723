#include "calib/cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int md_cli_report(const md_error *err) {
  fprintf(stderr, MD_PROGRAM ": %s\n", err->message[0] ? err->message : md_status_name(err->status));
  switch (err->status) {
    case MD_OK: return MD_EXIT_OK;
    case MD_E_FORMAT:
    case MD_E_INVALID:
    case MD_E_UNSUPPORTED: return MD_EXIT_INPUT;
    case MD_E_IO:
    case MD_E_NOMEM:
    case MD_E_NUMERIC:
    case MD_E_DEVICE: return MD_EXIT_FAILURE;
  }
  return MD_EXIT_FAILURE;
}

int md_cli_report_input(const md_error *err) {
  int exit_code = md_cli_report(err);
  return err->status == MD_E_NOMEM ? exit_code : MD_EXIT_INPUT;
}

int md_cli_report_run(const md_error *err, bool started) {
  return started ? md_cli_report(err) : md_cli_report_input(err);
}

int md_cli_usage_error(const char *command, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, MD_PROGRAM " %s: ", command);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\nTry '" MD_PROGRAM " %s --help'.\n", command);
  va_end(ap);
  return MD_EXIT_INPUT;
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
