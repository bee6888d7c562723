/* md_tokenizer_load: reads a Hugging Face tokenizer.json (the format of the `tokenizers`
 * library, version "1.0") with jansson and builds the tables of md_tokenizer in one pass
 * over the vocabulary and one over the merges. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/tokenizer/tokenizer_internal.h"

/* GPT-2's pre-tokenizer regex: what ByteLevel with use_regex=true splits with. */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

typedef struct loader {
  md_tokenizer *tok;
  const char *path;
  md_error *err;
  size_t ids_cap;                /* allocated length of the per-id arrays */
  size_t pieces_len, pieces_cap; /* arena fill levels */
  size_t bytes_len, bytes_cap;
  size_t vocab_count; /* entries in model.vocab (`tokenizers`' vocab size) */
} loader;

/* ---- small helpers ----------------------------------------------------------------------- */
static md_status nomem(loader *l) {
  return md_fail(l->err, MD_E_NOMEM, "%s: out of memory", l->path);
}

static md_status bad(loader *l, md_status status, const char *json_path, const char *what) {
  return md_fail(l->err, status, "%s: %s: %s", l->path, json_path, what);
}

static const char *type_of(json_t *object) {
  json_t *type = json_object_get(object, "type");
  return json_is_string(type) ? json_string_value(type) : NULL;
}

static md_status read_file(loader *l, char **data, size_t *len) {
  FILE *f = fopen(l->path, "rb");
  if (!f) return md_fail_kind(l->err, MD_E_IO, MD_KIND_INPUT, "%s: cannot open: %s", l->path, strerror(errno));
  size_t cap = 1 << 20, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    char *bigger = realloc(buf, cap *= 2);
    if (!bigger) free(buf);
    buf = bigger;
  }
  bool failed = ferror(f) != 0;
  int saved = errno;
  fclose(f);
  if (!buf) return nomem(l);
  if (failed) {
    free(buf);
    return md_fail_kind(l->err, MD_E_IO, MD_KIND_INPUT, "%s: cannot read: %s", l->path, strerror(saved));
  }
  *data = buf;
  *len = n;
  return MD_OK;
}

/* ---- per-id table ------------------------------------------------------------------------ */
static bool ensure_id(loader *l, int32_t id) {
  md_tokenizer *tok = l->tok;
  if ((size_t)id >= tok->n_ids) tok->n_ids = (size_t)id + 1;
  if ((size_t)id < l->ids_cap) return true;
  size_t cap = l->ids_cap ? l->ids_cap : 1024;
  while (cap <= (size_t)id) cap *= 2;
  uint8_t *flags = realloc(tok->flags, cap);
  if (flags) tok->flags = flags, memset(flags + l->ids_cap, 0, cap - l->ids_cap);
  md_tok_entry *entries = realloc(tok->entries, cap * sizeof *entries);
  if (entries) tok->entries = entries;
  bool ok = flags && entries;
  if (ok) l->ids_cap = cap;
  return ok;
}

/* Appends `len` bytes plus a NUL to an arena; returns the offset, or UINT32_MAX. */
static uint32_t arena_add(char **arena, size_t *fill, size_t *cap, const char *s, size_t len) {
  if (*fill + len + 1 > *cap) {
    size_t grown = *cap ? *cap : (1 << 20);
    while (grown < *fill + len + 1) grown *= 2;
    if (grown > UINT32_MAX) return UINT32_MAX;
    char *p = realloc(*arena, grown);
    if (!p) return UINT32_MAX;
    *arena = p;
    *cap = grown;
  }
  uint32_t at = (uint32_t)*fill;
  memcpy(*arena + at, s, len);
  (*arena)[at + len] = '\0';
  *fill += len + 1;
  return at;
}

/* What a vocabulary string decodes to: each character through the byte-level inverse; a
 * string with a character outside that alphabet decodes to its own UTF-8 (as the ByteLevel
 * decoder does). Writes at most `len` bytes to `out`. */
