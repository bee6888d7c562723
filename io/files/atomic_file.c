#include "io/files/atomic_file.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

md_status md_atomic_open(md_atomic_file *file, const char *path, md_error *err) {
  memset(file, 0, sizeof *file);
  if (is_special_file(path)) return open_direct(file, path, err);
  file->final_path = strdup(path);
  file->temp_path = temp_name_for(path);
  if (!file->final_path || !file->temp_path) {
    md_atomic_abort(file);
    return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  }
  int fd = mkstemp(file->temp_path);
  if (fd < 0) {
    int saved = errno;
    free(file->temp_path);
    file->temp_path = NULL;
    md_atomic_abort(file);
    return md_fail(err, MD_E_IO, "%s: cannot create a temporary file beside it: %s", path,
                   strerror(saved));
  }
  track(file->temp_path);
  file->fp = fdopen(fd, "wb");
  if (!file->fp) {
    int saved = errno;
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
  if (fclose(file->fp) != 0 && !what) {
    what = "close";
    saved = errno;
  }
  file->fp = NULL;
  if (!what && rename(file->temp_path, file->final_path) != 0) {
    what = "rename";
    saved = errno;
  }
  if (what) {
    md_fail(err, MD_E_IO, "%s: %s failed: %s", file->final_path, what, strerror(saved));
    unlink(file->temp_path);
    release(file);
    return MD_E_IO;
  }
  release(file);
  return MD_OK;
}

void md_atomic_abort(md_atomic_file *file) {
  if (file->fp) fclose(file->fp);
  if (file->temp_path) unlink(file->temp_path);
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
