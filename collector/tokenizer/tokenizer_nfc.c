/* NFC with the alignment `tokenizers` keeps between normalized and original text.
 *
 * `tokenizers` normalizes with the crate unicode-normalization-alignments: canonical
 * decomposition (the first character of a decomposition "replaces" the original, the others
 * are "inserted"), a stable sort of each run of non-starters by combining class, then
 * canonical composition, where a composed character carries the changes of both parts
 * minus one. NormalizedString::transform then walks the original characters: a replacing
 * character takes the alignment of the next original character (and skips as many more as
 * its change removes), an inserted one takes the alignment of the previous one. The
 * character data come from utf8proc, except for the code points `tokenizers`' Unicode 9.0
 * tables do not know (collector/tokenizer/tokenizer_unicode9.h), which it treats as plain starters. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "collector/tokenizer/tokenizer_internal.h"
#include "collector/tokenizer/tokenizer_unicode9.h"

enum {
  HANGUL_S_BASE = 0xAC00,
  HANGUL_L_BASE = 0x1100,
  HANGUL_V_BASE = 0x1161,
  HANGUL_T_BASE = 0x11A7,
  HANGUL_L_COUNT = 19,
  HANGUL_V_COUNT = 21,
  HANGUL_T_COUNT = 28,
  HANGUL_S_COUNT = 11172,
  MAX_DECOMPOSITION = 32, /* utf8proc's longest canonical decomposition is 4 */
};

static bool unknown_to_reference(int32_t cp) {
  size_t lo = 0, hi = sizeof md_tok_unicode9_unknown / sizeof md_tok_unicode9_unknown[0];
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if ((uint32_t)cp < md_tok_unicode9_unknown[mid][0])
      hi = mid;
    else if ((uint32_t)cp > md_tok_unicode9_unknown[mid][1])
      lo = mid + 1;
    else
      return true;
  }
  return false;
}

static uint8_t combining_class(int32_t cp) {
  if (cp < 0x300 || unknown_to_reference(cp)) return 0;
  return (uint8_t)utf8proc_get_property(cp)->combining_class;
}

static bool is_hangul_vowel_or_trailer(int32_t cp) {
  return (cp >= HANGUL_V_BASE && cp < HANGUL_V_BASE + HANGUL_V_COUNT) ||
         (cp > HANGUL_T_BASE && cp < HANGUL_T_BASE + HANGUL_T_COUNT);
}

/* A character that NFC can neither reorder, decompose into something else, nor compose with
 * the character before it. Characters below U+0300 qualify: none is a combining mark or a
 * second part of a composition, and the precomposed Latin letters among them recompose. */
static bool is_inert(int32_t cp) {
  if (cp < 0x300) return true;
  if (unknown_to_reference(cp)) return true;
  if (is_hangul_vowel_or_trailer(cp)) return false;
  const utf8proc_property_t *p = utf8proc_get_property(cp);
  if (p->combining_class != 0) return false;
  if (p->comb_index != UINT16_MAX && p->comb_index >= 0x8000) return false;  /* a second part */
  if (p->decomp_seqindex != UINT16_MAX && p->decomp_type == 0) return false; /* canonical */
  return true;
}

bool md_tok_nfc_is_stable(const char *text, size_t len) {
  const uint8_t *s = (const uint8_t *)text;
  size_t i = 0;
  while (i < len) {
    if (s[i] < 0x80) {
      i++;
      continue;
    }
    utf8proc_int32_t cp;
    utf8proc_ssize_t n = utf8proc_iterate(s + i, (utf8proc_ssize_t)(len - i), &cp);
    if (n <= 0) return false; /* not reached for validated text */
    if (!is_inert(cp)) return false;
    i += (size_t)n;
  }
  return true;
}

/* The canonical composition of (a, b), or -1. Hangul by the algorithm of Unicode ch. 3.12
 * (trailing consonants start at T_BASE + 1); everything else through utf8proc's composition
 * on the pair, filtered first by its "can be first/second" flags to stay cheap. */