static size_t byte_level_decode(const md_tokenizer *tok, const char *s, size_t len, char *out) {
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    unsigned char c = (unsigned char)s[i];
    uint32_t cp;
    size_t k;
    if (c < 0x80)
      cp = c, k = 1;
    else if (c < 0xe0 && i + 1 < len)
      cp = (uint32_t)(c & 0x1f) << 6 | (s[i + 1] & 0x3f), k = 2;
    else
      cp = MD_TOK_BYTE_CPS, k = 1;
    int b = cp < MD_TOK_BYTE_CPS ? tok->cp_to_byte[cp] : -1;
    if (b < 0) {
      memcpy(out, s, len);
      return len;
    }
    out[n++] = (char)b;
    i += k;
  }
  return n;
}

/* Records id's piece (its `tokenizers` string) and the bytes it decodes to. */
static md_status set_entry(loader *l, int32_t id, const char *piece, size_t len, const char *bytes,
                           size_t bytes_len, uint8_t flags) {
  md_tokenizer *tok = l->tok;
  uint32_t at = arena_add(&tok->pieces, &l->pieces_len, &l->pieces_cap, piece, len);
  uint32_t bytes_at = arena_add(&tok->bytes, &l->bytes_len, &l->bytes_cap, bytes, bytes_len);
  if (at == UINT32_MAX || bytes_at == UINT32_MAX) return nomem(l);
  tok->entries[id].piece_off = at;
  tok->entries[id].piece_len = (uint32_t)len;
  tok->entries[id].bytes_off = bytes_at;
  tok->entries[id].bytes_len = (uint32_t)bytes_len;
  tok->flags[id] |= flags;
  return MD_OK;
}

/* ---- model ------------------------------------------------------------------------------- */
static md_status check_model_options(loader *l, json_t *model) {
  const char *type = type_of(model);
  if (!type) return bad(l, MD_E_FORMAT, "model.type", "missing or not a string");
  if (strcmp(type, "BPE") != 0) {
    char what[256];
    snprintf(what, sizeof what, "'%s' is not supported (only 'BPE')", type);
    return bad(l, MD_E_UNSUPPORTED, "model.type", what);
  }
  json_t *dropout = json_object_get(model, "dropout");
  if (dropout && !json_is_null(dropout) &&
      !(json_is_number(dropout) && json_number_value(dropout) == 0))
    return bad(l, MD_E_UNSUPPORTED, "model.dropout",
               "BPE dropout is not supported (it makes encoding random)");
  static const char *const empty_strings[] = {"continuing_subword_prefix", "end_of_word_suffix"};
  for (size_t i = 0; i < 2; i++) {
    json_t *v = json_object_get(model, empty_strings[i]);
    if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0)) {
      char where[64];
      snprintf(where, sizeof where, "model.%s", empty_strings[i]);
      return bad(l, MD_E_UNSUPPORTED, where, "must be empty or null");
    }
  }
  static const char *const false_flags[] = {"byte_fallback", "ignore_merges"};
  for (size_t i = 0; i < 2; i++) {
    json_t *v = json_object_get(model, false_flags[i]);
    if (v && !json_is_null(v) && !json_is_false(v)) {
      char where[64];
      snprintf(where, sizeof where, "model.%s", false_flags[i]);
      return bad(l, MD_E_UNSUPPORTED, where, "must be false");
    }
  }
  return MD_OK;
}

static md_status add_vocab_entry(loader *l, const char *key, json_t *value) {
  md_tokenizer *tok = l->tok;
  if (!json_is_integer(value) || json_integer_value(value) < 0 ||
      json_integer_value(value) >= MD_TOK_MAX_ID)
    return md_fail(l->err, MD_E_FORMAT,
                   "%s: model.vocab[\"%.60s\"]: the id is not an integer in [0, %d)", l->path, key,
                   MD_TOK_MAX_ID);
  int32_t id = (int32_t)json_integer_value(value);
  if (!ensure_id(l, id)) return nomem(l);
  if (tok->flags[id] & MD_TOK_VALID)
    return md_fail(l->err, MD_E_FORMAT,
                   "%s: model.vocab[\"%.60s\"]: id %d is also given to \"%.60s\"", l->path, key, id,
                   tok->pieces + tok->entries[id].piece_off);
  size_t len = strlen(key);
  char stack[256];
  char *bytes = len <= sizeof stack ? stack : malloc(len);
  if (!bytes) return nomem(l);
  size_t n = byte_level_decode(tok, key, len, bytes);
  md_status st = set_entry(l, id, key, len, bytes, n, MD_TOK_VALID | MD_TOK_VOCAB);
  if (bytes != stack) free(bytes);
  if (st != MD_OK) return st;
  md_tok_map_put(tok, &tok->vocab, id); /* keys of a JSON object are unique */
  return MD_OK;
}

