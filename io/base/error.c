#include "io/base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

md_status md_fail(md_error *err, md_status status, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    err->status = status;
  }
  return status;
}

md_status md_error_prefix(md_error *err, const char *fmt, ...) {
  if (!err) return MD_E_INVALID;
  char prefix[MD_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  /* Room for both parts, then cut to the message size: a long prefix must
   * not trip -Wformat-truncation, and the message stays NUL-terminated. */
  char joined[2 * MD_ERROR_MESSAGE_MAX + 2];
  snprintf(joined, sizeof joined, "%s: %s", prefix, err->message);
  size_t len = strlen(joined);
  if (len >= sizeof err->message) len = sizeof err->message - 1;
  memcpy(err->message, joined, len);
  err->message[len] = '\0';
  return err->status;
}

void md_error_clear(md_error *err) {
  if (!err) return;
  err->status = MD_OK;
  err->message[0] = '\0';
}

const char *md_status_name(md_status status) {
  switch (status) {
    case MD_OK: return "ok";
    case MD_E_IO: return "I/O error";
    case MD_E_FORMAT: return "format error";
    case MD_E_INVALID: return "invalid value";
    case MD_E_UNSUPPORTED: return "unsupported";
    case MD_E_NOMEM: return "out of memory";
    case MD_E_NUMERIC: return "numerical failure";
    case MD_E_DEVICE: return "device error";
  }
  return "unknown error";
}
