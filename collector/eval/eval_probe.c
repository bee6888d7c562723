/* Answer scoring for the eviction-probe evaluation (collector/eval/eval.h): the
 * text normalisation and the whole-word containment test, and retention
 * matching, which finds an answer in the prompt by the same normalisation
 * and maps it back to the prompt's bytes and tokens. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "collector/eval/eval.h"

/* Copies `text` with every byte that does not start a valid UTF-8 sequence
 * replaced by a space (utf8proc_map refuses invalid input; a decoded answer
 * may end inside a character). */
static char *sanitise(const char *text, size_t length) {
  char *out = malloc(length + 1);
  if (!out) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < length;) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t n = utf8proc_iterate((const utf8proc_uint8_t *)text + i,
                                          (utf8proc_ssize_t)(length - i), &cp);
    if (n <= 0 || cp == 0) {
      out[o++] = ' ';
      i++;
      continue;
    }
    memcpy(out + o, text + i, (size_t)n);
    o += (size_t)n;
    i += (size_t)n;
  }
  out[o] = '\0';
  return out;
}

static bool is_word_char(utf8proc_int32_t cp) {
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

char *md_eval_normalise(const char *text, size_t length) {
  char *clean = sanitise(text, length);
  if (!clean) return NULL;
  utf8proc_uint8_t *folded = NULL;
  utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)clean, 0, &folded,
                                    UTF8PROC_NULLTERM | UTF8PROC_STABLE | UTF8PROC_COMPOSE |
                                        UTF8PROC_COMPAT | UTF8PROC_CASEFOLD);
  free(clean);
  if (n < 0) return NULL;
  /* Words joined by single spaces, one space at each end. */
  char *out = malloc((size_t)n + 3);
  if (!out) {
    free(folded);
    return NULL;
  }
  size_t o = 0;
  out[o++] = ' ';
  for (utf8proc_ssize_t i = 0; i < n;) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate(folded + i, n - i, &cp);
    if (k <= 0) break; /* cannot happen: utf8proc_map wrote valid UTF-8 */
    if (is_word_char(cp)) {
      memcpy(out + o, folded + i, (size_t)k);
      o += (size_t)k;
    } else if (out[o - 1] != ' ') {
      out[o++] = ' ';
    }
    i += k;
  }
  if (out[o - 1] != ' ') out[o++] = ' ';
  out[o] = '\0';
  free(folded);
  return out;
}

bool md_eval_answer_matches(const char *answer, const char *output, size_t output_length) {
  char *a = md_eval_normalise(answer, strlen(answer));
  char *o = md_eval_normalise(output, output_length);
  bool found = a && o && strcmp(a, " ") != 0 && strstr(o, a) != NULL;
  free(a);
  free(o);
  return found;
}

/* ---- retention matching --------------------------------------------------------- */

/* md_eval_normalise's text with, for every byte of it, the original bytes
 * [from, to) it came from. Normalised one grapheme cluster at a time (the
 * unit NFKC composes within, and case folding maps characters one by one),
 * so every output byte has one cluster as its origin; the concatenation is
 * md_eval_normalise's text (tests/eval/test_eval_retention.c checks it on
 * combining marks, Hangul, compatibility and folding cases). */
typedef struct mapped_text {
  char *text;
  size_t length;
  size_t *from, *to;
} mapped_text;

static void mapped_free(mapped_text *m) {
  free(m->text);
  free(m->from);
  free(m->to);
  memset(m, 0, sizeof *m);
}

static bool mapped_reserve(mapped_text *m, size_t *capacity, size_t more) {
  if (m->length + more <= *capacity) return true;
  size_t grown = 2 * *capacity + more + 16;
  char *text = realloc(m->text, grown + 1);
  if (text) m->text = text;
  size_t *from = realloc(m->from, grown * sizeof *from);
  if (from) m->from = from;
  size_t *to = realloc(m->to, grown * sizeof *to);
  if (to) m->to = to;
  if (!text || !from || !to) return false;
  *capacity = grown;
  return true;
}

static bool mapped_push(mapped_text *m, size_t *capacity, const char *bytes, size_t n, size_t from,
                        size_t to) {
  if (!mapped_reserve(m, capacity, n)) return false;
  for (size_t i = 0; i < n; i++) {
    m->text[m->length] = bytes[i];
    m->from[m->length] = from;
    m->to[m->length] = to;
    m->length++;
  }
  return true;
}

static bool mapped_space(mapped_text *m, size_t *capacity, size_t at) {
  if (m->length && m->text[m->length - 1] == ' ') return true;
  return mapped_push(m, capacity, " ", 1, at, at);
}

/* One cluster [begin, end) of the sanitised text: folded, its letters and
 * digits kept, every other run one space. */
