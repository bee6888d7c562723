/* The CSV plumbing of io/files/csv.h: the reading driver gives the same
 * records, fields and line numbers however the bytes are cut; it skips a
 * byte-order mark at the start only; its errors (malformed quoting, a file
 * ending inside quotes, a NUL byte or a repeat in the header, a handler's
 * error) carry "FILE:LINE[:COLUMN]" in the message and as fields, and stop
 * the reading; what md_csv_write_field writes reads back as itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/files/csv.h"
#include "tests/test_util.h"

/* Everything the handlers saw, as text: "H a|b|c" for the header,
 * "F<line>:<index>=<text>" per field, "R<line>:<fields>" per row. */
typedef struct seen {
  char text[4096];
  size_t used;
  size_t fail_at_row;   /* when not 0: the row handler fails on this data row */
  size_t rows;
} seen;

static void add(seen *s, const char *fmt, const char *a, size_t a_len, size_t x, size_t y) {
  char piece[512];
  int n = snprintf(piece, sizeof piece, fmt, x, y, (int)a_len, a);
  if (n > 0 && s->used + (size_t)n < sizeof s->text) {
    memcpy(s->text + s->used, piece, (size_t)n);
    s->used += (size_t)n;
    s->text[s->used] = '\0';
  }
}

static md_status on_header(void *user, md_csv_reader *r) {
  seen *s = user;
  add(s, "H%zu:%zu ", "", 0, r->line, r->n_columns);
  for (size_t i = 0; i < r->n_columns; i++) add(s, "%.0zu%.0zu%.*s|", r->names[i], strlen(r->names[i]), 0, 0);
  add(s, "\n", "", 0, 0, 0);
  return MD_OK;
}

static md_status on_field(void *user, md_csv_reader *r, size_t index, const char *text,
                          size_t length) {
  add(user, "F%zu:%zu=%.*s\n", text, length, r->line, index);
  return MD_OK;
}

static md_status on_row(void *user, md_csv_reader *r, size_t fields) {
  seen *s = user;
  add(s, "R%zu:%zu\n", "", 0, r->line, fields);
  if (++s->rows == s->fail_at_row)
    return md_csv_fail_at(r, MD_E_FORMAT, 2, "the handler refuses this row", "why\x01", 4);
  return MD_OK;
}

static const md_csv_handlers handlers = {on_header, on_field, on_row};

/* Reads text[0..length) in pieces of `piece` bytes (0: all at once). */
static md_status read_text(const char *text, size_t length, size_t piece, seen *s,
                           md_error *err) {
  md_csv_reader r;
  md_status status = md_csv_reader_init(&r, "t.csv", &handlers, s, err);
  for (size_t at = 0; status == MD_OK && at < length;) {
    size_t n = piece == 0 || length - at < piece ? length - at : piece;
    status = md_csv_reader_feed(&r, text + at, n);
    at += n;
  }
  if (status == MD_OK) status = md_csv_reader_finish(&r);
  md_csv_reader_free(&r);
  return status;
}

#define TEXT(literal) literal, sizeof literal - 1

static void same_records_however_cut(void) {
  static const char doc[] =
      "\xEF\xBB\xBFregion,time,note\n"
      "user,1,plain\n"
      "tool_out,2,\"a, \"\"quoted\"\"\nnote\"\n"
      "  system ,3,\"\xEF\xBB\xBF kept\"\n"
      "plan,4,last without a line feed";
  seen whole = {0};
  md_error err;
  CHECK_MSG(read_text(TEXT(doc), 0, &whole, &err) == MD_OK, "%s", err.message);
  const char *want =
      "H1:3 region|time|note|\n"
      "F2:0=user\nF2:1=1\nF2:2=plain\nR2:3\n"
      "F3:0=tool_out\nF3:1=2\nF4:2=a, \"quoted\"\nnote\nR4:3\n"
      "F5:0=system\nF5:1=3\nF5:2=\xEF\xBB\xBF kept\nR5:3\n"
      "F6:0=plan\nF6:1=4\nF6:2=last without a line feed\nR6:3\n";
  CHECK_MSG(!strcmp(whole.text, want), "got:\n%s", whole.text);
  for (size_t piece = 1; piece <= 9; piece++) {
    seen cut = {0};
    CHECK(read_text(TEXT(doc), piece, &cut, &err) == MD_OK);
    CHECK_MSG(!strcmp(cut.text, whole.text), "in pieces of %zu bytes:\n%s", piece, cut.text);
  }
}

typedef struct refusal {
  const char *name;
  const char *text;
  size_t length;
  size_t fail_at_row;
  const char *message;
  size_t line;
} refusal;