static int32_t compose(int32_t a, int32_t b) {
  if (a >= HANGUL_L_BASE && a < HANGUL_L_BASE + HANGUL_L_COUNT && b >= HANGUL_V_BASE &&
      b < HANGUL_V_BASE + HANGUL_V_COUNT)
    return HANGUL_S_BASE +
           ((a - HANGUL_L_BASE) * HANGUL_V_COUNT + (b - HANGUL_V_BASE)) * HANGUL_T_COUNT;
  if (a >= HANGUL_S_BASE && a < HANGUL_S_BASE + HANGUL_S_COUNT &&
      (a - HANGUL_S_BASE) % HANGUL_T_COUNT == 0 && b > HANGUL_T_BASE &&
      b < HANGUL_T_BASE + HANGUL_T_COUNT)
    return a + (b - HANGUL_T_BASE);
  if (b < 0x300 || unknown_to_reference(a) || unknown_to_reference(b)) return -1;
  const utf8proc_property_t *pb = utf8proc_get_property(b);
  if (pb->comb_index == UINT16_MAX || pb->comb_index < 0x8000) return -1;
  if (utf8proc_get_property(a)->comb_index >= 0x8000) return -1;
  utf8proc_int32_t pair[2] = {a, b};
  if (utf8proc_normalize_utf32(pair, 2, UTF8PROC_COMPOSE | UTF8PROC_STABLE) != 1) return -1;
  return unknown_to_reference(pair[0]) ? -1 : pair[0];
}

/* Grows `array` (of `elem`-byte entries) to hold `need`; on failure returns it unchanged
 * and clears *ok. */
static void *grow(void *array, size_t *cap, size_t need, size_t elem, bool *ok) {
  if (need <= *cap) return array;
  size_t cap_new = *cap ? *cap : 64;
  while (cap_new < need) cap_new *= 2;
  void *p = realloc(array, cap_new * elem);
  if (!p) {
    *ok = false;
    return array;
  }
  *cap = cap_new;
  return p;
}

/* Work arrays in three sections of n_decomposed entries: the decomposed code points, the
 * recomposed output, the marks blocked from the current starter. */
static bool reserve_work(md_tok_nfc *nfc, size_t n_decomposed) {
  size_t need = 3 * n_decomposed + 1;
  if (need <= nfc->work_cap) return true;
  size_t cap = nfc->work_cap ? nfc->work_cap : 192;
  while (cap < need) cap *= 2;
  int32_t *cps = realloc(nfc->cps, cap * sizeof *cps);
  if (cps) nfc->cps = cps;
  int32_t *change = realloc(nfc->change, cap * sizeof *change);
  if (change) nfc->change = change;
  uint8_t *ccc = realloc(nfc->ccc, cap);
  if (ccc) nfc->ccc = ccc;
  if (!cps || !change || !ccc) return false;
  nfc->work_cap = cap;
  return true;
}

/* Stable sort of entries [lo, hi) by combining class: insertion sort for the usual short
 * runs, a counting sort for long ones (a long run of marks must not cost n^2). */
static void sort_run(md_tok_nfc *nfc, size_t lo, size_t hi, int32_t *tmp_cp, int32_t *tmp_change) {
  if (hi - lo < 32) {
    for (size_t i = lo + 1; i < hi; i++) {
      int32_t cp = nfc->cps[i], change = nfc->change[i];
      uint8_t ccc = nfc->ccc[i];
      size_t j = i;
      for (; j > lo && nfc->ccc[j - 1] > ccc; j--) {
        nfc->cps[j] = nfc->cps[j - 1];
        nfc->change[j] = nfc->change[j - 1];
        nfc->ccc[j] = nfc->ccc[j - 1];
      }
      nfc->cps[j] = cp;
      nfc->change[j] = change;
      nfc->ccc[j] = ccc;
    }
    return;
  }
  size_t start[257] = {0};
  for (size_t i = lo; i < hi; i++) start[nfc->ccc[i] + 1]++;
  for (int c = 0; c < 256; c++) start[c + 1] += start[c];
  for (size_t i = lo; i < hi; i++) {
    size_t at = start[nfc->ccc[i]]++;
    tmp_cp[at] = nfc->cps[i];
    tmp_change[at] = nfc->change[i];
  }
  for (size_t i = 0; i < hi - lo; i++) {
    nfc->cps[lo + i] = tmp_cp[i];
    nfc->change[lo + i] = tmp_change[i];
    nfc->ccc[lo + i] = combining_class(tmp_cp[i]);
  }
}

