/* md_tokenizer_encode: added tokens, NFC, split regex, byte-level BPE, in `tokenizers`'
 * order (TokenizerImpl::encode_single_sequence with add_special_tokens=false). */
#include <stdlib.h>
#include <string.h>

#include "collector/tokenizer/tokenizer_internal.h"

/* One piece of a stretch after cutting out added tokens: a token (id >= 0) or a gap. */
typedef struct split {
  int32_t id;
  size_t start, end;
} split;

typedef struct split_list {
  split *items;
  size_t len, cap;
} split_list;

/* Working memory of the encoder, kept in md_tokens between calls. */
struct md_tokens_scratch {
  md_tok_nfc nfc;
  md_tok_bpe_scratch bpe;
  split_list raw_splits, norm_splits;
  pcre2_match_data *match;
  pcre2_match_context *match_context; /* made on demand, with a larger JIT stack */
  pcre2_jit_stack *jit_stack;
};

typedef struct encoder {
  const md_tokenizer *tok;
  md_tokens *out;
  struct md_tokens_scratch *s;
  const char *text; /* the whole input */
  size_t len;
  /* the normalized stretch being encoded: either the input bytes themselves (identity) or
   * the NFC output (s->nfc) with its alignment to the input */
  bool identity;
  const char *norm;
  size_t norm_len;
  size_t norm_base; /* identity: offset of `norm` in `text` */
  size_t limit;     /* most tokens `out` may hold (md_tokenizer_encode_at_most) */
  bool over;        /* the encoding passed `limit`: the call stops */
  md_error *err;
} encoder;

static bool is_continuation(unsigned char c) { return (c & 0xc0) == 0x80; }

static size_t utf8_len(unsigned char c) {
  return c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
}

/* RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF. */
size_t md_tok_utf8_invalid_at(const char *text, size_t len) {
  const unsigned char *s = (const unsigned char *)text;
  size_t i = 0;
  while (i < len) {
    unsigned char c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
    if (c >= 0xc2 && c <= 0xdf)
      n = 2;
    else if (c >= 0xe0 && c <= 0xef)
      n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4)
      n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    else
      return i;
    if (i + n > len || s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k < n; k++)
      if (!is_continuation(s[i + k])) return i;
    i += n;
  }
  return len;
}

static md_status no_memory(encoder *e) {
  return md_fail(e->err, MD_E_NOMEM, "out of memory encoding %zu bytes", e->len);
}

/* ---- output ------------------------------------------------------------------------------ */
static bool reserve_tokens(md_tokens *t, size_t extra) {
  if (t->count + extra <= t->capacity) return true;
  size_t cap = t->capacity ? t->capacity : 256;
  while (cap < t->count + extra) cap *= 2;
  int32_t *ids = realloc(t->ids, cap * sizeof *ids);
  if (ids) t->ids = ids;
  md_token_span *spans = realloc(t->spans, cap * sizeof *spans);
  if (spans) t->spans = spans;
  if (!ids || !spans) return false;
  t->capacity = cap;
  return true;
}

/* The input span of normalized bytes [p, q) of the current stretch (`tokenizers`:
 * NormalizedString::convert_offsets, start of the first byte's alignment to the end of the
 * last's). */
static md_token_span span_of(const encoder *e, size_t p, size_t q) {
  if (!e->identity)
    return (md_token_span){e->s->nfc.align[2 * p], e->s->nfc.align[2 * (q - 1) + 1]};
  const unsigned char *s = (const unsigned char *)e->text;
  size_t start = e->norm_base + p, last = e->norm_base + q - 1;
  while (start > 0 && is_continuation(s[start])) start--;
  while (last > 0 && is_continuation(s[last])) last--;
  return (md_token_span){start, last + utf8_len(s[last])};
}

/* Stops the encoding once it is certain to pass e->limit. The status only unwinds the
 * call: md_tokenizer_encode_at_most reports e->over instead. */
static md_status over_limit(encoder *e) {
  e->over = true;
  return MD_E_INVALID;
}

static md_status push(encoder *e, int32_t id, md_token_span span) {
  if (e->out->count >= e->limit) return over_limit(e);
  if (!reserve_tokens(e->out, 1)) return no_memory(e);
  e->out->ids[e->out->count] = id;
  e->out->spans[e->out->count++] = span;
  return MD_OK;
}

/* ---- added tokens (AddedVocabulary::find_matches) ---------------------------------------- */
static bool split_push(split_list *list, int32_t id, size_t start, size_t end) {
  if (list->len == list->cap) {
    size_t cap = list->cap ? 2 * list->cap : 16;
    split *items = realloc(list->items, cap * sizeof *items);
    if (!items) return false;
    list->items = items;
    list->cap = cap;
  }
  list->items[list->len++] = (split){id, start, end};
  return true;
}

