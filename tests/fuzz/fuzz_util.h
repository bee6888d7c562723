/* Shared by the fuzz harnesses (tests/fuzz/README.md): the per-process
 * temporary file the readers are pointed at, and invariant checks that
 * abort with a message (so libFuzzer, and the replay driver under the
 * sanitizers, report the input). */
#ifndef MD_TESTS_FUZZ_UTIL_H
#define MD_TESTS_FUZZ_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                             \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                       \
    }                                                                                \
  } while (0)

#define FUZZ_CHECK_MSG(cond, ...)                                                    \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "%s:%d: fuzz invariant failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                  \
      fputc('\n', stderr);                                                           \
      abort();                                                                       \
    }                                                                                \
  } while (0)

/* A bit per md_status, for the statuses a reader documents. */
#define FUZZ_ST(s) (1u << (unsigned)(s))

static const char *fuzz_tmpdir(void) {
  const char *dir = getenv("TMPDIR");
  return dir && *dir ? dir : "/tmp";
}

enum { FUZZ_TEMP_SLOTS = 4 };
static char fuzz_paths[FUZZ_TEMP_SLOTS][4096];

static void fuzz_remove_temps(void) {
  for (int i = 0; i < FUZZ_TEMP_SLOTS; i++)
    if (fuzz_paths[i][0]) unlink(fuzz_paths[i]);
}

/* Temporary file number `slot` (0 .. FUZZ_TEMP_SLOTS-1) of this process,
 * created on first use, reused across inputs and removed at exit; its name
 * ends in `suffix` (fixed at creation). */
static __attribute__((unused)) const char *fuzz_temp_slot(int slot, const char *suffix) {
  static bool registered;
  char *path = fuzz_paths[slot];
  if (!path[0]) {
    snprintf(path, sizeof fuzz_paths[slot], "%s/md-fuzz-XXXXXX%s", fuzz_tmpdir(), suffix);
    int fd = mkstemps(path, (int)strlen(suffix));
    if (fd < 0) {
      fprintf(stderr, "fuzz: cannot create %s: %s\n", path, strerror(errno));
      abort();
    }
    close(fd);
    if (!registered) atexit(fuzz_remove_temps);
    registered = true;
  }
  return path;
}

static __attribute__((unused)) const char *fuzz_temp_path(const char *suffix) {
  return fuzz_temp_slot(0, suffix);
}

/* Writes `size` bytes to `path`, replacing what it held. */
static __attribute__((unused)) void fuzz_write_file(const char *path, const uint8_t *data,
                                                    size_t size) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    fprintf(stderr, "fuzz: cannot write %s: %s\n", path, strerror(errno));
    abort();
  }
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      fprintf(stderr, "fuzz: cannot write %s: %s\n", path, strerror(errno));
      abort();
    }
    done += (size_t)n;
  }
  close(fd);
}

/* The input in this process's temporary file; returns its path. */
static __attribute__((unused)) const char *fuzz_input_file(const uint8_t *data, size_t size,
                                                           const char *suffix) {
  const char *path = fuzz_temp_path(suffix);
  fuzz_write_file(path, data, size);
  return path;
}

/* What every failing reader promises: a documented status, recorded in
 * `err`, and a non-empty message naming the file (`path`; NULL when the
 * message need not name one). Out of memory is always allowed. */
static __attribute__((unused)) void fuzz_check_failure(md_status status, const md_error *err,
                                                       unsigned allowed, const char *path) {
  allowed |= FUZZ_ST(MD_E_NOMEM);
  FUZZ_CHECK_MSG(status != MD_OK && (allowed & FUZZ_ST(status)), "status %d (%s): %s",
                 (int)status, md_status_name(status), err->message);
  FUZZ_CHECK_MSG(err->status == status, "err->status %d, returned %d", (int)err->status,
                 (int)status);
  FUZZ_CHECK(err->message[0] != '\0');
  FUZZ_CHECK(memchr(err->message, '\0', sizeof err->message) != NULL);
  if (path && status != MD_E_NOMEM)
    FUZZ_CHECK_MSG(strstr(err->message, path) != NULL, "message does not name %s: %s", path,
                   err->message);
}

/* True when s[0..len) matches [a-z][a-z0-9_]*. */
static __attribute__((unused)) bool fuzz_region_name(const char *s, size_t len) {
  if (len == 0 || !(s[0] >= 'a' && s[0] <= 'z')) return false;
  for (size_t i = 1; i < len; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

/* A NUL-terminated copy of the input (for parsers that take text). */
static __attribute__((unused)) char *fuzz_strndup(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  FUZZ_CHECK(s != NULL);
  if (size) memcpy(s, data, size);
  s[size] = '\0';
  return s;
}

#endif