static md_status load_vocab(loader *l, json_t *model) {
  json_t *vocab = json_object_get(model, "vocab");
  if (!json_is_object(vocab)) return bad(l, MD_E_FORMAT, "model.vocab", "missing or not an object");
  l->vocab_count = json_object_size(vocab);
  if (!md_tok_map_init(&l->tok->vocab, l->vocab_count)) return nomem(l);
  const char *key;
  json_t *value;
  json_object_foreach(vocab, key, value) {
    md_status st = add_vocab_entry(l, key, value);
    if (st != MD_OK) return st;
  }
  return MD_OK;
}

static md_status bad_merge(loader *l, size_t index, const char *what) {
  return md_fail(l->err, MD_E_FORMAT, "%s: model.merges[%zu]: %s", l->path, index, what);
}

/* The two symbols of merge `index`: "a b" (legacy, exactly one space) or ["a", "b"]. */
static md_status merge_parts(loader *l, json_t *item, size_t index, const char **a, size_t *a_len,
                             const char **b, size_t *b_len) {
  if (json_is_string(item)) {
    const char *s = json_string_value(item);
    const char *space = strchr(s, ' ');
    if (!space || strchr(space + 1, ' '))
      return bad_merge(l, index, "not two symbols separated by one space");
    *a = s, *a_len = (size_t)(space - s), *b = space + 1, *b_len = strlen(space + 1);
    return MD_OK;
  }
  json_t *left = json_array_get(item, 0), *right = json_array_get(item, 1);
  if (json_is_array(item) && json_array_size(item) == 2 && json_is_string(left) &&
      json_is_string(right)) {
    *a = json_string_value(left), *a_len = json_string_length(left);
    *b = json_string_value(right), *b_len = json_string_length(right);
    return MD_OK;
  }
  return bad_merge(l, index, "neither a \"a b\" string nor an array of two strings");
}

static md_status unknown_symbol(loader *l, size_t index, const char *s, size_t len, bool merged) {
  char what[256];
  snprintf(what, sizeof what, "%s \"%.*s\" is not in model.vocab",
           merged ? "the merged symbol" : "the symbol", (int)(len > 100 ? 100 : len), s);
  return bad_merge(l, index, what);
}

static md_status add_merge(loader *l, json_t *item, size_t index, uint32_t rank) {
  md_tokenizer *tok = l->tok;
  const char *a = NULL, *b = NULL;
  size_t a_len = 0, b_len = 0;
  md_status st = merge_parts(l, item, index, &a, &a_len, &b, &b_len);
  if (st != MD_OK) return st;
  int32_t left = md_tok_map_get(tok, &tok->vocab, a, a_len);
  if (left < 0) return unknown_symbol(l, index, a, a_len, false);
  int32_t right = md_tok_map_get(tok, &tok->vocab, b, b_len);
  if (right < 0) return unknown_symbol(l, index, b, b_len, false);
  char stack[512];
  char *joined = a_len + b_len <= sizeof stack ? stack : malloc(a_len + b_len);
  if (!joined) return nomem(l);
  memcpy(joined, a, a_len);
  memcpy(joined + a_len, b, b_len);
  int32_t merged = md_tok_map_get(tok, &tok->vocab, joined, a_len + b_len);
  if (merged < 0)
    st = unknown_symbol(l, index, joined, a_len + b_len, true);
  else
    md_tok_merges_put(&tok->merges, left, right, rank, merged);
  if (joined != stack) free(joined);
  return st;
}

