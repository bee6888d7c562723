#include "io/files/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The temporary files not yet committed or aborted, for
 * md_atomic_remove_pending (a signal handler). Slots are claimed and freed
 * atomically: outputs may be opened from several threads. */
#define MD_ATOMIC_PENDING 64
static char *pending[MD_ATOMIC_PENDING];

static void track(char *temp) {
  for (int i = 0; i < MD_ATOMIC_PENDING; i++) {
    char *expected = NULL;
    if (__atomic_compare_exchange_n(&pending[i], &expected, temp, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST))
      return;
  }
  /* All slots taken: this file is not removed on a signal (still never
   * renamed into place, so no partial output either). */
}

static void untrack(const char *temp) {
  for (int i = 0; temp && i < MD_ATOMIC_PENDING; i++) {
    char *expected = (char *)temp;
    if (__atomic_compare_exchange_n(&pending[i], &expected, NULL, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST))
      return;
  }
}

void md_atomic_remove_pending(void) {
  for (int i = 0; i < MD_ATOMIC_PENDING; i++) {
    char *temp = __atomic_load_n(&pending[i], __ATOMIC_SEQ_CST);
    if (temp) unlink(temp);
  }
}

static char *temp_name_for(const char *path) {
  const char *slash = strrchr(path, '/');
  size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
  const char *base = path + dir_len;
  size_t len = dir_len + 1 + strlen(base) + 8 + 1;
  char *name = malloc(len);
  if (!name) return NULL;
  snprintf(name, len, "%.*s.%s.XXXXXX", (int)dir_len, path, base);
  return name;
}

/* Targets such as /dev/null or a FIFO cannot be replaced by rename. */
static bool is_special_file(const char *path) {
  struct stat info;
  return stat(path, &info) == 0 && !S_ISREG(info.st_mode) && !S_ISDIR(info.st_mode);
}

static md_status open_direct(md_atomic_file *file, const char *path, md_error *err) {
  file->final_path = strdup(path);
  if (!file->final_path) return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  file->fp = fopen(path, "wb");
  if (!file->fp) {
    int saved = errno;
    md_atomic_abort(file);
    return md_fail(err, MD_E_IO, "%s: %s", path, strerror(saved));
  }
  return MD_OK;
}

/* Whether `name` is a temporary of the target `base`: ".BASE." and the six
 * letters and digits mkstemp puts in place of XXXXXX, nothing else. */
static bool is_temp_of(const char *name, const char *base) {
  size_t n = strlen(name), b = strlen(base);
  if (n != b + 8 || name[0] != '.' || strncmp(name + 1, base, b) != 0 || name[b + 1] != '.')
    return false;
  for (size_t i = b + 2; i < n; i++) {
    char c = name[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return false;
  }
  return true;
}

/* Whether `fd` is still the file named `path` (not unlinked, not replaced). */
static bool still_named(int fd, const char *path) {
  struct stat open_info, named;
  return fstat(fd, &open_info) == 0 && stat(path, &named) == 0 &&
         open_info.st_dev == named.st_dev && open_info.st_ino == named.st_ino;
}

/* Removes the temporaries of `path` whose writer is dead. A writer holds an
 * exclusive flock(2) on its temporary from creation until it is renamed
 * into place or removed, and the kernel drops the lock however the writer
 * ends (kill -9 included; on NFS when the writer's host lets its lease
 * lapse). So a temporary of ours that can be locked has no writer: the
 * lock is taken, the name checked to be still that file, then unlinked.
 * One that cannot be locked (a live writer, another process's lock, a file
 * system without locks) is kept, and so is every file not named like ours
 * or not a regular file. Best effort: nothing here fails the output. */
static void remove_stale(const char *path) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  char *dir_path = slash ? strndup(path, (size_t)(slash - path) + 1) : strdup("./");
  if (!dir_path || !*base) {
    free(dir_path);
    return;
  }
  DIR *dir = opendir(dir_path);
  struct dirent *entry;
  while (dir && (entry = readdir(dir))) {
    if (!is_temp_of(entry->d_name, base)) continue;
    size_t size = strlen(dir_path) + strlen(entry->d_name) + 1;
    char *temp = malloc(size);
    if (!temp) break;
    snprintf(temp, size, "%s%s", dir_path, entry->d_name);
    int fd = open(temp, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat info;
    if (fd >= 0 && fstat(fd, &info) == 0 && S_ISREG(info.st_mode) &&
        flock(fd, LOCK_EX | LOCK_NB) == 0 && still_named(fd, temp))
      unlink(temp);
    if (fd >= 0) close(fd); /* drops the lock */
    free(temp);
  }
  if (dir) closedir(dir);
  free(dir_path);
}

/* Creates the temporary and takes its lock. A sweeper (remove_stale of
 * another process) may lock and unlink a temporary between its creation
 * and our lock: then the lock is refused, or taken on a file no longer
 * named, and a new name is drawn. Where the file system has no locks the
 * file is kept unlocked (sweepers cannot lock it either, so it is never
 * taken for stale). The temporary is tracked for md_atomic_remove_pending
 * as soon as it exists, with the termination signals held back in this
 * thread until then: a SIGTERM between the file's creation and its
 * tracking would leave it behind. (Another thread of the process may still
 * take the signal in those few instructions; the next writer of the output
 * then removes the dead writer's unlocked temporary, remove_stale.) */
static int create_locked(char *temp_path, const char *pattern) {
  sigset_t termination, previous;
  sigemptyset(&termination);
  sigaddset(&termination, SIGTERM);
  sigaddset(&termination, SIGINT);
  sigaddset(&termination, SIGHUP);
  for (int attempt = 0; attempt < 16; attempt++) {
    strcpy(temp_path, pattern);
    bool held = pthread_sigmask(SIG_BLOCK, &termination, &previous) == 0;
    int fd = mkstemp(temp_path);
    if (fd >= 0) track(temp_path);
    if (held) pthread_sigmask(SIG_SETMASK, &previous, NULL);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) return fd; /* no locks here */
      untrack(temp_path);
      close(fd);
      continue;
    }
    if (still_named(fd, temp_path)) return fd;
    untrack(temp_path);
    close(fd);
  }
  errno = EAGAIN;
  return -1;
}

