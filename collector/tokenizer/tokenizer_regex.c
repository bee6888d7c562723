/* The pre-tokenizer's split regex: `tokenizers` compiles it with Oniguruma (Ruby syntax,
 * UTF-8); we run it with PCRE2. The two engines agree on the constructs byte-level BPE
 * patterns use (alternation, classes, \p{..}, quantifiers, (?i:..), lookahead) with these
 * exceptions, which the translation below takes care of:
 *   \s, \S   Oniguruma: Unicode White_Space. PCRE2 (UCP): \p{Z} plus \h and \v, which adds
 *            U+180E. Spelled out as the White_Space list.
 *   \h, \H   Oniguruma: a hexadecimal digit. PCRE2: horizontal space. Spelled out.
 *   \v       Oniguruma: U+000B. PCRE2: vertical space. Spelled out.
 *   ^, $     Oniguruma: line anchors. PCRE2: compiled with PCRE2_MULTILINE.
 *   (?m)     Oniguruma: dot matches newline, which is PCRE2's (?s).
 * Constructs whose meaning differs and that byte-level patterns do not need (\w, \b, \R,
 * \X, \K, nested classes, class intersection, ...) are refused with their offset. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/tokenizer/tokenizer_internal.h"

/* Unicode White_Space (PropList.txt), Oniguruma's \s. */
#define WHITE_SPACE                                                                    \
  "\\x{09}-\\x{0D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
  "\\x{202F}\\x{205F}\\x{3000}"
#define HEX_DIGIT "0-9a-fA-F"

typedef struct translation {
  char *text;
  size_t len, cap;
  const char *where;
  md_error *err;
  bool failed;
} translation;

static void put(translation *t, const char *s, size_t n) {
  if (t->failed) return;
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 256;
    while (cap < t->len + n + 1) cap *= 2;
    char *text = realloc(t->text, cap);
    if (!text) {
      md_fail(t->err, MD_E_NOMEM, "%s: out of memory translating the pattern", t->where);
      t->failed = true;
      return;
    }
    t->text = text;
    t->cap = cap;
  }
  memcpy(t->text + t->len, s, n);
  t->len += n;
  t->text[t->len] = '\0';
}

static void put_str(translation *t, const char *s) { put(t, s, strlen(s)); }

static void refuse(translation *t, size_t at, const char *what) {
  if (t->failed) return;
  md_fail(t->err, MD_E_UNSUPPORTED,
          "%s: %s at offset %zu of the pattern is not supported (Oniguruma, which the "
          "tokenizers library uses, and PCRE2 disagree on it)",
          t->where, what, at);
  t->failed = true;
}

/* Length of the UTF-8 character that starts with byte c (1 for a stray continuation). */
static size_t char_len(unsigned char c) {
  return c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
}

/* Copies "\p{...}" / "\pL" starting at p[i] (the backslash); returns the next index. */
static size_t copy_property(translation *t, const char *p, size_t len, size_t i) {
  size_t end = i + 2;
  if (end < len && p[end] == '{') {
    while (end < len && p[end] != '}') end++;
    if (end < len) end++;
  } else if (end < len) {
    end += char_len((unsigned char)p[end]);
  }
  if (end > len) end = len;
  put(t, p + i, end - i);
  return end;
}

/* Handles the escape at p[i] (a backslash); returns the index after it. */
static size_t escape(translation *t, const char *p, size_t len, size_t i, bool in_class) {
  if (i + 1 >= len) {
    put(t, "\\", 1);
    return len;
  }
  char c = p[i + 1];
  switch (c) {
    case 's':
      put_str(t, in_class ? WHITE_SPACE : "[" WHITE_SPACE "]");
      return i + 2;
    case 'h':
      put_str(t, in_class ? HEX_DIGIT : "[" HEX_DIGIT "]");
      return i + 2;
    case 'v':
      put_str(t, "\\x{0B}");
      return i + 2;
    case 'S':
    case 'H':
      if (in_class)
        refuse(t, i, c == 'S' ? "\\S inside a character class" : "\\H inside a character class");
      else
        put_str(t, c == 'S' ? "[^" WHITE_SPACE "]" : "[^" HEX_DIGIT "]");
      return i + 2;
    case 'p':
    case 'P':
      return copy_property(t, p, len, i);
    case 'Q': {
      const char *end = NULL;
      for (size_t j = i + 2; j + 1 < len; j++)
        if (p[j] == '\\' && p[j + 1] == 'E') {
          end = p + j + 2;
          break;
        }
      size_t stop = end ? (size_t)(end - p) : len;
      put(t, p + i, stop - i);
      return stop;
    }
    default:
      break;
  }
  if (strchr("wWRXKGgkNOyY", c) || (c == 'b' && !in_class) || (c == 'B' && !in_class)) {
    char what[16];
    snprintf(what, sizeof what, "\\%c", c);
    refuse(t, i, what);
    return i + 2;
  }
  size_t n = 1 + char_len((unsigned char)c);
  if (i + n > len) n = len - i;
  put(t, p + i, n);
  return i + n;
}

