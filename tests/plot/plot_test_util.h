/* Helpers shared by the figure tests: a scratch directory, file contents,
 * and a hand-made Kaplan-Meier curve. */
#ifndef MD_TESTS_PLOT_TEST_UTIL_H
#define MD_TESTS_PLOT_TEST_UTIL_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "survival/km.h"

static inline void scratch_dir(char *dir, size_t size) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, size, "%s/md-plot-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    exit(1);
  }
}

static inline void join_path(char *out, size_t size, const char *dir, const char *name) {
  if (snprintf(out, size, "%s/%s", dir, name) >= (int)size) {
    fprintf(stderr, "path too long: %s/%s\n", dir, name);
    exit(1);
  }
}

/* Number of entries in `dir` other than . and ..: temporary files left
 * behind by a failed write would show up here. */
static inline int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *entry;
  while ((entry = readdir(d)) != NULL)
    if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

/* Reads the whole file; *size gets its length. NULL when it cannot. */
static inline unsigned char *read_all(const char *path, size_t *size) {
  *size = 0;
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  size_t capacity = 1 << 16, length = 0;
  unsigned char *data = malloc(capacity);
  size_t got;
  while (data && (got = fread(data + length, 1, capacity - length, fp)) > 0) {
    length += got;
    if (length == capacity) {
      capacity *= 2;
      unsigned char *grown = realloc(data, capacity);
      if (!grown) free(data);
      data = grown;
    }
  }
  fclose(fp);
  *size = length;
  return data;
}

/* Removes every plain file in `dir`, then `dir`. */
static inline void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *entry;
  char path[4096];
  while ((entry = readdir(d)) != NULL) {
    if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
    join_path(path, sizeof path, dir, entry->d_name);
    if (unlink(path) != 0) rmdir(path);
  }
  closedir(d);
  rmdir(dir);
}

/* A curve built by hand from its rows; lower/upper may be NULL (no band). */
typedef struct test_curve {
  double time[8], surv[8], lower[8], upper[8], n_censor[8];
  md_km_curve km;
} test_curve;

static inline void test_curve_init(test_curve *c, size_t n, const double *time, const double *surv,
                            const double *lower, const double *upper) {
  memset(c, 0, sizeof *c);
  memcpy(c->time, time, n * sizeof *time);
  memcpy(c->surv, surv, n * sizeof *surv);
  c->km.n_times = n;
  c->km.time = c->time;
  c->km.surv = c->surv;
  c->km.n_censor = c->n_censor;
  c->km.level = 0.95;
  if (lower && upper) {
    memcpy(c->lower, lower, n * sizeof *lower);
    memcpy(c->upper, upper, n * sizeof *upper);
    c->km.lower = c->lower;
    c->km.upper = c->upper;
  }
}

#endif
