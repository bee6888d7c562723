/* Hash tables of the tokenizer (vocabulary, added tokens, merges) and the GPT-2 byte-level
 * alphabet. Tables are sized once, before they are filled, at twice the key count or more. */
#include <stdlib.h>
#include <string.h>

#include "collector/tokenizer/tokenizer_internal.h"

/* FNV-1a, 64 bit: short keys (BPE pieces average a few bytes), no alignment requirements. */
uint64_t md_tok_hash_bytes(const char *s, size_t len) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; i++) {
    h ^= (uint8_t)s[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

/* splitmix64's finaliser: spreads the two 32-bit ids over all bits. */
static uint64_t hash_pair(uint64_t pair) {
  pair ^= pair >> 30;
  pair *= 0xbf58476d1ce4e5b9ull;
  pair ^= pair >> 27;
  pair *= 0x94d049bb133111ebull;
  pair ^= pair >> 31;
  return pair;
}

static size_t slot_count_for(size_t expected) {
  size_t slots = 16;
  while (slots < 2 * expected + 1) slots <<= 1;
  return slots;
}

bool md_tok_map_init(md_tok_map *map, size_t expected) {
  size_t slots = slot_count_for(expected);
  map->slots = malloc(slots * sizeof *map->slots);
  if (!map->slots) return false;
  memset(map->slots, 0xff, slots * sizeof *map->slots); /* all -1 */
  map->mask = slots - 1;
  return true;
}

void md_tok_map_free(md_tok_map *map) {
  free(map->slots);
  map->slots = NULL;
}

static bool piece_equals(const md_tokenizer *tok, int32_t id, const char *key, size_t len) {
  return tok->entries[id].piece_len == len && memcmp(tok->pieces + tok->entries[id].piece_off, key, len) == 0;
}

int32_t md_tok_map_get(const md_tokenizer *tok, const md_tok_map *map, const char *key,
                       size_t len) {
  if (!map->slots) return -1;
  for (size_t i = md_tok_hash_bytes(key, len) & map->mask;; i = (i + 1) & map->mask) {
    int32_t id = map->slots[i];
    if (id < 0) return -1;
    if (piece_equals(tok, id, key, len)) return id;
  }
}

int32_t md_tok_map_put(const md_tokenizer *tok, md_tok_map *map, int32_t id) {
  const char *key = tok->pieces + tok->entries[id].piece_off;
  size_t len = tok->entries[id].piece_len;
  for (size_t i = md_tok_hash_bytes(key, len) & map->mask;; i = (i + 1) & map->mask) {
    int32_t there = map->slots[i];
    if (there < 0) {
      map->slots[i] = id;
      return -1;
    }
    if (piece_equals(tok, there, key, len)) return there;
  }
}

bool md_tok_merges_init(md_tok_merges *merges, size_t expected) {
  size_t slots = slot_count_for(expected);
  merges->slots = malloc(slots * sizeof *merges->slots);
  if (!merges->slots) return false;
  for (size_t i = 0; i < slots; i++) merges->slots[i].pair = UINT64_MAX;
  merges->mask = slots - 1;
  merges->count = 0;
  return true;
}

void md_tok_merges_free(md_tok_merges *merges) {
  free(merges->slots);
  merges->slots = NULL;
}

static uint64_t pair_key(int32_t left, int32_t right) {
  return (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
}

void md_tok_merges_put(md_tok_merges *merges, int32_t left, int32_t right, uint32_t rank,
                       int32_t merged) {
  uint64_t key = pair_key(left, right);
  for (size_t i = hash_pair(key) & merges->mask;; i = (i + 1) & merges->mask) {
    md_tok_merge_slot *slot = &merges->slots[i];
    if (slot->pair == UINT64_MAX || slot->pair == key) {
      if (slot->pair == UINT64_MAX) merges->count++;
      slot->pair = key;
      slot->rank = rank;
      slot->merged = merged;
      return;
    }
  }
}

bool md_tok_merges_get(const md_tok_merges *merges, int32_t left, int32_t right, uint32_t *rank,
                       int32_t *merged) {
  uint64_t key = pair_key(left, right);
  for (size_t i = hash_pair(key) & merges->mask;; i = (i + 1) & merges->mask) {
    const md_tok_merge_slot *slot = &merges->slots[i];
    if (slot->pair == UINT64_MAX) return false;
    if (slot->pair == key) {
      *rank = slot->rank;
      *merged = slot->merged;
      return true;
    }
  }
}

/* GPT-2's bytes_to_unicode (Radford et al., 2019, encoder.py): the printable bytes
 * '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for themselves; the other 68 bytes,
 * in increasing order, map to U+0100, U+0101, ... so that every byte is a visible character. */
static bool byte_is_printable(int b) {
  return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

void md_tok_byte_level_table(uint32_t byte_to_cp[256], int16_t cp_to_byte[MD_TOK_BYTE_CPS]) {
  for (int cp = 0; cp < MD_TOK_BYTE_CPS; cp++) cp_to_byte[cp] = -1;
  uint32_t next = 256;
  for (int b = 0; b < 256; b++) {
    byte_to_cp[b] = byte_is_printable(b) ? (uint32_t)b : next++;
    cp_to_byte[byte_to_cp[b]] = (int16_t)b;
  }
}
