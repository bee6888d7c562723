#include "io/formats/safetensors.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/files/mapped_file.h"

/* The format is little-endian and tensors are used in place. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian host required");

/* One header entry. `tensor` is meaningful only when `supported`. */
typedef struct st_entry {
  char *name;
  char dtype_name[16];
  size_t element_size;
  bool supported;     /* F32/F16/BF16 and at most MD_TENSOR_MAX_DIMS dims */
  int ndim;
  uint64_t begin, end; /* byte range in the data section */
  md_tensor tensor;
  void *aligned_copy;
} st_entry;

struct md_safetensors {
  char *path;
  md_mapped_file mapping;
  const unsigned char *map; /* mapping.data */
  size_t map_size;
  uint64_t data_start; /* 8 + header length */
  st_entry *entries;   /* sorted by name */
  size_t count;
  json_t *metadata;    /* "__metadata__" object or NULL */
  uint64_t realigned_bytes;
};

/* Element sizes of the dtypes the safetensors format defines with whole-byte
 * elements.  Sub-byte types (F4, F6_*) have no byte size and are refused. */
static const struct {
  const char *name;
  size_t size;
  int ours; /* -1 when we cannot compute with it */
} st_dtypes[] = {
    {"F32", 4, MD_DTYPE_F32}, {"F16", 2, MD_DTYPE_F16}, {"BF16", 2, MD_DTYPE_BF16},
    {"F64", 8, -1},           {"I64", 8, -1},           {"U64", 8, -1},
    {"I32", 4, -1},           {"U32", 4, -1},           {"I16", 2, -1},
    {"U16", 2, -1},           {"I8", 1, -1},            {"U8", 1, -1},
    {"BOOL", 1, -1},          {"F8_E5M2", 1, -1},       {"F8_E4M3", 1, -1},
    {"F8_E8M0", 1, -1},       {"C64", 8, -1},
};

static const char supported_list[] = "supported: F32, F16, BF16";

static md_status fail_unsupported_dtype(md_error *err, const char *path, const char *dtype,
                                        const char *tensor) {
  return md_fail(err, MD_E_UNSUPPORTED, "%s: dtype %s of tensor %s is not supported (%s)", path,
                 dtype, tensor, supported_list);
}

static md_status parse_dtype(const char *path, st_entry *entry, json_t *value, md_error *err) {
  if (!json_is_string(value))
    return md_fail(err, MD_E_FORMAT, "%s: tensor %s: 'dtype' is missing or not a string", path,
                   entry->name);
  const char *dtype = json_string_value(value);
  for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++) {
    if (strcmp(dtype, st_dtypes[i].name) != 0) continue;
    snprintf(entry->dtype_name, sizeof entry->dtype_name, "%s", dtype);
    entry->element_size = st_dtypes[i].size;
    entry->supported = st_dtypes[i].ours >= 0;
    if (entry->supported) entry->tensor.dtype = (md_dtype)st_dtypes[i].ours;
    return MD_OK;
  }
  return fail_unsupported_dtype(err, path, dtype, entry->name);
}

/* A JSON integer in [0, INT64_MAX]; jansson's json_int_t is long long. */
static bool get_count(json_t *value, uint64_t *out) {
  if (!json_is_integer(value) || json_integer_value(value) < 0) return false;
  *out = (uint64_t)json_integer_value(value);
  return true;
}

static void format_shape(json_t *shape, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "[");
  size_t index;
  json_t *dim;
  json_array_foreach(shape, index, dim) {
    if (used >= size) break;
    used += (size_t)snprintf(buf + used, size - used, "%s%" JSON_INTEGER_FORMAT,
                             index ? ", " : "", json_integer_value(dim));
  }
  if (used < size) snprintf(buf + used, size - used, "]");
}

/* Checks the shape and returns the byte count dtype size x product(shape),
 * refusing a product that overflows 64 bits. */
