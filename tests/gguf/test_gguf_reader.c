/* io/formats/gguf: the metadata fixtures gguf-py wrote
 * (tests/gguf/make_fixtures.py, meta_writer; its literals are repeated
 * here): every value type through the typed getters, the integer getters
 * across the integer types, wrong types and out-of-range values refused
 * with the key named, arrays of every element type, nested arrays, the
 * Qwen2 configuration and tokenizer keys, and tensors of one to four
 * dimensions, in a version 3 file aligned to 64 and a version 2 file with
 * the default alignment. */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/formats/gguf.h"
#include "tests/test_util.h"

static void fixture(char *buf, size_t size, const char *name) {
  const char *root = getenv("MD_SOURCE_ROOT");
  snprintf(buf, size, "%s/tests/gguf/fixtures/%s", root ? root : ".", name);
}

/* A getter that must fail with MD_E_FORMAT naming the file, the key and
 * `fragment`. */
#define EXPECT_REFUSED(call, gguf, key, fragment)                                       \
  do {                                                                                  \
    md_error err_ = {0};                                                                \
    md_gguf_file *const file_ = (gguf);                                                 \
    md_error *err = &err_;                                                              \
    md_status status_ = (call);                                                         \
    CHECK_MSG(status_ == MD_E_FORMAT, "%s: status %d", #call, (int)status_);             \
    CHECK_MSG(strstr(err_.message, md_gguf_path(file_)) && strstr(err_.message, key) &&  \
                  strstr(err_.message, fragment),                                       \
              "%s: %s", #call, err_.message);                                           \
    CHECK(!strcmp(err_.record, key) && !strcmp(err_.file, md_gguf_path(file_)));        \
  } while (0)

static void check_scalars(md_gguf_file *f) {
  md_error err = {0};
  uint32_t u32 = 0;
  uint64_t u64 = 0;
  int64_t i64 = 0;
  float f32 = 0;
  double f64 = 0;
  bool b = false;
  const char *s = NULL;
  size_t len = 0;

  CHECK(md_gguf_get_u32(f, "test.u8", &u32, &err) == MD_OK && u32 == 200);
  CHECK(md_gguf_get_i64(f, "test.i8", &i64, &err) == MD_OK && i64 == -100);
  CHECK(md_gguf_get_u32(f, "test.u16", &u32, &err) == MD_OK && u32 == 60000);
  CHECK(md_gguf_get_i64(f, "test.i16", &i64, &err) == MD_OK && i64 == -30000);
  CHECK(md_gguf_get_u32(f, "test.u32", &u32, &err) == MD_OK && u32 == 4000000000u);
  CHECK(md_gguf_get_i64(f, "test.i32", &i64, &err) == MD_OK && i64 == -2000000000);
  CHECK(md_gguf_get_u64(f, "test.u64", &u64, &err) == MD_OK && u64 == UINT64_MAX);
  CHECK(md_gguf_get_i64(f, "test.i64", &i64, &err) == MD_OK && i64 == INT64_MIN);
  /* 0.1 as float32 is 0x1.99999ap-4. */
  CHECK(md_gguf_get_f32(f, "test.f32", &f32, &err) == MD_OK && f32 == 0x1.99999ap-4f);
  CHECK(md_gguf_get_f64(f, "test.f32", &f64, &err) == MD_OK && f64 == (double)0x1.99999ap-4f);
  CHECK(md_gguf_get_f64(f, "test.f64", &f64, &err) == MD_OK && f64 == 1e300);
  CHECK(md_gguf_get_f64(f, "test.f64_tenth", &f64, &err) == MD_OK && f64 == 0.1);
  CHECK(md_gguf_get_f32(f, "test.f64_tenth", &f32, &err) == MD_OK && f32 == 0.1f);
  CHECK(md_gguf_get_bool(f, "test.true", &b, &err) == MD_OK && b);
  CHECK(md_gguf_get_bool(f, "test.false", &b, &err) == MD_OK && !b);
  CHECK(md_gguf_get_string(f, "test.string", &s, &len, &err) == MD_OK);
  CHECK(s && !strcmp(s, "h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93") && len == strlen(s));
  CHECK(md_gguf_get_string(f, "test.empty_string", &s, &len, &err) == MD_OK && !strcmp(s, "") &&
        len == 0);
  CHECK(md_gguf_get_string(f, "general.architecture", &s, NULL, &err) == MD_OK &&
        !strcmp(s, "qwen2"));

  /* Integer getters take any integer type whose value fits. */
  CHECK(md_gguf_get_u32(f, "test.count_u64", &u32, &err) == MD_OK && u32 == 24);
  CHECK(md_gguf_get_u32(f, "test.count_i32", &u32, &err) == MD_OK && u32 == 24);
  CHECK(md_gguf_get_u64(f, "test.count_i32", &u64, &err) == MD_OK && u64 == 24);
  CHECK(md_gguf_get_i64(f, "test.u32", &i64, &err) == MD_OK && i64 == 4000000000);
  EXPECT_REFUSED(md_gguf_get_u32(file_, "test.minus_one", &u32, err), f, "test.minus_one",
                 "is -1, outside [0, 4294967295]");
  EXPECT_REFUSED(md_gguf_get_u64(file_, "test.i64", &u64, err), f, "test.i64",
                 "is -9223372036854775808, outside");
  EXPECT_REFUSED(md_gguf_get_u32(file_, "test.u64", &u32, err), f, "test.u64",
                 "is 18446744073709551615, outside [0, 4294967295]");
  EXPECT_REFUSED(md_gguf_get_i64(file_, "test.u64", &i64, err), f, "test.u64", "outside");
  EXPECT_REFUSED(md_gguf_get_f32(file_, "test.f64", &f32, err), f, "test.f64",
                 "beyond the float32 range");

  /* Wrong types, named. */
  EXPECT_REFUSED(md_gguf_get_u32(file_, "test.string", &u32, err), f, "test.string",
                 "is a string, expected an integer");
  EXPECT_REFUSED(md_gguf_get_u32(file_, "test.f32", &u32, err), f, "test.f32",
                 "is a float32, expected an integer");
  EXPECT_REFUSED(md_gguf_get_u32(file_, "test.true", &u32, err), f, "test.true",
                 "is a bool, expected an integer");
  EXPECT_REFUSED(md_gguf_get_f32(file_, "test.u32", &f32, err), f, "test.u32",
                 "is a uint32, expected a float32 or float64");
  EXPECT_REFUSED(md_gguf_get_bool(file_, "test.u8", &b, err), f, "test.u8",
                 "is a uint8, expected a bool");
  EXPECT_REFUSED(md_gguf_get_string(file_, "test.i32", &s, NULL, err), f, "test.i32",
                 "is an int32, expected a string");
  EXPECT_REFUSED(md_gguf_get_string(file_, "test.array.string", &s, NULL, err), f,
                 "test.array.string", "is an array of 3 string, expected a string");
  EXPECT_REFUSED(md_gguf_get_u32(file_, "no.such.key", &u32, err), f, "no.such.key",
                 "no key no.such.key");
  CHECK(!md_gguf_has_key(f, "no.such.key") && md_gguf_has_key(f, "test.u8"));
}

static void check_arrays(md_gguf_file *f) {
  md_error err = {0};
  md_gguf_array a;
  int64_t v = 0;
  double d = 0;
  struct { const char *key; md_gguf_value_type type; int64_t first, last; uint64_t count; } ints[] = {
      {"test.array.u8", MD_GGUF_UINT8, 0, 255, 3},
      {"test.array.i8", MD_GGUF_INT8, -128, 127, 3},
      {"test.array.u16", MD_GGUF_UINT16, 0, 65535, 2},
      {"test.array.i16", MD_GGUF_INT16, -32768, 32767, 2},
      {"test.array.u32", MD_GGUF_UINT32, 0, 4294967295, 2},
      {"test.array.i32", MD_GGUF_INT32, INT32_MIN, INT32_MAX, 2},
      {"test.array.i64", MD_GGUF_INT64, INT64_MIN, INT64_MAX, 2},
      {"test.array.bool", MD_GGUF_BOOL, 1, 1, 3},
  };
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    CHECK(md_gguf_get_array(f, ints[i].key, &a, &err) == MD_OK);
    CHECK_MSG(a.type == ints[i].type && a.count == ints[i].count, "%s", ints[i].key);
    if (ints[i].type == MD_GGUF_BOOL) {
      const uint8_t *bytes = a.data;
      CHECK(bytes[0] == 1 && bytes[1] == 0 && bytes[2] == 1);
      CHECK(!md_gguf_array_int(&a, 0, &v));
      continue;
    }
    CHECK(md_gguf_array_int(&a, 0, &v) && v == ints[i].first);
    CHECK(md_gguf_array_int(&a, a.count - 1, &v) && v == ints[i].last);
    CHECK(!md_gguf_array_int(&a, a.count, &v));
    CHECK(!md_gguf_array_float(&a, 0, &d));
  }
  /* uint64 [2^64-1, 7]: the first does not fit an int64. */
  CHECK(md_gguf_get_array(f, "test.array.u64", &a, &err) == MD_OK && a.type == MD_GGUF_UINT64);
  CHECK(!md_gguf_array_int(&a, 0, &v));
  CHECK(md_gguf_array_int(&a, 1, &v) && v == 7);
  CHECK(md_gguf_get_array(f, "test.array.f32", &a, &err) == MD_OK && a.type == MD_GGUF_FLOAT32);
  CHECK(md_gguf_array_float(&a, 0, &d) && d == 1.5);
  CHECK(md_gguf_array_float(&a, 1, &d) && d == -2.25);
  CHECK(!md_gguf_array_int(&a, 0, &v));
  CHECK(md_gguf_get_array(f, "test.array.f64", &a, &err) == MD_OK && a.type == MD_GGUF_FLOAT64);
  CHECK(md_gguf_array_float(&a, 0, &d) && d == 1e-300);
  CHECK(md_gguf_array_float(&a, 1, &d) && d == -0.5);

  const md_gguf_string *items = NULL;
  uint64_t count = 0;
  CHECK(md_gguf_get_string_array(f, "test.array.string", &items, &count, &err) == MD_OK);
  CHECK(count == 3 && items);
  if (count == 3 && items) {
    CHECK(items[0].len == 1 && !memcmp(items[0].data, "a", 1));
    CHECK(items[1].len == 0);
    CHECK(items[2].len == 2 && !memcmp(items[2].data, "\xc3\xbc", 2));
  }
  CHECK(md_gguf_get_array(f, "test.array.string", &a, &err) == MD_OK && a.strings == items);

  /* Nested: [[1, 2], [3], [4, 5, 6]] and [[["x"]], [["y", "z"]]]. */
  CHECK(md_gguf_get_array(f, "test.array.nested", &a, &err) == MD_OK);
  CHECK(a.type == MD_GGUF_ARRAY && a.count == 3 && a.strings == NULL);
  /* The first nested array's header: int32 (5), two elements, then 1, 2. */
  const uint8_t *p = a.data;
  uint32_t inner_type;
  uint64_t inner_count;
  int32_t first;
  memcpy(&inner_type, p, 4);
  memcpy(&inner_count, p + 4, 8);
  memcpy(&first, p + 12, 4);
  CHECK(inner_type == MD_GGUF_INT32 && inner_count == 2 && first == 1);
  CHECK(md_gguf_get_array(f, "test.array.deep", &a, &err) == MD_OK);
  CHECK(a.type == MD_GGUF_ARRAY && a.count == 2);
  EXPECT_REFUSED(md_gguf_get_string_array(file_, "test.array.nested", &items, &count, err), f,
                 "test.array.nested", "is an array of 3 array, expected an array of string");
  EXPECT_REFUSED(md_gguf_get_array(file_, "test.u8", &a, err), f, "test.u8",
                 "is a uint8, expected an array");
}

/* What the loader reads (gguf.h lists the keys). */
static void check_qwen2_keys(md_gguf_file *f) {
  md_error err = {0};
  uint32_t v = 0;
  float x = 0;
  const char *s = NULL;
  struct { const char *key; uint32_t value; } ints[] = {
      {"qwen2.block_count", 2},           {"qwen2.context_length", 32768},
      {"qwen2.embedding_length", 64},     {"qwen2.feed_forward_length", 128},
      {"qwen2.attention.head_count", 4},  {"qwen2.attention.head_count_kv", 2},
      {"tokenizer.ggml.bos_token_id", 3}, {"tokenizer.ggml.eos_token_id", 3},
      {"tokenizer.ggml.padding_token_id", 3},
  };
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
    CHECK_MSG(md_gguf_get_u32(f, ints[i].key, &v, &err) == MD_OK && v == ints[i].value, "%s",
              ints[i].key);
  CHECK(md_gguf_get_f32(f, "qwen2.rope.freq_base", &x, &err) == MD_OK && x == 1e6f);
  CHECK(md_gguf_get_f32(f, "qwen2.attention.layer_norm_rms_epsilon", &x, &err) == MD_OK &&
        x == 1e-6f);
  CHECK(md_gguf_get_string(f, "tokenizer.ggml.model", &s, NULL, &err) == MD_OK &&
        !strcmp(s, "gpt2"));
  CHECK(md_gguf_get_string(f, "tokenizer.ggml.pre", &s, NULL, &err) == MD_OK &&
        !strcmp(s, "qwen2"));
  const md_gguf_string *tokens = NULL, *merges = NULL;
  uint64_t n_tokens = 0, n_merges = 0;
  CHECK(md_gguf_get_string_array(f, "tokenizer.ggml.tokens", &tokens, &n_tokens, &err) == MD_OK);
  CHECK(md_gguf_get_string_array(f, "tokenizer.ggml.merges", &merges, &n_merges, &err) == MD_OK);
  CHECK(n_tokens == 4 && n_merges == 1);
  if (n_tokens == 4 && n_merges == 1) {
    CHECK(tokens[2].len == 2 && !memcmp(tokens[2].data, "ab", 2));
    CHECK(tokens[3].len == 13 && !memcmp(tokens[3].data, "<|endoftext|>", 13));
    CHECK(merges[0].len == 3 && !memcmp(merges[0].data, "a b", 3));
  }
  md_gguf_array types;
  int64_t t = 0;
  CHECK(md_gguf_get_array(f, "tokenizer.ggml.token_type", &types, &err) == MD_OK);
  CHECK(types.type == MD_GGUF_INT32 && types.count == 4);
  CHECK(md_gguf_array_int(&types, 0, &t) && t == 1);
  CHECK(md_gguf_array_int(&types, 3, &t) && t == 3);
}

static float f32_at(const md_gguf_tensor *t, size_t i) {
  float v;
  memcpy(&v, (const uint8_t *)t->data + 4 * i, sizeof v);
  return v;
}

/* t1 [5], t2 (3, 4), t3 (2, 3, 4), t4 (1, 2, 3, 4) in numpy's order, so
 * ne = {5}, {4, 3}, {4, 3, 2}, {4, 3, 2, 1}; values 0, 1, 2, ...; q8 a
 * Q8_0 (2, 64), ne = {64, 2}, 2 rows of 2 blocks of 34 bytes. */
static void check_tensors(md_gguf_file *f, uint32_t alignment) {
  md_error err = {0};
  CHECK(md_gguf_tensor_count(f) == 5);
  CHECK(md_gguf_alignment(f) == alignment);
  CHECK(md_gguf_data_offset(f) % alignment == 0);
  static const char *const names[] = {"t1", "t2", "t3", "t4", "q8"};
  static const int n_dims[] = {1, 2, 3, 4, 2};
  static const int64_t ne[][4] = {{5, 1, 1, 1}, {4, 3, 1, 1}, {4, 3, 2, 1}, {4, 3, 2, 1},
                                  {64, 2, 1, 1}};
  static const uint64_t elements[] = {5, 12, 24, 24, 128};
  for (size_t i = 0; i < 5; i++) {
    const md_gguf_tensor *t = md_gguf_tensor_at(f, i);
    CHECK(t && !strcmp(t->name, names[i]));
    if (!t) continue;
    CHECK(md_gguf_find_tensor(f, names[i]) == t && t->index == i);
    CHECK(t->n_dims == n_dims[i] && t->n_elements == elements[i]);
    for (int d = 0; d < 4; d++) CHECK_MSG(t->ne[d] == ne[i][d], "%s ne[%d]", names[i], d);
    CHECK(t->offset % alignment == 0 && t->offset >= md_gguf_data_offset(f));
    CHECK((const uint8_t *)t->data - (const uint8_t *)md_gguf_tensor_at(f, 0)->data ==
          (ptrdiff_t)(t->offset - md_gguf_tensor_at(f, 0)->offset));
    CHECK(t->offset + t->nbytes <= md_gguf_file_size(f));
    if (i < 4) {
      CHECK(t->type == MD_GGML_F32 && t->nbytes == 4 * elements[i]);
      bool values_ok = true;
      for (size_t k = 0; k < elements[i]; k++) values_ok &= f32_at(t, k) == (float)k;
      CHECK_MSG(values_ok, "%s holds 0, 1, 2, ...", names[i]);
      float out[24];
      CHECK(md_gguf_tensor_dequantize(f, t, out, &err) == MD_OK);
      CHECK(out[elements[i] - 1] == (float)(elements[i] - 1));
    } else {
      CHECK(t->type == MD_GGML_Q8_0 && t->nbytes == 4 * 34);
    }
  }
  CHECK(md_gguf_tensor_at(f, 5) == NULL && md_gguf_find_tensor(f, "t5") == NULL);
  const md_gguf_tensor *t = NULL;
  md_error e = {0};
  CHECK(md_gguf_get_tensor(f, "t5", &t, &e) == MD_E_FORMAT && t == NULL);
  CHECK(strstr(e.message, "no tensor named t5") && !strcmp(e.record, "t5"));
}

static void check_file(const char *name, uint32_t version, uint32_t alignment,
                       size_t kv_count) {
  char path[1024];
  fixture(path, sizeof path, name);
  md_gguf_file *f = NULL;
  md_error err = {0};
  md_status status = md_gguf_open(path, &f, &err);
  CHECK_MSG(status == MD_OK, "%s", err.message);
  if (!f) return;
  CHECK(!strcmp(md_gguf_path(f), path));
  CHECK(md_gguf_version(f) == version);
  CHECK_MSG(md_gguf_kv_count(f) == kv_count, "%s: %zu entries", name, md_gguf_kv_count(f));
  CHECK(!strcmp(md_gguf_kv_key(f, 0), "general.architecture"));
  CHECK(md_gguf_kv_type(f, 0) == MD_GGUF_STRING);
  CHECK(md_gguf_kv_key(f, kv_count) == NULL);
  check_scalars(f);
  check_arrays(f);
  check_qwen2_keys(f);
  check_tensors(f, alignment);
  md_gguf_close(f);
}

int main(void) {
  /* 48 entries of meta_writer plus general.architecture, plus
   * general.alignment in the version 3 file. */
  check_file("meta_v3.gguf", 3, 64, 50);
  check_file("meta_v2.gguf", 2, 32, 49);
  CHECK(!strcmp(md_gguf_value_type_name(MD_GGUF_FLOAT64), "float64"));
  CHECK(!strcmp(md_gguf_value_type_name((md_gguf_value_type)13), "?"));
  return md_test_finish("gguf_reader");
}