static bool mapped_cluster(mapped_text *m, size_t *capacity, const char *clean, size_t begin,
                           size_t end) {
  utf8proc_uint8_t *folded = NULL;
  utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)clean + begin,
                                    (utf8proc_ssize_t)(end - begin), &folded,
                                    UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT |
                                        UTF8PROC_CASEFOLD);
  if (n < 0) return false;
  bool ok = true;
  for (utf8proc_ssize_t i = 0; ok && i < n;) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate(folded + i, n - i, &cp);
    if (k <= 0) break;
    ok = is_word_char(cp) ? mapped_push(m, capacity, (const char *)folded + i, (size_t)k, begin, end)
                          : mapped_space(m, capacity, begin);
    i += k;
  }
  free(folded);
  return ok;
}

static bool normalise_mapped(const char *text, size_t length, mapped_text *m) {
  memset(m, 0, sizeof *m);
  /* sanitise() replaces byte for byte: its offsets are the original's. */
  char *clean = sanitise(text, length);
  size_t capacity = 0;
  bool ok = clean && mapped_space(m, &capacity, 0);
  utf8proc_int32_t state = 0, previous = -1;
  size_t cluster = 0;
  for (size_t i = 0; ok && i < length;) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)clean + i,
                                          (utf8proc_ssize_t)(length - i), &cp);
    if (k <= 0) { /* cannot happen: sanitised */
      ok = false;
      break;
    }
    if (previous >= 0 && utf8proc_grapheme_break_stateful(previous, cp, &state)) {
      ok = mapped_cluster(m, &capacity, clean, cluster, i);
      cluster = i;
    }
    previous = cp;
    i += (size_t)k;
  }
  if (ok && length > cluster) ok = mapped_cluster(m, &capacity, clean, cluster, length);
  if (ok) ok = mapped_space(m, &capacity, length);
  if (ok) m->text[m->length] = '\0';
  free(clean);
  if (!ok) mapped_free(m);
  return ok;
}

md_status md_eval_answer_spans(const char *text, size_t length, const char *answer,
                               md_eval_span **spans, size_t *n_spans) {
  *spans = NULL;
  *n_spans = 0;
  char *a = md_eval_normalise(answer, strlen(answer));
  if (!a) return MD_E_NOMEM;
  size_t alen = strlen(a);
  if (alen < 3) { /* " ": the answer has no word, and scoring never finds it */
    free(a);
    return MD_OK;
  }
  mapped_text m;
  if (!normalise_mapped(text, length, &m)) {
    free(a);
    return MD_E_NOMEM;
  }
  md_status s = MD_OK;
  size_t capacity = 0;
  /* Every occurrence, overlapping ones too (each starts at its own space). */
  for (const char *at = strstr(m.text, a); at; at = strstr(at + 1, a)) {
    size_t first = (size_t)(at - m.text) + 1, last = first + alen - 3;
    if (*n_spans == capacity) {
      capacity = capacity ? 2 * capacity : 4;
      md_eval_span *grown = realloc(*spans, capacity * sizeof *grown);
      if (!grown) {
        s = MD_E_NOMEM;
        break;
      }
      *spans = grown;
    }
    (*spans)[(*n_spans)++] = (md_eval_span){m.from[first], m.to[last]};
  }
  if (s != MD_OK) {
    free(*spans);
    *spans = NULL;
    *n_spans = 0;
  }
  mapped_free(&m);
  free(a);
  return s;
}

md_status md_eval_answer_positions(const md_episode_tokens *t, const char *region,
                                   const char *answer, int64_t **positions, size_t *n_positions) {
  const md_chat_prompt *pr = &t->prompt;
  *positions = calloc(t->prompt_tokens + 1, sizeof **positions);
  *n_positions = 0;
  if (!*positions) return MD_E_NOMEM;
  for (size_t sp = 0; sp < pr->n_spans;) {
    if (strcmp(pr->spans[sp].region, region) != 0) {
      sp++;
      continue;
    }
    size_t run_begin = pr->spans[sp].start, run_end = pr->spans[sp].end;
    while (sp + 1 < pr->n_spans && !strcmp(pr->spans[sp + 1].region, region))
      run_end = pr->spans[++sp].end;
    sp++;
    md_eval_span *found = NULL;
    size_t n_found = 0;
    if (md_eval_answer_spans(pr->text + run_begin, run_end - run_begin, answer, &found,
                             &n_found) != MD_OK) {
      free(*positions);
      *positions = NULL;
      return MD_E_NOMEM;
    }
    for (size_t f = 0; f < n_found; f++) {
      size_t a = run_begin + found[f].begin, b = run_begin + found[f].end;
      for (size_t i = 0; i < t->prompt_tokens; i++) {
        size_t start = t->starts[i];
        size_t end = i + 1 < t->prompt_tokens ? t->starts[i + 1] : pr->length;
        if (end < start) end = start;
        bool overlaps = start < b && (end > a || (end == start && start >= a));
        if (!overlaps) continue;
        if (*n_positions && (*positions)[*n_positions - 1] >= (int64_t)i) continue;
        (*positions)[(*n_positions)++] = (int64_t)i;
      }
    }
    free(found);
  }
  return MD_OK;
}
