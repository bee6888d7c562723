#include "io/formats/npy.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/files/atomic_file.h"

/* Data is copied as is: the dtypes we accept are little-endian, so is the host. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian host required");

/* numpy/lib/format.py: MAGIC_PREFIX, ARRAY_ALIGN, GROWTH_AXIS_MAX_DIGITS. */
static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
#define NPY_ALIGN 64
#define NPY_GROWTH_DIGITS 21

static const struct {
  const char *descr;
  size_t size;
} npy_dtypes[] = {
    [MD_NPY_F32] = {"<f4", 4}, [MD_NPY_F64] = {"<f8", 8}, [MD_NPY_I32] = {"<i4", 4},
    [MD_NPY_I64] = {"<i8", 8}, [MD_NPY_U8] = {"|u1", 1},
};

#define NPY_DTYPE_COUNT (sizeof npy_dtypes / sizeof npy_dtypes[0])

size_t md_npy_dtype_size(md_npy_dtype dtype) {
  return (size_t)dtype < NPY_DTYPE_COUNT ? npy_dtypes[dtype].size : 0;
}

const char *md_npy_dtype_descr(md_npy_dtype dtype) {
  return (size_t)dtype < NPY_DTYPE_COUNT ? npy_dtypes[dtype].descr : "?";
}

/* ---- writing ----------------------------------------------------------- */

/* Python's repr of the shape tuple: (), (n,), (a, b). */
static size_t format_shape(int ndim, const int64_t *shape, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "(");
  for (int d = 0; d < ndim && used < size; d++)
    used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, d ? ", " : "", shape[d]);
  if (used < size) used += (size_t)snprintf(buf + used, size - used, ndim == 1 ? ",)" : ")");
  return used;
}

/* numpy's _write_array_header: the dict with sorted keys, then spare spaces
 * (21 minus the digits of the first dimension) so the array can grow along
 * it in place, then _wrap_header's padding: spaces and '\n' bringing magic +
 * version + length + dict to a multiple of 64 (a full 64 when already
 * aligned: numpy computes 64 - (n % 64)). */
size_t md_npy_header(md_npy_dtype dtype, int ndim, const int64_t *shape, char *buf,
                     size_t size) {
  if (ndim < 0 || ndim > MD_NPY_MAX_DIMS || (size_t)dtype >= NPY_DTYPE_COUNT) return 0;
  char shape_text[MD_NPY_MAX_DIMS * 24 + 8], dict[512];
  format_shape(ndim, shape, shape_text, sizeof shape_text);
  int dict_len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, "
                          "'shape': %s, }", npy_dtypes[dtype].descr, shape_text);
  if (dict_len < 0 || (size_t)dict_len >= sizeof dict) return 0;
  size_t text_len = (size_t)dict_len;
  if (ndim > 0) {
    char first[24];
    int digits = snprintf(first, sizeof first, "%" PRId64, shape[0]);
    text_len += NPY_GROWTH_DIGITS > digits ? (size_t)(NPY_GROWTH_DIGITS - digits) : 0;
  }
  size_t prefix = sizeof npy_magic + 2 + 2, with_newline = text_len + 1;
  size_t pad = NPY_ALIGN - (prefix + with_newline) % NPY_ALIGN;
  size_t header_len = with_newline + pad, total = prefix + header_len;
  if (total > size || header_len > 0xffff) return 0;
  memcpy(buf, npy_magic, sizeof npy_magic);
  buf[6] = 1; /* version 1.0 */
  buf[7] = 0;
  buf[8] = (char)(header_len & 0xff);
  buf[9] = (char)(header_len >> 8);
  memset(buf + prefix, ' ', header_len);
  memcpy(buf + prefix, dict, (size_t)dict_len);
  buf[total - 1] = '\n';
  return total;
}

