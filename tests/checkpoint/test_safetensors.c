/* io/safetensors: files built here byte by byte, good and bad.  Expected
 * values are derived by hand in the comments beside them. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/formats/safetensors.h"
#include "tests/checkpoint/checkpoint_util.h"
#include "tests/test_util.h"

static char temp_dir[] = "/tmp/md-safetensors-XXXXXX";

static void temp_path(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "%s/%s", temp_dir, name);
}

/* u64 little-endian `declared` length, `header_len` bytes of header, data. */
static void write_raw(const char *path, uint64_t declared, const char *header, size_t header_len,
                      const void *data, size_t data_len) {
  FILE *fp = fopen(path, "wb");
  if (!fp) {
    perror(path);
    exit(1);
  }
  unsigned char prefix[8];
  for (int i = 0; i < 8; i++) prefix[i] = (unsigned char)(declared >> (8 * i));
  fwrite(prefix, 1, 8, fp);
  fwrite(header, 1, header_len, fp);
  if (data_len) fwrite(data, 1, data_len, fp);
  fclose(fp);
}

/* A well-formed prefix: the header's true length, padded to 8 with spaces
 * when `pad` (as the reference writer does). */
static void write_file(const char *path, const char *header, const void *data, size_t data_len,
                       bool pad) {
  char padded[4096];
  size_t len = strlen(header);
  memcpy(padded, header, len);
  while (pad && len % 8) padded[len++] = ' ';
  write_raw(path, len, padded, len, data, data_len);
}

static md_safetensors *open_ok(const char *path) {
  md_safetensors *file = NULL;
  md_error err = {0};
  md_status status = md_safetensors_open(path, &file, &err);
  CHECK_MSG(status == MD_OK, "%s", err.message);
  return file;
}

/* Opening fails with `status` and a message naming the file and holding
 * every given fragment. */
static void expect_open_fails(const char *path, md_status status, const char *fragment1,
                              const char *fragment2) {
  md_safetensors *file = (md_safetensors *)1;
  md_error err = {0};
  md_status got = md_safetensors_open(path, &file, &err);
  CHECK_MSG(got == status, "%s: status %d (%s), expected %d", path, got, err.message, status);
  CHECK(file == NULL);
  CHECK_MSG(strstr(err.message, path) != NULL, "message does not name the file: %s",
            err.message);
  CHECK_MSG(!fragment1 || strstr(err.message, fragment1), "'%s' not in: %s", fragment1,
            err.message);
  CHECK_MSG(!fragment2 || strstr(err.message, fragment2), "'%s' not in: %s", fragment2,
            err.message);
  if (got == MD_OK) md_safetensors_close(file);
}

/* Writes `header` (with the matching length, padded) + data, expects failure. */
static void expect_header_fails(const char *name, const char *header, size_t data_len,
                                md_status status, const char *fragment1, const char *fragment2) {
  static unsigned char zeros[256];
  char path[512];
  temp_path(path, sizeof path, name);
  write_file(path, header, zeros, data_len, true);
  expect_open_fails(path, status, fragment1, fragment2);
}

/* Three tensors, 24 bytes of data:
 *   a F32 [2, 2] = 1.5, -2, 0.25, 3 at [0, 16)
 *   b BF16 [3]   = 0x3fc0 (1.5), 0xc000 (-2), 0x0001 (2^-133, a subnormal)
 *   c F16 [1]    = 0x3c00 (1.0) at [22, 24) */
static const char good_header[] =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[16,22]},"
    "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
    "\"c\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[22,24]}}";

static void good_data(unsigned char data[24]) {
  const float a[4] = {1.5f, -2.0f, 0.25f, 3.0f};
  const uint16_t b[3] = {0x3fc0, 0xc000, 0x0001}, c = 0x3c00;
  memcpy(data, a, 16); /* little-endian host, as the format */
  memcpy(data + 16, b, 6);
  memcpy(data + 22, &c, 2);
}

