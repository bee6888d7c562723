/* Reading the HF reference fixtures of tests/model/fixtures/<name>/ (written
 * by tests/model/make_fixtures.py). */
#ifndef MD_TESTS_MODEL_FIXTURE_H
#define MD_TESTS_MODEL_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


typedef struct fixture_array {
  int ndim;
  int64_t shape[4];
  size_t count;
  float *f32;     /* for float32 arrays */
  int32_t *i32;   /* for int32 arrays */
} fixture_array;

/* The checkpoint directory of fixture `name`. */
static inline void fixture_dir(char *out, size_t size, const char *name) {
  const char *root = getenv("MD_SOURCE_ROOT");
  snprintf(out, size, "%s/tests/model/fixtures/%s", root ? root : ".", name);
}

/* Loads <dir>/<file>; exits the test on failure (a missing fixture is a
 * broken test, not a finding). TEMPORARY minimal parser until io/npy lands. */
static inline fixture_array fixture_load(const char *dir, const char *file, int want_int) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  FILE *fp = fopen(path, "rb");
  unsigned char head[10];
  if (!fp || fread(head, 1, 10, fp) != 10) {
    fprintf(stderr, "fixture: cannot read %s\n", path);
    exit(2);
  }
  size_t hlen = head[8] | (head[9] << 8);
  char *header = calloc(hlen + 1, 1);
  if (fread(header, 1, hlen, fp) != hlen) exit(2);
  fixture_array a = {0};
  const char *sh = strstr(header, "'shape': (") + 10;
  a.count = 1;
  while (*sh != ')') {
    char *end;
    long long d = strtoll(sh, &end, 10);
    if (end == sh) break;
    a.shape[a.ndim++] = d;
    a.count *= (size_t)d;
    sh = end;
    while (*sh == ',' || *sh == ' ') sh++;
  }
  if (!strstr(header, want_int ? "<i4" : "<f4")) exit(2);
  void *data = malloc(a.count * 4 + 1);
  if (fread(data, 4, a.count, fp) != a.count) exit(2);
  fclose(fp);
  free(header);
  if (want_int) a.i32 = data;
  else a.f32 = data;
  return a;
}

static inline void fixture_free(fixture_array *a) {
  free(a->f32);
  free(a->i32);
}

#endif