static md_status load_merges(loader *l, json_t *model) {
  json_t *merges = json_object_get(model, "merges");
  if (!json_is_array(merges)) return bad(l, MD_E_FORMAT, "model.merges", "missing or not an array");
  if (!md_tok_merges_init(&l->tok->merges, json_array_size(merges))) return nomem(l);
  uint32_t rank = 0;
  size_t index;
  json_t *item;
  json_array_foreach(merges, index, item) {
    /* Legacy merges.txt headers ("#version: 0.2") are skipped without taking a rank. */
    if (json_is_string(item) && strncmp(json_string_value(item), "#version", 8) == 0) continue;
    md_status st = add_merge(l, item, index, rank++);
    if (st != MD_OK) return st;
  }
  return MD_OK;
}

static md_status load_byte_symbols(loader *l) {
  md_tokenizer *tok = l->tok;
  for (int b = 0; b < 256; b++) {
    char symbol[4];
    uint32_t cp = tok->byte_to_cp[b];
    size_t n =
        cp < 0x80 ? (symbol[0] = (char)cp, 1)
                  : (symbol[0] = (char)(0xc0 | cp >> 6), symbol[1] = (char)(0x80 | (cp & 0x3f)), 2);
    tok->byte_ids[b] = md_tok_map_get(tok, &tok->vocab, symbol, n);
    if (tok->byte_ids[b] < 0) {
      char what[160];
      snprintf(what, sizeof what,
               "no entry for the byte-level symbol \"%.*s\" of byte 0x%02x (every byte needs one)",
               (int)n, symbol, b);
      return bad(l, MD_E_UNSUPPORTED, "model.vocab", what);
    }
  }
  return MD_OK;
}

static md_status load_model(loader *l, json_t *root) {
  json_t *model = json_object_get(root, "model");
  if (!json_is_object(model)) return bad(l, MD_E_FORMAT, "model", "missing or not an object");
  md_status st = check_model_options(l, model);
  if (st == MD_OK) st = load_vocab(l, model);
  if (st == MD_OK) st = load_merges(l, model);
  if (st == MD_OK) st = load_byte_symbols(l);
  return st;
}

/* ---- normalizer, pre-tokenizer, decoder -------------------------------------------------- */
static md_status unsupported_type(loader *l, const char *json_path, const char *type,
                                  const char *supported) {
  char what[256];
  if (type)
    snprintf(what, sizeof what, "type '%s' is not supported (supported: %s)", type, supported);
  else
    snprintf(what, sizeof what, "missing \"type\" (supported: %s)", supported);
  return bad(l, type ? MD_E_UNSUPPORTED : MD_E_FORMAT, json_path, what);
}

static md_status load_normalizer(loader *l, json_t *root) {
  json_t *normalizer = json_object_get(root, "normalizer");
  l->tok->nfc = false;
  if (!normalizer || json_is_null(normalizer)) return MD_OK;
  const char *type = type_of(normalizer);
  if (type && strcmp(type, "NFC") == 0) {
    l->tok->nfc = true;
    return MD_OK;
  }
  if (!type || strcmp(type, "Sequence") != 0)
    return unsupported_type(l, "normalizer", type, "NFC, a Sequence of NFC, null");
  json_t *list = json_object_get(normalizer, "normalizers");
  if (!json_is_array(list))
    return bad(l, MD_E_FORMAT, "normalizer.normalizers", "missing or not an array");
  size_t i;
  json_t *item;
  json_array_foreach(list, i, item) {
    const char *item_type = type_of(item);
    if (!item_type || strcmp(item_type, "NFC") != 0) {
      char where[64];
      snprintf(where, sizeof where, "normalizer.normalizers[%zu]", i);
      return unsupported_type(l, where, item_type, "NFC");
    }
    l->tok->nfc = true;
  }
  return MD_OK;
}

