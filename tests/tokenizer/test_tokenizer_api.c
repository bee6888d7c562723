/* The tokenizer API on the shipped Qwen tokenizer: lookups, decoding, appending, spans,
 * invalid UTF-8, very long inputs, concurrent use; and the NFC fast path's rule checked over
 * every code point.
 *
 * Expected ids and pieces are those of data/tokenizer/qwen/tokenizer.json as the HF
 * `tokenizers` library reports them (tests/tokenizer/fixtures/cases.jsonl: "Hello world" is
 * [9707, 1879]; the added tokens are listed in the file with their ids). */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <utf8proc.h>

#include "collector/tokenizer/tokenizer.h"
#include "collector/tokenizer/tokenizer_internal.h"
#include "tests/test_util.h"

static md_tokenizer *load_qwen(void) {
  const char *root = getenv("MD_SOURCE_ROOT");
  char path[4096];
  snprintf(path, sizeof path, "%s/data/tokenizer/qwen/tokenizer.json", root ? root : ".");
  md_tokenizer *tok = NULL;
  md_error err = {0};
  if (md_tokenizer_load(path, &tok, &err) != MD_OK) {
    fprintf(stderr, "%s\n", err.message);
    exit(1);
  }
  return tok;
}

static void test_lookups(const md_tokenizer *tok) {
  CHECK(md_tokenizer_vocab_size(tok) == 151669);
  CHECK(md_tokenizer_added_id(tok, "<|endoftext|>") == 151643);
  CHECK(md_tokenizer_added_id(tok, "<|im_start|>") == 151644);
  CHECK(md_tokenizer_added_id(tok, "<|im_end|>") == 151645);
  CHECK(md_tokenizer_added_id(tok, "<tool_call>") == 151657);
  CHECK(md_tokenizer_added_id(tok, "<think>") == 151667);
  CHECK(md_tokenizer_added_id(tok, "</think>") == 151668);
  CHECK(md_tokenizer_added_id(tok, "<|im_start") == -1);
  CHECK(md_tokenizer_added_id(tok, "Hello") == -1);
  CHECK(md_tokenizer_token_id(tok, "Hello") == 9707);
  CHECK(md_tokenizer_token_id(tok, "Ġworld") == 1879);
  CHECK(md_tokenizer_token_id(tok, "<|im_end|>") == 151645);
  CHECK(md_tokenizer_token_id(tok, " world") == -1); /* pieces are byte-level strings */
  const char *piece = md_tokenizer_piece(tok, 1879);
  CHECK(piece && strcmp(piece, "Ġworld") == 0);
  piece = md_tokenizer_piece(tok, 151644);
  CHECK(piece && strcmp(piece, "<|im_start|>") == 0);
  size_t len = 0;
  const char *bytes = md_tokenizer_piece_bytes(tok, 1879, &len);
  CHECK(bytes && len == 6 && memcmp(bytes, " world", 6) == 0);
  bytes = md_tokenizer_piece_bytes(tok, 198, &len); /* "Ċ" */
  CHECK(bytes && len == 1 && bytes[0] == '\n');
  bytes = md_tokenizer_piece_bytes(tok, 244, &len); /* "ĸ": the lone byte 0x96 */
  CHECK(bytes && len == 1 && (unsigned char)bytes[0] == 0x96);
  CHECK(md_tokenizer_piece(tok, -1) == NULL);
  CHECK(md_tokenizer_piece(tok, 151669) == NULL);
  CHECK(md_tokenizer_piece_bytes(tok, 1 << 30, &len) == NULL);
  CHECK(md_tokenizer_is_special(tok, 151644) && md_tokenizer_is_added(tok, 151644));
  CHECK(!md_tokenizer_is_special(tok, 151657) && md_tokenizer_is_added(tok, 151657));
  CHECK(!md_tokenizer_is_added(tok, 9707) && !md_tokenizer_is_special(tok, 9707));
  CHECK(!md_tokenizer_is_added(tok, -5));
}

