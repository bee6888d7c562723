/* GGUF files (io/formats/gguf.h): md_gguf_open, every metadata entry
 * through its typed getter, every tensor, and dequantization of the small
 * tensors of the types io/formats/gguf_quants.h converts.
 *
 * Invariants: a failure is MD_E_FORMAT, MD_E_UNSUPPORTED or MD_E_IO naming
 * the file (message and err.file), with *file NULL. On success: version 2
 * or 3, the alignment a power of two dividing the data section's offset;
 * every key non-empty, found by md_gguf_has_key, and read by the getter of
 * its type (strings NUL-terminated at their length, arrays' elements and
 * strings inside the input); every tensor found by its name, with at most
 * MD_GGUF_MAX_DIMS extents, all >= 1, their product n_elements, nbytes
 * the type's blocks, an offset that is a multiple of the alignment, data
 * inside the input, no two tensors overlapping; dequantization succeeds
 * exactly for the dequantizable types, and the bf16 output is the float32
 * output rounded. The tokenizer of the metadata (md_tokenizer_load_gguf)
 * either loads or fails with MD_E_FORMAT or MD_E_UNSUPPORTED naming the
 * file. */
#include "fuzz_util.h"
#include "collector/tokenizer/tokenizer.h"
#include "io/formats/gguf.h"

/* Dequantize tensors up to this many elements (inputs are small anyway). */
enum { DEQUANTIZE_MAX = 1 << 16 };

static volatile uint8_t sink;

static void touch(const void *data, uint64_t len) {
  if (len == 0) return;
  const uint8_t *bytes = data;
  sink ^= bytes[0];
  sink ^= bytes[len - 1];
}

static void check_kv(const md_gguf_file *file, size_t index, size_t size) {
  const char *key = md_gguf_kv_key(file, index);
  FUZZ_CHECK(key != NULL && key[0] != '\0' && strlen(key) <= MD_GGUF_MAX_KEY);
  FUZZ_CHECK(md_gguf_has_key(file, key));
  md_gguf_value_type type = md_gguf_kv_type(file, index);
  md_error err = {0};
  md_status status;
  switch (type) {
    case MD_GGUF_UINT8: case MD_GGUF_UINT16: case MD_GGUF_UINT32: case MD_GGUF_UINT64: {
      uint64_t v;
      status = md_gguf_get_u64(file, key, &v, &err);
      FUZZ_CHECK(status == MD_OK);
      uint32_t v32;
      status = md_gguf_get_u32(file, key, &v32, &err);
      FUZZ_CHECK(status == (v <= UINT32_MAX ? MD_OK : MD_E_FORMAT));
      if (status == MD_OK) FUZZ_CHECK(v32 == v);
      break;
    }
    case MD_GGUF_INT8: case MD_GGUF_INT16: case MD_GGUF_INT32: case MD_GGUF_INT64: {
      int64_t v;
      FUZZ_CHECK(md_gguf_get_i64(file, key, &v, &err) == MD_OK);
      uint64_t u;
      status = md_gguf_get_u64(file, key, &u, &err);
      FUZZ_CHECK(status == (v >= 0 ? MD_OK : MD_E_FORMAT));
      break;
    }
    case MD_GGUF_FLOAT32: case MD_GGUF_FLOAT64: {
      double v;
      FUZZ_CHECK(md_gguf_get_f64(file, key, &v, &err) == MD_OK);
      uint32_t u;
      FUZZ_CHECK(md_gguf_get_u32(file, key, &u, &err) == MD_E_FORMAT);
      FUZZ_CHECK(strstr(err.message, key) && strstr(err.message, "expected an integer"));
      break;
    }
    case MD_GGUF_BOOL: {
      bool v;
      FUZZ_CHECK(md_gguf_get_bool(file, key, &v, &err) == MD_OK);
      break;
    }
    case MD_GGUF_STRING: {
      const char *s = NULL;
      size_t len = 0;
      FUZZ_CHECK(md_gguf_get_string(file, key, &s, &len, &err) == MD_OK);
      FUZZ_CHECK(s != NULL && s[len] == '\0' && len <= size);
      break;
    }
    case MD_GGUF_ARRAY: {
      md_gguf_array a;
      FUZZ_CHECK(md_gguf_get_array(file, key, &a, &err) == MD_OK);
      FUZZ_CHECK(a.type <= MD_GGUF_FLOAT64 && a.count <= size);
      if (a.type == MD_GGUF_STRING) {
        const md_gguf_string *items = NULL;
        uint64_t count = 0;
        FUZZ_CHECK(md_gguf_get_string_array(file, key, &items, &count, &err) == MD_OK);
        FUZZ_CHECK(count == a.count && items == a.strings && items != NULL);
        for (uint64_t i = 0; i < count; i++) {
          FUZZ_CHECK(items[i].len <= size);
          touch(items[i].data, items[i].len); /* ASan sees a string outside the map */
        }
      } else {
        FUZZ_CHECK(a.strings == NULL);
        if (a.count > 0) {
          int64_t iv;
          double fv;
          bool is_int = md_gguf_array_int(&a, a.count - 1, &iv);
          bool is_float = md_gguf_array_float(&a, a.count - 1, &fv);
          FUZZ_CHECK(!(is_int && is_float));
          if (a.type == MD_GGUF_FLOAT32 || a.type == MD_GGUF_FLOAT64) FUZZ_CHECK(is_float);
          FUZZ_CHECK(!md_gguf_array_int(&a, a.count, &iv));
        }
        const md_gguf_string *items;
        uint64_t count;
        FUZZ_CHECK(md_gguf_get_string_array(file, key, &items, &count, &err) == MD_E_FORMAT);
      }
      break;
    }
    default:
      FUZZ_CHECK(!"unknown value type accepted");
  }
}