static bool element_count(int ndim, const int64_t *shape, size_t element_size, size_t *bytes) {
  size_t total = element_size;
  for (int d = 0; d < ndim; d++)
    if (shape[d] < 0 || __builtin_mul_overflow(total, (size_t)shape[d], &total)) return false;
  *bytes = total;
  return true;
}

md_status md_npy_write(const char *path, md_npy_dtype dtype, int ndim, const int64_t *shape,
                       const void *data, md_error *err) {
  char header[1024];
  size_t header_len = md_npy_header(dtype, ndim, shape, header, sizeof header);
  size_t data_len;
  if (!header_len || !element_count(ndim, shape, md_npy_dtype_size(dtype), &data_len))
    return md_fail(err, MD_E_INVALID, "%s: cannot write an array of %d dimensions with this "
                   "shape as .npy", path, ndim);
  md_atomic_file file;
  md_status status = md_atomic_open(&file, path, err);
  if (status != MD_OK) return status;
  if (fwrite(header, 1, header_len, file.fp) != header_len ||
      (data_len && fwrite(data, 1, data_len, file.fp) != data_len)) {
    int saved = errno;
    md_atomic_abort(&file);
    return md_fail(err, MD_E_IO, "%s: write failed: %s", path, strerror(saved));
  }
  return md_atomic_commit(&file, err);
}

md_status md_npy_write_f32(const char *path, int ndim, const int64_t *shape, const float *data,
                           md_error *err) {
  return md_npy_write(path, MD_NPY_F32, ndim, shape, data, err);
}

md_status md_npy_write_i32(const char *path, int ndim, const int64_t *shape,
                           const int32_t *data, md_error *err) {
  return md_npy_write(path, MD_NPY_I32, ndim, shape, data, err);
}

/* ---- streaming rows ---------------------------------------------------- */

struct md_npy_stream {
  md_atomic_file file;
  int64_t columns;
  int64_t rows;
  size_t header_len;
};

md_status md_npy_stream_open(const char *path, int64_t columns, md_npy_stream **out,
                             md_error *err) {
  *out = NULL;
  if (columns < 0)
    return md_fail(err, MD_E_INVALID, "%s: negative column count %" PRId64, path, columns);
  md_npy_stream *stream = calloc(1, sizeof *stream);
  if (!stream) return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  stream->columns = columns;
  char header[1024];
  int64_t shape[2] = {0, columns};
  stream->header_len = md_npy_header(MD_NPY_F32, 2, shape, header, sizeof header);
  md_status status = md_atomic_open(&stream->file, path, err);
  if (status != MD_OK) {
    free(stream);
    return status;
  }
  if (fwrite(header, 1, stream->header_len, stream->file.fp) != stream->header_len) {
    int saved = errno;
    md_npy_stream_abort(stream);
    return md_fail(err, MD_E_IO, "%s: write failed: %s", path, strerror(saved));
  }
  *out = stream;
  return MD_OK;
}

md_status md_npy_stream_append(md_npy_stream *stream, const float *row, md_error *err) {
  size_t count = (size_t)stream->columns;
  if (count && fwrite(row, sizeof *row, count, stream->file.fp) != count)
    return md_fail(err, MD_E_IO, "%s: write failed: %s", stream->file.final_path,
                   strerror(errno));
  stream->rows++;
  return MD_OK;
}

int64_t md_npy_stream_rows(const md_npy_stream *stream) { return stream->rows; }

/* The header for the final row count has the length of the one written at
 * open: numpy's spare room absorbs the digits of the first dimension. */
