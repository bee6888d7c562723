#include "io/base/csv.h"

#include <string.h>

bool md_csv_needs_quotes(const char *text, size_t length) {
  if (length == 0) return false;
  if (strchr(" \t", text[0]) || strchr(" \t", text[length - 1])) return true;
  for (size_t i = 0; i < length; i++)
    if (text[i] == ',' || text[i] == '"' || text[i] == '\r' || text[i] == '\n') return true;
  return false;
}

int md_csv_write_field(FILE *fp, const char *text, size_t length) {
  if (!md_csv_needs_quotes(text, length)) return fwrite(text, 1, length, fp) == length ? 0 : -1;
  if (fputc('"', fp) == EOF) return -1;
  for (size_t i = 0; i < length; i++) {
    if (text[i] == '"' && fputc('"', fp) == EOF) return -1;
    if (fputc(text[i], fp) == EOF) return -1;
  }
  return fputc('"', fp) == EOF ? -1 : 0;
}

bool md_csv_header_repeat(const char *const *names, size_t n, size_t *first, size_t *repeat) {
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < i; j++) {
      if (!strcmp(names[i], names[j])) {
        *first = j;
        *repeat = i;
        return true;
      }
    }
  }
  return false;
}
