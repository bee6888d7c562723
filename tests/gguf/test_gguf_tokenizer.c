/* The tokenizer a GGUF file's metadata carries (md_tokenizer_load_gguf),
 * against HF `tokenizers`: the small test tokenizer of tests/tokenizer
 * (tests/tokenizer/fixtures/small_tokenizer.json: Qwen2's pre-tokenizer and
 * NFC) is written as a GGUF file the way llama.cpp's converter writes a
 * tokenizer (its vocabulary and merges as tokenizer.ggml.tokens and
 * merges, <|im_start|> and <|im_end|> as control tokens), and encodes every
 * string of the fixture's corpus to the ids HF `tokenizers` gave
 * (small_corpus.jsonl), but those that use the fixture's other added tokens
 * (their text, or their ids in HF's answer), whose lstrip, rstrip,
 * single-word and normalized flags a GGUF file cannot carry. Then
 * the refusals: another tokenizer model or pre-tokenizer, token types that
 * do not match the tokens, a byte token, a repeated token, a merge of
 * unknown symbols — each naming the file and the key. */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/tokenizer/tokenizer.h"
#include "io/formats/gguf.h"
#include "tests/gguf/gguf_builder.h"
#include "tests/test_util.h"

static char path[4096];

typedef struct tokenizer_spec {
  const char *model, *pre;
  const char **tokens;
  const int32_t *types;
  size_t n_tokens, n_types;
  const char **merges;
  size_t n_merges;
} tokenizer_spec;

static void kv_str_array(gguf_bytes *b, const char *key, const char **items, size_t n) {
  gb_str(b, key);
  gb_u32(b, GB_ARRAY);
  gb_u32(b, GB_STRING);
  gb_u64(b, n);
  for (size_t i = 0; i < n; i++) gb_str(b, items[i]);
}

static void kv_i32_array(gguf_bytes *b, const char *key, const int32_t *items, size_t n) {
  gb_str(b, key);
  gb_u32(b, GB_ARRAY);
  gb_u32(b, GB_I32);
  gb_u64(b, n);
  for (size_t i = 0; i < n; i++) gb_u32(b, (uint32_t)items[i]);
}

/* Writes the spec as a GGUF file (no tensors) at `path`. */
static void write_gguf(const tokenizer_spec *t) {
  gguf_bytes b = {0};
  gb_header(&b, 3, 0, 6);
  gb_kv_str(&b, "general.architecture", "qwen2");
  gb_kv_str(&b, "tokenizer.ggml.model", t->model);
  gb_kv_str(&b, "tokenizer.ggml.pre", t->pre);
  kv_str_array(&b, "tokenizer.ggml.tokens", t->tokens, t->n_tokens);
  kv_i32_array(&b, "tokenizer.ggml.token_type", t->types, t->n_types);
  kv_str_array(&b, "tokenizer.ggml.merges", t->merges, t->n_merges);
  gb_pad(&b, 32);
  gb_write(&b, b.len, path);
  gb_free(&b);
}

static md_status load(md_tokenizer **tok, md_error *err) {
  md_gguf_file *file = NULL;
  md_status s = md_gguf_open(path, &file, err);
  if (s == MD_OK) s = md_tokenizer_load_gguf(file, tok, err);
  md_gguf_close(file); /* the tokenizer keeps copies */
  return s;
}

static bool flagged(json_t *added) {
  static const char *const flags[] = {"single_word", "lstrip", "rstrip", "normalized"};
  for (size_t f = 0; f < 4; f++)
    if (json_is_true(json_object_get(added, flags[f]))) return true;
  return false;
}

/* Whether an added token is one a GGUF file can carry: no lstrip, rstrip,
 * single-word or normalized flag, an id of its own, and below the first
 * added token that cannot be carried (ids after a left-out one would leave
 * a gap the tokenizers library numbers differently). */
static bool plain_added(json_t *json, json_t *added) {
  json_t *vocab = json_object_get(json_object_get(json, "model"), "vocab");
  if (flagged(added) || json_object_get(vocab, json_string_value(json_object_get(added, "content"))))
    return false;
  json_int_t id = json_integer_value(json_object_get(added, "id"));
  size_t i;
  json_t *other;
  json_array_foreach(json_object_get(json, "added_tokens"), i, other) {
    json_int_t other_id = json_integer_value(json_object_get(other, "id"));
    bool in_vocab = json_object_get(vocab, json_string_value(json_object_get(other, "content")));
    if (other_id < id && !in_vocab && flagged(other)) return false;
  }
  return true;
}

/* A tokenizer.json as llama.cpp's converter writes it into a GGUF file:
 * the vocabulary as normal tokens, the plain added tokens as control
 * (special) or user-defined tokens, "[PAD<id>]" unused fillers in the gaps,
 * the merges as "a b"; the strings stay owned by `json` or `fillers`. */
