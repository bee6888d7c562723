/* The tokenizer against the HF `tokenizers` reference: every id, every token's byte span and
 * the decoded text of every string in the committed fixtures (tests/tokenizer/make_corpus.py
 * wrote them from Tokenizer.encode(text, add_special_tokens=False)).
 *
 *   test_tokenizer_reference TOKENIZER_JSON FIXTURE_JSONL
 *
 * Paths are relative to $MD_SOURCE_ROOT. A fixture line is {"text", "ids"} with optional
 * "offsets" (flattened byte spans) and "decoded". Each mismatch reports the string's line,
 * the first differing token and the pieces on both sides. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/tokenizer/tokenizer.h"
#include "tests/test_util.h"

enum { MAX_REPORTS = 8 };

typedef struct run {
  const md_tokenizer *tok;
  const char *fixture;
  const char *text; /* the string being checked */
  size_t reports;
  size_t strings, tokens;
  size_t round_trips; /* strings that decode back to exactly their own bytes */
} run;

static void show_piece(const md_tokenizer *tok, int32_t id, char *out, size_t size) {
  const char *piece = id >= 0 ? md_tokenizer_piece(tok, id) : NULL;
  snprintf(out, size, "%d \"%s\"", id, piece ? piece : "?");
}

/* "FILE:LINE: string N "text...":" then the problem. */
static void where(const run *r, size_t line) {
  const char *text = r->text ? r->text : "";
  fprintf(stderr, "%s:%zu: string %zu \"%.60s%s\": ", r->fixture, line, line - 1, text,
          strlen(text) > 60 ? "..." : "");
}

static void report(run *r, size_t line, const char *what, size_t at, int32_t want, int32_t got) {
  if (r->reports++ >= MAX_REPORTS) return;
  char w[160], g[160];
  show_piece(r->tok, want, w, sizeof w);
  show_piece(r->tok, got, g, sizeof g);
  where(r, line);
  fprintf(stderr, "%s at token %zu: expected %s, got %s\n", what, at, w, g);
}

/* Compares the ids; on a mismatch reports the first differing position. */
static bool check_ids(run *r, size_t line, json_t *want, const md_tokens *got) {
  size_t n = json_array_size(want);
  for (size_t k = 0; k < n || k < got->count; k++) {
    int32_t w = k < n ? (int32_t)json_integer_value(json_array_get(want, k)) : -1;
    int32_t g = k < got->count ? got->ids[k] : -1;
    if (w != g) {
      report(r, line, n == got->count ? "wrong id" : "wrong token count", k, w, g);
      return false;
    }
  }
  return true;
}

static bool check_spans(run *r, size_t line, json_t *offsets, const md_tokens *got) {
  if (!offsets) return true;
  for (size_t k = 0; k < got->count; k++) {
    size_t start = (size_t)json_integer_value(json_array_get(offsets, 2 * k));
    size_t end = (size_t)json_integer_value(json_array_get(offsets, 2 * k + 1));
    if (got->spans[k].start != start || got->spans[k].end != end) {
      if (r->reports++ < MAX_REPORTS) where(r, line);
      if (r->reports <= MAX_REPORTS)
        fprintf(stderr, "span of token %zu (id %d): expected [%zu, %zu), got [%zu, %zu)\n", k,
                got->ids[k], start, end, got->spans[k].start, got->spans[k].end);
      return false;
    }
  }
  return true;
}

/* decode(encode(text)) must be the reference's decoding, which is the text itself unless NFC
 * changed it or an added token's lstrip/rstrip ate white space. */
static bool check_decode(run *r, size_t line, json_t *decoded, const md_tokens *got) {
  if (!decoded) return true;
  char *text = NULL;
  size_t len = 0;
  md_error err = {0};
  bool ok = md_tokenizer_decode(r->tok, got->ids, got->count, false, &text, &len, &err) == MD_OK &&
            len == json_string_length(decoded) &&
            memcmp(text, json_string_value(decoded), len) == 0;
  if (ok && len == strlen(r->text) && memcmp(text, r->text, len) == 0) r->round_trips++;
  if (!ok && r->reports++ < MAX_REPORTS) where(r, line);
  if (!ok && r->reports <= MAX_REPORTS)
    fprintf(stderr, "decode gives \"%.200s\" (%zu bytes), expected \"%.200s\" %s\n",
            text ? text : "", len, json_string_value(decoded), err.message);
  free(text);
  return ok;
}

