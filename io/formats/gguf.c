#include "io/formats/gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/files/mapped_file.h"

/* The format is little-endian and values are read in place. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian host required");

/* Header: magic, version, tensor count, metadata count. */
enum { HEADER_BYTES = 4 + 4 + 8 + 8 };
/* The least bytes a metadata entry can take: a key of one byte (8 + 1),
 * its value type (4) and a one-byte value. */
enum { MIN_KV_BYTES = 8 + 1 + 4 + 1 };
/* The least bytes a tensor info can take: a one-byte name (8 + 1), the
 * dimension count (4), no extents, the type (4) and the offset (8). */
enum { MIN_TENSOR_INFO_BYTES = 8 + 1 + 4 + 4 + 8 };

typedef struct gguf_kv {
  char *key;
  uint64_t entry_offset;     /* where the entry starts, for messages */
  md_gguf_value_type type;
  const uint8_t *value;      /* scalars: the value; strings: the bytes after the length */
  uint64_t string_len;
  char *string_copy;         /* strings: NUL-terminated copy */
  md_gguf_array array;       /* arrays */
  md_gguf_string *strings;   /* arrays of strings: the elements */
} gguf_kv;

typedef struct gguf_tensor {
  md_gguf_tensor view;
  char *name;
  uint64_t info_offset;      /* where its tensor info starts */
  uint64_t data_relative;    /* offset as stored: from the data section's start */
} gguf_tensor;

struct md_gguf_file {
  char *path;
  md_mapped_file mapping;
  const uint8_t *map;     /* mapping.data */
  uint64_t size;
  uint32_t version;
  uint32_t alignment;
  uint64_t data_offset;
  gguf_kv *kvs;
  size_t kv_count, kv_capacity;
  const gguf_kv **kv_by_key;  /* into kvs, sorted by key */
  gguf_tensor *tensors;
  size_t tensor_count, tensor_capacity;
  const gguf_tensor **tensor_by_name; /* into tensors, sorted by name */
};

/* A failure naming the file (first) and `record` (the key or tensor, or
 * NULL) in md_error's fields. */
static md_status __attribute__((format(printf, 5, 6)))
gguf_fail(const md_gguf_file *file, md_error *err, md_status status, const char *record,
          const char *fmt, ...) {
  char message[MD_ERROR_MESSAGE_MAX];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof message, fmt, args);
  va_end(args);
  md_fail(err, status, "%s: %s", file->path, message);
  md_error_at(err, file->path, 0, record);
  return status;
}

static md_status out_of_memory(const md_gguf_file *file, md_error *err) {
  md_fail(err, MD_E_NOMEM, "%s: out of memory", file->path);
  md_error_at(err, file->path, 0, NULL);
  return MD_E_NOMEM;
}

const char *md_gguf_value_type_name(md_gguf_value_type type) {
  switch (type) {
    case MD_GGUF_UINT8: return "uint8";
    case MD_GGUF_INT8: return "int8";
    case MD_GGUF_UINT16: return "uint16";
    case MD_GGUF_INT16: return "int16";
    case MD_GGUF_UINT32: return "uint32";
    case MD_GGUF_INT32: return "int32";
    case MD_GGUF_FLOAT32: return "float32";
    case MD_GGUF_BOOL: return "bool";
    case MD_GGUF_STRING: return "string";
    case MD_GGUF_ARRAY: return "array";
    case MD_GGUF_UINT64: return "uint64";
    case MD_GGUF_INT64: return "int64";
    case MD_GGUF_FLOAT64: return "float64";
  }
  return "?";
}

static bool value_type_known(uint32_t type) { return type <= MD_GGUF_FLOAT64; }

/* Bytes of a fixed-size value; 0 for strings and arrays. */
static uint64_t scalar_bytes(md_gguf_value_type type) {
  switch (type) {
    case MD_GGUF_UINT8: case MD_GGUF_INT8: case MD_GGUF_BOOL: return 1;
    case MD_GGUF_UINT16: case MD_GGUF_INT16: return 2;
    case MD_GGUF_UINT32: case MD_GGUF_INT32: case MD_GGUF_FLOAT32: return 4;
    case MD_GGUF_UINT64: case MD_GGUF_INT64: case MD_GGUF_FLOAT64: return 8;
    case MD_GGUF_STRING: case MD_GGUF_ARRAY: return 0;
  }
  return 0;
}

/* The least bytes one element of this type takes: a string its length,
 * an array its element type and count. */
static uint64_t min_element_bytes(md_gguf_value_type type) {
  if (type == MD_GGUF_STRING) return 8;
  if (type == MD_GGUF_ARRAY) return 4 + 8;
  return scalar_bytes(type);
}

static bool is_integer_type(md_gguf_value_type type) {
  switch (type) {
    case MD_GGUF_UINT8: case MD_GGUF_INT8: case MD_GGUF_UINT16: case MD_GGUF_INT16:
    case MD_GGUF_UINT32: case MD_GGUF_INT32: case MD_GGUF_UINT64: case MD_GGUF_INT64:
      return true;
    default: return false;
  }
}

/* --- reading the mapping -------------------------------------------------- */

typedef struct reader {
  md_gguf_file *file;
  uint64_t pos; /* <= file->size */
  md_error *err;
} reader;

static bool have(const reader *r, uint64_t n) { return n <= r->file->size - r->pos; }

static uint32_t take_u32(reader *r) {
  uint32_t v;
  memcpy(&v, r->file->map + r->pos, sizeof v);
  r->pos += sizeof v;
  return v;
}