static bool spec_of(json_t *json, tokenizer_spec *t, char ***fillers) {
  json_t *vocab = json_object_get(json_object_get(json, "model"), "vocab");
  json_t *merges = json_object_get(json_object_get(json, "model"), "merges");
  json_t *added_list = json_object_get(json, "added_tokens");
  size_t n = 0, i;
  const char *key;
  json_t *value, *added;
  json_object_foreach(vocab, key, value) if ((size_t)json_integer_value(value) + 1 > n) n = (size_t)json_integer_value(value) + 1;
  json_array_foreach(added_list, i, added) {
    size_t id = (size_t)json_integer_value(json_object_get(added, "id"));
    if (plain_added(json, added) && id + 1 > n) n = id + 1;
  }
  t->tokens = calloc(n + 1, sizeof *t->tokens);
  int32_t *types = calloc(n + 1, sizeof *types);
  *fillers = calloc(n + 1, sizeof **fillers);
  t->merges = calloc(json_array_size(merges) + 1, sizeof *t->merges);
  if (!t->tokens || !types || !*fillers || !t->merges) return false;
  json_object_foreach(vocab, key, value) {
    t->tokens[json_integer_value(value)] = key;
    types[json_integer_value(value)] = 1;
  }
  json_array_foreach(added_list, i, added) {
    if (!plain_added(json, added)) continue;
    size_t id = (size_t)json_integer_value(json_object_get(added, "id"));
    t->tokens[id] = json_string_value(json_object_get(added, "content"));
    types[id] = json_is_true(json_object_get(added, "special")) ? 3 : 4;
  }
  for (size_t id = 0; id < n; id++) {
    if (t->tokens[id]) continue;
    char filler[32];
    snprintf(filler, sizeof filler, "[PAD%zu]", id);
    if (!((*fillers)[id] = strdup(filler))) return false;
    t->tokens[id] = (*fillers)[id];
    types[id] = 5;
  }
  t->types = types;
  t->n_tokens = t->n_types = n;
  json_t *merge;
  json_array_foreach(merges, i, merge) {
    if (json_is_string(merge)) {
      t->merges[i] = strdup(json_string_value(merge));
    } else { /* ["a", "b"] */
      const char *a = json_string_value(json_array_get(merge, 0));
      const char *c = json_string_value(json_array_get(merge, 1));
      char *joined = malloc(strlen(a) + strlen(c) + 2);
      if (joined) sprintf(joined, "%s %s", a, c);
      t->merges[i] = joined;
    }
    if (!t->merges[i]) return false;
  }
  t->n_merges = json_array_size(merges);
  t->model = "gpt2";
  t->pre = "qwen2";
  return true;
}

static void free_spec(tokenizer_spec *t, char **fillers) {
  for (size_t i = 0; i < t->n_merges; i++) free((char *)t->merges[i]);
  for (size_t i = 0; fillers && i < t->n_tokens; i++) free(fillers[i]);
  free(fillers);
  free(t->merges);
  free(t->tokens);
  free((int32_t *)t->types);
}

/* A corpus string that uses an added token the GGUF file leaves out: HF
 * gave it one of their ids, or it holds one's text as written. */
static bool uses_other_added(json_t *json, const char *text, json_t *ids) {
  size_t i, k;
  json_t *added, *id;
  json_array_foreach(json_object_get(json, "added_tokens"), i, added) {
    const char *content = json_string_value(json_object_get(added, "content"));
    if (plain_added(json, added)) continue;
    if (strstr(text, content)) return true;
    json_int_t added_id = json_integer_value(json_object_get(added, "id"));
    json_array_foreach(ids, k, id) if (json_integer_value(id) == added_id) return true;
  }
  return false;
}

static void test_against_hf(const char *root, const char *corpus_name, json_t *json,
                            const tokenizer_spec *spec, size_t at_least) {
  write_gguf(spec);
  md_tokenizer *tok = NULL;
  md_error err = {0};
  CHECK_MSG(load(&tok, &err) == MD_OK, "%s", err.message);
  if (!tok) return;
  char corpus[4200];
  snprintf(corpus, sizeof corpus, "%s/tests/tokenizer/fixtures/%s", root, corpus_name);
  FILE *in = fopen(corpus, "r");
  CHECK_MSG(in != NULL, "cannot open %s", corpus);
  char *line = NULL;
  size_t cap = 0, compared = 0, tokens = 0;
  ssize_t len;
  while (in && (len = getline(&line, &cap, in)) > 0) {
    json_t *row = json_loadb(line, (size_t)len, JSON_ALLOW_NUL, NULL);
    json_t *text = json_object_get(row, "text"), *ids = json_object_get(row, "ids");
    if (json_is_string(text) && !uses_other_added(json, json_string_value(text), ids)) {
      md_tokens got = {0};
      CHECK(md_tokenizer_encode(tok, json_string_value(text), json_string_length(text), &got,
                                &err) == MD_OK);
      bool same = got.count == json_array_size(ids);
      for (size_t i = 0; same && i < got.count; i++)
        same = got.ids[i] == json_integer_value(json_array_get(ids, i));
      CHECK_MSG(same, "%s: \"%.80s\": ids differ from HF tokenizers'", corpus_name,
                json_string_value(text));
      compared++;
      tokens += got.count;
      md_tokens_free(&got);
    }
    json_decref(row);
  }
  free(line);
  if (in) fclose(in);
  CHECK(compared >= at_least);
  printf("%s: %zu strings, %zu tokens as HF tokenizers encodes them\n", corpus_name, compared,
         tokens);
  md_tokenizer_free(tok);
}

