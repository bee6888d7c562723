/* io/npy: reading the files numpy wrote (fixtures/, from
 * make_npy_fixtures.py, whose literals are repeated here), writing files
 * byte-identical to numpy's, headers equal to numpy's for large shapes
 * (headers.json), the streaming writer, and every refusal. */
#include <dirent.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/formats/npy.h"
#include "tests/test_util.h"

static char temp_dir[] = "/tmp/md-npy-XXXXXX";

static void fixture(char *buf, size_t size, const char *name) {
  const char *root = getenv("MD_SOURCE_ROOT");
  snprintf(buf, size, "%s/tests/npy/%s", root ? root : ".", name);
}

static void temp_path(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "%s/%s", temp_dir, name);
}

static unsigned char *slurp(const char *path, size_t *len) {
  *len = 0;
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  unsigned char *bytes = malloc(1 << 16);
  *len = fread(bytes, 1, 1 << 16, fp);
  fclose(fp);
  return bytes;
}

static void spill(const char *path, const void *bytes, size_t len) {
  FILE *fp = fopen(path, "wb");
  fwrite(bytes, 1, len, fp);
  fclose(fp);
}

/* The two files have the same bytes. */
static void check_same_file(const char *ours, const char *numpy_name) {
  char theirs[4096];
  fixture(theirs, sizeof theirs, numpy_name);
  size_t a_len, b_len;
  unsigned char *a = slurp(ours, &a_len), *b = slurp(theirs, &b_len);
  CHECK_MSG(a && b && a_len == b_len && !memcmp(a, b, a_len), "%s differs from numpy's %s",
            ours, numpy_name);
  free(a);
  free(b);
}

static md_npy_array read_ok(const char *name) {
  char path[4096];
  fixture(path, sizeof path, name);
  md_npy_array array;
  md_error err = {0};
  CHECK_MSG(md_npy_read(path, &array, &err) == MD_OK, "%s: %s", name, err.message);
  return array;
}

static bool has_shape(const md_npy_array *array, int ndim, const int64_t *shape) {
  if (array->ndim != ndim) return false;
  for (int d = 0; d < ndim; d++)
    if (array->shape[d] != shape[d]) return false;
  return true;
}

/* MATRIX in make_npy_fixtures.py */
static const float matrix[6] = {1.5f, -2.0f, 0.25f, 3.0f, 0.0f, -0.0f};

static void check_matrix(const md_npy_array *array, const char *label) {
  static const int64_t shape[2] = {2, 3};
  CHECK_MSG(array->dtype == MD_NPY_F32 && has_shape(array, 2, shape) && array->count == 6, "%s",
            label);
  CHECK_MSG(array->data && !memcmp(array->data, matrix, sizeof matrix), "%s values", label);
}

static void test_read_numpy_files(void) {
  const char *matrices[] = {"fixtures/f32_2x3.npy", "fixtures/f32_2x3_v2.npy",
                            "fixtures/f32_2x3_v3.npy"};
  for (int i = 0; i < 3; i++) {
    md_npy_array array = read_ok(matrices[i]);
    check_matrix(&array, matrices[i]);
    md_npy_free(&array);
  }
  md_npy_array array = read_ok("fixtures/f32_0x3.npy");
  CHECK(array.ndim == 2 && array.shape[0] == 0 && array.shape[1] == 3 && array.count == 0);
  md_npy_free(&array);
  array = read_ok("fixtures/f32_5.npy");
  const float vector[5] = {0.5f, 1.0f, 1.5f, 2.0f, 1e-45f};
  CHECK(array.ndim == 1 && array.shape[0] == 5 && !memcmp(array.data, vector, sizeof vector));
  md_npy_free(&array);
  array = read_ok("fixtures/f32_scalar.npy");
  CHECK(array.ndim == 0 && array.count == 1 && ((float *)array.data)[0] == 7.0f);
  md_npy_free(&array);
  array = read_ok("fixtures/i32_2x2.npy");
  const int32_t ints[4] = {1, -2, INT32_MAX, INT32_MIN};
  CHECK(array.dtype == MD_NPY_I32 && array.count == 4 && !memcmp(array.data, ints, sizeof ints));
  md_npy_free(&array);
  array = read_ok("fixtures/f64_3.npy");
  const double doubles[3] = {0.1, -1e300, 5e-324};
  CHECK(array.dtype == MD_NPY_F64 && !memcmp(array.data, doubles, sizeof doubles));
  md_npy_free(&array);
  array = read_ok("fixtures/i64_2.npy");
  const int64_t longs[2] = {INT64_MIN, INT64_MAX};
  CHECK(array.dtype == MD_NPY_I64 && !memcmp(array.data, longs, sizeof longs));
  md_npy_free(&array);
  array = read_ok("fixtures/u8_4.npy");
  const uint8_t bytes[4] = {0, 1, 128, 255};
  CHECK(array.dtype == MD_NPY_U8 && !memcmp(array.data, bytes, sizeof bytes));
  md_npy_free(&array);
  array = read_ok("fixtures/i32_2x1x3x1.npy");
  const int64_t shape4[4] = {2, 1, 3, 1};
  const int32_t range[6] = {0, 1, 2, 3, 4, 5};
  CHECK(has_shape(&array, 4, shape4) && !memcmp(array.data, range, sizeof range));
  md_npy_free(&array);
}