static md_status add_split(loader *l, const char *pattern, size_t len, bool literal,
                           const char *json_path) {
  md_tokenizer *tok = l->tok;
  char where[512];
  snprintf(where, sizeof where, "%s: %s", l->path, json_path);
  char *translated = NULL;
  md_status st = literal ? MD_OK : md_tok_regex_translate(pattern, len, where, &translated, l->err);
  if (st != MD_OK) return st;
  pcre2_code **splits = realloc(tok->splits, (tok->n_splits + 1) * sizeof *splits);
  if (!splits) {
    free(translated);
    return nomem(l);
  }
  tok->splits = splits;
  const char *compiled = literal ? pattern : translated;
  size_t compiled_len = literal ? len : strlen(translated);
  st = md_tok_regex_compile(compiled, compiled_len, literal, where, &tok->splits[tok->n_splits],
                            l->err);
  if (st == MD_OK)
    tok->n_splits++;
  else if (!literal && (compiled_len != len || memcmp(compiled, pattern, len) != 0) && l->err) {
    size_t used = strlen(l->err->message);
    snprintf(l->err->message + used, sizeof l->err->message - used,
             " (offset in the pattern as translated for PCRE2: \"%.300s\")", translated);
  }
  free(translated);
  return st;
}

static bool flag_is(json_t *object, const char *key, bool want) {
  json_t *v = json_object_get(object, key);
  return json_is_boolean(v) && json_is_true(v) == want;
}

static md_status load_split(loader *l, json_t *split, const char *json_path) {
  char where[160];
  snprintf(where, sizeof where, "%s.behavior", json_path);
  json_t *behavior = json_object_get(split, "behavior");
  if (!json_is_string(behavior) || strcmp(json_string_value(behavior), "Isolated") != 0)
    return bad(l, MD_E_UNSUPPORTED, where, "only the behavior \"Isolated\" is supported");
  snprintf(where, sizeof where, "%s.invert", json_path);
  if (!flag_is(split, "invert", false)) return bad(l, MD_E_UNSUPPORTED, where, "must be false");
  json_t *pattern = json_object_get(split, "pattern");
  json_t *regex = json_object_get(pattern, "Regex"), *string = json_object_get(pattern, "String");
  if (json_is_string(regex)) {
    snprintf(where, sizeof where, "%s.pattern.Regex", json_path);
    return add_split(l, json_string_value(regex), json_string_length(regex), false, where);
  }
  snprintf(where, sizeof where, "%s.pattern", json_path);
  if (json_is_string(string) && json_string_length(string) > 0)
    return add_split(l, json_string_value(string), json_string_length(string), true, where);
  return bad(l, MD_E_FORMAT, where,
             "neither {\"Regex\": pattern} nor {\"String\": non-empty text}");
}

static md_status load_byte_level(loader *l, json_t *byte_level, const char *json_path) {
  char where[160];
  snprintf(where, sizeof where, "%s.add_prefix_space", json_path);
  if (!flag_is(byte_level, "add_prefix_space", false))
    return bad(l, MD_E_UNSUPPORTED, where, "must be false");
  json_t *use_regex = json_object_get(byte_level, "use_regex");
  if (use_regex && !json_is_boolean(use_regex)) {
    snprintf(where, sizeof where, "%s.use_regex", json_path);
    return bad(l, MD_E_FORMAT, where, "not true or false");
  }
  if (use_regex && json_is_false(use_regex)) return MD_OK;
  snprintf(where, sizeof where, "%s (GPT-2 regex of use_regex)", json_path);
  return add_split(l, gpt2_pattern, strlen(gpt2_pattern), false, where);
}

static md_status load_pre_tokenizer(loader *l, json_t *root) {
  static const char supported[] =
      "ByteLevel, or a Sequence of Split pre-tokenizers ending with ByteLevel";
  json_t *pre = json_object_get(root, "pre_tokenizer");
  if (!json_is_object(pre))
    return bad(l, MD_E_UNSUPPORTED, "pre_tokenizer", "missing; a byte-level BPE needs ByteLevel");
  const char *type = type_of(pre);
  if (type && strcmp(type, "ByteLevel") == 0) return load_byte_level(l, pre, "pre_tokenizer");
  if (!type || strcmp(type, "Sequence") != 0)
    return unsupported_type(l, "pre_tokenizer", type, supported);
  json_t *list = json_object_get(pre, "pretokenizers");
  if (!json_is_array(list) || json_array_size(list) == 0)
    return bad(l, MD_E_FORMAT, "pre_tokenizer.pretokenizers", "missing, empty or not an array");
  size_t last = json_array_size(list) - 1, i;
  json_t *item;
  json_array_foreach(list, i, item) {
    char where[64];
    snprintf(where, sizeof where, "pre_tokenizer.pretokenizers[%zu]", i);
    const char *item_type = type_of(item);
    bool is_split = item_type && strcmp(item_type, "Split") == 0;
    bool is_byte_level = item_type && strcmp(item_type, "ByteLevel") == 0;
    md_status st;
    if (is_split && i < last)
      st = load_split(l, item, where);
    else if (is_byte_level && i == last)
      st = load_byte_level(l, item, where);
    else
      st = unsupported_type(l, where, item_type, i < last ? "Split" : "ByteLevel (last)");
    if (st != MD_OK) return st;
  }
  return MD_OK;
}