static md_status parse_shape(const char *path, st_entry *entry, json_t *shape, uint64_t *bytes,
                             md_error *err) {
  if (!json_is_array(shape))
    return md_fail(err, MD_E_FORMAT,
                   "%s: tensor %s: 'shape' is missing or not a list of non-negative integers",
                   path, entry->name);
  uint64_t total = entry->element_size;
  size_t index;
  json_t *dim;
  json_array_foreach(shape, index, dim) {
    uint64_t extent;
    if (!get_count(dim, &extent))
      return md_fail(err, MD_E_FORMAT,
                     "%s: tensor %s: shape[%zu] is not a non-negative integer", path,
                     entry->name, index);
    if (index < MD_TENSOR_MAX_DIMS) entry->tensor.shape[index] = (int64_t)extent;
    if (__builtin_mul_overflow(total, extent, &total)) {
      char text[256];
      format_shape(shape, text, sizeof text);
      return md_fail(err, MD_E_FORMAT, "%s: tensor %s: the size of shape %s overflows 64 bits",
                     path, entry->name, text);
    }
  }
  entry->ndim = (int)json_array_size(shape);
  if (entry->ndim > MD_TENSOR_MAX_DIMS) entry->supported = false;
  entry->tensor.ndim = entry->ndim <= MD_TENSOR_MAX_DIMS ? entry->ndim : MD_TENSOR_MAX_DIMS;
  *bytes = total;
  return MD_OK;
}

static md_status parse_entry(const char *path, st_entry *entry, json_t *info,
                             uint64_t data_size, md_error *err) {
  if (!json_is_object(info))
    return md_fail(err, MD_E_FORMAT, "%s: tensor %s: entry is not an object", path, entry->name);
  md_status status = parse_dtype(path, entry, json_object_get(info, "dtype"), err);
  if (status != MD_OK) return status;
  json_t *shape = json_object_get(info, "shape");
  uint64_t bytes = 0;
  status = parse_shape(path, entry, shape, &bytes, err);
  if (status != MD_OK) return status;
  json_t *offsets = json_object_get(info, "data_offsets");
  if (!json_is_array(offsets) || json_array_size(offsets) != 2 ||
      !get_count(json_array_get(offsets, 0), &entry->begin) ||
      !get_count(json_array_get(offsets, 1), &entry->end))
    return md_fail(err, MD_E_FORMAT,
                   "%s: tensor %s: 'data_offsets' is missing or not [begin, end] with "
                   "non-negative integers",
                   path, entry->name);
  if (entry->begin > entry->end)
    return md_fail(err, MD_E_FORMAT, "%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64
                   "] have begin > end", path, entry->name, entry->begin, entry->end);
  if (entry->end - entry->begin != bytes) {
    char text[256];
    format_shape(shape, text, sizeof text);
    return md_fail(err, MD_E_FORMAT,
                   "%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                   " bytes but dtype %s with shape %s needs %" PRIu64 " bytes",
                   path, entry->name, entry->begin, entry->end, entry->end - entry->begin,
                   entry->dtype_name, text, bytes);
  }
  if (entry->end > data_size)
    return md_fail(err, MD_E_FORMAT,
                   "%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64
                   "] run past the end of the file (the data section is %" PRIu64 " bytes)",
                   path, entry->name, entry->begin, entry->end, data_size);
  entry->tensor.nbytes = (size_t)bytes;
  return MD_OK;
}

