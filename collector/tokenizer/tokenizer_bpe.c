/* BPE merging of one pre-token piece, as `tokenizers` does it (models/bpe/word.rs,
 * Word::merge_all): every adjacent pair with a merge goes into a min-heap ordered by
 * (rank, position); the top is applied if it is still current, and the pairs it forms with
 * its new neighbours are pushed. The result equals the textbook loop "merge the lowest-rank
 * pair, leftmost first, until none is left" in O(n log n). */
#include <stdlib.h>
#include <string.h>

#include "collector/tokenizer/tokenizer_internal.h"

static bool candidate_before(const md_tok_bpe_candidate *a, const md_tok_bpe_candidate *b) {
  return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(md_tok_bpe_scratch *s, md_tok_bpe_candidate c) {
  size_t i = s->heap_len++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!candidate_before(&c, &s->heap[parent])) break;
    s->heap[i] = s->heap[parent];
    i = parent;
  }
  s->heap[i] = c;
}

static md_tok_bpe_candidate heap_pop(md_tok_bpe_scratch *s) {
  md_tok_bpe_candidate top = s->heap[0];
  md_tok_bpe_candidate last = s->heap[--s->heap_len];
  size_t i = 0, n = s->heap_len;
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && candidate_before(&s->heap[child + 1], &s->heap[child])) child++;
    if (!candidate_before(&s->heap[child], &last)) break;
    s->heap[i] = s->heap[child];
    i = child;
  }
  if (n > 0) s->heap[i] = last;
  return top;
}

/* Pushes the merge of the symbols at `left` and its right neighbour, if there is one. */
static void push_pair(const md_tokenizer *tok, md_tok_bpe_scratch *s, int32_t left) {
  if (left < 0) return;
  int32_t right = s->symbols[left].next;
  if (right < 0) return;
  uint32_t rank;
  int32_t merged;
  if (md_tok_merges_get(&tok->merges, s->symbols[left].id, s->symbols[right].id, &rank, &merged))
    heap_push(s, (md_tok_bpe_candidate){.rank = rank,
                                        .pos = (uint32_t)left,
                                        .left = s->symbols[left].id,
                                        .right = s->symbols[right].id,
                                        .merged = merged});
}

static bool reserve(md_tok_bpe_scratch *s, size_t n) {
  if (n <= s->symbols_cap) return true;
  size_t cap = s->symbols_cap ? s->symbols_cap : 64;
  while (cap < n) cap *= 2;
  md_tok_bpe_symbol *symbols = realloc(s->symbols, cap * sizeof *symbols);
  if (!symbols) return false;
  s->symbols = symbols;
  /* Each applied merge pushes at most two pairs: n - 1 initial + 2 (n - 1) later. */
  md_tok_bpe_candidate *heap = realloc(s->heap, 3 * cap * sizeof *heap);
  if (!heap) return false;
  s->heap = heap;
  s->symbols_cap = cap;
  s->heap_cap = 3 * cap;
  return true;
}

/* Applies the candidate if the pair at its position is still the one it was made for.
 * (`tokenizers` checks that the current pair merges into the same symbol; that is the same
 * test: a symbol only grows by absorbing its right neighbour, so a changed pair at the same
 * position always concatenates to a longer string.) */
static void apply(const md_tokenizer *tok, md_tok_bpe_scratch *s, md_tok_bpe_candidate top) {
  md_tok_bpe_symbol *left = &s->symbols[top.pos];
  if (left->len == 0 || left->next < 0 || left->id != top.left) return;
  md_tok_bpe_symbol *right = &s->symbols[left->next];
  if (right->id != top.right) return;
  left->id = top.merged;
  left->len += right->len;
  left->next = right->next;
  right->len = 0;
  if (left->next >= 0) s->symbols[left->next].prev = (int32_t)top.pos;
  push_pair(tok, s, left->prev);
  push_pair(tok, s, (int32_t)top.pos);
}