static int by_offset(const void *a, const void *b) {
  const md_gguf_tensor *x = *(const md_gguf_tensor *const *)a;
  const md_gguf_tensor *y = *(const md_gguf_tensor *const *)b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static void check_tensor(const md_gguf_file *file, const md_gguf_tensor *t, size_t size) {
  FUZZ_CHECK(t->name && t->name[0] && strlen(t->name) <= MD_GGUF_MAX_NAME);
  FUZZ_CHECK(md_gguf_find_tensor(file, t->name) == t);
  FUZZ_CHECK(t->n_dims >= 0 && t->n_dims <= MD_GGUF_MAX_DIMS);
  uint64_t product = 1;
  for (int d = 0; d < MD_GGUF_MAX_DIMS; d++) {
    FUZZ_CHECK(t->ne[d] >= 1);
    if (d >= t->n_dims) FUZZ_CHECK(t->ne[d] == 1);
    product *= (uint64_t)t->ne[d];
  }
  FUZZ_CHECK(product == t->n_elements);
  FUZZ_CHECK(md_ggml_type_known(t->type));
  uint32_t block = md_ggml_block_elements(t->type);
  FUZZ_CHECK((uint64_t)t->ne[0] % block == 0);
  FUZZ_CHECK(t->nbytes == t->n_elements / block * md_ggml_block_bytes(t->type));
  FUZZ_CHECK(t->offset % md_gguf_alignment(file) == 0);
  FUZZ_CHECK(t->offset >= md_gguf_data_offset(file));
  FUZZ_CHECK(t->offset <= size && t->nbytes <= size - t->offset);
  touch(t->data, t->nbytes);

  if (t->n_elements > DEQUANTIZE_MAX) return;
  float *out = malloc(t->n_elements * sizeof *out);
  uint16_t *out16 = malloc(t->n_elements * sizeof *out16);
  FUZZ_CHECK(out && out16);
  md_error err = {0};
  md_status status = md_gguf_tensor_dequantize(file, t, out, &err);
  if (!md_ggml_type_dequantizable(t->type)) {
    FUZZ_CHECK(status == MD_E_UNSUPPORTED && strstr(err.message, t->name) &&
               strstr(err.message, md_ggml_type_name(t->type)));
  } else {
    FUZZ_CHECK(status == MD_OK);
    FUZZ_CHECK(md_gguf_tensor_dequantize_bf16(file, t, out16, &err) == MD_OK);
    for (uint64_t i = 0; i < t->n_elements; i++)
      FUZZ_CHECK(out16[i] == md_f32_to_bf16_rne(out[i]));
  }
  free(out);
  free(out16);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_input_file(data, size, ".gguf");
  md_gguf_file *file = (md_gguf_file *)&file; /* must be set to NULL on failure */
  md_error err = {0};
  md_status status = md_gguf_open(path, &file, &err);
  if (status != MD_OK) {
    fuzz_check_failure(status, &err,
                       FUZZ_ST(MD_E_FORMAT) | FUZZ_ST(MD_E_UNSUPPORTED) | FUZZ_ST(MD_E_IO), path);
    FUZZ_CHECK(file == NULL);
    if (status != MD_E_NOMEM) FUZZ_CHECK(!strcmp(err.file, path));
    return 0;
  }
  FUZZ_CHECK(file != NULL && !strcmp(md_gguf_path(file), path));
  FUZZ_CHECK(md_gguf_version(file) == 2 || md_gguf_version(file) == 3);
  FUZZ_CHECK(md_gguf_file_size(file) == size);
  uint32_t alignment = md_gguf_alignment(file);
  FUZZ_CHECK(alignment != 0 && (alignment & (alignment - 1)) == 0);
  FUZZ_CHECK(md_gguf_data_offset(file) % alignment == 0);

  size_t n_kv = md_gguf_kv_count(file);
  FUZZ_CHECK(n_kv <= size);
  for (size_t i = 0; i < n_kv; i++) check_kv(file, i, size);
  FUZZ_CHECK(md_gguf_kv_key(file, n_kv) == NULL);

  size_t n = md_gguf_tensor_count(file);
  FUZZ_CHECK(n <= size);
  if (n > 0) FUZZ_CHECK(md_gguf_data_offset(file) <= size);
  const md_gguf_tensor **order = malloc((n ? n : 1) * sizeof *order);
  FUZZ_CHECK(order != NULL);
  for (size_t i = 0; i < n; i++) {
    order[i] = md_gguf_tensor_at(file, i);
    FUZZ_CHECK(order[i] != NULL);
    check_tensor(file, order[i], size);
  }
  FUZZ_CHECK(md_gguf_tensor_at(file, n) == NULL);
  qsort(order, n, sizeof *order, by_offset);
  for (size_t i = 1; i < n; i++)
    FUZZ_CHECK(order[i - 1]->offset + order[i - 1]->nbytes <= order[i]->offset);
  free(order);

  FUZZ_CHECK(md_gguf_find_tensor(file, "no such tensor") == NULL);
  uint32_t v;
  status = md_gguf_get_u32(file, "no such key", &v, &err);
  FUZZ_CHECK(status == MD_E_FORMAT && strstr(err.message, path) != NULL);
  (void)sink;
  md_tokenizer *tok = NULL;
  err = (md_error){0};
  status = md_tokenizer_load_gguf(file, &tok, &err);
  if (status != MD_OK)
    fuzz_check_failure(status, &err, FUZZ_ST(MD_E_FORMAT) | FUZZ_ST(MD_E_UNSUPPORTED), path);
  FUZZ_CHECK((status == MD_OK) == (tok != NULL));
  md_tokenizer_free(tok);
  md_gguf_close(file);
  return 0;
}
