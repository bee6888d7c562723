/* Error reporting for library code.
 *
 * Library functions never exit and never print: they return an md_status and,
 * when given an md_error, fill it with one line that names the file, line,
 * column or tensor at fault, the kind of error (whose fault it is), and, as
 * fields for a caller that acts on them, the file, line and record (episode
 * id, region, tensor) where they apply. Nothing parses a message: a caller
 * that needs the episode id reads `record`. Only calib/cli.c turns a kind into
 * an exit code. */
#ifndef MD_BASE_ERROR_H
#define MD_BASE_ERROR_H

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

/* Whose fault an error is; calib/cli.c maps each kind to an exit code
 * (memdecay-calibrate(1), EXIT STATUS). */
typedef enum md_error_kind {
  MD_KIND_NONE = 0, /* no error */
  MD_KIND_USAGE,    /* the command line is wrong */
  MD_KIND_INPUT,    /* an input (file, setting, checkpoint) is missing, unreadable, malformed,
                       inconsistent or unsupported: the user can fix it */
  MD_KIND_IO,       /* writing an output, or another I/O step of the work, failed */
  MD_KIND_RESOURCE, /* the machine ran out of something (memory) */
  MD_KIND_COMPUTE,  /* a computation failed (no convergence, a singular matrix) */
  MD_KIND_DEVICE,   /* the accelerator is missing or a device call failed */
} md_error_kind;

#define MD_ERROR_MESSAGE_MAX 1024
#define MD_ERROR_FIELD_MAX 512

typedef struct md_error {
  md_status status;
  md_error_kind kind;
  char file[MD_ERROR_FIELD_MAX];   /* the file at fault; "" when none is known */
  size_t line;                     /* its line, from 1; 0 when none */
  char record[MD_ERROR_FIELD_MAX]; /* the record at fault (an episode id); "" when none */
  char message[MD_ERROR_MESSAGE_MAX];
} md_error;

/* Records `status`, its usual kind (md_status_kind) and a printf-style
 * message in `err` (which may be NULL), clears the fields, and returns
 * `status`, so that callers can write `return md_fail(...)`. */
md_status md_fail(md_error *err, md_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* As md_fail, with the kind given: a reader that cannot open its input fails
 * with MD_E_IO of kind MD_KIND_INPUT (the user named a file that is not
 * there), a writer with MD_E_IO of kind MD_KIND_IO. */
md_status md_fail_kind(md_error *err, md_status status, md_error_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The kind an error of `status` has unless its maker says otherwise:
 * format, invalid and unsupported are the input's, I/O is MD_KIND_IO, out of
 * memory MD_KIND_RESOURCE, numerical MD_KIND_COMPUTE, device MD_KIND_DEVICE. */
md_error_kind md_status_kind(md_status status);

/* Sets the fields of an error already recorded (each may be NULL or 0 to
 * leave it); returns its status. */
md_status md_error_at(md_error *err, const char *file, size_t line, const char *record);

/* An error met while a stage checks its inputs and settings, before it
 * starts the work: every kind but MD_KIND_RESOURCE becomes MD_KIND_INPUT
 * (a file that cannot be read there is one the user named). Returns its
 * status. */
md_status md_error_blame_input(md_error *err);

/* Prepends "context: " to the message already in `err`; returns its status.
 * Used to add the file name as an error travels up. */
md_status md_error_prefix(md_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void md_error_clear(md_error *err);

/* A short lower-case name for a status ("I/O error", "format error", ...). */
const char *md_status_name(md_status status);

/* "usage", "input", "I/O", "resource", "compute", "device" ("none"). */
const char *md_error_kind_name(md_error_kind kind);

#endif
