/* Helpers shared by the checkpoint tests: paths under the source tree, the
 * reference values written by make_checkpoints.py, and element access. */
#ifndef MD_TESTS_CHECKPOINT_UTIL_H
#define MD_TESTS_CHECKPOINT_UTIL_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/tensor.h"

/* "<MD_SOURCE_ROOT>/tests/checkpoint/<relative>" */
static inline void fixture_path(char *buf, size_t size, const char *relative) {
  const char *root = getenv("MD_SOURCE_ROOT");
  snprintf(buf, size, "%s/tests/checkpoint/%s", root ? root : ".", relative);
}

static inline json_t *load_reference(void) {
  char path[4096];
  fixture_path(path, sizeof path, "reference.json");
  json_error_t jerr;
  json_t *reference = json_load_file(path, 0, &jerr);
  if (!reference) {
    fprintf(stderr, "%s:%d:%d: %s\n", path, jerr.line, jerr.column, jerr.text);
    exit(1);
  }
  return reference;
}

/* Element `index` of a tensor, widened to float. */
static inline float tensor_element(const md_tensor *tensor, size_t index) {
  uint16_t half;
  float value;
  switch (tensor->dtype) {
    case MD_DTYPE_F32:
      memcpy(&value, (const char *)tensor->data + 4 * index, 4);
      return value;
    case MD_DTYPE_F16:
      memcpy(&half, (const char *)tensor->data + 2 * index, 2);
      return md_f16_to_f32(half);
    case MD_DTYPE_BF16:
      memcpy(&half, (const char *)tensor->data + 2 * index, 2);
      return md_bf16_to_f32(half);
  }
  return 0;
}

/* Same float, bit for bit (so -0.0 differs from 0.0). */
static inline int same_float(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

#endif