md_status md_atomic_open(md_atomic_file *file, const char *path, md_error *err) {
  memset(file, 0, sizeof *file);
  if (is_special_file(path)) return open_direct(file, path, err);
  file->final_path = strdup(path);
  file->temp_path = temp_name_for(path);
  char *pattern = file->temp_path ? strdup(file->temp_path) : NULL;
  if (!file->final_path || !file->temp_path || !pattern) {
    free(pattern);
    md_atomic_abort(file);
    return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  }
  remove_stale(path);
  int fd = create_locked(file->temp_path, pattern);
  free(pattern);
  if (fd < 0) {
    int saved = errno;
    free(file->temp_path);
    file->temp_path = NULL;
    md_atomic_abort(file);
    return md_fail(err, MD_E_IO, "%s: cannot create a temporary file beside it: %s", path,
                   strerror(saved));
  }
  file->fp = fdopen(fd, "wb");
  if (!file->fp) {
    int saved = errno;
    unlink(file->temp_path);
    close(fd);
    md_atomic_abort(file);
    return md_fail(err, MD_E_IO, "%s: %s", path, strerror(saved));
  }
  return MD_OK;
}

static void release(md_atomic_file *file) {
  untrack(file->temp_path);
  free(file->final_path);
  free(file->temp_path);
  file->final_path = file->temp_path = NULL;
  file->fp = NULL;
}

static md_status commit_direct(md_atomic_file *file, md_error *err) {
  int failed = fflush(file->fp) != 0 || ferror(file->fp);
  int saved = errno;
  if (fclose(file->fp) != 0 && !failed) {
    failed = 1;
    saved = errno;
  }
  file->fp = NULL;
  if (failed) md_fail(err, MD_E_IO, "%s: write failed: %s", file->final_path, strerror(saved));
  release(file);
  return failed ? MD_E_IO : MD_OK;
}

md_status md_atomic_commit(md_atomic_file *file, md_error *err) {
  if (!file->temp_path) return commit_direct(file, err);
  const char *what = NULL;
  int saved = 0;
  if (fflush(file->fp) != 0 || ferror(file->fp)) {
    what = "write";
  } else if (fsync(fileno(file->fp)) != 0) {
    what = "fsync";
  }
  if (what) saved = errno;
  /* mkstemp creates 0600; outputs are ordinary files, so honour the umask. */
  if (!what) {
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fileno(file->fp), 0666 & ~mask) != 0) {
      what = "chmod";
      saved = errno;
    }
  }
  /* Renamed while still open, so its lock is held until the temporary's
   * name is gone: a sweeper never sees it unlocked. Closing after that
   * flushes nothing (fflush and fsync came first). */
  bool renamed = false;
  if (!what) {
    if (rename(file->temp_path, file->final_path) != 0) {
      what = "rename";
      saved = errno;
    } else {
      renamed = true;
    }
  }
  if (!renamed) unlink(file->temp_path);
  if (fclose(file->fp) != 0 && !what) {
    what = "close";
    saved = errno;
  }
  file->fp = NULL;
  if (what) {
    md_fail(err, MD_E_IO, "%s: %s failed: %s", file->final_path, what, strerror(saved));
    release(file);
    return MD_E_IO;
  }
  release(file);
  return MD_OK;
}

void md_atomic_abort(md_atomic_file *file) {
  /* Unlinked before the close drops its lock (see md_atomic_commit). */
  if (file->temp_path) unlink(file->temp_path);
  if (file->fp) fclose(file->fp);
  release(file);
}

md_status md_write_file_atomic(const char *path, const void *data, size_t len, md_error *err) {
  md_atomic_file file;
  md_status status = md_atomic_open(&file, path, err);
  if (status != MD_OK) return status;
  if (len > 0 && fwrite(data, 1, len, file.fp) != len) {
    int saved = errno;
    md_atomic_abort(&file);
    return md_fail(err, MD_E_IO, "%s: write failed: %s", path, strerror(saved));
  }
  return md_atomic_commit(&file, err);
}