/* Decomposes the input characters into nfc->cps/change/ccc[0 .. *count) and puts each run of
 * non-starters in canonical order. Also records each input character's byte offset. */
static bool decompose(md_tok_nfc *nfc, const uint8_t *s, size_t len, size_t *n_in, size_t *count) {
  size_t chars = 0, n = 0;
  for (size_t i = 0; i < len; chars++) {
    bool ok = true;
    nfc->in_off = grow(nfc->in_off, &nfc->in_cap, chars + 2, sizeof *nfc->in_off, &ok);
    if (!ok || !reserve_work(nfc, n + MAX_DECOMPOSITION)) return false;
    nfc->in_off[chars] = (uint32_t)i;
    utf8proc_int32_t cp;
    i += (size_t)utf8proc_iterate(s + i, (utf8proc_ssize_t)(len - i), &cp);
    utf8proc_int32_t parts[MAX_DECOMPOSITION];
    utf8proc_ssize_t k = 1;
    parts[0] = cp;
    /* Below U+00C0 nothing decomposes. Inert characters are decomposed too: a precomposed
     * letter followed by a mark can recompose differently ("é" + dot below). */
    if (cp >= 0xC0 && !unknown_to_reference(cp)) {
      int boundclass = 0;
      k = utf8proc_decompose_char(cp, parts, MAX_DECOMPOSITION, UTF8PROC_DECOMPOSE, &boundclass);
      if (k < 1 || k > MAX_DECOMPOSITION) k = 1, parts[0] = cp;
    }
    for (utf8proc_ssize_t j = 0; j < k; j++, n++) {
      nfc->cps[n] = parts[j];
      nfc->change[n] = j == 0 ? 0 : 1;
      nfc->ccc[n] = combining_class(parts[j]);
    }
  }
  nfc->in_off[chars] = (uint32_t)len;
  /* Runs of non-starters, sorted with the two upper sections as scratch. */
  for (size_t i = 0; i < n;) {
    if (nfc->ccc[i] == 0) {
      i++;
      continue;
    }
    size_t j = i;
    while (j < n && nfc->ccc[j] != 0) j++;
    sort_run(nfc, i, j, nfc->cps + n, nfc->change + n);
    i = j;
  }
  *n_in = chars;
  *count = n;
  return true;
}

typedef struct recomposer {
  int32_t *out_cp, *out_change; /* the output section */
  size_t out_len;
  int32_t *buf_cp, *buf_change; /* marks blocked from the current starter */
  size_t buf_len;
} recomposer;

static void emit(recomposer *r, int32_t cp, int32_t change) {
  r->out_cp[r->out_len] = cp;
  r->out_change[r->out_len++] = change;
}

static void flush_buffer(recomposer *r) {
  for (size_t i = 0; i < r->buf_len; i++) emit(r, r->buf_cp[i], r->buf_change[i]);
  r->buf_len = 0;
}

static void buffer(recomposer *r, int32_t cp, int32_t change) {
  r->buf_cp[r->buf_len] = cp;
  r->buf_change[r->buf_len++] = change;
}

/* Canonical composition of nfc->cps[0 .. n), the state machine of the crate's
 * Recompositions: a starter waits as the "composee" and absorbs each following character
 * it composes with unless a mark of equal or higher class stands between them. */
