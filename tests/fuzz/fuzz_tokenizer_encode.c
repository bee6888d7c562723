/* Encoding fuzzed text with the real Qwen tokenizer (data/tokenizer/qwen/
 * tokenizer.json, loaded once): md_tokenizer_encode, md_tokenizer_encode_at_most
 * and md_tokenizer_decode.
 *
 * Invariants: valid UTF-8 encodes (or hits a regex limit, MD_E_UNSUPPORTED);
 * invalid UTF-8 is MD_E_FORMAT with `out` unchanged; ids are below the
 * vocabulary size, spans lie inside the text in non-decreasing order of
 * start, there are at least md_tokenizer_min_tokens of them; ASCII text
 * decodes back to itself; encode_at_most with the count gives the same ids
 * and with one less gives up, leaving `out` as it was. */
#include <utf8proc.h>

#include "collector/tokenizer/tokenizer.h"
#include "fuzz_util.h"

#ifndef MD_FUZZ_SOURCE_ROOT
#define MD_FUZZ_SOURCE_ROOT "."
#endif

static md_tokenizer *tokenizer;

static void free_tokenizer(void) { md_tokenizer_free(tokenizer); }

static const md_tokenizer *qwen(void) {
  if (tokenizer) return tokenizer;
  const char *root = getenv("MD_SOURCE_ROOT");
  if (!root || !*root) root = MD_FUZZ_SOURCE_ROOT;
  char path[4096];
  snprintf(path, sizeof path, "%s/data/tokenizer/qwen/tokenizer.json", root);
  md_error err = {0};
  if (md_tokenizer_load(path, &tokenizer, &err) != MD_OK) {
    fprintf(stderr, "fuzz: %s\n", err.message);
    abort();
  }
  atexit(free_tokenizer);
  return tokenizer;
}

static bool valid_utf8(const uint8_t *data, size_t size) {
  size_t at = 0;
  while (at < size) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t n = utf8proc_iterate(data + at, (utf8proc_ssize_t)(size - at), &cp);
    if (n <= 0) return false;
    at += (size_t)n;
  }
  return true;
}

static bool ascii(const uint8_t *data, size_t size) {
  for (size_t i = 0; i < size; i++)
    if (data[i] >= 0x80) return false;
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const md_tokenizer *tok = qwen();
  const char *text = (const char *)data;
  md_tokens tokens = {0};
  md_error err = {0};
  /* One token already there: encode appends and must not touch it. */
  int32_t first = md_tokenizer_added_id(tok, "<|im_start|>");
  FUZZ_CHECK(first >= 0);
  FUZZ_CHECK(md_tokenizer_encode(tok, "<|im_start|>", 12, &tokens, &err) == MD_OK);
  FUZZ_CHECK(tokens.count == 1 && tokens.ids[0] == first);

  md_status status = md_tokenizer_encode(tok, text, size, &tokens, &err);
  bool valid = valid_utf8(data, size);
  if (!valid) {
    FUZZ_CHECK_MSG(status == MD_E_FORMAT, "invalid UTF-8 gave %d", (int)status);
    fuzz_check_failure(status, &err, FUZZ_ST(MD_E_FORMAT), NULL);
    FUZZ_CHECK(tokens.count == 1 && tokens.ids[0] == first);
    md_tokens_free(&tokens);
    return 0;
  }
  if (status != MD_OK) {
    fuzz_check_failure(status, &err, FUZZ_ST(MD_E_UNSUPPORTED), NULL);
    FUZZ_CHECK(tokens.count == 1);
    md_tokens_free(&tokens);
    return 0;
  }
  size_t n = tokens.count - 1;
  const int32_t *ids = tokens.ids + 1;
  const md_token_span *spans = tokens.spans + 1;
  size_t vocab = md_tokenizer_vocab_size(tok);
  FUZZ_CHECK(n >= md_tokenizer_min_tokens(tok, size));
  FUZZ_CHECK((n == 0) == (size == 0));
  for (size_t i = 0; i < n; i++) {
    FUZZ_CHECK(ids[i] >= 0 && (size_t)ids[i] < vocab);
    FUZZ_CHECK(spans[i].start < spans[i].end && spans[i].end <= size);
    if (i > 0) FUZZ_CHECK(spans[i - 1].start <= spans[i].start);
  }
  char *decoded = NULL;
  size_t decoded_len = 0;
  FUZZ_CHECK(md_tokenizer_decode(tok, ids, n, false, &decoded, &decoded_len, &err) == MD_OK);
  if (ascii(data, size))
    FUZZ_CHECK_MSG(decoded_len == size && memcmp(decoded, data, size) == 0,
                   "ASCII text does not decode back to itself");
  free(decoded);

  md_tokens again = {0};
  bool over = true;
  FUZZ_CHECK(md_tokenizer_encode_at_most(tok, text, size, n, &again, &over, &err) == MD_OK);
  FUZZ_CHECK(!over && again.count == n);
  FUZZ_CHECK(n == 0 || memcmp(again.ids, ids, n * sizeof *ids) == 0);
  if (n > 0) {
    md_tokens_clear(&again);
    FUZZ_CHECK(md_tokenizer_encode_at_most(tok, text, size, n - 1, &again, &over, &err) == MD_OK);
    FUZZ_CHECK(over && again.count == 0);
  }
  md_tokens_free(&again);
  md_tokens_free(&tokens);
  return 0;
}
