/* Atomic output files: everything is written to a temporary file beside the
 * target and renamed over it only once complete, so a failed or interrupted
 * run never leaves a partial file and never damages the previous one.
 *
 * Temporaries a writer could not remove (kill -9, a node lost) are removed
 * by the next writer of the same target: every writer holds an exclusive
 * flock(2) on its temporary ".<name>.XXXXXX" from its creation until the
 * rename (or removal), and the kernel releases it however the writer dies,
 * so a temporary of the target that can be locked has no writer left.
 * Nothing else is removed: not a live writer's temporary (its lock is
 * held), not a file of another name or another pattern, not one that is
 * not a regular file, and nothing on a file system that refuses locks. */
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
 * so rename(2) is atomic), locked, after removing the target's stale
 * temporaries (above). A target that exists and is not a regular file
 * (/dev/null, /dev/stdout, a FIFO) is written directly instead: renaming
 * over it would replace the device or pipe with a plain file. */
md_status md_atomic_open(md_atomic_file *file, const char *path, md_error *err);

/* Flushes, fsyncs, renames into place and closes (the lock is held until
 * the temporary's name is gone). On a failure before the rename the
 * temporary file is removed and the target is untouched; a close that
 * fails after it (the data already fsynced) is still reported. Always
 * releases `file`. */
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