static md_status check_decoder(loader *l, json_t *root) {
  json_t *decoder = json_object_get(root, "decoder");
  const char *type = json_is_object(decoder) ? type_of(decoder) : NULL;
  if (type && strcmp(type, "ByteLevel") == 0) return MD_OK;
  if (!json_is_object(decoder))
    return bad(l, MD_E_UNSUPPORTED, "decoder", "missing; ByteLevel is required");
  return unsupported_type(l, "decoder", type, "ByteLevel");
}

/* ---- added tokens ------------------------------------------------------------------------ */
static md_status added_flag(loader *l, json_t *item, size_t index, const char *key, bool *out) {
  json_t *v = json_object_get(item, key);
  if (!json_is_boolean(v)) {
    char where[80];
    snprintf(where, sizeof where, "added_tokens[%zu].%s", index, key);
    return bad(l, MD_E_FORMAT, where, "missing or not true/false");
  }
  *out = json_is_true(v);
  return MD_OK;
}

static md_status read_added(loader *l, json_t *item, size_t index, md_tok_added *a,
                            int32_t *file_id, const char **content) {
  char where[64];
  snprintf(where, sizeof where, "added_tokens[%zu]", index);
  json_t *id = json_object_get(item, "id"), *text = json_object_get(item, "content");
  if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= MD_TOK_MAX_ID)
    return bad(l, MD_E_FORMAT, where, "\"id\" is missing or not an integer in [0, 16777216)");
  if (!json_is_string(text) || json_string_length(text) == 0)
    return bad(l, MD_E_FORMAT, where, "\"content\" is missing, empty or not a string");
  *file_id = (int32_t)json_integer_value(id);
  *content = json_string_value(text);
  md_status st = added_flag(l, item, index, "special", &a->special);
  if (st == MD_OK) st = added_flag(l, item, index, "normalized", &a->normalized);
  if (st == MD_OK) st = added_flag(l, item, index, "lstrip", &a->lstrip);
  if (st == MD_OK) st = added_flag(l, item, index, "rstrip", &a->rstrip);
  if (st == MD_OK) st = added_flag(l, item, index, "single_word", &a->single_word);
  return st;
}

/* `tokenizers` (AddedVocabulary::add_tokens) gives an added token the id of its content when
 * that is a vocabulary entry, else the next id from the vocabulary's size up. */
static md_status assign_added_id(loader *l, size_t index, const char *content, int32_t file_id,
                                 int32_t *next_id, int32_t *id) {
  md_tokenizer *tok = l->tok;
  char where[64], what[256];
  snprintf(where, sizeof where, "added_tokens[%zu]", index);
  size_t len = strlen(content);
  if (md_tok_map_get(tok, &tok->added_map, content, len) >= 0) {
    snprintf(what, sizeof what, "\"%.80s\" is listed twice", content);
    return bad(l, MD_E_FORMAT, where, what);
  }
  int32_t in_vocab = md_tok_map_get(tok, &tok->vocab, content, len);
  *id = in_vocab >= 0 ? in_vocab : (*next_id)++;
  if (*id != file_id) {
    snprintf(what, sizeof what, "\"%.80s\" has id %d, but the tokenizers library gives it id %d",
             content, file_id, *id);
    return bad(l, MD_E_FORMAT, where, what);
  }
  if (in_vocab < 0 && *id < (int32_t)tok->n_ids && (tok->flags[*id] & MD_TOK_VALID)) {
    snprintf(what, sizeof what, "id %d of \"%.80s\" is already the vocabulary entry \"%.80s\"", *id,
             content, tok->pieces + tok->entries[*id].piece_off);
    return bad(l, MD_E_FORMAT, where, what);
  }
  return MD_OK;
}

