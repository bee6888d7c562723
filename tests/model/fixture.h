/* Reading the HF reference fixtures of tests/model/fixtures/<name>/ (written
 * by tests/model/make_fixtures.py). */
#ifndef MD_TESTS_MODEL_FIXTURE_H
#define MD_TESTS_MODEL_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/formats/npy.h"


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

/* Loads <dir>/<file> with io/npy; exits the test on failure (a missing or
 * damaged fixture is a broken test, not a finding). */
static inline fixture_array fixture_load(const char *dir, const char *file, int want_int) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path) {
    fprintf(stderr, "fixture: path too long\n");
    exit(2);
  }
  md_npy_array npy;
  md_error err;
  if (md_npy_read(path, &npy, &err) != MD_OK) {
    fprintf(stderr, "fixture: %s\n", err.message);
    exit(2);
  }
  if (npy.dtype != (want_int ? MD_NPY_I32 : MD_NPY_F32) || npy.ndim < 1 || npy.ndim > 4) {
    fprintf(stderr, "fixture: %s: expected %s with 1 to 4 dimensions\n", path,
            want_int ? "int32" : "float32");
    exit(2);
  }
  fixture_array a = {.ndim = npy.ndim, .count = npy.count};
  for (int i = 0; i < npy.ndim; i++) a.shape[i] = npy.shape[i];
  if (want_int) a.i32 = npy.data;
  else a.f32 = npy.data;
  return a; /* owns npy.data */
}

static inline void fixture_free(fixture_array *a) {
  free(a->f32);
  free(a->i32);
}

#endif
