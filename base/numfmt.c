#include "base/numfmt.h"

#include <jansson.h>

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *md_format_shortest(char out[MD_NUMBER_TEXT_MAX], double value) {
  out[0] = '\0';
  if (!isfinite(value)) return out;
  double magnitude = fabs(value);
  /* Whole numbers below 1e15 are exactly their digits. */
  if (magnitude < 1e15 && value == trunc(value)) {
    snprintf(out, MD_NUMBER_TEXT_MAX, "%.0f", value);
    return out;
  }
  /* %g turns to exponent form once the exponent reaches the precision; keep
   * plain digits for values up to 1e17 (30, not 3e+01). */
  int min_precision = 1;
  if (magnitude >= 1.0 && magnitude < 1e17) min_precision = (int)floor(log10(magnitude)) + 1;
  /* The search starts at 15 digits: when fewer digits round-trip, the
   * nearest 15-digit decimal is that shorter decimal padded with zeros
   * (it lies within half an ulp of the value, 1.1e-16 relative, and 15-digit
   * decimals are at least 1e-15 relative apart), which %g prints without
   * the zeros: the same text as the shortest precision, in 1 to 3 tries
   * instead of up to 17. Subnormals have fewer significant bits, so there
   * the argument fails: they are searched from the start. */
  int first = magnitude < DBL_MIN || min_precision > 15 ? min_precision : 15;
  for (int precision = first; precision <= 17; precision++) {
    snprintf(out, MD_NUMBER_TEXT_MAX, "%.*g", precision, value);
    if (strtod(out, NULL) == value) break;
  }
  return out;
}

static bool is_number_char(char c) {
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/* Writes the shortest form of number text [start, end) at `out`; returns
 * the length written (never more than end - start). */
static size_t shorten_one(char *out, const char *start, const char *end) {
  size_t len = (size_t)(end - start);
  char original[64];
  if (len >= sizeof original) {
    memmove(out, start, len);
    return len;
  }
  memcpy(original, start, len);
  original[len] = '\0';
  bool is_real = strpbrk(original, ".eE") != NULL;
  char shortest[MD_NUMBER_TEXT_MAX + 2];
  md_format_shortest(shortest, strtod(original, NULL));
  if (is_real && !strpbrk(shortest, ".e")) strcat(shortest, ".0");
  size_t short_len = strlen(shortest);
  if (!is_real || short_len == 0 || short_len > len) {
    memmove(out, start, len);
    return len;
  }
  memcpy(out, shortest, short_len);
  return short_len;
}

void md_json_shorten_numbers(char *json) {
  char *out = json;
  const char *in = json;
  bool in_string = false;
  while (*in) {
    if (in_string) {
      if (*in == '\\' && in[1]) {
        *out++ = *in++;
      } else if (*in == '"') {
        in_string = false;
      }
      *out++ = *in++;
    } else if (*in == '"') {
      in_string = true;
      *out++ = *in++;
    } else if (*in == '-' || (*in >= '0' && *in <= '9')) {
      const char *end = in;
      while (is_number_char(*end)) end++;
      out += shorten_one(out, in, end);
      in = end;
    } else {
      *out++ = *in++;
    }
  }
  *out = '\0';
}

char *md_json_dumps_line(const json_t *value, bool compact) {
  char *text = json_dumps(value, JSON_REAL_PRECISION(17) | (compact ? JSON_COMPACT : 0) |
                                     JSON_ENCODE_ANY);
  if (text) md_json_shorten_numbers(text);
  return text;
}

char *md_json_dumps_shortest(const json_t *root) {
  char *dumped = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
  if (!dumped) return NULL;
  md_json_shorten_numbers(dumped);
  size_t len = strlen(dumped);
  char *with_newline = realloc(dumped, len + 2);
  if (!with_newline) {
    free(dumped);
    return NULL;
  }
  with_newline[len] = '\n';
  with_newline[len + 1] = '\0';
  return with_newline;
}