/* The leftmost-longest added token at or after `from`: its index, start and end. */
static bool find_added(const md_tokenizer *tok, const md_tok_matcher *m, const char *s, size_t n,
                       size_t from, uint32_t *index, size_t *start) {
  for (size_t i = from; i < n; i++) {
    unsigned char b = (unsigned char)s[i];
    for (uint32_t k = m->bucket[b]; k < m->bucket[b + 1]; k++) {
      const md_tok_added *a = &tok->added[m->order[k]];
      if (a->pattern_len <= n - i && memcmp(s + i, a->pattern, a->pattern_len) == 0) {
        *index = m->order[k];
        *start = i;
        return true;
      }
    }
  }
  return false;
}

/* Unicode White_Space, which Rust's regex \s matches. */
static bool is_white_space(int32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
         cp == 0x205f || cp == 0x3000;
}

static int32_t decode_at(const char *s, size_t at, size_t *n) {
  const unsigned char *u = (const unsigned char *)s + at;
  *n = utf8_len(u[0]);
  int32_t cp = *n == 1 ? u[0] : *n == 2 ? u[0] & 0x1f : *n == 3 ? u[0] & 0x0f : u[0] & 0x07;
  for (size_t k = 1; k < *n; k++) cp = cp << 6 | (u[k] & 0x3f);
  return cp;
}

static size_t char_start_before(const char *s, size_t at) {
  size_t i = at - 1;
  while (i > 0 && is_continuation((unsigned char)s[i])) i--;
  return i;
}

/* Start of the run of white space that ends at `end` (Rust: \s*$ on s[..end]). */
static size_t white_space_run_start(const char *s, size_t end) {
  while (end > 0) {
    size_t n, at = char_start_before(s, end);
    if (!is_white_space(decode_at(s, at, &n))) break;
    end = at;
  }
  return end;
}

/* End of the run of white space that starts at `start` (Rust: ^\s* on s[start..]). */
static size_t white_space_run_end(const char *s, size_t n, size_t start) {
  while (start < n) {
    size_t len;
    if (!is_white_space(decode_at(s, start, &len))) break;
    start += len;
  }
  return start;
}

/* Whether the character at s[at] is a word character as Rust's regex \w means it:
 * Alphabetic, Mark, Decimal_Number, Connector_Punctuation or Join_Control (UTS #18). */
static bool is_word_char(encoder *e, const char *s, size_t at) {
  size_t n;
  (void)decode_at(s, at, &n);
  int rc = pcre2_match(e->tok->word_char, (PCRE2_SPTR)(s + at), n, 0,
                       PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, e->s->match, NULL);
  return rc >= 0;
}

/* Whether an added token found at [start, stop) of s[0 .. n) stands alone as a word. */
static bool stands_alone(encoder *e, const char *s, size_t n, size_t start, size_t stop) {
  bool free_before = start == 0 || !is_word_char(e, s, char_start_before(s, start));
  bool free_after = stop == n || !is_word_char(e, s, stop);
  return free_before && free_after;
}

/* Cuts the tokens of matcher `m` out of s[0 .. n) into `list`, as find_matches does: the
 * search resumes after each raw match (also a rejected single_word one); lstrip/rstrip widen
 * the token over adjacent white space (lstrip not into the previous token). */
static md_status split_added(encoder *e, const md_tok_matcher *m, const char *s, size_t n,
                             split_list *list) {
  list->len = 0;
  size_t done = 0, from = 0, start;
  uint32_t index;
  while (m->count > 0 && find_added(e->tok, m, s, n, from, &index, &start)) {
    const md_tok_added *a = &e->tok->added[index];
    size_t stop = start + a->pattern_len;
    from = stop;
    if (a->single_word && !stands_alone(e, s, n, start, stop)) continue;
    if (a->lstrip) {
      start = white_space_run_start(s, start);
      if (start < done) start = done;
    }
    if (a->rstrip) stop = white_space_run_end(s, n, stop);
    if (done < start && !split_push(list, -1, done, start)) return no_memory(e);
    if (!split_push(list, a->id, start, stop)) return no_memory(e);
    done = stop;
  }
  if (done < n && !split_push(list, -1, done, n)) return no_memory(e);
  return MD_OK;
}

/* ---- split regex and BPE ----------------------------------------------------------------- */
static md_status push_word(encoder *e, size_t start, const int32_t *ids, const uint8_t *ends,
                           size_t n) {
  md_status st = MD_OK;
  for (size_t k = 0, from = 0; k < n && st == MD_OK; from = ends[k++])
    st = push(e, ids[k], span_of(e, start + from, start + ends[k]));
  return st;
}