static md_status add_added(loader *l, json_t *item, size_t index, int32_t *next_id) {
  md_tokenizer *tok = l->tok;
  md_tok_added *a = &tok->added[tok->n_added];
  memset(a, 0, sizeof *a);
  int32_t file_id = -1, id = -1;
  const char *content = NULL;
  md_status st = read_added(l, item, index, a, &file_id, &content);
  if (st == MD_OK) st = assign_added_id(l, index, content, file_id, next_id, &id);
  if (st != MD_OK) return st;
  size_t len = strlen(content);
  a->id = id;
  a->pattern = a->normalized && tok->nfc ? md_tok_nfc_string(content, len, &a->pattern_len)
                                         : strdup(content);
  if (!a->normalized || !tok->nfc) a->pattern_len = len;
  if (!a->pattern) return nomem(l);
  tok->n_added++; /* from here on md_tokenizer_free releases the pattern */
  if (!ensure_id(l, id)) return nomem(l);
  uint8_t flags = MD_TOK_VALID | MD_TOK_ADDED | (a->special ? MD_TOK_SPECIAL : 0);
  if (tok->flags[id] & MD_TOK_VOCAB)
    tok->flags[id] |= flags; /* decodes as the vocab entry */
  else
    st = set_entry(l, id, content, len, a->pattern, a->pattern_len, flags);
  if (st == MD_OK) md_tok_map_put(tok, &tok->added_map, id);
  return st;
}

static md_status load_added_tokens(loader *l, json_t *root) {
  md_tokenizer *tok = l->tok;
  json_t *list = json_object_get(root, "added_tokens");
  if (list && !json_is_null(list) && !json_is_array(list))
    return bad(l, MD_E_FORMAT, "added_tokens", "not an array");
  size_t count = json_is_array(list) ? json_array_size(list) : 0;
  tok->added = calloc(count + 1, sizeof *tok->added);
  if (!tok->added || !md_tok_map_init(&tok->added_map, count)) return nomem(l);
  int32_t next_id = (int32_t)l->vocab_count;
  for (size_t i = 0; i < count; i++) {
    md_status st = add_added(l, json_array_get(list, i), i, &next_id);
    if (st != MD_OK) return st;
  }
  return MD_OK;
}

typedef struct sort_entry {
  uint32_t index;
  unsigned char first;
  size_t len;
} sort_entry;

static int compare_entries(const void *pa, const void *pb) {
  const sort_entry *a = pa, *b = pb;
  if (a->first != b->first) return a->first < b->first ? -1 : 1;
  if (a->len != b->len) return a->len > b->len ? -1 : 1;
  return a->index < b->index ? -1 : a->index > b->index;
}

/* Buckets the added tokens of one kind (normalized or not) by first byte, longest first, so
 * that the first hit at a position is the leftmost-longest match. */
static md_status build_matcher(loader *l, md_tok_matcher *m, bool normalized) {
  md_tokenizer *tok = l->tok;
  sort_entry *entries = malloc((tok->n_added + 1) * sizeof *entries);
  m->order = malloc((tok->n_added + 1) * sizeof *m->order);
  if (!entries || !m->order) {
    free(entries);
    return nomem(l);
  }
  size_t n = 0;
  for (size_t i = 0; i < tok->n_added; i++) {
    if (tok->added[i].normalized != normalized) continue;
    entries[n++] = (sort_entry){(uint32_t)i, (unsigned char)tok->added[i].pattern[0],
                                tok->added[i].pattern_len};
  }
  qsort(entries, n, sizeof *entries, compare_entries);
  md_status st = MD_OK;
  memset(m->bucket, 0, sizeof m->bucket);
  for (size_t k = 0; k < n; k++) {
    const md_tok_added *a = &tok->added[entries[k].index],
                       *prev = k ? &tok->added[entries[k - 1].index] : NULL;
    if (prev && prev->pattern_len == a->pattern_len &&
        memcmp(prev->pattern, a->pattern, a->pattern_len) == 0) {
      char what[200];
      snprintf(what, sizeof what, "ids %d and %d are matched on the same normalized text \"%.80s\"",
               prev->id, a->id, a->pattern);
      st = bad(l, MD_E_FORMAT, "added_tokens", what);
    }
    m->order[k] = entries[k].index;
    m->bucket[entries[k].first + 1]++;
  }
  for (int b = 0; b < 256; b++) m->bucket[b + 1] += m->bucket[b];
  m->count = n;
  free(entries);
  return st;
}

