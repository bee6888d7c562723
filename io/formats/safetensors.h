/* Reading safetensors files: a little-endian u64 header length N, N bytes of
 * JSON describing each tensor ({"dtype", "shape", "data_offsets": [begin,
 * end]} with offsets relative to the data section, plus an optional
 * "__metadata__" map of strings), then the data section.
 *
 * md_safetensors_open maps the file read-only and validates the whole header
 * before any tensor byte is read: header length within the file and under
 * 100 MB, well-formed JSON, every entry's dtype, shape and offsets, byte
 * counts equal to dtype size x element count (overflow-checked), and offsets
 * that tile the data section exactly, with no overlap, gap or trailing bytes,
 * as the format's reference implementation requires.  Every failure names the
 * file and, where there is one, the tensor.
 *
 * Tensors of any dtype the format defines may be present; only F32, F16 and
 * BF16 tensors with at most MD_TENSOR_MAX_DIMS dimensions can be fetched
 * (md_safetensors_get refuses the others by name).  Tensors whose data is not
 * aligned to their element size in memory (possible when a writer did not pad
 * the header to 8 bytes) are copied once into aligned memory at open, so every
 * md_tensor's data pointer is aligned for its dtype. */
#ifndef MD_IO_FORMATS_SAFETENSORS_H
#define MD_IO_FORMATS_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/tensor.h"

/* The reference implementation's limit on the JSON header. */
#define MD_SAFETENSORS_MAX_HEADER 100000000u

typedef struct md_safetensors md_safetensors;

/* Opens, maps and validates `path`. On failure *file is NULL. */
md_status md_safetensors_open(const char *path, md_safetensors **file, md_error *err);
void md_safetensors_close(md_safetensors *file);

const char *md_safetensors_path(const md_safetensors *file);

/* Tensors in the file, in name order (the "__metadata__" key is not one). */
size_t md_safetensors_count(const md_safetensors *file);
const char *md_safetensors_name(const md_safetensors *file, size_t index);
bool md_safetensors_contains(const md_safetensors *file, const char *name);

/* The tensor called `name`, valid until the file is closed. Fails with
 * MD_E_FORMAT when there is no such tensor and MD_E_UNSUPPORTED when its
 * dtype is not F32, F16 or BF16 or it has more than MD_TENSOR_MAX_DIMS
 * dimensions. */
md_status md_safetensors_get(const md_safetensors *file, const char *name,
                             const md_tensor **tensor, md_error *err);

/* The dtype string the header gives for `name` ("BF16", "F64", ...), or NULL. */
const char *md_safetensors_dtype_name(const md_safetensors *file, const char *name);

/* A value of the header's "__metadata__" map, or NULL. */
const char *md_safetensors_metadata(const md_safetensors *file, const char *key);

/* Bytes copied at open to align misaligned tensors (0 for files written by
 * the reference writer, which pads the header to a multiple of 8). */
uint64_t md_safetensors_realigned_bytes(const md_safetensors *file);

#endif