/* BPE of normalized bytes [start, end), through the word cache for short words. */
static md_status bpe_piece(encoder *e, size_t start, size_t end) {
  const md_tokenizer *tok = e->tok;
  const char *word = e->norm + start;
  size_t n = end - start;
  if (n == 1) return push(e, tok->byte_ids[(uint8_t)word[0]], span_of(e, start, end));
  int32_t ids[MD_TOK_CACHE_TOKENS];
  uint8_t ends[MD_TOK_CACHE_TOKENS];
  uint64_t hash = 0;
  bool cacheable = n <= MD_TOK_CACHE_KEY;
  if (cacheable) {
    hash = md_tok_hash_bytes(word, n);
    size_t cached = md_tok_cache_get(tok, word, n, hash, ids, ends);
    if (cached > 0) return push_word(e, start, ids, ends, cached);
  }
  /* a long piece (one word of megabytes) would cost its length in time and memory even
   * when the tokens it must give cannot fit */
  if (tok->max_token_bytes && e->out->count + (n + tok->max_token_bytes - 1) / tok->max_token_bytes > e->limit)
    return over_limit(e);
  md_status st = md_tok_bpe_word(tok, (const uint8_t *)word, n, &e->s->bpe, e->err);
  size_t count = 0;
  for (int32_t i = 0; i >= 0 && st == MD_OK; i = e->s->bpe.symbols[i].next, count++) {
    const md_tok_bpe_symbol *sym = &e->s->bpe.symbols[i];
    st = push(e, sym->id, span_of(e, start + sym->start, start + sym->start + sym->len));
    if (count < MD_TOK_CACHE_TOKENS)
      ids[count] = sym->id, ends[count] = (uint8_t)(sym->start + sym->len);
  }
  if (st == MD_OK && cacheable && count <= MD_TOK_CACHE_TOKENS)
    md_tok_cache_put(tok, word, n, hash, ids, ends, count);
  return st;
}

static int match_split(encoder *e, pcre2_code *re, size_t start, size_t end, size_t from) {
  PCRE2_SPTR subject = (PCRE2_SPTR)(e->norm + start);
  int rc = pcre2_match(re, subject, end - start, from - start, PCRE2_NO_UTF_CHECK, e->s->match,
                       e->s->match_context);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !e->s->jit_stack) {
    /* A repeated group over a long piece can need more than the default 32 KiB JIT stack. */
    e->s->match_context = pcre2_match_context_create(NULL);
    e->s->jit_stack = pcre2_jit_stack_create(256 * 1024, 256 * 1024 * 1024, NULL);
    if (!e->s->match_context || !e->s->jit_stack) return PCRE2_ERROR_NOMEMORY;
    pcre2_jit_stack_assign(e->s->match_context, NULL, e->s->jit_stack);
    rc = pcre2_match(re, subject, end - start, from - start, PCRE2_NO_UTF_CHECK, e->s->match,
                     e->s->match_context);
  }
  return rc;
}

static md_status split_failed(encoder *e, int rc, size_t at) {
  PCRE2_UCHAR message[256];
  pcre2_get_error_message(rc, message, sizeof message);
  if (rc == PCRE2_ERROR_NOMEMORY) return no_memory(e);
  return md_fail(e->err, MD_E_UNSUPPORTED, "the split regex failed at normalized byte %zu: %s", at,
                 (const char *)message);
}

/* Applies split regex `level` (Isolated: matches and the gaps between them both become
 * pieces) to normalized bytes [start, end), then the next level, then BPE. */
static md_status pre_tokenize(encoder *e, size_t level, size_t start, size_t end) {
  if (level == e->tok->n_splits) return bpe_piece(e, start, end);
  pcre2_code *re = e->tok->splits[level];
  PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(e->s->match);
  size_t done = start, from = start;
  md_status st = MD_OK;
  while (from <= end && st == MD_OK) {
    int rc = match_split(e, re, start, end, from);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return split_failed(e, rc, from);
    size_t match_start = start + ovector[0], match_end = start + ovector[1];
    if (match_start > done) st = pre_tokenize(e, level + 1, done, match_start);
    if (st == MD_OK && match_end > match_start)
      st = pre_tokenize(e, level + 1, match_start, match_end);
    done = match_end;
    if (match_end > match_start)
      from = match_end;
    else if (match_end < end)
      from = match_end + utf8_len((unsigned char)e->norm[match_end]);
    else
      break;
  }
  if (st == MD_OK && done < end) st = pre_tokenize(e, level + 1, done, end);
  return st;
}