static int by_offsets(const void *a, const void *b) {
  const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return strcmp(x->name, y->name);
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

/* The reference implementation requires the tensors, sorted by offset, to
 * tile the data section: each begins where the previous ended, the first at
 * 0, the last at the end of the file.  Holes would let a file carry bytes no
 * tensor accounts for (polyglot files). */
static md_status check_tiling(md_safetensors *file, uint64_t data_size, md_error *err) {
  const st_entry **order = malloc((file->count ? file->count : 1) * sizeof *order);
  if (!order) return md_fail(err, MD_E_NOMEM, "%s: out of memory", file->path);
  for (size_t i = 0; i < file->count; i++) order[i] = &file->entries[i];
  qsort(order, file->count, sizeof *order, by_offsets);
  uint64_t covered = 0;
  const st_entry *previous = NULL;
  md_status status = MD_OK;
  for (size_t i = 0; i < file->count && status == MD_OK; i++) {
    const st_entry *entry = order[i];
    if (entry->begin < covered)
      status = md_fail(err, MD_E_FORMAT,
                       "%s: tensors %s [%" PRIu64 ", %" PRIu64 ") and %s [%" PRIu64 ", %" PRIu64
                       ") overlap", file->path, previous->name, previous->begin, previous->end,
                       entry->name, entry->begin, entry->end);
    else if (entry->begin > covered)
      status = md_fail(err, MD_E_FORMAT,
                       "%s: bytes [%" PRIu64 ", %" PRIu64 ") of the data section belong to no "
                       "tensor (a gap before tensor %s)", file->path, covered, entry->begin,
                       entry->name);
    covered = entry->end;
    previous = entry;
  }
  if (status == MD_OK && covered != data_size)
    status = md_fail(err, MD_E_FORMAT,
                     "%s: the data section has %" PRIu64 " bytes after the last tensor%s%s "
                     "(it is %" PRIu64 " bytes, the tensors cover %" PRIu64 ")",
                     file->path, data_size - covered, previous ? " " : "",
                     previous ? previous->name : "", data_size, covered);
  free(order);
  return status;
}

static md_status parse_metadata(md_safetensors *file, json_t *metadata, md_error *err) {
  if (!json_is_object(metadata))
    return md_fail(err, MD_E_FORMAT, "%s: '__metadata__' is not an object of strings",
                   file->path);
  const char *key;
  json_t *value;
  json_object_foreach(metadata, key, value) {
    if (!json_is_string(value))
      return md_fail(err, MD_E_FORMAT, "%s: '__metadata__' value for key '%s' is not a string",
                     file->path, key);
  }
  file->metadata = json_incref(metadata);
  return MD_OK;
}

static md_status parse_entries(md_safetensors *file, json_t *header, uint64_t data_size,
                               md_error *err) {
  size_t total = json_object_size(header);
  file->entries = calloc(total ? total : 1, sizeof *file->entries);
  if (!file->entries) return md_fail(err, MD_E_NOMEM, "%s: out of memory", file->path);
  const char *key;
  json_t *value;
  json_object_foreach(header, key, value) {
    md_status status;
    if (!strcmp(key, "__metadata__")) {
      status = parse_metadata(file, value, err);
      if (status != MD_OK) return status;
      continue;
    }
    st_entry *entry = &file->entries[file->count++];
    entry->name = strdup(key);
    if (!entry->name) return md_fail(err, MD_E_NOMEM, "%s: out of memory", file->path);
    entry->tensor.name = entry->name;
    status = parse_entry(file->path, entry, value, data_size, err);
    if (status != MD_OK) return status;
  }
  qsort(file->entries, file->count, sizeof *file->entries, by_name);
  return check_tiling(file, data_size, err);
}

static md_status parse_header(md_safetensors *file, md_error *err) {
  if (file->map_size < 8)
    return md_fail(err, MD_E_FORMAT,
                   "%s: the file is %zu bytes, too short for a safetensors header "
                   "(an 8-byte length, then JSON)", file->path, file->map_size);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; i--) header_len = (header_len << 8) | file->map[i];
  if (header_len > MD_SAFETENSORS_MAX_HEADER)
    return md_fail(err, MD_E_FORMAT,
                   "%s: header length %" PRIu64 " exceeds the %u-byte limit (not a safetensors "
                   "file, or a corrupt one)", file->path, header_len, MD_SAFETENSORS_MAX_HEADER);
  if (header_len > file->map_size - 8)
    return md_fail(err, MD_E_FORMAT,
                   "%s: header length %" PRIu64 " runs past the end of the file (%zu bytes)",
                   file->path, header_len, file->map_size);
  if (header_len == 0 || file->map[8] != '{')
    return md_fail(err, MD_E_FORMAT,
                   "%s: the header does not start with '{' (not a safetensors file?)",
                   file->path);
  json_error_t jerr;
  json_t *header = json_loadb((const char *)file->map + 8, (size_t)header_len,
                              JSON_REJECT_DUPLICATES, &jerr);
  if (!header)
    return md_fail(err, MD_E_FORMAT, "%s: header JSON, line %d, column %d: %s", file->path,
                   jerr.line, jerr.column, jerr.text);
  file->data_start = 8 + header_len;
  md_status status = parse_entries(file, header, file->map_size - file->data_start, err);
  json_decref(header);
  return status;
}