static size_t recompose(md_tok_nfc *nfc, size_t n) {
  recomposer r = {.out_cp = nfc->cps + n,
                  .out_change = nfc->change + n,
                  .buf_cp = nfc->cps + 2 * n,
                  .buf_change = nfc->change + 2 * n};
  bool have = false;
  int32_t k_cp = 0, k_change = 0, last_ccc = -1;
  for (size_t i = 0; i < n; i++) {
    int32_t cp = nfc->cps[i], change = nfc->change[i], ccc = nfc->ccc[i];
    if (!have) {
      if (ccc != 0)
        emit(&r, cp, change);
      else
        have = true, k_cp = cp, k_change = change;
      continue;
    }
    if (last_ccc >= 0 && last_ccc >= ccc) { /* blocked */
      if (ccc == 0) {
        emit(&r, k_cp, k_change);
        flush_buffer(&r);
        k_cp = cp, k_change = change, last_ccc = -1;
      } else {
        buffer(&r, cp, change);
        last_ccc = ccc;
      }
      continue;
    }
    int32_t composed = compose(k_cp, cp);
    if (composed >= 0) {
      k_cp = composed;
      k_change = k_change + change - 1;
    } else if (last_ccc < 0 && ccc == 0) {
      emit(&r, k_cp, k_change);
      k_cp = cp, k_change = change;
    } else {
      buffer(&r, cp, change);
      last_ccc = ccc;
    }
  }
  if (have) emit(&r, k_cp, k_change);
  flush_buffer(&r);
  return r.out_len;
}

/* NormalizedString::transform over the recomposed characters: the UTF-8 text and, for each
 * byte, the original character range it is aligned to. */
static bool transform(md_tok_nfc *nfc, size_t n_in, size_t n_out, const int32_t *cps,
                      const int32_t *changes, uint32_t base) {
  bool ok = true;
  nfc->text = grow(nfc->text, &nfc->text_cap, 4 * n_out + 1, 1, &ok);
  nfc->align = grow(nfc->align, &nfc->align_cap, 8 * n_out + 2, sizeof *nfc->align, &ok);
  if (!ok) return false;
  size_t consumed = 0, len = 0;
  for (size_t i = 0; i < n_out; i++) {
    uint32_t start, end;
    if (changes[i] > 0) {
      start = consumed == 0 ? 0 : nfc->in_off[consumed - 1];
      end = consumed == 0 ? 0 : nfc->in_off[consumed];
    } else {
      size_t at = consumed < n_in ? consumed : n_in - 1;
      start = nfc->in_off[at];
      end = nfc->in_off[at + 1];
      consumed += 1 + (size_t)(-changes[i]);
      if (consumed > n_in) consumed = n_in;
    }
    utf8proc_ssize_t bytes = utf8proc_encode_char(cps[i], (utf8proc_uint8_t *)nfc->text + len);
    for (utf8proc_ssize_t b = 0; b < bytes; b++, len++) {
      nfc->align[2 * len] = base + start;
      nfc->align[2 * len + 1] = base + end;
    }
  }
  nfc->text[len] = '\0';
  nfc->len = len;
  return true;
}

md_status md_tok_nfc_run(md_tok_nfc *nfc, const char *text, size_t len, uint32_t base,
                         md_error *err) {
  size_t n_in = 0, n = 0;
  if (!decompose(nfc, (const uint8_t *)text, len, &n_in, &n) || !reserve_work(nfc, n))
    return md_fail(err, MD_E_NOMEM, "out of memory normalizing %zu bytes", len);
  size_t n_out = recompose(nfc, n);
  if (!transform(nfc, n_in, n_out, nfc->cps + n, nfc->change + n, base))
    return md_fail(err, MD_E_NOMEM, "out of memory normalizing %zu bytes", len);
  return MD_OK;
}

void md_tok_nfc_free(md_tok_nfc *nfc) {
  free(nfc->text);
  free(nfc->align);
  free(nfc->cps);
  free(nfc->change);
  free(nfc->ccc);
  free(nfc->in_off);
  memset(nfc, 0, sizeof *nfc);
}

char *md_tok_nfc_string(const char *text, size_t len, size_t *out_len) {
  md_tok_nfc nfc = {0};
  char *out = NULL;
  if (md_tok_nfc_run(&nfc, text, len, 0, NULL) == MD_OK) {
    out = malloc(nfc.len + 1);
    if (out) {
      memcpy(out, nfc.text, nfc.len + 1);
      *out_len = nfc.len;
    }
  }
  md_tok_nfc_free(&nfc);
  return out;
}