static void test_decode(const md_tokenizer *tok) {
  const int32_t ids[] = {151644, 8948, 198, 2610, 525, 10950, 13, 151645};
  char *text = NULL;
  size_t len = 0;
  md_error err = {0};
  CHECK(md_tokenizer_decode(tok, ids, 8, false, &text, &len, &err) == MD_OK);
  CHECK(text && strcmp(text, "<|im_start|>system\nYou are helpful.<|im_end|>") == 0 &&
        len == strlen(text));
  free(text);
  CHECK(md_tokenizer_decode(tok, ids, 8, true, &text, &len, &err) == MD_OK);
  CHECK(text && strcmp(text, "system\nYou are helpful.") == 0);
  free(text);
  CHECK(md_tokenizer_decode(tok, ids, 0, false, &text, &len, &err) == MD_OK && len == 0 &&
        text[0] == '\0');
  free(text);
  const int32_t bad[] = {9707, 999999};
  CHECK(md_tokenizer_decode(tok, bad, 2, false, &text, &len, &err) == MD_E_INVALID);
  CHECK(text == NULL && strstr(err.message, "token 1: id 999999 is not in the vocabulary"));
  /* the emoji " 🤖" is split inside its UTF-8 bytes: [11162, 97, 244] */
  const int32_t robot[] = {11162, 97, 244};
  CHECK(md_tokenizer_decode(tok, robot, 1, false, &text, &len, &err) == MD_OK && len == 3);
  free(text);
  CHECK(md_tokenizer_decode(tok, robot, 3, false, &text, &len, &err) == MD_OK);
  CHECK(text && strcmp(text, " \xf0\x9f\xa4\x96") == 0);
  free(text);
}

static void encode_ok(const md_tokenizer *tok, const char *text, size_t len, md_tokens *out) {
  md_error err = {0};
  md_status st = md_tokenizer_encode(tok, text, len, out, &err);
  CHECK_MSG(st == MD_OK, "%s", err.message);
}

static void test_append_and_spans(const md_tokenizer *tok) {
  md_tokens t = {0};
  encode_ok(tok, "Hello", 5, &t);
  encode_ok(tok, " world", 6, &t);
  encode_ok(tok, "", 0, &t);
  CHECK(t.count == 2 && t.ids[0] == 9707 && t.ids[1] == 1879);
  CHECK(t.spans[0].start == 0 && t.spans[0].end == 5 && t.spans[1].start == 0 &&
        t.spans[1].end == 6);
  md_tokens_clear(&t);
  CHECK(t.count == 0);
  /* A special token in the middle, and an emoji split across tokens that share its span. */
  const char *text = "a<|im_end|> \xf0\x9f\xa4\x96";
  encode_ok(tok, text, strlen(text), &t);
  CHECK(t.count == 5 && t.ids[1] == 151645);
  CHECK(t.spans[1].start == 1 && t.spans[1].end == 11);
  CHECK(t.spans[2].start == 11 && t.spans[2].end == 16); /* " " + the emoji's first bytes */
  CHECK(t.spans[3].start == 12 && t.spans[4].start == 12 && t.spans[4].end == 16);
  md_tokens_free(&t);
  CHECK(t.ids == NULL && t.count == 0 && t.scratch == NULL);
}

static void test_invalid_utf8(const md_tokenizer *tok) {
  static const struct {
    const char *text;
    size_t len, at;
  } cases[] = {
      {"abc\xff", 4, 3},
      {"a\xc3", 2, 1},
      {"\xc3\x28", 2, 0},
      {"ok \xed\xa0\x80", 6, 3},
      {"\xc0\xaf", 2, 0},
      {"\xe0\x80\xaf", 3, 0},
      {"x\xf4\x90\x80\x80", 5, 1},
      {"\xf8\x88\x80\x80\x80", 5, 0},
      {"\x80", 1, 0},
  };
  md_tokens t = {0};
  encode_ok(tok, "Hello", 5, &t);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    md_error err = {0};
    CHECK(md_tokenizer_encode(tok, cases[i].text, cases[i].len, &t, &err) == MD_E_FORMAT);
    char expect[64];
    snprintf(expect, sizeof expect, "invalid UTF-8 at byte %zu", cases[i].at);
    CHECK_MSG(strstr(err.message, expect) != NULL, "case %zu: %s", i, err.message);
    CHECK(t.count == 1); /* the earlier tokens are kept, nothing added */
  }
  /* NUL is a valid character (U+0000): byte 0x00 is the symbol "Ā", id 188. */
  encode_ok(tok, "\0a", 2, &t);
  CHECK(t.count == 3 && t.ids[1] == 188 && t.ids[2] == 64);
  md_tokens_free(&t);
}