/* ---- the stretches between raw added tokens ---------------------------------------------- */
static md_status encode_normalized(encoder *e) {
  const md_tokenizer *tok = e->tok;
  if (tok->norm_matcher.count == 0) return pre_tokenize(e, 0, 0, e->norm_len);
  md_status st = split_added(e, &tok->norm_matcher, e->norm, e->norm_len, &e->s->norm_splits);
  for (size_t i = 0; i < e->s->norm_splits.len && st == MD_OK; i++) {
    split sp = e->s->norm_splits.items[i];
    st = sp.id >= 0 ? push(e, sp.id, span_of(e, sp.start, sp.end))
                    : pre_tokenize(e, 0, sp.start, sp.end);
  }
  return st;
}

static md_status encode_stretch(encoder *e, size_t start, size_t end) {
  const char *s = e->text + start;
  size_t n = end - start;
  if (!e->tok->nfc || md_tok_nfc_is_stable(s, n)) {
    e->identity = true;
    e->norm = s;
    e->norm_len = n;
    e->norm_base = start;
  } else {
    md_status st = md_tok_nfc_run(&e->s->nfc, s, n, (uint32_t)start, e->err);
    if (st != MD_OK) return st;
    e->identity = false;
    e->norm = e->s->nfc.text;
    e->norm_len = e->s->nfc.len;
  }
  return encode_normalized(e);
}

static md_status encode_all(encoder *e) {
  md_status st = split_added(e, &e->tok->raw_matcher, e->text, e->len, &e->s->raw_splits);
  for (size_t i = 0; i < e->s->raw_splits.len && st == MD_OK; i++) {
    split sp = e->s->raw_splits.items[i];
    st = sp.id >= 0 ? push(e, sp.id, (md_token_span){sp.start, sp.end})
                    : encode_stretch(e, sp.start, sp.end);
  }
  return st;
}

size_t md_tokenizer_min_tokens(const md_tokenizer *tok, size_t len) {
  if (len == 0) return 0;
  size_t most = tok->max_token_bytes;
  if (most == 0) return 1;
  if (tok->nfc) most *= MD_TOK_NFC_SHRINK;
  return (len + most - 1) / most;
}

static md_status encode(const md_tokenizer *tok, const char *text, size_t len, size_t limit,
                        md_tokens *out, bool *over, md_error *err) {
  *over = false;
  if (len == 0) return MD_OK;
  if (out->count + md_tokenizer_min_tokens(tok, len) > limit) {
    *over = true;
    return MD_OK;
  }
  if (len > UINT32_MAX - 16)
    return md_fail(err, MD_E_INVALID, "text of %zu bytes is too long to encode at once", len);
  size_t bad = md_tok_utf8_invalid_at(text, len);
  if (bad < len)
    return md_fail(err, MD_E_FORMAT, "invalid UTF-8 at byte %zu (0x%02x)", bad,
                   (unsigned char)text[bad]);
  if (!out->scratch) {
    out->scratch = calloc(1, sizeof *out->scratch);
    if (out->scratch) out->scratch->match = pcre2_match_data_create(1, NULL);
    if (!out->scratch || !out->scratch->match)
      return md_fail(err, MD_E_NOMEM, "out of memory encoding %zu bytes", len);
  }
  encoder e = {.tok = tok, .out = out, .s = out->scratch, .text = text, .len = len,
               .limit = limit, .err = err};
  size_t count_before = out->count;
  md_status st = encode_all(&e);
  if (st != MD_OK) out->count = count_before;
  if (e.over) {
    *over = true;
    return MD_OK;
  }
  return st;
}

md_status md_tokenizer_encode(const md_tokenizer *tok, const char *text, size_t len, md_tokens *out,
                              md_error *err) {
  bool over;
  return encode(tok, text, len, SIZE_MAX, out, &over, err);
}

md_status md_tokenizer_encode_at_most(const md_tokenizer *tok, const char *text, size_t len,
                                      size_t max_count, md_tokens *out, bool *over, md_error *err) {
  return encode(tok, text, len, max_count, out, over, err);
}

void md_tokens_clear(md_tokens *tokens) { tokens->count = 0; }

void md_tokens_free(md_tokens *tokens) {
  struct md_tokens_scratch *s = tokens->scratch;
  if (s) {
    pcre2_match_data_free(s->match);
    pcre2_match_context_free(s->match_context);
    pcre2_jit_stack_free(s->jit_stack);
    md_tok_nfc_free(&s->nfc);
    md_tok_bpe_scratch_free(&s->bpe);
    free(s->raw_splits.items);
    free(s->norm_splits.items);
    free(s);
  }
  free(tokens->ids);
  free(tokens->spans);
  memset(tokens, 0, sizeof *tokens);
}
