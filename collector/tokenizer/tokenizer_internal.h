/* Internals shared by the tokenizer's source files (collector/tokenizer*.c). Not part of the
 * public API: use collector/tokenizer/tokenizer.h. */
#ifndef MD_COLLECTOR_TOKENIZER_TOKENIZER_INTERNAL_H
#define MD_COLLECTOR_TOKENIZER_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/tokenizer/tokenizer.h"

/* ---- per-id table ------------------------------------------------------------------------ */
enum {
  MD_TOK_VALID = 1,   /* the id has an entry */
  MD_TOK_VOCAB = 2,   /* the id is a model vocabulary entry */
  MD_TOK_ADDED = 4,   /* the id is an added token */
  MD_TOK_SPECIAL = 8, /* ... marked special */
};

/* Upper bound on ids, so that a corrupt file cannot make us allocate gigabytes. */
#define MD_TOK_MAX_ID ((int32_t)1 << 24)

/* The byte-level alphabet uses code points below 256 + 68. */
#define MD_TOK_BYTE_CPS 324

/* Where an id's strings are: its piece (the `tokenizers` token string, NUL-terminated) in
 * md_tokenizer.pieces and the bytes it decodes to in md_tokenizer.bytes. */
typedef struct md_tok_entry {
  uint32_t piece_off, piece_len;
  uint32_t bytes_off, bytes_len;
} md_tok_entry;

/* ---- string -> id map (open addressing; keys are the pieces of the ids it holds) --------- */
typedef struct md_tok_map {
  int32_t *slots; /* id, or -1 for an empty slot */
  size_t mask;    /* slot count - 1 (a power of two) */
} md_tok_map;

/* ---- (left id, right id) -> (rank, merged id) -------------------------------------------- */
typedef struct md_tok_merge_slot {
  uint64_t pair; /* left << 32 | right; UINT64_MAX when empty */
  uint32_t rank;
  int32_t merged;
} md_tok_merge_slot;

typedef struct md_tok_merges {
  md_tok_merge_slot *slots;
  size_t mask;
  size_t count;
} md_tok_merges;

/* ---- added tokens ------------------------------------------------------------------------ */
typedef struct md_tok_added {
  int32_t id;
  char *pattern; /* what is matched: the content, or NFC(content) when normalized */
  size_t pattern_len;
  bool special, normalized, lstrip, rstrip, single_word;
} md_tok_added;

/* Leftmost-longest search over a set of added tokens (the ones matched on raw text, or the
 * ones matched on normalized text). Candidates are bucketed by first byte, longest first. */
typedef struct md_tok_matcher {
  uint32_t bucket[257]; /* order[bucket[b] .. bucket[b + 1]) start with byte b */
  uint32_t *order;      /* indices into md_tokenizer.added */
  size_t count;
} md_tok_matcher;

/* ---- a bounded cache of BPE results per word, shared by the threads that encode ----------
 * Direct-mapped; each shard of entries has its own lock. Only the encoding of short words
 * is kept: those are most of the work on natural text and repeat often. */
enum {
  MD_TOK_CACHE_ENTRIES = 1 << 14,
  MD_TOK_CACHE_SHARDS = 64,
  MD_TOK_CACHE_KEY = 23,   /* longest word cached, in bytes */
  MD_TOK_CACHE_TOKENS = 8, /* most tokens of a cached word */
};

typedef struct md_tok_cache_entry {
  uint64_t hash;
  uint8_t key_len; /* 0: empty */
  uint8_t n_tokens;
  char key[MD_TOK_CACHE_KEY];
  uint8_t ends[MD_TOK_CACHE_TOKENS]; /* end byte of each token in the word */
  int32_t ids[MD_TOK_CACHE_TOKENS];
} md_tok_cache_entry;

typedef struct md_tok_cache {
  md_tok_cache_entry *entries;
  pthread_mutex_t locks[MD_TOK_CACHE_SHARDS];
} md_tok_cache;