/* Reading `path` fails with `status`; the message names it and holds `fragment`. */
static void expect_read_fails(const char *path, md_status status, const char *fragment) {
  md_npy_array array;
  md_error err = {0};
  md_status got = md_npy_read(path, &array, &err);
  CHECK_MSG(got == status, "%s: status %d (%s)", path, got, err.message);
  CHECK(array.data == NULL && array.ndim == 0);
  CHECK_MSG(strstr(err.message, path) && strstr(err.message, fragment), "'%s' not in: %s",
            fragment, err.message);
  md_npy_free(&array);
}

static void expect_fixture_fails(const char *name, md_status status, const char *fragment) {
  char path[4096];
  fixture(path, sizeof path, name);
  expect_read_fails(path, status, fragment);
}

static void test_refused_numpy_files(void) {
  expect_fixture_fails("fixtures/f32_fortran.npy", MD_E_UNSUPPORTED,
                       "fortran_order is True (column-major data is not supported)");
  expect_fixture_fails("fixtures/f32_big_endian.npy", MD_E_UNSUPPORTED,
                       "dtype '>f4' is big-endian (not supported)");
  expect_fixture_fails("fixtures/f16.npy", MD_E_UNSUPPORTED,
                       "dtype '<f2' is not supported (supported: <f4, <f8, <i4, <i8, |u1)");
  expect_fixture_fails("fixtures/c64.npy", MD_E_UNSUPPORTED, "dtype '<c8' is not supported");
  expect_fixture_fails("fixtures/structured.npy", MD_E_FORMAT,
                       "'descr' is not a type string (structured dtypes are not supported)");
}

/* A copy of numpy's f32_2x3.npy with its header text replaced (same
 * length, padded with spaces) or its bytes cut or extended. */
static void write_with_header(const char *path, const char *dict) {
  char source[4096];
  fixture(source, sizeof source, "fixtures/f32_2x3.npy");
  size_t len;
  unsigned char *bytes = slurp(source, &len);
  size_t header_len = bytes[8] | (size_t)bytes[9] << 8;
  memset(bytes + 10, ' ', header_len - 1);
  memcpy(bytes + 10, dict, strlen(dict));
  spill(path, bytes, len);
  free(bytes);
}

static void test_damaged_files(void) {
  char path[4096], source[4096];
  temp_path(path, sizeof path, "damaged.npy");
  fixture(source, sizeof source, "fixtures/f32_2x3.npy");
  size_t len;
  unsigned char *bytes = slurp(source, &len); /* 128 header bytes + 24 data */
  spill(path, bytes, len - 5);
  expect_read_fails(path, MD_E_FORMAT, "truncated: the shape needs 24 bytes of data, the file "
                                       "has 19");
  unsigned char longer[256];
  memcpy(longer, bytes, len);
  memset(longer + len, 0, 4);
  spill(path, longer, len + 4);
  expect_read_fails(path, MD_E_FORMAT, "4 bytes after the array data (the shape needs 24)");
  spill(path, bytes, 7);
  expect_read_fails(path, MD_E_FORMAT, "7 bytes, too short for a .npy file");
  memcpy(longer, bytes, len);
  longer[1] = 'n';
  spill(path, longer, len);
  expect_read_fails(path, MD_E_FORMAT, "not a .npy file (no \\x93NUMPY magic)");
  memcpy(longer, bytes, len);
  longer[6] = 4;
  spill(path, longer, len);
  expect_read_fails(path, MD_E_UNSUPPORTED, ".npy format version 4.0 is not supported");
  memcpy(longer, bytes, len);
  longer[8] = 0xff;
  spill(path, longer, len);
  expect_read_fails(path, MD_E_FORMAT, "header length 255 runs past the end of the file (152 "
                                       "bytes)");
  free(bytes);
  temp_path(path, sizeof path, "absent.npy");
  expect_read_fails(path, MD_E_IO, "No such file");
  expect_read_fails(temp_dir, MD_E_IO, "not a regular file");
}

