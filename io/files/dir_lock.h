/* One writer per directory. A command that writes into a run or work
 * directory holds an advisory lock on its file .memdecay.lock (flock(2),
 * released by the kernel however the process ends: exit, kill -9, a node
 * lost with its processes) for as long as it writes, and removes the file
 * when it is done (a killed writer leaves it; the next one takes it over);
 * a second writer is refused at once, with the holder's host and process
 * id. Readers of a finished directory take no lock. */
#ifndef MD_IO_FILES_DIR_LOCK_H
#define MD_IO_FILES_DIR_LOCK_H

#include <stdbool.h>

#include "base/error.h"

/* The lock file's name inside a locked directory (skipped by whoever asks
 * whether a directory is empty). */
#define MD_DIR_LOCK_NAME ".memdecay.lock"

typedef struct md_dir_lock {
  int fd;     /* -1: not held */
  char *path; /* the lock file */
} md_dir_lock;

/* A lock not held: initialise every md_dir_lock with it. */
#define MD_DIR_LOCK_NONE ((md_dir_lock){.fd = -1, .path = NULL})

/* Takes the lock of the existing directory dir without waiting. MD_E_INVALID
 * (kind usage) naming the holder when another process holds it; MD_E_IO
 * when the lock file cannot be made. */
md_status md_dir_lock_take(const char *dir, md_dir_lock *lock, md_error *err);

/* Whether dir holds nothing but, perhaps, its lock file: 1 yes, 0 no, -1
 * when it cannot be read as a directory (errno says why: ENOENT when it
 * does not exist). */
int md_dir_lock_empty(const char *dir);

/* Removes the lock file and releases the lock. Safe on MD_DIR_LOCK_NONE,
 * and twice. */
void md_dir_lock_release(md_dir_lock *lock);

#endif
