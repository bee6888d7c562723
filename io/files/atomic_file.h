/* Atomic output files: everything is written to a temporary file beside the
 * target and renamed over it only once complete, so a failed or interrupted
 * run never leaves a partial file and never damages the previous one. */
#ifndef MD_IO_FILES_ATOMIC_FILE_H
#define MD_IO_FILES_ATOMIC_FILE_H

#include <stdio.h>

#include "base/error.h"

typedef struct md_atomic_file {
  FILE *fp;         /* write here */
  char *final_path; /* the name the file gets on commit */
  char *temp_path;  /* "<dir>/.<name>.XXXXXX", unlinked on abort; NULL when direct */
} md_atomic_file;

/* Creates the temporary file in the target's directory (same file system,
 * so rename(2) is atomic). A target that exists and is not a regular file
 * (/dev/null, /dev/stdout, a FIFO) is written directly instead: renaming
 * over it would replace the device or pipe with a plain file. */
md_status md_atomic_open(md_atomic_file *file, const char *path, md_error *err);

/* Flushes, fsyncs, closes and renames into place. On failure the temporary
 * file is removed and the target is untouched. Always releases `file`. */
md_status md_atomic_commit(md_atomic_file *file, md_error *err);

/* Closes and removes the temporary file; the target is untouched. Safe to
 * call on a zeroed or already committed struct. */
void md_atomic_abort(md_atomic_file *file);

/* Removes the temporary files of every output not yet committed or
 * aborted: for a handler of SIGTERM and SIGINT (calib/main.c), so that a
 * cancelled job leaves no ".<name>.XXXXXX" behind. Async-signal-safe (only
 * unlink(2)). */
void md_atomic_remove_pending(void);

/* Writes `len` bytes to `path` atomically. */
md_status md_write_file_atomic(const char *path, const void *data, size_t len, md_error *err);

#endif
