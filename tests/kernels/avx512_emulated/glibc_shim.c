/* bochscpu-python's Linux wheel was linked against glibc 2.38, whose
 * headers map strtoull and sscanf to the C23 entry points
 * __isoc23_strtoull and __isoc23_sscanf; Debian 12 has glibc 2.36, which
 * lacks them. The emulator calls them on its own option strings (decimal
 * and hexadecimal numbers), where C23 and C17 agree (they differ only on
 * "0b" binary literals), so run.py preloads these two forwards. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

unsigned long long __isoc23_strtoull(const char *s, char **end, int base);
int __isoc23_sscanf(const char *s, const char *format, ...);

unsigned long long __isoc23_strtoull(const char *s, char **end, int base) {
  return strtoull(s, end, base);
}

int __isoc23_sscanf(const char *s, const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  int n = vsscanf(s, format, ap);
  va_end(ap);
  return n;
}
