#include "io/files/csv.h"

#include <stdlib.h>
#include <string.h>

/* ---- writing --------------------------------------------------------------- */

bool md_csv_needs_quotes(const char *text, size_t length) {
  if (length == 0) return false;
  if (strchr(" \t", text[0]) || strchr(" \t", text[length - 1])) return true;
  for (size_t i = 0; i < length; i++)
    if (text[i] == ',' || text[i] == '"' || text[i] == '\r' || text[i] == '\n') return true;
  return false;
}

int md_csv_write_field(FILE *fp, const char *text, size_t length) {
  if (!md_csv_needs_quotes(text, length)) return fwrite(text, 1, length, fp) == length ? 0 : -1;
  if (fputc('"', fp) == EOF) return -1;
  for (size_t i = 0; i < length; i++) {
    if (text[i] == '"' && fputc('"', fp) == EOF) return -1;
    if (fputc(text[i], fp) == EOF) return -1;
  }
  return fputc('"', fp) == EOF ? -1 : 0;
}

/* ---- reading --------------------------------------------------------------- */

/* The header rule of every reader: a column name may appear once. Returns
 * true and sets *first and *repeat (0-based) for the first name that
 * appears again; false when all names differ. */
static bool header_repeat(const char *const *names, size_t n, size_t *first, size_t *repeat) {
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < i; j++) {
      if (!strcmp(names[i], names[j])) {
        *first = j;
        *repeat = i;
        return true;
      }
    }
  }
  return false;
}