static uint64_t take_u64(reader *r) {
  uint64_t v;
  memcpy(&v, r->file->map + r->pos, sizeof v);
  r->pos += sizeof v;
  return v;
}

/* Keys and tensor names are printed in messages and compared as C strings:
 * no control characters, no NUL. */
static bool printable_name(const uint8_t *bytes, uint64_t len, uint64_t *bad) {
  for (uint64_t i = 0; i < len; i++) {
    if (bytes[i] < 0x20 || bytes[i] == 0x7f) {
      *bad = i;
      return false;
    }
  }
  return true;
}

/* Reads a key or tensor name of 1 .. max_len bytes at the cursor into a
 * new NUL-terminated string; `what` says what it names ("metadata entry 3's
 * key") for the messages. */
static md_status take_name(reader *r, uint64_t max_len, const char *what, char **out) {
  md_gguf_file *f = r->file;
  uint64_t at = r->pos;
  if (!have(r, 8))
    return gguf_fail(f, r->err, MD_E_FORMAT, NULL,
                     "%s: its length at offset %" PRIu64 " runs past the end of the file "
                     "(%" PRIu64 " bytes)", what, at, f->size);
  uint64_t len = take_u64(r);
  if (len == 0 || len > max_len)
    return gguf_fail(f, r->err, MD_E_FORMAT, NULL,
                     "%s at offset %" PRIu64 " is %" PRIu64 " bytes long (1 to %" PRIu64
                     " allowed)", what, at, len, max_len);
  if (!have(r, len))
    return gguf_fail(f, r->err, MD_E_FORMAT, NULL,
                     "%s at offset %" PRIu64 ": its %" PRIu64 " bytes run past the end of "
                     "the file (%" PRIu64 " bytes)", what, at, len, f->size);
  const uint8_t *bytes = f->map + r->pos;
  uint64_t bad = 0;
  if (!printable_name(bytes, len, &bad))
    return gguf_fail(f, r->err, MD_E_FORMAT, NULL,
                     "%s at offset %" PRIu64 " holds byte 0x%02x at position %" PRIu64
                     " (control characters are not allowed)", what, at, bytes[bad], bad);
  char *copy = malloc(len + 1);
  if (!copy) return out_of_memory(f, r->err);
  memcpy(copy, bytes, len);
  copy[len] = '\0';
  r->pos += len;
  *out = copy;
  return MD_OK;
}

/* --- metadata -------------------------------------------------------------- */

static md_status truncated_value(reader *r, const char *key, const char *what, uint64_t at) {
  return gguf_fail(r->file, r->err, MD_E_FORMAT, key,
                   "key %s: %s at offset %" PRIu64 " runs past the end of the file (%" PRIu64
                   " bytes)", key, what, at, r->file->size);
}

static md_status walk_elements(reader *r, const char *key, int depth, md_gguf_value_type type,
                               uint64_t count);

/* An array's element type and count at the cursor, checked against the
 * bytes left: `count` elements take at least count x min_element_bytes. */
static md_status take_array_header(reader *r, const char *key, int depth,
                                   md_gguf_value_type *type, uint64_t *count) {
  uint64_t at = r->pos;
  if (depth > MD_GGUF_MAX_NESTING)
    return gguf_fail(r->file, r->err, MD_E_FORMAT, key,
                     "key %s: arrays nested more than %d deep (at offset %" PRIu64 ")", key,
                     MD_GGUF_MAX_NESTING, at);
  if (!have(r, 4 + 8)) return truncated_value(r, key, "an array's element type and count", at);
  uint32_t raw_type = take_u32(r);
  *count = take_u64(r);
  if (!value_type_known(raw_type))
    return gguf_fail(r->file, r->err, MD_E_FORMAT, key,
                     "key %s: array at offset %" PRIu64 " has unknown element type %" PRIu32,
                     key, at, raw_type);
  *type = (md_gguf_value_type)raw_type;
  uint64_t remaining = r->file->size - r->pos;
  uint64_t least = min_element_bytes(*type);
  if (*count > remaining / least)
    return gguf_fail(r->file, r->err, MD_E_FORMAT, key,
                     "key %s: array at offset %" PRIu64 " declares %" PRIu64 " %s elements, "
                     "more than the %" PRIu64 " bytes left in the file can hold (each takes "
                     "at least %" PRIu64 ")", key, at, *count, md_gguf_value_type_name(*type),
                     remaining, least);
  return MD_OK;
}

/* Steps over one string at the cursor; its bytes start at *bytes. */
static md_status take_string(reader *r, const char *key, const char *what,
                             const uint8_t **bytes, uint64_t *len) {
  uint64_t at = r->pos;
  if (!have(r, 8)) return truncated_value(r, key, what, at);
  *len = take_u64(r);
  if (!have(r, *len))
    return gguf_fail(r->file, r->err, MD_E_FORMAT, key,
                     "key %s: %s at offset %" PRIu64 " declares %" PRIu64 " bytes, more than "
                     "the %" PRIu64 " left in the file", key, what, at, *len,
                     r->file->size - r->pos);
  *bytes = r->file->map + r->pos;
  r->pos += *len;
  return MD_OK;
}

/* Checks and steps over `count` elements of `type` at the cursor. Every
 * element takes at least a byte, so the walk is bounded by the file. */
