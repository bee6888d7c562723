/* md_tokenizer_load_gguf: the tokenizer a GGUF file carries in its metadata
 * (tokenizer.ggml.*, as llama.cpp's convert_hf_to_gguf.py writes it from a
 * Hugging Face tokenizer.json), rebuilt as the tokenizer.json document it
 * came from and loaded by the same code as a tokenizer.json, so that both
 * are validated and encode alike.
 *
 * The document: model BPE with the vocabulary of the normal tokens (token
 * type 1) and the merges in rank order; the control (3) and user-defined
 * (4) tokens as added tokens, special when control (what the converter
 * makes of HF's "special" flag); the unused fillers (5) left out; and the
 * normaliser and pre-tokenizer that tokenizer.ggml.pre names. Only "qwen2"
 * is known: NFC, then Qwen2's split regex (Isolated) and ByteLevel without
 * its own regex, as Qwen2's tokenizer.json has them (llama.cpp's
 * LLAMA_VOCAB_PRE_TYPE_QWEN2 is the same regex). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/tokenizer/tokenizer_internal.h"

/* Qwen2's pre-tokenizer regex, from its tokenizer.json. */
static const char qwen2_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* llama.cpp's token types (llama_token_type / gguf-py's TokenType). */
enum { TYPE_NORMAL = 1, TYPE_UNKNOWN = 2, TYPE_CONTROL = 3, TYPE_USER_DEFINED = 4, TYPE_UNUSED = 5,
       TYPE_BYTE = 6 };

static md_status nomem(const char *path, md_error *err) {
  return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
}

/* A JSON string of a GGUF string; NULL when it is not valid UTF-8 or holds a
 * NUL byte (no token of a byte-level BPE does), or out of memory. */
static json_t *string_of(const md_gguf_string *s) {
  if (memchr(s->data, '\0', s->len)) return NULL;
  return json_stringn(s->data, s->len);
}

static md_status check_kind(const md_gguf_file *file, md_error *err) {
  const char *path = md_gguf_path(file);
  const char *model = NULL, *pre = NULL;
  md_status s = md_gguf_get_string(file, "tokenizer.ggml.model", &model, NULL, err);
  if (s != MD_OK) return s;
  if (strcmp(model, "gpt2") != 0)
    return md_fail(err, MD_E_UNSUPPORTED, "%s: tokenizer.ggml.model \"%.60s\" is not supported "
                   "(only \"gpt2\", byte-level BPE)", path, model);
  s = md_gguf_get_string(file, "tokenizer.ggml.pre", &pre, NULL, err);
  if (s != MD_OK) return s;
  if (strcmp(pre, "qwen2") != 0)
    return md_fail(err, MD_E_UNSUPPORTED, "%s: tokenizer.ggml.pre \"%.60s\": this pre-tokenizer "
                   "is not implemented (supported: qwen2)", path, pre);
  return MD_OK;
}

