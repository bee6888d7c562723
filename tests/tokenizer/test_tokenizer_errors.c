/* Bad tokenizer files: each is refused with the right status and a message that names the
 * file and the JSON path (or line and column) at fault. The files are the small test
 * tokenizer (tests/tokenizer/fixtures/small_tokenizer.json) with one thing broken, written
 * to a temporary directory. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/tokenizer/tokenizer.h"
#include "tests/test_util.h"

static char dir[] = "/tmp/md_tokenizer_errors.XXXXXX";

static json_t *base(void) {
  const char *root = getenv("MD_SOURCE_ROOT");
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/tokenizer/fixtures/small_tokenizer.json",
           root ? root : ".");
  json_error_t jerr;
  json_t *tok = json_load_file(path, 0, &jerr);
  if (!tok) {
    fprintf(stderr, "cannot load %s: %s\n", path, jerr.text);
    exit(1);
  }
  return tok;
}

static json_t *at(json_t *root, const char *a, const char *b) {
  json_t *v = json_object_get(root, a);
  return b ? json_object_get(v, b) : v;
}

/* Writes `text` as a file in the temporary directory and loads it, expecting `status` and a
 * message that starts with the file's path and contains `expect`. */
static void expect_text(const char *name, const char *text, md_status status, const char *expect) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s.json", dir, name);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs(text, f);
  fclose(f);
  md_tokenizer *tok = NULL;
  md_error err = {0};
  md_status st = md_tokenizer_load(path, &tok, &err);
  CHECK_MSG(st == status, "%s: status %s, expected %s (%s)", name, md_status_name(st),
            md_status_name(status), err.message);
  CHECK_MSG(tok == NULL, "%s: a tokenizer was returned", name);
  CHECK_MSG(strncmp(err.message, path, strlen(path)) == 0,
            "%s: message does not start with the path: %s", name, err.message);
  CHECK_MSG(strstr(err.message, expect) != NULL, "%s: message \"%s\" lacks \"%s\"", name,
            err.message, expect);
  md_tokenizer_free(tok);
  unlink(path);
}

static void expect_json(const char *name, json_t *root, md_status status, const char *expect) {
  char *text = json_dumps(root, JSON_COMPACT);
  expect_text(name, text, status, expect);
  free(text);
  json_decref(root);
}

static void set(json_t *object, const char *key, json_t *value) {
  json_object_set_new(object, key, value);
}

static void test_files(void) {
  md_tokenizer *tok = NULL;
  md_error err = {0};
  char missing[300];
  snprintf(missing, sizeof missing, "%s/no-such-file.json", dir);
  CHECK(md_tokenizer_load(missing, &tok, &err) == MD_E_IO);
  CHECK(strstr(err.message, missing) && strstr(err.message, "cannot open"));
  expect_text("not_json", "{\n  \"model\": [1, 2,\n}\n", MD_E_FORMAT, ".json:3:1: not valid JSON");
  expect_text("top_level", "[]", MD_E_FORMAT, "(top level): not a JSON object");
  expect_text("empty", "", MD_E_FORMAT, ":1:0: not valid JSON");
}

static void test_model(void) {
  json_t *root = base();
  json_object_del(root, "model");
  expect_json("no_model", root, MD_E_FORMAT, ": model: missing or not an object");
  root = base();
  set(at(root, "model", NULL), "type", json_string("WordPiece"));
  expect_json("wordpiece", root, MD_E_UNSUPPORTED, "model.type: 'WordPiece' is not supported");
  root = base();
  set(at(root, "model", NULL), "dropout", json_real(0.1));
  expect_json("dropout", root, MD_E_UNSUPPORTED, "model.dropout");
  root = base();
  set(at(root, "model", NULL), "byte_fallback", json_true());
  expect_json("byte_fallback", root, MD_E_UNSUPPORTED, "model.byte_fallback: must be false");
  root = base();
  set(at(root, "model", "vocab"), "x", json_string("7"));
  expect_json("vocab_id_string", root, MD_E_FORMAT, "model.vocab[\"x\"]: the id is not an integer");
  root = base();
  set(at(root, "model", "vocab"), "zzzz", json_integer(7));
  expect_json("vocab_id_twice", root, MD_E_FORMAT, "id 7 is also given to");
  root = base();
  json_array_append_new(at(root, "model", "merges"), json_string("Ġ zzzunknown"));
  expect_json("merge_unknown", root, MD_E_FORMAT,
              "model.merges[1744]: the symbol \"zzzunknown\" is not in model.vocab");
  root = base();
  json_array_append_new(at(root, "model", "merges"), json_pack("[ss]", "Q", "Z"));
  expect_json("merge_result_unknown", root, MD_E_FORMAT,
              "the merged symbol \"QZ\" is not in model.vocab");
  root = base();
  json_array_set_new(at(root, "model", "merges"), 3, json_string("a b c"));
  expect_json("merge_three_parts", root, MD_E_FORMAT,
              "model.merges[3]: not two symbols separated by one space");
  root = base();
  json_array_set_new(at(root, "model", "merges"), 3, json_integer(3));
  expect_json("merge_number", root, MD_E_FORMAT, "model.merges[3]: neither");
  root = base();
  json_object_del(at(root, "model", "vocab"), "Ā"); /* byte 0x00; no merge uses it */
  expect_json("byte_symbol", root, MD_E_UNSUPPORTED, "byte-level symbol \"Ā\" of byte 0x00");
  root = base();
  set(root, "version", json_string("2.0"));
  expect_json("version", root, MD_E_UNSUPPORTED, "version: only tokenizer.json version \"1.0\"");
}