md_status md_npy_stream_close(md_npy_stream *stream, md_error *err) {
  char header[1024];
  int64_t shape[2] = {stream->rows, stream->columns};
  size_t header_len = md_npy_header(MD_NPY_F32, 2, shape, header, sizeof header);
  const char *what = NULL;
  if (header_len != stream->header_len)
    what = "header length changed";
  else if (fflush(stream->file.fp) != 0 || fseek(stream->file.fp, 0, SEEK_SET) != 0 ||
           fwrite(header, 1, header_len, stream->file.fp) != header_len)
    what = strerror(errno);
  if (what) {
    md_status status = md_fail(err, MD_E_IO, "%s: cannot finish the header: %s",
                               stream->file.final_path, what);
    md_npy_stream_abort(stream);
    return status;
  }
  md_status status = md_atomic_commit(&stream->file, err);
  free(stream);
  return status;
}

void md_npy_stream_abort(md_npy_stream *stream) {
  if (!stream) return;
  md_atomic_abort(&stream->file);
  free(stream);
}

/* ---- reading ----------------------------------------------------------- */

/* The header dict is a Python literal; numpy writes a fixed subset of it:
 * quoted strings, True/False, tuples of non-negative integers. */
typedef struct header_parser {
  const char *text;
  size_t len, pos;
  const char *path;
  md_error *err;
} header_parser;

static md_status header_error(header_parser *p, const char *what) {
  return md_fail(p->err, MD_E_FORMAT, "%s: .npy header, column %zu: %s", p->path, p->pos + 1,
                 what);
}

static void skip_space(header_parser *p) {
  while (p->pos < p->len && (p->text[p->pos] == ' ' || p->text[p->pos] == '\t' ||
                             p->text[p->pos] == '\n' || p->text[p->pos] == '\r'))
    p->pos++;
}

static int peek(const header_parser *p) {
  return p->pos < p->len ? (unsigned char)p->text[p->pos] : -1;
}

static md_status parse_string(header_parser *p, char *out, size_t size) {
  int quote = peek(p);
  if (quote != '\'' && quote != '"') return header_error(p, "expected a quoted string");
  size_t start = ++p->pos;
  while (p->pos < p->len && p->text[p->pos] != quote && p->text[p->pos] != '\\') p->pos++;
  if (peek(p) != quote) return header_error(p, "unterminated or escaped string");
  size_t len = p->pos - start;
  p->pos++;
  if (len >= size) return header_error(p, "string too long");
  memcpy(out, p->text + start, len);
  out[len] = '\0';
  return MD_OK;
}

static md_status parse_bool(header_parser *p, bool *out) {
  if (p->len - p->pos >= 4 && !memcmp(p->text + p->pos, "True", 4)) {
    p->pos += 4;
    *out = true;
  } else if (p->len - p->pos >= 5 && !memcmp(p->text + p->pos, "False", 5)) {
    p->pos += 5;
    *out = false;
  } else {
    return header_error(p, "expected True or False");
  }
  return MD_OK;
}

static md_status parse_dimension(header_parser *p, int64_t *out) {
  if (peek(p) < '0' || peek(p) > '9')
    return header_error(p, "expected a non-negative integer dimension");
  int64_t value = 0;
  while (peek(p) >= '0' && peek(p) <= '9') {
    int digit = peek(p) - '0';
    if (value > (INT64_MAX - digit) / 10) return header_error(p, "dimension too large");
    value = value * 10 + digit;
    p->pos++;
  }
  *out = value;
  return MD_OK;
}

static md_status parse_shape(header_parser *p, md_npy_array *array) {
  if (peek(p) != '(') return header_error(p, "'shape' is not a tuple");
  p->pos++;
  array->ndim = 0;
  for (;;) {
    skip_space(p);
    if (peek(p) == ')') break;
    if (array->ndim == MD_NPY_MAX_DIMS)
      return header_error(p, "more dimensions than supported (8)");
    md_status status = parse_dimension(p, &array->shape[array->ndim++]);
    if (status != MD_OK) return status;
    skip_space(p);
    if (peek(p) == ',') {
      p->pos++;
    } else if (peek(p) != ')') {
      return header_error(p, "expected ',' or ')' in 'shape'");
    }
  }
  p->pos++;
  return MD_OK;
}