struct md_tokenizer {
  /* per id, for ids in [0, n_ids) */
  size_t n_ids;
  uint8_t *flags;
  md_tok_entry *entries;
  char *pieces; /* arena of the pieces (NUL-terminated) */
  char *bytes;  /* arena of the decoded bytes */

  md_tok_map vocab;     /* model vocabulary string -> id */
  md_tok_map added_map; /* added token content -> id */
  md_tok_merges merges;
  int32_t byte_ids[256];    /* id of the single-byte symbol of each byte */
  uint32_t byte_to_cp[256]; /* GPT-2 bytes_to_unicode */
  int16_t cp_to_byte[MD_TOK_BYTE_CPS];

  md_tok_added *added;
  size_t n_added;
  md_tok_matcher raw_matcher;  /* normalized=false tokens, matched on the raw text */
  md_tok_matcher norm_matcher; /* normalized=true tokens, matched on NFC text */
  pcre2_code *word_char;       /* one \w character as Rust's regex means it (single_word) */

  md_tok_cache *cache; /* mutable, behind its locks; NULL when it could not be made */

  bool nfc;            /* the normalizer is NFC */
  size_t max_token_bytes; /* most normalized bytes a token covers; 0 = no bound (lstrip/rstrip) */
  pcre2_code **splits; /* the split regexes, applied in order (Isolated) */
  size_t n_splits;
};

/* ---- tokenizer_tables.c ------------------------------------------------------------------ */
uint64_t md_tok_hash_bytes(const char *s, size_t len);
/* Sizes `map` for `expected` keys. */
bool md_tok_map_init(md_tok_map *map, size_t expected);
void md_tok_map_free(md_tok_map *map);
/* The id stored under `key`, or -1. */
int32_t md_tok_map_get(const md_tokenizer *tok, const md_tok_map *map, const char *key, size_t len);
/* Stores `id` under its own piece; returns the id already there for an equal key, else -1. */
int32_t md_tok_map_put(const md_tokenizer *tok, md_tok_map *map, int32_t id);

bool md_tok_merges_init(md_tok_merges *merges, size_t expected);
void md_tok_merges_free(md_tok_merges *merges);
/* Adds or (for a repeated pair, as `tokenizers` does) replaces a merge. */
void md_tok_merges_put(md_tok_merges *merges, int32_t left, int32_t right, uint32_t rank,
                       int32_t merged);
/* Finds the merge of (left, right); false when there is none. */
bool md_tok_merges_get(const md_tok_merges *merges, int32_t left, int32_t right, uint32_t *rank,
                       int32_t *merged);

/* GPT-2's bytes_to_unicode table, and its inverse (-1 for code points that stand for no
 * byte; all code points from MD_TOK_BYTE_CPS up stand for none). */
void md_tok_byte_level_table(uint32_t byte_to_cp[256], int16_t cp_to_byte[MD_TOK_BYTE_CPS]);

/* ---- tokenizer_bpe.c --------------------------------------------------------------------- */
typedef struct md_tok_bpe_symbol {
  int32_t id;
  int32_t prev, next;  /* neighbours in the word, -1 at the ends */
  uint32_t start, len; /* bytes of the piece it covers; len 0 once merged away */
} md_tok_bpe_symbol;

typedef struct md_tok_bpe_candidate {
  uint32_t rank;
  uint32_t pos;
  int32_t left, right; /* the pair it was made for */
  int32_t merged;
} md_tok_bpe_candidate;

typedef struct md_tok_bpe_scratch {
  md_tok_bpe_symbol *symbols;
  size_t symbols_cap;
  md_tok_bpe_candidate *heap;
  size_t heap_len, heap_cap;
} md_tok_bpe_scratch;

/* Merges the bytes of one pre-token piece. On return scratch->symbols[0 .. n) hold the
 * symbols, the live ones linked from index 0 through `next`. */
