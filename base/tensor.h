/* A named, typed, read-only view of an n-dimensional array, as stored in a
 * safetensors file (row-major). The data usually points into an mmap
 * (`mapped`). */
#ifndef MD_BASE_TENSOR_H
#define MD_BASE_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum md_dtype {
  MD_DTYPE_F32 = 0,
  MD_DTYPE_F16,
  MD_DTYPE_BF16,
} md_dtype;

#define MD_TENSOR_MAX_DIMS 4

typedef struct md_tensor {
  const char *name;                    /* e.g. "model.layers.3.self_attn.q_proj.weight" */
  md_dtype dtype;
  int ndim;
  int64_t shape[MD_TENSOR_MAX_DIMS];   /* weights are [out, in] */
  const void *data;                    /* ndim product * md_dtype_size(dtype) bytes */
  size_t nbytes;
  bool mapped;                         /* data lies in a read-only private file mapping */
} md_tensor;

size_t md_dtype_size(md_dtype dtype);
const char *md_dtype_name(md_dtype dtype); /* "F32", "F16", "BF16" as in safetensors */

/* For a consumer that has copied the tensor and will not read `data`
 * again: a mapped tensor's whole pages leave this process's resident set
 * (madvise MADV_DONTNEED; the mapping stays valid and a later read faults
 * them back in from the file, so this is only a hint); anything else is
 * left alone (heap memory would be zeroed). Pages the tensor shares with
 * its neighbours stay. */
void md_tensor_drop_pages(const md_tensor *t);

/* bf16 -> f32 is exact: the bf16 bits are the high half of the f32. */
static inline float md_bf16_to_f32(uint16_t bits) {
  union { uint32_t u; float f; } v = {.u = (uint32_t)bits << 16};
  return v.f;
}
float md_f16_to_f32(uint16_t bits);

#endif