static md_status walk_elements(reader *r, const char *key, int depth, md_gguf_value_type type,
                               uint64_t count) {
  if (type == MD_GGUF_STRING) {
    for (uint64_t i = 0; i < count; i++) {
      const uint8_t *bytes;
      uint64_t len;
      md_status status = take_string(r, key, "a string element", &bytes, &len);
      if (status != MD_OK) return status;
    }
    return MD_OK;
  }
  if (type == MD_GGUF_ARRAY) {
    for (uint64_t i = 0; i < count; i++) {
      md_gguf_value_type inner;
      uint64_t inner_count;
      md_status status = take_array_header(r, key, depth + 1, &inner, &inner_count);
      if (status == MD_OK) status = walk_elements(r, key, depth + 1, inner, inner_count);
      if (status != MD_OK) return status;
    }
    return MD_OK;
  }
  /* Fixed-size elements: take_array_header checked that they fit. */
  uint64_t bytes = count * scalar_bytes(type);
  if (type == MD_GGUF_BOOL) {
    for (uint64_t i = 0; i < count; i++) {
      uint8_t v = r->file->map[r->pos + i];
      if (v > 1)
        return gguf_fail(r->file, r->err, MD_E_FORMAT, key,
                         "key %s: bool element at offset %" PRIu64 " is %u (0 or 1 allowed)",
                         key, r->pos + i, v);
    }
  }
  r->pos += bytes;
  return MD_OK;
}

/* The elements of an array of strings, after walk_elements checked them. */
static md_status index_strings(reader *r, gguf_kv *kv) {
  uint64_t count = kv->array.count;
  kv->strings = malloc((count ? count : 1) * sizeof *kv->strings);
  if (!kv->strings) return out_of_memory(r->file, r->err);
  const uint8_t *p = kv->array.data;
  for (uint64_t i = 0; i < count; i++) {
    uint64_t len;
    memcpy(&len, p, sizeof len);
    kv->strings[i].data = (const char *)p + 8;
    kv->strings[i].len = len;
    p += 8 + len;
  }
  kv->array.strings = kv->strings;
  return MD_OK;
}

static md_status take_value(reader *r, gguf_kv *kv) {
  const char *key = kv->key;
  uint64_t at = r->pos;
  if (kv->type == MD_GGUF_STRING) {
    md_status status = take_string(r, key, "the string value", &kv->value, &kv->string_len);
    if (status != MD_OK) return status;
    kv->string_copy = malloc(kv->string_len + 1);
    if (!kv->string_copy) return out_of_memory(r->file, r->err);
    memcpy(kv->string_copy, kv->value, kv->string_len);
    kv->string_copy[kv->string_len] = '\0';
    return MD_OK;
  }
  if (kv->type == MD_GGUF_ARRAY) {
    md_status status = take_array_header(r, key, 1, &kv->array.type, &kv->array.count);
    if (status != MD_OK) return status;
    kv->array.data = r->file->map + r->pos;
    status = walk_elements(r, key, 1, kv->array.type, kv->array.count);
    if (status == MD_OK && kv->array.type == MD_GGUF_STRING) status = index_strings(r, kv);
    return status;
  }
  uint64_t bytes = scalar_bytes(kv->type);
  if (!have(r, bytes)) {
    char what[64];
    snprintf(what, sizeof what, "its %s value", md_gguf_value_type_name(kv->type));
    return truncated_value(r, key, what, at);
  }
  kv->value = r->file->map + r->pos;
  if (kv->type == MD_GGUF_BOOL && kv->value[0] > 1)
    return gguf_fail(r->file, r->err, MD_E_FORMAT, key,
                     "key %s: bool value at offset %" PRIu64 " is %u (0 or 1 allowed)", key,
                     at, kv->value[0]);
  r->pos += bytes;
  return MD_OK;
}

static md_status take_kv(reader *r, uint64_t index) {
  md_gguf_file *f = r->file;
  if (f->kv_count == f->kv_capacity) {
    size_t capacity = f->kv_capacity ? 2 * f->kv_capacity : 16;
    gguf_kv *grown = realloc(f->kvs, capacity * sizeof *grown);
    if (!grown) return out_of_memory(f, r->err);
    f->kvs = grown;
    f->kv_capacity = capacity;
  }
  gguf_kv *kv = &f->kvs[f->kv_count++];
  memset(kv, 0, sizeof *kv);
  kv->entry_offset = r->pos;
  char what[64];
  snprintf(what, sizeof what, "metadata entry %" PRIu64 "'s key", index);
  md_status status = take_name(r, MD_GGUF_MAX_KEY, what, &kv->key);
  if (status != MD_OK) return status;
  uint64_t at = r->pos;
  if (!have(r, 4)) return truncated_value(r, kv->key, "its value type", at);
  uint32_t type = take_u32(r);
  if (!value_type_known(type))
    return gguf_fail(f, r->err, MD_E_FORMAT, kv->key,
                     "key %s: unknown value type %" PRIu32 " at offset %" PRIu64, kv->key,
                     type, at);
  kv->type = (md_gguf_value_type)type;
  return take_value(r, kv);
}

static int kv_by_key_order(const void *a, const void *b) {
  return strcmp((*(const gguf_kv *const *)a)->key, (*(const gguf_kv *const *)b)->key);
}

static const gguf_kv *find_kv(const md_gguf_file *file, const char *key) {
  gguf_kv probe = {.key = (char *)key};
  const gguf_kv *probe_ptr = &probe;
  const gguf_kv *const *hit =
      bsearch(&probe_ptr, file->kv_by_key, file->kv_count, sizeof *file->kv_by_key,
              kv_by_key_order);
  return hit ? *hit : NULL;
}

