/* A growable list of warning lines. Library code collects the things a user
 * should know about but that do not stop a run (a header-only input file, a
 * region whose half-life cannot be estimated); calib/ prints them and the
 * config writer copies them into memdecay.json's "warnings". */
#ifndef MD_BASE_WARNINGS_H
#define MD_BASE_WARNINGS_H

#include <stddef.h>

#include "base/error.h"

typedef struct md_warnings {
  size_t n;
  size_t cap;
  char **lines; /* [n], each owned, no trailing newline */
} md_warnings;

/* Appends one printf-formatted line. Fails only when out of memory. */
md_status md_warnings_add(md_warnings *warnings, md_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

void md_warnings_free(md_warnings *warnings);

#endif