/* Encodes, decodes and checks the round trip on an input that is NFC already. */
static void round_trip(const md_tokenizer *tok, const char *text, size_t len, size_t *count) {
  md_tokens t = {0};
  encode_ok(tok, text, len, &t);
  char *back = NULL;
  size_t back_len = 0;
  md_error err = {0};
  CHECK(md_tokenizer_decode(tok, t.ids, t.count, false, &back, &back_len, &err) == MD_OK);
  CHECK(back && back_len == len && memcmp(back, text, len) == 0);
  if (count) *count = t.count;
  free(back);
  md_tokens_free(&t);
}

static void test_long_inputs(const md_tokenizer *tok) {
  size_t n = 1 << 20, count = 0;
  char *text = malloc(4 * n);
  memset(text, ' ', n);
  round_trip(tok, text, n, &count); /* one white-space piece of a million bytes */
  CHECK(count > 0 && count < n / 8);
  memset(text, 'a', n / 4);
  round_trip(tok, text, n / 4, NULL); /* one letter run of 256 KiB */
  for (size_t i = 0; i < n / 4; i++) text[i] = "0123456789"[i % 10];
  round_trip(tok, text, n / 4, &count); /* \p{N}: one token per digit */
  CHECK(count == n / 4);
  /* 100k combining marks after one letter: a long run for canonical reordering */
  size_t len = 0;
  text[len++] = 'a';
  for (size_t i = 0; i < 100000; i++) {
    static const char *const marks[] = {"\xcc\x81", "\xcc\x96", "\xcc\xb4"}; /* 230, 220, 1 */
    memcpy(text + len, marks[i % 3], 2);
    len += 2;
  }
  md_tokens t = {0};
  encode_ok(tok, text, len, &t);
  CHECK(t.count > 0);
  md_tokens_free(&t);
  free(text);
}

/* md_tokenizer_min_tokens is a true lower bound, and md_tokenizer_encode_at_most gives the
 * same tokens as md_tokenizer_encode up to its limit and stops, keeping what `out` had,
 * once the limit is certain to be passed. */
static void test_count_limit(const md_tokenizer *tok) {
  /* Qwen's longest entry is 128 bytes; NFC shrinks a text at most 4 times */
  CHECK(md_tokenizer_min_tokens(tok, 0) == 0);
  CHECK(md_tokenizer_min_tokens(tok, 512) == 1 && md_tokenizer_min_tokens(tok, 513) == 2);
  size_t n = 1 << 20, count = 0;
  char *text = malloc(n);
  memset(text, ' ', n);
  round_trip(tok, text, n, &count);
  CHECK(count >= md_tokenizer_min_tokens(tok, n));
  md_tokens t = {0}, all = {0};
  bool over = true;
  md_error err = {0};
  encode_ok(tok, "Hello world", 11, &all);
  CHECK(md_tokenizer_encode_at_most(tok, "Hello world", 11, 2, &t, &over, &err) == MD_OK);
  CHECK(!over && t.count == 2 && t.ids[0] == 9707 && t.ids[1] == 1879);
  CHECK(md_tokenizer_encode_at_most(tok, "Hello world", 11, 3, &t, &over, &err) == MD_OK);
  CHECK(over && t.count == 2); /* 2 more after 2 cannot fit in 3: the list keeps what it had */
  md_tokens_clear(&t);
  /* a text too long for its fewest tokens to fit is not looked at (nor checked) */
  text[0] = (char)0xff;
  CHECK(md_tokenizer_encode_at_most(tok, text, n, 100, &t, &over, &err) == MD_OK);
  CHECK(over && t.count == 0);
  /* one letter run of a MiB: 2048 tokens at least by the whole text's length, 8192 by the
   * piece's (no NFC there): stopped before BPE */
  memset(text, 'a', n);
  CHECK(md_tokenizer_encode_at_most(tok, text, n, 5000, &t, &over, &err) == MD_OK);
  CHECK(over && t.count == 0);
  /* under the limit: the same tokens as without one */
  md_tokens_clear(&all);
  encode_ok(tok, text, n / 64, &all);
  CHECK(md_tokenizer_encode_at_most(tok, text, n / 64, all.count, &t, &over, &err) == MD_OK);
  CHECK(!over && t.count == all.count && !memcmp(t.ids, all.ids, all.count * sizeof *all.ids));
  md_tokens_free(&t);
  md_tokens_free(&all);
  free(text);
}

