#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void vrecord(md_error *err, md_status status, md_error_kind kind, const char *fmt,
                    va_list ap) {
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  err->status = status;
  err->kind = kind;
  err->file[0] = '\0';
  err->line = 0;
  err->record[0] = '\0';
}

md_status md_fail(md_error *err, md_status status, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vrecord(err, status, md_status_kind(status), fmt, ap);
    va_end(ap);
  }
  return status;
}

md_status md_fail_kind(md_error *err, md_status status, md_error_kind kind, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vrecord(err, status, kind, fmt, ap);
    va_end(ap);
  }
  return status;
}

md_error_kind md_status_kind(md_status status) {
  switch (status) {
    case MD_OK: return MD_KIND_NONE;
    case MD_E_FORMAT:
    case MD_E_INVALID:
    case MD_E_UNSUPPORTED: return MD_KIND_INPUT;
    case MD_E_IO: return MD_KIND_IO;
    case MD_E_NOMEM: return MD_KIND_RESOURCE;
    case MD_E_NUMERIC: return MD_KIND_COMPUTE;
    case MD_E_DEVICE: return MD_KIND_DEVICE;
  }
  return MD_KIND_IO;
}

static void copy_field(char *out, size_t size, const char *text) {
  size_t len = strlen(text);
  if (len >= size) len = size - 1;
  memcpy(out, text, len);
  out[len] = '\0';
}

md_status md_error_at(md_error *err, const char *file, size_t line, const char *record) {
  if (!err) return MD_E_INVALID;
  if (file) copy_field(err->file, sizeof err->file, file);
  if (line) err->line = line;
  if (record) copy_field(err->record, sizeof err->record, record);
  return err->status;
}

md_status md_error_blame_input(md_error *err) {
  if (!err) return MD_E_INVALID;
  if (err->status != MD_OK && err->kind != MD_KIND_RESOURCE) err->kind = MD_KIND_INPUT;
  return err->status;
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
  err->kind = MD_KIND_NONE;
  err->file[0] = '\0';
  err->line = 0;
  err->record[0] = '\0';
  err->message[0] = '\0';
}

const char *md_error_kind_name(md_error_kind kind) {
  switch (kind) {
    case MD_KIND_NONE: return "none";
    case MD_KIND_USAGE: return "usage";
    case MD_KIND_INPUT: return "input";
    case MD_KIND_IO: return "I/O";
    case MD_KIND_RESOURCE: return "resource";
    case MD_KIND_COMPUTE: return "compute";
    case MD_KIND_DEVICE: return "device";
  }
  return "unknown";
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