md_status md_tok_bpe_word(const md_tokenizer *tok, const uint8_t *piece, size_t n,
                          md_tok_bpe_scratch *s, md_error *err) {
  if (n >= INT32_MAX)
    return md_fail(err, MD_E_INVALID, "pre-token piece of %zu bytes is too long", n);
  if (!reserve(s, n)) return md_fail(err, MD_E_NOMEM, "out of memory for a %zu-byte word", n);
  for (size_t i = 0; i < n; i++) {
    s->symbols[i] = (md_tok_bpe_symbol){.id = tok->byte_ids[piece[i]],
                                        .prev = (int32_t)i - 1,
                                        .next = i + 1 < n ? (int32_t)i + 1 : -1,
                                        .start = (uint32_t)i,
                                        .len = 1};
  }
  s->heap_len = 0;
  for (size_t i = 0; i + 1 < n; i++) push_pair(tok, s, (int32_t)i);
  while (s->heap_len > 0) apply(tok, s, heap_pop(s));
  return MD_OK;
}

void md_tok_bpe_scratch_free(md_tok_bpe_scratch *s) {
  free(s->symbols);
  free(s->heap);
  memset(s, 0, sizeof *s);
}

/* ---- word cache -------------------------------------------------------------------------- */
md_tok_cache *md_tok_cache_new(void) {
  md_tok_cache *cache = calloc(1, sizeof *cache);
  if (!cache) return NULL;
  cache->entries = calloc(MD_TOK_CACHE_ENTRIES, sizeof *cache->entries);
  size_t ready = 0;
  while (cache->entries && ready < MD_TOK_CACHE_SHARDS &&
         pthread_mutex_init(&cache->locks[ready], NULL) == 0)
    ready++;
  if (ready < MD_TOK_CACHE_SHARDS) {
    while (ready > 0) pthread_mutex_destroy(&cache->locks[--ready]);
    free(cache->entries);
    free(cache);
    return NULL;
  }
  return cache;
}

void md_tok_cache_free(md_tok_cache *cache) {
  if (!cache) return;
  for (size_t i = 0; i < MD_TOK_CACHE_SHARDS; i++) pthread_mutex_destroy(&cache->locks[i]);
  free(cache->entries);
  free(cache);
}

size_t md_tok_cache_get(const md_tokenizer *tok, const char *word, size_t len, uint64_t hash,
                        int32_t ids[MD_TOK_CACHE_TOKENS], uint8_t ends[MD_TOK_CACHE_TOKENS]) {
  md_tok_cache *cache = tok->cache;
  if (!cache || len > MD_TOK_CACHE_KEY) return 0;
  size_t index = hash & (MD_TOK_CACHE_ENTRIES - 1);
  pthread_mutex_t *lock = &cache->locks[index % MD_TOK_CACHE_SHARDS];
  size_t n = 0;
  pthread_mutex_lock(lock);
  const md_tok_cache_entry *e = &cache->entries[index];
  if (e->hash == hash && e->key_len == len && memcmp(e->key, word, len) == 0) {
    n = e->n_tokens;
    memcpy(ids, e->ids, n * sizeof *ids);
    memcpy(ends, e->ends, n);
  }
  pthread_mutex_unlock(lock);
  return n;
}

void md_tok_cache_put(const md_tokenizer *tok, const char *word, size_t len, uint64_t hash,
                      const int32_t *ids, const uint8_t *ends, size_t n_tokens) {
  md_tok_cache *cache = tok->cache;
  if (!cache || len > MD_TOK_CACHE_KEY || len == 0 || n_tokens > MD_TOK_CACHE_TOKENS) return;
  size_t index = hash & (MD_TOK_CACHE_ENTRIES - 1);
  pthread_mutex_t *lock = &cache->locks[index % MD_TOK_CACHE_SHARDS];
  pthread_mutex_lock(lock);
  md_tok_cache_entry *e = &cache->entries[index];
  e->hash = hash;
  e->key_len = (uint8_t)len;
  e->n_tokens = (uint8_t)n_tokens;
  memcpy(e->key, word, len);
  memcpy(e->ids, ids, n_tokens * sizeof *ids);
  memcpy(e->ends, ends, n_tokens);
  pthread_mutex_unlock(lock);
}