/* Points each supported tensor at its bytes, copying the few whose address
 * is not a multiple of their element size (a header not padded to 8). */
static md_status bind_data(md_safetensors *file, md_error *err) {
  for (size_t i = 0; i < file->count; i++) {
    st_entry *entry = &file->entries[i];
    const unsigned char *bytes = file->map + file->data_start + entry->begin;
    entry->tensor.data = bytes;
    entry->tensor.mapped = true;
    if (!entry->supported || entry->tensor.nbytes == 0) continue;
    if ((uintptr_t)bytes % entry->element_size == 0) continue;
    entry->aligned_copy = malloc(entry->tensor.nbytes);
    if (!entry->aligned_copy)
      return md_fail(err, MD_E_NOMEM, "%s: tensor %s: out of memory for an aligned copy",
                     file->path, entry->name);
    memcpy(entry->aligned_copy, bytes, entry->tensor.nbytes);
    entry->tensor.data = entry->aligned_copy;
    entry->tensor.mapped = false;
    file->realigned_bytes += entry->tensor.nbytes;
  }
  return MD_OK;
}

static md_status map_file(md_safetensors *file, md_error *err) {
  md_status status = md_mapped_file_open(file->path, &file->mapping, err);
  if (status != MD_OK) return status;
  file->map = file->mapping.data;
  file->map_size = file->mapping.size;
  return MD_OK;
}

md_status md_safetensors_open(const char *path, md_safetensors **out, md_error *err) {
  *out = NULL;
  md_safetensors *file = calloc(1, sizeof *file);
  if (!file || !(file->path = strdup(path))) {
    free(file);
    return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  }
  md_status status = map_file(file, err);
  if (status == MD_OK) status = parse_header(file, err);
  if (status == MD_OK) status = bind_data(file, err);
  if (status != MD_OK) {
    md_safetensors_close(file);
    return status;
  }
  *out = file;
  return MD_OK;
}

void md_safetensors_close(md_safetensors *file) {
  if (!file) return;
  for (size_t i = 0; i < file->count; i++) {
    free(file->entries[i].name);
    free(file->entries[i].aligned_copy);
  }
  free(file->entries);
  md_mapped_file_close(&file->mapping);
  json_decref(file->metadata);
  free(file->path);
  free(file);
}

const char *md_safetensors_path(const md_safetensors *file) { return file->path; }

size_t md_safetensors_count(const md_safetensors *file) { return file->count; }

const char *md_safetensors_name(const md_safetensors *file, size_t index) {
  return index < file->count ? file->entries[index].name : NULL;
}

static const st_entry *find(const md_safetensors *file, const char *name) {
  st_entry key = {.name = (char *)name};
  return bsearch(&key, file->entries, file->count, sizeof *file->entries, by_name);
}

bool md_safetensors_contains(const md_safetensors *file, const char *name) {
  return find(file, name) != NULL;
}

const char *md_safetensors_dtype_name(const md_safetensors *file, const char *name) {
  const st_entry *entry = find(file, name);
  return entry ? entry->dtype_name : NULL;
}

md_status md_safetensors_get(const md_safetensors *file, const char *name,
                             const md_tensor **tensor, md_error *err) {
  *tensor = NULL;
  const st_entry *entry = find(file, name);
  if (!entry) return md_fail(err, MD_E_FORMAT, "%s: no tensor named %s", file->path, name);
  if (entry->ndim > MD_TENSOR_MAX_DIMS)
    return md_fail(err, MD_E_UNSUPPORTED,
                   "%s: tensor %s has %d dimensions (at most %d are supported)", file->path,
                   name, entry->ndim, MD_TENSOR_MAX_DIMS);
  if (!entry->supported) return fail_unsupported_dtype(err, file->path, entry->dtype_name, name);
  *tensor = &entry->tensor;
  return MD_OK;
}

const char *md_safetensors_metadata(const md_safetensors *file, const char *key) {
  return file->metadata ? json_string_value(json_object_get(file->metadata, key)) : NULL;
}

uint64_t md_safetensors_realigned_bytes(const md_safetensors *file) {
  return file->realigned_bytes;
}