/* The 4 of md_tokenizer_min_tokens: NFC never makes a character, or a character with the
 * marks it composes with, more than 3 times shorter in UTF-8. Checked on every code point
 * and on the canonical decomposition of every one that NFC keeps (a primary composite). */
static void test_nfc_shrink(void) {
  size_t worst_num = 1, worst_den = 1;
  for (int32_t cp = 0x80; cp < 0x110000; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    uint8_t utf8[8];
    utf8proc_ssize_t n = utf8proc_encode_char(cp, utf8);
    utf8[n] = 0;
    uint8_t *nfc = utf8proc_NFC(utf8), *nfd = utf8proc_NFD(utf8);
    CHECK(nfc && nfd);
    if (!nfc || !nfd) break;
    size_t out = strlen((const char *)nfc), in = (size_t)n;
    if (in * worst_den > out * worst_num) worst_num = in, worst_den = out;
    if (!strcmp((const char *)nfc, (const char *)utf8)) { /* NFC(NFD(c)) = c */
      in = strlen((const char *)nfd);
      if (in * worst_den > out * worst_num) worst_num = in, worst_den = out;
    }
    free(nfc);
    free(nfd);
  }
  CHECK_MSG(worst_num <= 3 * worst_den, "NFC shrinks %zu bytes to %zu", worst_num, worst_den);
}

typedef struct worker {
  const md_tokenizer *tok;
  const char **texts;
  size_t n_texts;
  size_t mismatches;
  const md_tokens *expected;
} worker;

static void *encode_all(void *arg) {
  worker *w = arg;
  md_tokens t = {0};
  md_error err = {0};
  for (int round = 0; round < 20; round++) {
    for (size_t i = 0; i < w->n_texts; i++) {
      md_tokens_clear(&t);
      if (md_tokenizer_encode(w->tok, w->texts[i], strlen(w->texts[i]), &t, &err) != MD_OK ||
          t.count != w->expected[i].count ||
          memcmp(t.ids, w->expected[i].ids, t.count * sizeof *t.ids) != 0)
        w->mismatches++;
    }
  }
  md_tokens_free(&t);
  return NULL;
}

/* Several threads share one tokenizer (and its word cache) and must agree with one thread. */
static void test_threads(const md_tokenizer *tok) {
  static const char *texts[] = {
      "Hello world",
      "The quick brown fox jumps over the lazy dog.",
      "你好，世界！我们今天学习分词。",
      "<|im_start|>user\nBook a flight to Lisbon<|im_end|>\n",
      "def f(x):\n    return x**2  # square\n",
      "cafe\xcc\x81 na\xc3\xafve",
      "don't DON'T I'm we'll",
      "   spaces   and\ttabs\r\n",
      "{\"flights\": [{\"from\": \"SFO\", \"price\": 123.45}]}",
      "emoji \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd!",
  };
  enum { N = sizeof texts / sizeof texts[0], THREADS = 4 };
  md_tokens expected[N] = {{0}};
  for (size_t i = 0; i < N; i++) encode_ok(tok, texts[i], strlen(texts[i]), &expected[i]);
  pthread_t threads[THREADS];
  worker workers[THREADS];
  for (int k = 0; k < THREADS; k++) {
    workers[k] = (worker){.tok = tok, .texts = texts, .n_texts = N, .expected = expected};
    CHECK(pthread_create(&threads[k], NULL, encode_all, &workers[k]) == 0);
  }
  for (int k = 0; k < THREADS; k++) {
    pthread_join(threads[k], NULL);
    CHECK_MSG(workers[k].mismatches == 0, "thread %d: %zu mismatches", k, workers[k].mismatches);
  }
  for (size_t i = 0; i < N; i++) md_tokens_free(&expected[i]);
}