/* `spec` fails to load with `status` and a message holding `want`. */
static void expect_refusal(const tokenizer_spec *spec, md_status status, const char *want) {
  write_gguf(spec);
  md_tokenizer *tok = NULL;
  md_error err = {0};
  md_status got = load(&tok, &err);
  CHECK_MSG(got == status && strstr(err.message, want) && strstr(err.message, path),
            "want status %d and \"%s\", got %d: %s", (int)status, want, (int)got, err.message);
  md_tokenizer_free(tok);
}

static void test_refusals(const tokenizer_spec *good) {
  tokenizer_spec t = *good;
  t.model = "llama";
  expect_refusal(&t, MD_E_UNSUPPORTED, "tokenizer.ggml.model \"llama\" is not supported");
  t = *good;
  t.pre = "llama-bpe";
  expect_refusal(&t, MD_E_UNSUPPORTED, "tokenizer.ggml.pre \"llama-bpe\": this pre-tokenizer is "
                 "not implemented (supported: qwen2)");
  t = *good;
  t.n_types = good->n_types - 1;
  expect_refusal(&t, MD_E_FORMAT, "tokenizer.ggml.token_type has");
  int32_t *types = malloc(good->n_types * sizeof *types);
  memcpy(types, good->types, good->n_types * sizeof *types);
  types[5] = 6;
  t = *good;
  t.types = types;
  expect_refusal(&t, MD_E_UNSUPPORTED, "tokenizer.ggml.token_type[5] is 6 (byte)");
  free(types);
  const char **tokens = malloc(good->n_tokens * sizeof *tokens);
  memcpy(tokens, good->tokens, good->n_tokens * sizeof *tokens);
  tokens[7] = tokens[6];
  t = *good;
  t.tokens = tokens;
  expect_refusal(&t, MD_E_FORMAT, "tokenizer.ggml.tokens[7]");
  free(tokens);
  const char *bad_merges[] = {"zzzq qqqz"};
  t = *good;
  t.merges = bad_merges;
  t.n_merges = 1;
  expect_refusal(&t, MD_E_FORMAT, "model.merges[0]");
}

/* The tokenizer.json at `json_name` (under tests/tokenizer/fixtures or the
 * tree) written as a GGUF file, against HF's ids for each corpus. */
static void check_tokenizer(const char *root, const char *json_name, const char *const *corpora,
                            const size_t *at_least, size_t n_corpora, bool refusals) {
  char json_path[4200];
  snprintf(json_path, sizeof json_path, "%s/%s", root, json_name);
  json_t *json = json_load_file(json_path, 0, NULL);
  CHECK_MSG(json != NULL, "cannot read %s", json_path);
  tokenizer_spec spec = {0};
  char **fillers = NULL;
  if (json && spec_of(json, &spec, &fillers)) {
    for (size_t c = 0; c < n_corpora; c++) {
      write_gguf(&spec);
      test_against_hf(root, corpora[c], json, &spec, at_least[c]);
    }
    if (refusals) test_refusals(&spec);
  } else {
    CHECK_MSG(false, "%s: not a tokenizer.json this test can write as GGUF", json_path);
  }
  free_spec(&spec, fillers);
  json_decref(json);
}

int main(void) {
  const char *root = getenv("MD_SOURCE_ROOT"), *build = getenv("MD_BUILD_ROOT");
  if (!root) root = ".";
  snprintf(path, sizeof path, "%s/tests/gguf/tokenizer.gguf", build ? build : ".");
  /* The small tokenizer: the strings that use only what GGUF carries. */
  static const char *const small[] = {"small_corpus.jsonl"};
  static const size_t small_least[] = {40};
  check_tokenizer(root, "tests/tokenizer/fixtures/small_tokenizer.json", small, small_least, 1, true);
  /* Qwen's own (data/tokenizer/qwen): every string of its corpus and cases. */
  static const char *const qwen[] = {"qwen_corpus.jsonl", "cases.jsonl"};
  static const size_t qwen_least[] = {2816, 17};
  check_tokenizer(root, "data/tokenizer/qwen/tokenizer.json", qwen, qwen_least, 2, false);
  remove(path);
  return md_test_finish("gguf_tokenizer");
}