static json_t *split_of(json_t *root) {
  return json_array_get(at(root, "pre_tokenizer", "pretokenizers"), 0);
}

static void test_components(void) {
  json_t *root = base();
  set(root, "normalizer", json_pack("{ss}", "type", "Lowercase"));
  expect_json("normalizer", root, MD_E_UNSUPPORTED,
              "normalizer: type 'Lowercase' is not supported");
  root = base();
  set(root, "normalizer",
      json_pack("{ss s[{ss}{ss}]}", "type", "Sequence", "normalizers", "type", "NFC", "type",
                "NFKC"));
  expect_json("normalizer_sequence", root, MD_E_UNSUPPORTED,
              "normalizer.normalizers[1]: type 'NFKC'");
  root = base();
  set(root, "pre_tokenizer", json_pack("{ss}", "type", "Whitespace"));
  expect_json("pre_tokenizer", root, MD_E_UNSUPPORTED,
              "pre_tokenizer: type 'Whitespace' is not supported");
  root = base();
  json_object_del(root, "pre_tokenizer");
  expect_json("no_pre_tokenizer", root, MD_E_UNSUPPORTED, "pre_tokenizer: missing");
  root = base();
  set(split_of(root), "behavior", json_string("Removed"));
  expect_json("split_behavior", root, MD_E_UNSUPPORTED, "pre_tokenizer.pretokenizers[0].behavior");
  root = base();
  set(json_array_get(at(root, "pre_tokenizer", "pretokenizers"), 1), "add_prefix_space",
      json_true());
  expect_json("add_prefix_space", root, MD_E_UNSUPPORTED,
              "pretokenizers[1].add_prefix_space: must be false");
  root = base();
  set(split_of(root), "pattern", json_pack("{ss}", "Regex", "(?i:'s|'t"));
  expect_json("regex_pcre2", root, MD_E_FORMAT,
              "pretokenizers[0].pattern.Regex: PCRE2 rejects the pattern at offset 9: missing "
              "closing parenthesis");
  root = base();
  set(split_of(root), "pattern", json_pack("{ss}", "Regex", "\\s+|[a-z]+(?=\\s)|\\w+"));
  expect_json("regex_word", root, MD_E_UNSUPPORTED,
              "\\w at offset 17 of the pattern is not supported");
  root = base();
  set(split_of(root), "pattern", json_pack("{ss}", "Regex", "\\s+|[^\\S\\n]"));
  expect_json("regex_class_S", root, MD_E_UNSUPPORTED, "\\S inside a character class at offset 6");
  root = base();
  set(split_of(root), "pattern", json_pack("{ss}", "Regex", "\\s+|("));
  expect_json("regex_translated", root, MD_E_FORMAT, "as translated for PCRE2");
  root = base();
  json_object_del(root, "decoder");
  expect_json("no_decoder", root, MD_E_UNSUPPORTED, "decoder: missing; ByteLevel is required");
  root = base();
  set(root, "decoder", json_pack("{ss}", "type", "WordPiece"));
  expect_json("decoder", root, MD_E_UNSUPPORTED, "decoder: type 'WordPiece' is not supported");
}

static void test_added_tokens(void) {
  json_t *root = base();
  set(json_array_get(json_object_get(root, "added_tokens"), 2), "id", json_integer(5000));
  expect_json("added_id", root, MD_E_FORMAT,
              "added_tokens[2]: \"[L]\" has id 5000, but the tokenizers library gives it id 2002");
  root = base();
  json_t *list = json_object_get(root, "added_tokens");
  json_t *copy = json_deep_copy(json_array_get(list, 0));
  set(copy, "id", json_integer(2014));
  json_array_append_new(list, copy);
  expect_json("added_twice", root, MD_E_FORMAT, "\"<|im_start|>\" is listed twice");
  root = base();
  json_object_del(json_array_get(json_object_get(root, "added_tokens"), 2), "lstrip");
  expect_json("added_flag", root, MD_E_FORMAT, "added_tokens[2].lstrip: missing or not true/false");
  root = base();
  set(json_array_get(json_object_get(root, "added_tokens"), 1), "content", json_string(""));
  expect_json("added_empty", root, MD_E_FORMAT, "added_tokens[1]: \"content\" is missing, empty");
}

int main(void) {
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_files();
  test_model();
  test_components();
  test_added_tokens();
  rmdir(dir);
  return md_test_finish("tokenizer_errors");
}