/* "(?" followed by option letters: keeps i and x, maps Oniguruma's m (dot-all) to s. */
static size_t group_options(translation *t, const char *p, size_t len, size_t i) {
  size_t j = i + 2;
  put(t, "(?", 2);
  for (; j < len && p[j] != ':' && p[j] != ')'; j++) {
    char c = p[j];
    if (c == 'i' || c == 'x' || c == '-')
      put(t, &c, 1);
    else if (c == 'm')
      put(t, "s", 1);
    else {
      char what[32];
      snprintf(what, sizeof what, "the group option '%c'", c);
      refuse(t, j, what);
      return len;
    }
  }
  return j;
}

static bool is_option_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
}

/* Copies a character class starting at p[i] ('['); returns the index after its ']'. */
static size_t char_class(translation *t, const char *p, size_t len, size_t i) {
  size_t j = i + 1;
  put(t, "[", 1);
  if (j < len && p[j] == '^') put(t, "^", 1), j++;
  if (j < len && p[j] == ']') put(t, "]", 1), j++; /* a leading ']' is literal */
  while (j < len && !t->failed) {
    char c = p[j];
    if (c == ']') {
      put(t, "]", 1);
      return j + 1;
    }
    if (c == '\\') {
      j = escape(t, p, len, j, true);
    } else if (c == '[' && j + 1 < len && p[j + 1] == ':') {
      const char *close = strstr(p + j, ":]"); /* POSIX [:alpha:] */
      size_t stop = close && (size_t)(close - p) < len ? (size_t)(close - p) + 2 : len;
      put(t, p + j, stop - j);
      j = stop;
    } else if (c == '[') {
      refuse(t, j, "a nested character class");
    } else if (c == '&' && j + 1 < len && p[j + 1] == '&') {
      refuse(t, j, "class intersection (&&)");
    } else {
      size_t n = char_len((unsigned char)c);
      if (j + n > len) n = len - j;
      put(t, p + j, n);
      j += n;
    }
  }
  return j;
}

md_status md_tok_regex_translate(const char *p, size_t len, const char *where, char **out,
                                 md_error *err) {
  translation t = {.where = where, .err = err};
  put(&t, "", 0);
  for (size_t i = 0; i < len && !t.failed;) {
    char c = p[i];
    if (c == '\\') {
      i = escape(&t, p, len, i, false);
    } else if (c == '[') {
      i = char_class(&t, p, len, i);
    } else if (c == '(' && i + 2 < len && p[i + 1] == '?' && is_option_letter(p[i + 2])) {
      i = group_options(&t, p, len, i);
    } else {
      size_t n = char_len((unsigned char)c);
      if (i + n > len) n = len - i;
      put(&t, p + i, n);
      i += n;
    }
  }
  if (t.failed) {
    free(t.text);
    return err ? err->status : MD_E_UNSUPPORTED;
  }
  *out = t.text;
  return MD_OK;
}

md_status md_tok_regex_compile(const char *pattern, size_t len, bool literal, const char *where,
                               pcre2_code **out, md_error *err) {
  pcre2_compile_context *context = pcre2_compile_context_create(NULL);
  if (!context) return md_fail(err, MD_E_NOMEM, "%s: out of memory", where);
  /* Oniguruma's newline is LF only: '.', '^' and '$' must agree. */
  pcre2_set_newline(context, PCRE2_NEWLINE_LF);
  uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP | PCRE2_MULTILINE);
  int code;
  PCRE2_SIZE offset;
  pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, options, &code, &offset, context);
  pcre2_compile_context_free(context);
  if (!re) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(code, message, sizeof message);
    return md_fail(err, MD_E_FORMAT, "%s: PCRE2 rejects the pattern at offset %zu: %s", where,
                   (size_t)offset, (const char *)message);
  }
  /* Without JIT (not built in, or no executable memory) pcre2_match interprets. */
  (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
  *out = re;
  return MD_OK;
}