md_status md_tok_bpe_word(const md_tokenizer *tok, const uint8_t *piece, size_t n,
                          md_tok_bpe_scratch *scratch, md_error *err);
void md_tok_bpe_scratch_free(md_tok_bpe_scratch *scratch);

/* A word's tokens from the cache: ids[k] covering bytes [ends[k-1], ends[k]). Returns the
 * number of tokens, 0 when the word is not cached. */
size_t md_tok_cache_get(const md_tokenizer *tok, const char *word, size_t len, uint64_t hash,
                        int32_t ids[MD_TOK_CACHE_TOKENS], uint8_t ends[MD_TOK_CACHE_TOKENS]);
void md_tok_cache_put(const md_tokenizer *tok, const char *word, size_t len, uint64_t hash,
                      const int32_t *ids, const uint8_t *ends, size_t n_tokens);
md_tok_cache *md_tok_cache_new(void);
void md_tok_cache_free(md_tok_cache *cache);

/* ---- tokenizer_nfc.c --------------------------------------------------------------------- */
/* NFC with `tokenizers`' alignment: for every output byte, the [start, end) of the input it
 * is aligned to (offsets relative to the input, plus `base`). */
typedef struct md_tok_nfc {
  char *text;
  size_t len, text_cap;
  uint32_t *align; /* [2 * len]: start, end per output byte */
  size_t align_cap;
  /* work arrays */
  int32_t *cps;    /* decomposed code points */
  int32_t *change; /* their alignment change (0 replaces, >0 inserted, <0 removes) */
  uint8_t *ccc;
  size_t work_cap;
  uint32_t *in_off; /* byte offset of each input character, plus the end */
  size_t in_cap;
} md_tok_nfc;

/* True when NFC leaves `text` unchanged with the identity alignment (no character in it can
 * be reordered, decomposed or composed), which is the common case and skips md_tok_nfc_run. */
bool md_tok_nfc_is_stable(const char *text, size_t len);
md_status md_tok_nfc_run(md_tok_nfc *nfc, const char *text, size_t len, uint32_t base,
                         md_error *err);
void md_tok_nfc_free(md_tok_nfc *nfc);
/* NFC of a short string into a malloc'd buffer (added-token contents); NULL on failure. */
char *md_tok_nfc_string(const char *text, size_t len, size_t *out_len);

/* ---- tokenizer_regex.c ------------------------------------------------------------------- */
/* Translates an Oniguruma pattern (as `tokenizers` runs it) into an equivalent PCRE2 pattern,
 * or fails naming the construct; `where` names the file and JSON path for the message. */
md_status md_tok_regex_translate(const char *pattern, size_t len, const char *where, char **out,
                                 md_error *err);
/* Compiles a translated pattern with UTF, UCP and MULTILINE (Oniguruma's ^ and $ are line
 * anchors), JIT when available. `literal` compiles the text as a plain string. */
md_status md_tok_regex_compile(const char *pattern, size_t len, bool literal, const char *where,
                               pcre2_code **out, md_error *err);

/* ---- tokenizer_encode.c ------------------------------------------------------------------ */
/* NFC can make a text shorter: U+212A KELVIN SIGN (3 bytes) becomes "K", three Hangul jamo
 * (9 bytes) one syllable (3 bytes). No normalized byte stands for more than 3 input bytes;
 * the bounds on token counts allow this many. */
enum { MD_TOK_NFC_SHRINK = 4 };

/* Offset of the first invalid UTF-8 byte, or `len` when the text is valid. */
size_t md_tok_utf8_invalid_at(const char *text, size_t len);

/* Builds a tokenizer from a tokenizer.json document already parsed (`path`
 * names it in messages): what md_tokenizer_load does after reading the
 * file, and what md_tokenizer_load_gguf does with the document it derives
 * from a GGUF file's metadata. */
md_status md_tok_load_json(const char *path, json_t *root, md_tokenizer **out, md_error *err);

#endif