static const refusal refusals[] = {
    {"quote inside a field", TEXT("a,b\n1,2\n3,x\"y\n"), 0,
     "t.csv:3:2: malformed quoting (a quote inside an unquoted field, or text after a closing "
     "quote)", 3},
    {"text after a quote", TEXT("a,b\n\"1\"x,2\n"), 0, "t.csv:2:1: malformed quoting", 2},
    {"ends inside quotes", TEXT("a,b\n1,2\n3,\"open\nstill open\n"), 0,
     "t.csv:3: unterminated quoted field (the file ends inside quotes)", 3},
    {"NUL in a name", TEXT("a,b\0c\n1,2\n"), 0, "t.csv:1:2: a NUL byte in a column name: \"b?c\"",
     1},
    {"repeated name", TEXT("a,b,c,b\n"), 0,
     "t.csv:1:4: duplicate column name (first in column 2): \"b\"", 1},
    {"handler refuses", TEXT("a,b\n1,2\n3,4\n5,6\n"), 2,
     "t.csv:3:2: the handler refuses this row: \"why?\"", 3},
};

static void refusals_name_file_and_line(void) {
  for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
    const refusal *t = &refusals[i];
    for (size_t piece = 0; piece <= 3; piece++) {
      seen s = {.fail_at_row = t->fail_at_row};
      md_error err;
      md_status status = read_text(t->text, t->length, piece, &s, &err);
      CHECK_MSG(status == MD_E_FORMAT && err.kind == MD_KIND_INPUT, "%s: status %d", t->name,
                (int)status);
      CHECK_MSG(!strncmp(err.message, t->message, strlen(t->message)), "%s: \"%s\"", t->name,
                err.message);
      CHECK_MSG(!strcmp(err.file, "t.csv") && err.line == t->line, "%s: fields \"%s\" %zu",
                t->name, err.file, err.line);
      if (t->fail_at_row) /* nothing after the refused row reaches a handler */
        CHECK_MSG(strstr(s.text, "F4:") == NULL, "%s: read on:\n%s", t->name, s.text);
    }
  }
}

static void byte_order_mark_only_at_the_start(void) {
  seen s = {0};
  md_error err;
  CHECK(read_text(TEXT("a\n\xEF\xBB\xBFx\n"), 0, &s, &err) == MD_OK);
  CHECK_MSG(!strcmp(s.text, "H1:1 a|\nF2:0=\xEF\xBB\xBFx\nR2:1\n"), "%s", s.text);
  for (size_t piece = 0; piece <= 2; piece++) { /* two bytes of a mark are data */
    seen partial = {0};
    CHECK(read_text(TEXT("\xEF\xBB" "a\n"), piece, &partial, &err) == MD_OK);
    CHECK_MSG(!strcmp(partial.text, "H1:1 \xEF\xBB" "a|\n"), "%s", partial.text);
  }
  seen empty = {0};
  CHECK(read_text(TEXT(""), 0, &empty, &err) == MD_OK && empty.text[0] == '\0');
}

static void written_fields_read_back(void) {
  /* (An empty field alone on a line is an empty line, which libcsv skips.) */
  static const char *const values[] = {"plain", " lead", "trail\t", "a,b", "say \"hi\"",
                                       "two\nlines", "cr\r", "\xEF\xBB\xBF", "x y"};
  enum { N = sizeof values / sizeof values[0] };
  char *buffer = NULL;
  size_t size = 0;
  FILE *fp = open_memstream(&buffer, &size);
  CHECK(fp != NULL);
  if (!fp) return;
  fputs("h\n", fp);
  for (size_t i = 0; i < N; i++) {
    CHECK(md_csv_write_field(fp, values[i], strlen(values[i])) == 0);
    fputc('\n', fp);
  }
  fclose(fp);
  seen s = {0};
  md_error err;
  CHECK_MSG(read_text(buffer, size, 0, &s, &err) == MD_OK, "%s", err.message);
  /* Each value comes back as the field of its row. */
  const char *at = s.text;
  for (size_t i = 0; i < N; i++) {
    const char *field = strstr(at, ":0=");
    CHECK(field != NULL);
    if (!field) break;
    field += 3;
    size_t n = strlen(values[i]);
    CHECK_MSG(!strncmp(field, values[i], n) && field[n] == '\n', "value %zu: %.20s", i, field);
    at = field + n;
  }
  CHECK(!md_csv_needs_quotes("plain", 5) && md_csv_needs_quotes(" x", 2) &&
        md_csv_needs_quotes("a\"b", 3) && !md_csv_needs_quotes("", 0));
  free(buffer);
}

static void shown_fields(void) {
  char out[MD_CSV_SHOWN_SIZE];
  CHECK(!strcmp(md_csv_shown(out, "a\tb\x7f", 4), "a?b?"));
  char long_field[100];
  memset(long_field, 'x', sizeof long_field);
  md_csv_shown(out, long_field, sizeof long_field);
  CHECK(strlen(out) == MD_CSV_FIELD_SHOWN + 3 && !strcmp(out + MD_CSV_FIELD_SHOWN, "..."));
}

int main(void) {
  same_records_however_cut();
  refusals_name_file_and_line();
  byte_order_mark_only_at_the_start();
  written_fields_read_back();
  shown_fields();
  return md_test_finish("io_csv");
}