typedef struct header_fields {
  char descr[32];
  bool fortran_order;
  bool have_descr, have_order, have_shape;
} header_fields;

static md_status parse_entry(header_parser *p, md_npy_array *array, header_fields *fields) {
  char key[32];
  size_t key_start = p->pos;
  md_status status = parse_string(p, key, sizeof key);
  if (status != MD_OK) return status;
  skip_space(p);
  if (peek(p) != ':') return header_error(p, "expected ':'");
  p->pos++;
  skip_space(p);
  bool *seen;
  if (!strcmp(key, "descr")) {
    seen = &fields->have_descr;
    if (peek(p) != '\'' && peek(p) != '"')
      return header_error(p, "'descr' is not a type string (structured dtypes are not "
                             "supported)");
    status = parse_string(p, fields->descr, sizeof fields->descr);
  } else if (!strcmp(key, "fortran_order")) {
    seen = &fields->have_order;
    status = parse_bool(p, &fields->fortran_order);
  } else if (!strcmp(key, "shape")) {
    seen = &fields->have_shape;
    status = parse_shape(p, array);
  } else {
    p->pos = key_start;
    return header_error(p, "unexpected key (a .npy header has exactly 'descr', "
                           "'fortran_order' and 'shape')");
  }
  if (status == MD_OK && *seen) {
    p->pos = key_start;
    return header_error(p, "key given twice");
  }
  *seen = true;
  return status;
}

static md_status parse_dict(header_parser *p, md_npy_array *array, header_fields *fields) {
  skip_space(p);
  if (peek(p) != '{') return header_error(p, "expected '{'");
  p->pos++;
  for (;;) {
    skip_space(p);
    if (peek(p) == '}') break;
    md_status status = parse_entry(p, array, fields);
    if (status != MD_OK) return status;
    skip_space(p);
    if (peek(p) == ',') {
      p->pos++;
    } else if (peek(p) != '}') {
      return header_error(p, "expected ',' or '}'");
    }
  }
  p->pos++;
  skip_space(p);
  if (p->pos != p->len) return header_error(p, "unexpected text after the dict");
  if (!fields->have_descr || !fields->have_order || !fields->have_shape)
    return header_error(p, "the dict lacks one of 'descr', 'fortran_order', 'shape'");
  return MD_OK;
}

static md_status check_fields(const char *path, const header_fields *fields,
                              md_npy_array *array, md_error *err) {
  if (fields->fortran_order)
    return md_fail(err, MD_E_UNSUPPORTED,
                   "%s: fortran_order is True (column-major data is not supported)", path);
  for (size_t i = 0; i < NPY_DTYPE_COUNT; i++)
    if (!strcmp(fields->descr, npy_dtypes[i].descr)) {
      array->dtype = (md_npy_dtype)i;
      return MD_OK;
    }
  if (fields->descr[0] == '>')
    return md_fail(err, MD_E_UNSUPPORTED, "%s: dtype '%s' is big-endian (not supported)", path,
                   fields->descr);
  return md_fail(err, MD_E_UNSUPPORTED,
                 "%s: dtype '%s' is not supported (supported: <f4, <f8, <i4, <i8, |u1)", path,
                 fields->descr);
}

/* Reads the magic, version and header length (where the header starts and
 * how long it is). */