static void check_line(run *r, size_t line, const char *buf, size_t len) {
  json_error_t jerr;
  json_t *row = json_loadb(buf, len, JSON_ALLOW_NUL, &jerr);
  CHECK_MSG(row != NULL, "%s:%zu: fixture line is not JSON: %s", r->fixture, line, jerr.text);
  if (!row) return;
  json_t *text = json_object_get(row, "text"), *ids = json_object_get(row, "ids");
  CHECK_MSG(json_is_string(text) && json_is_array(ids), "%s:%zu: no text/ids", r->fixture, line);
  md_tokens got = {0};
  md_error err = {0};
  r->text = json_string_value(text);
  md_status st =
      md_tokenizer_encode(r->tok, json_string_value(text), json_string_length(text), &got, &err);
  CHECK_MSG(st == MD_OK, "%s:%zu: encode failed: %s", r->fixture, line, err.message);
  if (st == MD_OK) {
    bool ids_ok = check_ids(r, line, ids, &got);
    CHECK(ids_ok);
    if (ids_ok) CHECK(check_spans(r, line, json_object_get(row, "offsets"), &got));
    CHECK(check_decode(r, line, json_object_get(row, "decoded"), &got));
  }
  r->strings++;
  r->tokens += got.count;
  md_tokens_free(&got);
  json_decref(row);
}

static char *source_path(const char *relative) {
  if (relative[0] == '/') return strdup(relative);
  const char *root = getenv("MD_SOURCE_ROOT");
  if (!root) root = ".";
  size_t n = strlen(root) + strlen(relative) + 2;
  char *path = malloc(n);
  if (path) snprintf(path, n, "%s/%s", root, relative);
  return path;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s TOKENIZER_JSON|MODEL.gguf FIXTURE_JSONL (relative to "
            "MD_SOURCE_ROOT unless absolute)\n",
            argv[0]);
    return 2;
  }
  char *tok_path = source_path(argv[1]), *fixture = source_path(argv[2]);
  md_tokenizer *tok = NULL;
  md_error err = {0};
  /* A GGUF file: the tokenizer of its metadata (md_tokenizer_load_gguf). */
  size_t path_len = strlen(tok_path);
  bool gguf = path_len > 5 && !strcmp(tok_path + path_len - 5, ".gguf");
  md_gguf_file *file = NULL;
  md_status st = gguf ? md_gguf_open(tok_path, &file, &err) : MD_OK;
  if (st == MD_OK)
    st = gguf ? md_tokenizer_load_gguf(file, &tok, &err) : md_tokenizer_load(tok_path, &tok, &err);
  CHECK_MSG(st == MD_OK, "%s", err.message);
  FILE *f = fopen(fixture, "r");
  CHECK_MSG(f != NULL, "cannot open %s", fixture);
  if (st == MD_OK && f) {
    run r = {.tok = tok, .fixture = argv[2]};
    char *line = NULL;
    size_t cap = 0, number = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) check_line(&r, ++number, line, (size_t)len);
    free(line);
    CHECK_MSG(r.strings > 0, "%s holds no strings", argv[2]);
    printf("%s: %zu strings, %zu tokens compared; %zu strings decode to exactly their bytes\n",
           argv[2], r.strings, r.tokens, r.round_trips);
    if (r.reports > MAX_REPORTS)
      fprintf(stderr, "(%zu more mismatches not shown)\n", r.reports - MAX_REPORTS);
  }
  if (f) fclose(f);
  md_tokenizer_free(tok);
  md_gguf_close(file);
  free(tok_path);
  free(fixture);
  return md_test_finish("tokenizer_reference");
}