static void test_bad_headers(void) {
  char path[4096];
  temp_path(path, sizeof path, "header.npy");
  const struct {
    const char *dict;
    const char *fragment;
  } cases[] = {
      {"['descr']", "column 1: expected '{'"},
      {"{'descr': '<f4', 'fortran_order': False}", "lacks one of 'descr', 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}",
       "column 59: unexpected key"},
      {"{'descr': '<f4', 'descr': '<f4', 'shape': (2, 3)}", "key given twice"},
      {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 3)}", "expected True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}",
       "column 55: expected a non-negative integer dimension"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}", "'shape' is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", "expected ',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 1)}",
       "dimension too large"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1)}",
       "more dimensions than supported (8)"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3)}", "expected ',' or '}'"},
      {"{'descr: '<f4', 'fortran_order': False, 'shape': (2, 3)}", "expected ':'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} x", "unexpected text after"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3)}",
       "truncated: the shape needs 48 bytes"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    write_with_header(path, cases[i].dict);
    expect_read_fails(path, MD_E_FORMAT, cases[i].fragment);
  }
  /* Spacing and quotes numpy never writes but a Python literal allows. */
  write_with_header(path, "{ \"shape\" : ( 2 , 3 , ) , \"fortran_order\":False,'descr':\"<f4\"}");
  md_npy_array array;
  md_error err = {0};
  CHECK_MSG(md_npy_read(path, &array, &err) == MD_OK, "%s", err.message);
  check_matrix(&array, "respaced header");
  md_npy_free(&array);
}

/* Our files are numpy's, byte for byte. */
static void test_write_like_numpy(void) {
  char path[4096];
  md_error err = {0};
  temp_path(path, sizeof path, "f32_2x3.npy");
  const int64_t shape23[2] = {2, 3};
  CHECK(md_npy_write_f32(path, 2, shape23, matrix, &err) == MD_OK);
  check_same_file(path, "fixtures/f32_2x3.npy");
  temp_path(path, sizeof path, "f32_0x3.npy");
  const int64_t shape03[2] = {0, 3};
  CHECK(md_npy_write_f32(path, 2, shape03, NULL, &err) == MD_OK);
  check_same_file(path, "fixtures/f32_0x3.npy");
  temp_path(path, sizeof path, "f32_5.npy");
  const float vector[5] = {0.5f, 1.0f, 1.5f, 2.0f, 1e-45f};
  const int64_t shape5[1] = {5};
  CHECK(md_npy_write_f32(path, 1, shape5, vector, &err) == MD_OK);
  check_same_file(path, "fixtures/f32_5.npy");
  temp_path(path, sizeof path, "f32_scalar.npy");
  const float seven = 7.0f;
  CHECK(md_npy_write_f32(path, 0, NULL, &seven, &err) == MD_OK);
  check_same_file(path, "fixtures/f32_scalar.npy");
  temp_path(path, sizeof path, "i32_2x2.npy");
  const int32_t ints[4] = {1, -2, INT32_MAX, INT32_MIN};
  const int64_t shape22[2] = {2, 2};
  CHECK(md_npy_write_i32(path, 2, shape22, ints, &err) == MD_OK);
  check_same_file(path, "fixtures/i32_2x2.npy");
  temp_path(path, sizeof path, "u8_4.npy");
  const uint8_t bytes[4] = {0, 1, 128, 255};
  const int64_t shape4[1] = {4};
  CHECK(md_npy_write(path, MD_NPY_U8, 1, shape4, bytes, &err) == MD_OK);
  check_same_file(path, "fixtures/u8_4.npy");
  temp_path(path, sizeof path, "f64_3.npy");
  const double doubles[3] = {0.1, -1e300, 5e-324};
  const int64_t shape3[1] = {3};
  CHECK(md_npy_write(path, MD_NPY_F64, 1, shape3, doubles, &err) == MD_OK);
  check_same_file(path, "fixtures/f64_3.npy");
}

