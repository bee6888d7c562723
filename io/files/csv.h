/* CSV plumbing shared by the writers and readers of io/formats (the events
 * CSV, memdecay-events(5); the run manifest, memdecay-run(5)): one quoting
 * rule, one header rule and one reading driver over libcsv.
 *
 * Writing: libcsv trims spaces and tabs around an unquoted field, so a field
 * is quoted when it starts or ends with one, as well as when RFC 4180 needs
 * it (a comma, a quote, CR or LF; quotes doubled).
 *
 * Reading: md_csv_reader drives libcsv in strict mode over bytes fed in any
 * pieces. It skips a UTF-8 byte-order mark, feeds libcsv a line at a time so
 * that every callback knows the line it is on, collects the header row (the
 * first record) into `names`, and refuses, with "FILE:LINE[:COLUMN]: what",
 * malformed quoting, a file ending inside quotes, a NUL byte in a column name
 * and a column name that repeats. What the columns mean, and every check of a
 * data field, is the format reader's, through three handlers. Every error it
 * records carries the file and line as fields of md_error too. */
#ifndef MD_IO_FILES_CSV_H
#define MD_IO_FILES_CSV_H

#include <csv.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/error.h"

/* ---- writing --------------------------------------------------------------- */

/* True when text[0..length) must be quoted to read back as itself. */
bool md_csv_needs_quotes(const char *text, size_t length);

/* Writes text[0..length) as one field, quoted when md_csv_needs_quotes says
 * so. Returns 0, or -1 when a write failed (errno says why). */
int md_csv_write_field(FILE *fp, const char *text, size_t length);

/* ---- reading --------------------------------------------------------------- */

/* A field as a message shows it: at most MD_CSV_FIELD_SHOWN bytes, control
 * bytes as '?', "..." when cut. Returns out. */
enum { MD_CSV_FIELD_SHOWN = 40, MD_CSV_SHOWN_SIZE = MD_CSV_FIELD_SHOWN + 4 };
const char *md_csv_shown(char out[MD_CSV_SHOWN_SIZE], const char *text, size_t length);

typedef struct md_csv_reader md_csv_reader;

/* What a format reader does with the records. Each returns MD_OK to go on;
 * any other status stops the reading (record the error first, with
 * md_csv_fail_at or md_fail). `text` is libcsv's buffer, valid during the
 * call only, and may hold NUL bytes: a handler that compares it as a C
 * string checks for them first. */
typedef struct md_csv_handlers {
  /* The header row has been read: reader->names[0..n_columns), all
   * different, none holding a NUL byte. */
  md_status (*header)(void *user, md_csv_reader *reader);
  /* Field `index` (0-based) of the current data record; it may be beyond the
   * header's columns (the row handler learns the count). */
  md_status (*field)(void *user, md_csv_reader *reader, size_t index, const char *text,
                     size_t length);
  /* A data record ended after `fields` fields. */
  md_status (*row)(void *user, md_csv_reader *reader, size_t fields);
} md_csv_handlers;

/* Read-only for the handlers, except through md_csv_fail_at. */
struct md_csv_reader {
  const char *path;          /* the file as messages name it */
  md_error *err;             /* where errors go; a reader may point it elsewhere between feeds */
  md_status status;          /* the first error; once set, nothing more is parsed */
  size_t line;               /* the line being parsed, from 1 */
  size_t last_row_line;      /* the line on which the last record ended; 0 before any */
  size_t field;              /* index of the next field of the current record */
  bool in_header;            /* the header row has not ended yet */
  char **names;              /* the header's column names, [n_columns] */
  size_t n_columns;
  /* private */
  size_t names_cap;
  bool past_start;           /* the byte-order mark, if any, is behind */
  size_t mark_bytes;         /* bytes of it seen so far */
  bool parser_ready;
  struct csv_parser parser;
  const md_csv_handlers *handlers;
  void *user;
};

/* Sets up a reader of `path` (only named in messages; the caller reads the
 * bytes). MD_E_NOMEM when libcsv cannot be set up. md_csv_reader_free is
 * safe after a failed init. */
md_status md_csv_reader_init(md_csv_reader *reader, const char *path,
                             const md_csv_handlers *handlers, void *user, md_error *err);

/* Parses data[0..size), which may end anywhere (inside a field, a line or a
 * quoted field). Returns the reader's status: MD_OK, or the first error. */
md_status md_csv_reader_feed(md_csv_reader *reader, const char *data, size_t size);

/* Ends the input: the last record (if it has no line feed) is handed over,
 * and a file that ends inside quotes is an error. Returns the status. */
md_status md_csv_reader_finish(md_csv_reader *reader);

void md_csv_reader_free(md_csv_reader *reader);

/* Records "FILE:LINE:COLUMN: what", with `: "FIELD"` added when text is not
 * NULL (shown as md_csv_shown does), and the file and line as fields; sets
 * and returns the reader's status. */
md_status md_csv_fail_at(md_csv_reader *reader, md_status status, size_t column,
                         const char *what, const char *text, size_t length);

#endif