const char *md_csv_shown(char out[MD_CSV_SHOWN_SIZE], const char *text, size_t length) {
  size_t keep = length > MD_CSV_FIELD_SHOWN ? MD_CSV_FIELD_SHOWN : length;
  for (size_t i = 0; i < keep; i++) {
    unsigned char c = (unsigned char)text[i];
    out[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
  }
  strcpy(out + keep, keep < length ? "..." : "");
  return out;
}

md_status md_csv_fail_at(md_csv_reader *r, md_status status, size_t column, const char *what,
                         const char *text, size_t length) {
  char field[MD_CSV_SHOWN_SIZE];
  if (text) {
    md_fail(r->err, status, "%s:%zu:%zu: %s: \"%s\"", r->path, r->line, column, what,
            md_csv_shown(field, text, length));
  } else {
    md_fail(r->err, status, "%s:%zu:%zu: %s", r->path, r->line, column, what);
  }
  md_error_at(r->err, r->path, r->line, NULL);
  return r->status = status;
}

/* Keeps the first error of the reader or of a handler. */
static void keep(md_csv_reader *r, md_status status) {
  if (r->status == MD_OK) r->status = status;
}

/* Column names are later matched as C strings: "region\0x" must not pass
 * for "region", so a name holding a NUL byte is refused here. */
static md_status header_field(md_csv_reader *r, const char *text, size_t length) {
  if (memchr(text, '\0', length))
    return md_csv_fail_at(r, MD_E_FORMAT, r->n_columns + 1, "a NUL byte in a column name", text,
                          length);
  if (r->n_columns == r->names_cap) {
    size_t cap = r->names_cap ? 2 * r->names_cap : 16;
    char **names = realloc(r->names, cap * sizeof *names);
    if (!names) return md_fail(r->err, MD_E_NOMEM, "%s: out of memory reading the header", r->path);
    r->names = names;
    r->names_cap = cap;
  }
  char *name = malloc(length + 1);
  if (!name) return md_fail(r->err, MD_E_NOMEM, "%s: out of memory reading the header", r->path);
  memcpy(name, text, length);
  name[length] = '\0';
  r->names[r->n_columns++] = name;
  return MD_OK;
}

static void on_field(void *text, size_t length, void *data) {
  md_csv_reader *r = data;
  if (r->status != MD_OK) return;
  const char *field = text ? text : "";
  size_t index = r->field++;
  if (r->in_header) {
    keep(r, header_field(r, field, length));
  } else {
    keep(r, r->handlers->field(r->user, r, index, field, length));
  }
}

static md_status finish_header(md_csv_reader *r) {
  r->in_header = false;
  size_t first, repeat;
  if (header_repeat((const char *const *)r->names, r->n_columns, &first, &repeat)) {
    char what[80];
    snprintf(what, sizeof what, "duplicate column name (first in column %zu)", first + 1);
    return md_csv_fail_at(r, MD_E_FORMAT, repeat + 1, what, r->names[repeat],
                          strlen(r->names[repeat]));
  }
  return r->handlers->header(r->user, r);
}

static void on_row(int terminator, void *data) {
  (void)terminator;
  md_csv_reader *r = data;
  size_t fields = r->field;
  r->field = 0;
  if (r->status != MD_OK) return;
  r->last_row_line = r->line;
  keep(r, r->in_header ? finish_header(r) : r->handlers->row(r->user, r, fields));
}

md_status md_csv_reader_init(md_csv_reader *r, const char *path, const md_csv_handlers *handlers,
                             void *user, md_error *err) {
  *r = (md_csv_reader){.path = path, .err = err, .line = 1, .in_header = true,
                       .handlers = handlers, .user = user};
  if (csv_init(&r->parser, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0)
    return r->status = md_fail(err, MD_E_NOMEM, "%s: cannot set up the CSV parser", path);
  r->parser_ready = true;
  return MD_OK;
}

static const char byte_order_mark[3] = {'\xEF', '\xBB', '\xBF'};

/* One line at a time, so that every callback knows its line; libcsv keeps
 * its own state across the pieces. */
static md_status parse_lines(md_csv_reader *r, const char *data, size_t size) {
  const char *end = data + size;
  while (data < end && r->status == MD_OK) {
    const char *newline = memchr(data, '\n', (size_t)(end - data));
    size_t length = newline ? (size_t)(newline - data) + 1 : (size_t)(end - data);
    if (csv_parse(&r->parser, data, length, on_field, on_row, r) != length && r->status == MD_OK)
      md_csv_fail_at(r, MD_E_FORMAT, r->field + 1,
                     "malformed quoting (a quote inside an unquoted field, or text after a "
                     "closing quote)", NULL, 0);
    if (newline) r->line++;
    data += length;
  }
  return r->status;
}

md_status md_csv_reader_feed(md_csv_reader *r, const char *data, size_t size) {
  if (r->status != MD_OK) return r->status;
  /* The first bytes are held back while they match the byte-order mark, so
   * that it is skipped however the input is cut. */
  while (!r->past_start && size > 0) {
    if (*data != byte_order_mark[r->mark_bytes]) {
      r->past_start = true;
      if (parse_lines(r, byte_order_mark, r->mark_bytes) != MD_OK) return r->status;
      break;
    }
    data++;
    size--;
    if (++r->mark_bytes == sizeof byte_order_mark) r->past_start = true;
  }
  return parse_lines(r, data, size);
}

md_status md_csv_reader_finish(md_csv_reader *r) {
  if (r->status != MD_OK) return r->status;
  if (!r->past_start && parse_lines(r, byte_order_mark, r->mark_bytes) != MD_OK) return r->status;
  if (csv_fini(&r->parser, on_field, on_row, r) != 0 && r->status == MD_OK) {
    /* The record that never ended began on the line after the last one that did. */
    r->status = md_fail(r->err, MD_E_FORMAT,
                        "%s:%zu: unterminated quoted field (the file ends inside quotes)", r->path,
                        r->last_row_line + 1);
    md_error_at(r->err, r->path, r->last_row_line + 1, NULL);
  }
  return r->status;
}

void md_csv_reader_free(md_csv_reader *r) {
  if (r->parser_ready) csv_free(&r->parser);
  for (size_t i = 0; i < r->n_columns; i++) free(r->names[i]);
  free(r->names);
  r->names = NULL;
  r->n_columns = 0;
  r->parser_ready = false;
}