static md_status read_preamble(FILE *fp, const char *path, uint64_t file_size,
                               uint64_t *header_start, uint64_t *header_len, md_error *err) {
  unsigned char prefix[12];
  size_t got = fread(prefix, 1, sizeof prefix, fp);
  if (got < 10)
    return md_fail(err, MD_E_FORMAT, "%s: %zu bytes, too short for a .npy file", path, got);
  if (memcmp(prefix, npy_magic, sizeof npy_magic) != 0)
    return md_fail(err, MD_E_FORMAT, "%s: not a .npy file (no \\x93NUMPY magic)", path);
  int major = prefix[6], minor = prefix[7];
  if (major < 1 || major > 3 || minor != 0)
    return md_fail(err, MD_E_UNSUPPORTED, "%s: .npy format version %d.%d is not supported "
                   "(1.0, 2.0, 3.0 are)", path, major, minor);
  if (major == 1) {
    *header_start = 10;
    *header_len = prefix[8] | (uint64_t)prefix[9] << 8;
  } else {
    if (got < 12)
      return md_fail(err, MD_E_FORMAT, "%s: %zu bytes, too short for a .npy file", path, got);
    *header_start = 12;
    *header_len = prefix[8] | (uint64_t)prefix[9] << 8 | (uint64_t)prefix[10] << 16 |
                  (uint64_t)prefix[11] << 24;
  }
  if (*header_start + *header_len > file_size)
    return md_fail(err, MD_E_FORMAT, "%s: header length %" PRIu64 " runs past the end of the "
                   "file (%" PRIu64 " bytes)", path, *header_len, file_size);
  return MD_OK;
}

static md_status read_header(FILE *fp, const char *path, uint64_t header_start,
                             uint64_t header_len, md_npy_array *array, md_error *err) {
  char *text = malloc(header_len ? header_len : 1);
  if (!text) return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  md_status status = MD_OK;
  if (fseek(fp, (long)header_start, SEEK_SET) != 0 || fread(text, 1, header_len, fp) != header_len)
    status = md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: read failed", path);
  header_parser parser = {text, header_len, 0, path, err};
  header_fields fields = {0};
  if (status == MD_OK) status = parse_dict(&parser, array, &fields);
  if (status == MD_OK) status = check_fields(path, &fields, array, err);
  free(text);
  return status;
}

static md_status read_data(FILE *fp, const char *path, uint64_t available, md_npy_array *array,
                           md_error *err) {
  size_t bytes;
  if (!element_count(array->ndim, array->shape, md_npy_dtype_size(array->dtype), &bytes))
    return md_fail(err, MD_E_FORMAT, "%s: the shape's size overflows", path);
  array->count = bytes / md_npy_dtype_size(array->dtype);
  if (available < bytes)
    return md_fail(err, MD_E_FORMAT, "%s: truncated: the shape needs %zu bytes of data, the "
                   "file has %" PRIu64, path, bytes, available);
  if (available > bytes)
    return md_fail(err, MD_E_FORMAT, "%s: %" PRIu64 " bytes after the array data (the shape "
                   "needs %zu)", path, available - bytes, bytes);
  array->data = malloc(bytes ? bytes : 1);
  if (!array->data) return md_fail(err, MD_E_NOMEM, "%s: out of memory for %zu bytes", path, bytes);
  if (bytes && fread(array->data, 1, bytes, fp) != bytes)
    return md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: read failed", path);
  return MD_OK;
}

md_status md_npy_read(const char *path, md_npy_array *array, md_error *err) {
  memset(array, 0, sizeof *array);
  FILE *fp = fopen(path, "rb");
  if (!fp) return md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: %s", path, strerror(errno));
  uint64_t file_size = 0, header_start = 0, header_len = 0;
  md_status status = MD_OK;
  struct stat info;
  if (fstat(fileno(fp), &info) != 0 || !S_ISREG(info.st_mode)) {
    status = md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: not a regular file", path);
  } else {
    file_size = (uint64_t)info.st_size;
    status = read_preamble(fp, path, file_size, &header_start, &header_len, err);
  }
  if (status == MD_OK) status = read_header(fp, path, header_start, header_len, array, err);
  if (status == MD_OK)
    status = read_data(fp, path, file_size - header_start - header_len, array, err);
  fclose(fp);
  if (status != MD_OK) md_npy_free(array);
  return status;
}

void md_npy_free(md_npy_array *array) {
  if (!array) return;
  free(array->data);
  memset(array, 0, sizeof *array);
}