/* The small test tokenizer with its split regex replaced by `pattern`. */
static md_tokenizer *load_with_pattern(const char *pattern) {
  const char *root = getenv("MD_SOURCE_ROOT");
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/tokenizer/fixtures/small_tokenizer.json", root ? root : ".");
  json_t *json = json_load_file(path, 0, NULL);
  json_t *split = json_array_get(json_object_get(json_object_get(json, "pre_tokenizer"), "pretokenizers"), 0);
  json_object_set_new(split, "pattern", json_pack("{ss}", "Regex", pattern));
  char tmp[] = "/tmp/md_tokenizer_api.XXXXXX";
  int fd = mkstemp(tmp);
  CHECK(fd >= 0 && json_dumpfd(json, fd, 0) == 0);
  close(fd);
  json_decref(json);
  md_tokenizer *tok = NULL;
  md_error err = {0};
  CHECK_MSG(md_tokenizer_load(tmp, &tok, &err) == MD_OK, "%s", err.message);
  unlink(tmp);
  return tok;
}

/* PCRE2's limits: a pattern that needs a deep JIT stack gets a bigger one; one that
 * backtracks exponentially fails with a message instead of hanging. */
static void test_regex_limits(void) {
  size_t n = 100000, count = 0;
  char *text = malloc(n);
  memset(text, 'a', n);
  md_tokenizer *deep = load_with_pattern("(a|bc)+x|a+");
  if (deep) round_trip(deep, text, n, &count);
  md_tokenizer_free(deep);
  md_tokenizer *slow = load_with_pattern("(a+)+b|a");
  md_tokens t = {0};
  md_error err = {0};
  CHECK(slow && md_tokenizer_encode(slow, text, 40, &t, &err) == MD_E_UNSUPPORTED);
  CHECK_MSG(strstr(err.message, "the split regex failed at normalized byte 0") != NULL, "%s", err.message);
  CHECK(t.count == 0);
  md_tokens_free(&t);
  md_tokenizer_free(slow);
  free(text);
}

/* The NFC fast path takes a string as already normalized when every character is "inert";
 * check that rule against utf8proc's NFC for every code point. */
static void test_nfc_fast_path(void) {
  size_t wrong = 0, inert = 0;
  for (int32_t cp = 0x80; cp < 0x110000; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    uint8_t utf8[8];
    utf8proc_ssize_t n = utf8proc_encode_char(cp, utf8);
    if (!md_tok_nfc_is_stable((const char *)utf8, (size_t)n)) continue;
    inert++;
    utf8[n] = 0;
    uint8_t *nfc = utf8proc_NFC(utf8);
    if (!nfc || strcmp((const char *)nfc, (const char *)utf8) != 0) {
      if (wrong++ < 5) fprintf(stderr, "U+%04X: fast path, but NFC changes it\n", (unsigned)cp);
    }
    free(nfc);
  }
  CHECK(wrong == 0);
  CHECK(inert > 1000000);
}

int main(void) {
  md_tokenizer *tok = load_qwen();
  test_lookups(tok);
  test_decode(tok);
  test_append_and_spans(tok);
  test_invalid_utf8(tok);
  test_long_inputs(tok);
  test_threads(tok);
  test_count_limit(tok);
  md_tokenizer_free(tok);
  test_nfc_shrink();
  test_regex_limits();
  test_nfc_fast_path();
  return md_test_finish("tokenizer_api");
}
