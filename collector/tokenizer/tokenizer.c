/* The tokenizer's lookups, decoding and release; loading is in tokenizer_load.c, encoding
 * in tokenizer_encode.c. */
#include <stdlib.h>
#include <string.h>

#include "collector/tokenizer/tokenizer_internal.h"

static bool has_entry(const md_tokenizer *tok, int32_t id) {
  return id >= 0 && (size_t)id < tok->n_ids && (tok->flags[id] & MD_TOK_VALID);
}

size_t md_tokenizer_vocab_size(const md_tokenizer *tok) { return tok->n_ids; }

const char *md_tokenizer_piece(const md_tokenizer *tok, int32_t id) {
  return has_entry(tok, id) ? tok->pieces + tok->entries[id].piece_off : NULL;
}

const char *md_tokenizer_piece_bytes(const md_tokenizer *tok, int32_t id, size_t *len) {
  if (!has_entry(tok, id)) return NULL;
  *len = tok->entries[id].bytes_len;
  return tok->bytes + tok->entries[id].bytes_off;
}

int32_t md_tokenizer_token_id(const md_tokenizer *tok, const char *piece) {
  int32_t id = md_tok_map_get(tok, &tok->added_map, piece, strlen(piece));
  return id >= 0 ? id : md_tok_map_get(tok, &tok->vocab, piece, strlen(piece));
}

int32_t md_tokenizer_added_id(const md_tokenizer *tok, const char *content) {
  return md_tok_map_get(tok, &tok->added_map, content, strlen(content));
}

bool md_tokenizer_is_added(const md_tokenizer *tok, int32_t id) {
  return has_entry(tok, id) && (tok->flags[id] & MD_TOK_ADDED);
}

bool md_tokenizer_is_special(const md_tokenizer *tok, int32_t id) {
  return has_entry(tok, id) && (tok->flags[id] & MD_TOK_SPECIAL);
}

md_status md_tokenizer_decode(const md_tokenizer *tok, const int32_t *ids, size_t n,
                              bool skip_special, char **out_text, size_t *out_len, md_error *err) {
  *out_text = NULL;
  *out_len = 0;
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    if (!has_entry(tok, ids[i]))
      return md_fail(err, MD_E_INVALID, "token %zu: id %d is not in the vocabulary (size %zu)", i,
                     ids[i], tok->n_ids);
    total += tok->entries[ids[i]].bytes_len;
  }
  char *text = malloc(total + 1);
  if (!text) return md_fail(err, MD_E_NOMEM, "out of memory decoding %zu tokens", n);
  size_t len = 0;
  for (size_t i = 0; i < n; i++) {
    int32_t id = ids[i];
    if (skip_special && (tok->flags[id] & MD_TOK_SPECIAL)) continue;
    memcpy(text + len, tok->bytes + tok->entries[id].bytes_off, tok->entries[id].bytes_len);
    len += tok->entries[id].bytes_len;
  }
  text[len] = '\0';
  *out_text = text;
  *out_len = len;
  return MD_OK;
}

void md_tokenizer_free(md_tokenizer *tok) {
  if (!tok) return;
  free(tok->flags);
  free(tok->entries);
  free(tok->pieces);
  free(tok->bytes);
  md_tok_map_free(&tok->vocab);
  md_tok_map_free(&tok->added_map);
  md_tok_merges_free(&tok->merges);
  md_tok_cache_free(tok->cache);
  for (size_t i = 0; i < tok->n_added; i++) free(tok->added[i].pattern);
  free(tok->added);
  free(tok->raw_matcher.order);
  free(tok->norm_matcher.order);
  pcre2_code_free(tok->word_char);
  for (size_t i = 0; i < tok->n_splits; i++) pcre2_code_free(tok->splits[i]);
  free(tok->splits);
  free(tok);
}
