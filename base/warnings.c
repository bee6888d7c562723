#include "base/warnings.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

md_status md_warnings_add(md_warnings *warnings, md_error *err, const char *fmt, ...) {
  if (warnings->n == warnings->cap) {
    size_t cap = warnings->cap ? 2 * warnings->cap : 8;
    char **lines = realloc(warnings->lines, cap * sizeof *lines);
    if (!lines) return md_fail(err, MD_E_NOMEM, "out of memory recording a warning");
    warnings->lines = lines;
    warnings->cap = cap;
  }
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *line = len >= 0 ? malloc((size_t)len + 1) : NULL;
  if (!line) return md_fail(err, MD_E_NOMEM, "out of memory recording a warning");
  va_start(ap, fmt);
  vsnprintf(line, (size_t)len + 1, fmt, ap);
  va_end(ap);
  warnings->lines[warnings->n++] = line;
  return MD_OK;
}

void md_warnings_free(md_warnings *warnings) {
  for (size_t i = 0; i < warnings->n; i++) free(warnings->lines[i]);
  free(warnings->lines);
  memset(warnings, 0, sizeof *warnings);
}