static void check_good_contents(md_safetensors *file) {
  CHECK(md_safetensors_count(file) == 3);
  CHECK(!strcmp(md_safetensors_name(file, 0), "a"));
  CHECK(!strcmp(md_safetensors_name(file, 2), "c"));
  CHECK(md_safetensors_name(file, 3) == NULL);
  CHECK(md_safetensors_contains(file, "b") && !md_safetensors_contains(file, "d"));
  CHECK(!strcmp(md_safetensors_metadata(file, "format"), "pt"));
  CHECK(md_safetensors_metadata(file, "other") == NULL);
  const md_tensor *a, *b, *c;
  md_error err = {0};
  CHECK(md_safetensors_get(file, "a", &a, &err) == MD_OK);
  CHECK(md_safetensors_get(file, "b", &b, &err) == MD_OK);
  CHECK(md_safetensors_get(file, "c", &c, &err) == MD_OK);
  CHECK(a->dtype == MD_DTYPE_F32 && a->ndim == 2 && a->shape[0] == 2 && a->shape[1] == 2);
  CHECK(a->nbytes == 16 && !strcmp(a->name, "a"));
  CHECK(b->dtype == MD_DTYPE_BF16 && b->ndim == 1 && b->shape[0] == 3 && b->nbytes == 6);
  CHECK(c->dtype == MD_DTYPE_F16 && c->nbytes == 2);
  CHECK((uintptr_t)a->data % 4 == 0 && (uintptr_t)b->data % 2 == 0);
  CHECK(tensor_element(a, 0) == 1.5f && tensor_element(a, 1) == -2.0f);
  CHECK(tensor_element(a, 2) == 0.25f && tensor_element(a, 3) == 3.0f);
  CHECK(tensor_element(b, 0) == 1.5f && tensor_element(b, 1) == -2.0f);
  CHECK(tensor_element(b, 2) == ldexpf(1.0f, -133));
  CHECK(tensor_element(c, 0) == 1.0f);
  CHECK(md_safetensors_get(file, "d", &a, &err) == MD_E_FORMAT && a == NULL);
  CHECK(strstr(err.message, "no tensor named d") != NULL);
}

static void test_good(void) {
  unsigned char data[24];
  good_data(data);
  char path[512];
  temp_path(path, sizeof path, "good.safetensors");
  write_file(path, good_header, data, sizeof data, true);
  md_safetensors *file = open_ok(path);
  if (file) {
    check_good_contents(file);
    CHECK(md_safetensors_realigned_bytes(file) == 0);
    CHECK(!strcmp(md_safetensors_path(file), path));
    md_safetensors_close(file);
  }
  /* Header of odd length (not padded): every tensor starts at an odd
   * address in the mapping and is copied to aligned memory (24 bytes). */
  char odd_header[sizeof good_header + 8];
  snprintf(odd_header, sizeof odd_header, "%s", good_header);
  if (strlen(odd_header) % 2 == 0) strcat(odd_header, " ");
  temp_path(path, sizeof path, "misaligned.safetensors");
  write_file(path, odd_header, data, sizeof data, false);
  file = open_ok(path);
  if (file) {
    check_good_contents(file);
    CHECK(md_safetensors_realigned_bytes(file) == 24);
    md_safetensors_close(file);
  }
}

/* Empty tensors, scalars, whitespace and unknown keys the format allows. */
static void test_edge_cases(void) {
  char path[512];
  float value = 7.0f;
  temp_path(path, sizeof path, "edge.safetensors");
  write_file(path,
             "  {\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],\"extra\":1},"
             "\"e\":{\"dtype\":\"BF16\",\"shape\":[0,5],\"data_offsets\":[4,4]},"
             "\"z\":{\"dtype\":\"F16\",\"shape\":[3,0],\"data_offsets\":[4,4]}}",
             &value, 4, true);
  /* A header must start with '{' itself: leading spaces are refused. */
  expect_open_fails(path, MD_E_FORMAT, "does not start with '{'", NULL);
  write_file(path,
             "{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],\"extra\":1},"
             "\"e\":{\"dtype\":\"BF16\",\"shape\":[0,5],\"data_offsets\":[4,4]},"
             "\"z\":{\"dtype\":\"F16\",\"shape\":[3,0],\"data_offsets\":[4,4]}}   ",
             &value, 4, true);
  md_safetensors *file = open_ok(path);
  if (!file) return;
  const md_tensor *s, *e;
  md_error err = {0};
  CHECK(md_safetensors_get(file, "s", &s, &err) == MD_OK && s->ndim == 0 && s->nbytes == 4);
  CHECK(s && tensor_element(s, 0) == 7.0f);
  CHECK(md_safetensors_get(file, "e", &e, &err) == MD_OK && e->ndim == 2 && e->nbytes == 0);
  CHECK(e && e->shape[0] == 0 && e->shape[1] == 5);
  md_safetensors_close(file);
  /* No tensors at all: a valid, empty file. */
  temp_path(path, sizeof path, "empty-header.safetensors");
  write_file(path, "{}", NULL, 0, true);
  file = open_ok(path);
  if (file) {
    CHECK(md_safetensors_count(file) == 0);
    md_safetensors_close(file);
  }
}

