#include "io/files/dir_lock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The message for a lock another process holds: who, from the file. */
static md_status busy(const char *dir, const char *path, int fd, md_error *err) {
  char holder[256] = "";
  ssize_t got = pread(fd, holder, sizeof holder - 1, 0);
  holder[got > 0 ? got : 0] = '\0';
  holder[strcspn(holder, "\n")] = '\0';
  return md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE,
                      "%s is in use by another process (%s; its lock %s): wait for it to finish, "
                      "or stop it",
                      dir, holder[0] ? holder : "holder unknown", path);
}

md_status md_dir_lock_take(const char *dir, md_dir_lock *lock, md_error *err) {
  *lock = MD_DIR_LOCK_NONE;
  size_t n = strlen(dir) + sizeof MD_DIR_LOCK_NAME + 2;
  char *path = malloc(n);
  if (!path) return md_fail(err, MD_E_NOMEM, "out of memory");
  snprintf(path, n, "%s/%s", dir, MD_DIR_LOCK_NAME);
  /* The holder removes the file on release; a process that opened the old
   * file just before may then lock that unlinked file: the lock counts only
   * while the path still names the file locked, else try again. */
  for (int attempt = 0; attempt < 16; attempt++) {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
      md_status s = md_fail(err, MD_E_IO, "%s: cannot create the lock file: %s", path, strerror(errno));
      free(path);
      return s;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int saved = errno;
      md_status s = saved == EWOULDBLOCK ? busy(dir, path, fd, err)
                                         : md_fail(err, MD_E_IO, "%s: cannot lock: %s", path, strerror(saved));
      close(fd);
      free(path);
      return s;
    }
    struct stat held, named;
    if (fstat(fd, &held) != 0 || stat(path, &named) != 0 || held.st_dev != named.st_dev ||
        held.st_ino != named.st_ino) {
      close(fd);
      continue;
    }
    char host[128] = "unknown host";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown host");
    host[sizeof host - 1] = '\0';
    char line[256];
    int len = snprintf(line, sizeof line, "process %ld on %s\n", (long)getpid(), host);
    /* Who holds it, for the message a second writer gets; the lock itself
     * does not depend on these bytes. */
    if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)len, 0) != len) {
      /* the lock holds all the same */
    }
    lock->fd = fd;
    lock->path = path;
    return MD_OK;
  }
  free(path);
  return md_fail(err, MD_E_IO, "%s/%s: the lock file keeps being replaced", dir, MD_DIR_LOCK_NAME);
}

int md_dir_lock_empty(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int empty = 1;
  struct dirent *entry;
  while (empty && (entry = readdir(d)))
    if (strcmp(entry->d_name, ".") && strcmp(entry->d_name, "..") && strcmp(entry->d_name, MD_DIR_LOCK_NAME))
      empty = 0;
  closedir(d);
  return empty;
}

void md_dir_lock_release(md_dir_lock *lock) {
  if (!lock || lock->fd < 0) return;
  /* Removed while still held, so that no one locks it after we let go. */
  if (lock->path) unlink(lock->path);
  close(lock->fd);
  free(lock->path);
  *lock = MD_DIR_LOCK_NONE;
}