/* numpy pads with 64 - n % 64 spaces: a full 64 when n is aligned. */
static bool ends_with_full_pad(const unsigned char *header, size_t len) {
  if (len < 65 || header[len - 1] != '\n') return false;
  for (size_t i = len - 65; i < len - 1; i++)
    if (header[i] != ' ') return false;
  return true;
}

static int hex_value(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

/* The bytes before the data, for shapes too large to save, as numpy wrote them. */
static void test_headers_like_numpy(void) {
  char path[4096];
  fixture(path, sizeof path, "headers.json");
  json_error_t jerr;
  json_t *reference = json_load_file(path, 0, &jerr);
  CHECK_MSG(reference != NULL, "%s: %s", path, jerr.text);
  size_t index, full_pads = 0;
  json_t *item;
  json_array_foreach(json_object_get(reference, "headers"), index, item) {
    const char *descr = json_string_value(json_object_get(item, "descr"));
    md_npy_dtype dtype = MD_NPY_F32;
    for (int d = MD_NPY_F32; d <= MD_NPY_U8; d++)
      if (!strcmp(md_npy_dtype_descr((md_npy_dtype)d), descr)) dtype = (md_npy_dtype)d;
    json_t *shape_json = json_object_get(item, "shape");
    int64_t shape[MD_NPY_MAX_DIMS];
    int ndim = (int)json_array_size(shape_json);
    for (int d = 0; d < ndim; d++) shape[d] = json_integer_value(json_array_get(shape_json, d));
    const char *hex = json_string_value(json_object_get(item, "header_hex"));
    size_t want_len = strlen(hex) / 2;
    unsigned char want[1024];
    for (size_t i = 0; i < want_len; i++)
      want[i] = (unsigned char)(hex_value(hex[2 * i]) * 16 + hex_value(hex[2 * i + 1]));
    char got[1024];
    size_t got_len = md_npy_header(dtype, ndim, shape, got, sizeof got);
    CHECK_MSG(got_len == want_len && !memcmp(got, want, want_len), "header %zu (%s, %d dims)",
              index, descr, ndim);
    CHECK(got_len % 64 == 0);
    full_pads += ends_with_full_pad(want, want_len);
  }
  CHECK(index >= 16 && full_pads >= 1);
  char small[64];
  const int64_t shape[2] = {2, 3};
  CHECK(md_npy_header(MD_NPY_F32, 2, shape, small, sizeof small) == 0);
  CHECK(md_npy_header(MD_NPY_F32, MD_NPY_MAX_DIMS + 1, shape, small, sizeof small) == 0);
  json_decref(reference);
}

static md_npy_stream *stream_open(const char *path, int64_t columns) {
  md_npy_stream *stream = NULL;
  md_error err = {0};
  CHECK_MSG(md_npy_stream_open(path, columns, &stream, &err) == MD_OK, "%s", err.message);
  return stream;
}

/* Row by row, the file numpy writes for the whole matrix. */
static void test_stream_like_numpy(void) {
  char path[4096];
  md_error err = {0};
  temp_path(path, sizeof path, "stream_2x3.npy");
  md_npy_stream *stream = stream_open(path, 3);
  if (!stream) return;
  CHECK(md_npy_stream_append(stream, matrix, &err) == MD_OK);
  CHECK(md_npy_stream_append(stream, matrix + 3, &err) == MD_OK);
  CHECK(md_npy_stream_rows(stream) == 2);
  CHECK(md_npy_stream_close(stream, &err) == MD_OK);
  check_same_file(path, "fixtures/f32_2x3.npy");
  temp_path(path, sizeof path, "stream_0x3.npy");
  stream = stream_open(path, 3);
  CHECK(stream && md_npy_stream_close(stream, &err) == MD_OK);
  check_same_file(path, "fixtures/f32_0x3.npy");
}

/* 1000 rows of 7 (headers.json holds numpy's header for [1000, 7]). */
static void test_stream_round_trip(void) {
  char path[4096];
  md_error err = {0};
  temp_path(path, sizeof path, "stream_1000x7.npy");
  md_npy_stream *stream = stream_open(path, 7);
  if (!stream) return;
  for (int r = 0; r < 1000; r++) {
    float row[7];
    for (int c = 0; c < 7; c++) row[c] = (float)(r * 7 + c) / 4.0f;
    CHECK(md_npy_stream_append(stream, row, &err) == MD_OK);
  }
  CHECK(md_npy_stream_close(stream, &err) == MD_OK);
  md_npy_array array;
  CHECK_MSG(md_npy_read(path, &array, &err) == MD_OK, "%s", err.message);
  const int64_t shape[2] = {1000, 7};
  CHECK(array.dtype == MD_NPY_F32 && has_shape(&array, 2, shape) && array.count == 7000);
  size_t wrong = 0;
  for (size_t i = 0; i < array.count && array.data; i++)
    wrong += ((float *)array.data)[i] != (float)i / 4.0f;
  CHECK(wrong == 0);
  md_npy_free(&array);
}

static size_t hidden_files(void) {
  DIR *dir = opendir(temp_dir);
  size_t count = 0;
  struct dirent *entry;
  while ((entry = readdir(dir)))
    count += entry->d_name[0] == '.' && strcmp(entry->d_name, ".") && strcmp(entry->d_name, "..");
  closedir(dir);
  return count;
}

/* Until close the target keeps its old bytes; abort leaves them and no
 * temporary file; close replaces them. */
static void test_stream_atomic(void) {
  char path[4096];
  md_error err = {0};
  temp_path(path, sizeof path, "keep.npy");
  spill(path, "old", 3);
  md_npy_stream *stream = stream_open(path, 3);
  if (!stream) return;
  CHECK(md_npy_stream_append(stream, matrix, &err) == MD_OK);
  size_t len;
  unsigned char *bytes = slurp(path, &len);
  CHECK(len == 3 && !memcmp(bytes, "old", 3));
  free(bytes);
  CHECK(hidden_files() == 1);
  md_npy_stream_abort(stream);
  bytes = slurp(path, &len);
  CHECK(len == 3 && !memcmp(bytes, "old", 3));
  free(bytes);
  CHECK(hidden_files() == 0);
  stream = stream_open(path, 3);
  CHECK(stream && md_npy_stream_append(stream, matrix, &err) == MD_OK);
  CHECK(stream && md_npy_stream_append(stream, matrix + 3, &err) == MD_OK);
  CHECK(stream && md_npy_stream_close(stream, &err) == MD_OK);
  check_same_file(path, "fixtures/f32_2x3.npy");
  CHECK(hidden_files() == 0);
  md_npy_stream_abort(NULL);
}

static void test_write_failures(void) {
  md_error err = {0};
  const int64_t shape[2] = {2, 3};
  const char *missing = "/nonexistent-dir/out.npy";
  CHECK(md_npy_write_f32(missing, 2, shape, matrix, &err) == MD_E_IO);
  CHECK(strstr(err.message, missing) != NULL);
  md_npy_stream *stream = (md_npy_stream *)1;
  CHECK(md_npy_stream_open(missing, 3, &stream, &err) == MD_E_IO && stream == NULL);
  CHECK(strstr(err.message, missing) != NULL);
  char path[4096];
  temp_path(path, sizeof path, "invalid.npy");
  const int64_t negative[2] = {2, -3};
  CHECK(md_npy_write_f32(path, 2, negative, matrix, &err) == MD_E_INVALID);
  CHECK(strstr(err.message, path) != NULL);
  CHECK(md_npy_write_f32(path, MD_NPY_MAX_DIMS + 1, shape, matrix, &err) == MD_E_INVALID);
  CHECK(md_npy_stream_open(path, -1, &stream, &err) == MD_E_INVALID);
  CHECK(access(path, F_OK) != 0 && hidden_files() == 0);
}

int main(void) {
  if (!mkdtemp(temp_dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_read_numpy_files();
  test_refused_numpy_files();
  test_damaged_files();
  test_bad_headers();
  test_write_like_numpy();
  test_headers_like_numpy();
  test_stream_like_numpy();
  test_stream_round_trip();
  test_stream_atomic();
  test_write_failures();
  char command[600];
  snprintf(command, sizeof command, "rm -rf '%s'", temp_dir);
  CHECK(system(command) == 0);
  return md_test_finish("npy");
}