/* Known but unsupported dtypes may sit in a file; fetching one is refused. */
static void test_unsupported(void) {
  char path[512];
  unsigned char data[8 + 8 + 64] = {0};
  temp_path(path, sizeof path, "f64.safetensors");
  write_file(path,
             "{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
             "\"x\":{\"dtype\":\"I8\",\"shape\":[2,4],\"data_offsets\":[8,16]},"
             "\"v\":{\"dtype\":\"F32\",\"shape\":[1,1,1,2,8],\"data_offsets\":[16,80]}}",
             data, sizeof data, true);
  md_safetensors *file = open_ok(path);
  if (!file) return;
  const md_tensor *tensor = (const md_tensor *)1;
  md_error err = {0};
  CHECK(md_safetensors_get(file, "w", &tensor, &err) == MD_E_UNSUPPORTED && tensor == NULL);
  CHECK_MSG(strstr(err.message, "dtype F64 of tensor w is not supported (supported: F32, F16, "
                                "BF16)") && strstr(err.message, path), "%s", err.message);
  CHECK(md_safetensors_get(file, "x", &tensor, &err) == MD_E_UNSUPPORTED);
  CHECK(strstr(err.message, "dtype I8 of tensor x is not supported") != NULL);
  CHECK(!strcmp(md_safetensors_dtype_name(file, "x"), "I8"));
  CHECK(md_safetensors_dtype_name(file, "nope") == NULL);
  CHECK(md_safetensors_get(file, "v", &tensor, &err) == MD_E_UNSUPPORTED);
  CHECK_MSG(strstr(err.message, "tensor v has 5 dimensions"), "%s", err.message);
  md_safetensors_close(file);
}

static void test_bad_prefix(void) {
  char path[512];
  temp_path(path, sizeof path, "empty.safetensors");
  FILE *fp = fopen(path, "wb"); /* a zero-byte file */
  fclose(fp);
  expect_open_fails(path, MD_E_FORMAT, "is 0 bytes, too short", NULL);
  temp_path(path, sizeof path, "short.safetensors");
  fp = fopen(path, "wb");
  fwrite("\x02\0\0", 1, 3, fp);
  fclose(fp);
  expect_open_fails(path, MD_E_FORMAT, "is 3 bytes, too short", NULL);
  /* 100 000 001 bytes of header: over the reference implementation's cap. */
  temp_path(path, sizeof path, "huge.safetensors");
  write_raw(path, 100000001u, "{}", 2, NULL, 0);
  expect_open_fails(path, MD_E_FORMAT, "header length 100000001 exceeds the 100000000-byte limit",
                    NULL);
  write_raw(path, UINT64_MAX, "{}", 2, NULL, 0);
  expect_open_fails(path, MD_E_FORMAT, "header length 18446744073709551615 exceeds", NULL);
  /* A header length that lies: 40 declared, 2 present (file of 10 bytes). */
  temp_path(path, sizeof path, "lying.safetensors");
  write_raw(path, 40, "{}", 2, NULL, 0);
  expect_open_fails(path, MD_E_FORMAT, "header length 40 runs past the end of the file (10 bytes)",
                    NULL);
  write_raw(path, 0, "{}", 2, NULL, 0);
  expect_open_fails(path, MD_E_FORMAT, "does not start with '{'", NULL);
  write_raw(path, 2, "[]", 2, NULL, 0);
  expect_open_fails(path, MD_E_FORMAT, "does not start with '{'", NULL);
  /* Not found, not a regular file. */
  temp_path(path, sizeof path, "absent.safetensors");
  expect_open_fails(path, MD_E_IO, "No such file", NULL);
  expect_open_fails(temp_dir, MD_E_IO, "not a regular file", NULL);
}