static md_status build_matchers(loader *l) {
  md_tokenizer *tok = l->tok;
  md_status st = build_matcher(l, &tok->raw_matcher, false);
  if (st == MD_OK) st = build_matcher(l, &tok->norm_matcher, true);
  bool single_word = false;
  for (size_t i = 0; i < tok->n_added; i++) single_word |= tok->added[i].single_word;
  if (st == MD_OK && single_word) {
    static const char word[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";
    char where[300];
    snprintf(where, sizeof where, "%s: the word-character class for single_word", l->path);
    st = md_tok_regex_compile(word, strlen(word), false, where, &tok->word_char, l->err);
  }
  return st;
}

/* The most normalized bytes one token covers: its decoded bytes (a vocabulary entry) or its
 * pattern (an added token). 0 when an added token strips white space, since it then covers
 * any amount of it. */
static void set_max_token_bytes(md_tokenizer *tok) {
  size_t most = 1;
  for (size_t id = 0; id < tok->n_ids; id++)
    if ((tok->flags[id] & MD_TOK_VALID) && tok->entries[id].bytes_len > most)
      most = tok->entries[id].bytes_len;
  for (size_t i = 0; i < tok->n_added; i++) {
    if (tok->added[i].lstrip || tok->added[i].rstrip) {
      most = 0;
      break;
    }
    if (tok->added[i].pattern_len > most) most = tok->added[i].pattern_len;
  }
  tok->max_token_bytes = most;
}

/* ---- entry point ------------------------------------------------------------------------- */
static md_status load_json(loader *l, json_t *root) {
  if (!json_is_object(root)) return bad(l, MD_E_FORMAT, "(top level)", "not a JSON object");
  json_t *version = json_object_get(root, "version");
  if (version && !(json_is_string(version) && strcmp(json_string_value(version), "1.0") == 0))
    return bad(l, MD_E_UNSUPPORTED, "version", "only tokenizer.json version \"1.0\" is supported");
  md_tok_byte_level_table(l->tok->byte_to_cp, l->tok->cp_to_byte);
  md_status st = load_model(l, root);
  if (st == MD_OK) st = load_normalizer(l, root);
  if (st == MD_OK) st = load_added_tokens(l, root);
  if (st == MD_OK) st = build_matchers(l);
  if (st == MD_OK) st = load_pre_tokenizer(l, root);
  if (st == MD_OK) st = check_decoder(l, root);
  if (st == MD_OK) l->tok->cache = md_tok_cache_new(); /* without it, encoding is just slower */
  if (st == MD_OK) set_max_token_bytes(l->tok);
  return st;
}

md_status md_tok_load_json(const char *path, json_t *root, md_tokenizer **out, md_error *err) {
  *out = NULL;
  loader l = {.path = path, .err = err};
  l.tok = calloc(1, sizeof *l.tok);
  md_status st = l.tok ? load_json(&l, root) : nomem(&l);
  if (st != MD_OK) {
    md_tokenizer_free(l.tok);
    return st;
  }
  *out = l.tok;
  return MD_OK;
}

md_status md_tokenizer_load(const char *path, md_tokenizer **out, md_error *err) {
  *out = NULL;
  loader l = {.path = path, .err = err};
  char *data = NULL;
  size_t len = 0;
  md_status st = read_file(&l, &data, &len);
  if (st != MD_OK) return st;
  json_error_t jerr;
  json_t *root = json_loadb(data, len, 0, &jerr);
  free(data);
  if (!root)
    return md_fail(err, MD_E_FORMAT, "%s:%d:%d: not valid JSON: %s", path, jerr.line, jerr.column,
                   jerr.text);
  st = md_tok_load_json(path, root, out, err);
  json_decref(root);
  return st;
}