static md_status parse_metadata(reader *r, uint64_t kv_count) {
  md_gguf_file *f = r->file;
  for (uint64_t i = 0; i < kv_count; i++) {
    md_status status = take_kv(r, i);
    if (status != MD_OK) return status;
  }
  /* kvs no longer moves: the index points into it. */
  f->kv_by_key = malloc((f->kv_count ? f->kv_count : 1) * sizeof *f->kv_by_key);
  if (!f->kv_by_key) return out_of_memory(f, r->err);
  for (size_t i = 0; i < f->kv_count; i++) f->kv_by_key[i] = &f->kvs[i];
  qsort(f->kv_by_key, f->kv_count, sizeof *f->kv_by_key, kv_by_key_order);
  for (size_t i = 1; i < f->kv_count; i++) {
    const gguf_kv *a = f->kv_by_key[i - 1], *b = f->kv_by_key[i];
    if (strcmp(a->key, b->key) == 0) {
      uint64_t first = a->entry_offset < b->entry_offset ? a->entry_offset : b->entry_offset;
      uint64_t second = a->entry_offset < b->entry_offset ? b->entry_offset : a->entry_offset;
      return gguf_fail(f, r->err, MD_E_FORMAT, b->key,
                       "key %s appears twice (metadata entries at offsets %" PRIu64
                       " and %" PRIu64 ")", b->key, first, second);
    }
  }
  return MD_OK;
}

/* --- typed access ------------------------------------------------------------ */

/* An integer value of any of the eight types, as a sign and a magnitude. */
typedef struct integer_value {
  bool negative;
  uint64_t magnitude;
} integer_value;

static integer_value read_integer(md_gguf_value_type type, const uint8_t *p) {
  integer_value v = {false, 0};
  int64_t s = 0;
  switch (type) {
    case MD_GGUF_UINT8: v.magnitude = p[0]; return v;
    case MD_GGUF_UINT16: { uint16_t u; memcpy(&u, p, 2); v.magnitude = u; return v; }
    case MD_GGUF_UINT32: { uint32_t u; memcpy(&u, p, 4); v.magnitude = u; return v; }
    case MD_GGUF_UINT64: memcpy(&v.magnitude, p, 8); return v;
    case MD_GGUF_INT8: s = (int8_t)p[0]; break;
    case MD_GGUF_INT16: { int16_t x; memcpy(&x, p, 2); s = x; break; }
    case MD_GGUF_INT32: { int32_t x; memcpy(&x, p, 4); s = x; break; }
    case MD_GGUF_INT64: memcpy(&s, p, 8); break;
    default: return v;
  }
  v.negative = s < 0;
  v.magnitude = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
  return v;
}

/* "a uint32", "an array of 12 string" */
static void describe_kv(const gguf_kv *kv, char *buf, size_t size) {
  if (kv->type == MD_GGUF_ARRAY)
    snprintf(buf, size, "an array of %" PRIu64 " %s", kv->array.count,
             md_gguf_value_type_name(kv->array.type));
  else
    snprintf(buf, size, "%s %s", kv->type == MD_GGUF_INT8 || kv->type == MD_GGUF_INT16 ||
                                         kv->type == MD_GGUF_INT32 || kv->type == MD_GGUF_INT64
                                     ? "an"
                                     : "a",
             md_gguf_value_type_name(kv->type));
}

static md_status lookup(const md_gguf_file *file, const char *key, const gguf_kv **kv,
                        md_error *err) {
  *kv = find_kv(file, key);
  if (!*kv) return gguf_fail(file, err, MD_E_FORMAT, key, "no key %s", key);
  return MD_OK;
}

static md_status wrong_type(const md_gguf_file *file, const gguf_kv *kv, const char *expected,
                            md_error *err) {
  char found[96];
  describe_kv(kv, found, sizeof found);
  return gguf_fail(file, err, MD_E_FORMAT, kv->key, "key %s is %s, expected %s", kv->key, found,
                   expected);
}

static md_status get_integer(const md_gguf_file *file, const char *key, integer_value *value,
                             md_error *err) {
  const gguf_kv *kv;
  md_status status = lookup(file, key, &kv, err);
  if (status != MD_OK) return status;
  if (!is_integer_type(kv->type)) return wrong_type(file, kv, "an integer", err);
  *value = read_integer(kv->type, kv->value);
  return MD_OK;
}

static md_status out_of_range(const md_gguf_file *file, const char *key, integer_value v,
                              const char *range, md_error *err) {
  return gguf_fail(file, err, MD_E_FORMAT, key, "key %s is %s%" PRIu64 ", outside %s", key,
                   v.negative ? "-" : "", v.magnitude, range);
}

md_status md_gguf_get_u32(const md_gguf_file *file, const char *key, uint32_t *value,
                          md_error *err) {
  integer_value v;
  md_status status = get_integer(file, key, &v, err);
  if (status != MD_OK) return status;
  if (v.negative || v.magnitude > UINT32_MAX)
    return out_of_range(file, key, v, "[0, 4294967295]", err);
  *value = (uint32_t)v.magnitude;
  return MD_OK;
}

md_status md_gguf_get_u64(const md_gguf_file *file, const char *key, uint64_t *value,
                          md_error *err) {
  integer_value v;
  md_status status = get_integer(file, key, &v, err);
  if (status != MD_OK) return status;
  if (v.negative) return out_of_range(file, key, v, "[0, 2^64-1]", err);
  *value = v.magnitude;
  return MD_OK;
}