static void test_bad_json(void) {
  expect_header_fails("syntax.safetensors", "{\"a\":\n {\"dtype\": \"F32\",,}}", 0, MD_E_FORMAT,
                      "header JSON, line 2, column", NULL);
  expect_header_fails("duplicate.safetensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                      4, MD_E_FORMAT, "duplicate object key", NULL);
  expect_header_fails("metadata-list.safetensors", "{\"__metadata__\":[1]}", 0, MD_E_FORMAT,
                      "'__metadata__' is not an object of strings", NULL);
  expect_header_fails("metadata-value.safetensors", "{\"__metadata__\":{\"format\":1}}", 0,
                      MD_E_FORMAT, "'__metadata__' value for key 'format' is not a string", NULL);
  expect_header_fails("entry.safetensors", "{\"w\":[1,2]}", 0, MD_E_FORMAT,
                      "tensor w: entry is not an object", NULL);
}

/* Entries that are well-formed JSON but say something impossible. */
static void test_bad_entries(void) {
  expect_header_fails("no-dtype.safetensors", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                      MD_E_FORMAT, "tensor w: 'dtype' is missing or not a string", NULL);
  expect_header_fails("dtype-number.safetensors",
                      "{\"w\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                      MD_E_FORMAT, "tensor w: 'dtype' is missing or not a string", NULL);
  expect_header_fails("unknown-dtype.safetensors",
                      "{\"w\":{\"dtype\":\"Q4_K\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                      MD_E_UNSUPPORTED,
                      "dtype Q4_K of tensor w is not supported (supported: F32, F16, BF16)", NULL);
  expect_header_fails("f4.safetensors",
                      "{\"w\":{\"dtype\":\"F4\",\"shape\":[8],\"data_offsets\":[0,4]}}", 4,
                      MD_E_UNSUPPORTED, "dtype F4 of tensor w is not supported", NULL);
  expect_header_fails("shape-missing.safetensors",
                      "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, MD_E_FORMAT,
                      "tensor w: 'shape' is missing or not a list of non-negative integers",
                      NULL);
  expect_header_fails("shape-negative.safetensors",
                      "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,-1],\"data_offsets\":[0,4]}}", 4,
                      MD_E_FORMAT, "tensor w: shape[1] is not a non-negative integer", NULL);
  expect_header_fails("shape-real.safetensors",
                      "{\"w\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4,
                      MD_E_FORMAT, "tensor w: shape[0] is not a non-negative integer", NULL);
  /* 2^32 * 2^32 * 4 bytes overflows 64 bits. */
  expect_header_fails("overflow.safetensors",
                      "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
                      "\"data_offsets\":[0,4]}}", 4, MD_E_FORMAT,
                      "tensor w: the size of shape [4294967296, 4294967296] overflows 64 bits",
                      NULL);
  expect_header_fails("offsets-one.safetensors",
                      "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}", 4,
                      MD_E_FORMAT, "tensor w: 'data_offsets' is missing or not [begin, end]",
                      NULL);
  expect_header_fails("offsets-negative.safetensors",
                      "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4,
                      MD_E_FORMAT, "tensor w: 'data_offsets' is missing or not [begin, end]",
                      NULL);
  expect_header_fails("offsets-reversed.safetensors",
                      "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4,
                      MD_E_FORMAT, "tensor w: data_offsets [4, 0] have begin > end", NULL);
  expect_header_fails("size.safetensors",
                      "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,8]}}", 8,
                      MD_E_FORMAT,
                      "tensor w: data_offsets [0, 8] hold 8 bytes but dtype BF16 with shape "
                      "[2, 3] needs 12 bytes", NULL);
  expect_header_fails("past-end.safetensors",
                      "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 12,
                      MD_E_FORMAT,
                      "tensor w: data_offsets [0, 16] run past the end of the file (the data "
                      "section is 12 bytes)", NULL);
}

/* The tensors must tile the data section exactly. */
static void test_bad_layout(void) {
  expect_header_fails("overlap.safetensors",
                      "{\"u\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"v\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
                      MD_E_FORMAT, "tensors u [0, 8) and v [4, 12) overlap", NULL);
  expect_header_fails("same-place.safetensors",
                      "{\"u\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"v\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]}}", 8,
                      MD_E_FORMAT, "tensors u [0, 8) and v [0, 8) overlap", NULL);
  expect_header_fails("gap.safetensors",
                      "{\"u\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"v\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12,
                      MD_E_FORMAT,
                      "bytes [4, 8) of the data section belong to no tensor (a gap before "
                      "tensor v)", NULL);
  expect_header_fails("gap-first.safetensors",
                      "{\"v\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
                      MD_E_FORMAT, "bytes [0, 4) of the data section belong to no tensor", NULL);
  expect_header_fails("trailing.safetensors",
                      "{\"u\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 10,
                      MD_E_FORMAT,
                      "the data section has 6 bytes after the last tensor u (it is 10 bytes, "
                      "the tensors cover 4)", NULL);
  expect_header_fails("no-tensors-data.safetensors", "{}", 3, MD_E_FORMAT,
                      "the data section has 3 bytes after the last tensor", NULL);
}

