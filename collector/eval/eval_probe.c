/* Answer scoring for the eviction-probe evaluation (collector/eval/eval.h): the
 * text normalisation and the whole-word containment test. */
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