md_status md_gguf_get_i64(const md_gguf_file *file, const char *key, int64_t *value,
                          md_error *err) {
  integer_value v;
  md_status status = get_integer(file, key, &v, err);
  if (status != MD_OK) return status;
  if (v.negative ? v.magnitude > (uint64_t)INT64_MAX + 1 : v.magnitude > (uint64_t)INT64_MAX)
    return out_of_range(file, key, v, "[-2^63, 2^63-1]", err);
  *value = v.negative ? (int64_t)(0 - v.magnitude) : (int64_t)v.magnitude;
  return MD_OK;
}

md_status md_gguf_get_f64(const md_gguf_file *file, const char *key, double *value,
                          md_error *err) {
  const gguf_kv *kv;
  md_status status = lookup(file, key, &kv, err);
  if (status != MD_OK) return status;
  if (kv->type == MD_GGUF_FLOAT32) {
    float f;
    memcpy(&f, kv->value, sizeof f);
    *value = f;
  } else if (kv->type == MD_GGUF_FLOAT64) {
    memcpy(value, kv->value, sizeof *value);
  } else {
    return wrong_type(file, kv, "a float32 or float64", err);
  }
  return MD_OK;
}

md_status md_gguf_get_f32(const md_gguf_file *file, const char *key, float *value,
                          md_error *err) {
  double wide;
  md_status status = md_gguf_get_f64(file, key, &wide, err);
  if (status != MD_OK) return status;
  float narrow = (float)wide;
  if (isinf(narrow) && !isinf(wide))
    return gguf_fail(file, err, MD_E_FORMAT, key, "key %s is %g, beyond the float32 range", key,
                     wide);
  *value = narrow;
  return MD_OK;
}

md_status md_gguf_get_bool(const md_gguf_file *file, const char *key, bool *value,
                           md_error *err) {
  const gguf_kv *kv;
  md_status status = lookup(file, key, &kv, err);
  if (status != MD_OK) return status;
  if (kv->type != MD_GGUF_BOOL) return wrong_type(file, kv, "a bool", err);
  *value = kv->value[0] != 0;
  return MD_OK;
}

md_status md_gguf_get_string(const md_gguf_file *file, const char *key, const char **value,
                             size_t *len, md_error *err) {
  const gguf_kv *kv;
  md_status status = lookup(file, key, &kv, err);
  if (status != MD_OK) return status;
  if (kv->type != MD_GGUF_STRING) return wrong_type(file, kv, "a string", err);
  *value = kv->string_copy;
  if (len) *len = (size_t)kv->string_len;
  return MD_OK;
}

md_status md_gguf_get_array(const md_gguf_file *file, const char *key, md_gguf_array *array,
                            md_error *err) {
  const gguf_kv *kv;
  md_status status = lookup(file, key, &kv, err);
  if (status != MD_OK) return status;
  if (kv->type != MD_GGUF_ARRAY) return wrong_type(file, kv, "an array", err);
  *array = kv->array;
  return MD_OK;
}

md_status md_gguf_get_string_array(const md_gguf_file *file, const char *key,
                                   const md_gguf_string **items, uint64_t *count,
                                   md_error *err) {
  const gguf_kv *kv;
  md_status status = lookup(file, key, &kv, err);
  if (status != MD_OK) return status;
  if (kv->type != MD_GGUF_ARRAY || kv->array.type != MD_GGUF_STRING)
    return wrong_type(file, kv, "an array of string", err);
  *items = kv->array.strings;
  *count = kv->array.count;
  return MD_OK;
}

bool md_gguf_array_int(const md_gguf_array *array, uint64_t index, int64_t *value) {
  if (!is_integer_type(array->type) || index >= array->count) return false;
  const uint8_t *p = (const uint8_t *)array->data + index * scalar_bytes(array->type);
  integer_value v = read_integer(array->type, p);
  if (v.negative ? v.magnitude > (uint64_t)INT64_MAX + 1 : v.magnitude > (uint64_t)INT64_MAX)
    return false;
  *value = v.negative ? (int64_t)(0 - v.magnitude) : (int64_t)v.magnitude;
  return true;
}

bool md_gguf_array_float(const md_gguf_array *array, uint64_t index, double *value) {
  if (index >= array->count) return false;
  const uint8_t *p = (const uint8_t *)array->data + index * scalar_bytes(array->type);
  if (array->type == MD_GGUF_FLOAT32) {
    float f;
    memcpy(&f, p, sizeof f);
    *value = f;
    return true;
  }
  if (array->type == MD_GGUF_FLOAT64) {
    memcpy(value, p, sizeof *value);
    return true;
  }
  return false;
}

/* --- tensors ----------------------------------------------------------------- */

static void format_extents(const uint64_t *extents, uint32_t n, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (uint32_t d = 0; d < n && used < size; d++)
    used += (size_t)snprintf(buf + used, size - used, "%s%" PRIu64, d ? ", " : "", extents[d]);
  if (used < size) snprintf(buf + used, size - used, "]");
}