/* The fixtures safetensors wrote: names, dtypes and shapes as it reports. */
static void test_reference_files(void) {
  json_t *reference = load_reference();
  const char *label, *name;
  json_t *checkpoint, *info;
  json_object_foreach(json_object_get(reference, "checkpoints"), label, checkpoint) {
    json_object_foreach(json_object_get(checkpoint, "tensors"), name, info) {
      char relative[512], path[4096];
      snprintf(relative, sizeof relative, "fixtures/%s/%s", label,
               json_string_value(json_object_get(info, "file")));
      fixture_path(path, sizeof path, relative);
      md_safetensors *file = open_ok(path);
      if (!file) continue;
      const md_tensor *tensor;
      md_error err = {0};
      CHECK_MSG(md_safetensors_get(file, name, &tensor, &err) == MD_OK, "%s", err.message);
      if (tensor) {
        CHECK(!strcmp(md_dtype_name(tensor->dtype),
                      json_string_value(json_object_get(info, "dtype"))));
        json_t *shape = json_object_get(info, "shape");
        CHECK(tensor->ndim == (int)json_array_size(shape));
        for (int d = 0; d < tensor->ndim; d++)
          CHECK(tensor->shape[d] == json_integer_value(json_array_get(shape, d)));
      }
      CHECK(md_safetensors_realigned_bytes(file) == 0);
      md_safetensors_close(file);
    }
  }
  json_decref(reference);
}

/* Tensors in the mapping say so (md_tensor.mapped), copied ones do not;
 * md_tensor_drop_pages leaves every byte readable as it was: a mapped
 * tensor's pages come back from the file, heap memory is not touched (its
 * pages would read back as zeros). */
static void test_drop_pages(void) {
  enum { ROWS = 5, COLS = 3000 }; /* 60,000 bytes: whole pages inside */
  float *values = malloc((size_t)ROWS * COLS * sizeof(float));
  if (!values) {
    CHECK(values != NULL);
    return;
  }
  for (int i = 0; i < ROWS * COLS; i++) values[i] = (float)i * 0.5f - 7.0f;
  char header[128], path[512];
  snprintf(header, sizeof header, "{\"w\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[0,%zu]}}",
           ROWS, COLS, (size_t)ROWS * COLS * sizeof(float));
  temp_path(path, sizeof path, "pages.safetensors");
  write_file(path, header, values, (size_t)ROWS * COLS * sizeof(float), true);
  md_safetensors *file = open_ok(path);
  const md_tensor *w = NULL;
  md_error err = {0};
  if (file && md_safetensors_get(file, "w", &w, &err) == MD_OK) {
    CHECK(w->mapped && md_safetensors_realigned_bytes(file) == 0);
    CHECK(memcmp(w->data, values, w->nbytes) == 0);
    md_tensor_drop_pages(w);
    CHECK_MSG(memcmp(w->data, values, w->nbytes) == 0, "a mapped tensor reads back from its file");
    md_tensor_drop_pages(w);
    CHECK(memcmp(w->data, values, w->nbytes) == 0);
  } else {
    CHECK(w != NULL);
  }
  md_safetensors_close(file);
  /* A header of odd length: the tensor is realigned into the heap and not
   * mapped. */
  if (strlen(header) % 2 == 0) strcat(header, " ");
  write_file(path, header, values, (size_t)ROWS * COLS * sizeof(float), false);
  file = open_ok(path);
  w = NULL;
  if (file && md_safetensors_get(file, "w", &w, &err) == MD_OK) {
    CHECK(!w->mapped && md_safetensors_realigned_bytes(file) == w->nbytes);
    md_tensor_drop_pages(w);
    CHECK_MSG(memcmp(w->data, values, w->nbytes) == 0, "a heap tensor is left alone");
  } else {
    CHECK(w != NULL);
  }
  md_safetensors_close(file);
  /* A tensor made by hand is heap memory unless it says otherwise. */
  float *heap = malloc((size_t)ROWS * COLS * sizeof(float));
  if (heap) {
    memcpy(heap, values, (size_t)ROWS * COLS * sizeof(float));
    md_tensor t = {.name = "heap", .dtype = MD_DTYPE_F32, .ndim = 2, .shape = {ROWS, COLS},
                   .data = heap, .nbytes = (size_t)ROWS * COLS * sizeof(float)};
    md_tensor_drop_pages(&t);
    CHECK(memcmp(heap, values, t.nbytes) == 0);
    free(heap);
  }
  free(values);
}

int main(void) {
  if (!mkdtemp(temp_dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_good();
  test_edge_cases();
  test_unsupported();
  test_bad_prefix();
  test_bad_json();
  test_bad_entries();
  test_bad_layout();
  test_reference_files();
  test_drop_pages();
  char command[600];
  snprintf(command, sizeof command, "rm -rf '%s'", temp_dir);
  CHECK(system(command) == 0);
  return md_test_finish("checkpoint_safetensors");
}