/* The vocabulary and the added tokens, from tokens and token_type. */
static md_status add_tokens(const md_gguf_file *file, json_t *vocab, json_t *added,
                            md_error *err) {
  const char *path = md_gguf_path(file);
  const md_gguf_string *tokens;
  uint64_t n;
  md_gguf_array types;
  md_status s = md_gguf_get_string_array(file, "tokenizer.ggml.tokens", &tokens, &n, err);
  if (s == MD_OK) s = md_gguf_get_array(file, "tokenizer.ggml.token_type", &types, err);
  if (s != MD_OK) return s;
  if (types.count != n)
    return md_fail(err, MD_E_FORMAT, "%s: tokenizer.ggml.token_type has %llu entries for %llu "
                   "tokens", path, (unsigned long long)types.count, (unsigned long long)n);
  if (n > MD_TOK_MAX_ID)
    return md_fail(err, MD_E_FORMAT, "%s: tokenizer.ggml.tokens: %llu tokens, more than %d",
                   path, (unsigned long long)n, MD_TOK_MAX_ID);
  for (uint64_t id = 0; id < n; id++) {
    int64_t type;
    if (!md_gguf_array_int(&types, id, &type))
      return md_fail(err, MD_E_FORMAT, "%s: tokenizer.ggml.token_type[%llu] is not an integer",
                     path, (unsigned long long)id);
    if (type == TYPE_UNUSED) continue;
    json_t *text = string_of(&tokens[id]);
    if (!text)
      return md_fail(err, MD_E_FORMAT, "%s: tokenizer.ggml.tokens[%llu] is not valid UTF-8 text",
                     path, (unsigned long long)id);
    if (type == TYPE_NORMAL) {
      const char *key = json_string_value(text);
      md_status s = MD_OK;
      if (json_object_get(vocab, key))
        s = md_fail(err, MD_E_FORMAT, "%s: tokenizer.ggml.tokens[%llu] \"%.60s\" is also an "
                    "earlier token", path, (unsigned long long)id, key);
      else if (json_object_set_new(vocab, key, json_integer((json_int_t)id)))
        s = nomem(path, err);
      json_decref(text); /* key is text's: used above, not below */
      if (s != MD_OK) return s;
    } else if (type == TYPE_CONTROL || type == TYPE_USER_DEFINED) {
      json_t *entry = json_pack("{s:I, s:o, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)id,
                                "content", text, "single_word", 0, "lstrip", 0, "rstrip", 0,
                                "normalized", 0, "special", type == TYPE_CONTROL);
      if (!entry || json_array_append_new(added, entry)) return nomem(path, err);
    } else {
      json_decref(text);
      return md_fail(err, MD_E_UNSUPPORTED, "%s: tokenizer.ggml.token_type[%llu] is %lld (%s): "
                     "a byte-level BPE has only normal, control, user-defined and unused tokens",
                     path, (unsigned long long)id, (long long)type,
                     type == TYPE_UNKNOWN ? "unknown" : type == TYPE_BYTE ? "byte" : "not a type");
    }
  }
  return MD_OK;
}

static md_status add_merges(const md_gguf_file *file, json_t *merges, md_error *err) {
  const md_gguf_string *items;
  uint64_t n;
  md_status s = md_gguf_get_string_array(file, "tokenizer.ggml.merges", &items, &n, err);
  if (s != MD_OK) return s;
  for (uint64_t i = 0; i < n; i++) {
    json_t *text = string_of(&items[i]);
    if (!text)
      return md_fail(err, MD_E_FORMAT, "%s: tokenizer.ggml.merges[%llu] is not valid UTF-8 text",
                     md_gguf_path(file), (unsigned long long)i);
    if (json_array_append_new(merges, text)) return nomem(md_gguf_path(file), err);
  }
  return MD_OK;
}

/* The tokenizer.json document the metadata describes. */
static md_status document(const md_gguf_file *file, json_t **out, md_error *err) {
  json_t *vocab = json_object(), *merges = json_array(), *added = json_array();
  json_t *root = json_pack(
      "{s:s, s:{s:s, s:o, s:o, s:n, s:n, s:s, s:s, s:b, s:b, s:b}, s:o, s:{s:s},"
      " s:{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b, s:b}]}, s:{s:s, s:b, s:b, s:b}}",
      "version", "1.0",
      "model", "type", "BPE", "vocab", vocab, "merges", merges, "dropout", "unk_token",
      "continuing_subword_prefix", "", "end_of_word_suffix", "", "fuse_unk", 0,
      "byte_fallback", 0, "ignore_merges", 0,
      "added_tokens", added,
      "normalizer", "type", "NFC",
      "pre_tokenizer", "type", "Sequence", "pretokenizers",
      "type", "Split", "pattern", "Regex", qwen2_pattern, "behavior", "Isolated", "invert", 0,
      "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 0, "use_regex", 0,
      "decoder", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 0, "use_regex", 0);
  if (!root) return nomem(md_gguf_path(file), err); /* json_pack released the parts */
  md_status s = add_tokens(file, vocab, added, err);
  if (s == MD_OK) s = add_merges(file, merges, err);
  if (s != MD_OK) {
    json_decref(root);
    return s;
  }
  *out = root;
  return MD_OK;
}

md_status md_tokenizer_load_gguf(const md_gguf_file *file, md_tokenizer **out, md_error *err) {
  *out = NULL;
  md_status s = check_kind(file, err);
  json_t *root = NULL;
  if (s == MD_OK) s = document(file, &root, err);
  if (s == MD_OK) s = md_tok_load_json(md_gguf_path(file), root, out, err);
  json_decref(root);
  return s;
}