static md_status take_tensor_info(reader *r, uint64_t index) {
  md_gguf_file *f = r->file;
  if (f->tensor_count == f->tensor_capacity) {
    size_t capacity = f->tensor_capacity ? 2 * f->tensor_capacity : 64;
    gguf_tensor *grown = realloc(f->tensors, capacity * sizeof *grown);
    if (!grown) return out_of_memory(f, r->err);
    f->tensors = grown;
    f->tensor_capacity = capacity;
  }
  gguf_tensor *t = &f->tensors[f->tensor_count++];
  memset(t, 0, sizeof *t);
  t->view.index = f->tensor_count - 1;
  t->info_offset = r->pos;
  char what[64];
  snprintf(what, sizeof what, "tensor info %" PRIu64 "'s name", index);
  md_status status = take_name(r, MD_GGUF_MAX_NAME, what, &t->name);
  if (status != MD_OK) return status;
  const char *name = t->name;
  t->view.name = name;
  if (!have(r, 4))
    return gguf_fail(f, r->err, MD_E_FORMAT, name,
                     "tensor %s: its dimension count at offset %" PRIu64 " runs past the end "
                     "of the file (%" PRIu64 " bytes)", name, r->pos, f->size);
  uint32_t n_dims = take_u32(r);
  if (n_dims > MD_GGUF_MAX_DIMS)
    return gguf_fail(f, r->err, MD_E_FORMAT, name,
                     "tensor %s has %" PRIu32 " dimensions (at most %d)", name, n_dims,
                     MD_GGUF_MAX_DIMS);
  if (!have(r, 8 * (uint64_t)n_dims + 4 + 8))
    return gguf_fail(f, r->err, MD_E_FORMAT, name,
                     "tensor %s: its extents, type and offset at offset %" PRIu64 " run past "
                     "the end of the file (%" PRIu64 " bytes)", name, r->pos, f->size);
  uint64_t extents[MD_GGUF_MAX_DIMS];
  for (uint32_t d = 0; d < n_dims; d++) extents[d] = take_u64(r);
  uint32_t type = take_u32(r);
  t->data_relative = take_u64(r);
  char shape[160];
  format_extents(extents, n_dims, shape, sizeof shape);
  uint64_t elements = 1;
  for (uint32_t d = 0; d < n_dims; d++) {
    if (extents[d] == 0)
      return gguf_fail(f, r->err, MD_E_FORMAT, name,
                       "tensor %s: extent %" PRIu32 " of %s is 0 (extents are at least 1)",
                       name, d, shape);
    if (__builtin_mul_overflow(elements, extents[d], &elements) || elements > INT64_MAX)
      return gguf_fail(f, r->err, MD_E_FORMAT, name,
                       "tensor %s: the element count of %s overflows 2^63", name, shape);
  }
  const char *type_name = md_ggml_type_name(type);
  if (!type_name)
    return gguf_fail(f, r->err, MD_E_FORMAT, name, "tensor %s has unknown ggml type %" PRIu32,
                     name, type);
  uint64_t block = md_ggml_block_elements(type);
  uint64_t row = n_dims ? extents[0] : 1;
  if (row % block != 0)
    return gguf_fail(f, r->err, MD_E_FORMAT, name,
                     "tensor %s: its rows (ne[0] = %" PRIu64 ") are not whole %s blocks of "
                     "%" PRIu64 " elements", name, row, type_name, block);
  uint64_t nbytes;
  if (__builtin_mul_overflow(elements / block, (uint64_t)md_ggml_block_bytes(type), &nbytes) ||
      nbytes > INT64_MAX)
    return gguf_fail(f, r->err, MD_E_FORMAT, name,
                     "tensor %s: %s of type %s takes more than 2^63 bytes", name, shape,
                     type_name);
  t->view.type = type;
  t->view.n_dims = (int)n_dims;
  for (int d = 0; d < MD_GGUF_MAX_DIMS; d++)
    t->view.ne[d] = d < (int)n_dims ? (int64_t)extents[d] : 1;
  t->view.n_elements = elements;
  t->view.nbytes = nbytes;
  return MD_OK;
}

/* Tensors sorted by their data's offset, for the overlap check. */
static int by_data_offset(const void *a, const void *b) {
  const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
  if (x->data_relative != y->data_relative) return x->data_relative < y->data_relative ? -1 : 1;
  return x->view.nbytes < y->view.nbytes ? -1 : x->view.nbytes > y->view.nbytes;
}

static md_status place_tensors(md_gguf_file *f, md_error *err) {
  uint64_t data_size = f->data_offset <= f->size ? f->size - f->data_offset : 0;
  for (size_t i = 0; i < f->tensor_count; i++) {
    gguf_tensor *t = &f->tensors[i];
    if (t->data_relative % f->alignment != 0)
      return gguf_fail(f, err, MD_E_FORMAT, t->name,
                       "tensor %s: its data offset %" PRIu64 " is not a multiple of the "
                       "alignment %" PRIu32, t->name, t->data_relative, f->alignment);
    if (t->data_relative > data_size || t->view.nbytes > data_size - t->data_relative)
      return gguf_fail(f, err, MD_E_FORMAT, t->name,
                       "tensor %s: its %" PRIu64 " bytes at data offset %" PRIu64 " run past "
                       "the end of the file (the data section holds %" PRIu64 " bytes from "
                       "offset %" PRIu64 ")", t->name, t->view.nbytes, t->data_relative,
                       data_size, f->data_offset);
    t->view.offset = f->data_offset + t->data_relative;
    t->view.data = f->map + t->view.offset;
  }
  const gguf_tensor **order = malloc((f->tensor_count ? f->tensor_count : 1) * sizeof *order);
  if (!order) return out_of_memory(f, err);
  for (size_t i = 0; i < f->tensor_count; i++) order[i] = &f->tensors[i];
  qsort(order, f->tensor_count, sizeof *order, by_data_offset);
  md_status status = MD_OK;
  for (size_t i = 1; i < f->tensor_count && status == MD_OK; i++) {
    const gguf_tensor *a = order[i - 1], *b = order[i];
    if (b->data_relative < a->data_relative + a->view.nbytes)
      status = gguf_fail(f, err, MD_E_FORMAT, b->name,
                         "tensors %s [%" PRIu64 ", %" PRIu64 ") and %s [%" PRIu64 ", %" PRIu64
                         ") overlap (byte ranges in the data section)", a->name,
                         a->data_relative, a->data_relative + a->view.nbytes, b->name,
                         b->data_relative, b->data_relative + b->view.nbytes);
  }
  free(order);
  return status;
}

