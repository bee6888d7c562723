/* NumPy .npy files (format versions 1.0, 2.0 and 3.0 read; 1.0 written).
 *
 * A file is the magic "\x93NUMPY", a major and minor version byte, the
 * header length (u16 little-endian in 1.0, u32 in 2.0 and 3.0), a header that
 * is a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...), }
 * padded with spaces and ended by '\n' so that the data starts on a multiple
 * of 64 bytes, then the elements in C order.
 *
 * We write headers byte for byte as numpy 1.23+ writes them (sorted keys,
 * the spare room numpy leaves after the dict so that the first dimension
 * can grow in place, padding to 64), so numpy.load reads our files and the
 * streaming writer can patch the row count in without moving data.
 * See memdecay-run(5) (attn/<episode>.npy, prefill/<episode>.npy). */
#ifndef MD_IO_FORMATS_NPY_H
#define MD_IO_FORMATS_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef enum md_npy_dtype {
  MD_NPY_F32 = 0, /* '<f4' */
  MD_NPY_F64,     /* '<f8' */
  MD_NPY_I32,     /* '<i4' */
  MD_NPY_I64,     /* '<i8' */
  MD_NPY_U8,      /* '|u1' */
} md_npy_dtype;

#define MD_NPY_MAX_DIMS 8

typedef struct md_npy_array {
  md_npy_dtype dtype;
  int ndim;                        /* 0 for a scalar */
  int64_t shape[MD_NPY_MAX_DIMS];
  size_t count;                    /* product of shape (1 for a scalar) */
  void *data;                      /* count elements, C order, native byte order */
} md_npy_array;

size_t md_npy_dtype_size(md_npy_dtype dtype);
const char *md_npy_dtype_descr(md_npy_dtype dtype); /* "<f4", ..., "|u1" */

/* Reads a whole .npy file. Refuses, naming the file: a bad magic or version,
 * a malformed header (with the column within it), keys other than descr,
 * fortran_order and shape, fortran_order True, big-endian or other dtypes,
 * more than MD_NPY_MAX_DIMS dimensions, and data shorter or longer than the
 * shape says. On failure the array is zeroed. */
md_status md_npy_read(const char *path, md_npy_array *array, md_error *err);
void md_npy_free(md_npy_array *array);

/* Writes an array atomically (temporary file + rename). */
md_status md_npy_write(const char *path, md_npy_dtype dtype, int ndim, const int64_t *shape,
                       const void *data, md_error *err);
md_status md_npy_write_f32(const char *path, int ndim, const int64_t *shape, const float *data,
                           md_error *err);
md_status md_npy_write_i32(const char *path, int ndim, const int64_t *shape,
                           const int32_t *data, md_error *err);

/* Everything numpy writes before the data of a C-order array of this dtype
 * and shape (magic, version 1.0, header length, padded dict) into buf;
 * returns its length, a multiple of 64, or 0 when buf is too small or ndim
 * is out of range. */
size_t md_npy_header(md_npy_dtype dtype, int ndim, const int64_t *shape, char *buf,
                     size_t size);

/* A float32 [rows, columns] matrix written one row at a time, for matrices
 * whose row count is known only at the end (attention per decode step).
 * The file is a temporary beside `path` until md_npy_stream_close patches the
 * final shape into the header (same length: numpy's spare room) and renames
 * it into place; md_npy_stream_abort removes it and leaves `path` as it was.
 * Both release the stream. */
typedef struct md_npy_stream md_npy_stream;

md_status md_npy_stream_open(const char *path, int64_t columns, md_npy_stream **stream,
                             md_error *err);
md_status md_npy_stream_append(md_npy_stream *stream, const float *row, md_error *err);
int64_t md_npy_stream_rows(const md_npy_stream *stream);
md_status md_npy_stream_close(md_npy_stream *stream, md_error *err);
void md_npy_stream_abort(md_npy_stream *stream);

#endif
