/* Error reporting for library code.
 *
 * Library functions never exit and never print: they return an md_status and,
 * when given an md_error, fill it with one line that names the file, line,
 * column or tensor at fault.  Only calib/ turns a status into an exit code. */
#ifndef MD_IO_BASE_ERROR_H
#define MD_IO_BASE_ERROR_H

#include <stddef.h>

typedef enum md_status {
  MD_OK = 0,
  MD_E_IO,          /* a file could not be opened, read, written or renamed */
  MD_E_FORMAT,      /* input is malformed (syntax, missing field, bad value) */
  MD_E_INVALID,     /* arguments or values out of range or inconsistent */
  MD_E_UNSUPPORTED, /* well-formed input that this tool does not handle */
  MD_E_NOMEM,       /* an allocation failed */
  MD_E_NUMERIC,     /* an estimate could not be computed (no convergence, singular) */
  MD_E_DEVICE,      /* the accelerator is missing or a device call failed */
} md_status;

#define MD_ERROR_MESSAGE_MAX 1024

typedef struct md_error {
  md_status status;
  char message[MD_ERROR_MESSAGE_MAX];
} md_error;

/* Records `status` and a printf-style message in `err` (which may be NULL)
 * and returns `status`, so that callers can write `return md_fail(...)`. */
md_status md_fail(md_error *err, md_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "context: " to the message already in `err`; returns its status.
 * Used to add the file name as an error travels up. */
md_status md_error_prefix(md_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void md_error_clear(md_error *err);

/* A short lower-case name for a status ("I/O error", "format error", ...). */
const char *md_status_name(md_status status);

#endif