static int tensor_by_name_order(const void *a, const void *b) {
  return strcmp((*(const gguf_tensor *const *)a)->name, (*(const gguf_tensor *const *)b)->name);
}

static md_status parse_tensors(reader *r, uint64_t tensor_count) {
  md_gguf_file *f = r->file;
  for (uint64_t i = 0; i < tensor_count; i++) {
    md_status status = take_tensor_info(r, i);
    if (status != MD_OK) return status;
  }
  /* tensors no longer moves: the index points into it. */
  f->tensor_by_name = malloc((f->tensor_count ? f->tensor_count : 1) * sizeof *f->tensor_by_name);
  if (!f->tensor_by_name) return out_of_memory(f, r->err);
  for (size_t i = 0; i < f->tensor_count; i++) f->tensor_by_name[i] = &f->tensors[i];
  qsort(f->tensor_by_name, f->tensor_count, sizeof *f->tensor_by_name, tensor_by_name_order);
  for (size_t i = 1; i < f->tensor_count; i++) {
    const gguf_tensor *a = f->tensor_by_name[i - 1], *b = f->tensor_by_name[i];
    if (strcmp(a->name, b->name) == 0) {
      uint64_t first = a->info_offset < b->info_offset ? a->info_offset : b->info_offset;
      uint64_t second = a->info_offset < b->info_offset ? b->info_offset : a->info_offset;
      return gguf_fail(f, r->err, MD_E_FORMAT, b->name,
                       "tensor %s appears twice (tensor infos at offsets %" PRIu64
                       " and %" PRIu64 ")", b->name, first, second);
    }
  }
  /* The data section starts at the first multiple of the alignment after
   * the tensor infos (alignment <= 2^31, so no overflow). */
  uint64_t end = r->pos;
  f->data_offset = (end + f->alignment - 1) / f->alignment * f->alignment;
  if (f->tensor_count > 0 && f->data_offset > f->size)
    return gguf_fail(f, r->err, MD_E_FORMAT, NULL,
                     "the data section would start at offset %" PRIu64 " (the tensor infos "
                     "end at %" PRIu64 ", aligned to %" PRIu32 "), past the end of the file "
                     "(%" PRIu64 " bytes)", f->data_offset, end, f->alignment, f->size);
  return place_tensors(f, r->err);
}

/* --- the header and the whole file ------------------------------------------ */

static md_status parse_alignment(md_gguf_file *f, md_error *err) {
  f->alignment = MD_GGUF_DEFAULT_ALIGNMENT;
  const char *key = "general.alignment";
  if (!find_kv(f, key)) return MD_OK;
  uint32_t alignment;
  md_status status = md_gguf_get_u32(f, key, &alignment, err);
  if (status != MD_OK) return status;
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    return gguf_fail(f, err, MD_E_FORMAT, key, "key %s is %" PRIu32 ", not a power of two",
                     key, alignment);
  f->alignment = alignment;
  return MD_OK;
}

static md_status parse_file(md_gguf_file *f, md_error *err) {
  reader r = {.file = f, .pos = 0, .err = err};
  if (f->size < 4)
    return gguf_fail(f, err, MD_E_FORMAT, NULL,
                     "the file is %" PRIu64 " bytes, too short for a GGUF header", f->size);
  if (memcmp(f->map, "GGUF", 4) != 0)
    return gguf_fail(f, err, MD_E_FORMAT, NULL,
                     "not a GGUF file (it starts with bytes %02x %02x %02x %02x, not \"GGUF\")",
                     f->map[0], f->map[1], f->map[2], f->map[3]);
  r.pos = 4;
  if (!have(&r, 4))
    return gguf_fail(f, err, MD_E_FORMAT, NULL,
                     "the file ends inside the header (%d bytes: magic, version, tensor count, "
                     "metadata count); it is %" PRIu64 " bytes", HEADER_BYTES, f->size);
  f->version = take_u32(&r);
  if (f->version != 2 && f->version != 3) {
    /* ggml's test: a file of the other byte order has its version in the
     * high half. */
    if (f->version != 0 && (f->version & 0xffffu) == 0)
      return gguf_fail(f, err, MD_E_UNSUPPORTED, NULL,
                       "the version field reads 0x%08" PRIx32 ": a big-endian GGUF file "
                       "(only little-endian files are read)", f->version);
    if (f->version == 1)
      return gguf_fail(f, err, MD_E_UNSUPPORTED, NULL,
                       "GGUF version 1 (32-bit counts) is not supported; versions 2 and 3 are");
    return gguf_fail(f, err, MD_E_UNSUPPORTED, NULL,
                     "GGUF version %" PRIu32 " is not supported; versions 2 and 3 are",
                     f->version);
  }
  if (!have(&r, 16))
    return gguf_fail(f, err, MD_E_FORMAT, NULL,
                     "the file ends inside the header (%d bytes: magic, version, tensor count, "
                     "metadata count); it is %" PRIu64 " bytes", HEADER_BYTES, f->size);
  uint64_t tensor_count = take_u64(&r);
  uint64_t kv_count = take_u64(&r);
  uint64_t rest = f->size - HEADER_BYTES;
  /* Refused before anything is allocated: counts the file cannot hold. */
  if (kv_count > rest / MIN_KV_BYTES)
    return gguf_fail(f, err, MD_E_FORMAT, NULL,
                     "the header declares %" PRIu64 " metadata entries, more than the %" PRIu64
                     " bytes after it can hold (each takes at least %d)", kv_count, rest,
                     MIN_KV_BYTES);
  if (tensor_count > rest / MIN_TENSOR_INFO_BYTES ||
      kv_count * MIN_KV_BYTES + tensor_count * MIN_TENSOR_INFO_BYTES > rest)
    return gguf_fail(f, err, MD_E_FORMAT, NULL,
                     "the header declares %" PRIu64 " tensors and %" PRIu64 " metadata entries, "
                     "more than the %" PRIu64 " bytes after it can hold (a tensor info takes at "
                     "least %d bytes, an entry %d)", tensor_count, kv_count, rest,
                     MIN_TENSOR_INFO_BYTES, MIN_KV_BYTES);
  md_status status = parse_metadata(&r, kv_count);
  if (status == MD_OK) status = parse_alignment(f, err);
  if (status == MD_OK) status = parse_tensors(&r, tensor_count);
  return status;
}

