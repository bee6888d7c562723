/* CSV plumbing shared by the writers and readers of io/formats (the events
 * CSV, memdecay-events(5); the run manifest, memdecay-run(5)): one quoting
 * rule and one header rule. The readers parse with libcsv, which trims
 * spaces and tabs around an unquoted field; so a field is quoted when it
 * starts or ends with one, as well as when RFC 4180 needs it (a comma, a
 * quote, CR or LF; quotes doubled). */
#ifndef MD_IO_BASE_CSV_H
#define MD_IO_BASE_CSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* True when text[0..length) must be quoted to read back as itself. */
bool md_csv_needs_quotes(const char *text, size_t length);

/* Writes text[0..length) as one field, quoted when md_csv_needs_quotes says
 * so. Returns 0, or -1 when a write failed (errno says why). */
int md_csv_write_field(FILE *fp, const char *text, size_t length);

/* The header rule of every reader: a column name may appear once. Returns
 * true and sets *first and *repeat (0-based) for the first name that
 * appears again; false when all names differ. */
bool md_csv_header_repeat(const char *const *names, size_t n, size_t *first, size_t *repeat);

#endif