static md_status map_file(md_gguf_file *file, md_error *err) {
  md_status status = md_mapped_file_open(file->path, &file->mapping, err);
  if (status != MD_OK) {
    md_error_at(err, file->path, 0, NULL);
    return status;
  }
  file->map = file->mapping.data;
  file->size = (uint64_t)file->mapping.size;
  return MD_OK;
}

md_status md_gguf_open(const char *path, md_gguf_file **out, md_error *err) {
  *out = NULL;
  md_gguf_file *file = calloc(1, sizeof *file);
  if (!file || !(file->path = strdup(path))) {
    free(file);
    return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  }
  md_status status = map_file(file, err);
  if (status == MD_OK) status = parse_file(file, err);
  if (status != MD_OK) {
    md_gguf_close(file);
    return status;
  }
  *out = file;
  return MD_OK;
}

void md_gguf_close(md_gguf_file *file) {
  if (!file) return;
  for (size_t i = 0; i < file->kv_count; i++) {
    free(file->kvs[i].key);
    free(file->kvs[i].string_copy);
    free(file->kvs[i].strings);
  }
  free(file->kvs);
  free(file->kv_by_key);
  for (size_t i = 0; i < file->tensor_count; i++) free(file->tensors[i].name);
  free(file->tensors);
  free(file->tensor_by_name);
  md_mapped_file_close(&file->mapping);
  free(file->path);
  free(file);
}

const char *md_gguf_path(const md_gguf_file *file) { return file->path; }
uint32_t md_gguf_version(const md_gguf_file *file) { return file->version; }
uint64_t md_gguf_file_size(const md_gguf_file *file) { return file->size; }
uint32_t md_gguf_alignment(const md_gguf_file *file) { return file->alignment; }
uint64_t md_gguf_data_offset(const md_gguf_file *file) { return file->data_offset; }

size_t md_gguf_kv_count(const md_gguf_file *file) { return file->kv_count; }

const char *md_gguf_kv_key(const md_gguf_file *file, size_t index) {
  return index < file->kv_count ? file->kvs[index].key : NULL;
}

md_gguf_value_type md_gguf_kv_type(const md_gguf_file *file, size_t index) {
  return index < file->kv_count ? file->kvs[index].type : (md_gguf_value_type)-1;
}

bool md_gguf_has_key(const md_gguf_file *file, const char *key) {
  return find_kv(file, key) != NULL;
}

size_t md_gguf_tensor_count(const md_gguf_file *file) { return file->tensor_count; }

const md_gguf_tensor *md_gguf_tensor_at(const md_gguf_file *file, size_t index) {
  return index < file->tensor_count ? &file->tensors[index].view : NULL;
}

const md_gguf_tensor *md_gguf_find_tensor(const md_gguf_file *file, const char *name) {
  gguf_tensor probe = {.name = (char *)name};
  const gguf_tensor *probe_ptr = &probe;
  const gguf_tensor *const *hit =
      bsearch(&probe_ptr, file->tensor_by_name, file->tensor_count, sizeof *file->tensor_by_name,
              tensor_by_name_order);
  return hit ? &(*hit)->view : NULL;
}

md_status md_gguf_get_tensor(const md_gguf_file *file, const char *name,
                             const md_gguf_tensor **tensor, md_error *err) {
  *tensor = md_gguf_find_tensor(file, name);
  if (!*tensor) return gguf_fail(file, err, MD_E_FORMAT, name, "no tensor named %s", name);
  return MD_OK;
}

static md_status dequantize_failed(const md_gguf_file *file, const md_gguf_tensor *tensor,
                                   md_status status, md_error *err) {
  md_error_prefix(err, "%s: tensor %s", file->path, tensor->name);
  md_error_at(err, file->path, 0, tensor->name);
  return status;
}

md_status md_gguf_tensor_dequantize(const md_gguf_file *file, const md_gguf_tensor *tensor,
                                    float *out, md_error *err) {
  md_status status = md_ggml_dequantize(tensor->type, tensor->data, tensor->n_elements, out, err);
  return status == MD_OK ? MD_OK : dequantize_failed(file, tensor, status, err);
}

md_status md_gguf_tensor_dequantize_bf16(const md_gguf_file *file,
                                         const md_gguf_tensor *tensor, uint16_t *out,
                                         md_error *err) {
  md_status status =
      md_ggml_dequantize_bf16(tensor->type, tensor->data, tensor->n_elements, out, err);
  return status == MD_OK ? MD_OK : dequantize_failed(file, tensor, status, err);
}
