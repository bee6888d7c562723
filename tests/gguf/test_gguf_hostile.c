/* io/formats/gguf: files built here byte by byte (gguf_builder.h), good and
 * hostile. Each hostile file is refused with the documented status and a
 * message naming the file and the key or tensor at fault (md_error's
 * `file` and `record` too), without a crash or an allocation the file does
 * not pay for: counts of 2^63, a 10^9-entry vocabulary header, lying
 * tensor offsets and sizes, overlapping tensors, unknown types, misaligned
 * data, every prefix of a small valid file, metadata of the wrong type,
 * versions and byte orders not read. The valid edge cases (no tensors,
 * empty arrays and strings, alignment 1, a tensor of no dimensions, eight
 * levels of nested arrays) open. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/formats/gguf.h"
#include "tests/gguf/gguf_builder.h"
#include "tests/test_util.h"

static char temp_dir[] = "/tmp/md-gguf-XXXXXX";

static void temp_path(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "%s/%s", temp_dir, name);
}

static md_gguf_file *open_ok(const char *name, const gguf_bytes *b) {
  char path[512];
  temp_path(path, sizeof path, name);
  gb_write(b, b->len, path);
  md_gguf_file *file = NULL;
  md_error err = {0};
  md_status status = md_gguf_open(path, &file, &err);
  CHECK_MSG(status == MD_OK, "%s: %s", name, err.message);
  return file;
}

/* Opening `len` bytes of `b` fails with `status`; the message names the
 * file, `record` (also in err.record; NULL when the fault has no key or
 * tensor) and every fragment. */
static void expect_fails_len(const char *name, const gguf_bytes *b, size_t len,
                             md_status status, const char *record, const char *fragment1,
                             const char *fragment2) {
  char path[512];
  temp_path(path, sizeof path, name);
  gb_write(b, len, path);
  md_gguf_file *file = (md_gguf_file *)&file;
  md_error err = {0};
  md_status got = md_gguf_open(path, &file, &err);
  CHECK_MSG(got == status, "%s: status %d (%s), expected %d", name, (int)got, err.message,
            (int)status);
  CHECK(file == NULL);
  CHECK_MSG(err.status == got && strstr(err.message, path) && !strcmp(err.file, path),
            "%s: the error does not name the file: %s", name, err.message);
  if (record)
    CHECK_MSG(strstr(err.message, record) && !strcmp(err.record, record),
              "%s: '%s' not named (record '%s'): %s", name, record, err.record, err.message);
  CHECK_MSG(!fragment1 || strstr(err.message, fragment1), "%s: '%s' not in: %s", name,
            fragment1, err.message);
  CHECK_MSG(!fragment2 || strstr(err.message, fragment2), "%s: '%s' not in: %s", name,
            fragment2, err.message);
  if (got == MD_OK) md_gguf_close(file);
}

static void expect_fails(const char *name, const gguf_bytes *b, md_status status,
                         const char *record, const char *fragment1, const char *fragment2) {
  expect_fails_len(name, b, b->len, status, record, fragment1, fragment2);
}

/* --- a small valid file ------------------------------------------------------ */

/* Three entries (general.architecture "qwen2", qwen2.block_count 1,
 * tokenizer.ggml.tokens ["a", "bc"]), two tensors: "a" F32 ne {8} = 0..7 at
 * data offset 0, "b" Q8_0 ne {32, 2} at 32 (two blocks: scale 1.0 = 0x3C00,
 * quants -16 .. 15 and 16 .. 47). The file ends where b's data ends. */
static void build_valid(gguf_bytes *b) {
  gb_header(b, 3, 2, 3);
  gb_kv_str(b, "general.architecture", "qwen2");
  gb_kv_u32(b, "qwen2.block_count", 1);
  gb_str(b, "tokenizer.ggml.tokens");
  gb_u32(b, GB_ARRAY);
  gb_u32(b, GB_STRING);
  gb_u64(b, 2);
  gb_str(b, "a");
  gb_str(b, "bc");
  gb_tensor(b, "a", 1, (uint64_t[]){8}, MD_GGML_F32, 0);
  gb_tensor(b, "b", 2, (uint64_t[]){32, 2}, MD_GGML_Q8_0, 32);
  gb_pad(b, 32);
  for (int i = 0; i < 8; i++) gb_f32(b, (float)i);
  for (int blk = 0; blk < 2; blk++) {
    gb_u8(b, 0x00);
    gb_u8(b, 0x3c);
    for (int j = 0; j < 32; j++) gb_u8(b, (uint8_t)(int8_t)(blk * 32 + j - 16));
  }
}

static void test_valid(void) {
  gguf_bytes b = {0};
  build_valid(&b);
  md_gguf_file *f = open_ok("valid.gguf", &b);
  if (f) {
    md_error err = {0};
    uint32_t blocks = 0;
    CHECK(md_gguf_get_u32(f, "qwen2.block_count", &blocks, &err) == MD_OK && blocks == 1);
    CHECK(md_gguf_tensor_count(f) == 2 && md_gguf_data_offset(f) % 32 == 0);
    const md_gguf_tensor *q = md_gguf_find_tensor(f, "b");
    float out[64];
    CHECK(q && md_gguf_tensor_dequantize(f, q, out, &err) == MD_OK);
    if (q) CHECK(out[0] == -16.0f && out[63] == 47.0f);
    CHECK(md_gguf_file_size(f) == md_gguf_data_offset(f) + 32 + 68);
    md_gguf_close(f);
  }
  /* Every shorter prefix is refused with a format error naming the file. */
  for (size_t len = 0; len < b.len; len++) {
    char name[64];
    snprintf(name, sizeof name, "prefix-%zu.gguf", len);
    expect_fails_len(name, &b, len, MD_E_FORMAT, NULL, NULL, NULL);
    char path[512];
    temp_path(path, sizeof path, name);
    unlink(path);
  }
  gb_free(&b);
}

/* --- the header -------------------------------------------------------------- */

static void test_header(void) {
  gguf_bytes b = {0};
  gb_header(&b, 3, (uint64_t)1 << 63, 0);
  gb_put(&b, "padding padding padding", 24);
  expect_fails("tensors-2p63.gguf", &b, MD_E_FORMAT, NULL,
               "declares 9223372036854775808 tensors", NULL);
  gb_free(&b);

  gb_header(&b, 3, 0, (uint64_t)1 << 63);
  gb_put(&b, "padding padding padding", 24);
  expect_fails("kvs-2p63.gguf", &b, MD_E_FORMAT, NULL,
               "declares 9223372036854775808 metadata entries", NULL);
  gb_free(&b);

  gb_header(&b, 3, UINT64_MAX, UINT64_MAX);
  expect_fails("counts-max.gguf", &b, MD_E_FORMAT, NULL, "declares 18446744073709551615", NULL);
  gb_free(&b);

  /* One entry claimed, none there. */
  gb_header(&b, 3, 0, 1);
  gb_put(&b, "GGUF GGUF GGUF", 14);
  expect_fails("kv-missing.gguf", &b, MD_E_FORMAT, NULL, "metadata entry 0's key", NULL);
  gb_free(&b);

  gb_put(&b, "GGML", 4);
  gb_u32(&b, 3);
  gb_u64(&b, 0);
  gb_u64(&b, 0);
  expect_fails("magic.gguf", &b, MD_E_FORMAT, NULL, "not a GGUF file", "47 47 4d 4c");
  gb_free(&b);

  /* A big-endian writer's version 3 reads as 0x03000000 here. */
  gb_header(&b, 0x03000000u, 0, 0);
  expect_fails("big-endian.gguf", &b, MD_E_UNSUPPORTED, NULL, "big-endian", "0x03000000");
  gb_free(&b);
  gb_header(&b, 1, 0, 0);
  expect_fails("v1.gguf", &b, MD_E_UNSUPPORTED, NULL, "version 1", "versions 2 and 3");
  gb_free(&b);
  gb_header(&b, 4, 0, 0);
  expect_fails("v4.gguf", &b, MD_E_UNSUPPORTED, NULL, "version 4 is not supported", NULL);
  gb_free(&b);
  gb_header(&b, 0, 0, 0);
  expect_fails("v0.gguf", &b, MD_E_UNSUPPORTED, NULL, "version 0 is not supported", NULL);
  gb_free(&b);

  /* Nothing but a header: a valid, empty file, in both versions. */
  for (uint32_t version = 2; version <= 3; version++) {
    gb_header(&b, version, 0, 0);
    md_gguf_file *f = open_ok("empty.gguf", &b);
    if (f) {
      CHECK(md_gguf_version(f) == version && md_gguf_kv_count(f) == 0);
      CHECK(md_gguf_tensor_count(f) == 0 && md_gguf_alignment(f) == 32);
      CHECK(md_gguf_find_tensor(f, "a") == NULL && !md_gguf_has_key(f, "a"));
      md_gguf_close(f);
    }
    gb_free(&b);
  }
}

/* --- metadata ------------------------------------------------------------------ */

/* The start of a file of one metadata entry and no tensors: the header,
 * the key and the value type; the caller writes the value. */
static void one_kv(gguf_bytes *b, const char *key, uint32_t type) {
  gb_header(b, 3, 0, 1);
  gb_str(b, key);
  gb_u32(b, type);
}

static void test_metadata(void) {
  gguf_bytes b = {0};

  /* A vocabulary of 10^9 strings in a file of a few bytes: refused from
   * the header, before anything is allocated or walked. */
  one_kv(&b, "tokenizer.ggml.tokens", GB_ARRAY);
  gb_u32(&b, GB_STRING);
  gb_u64(&b, 1000000000);
  gb_str(&b, "a");
  expect_fails("vocab-1e9.gguf", &b, MD_E_FORMAT, "tokenizer.ggml.tokens",
               "declares 1000000000 string elements", "each takes at least 8");
  gb_free(&b);
  one_kv(&b, "tokenizer.ggml.token_type", GB_ARRAY);
  gb_u32(&b, GB_I32);
  gb_u64(&b, 1000000000);
  gb_u32(&b, 1);
  expect_fails("types-1e9.gguf", &b, MD_E_FORMAT, "tokenizer.ggml.token_type",
               "declares 1000000000 int32 elements", NULL);
  gb_free(&b);
  one_kv(&b, "a.nested", GB_ARRAY);
  gb_u32(&b, GB_ARRAY);
  gb_u64(&b, (uint64_t)1 << 62);
  expect_fails("nested-2p62.gguf", &b, MD_E_FORMAT, "a.nested",
               "declares 4611686018427387904 array elements", NULL);
  gb_free(&b);

  /* A string that claims more bytes than the file has. */
  one_kv(&b, "general.name", GB_STRING);
  gb_u64(&b, (uint64_t)1 << 62);
  gb_put(&b, "Qwen", 4);
  expect_fails("string-long.gguf", &b, MD_E_FORMAT, "general.name",
               "declares 4611686018427387904 bytes", NULL);
  gb_free(&b);
  one_kv(&b, "tokenizer.ggml.merges", GB_ARRAY);
  gb_u32(&b, GB_STRING);
  gb_u64(&b, 2);
  gb_str(&b, "a b");
  gb_u64(&b, 1000);
  gb_put(&b, "c d", 3);
  expect_fails("string-element-long.gguf", &b, MD_E_FORMAT, "tokenizer.ggml.merges",
               "a string element", "declares 1000 bytes");
  gb_free(&b);

  one_kv(&b, "test.bool", GB_BOOL);
  gb_u8(&b, 2);
  expect_fails("bool-2.gguf", &b, MD_E_FORMAT, "test.bool", "bool value", "is 2");
  gb_free(&b);
  one_kv(&b, "test.bools", GB_ARRAY);
  gb_u32(&b, GB_BOOL);
  gb_u64(&b, 3);
  gb_put(&b, "\x01\x00\x07", 3);
  expect_fails("bool-array-7.gguf", &b, MD_E_FORMAT, "test.bools", "bool element", "is 7");
  gb_free(&b);

  one_kv(&b, "test.unknown", 13);
  gb_u32(&b, 0);
  expect_fails("value-type-13.gguf", &b, MD_E_FORMAT, "test.unknown", "unknown value type 13",
               NULL);
  gb_free(&b);
  one_kv(&b, "test.unknown_element", GB_ARRAY);
  gb_u32(&b, 99);
  gb_u64(&b, 0);
  expect_fails("element-type-99.gguf", &b, MD_E_FORMAT, "test.unknown_element",
               "unknown element type 99", NULL);
  gb_free(&b);

  /* Arrays nested nine deep; eight open. */
  for (int depth = 8; depth <= 9; depth++) {
    one_kv(&b, "test.deep", GB_ARRAY);
    for (int level = 1; level < depth; level++) {
      gb_u32(&b, GB_ARRAY);
      gb_u64(&b, 1);
    }
    gb_u32(&b, GB_U8);
    gb_u64(&b, 1);
    gb_u8(&b, 42);
    if (depth == 8) {
      md_gguf_file *f = open_ok("nested-8.gguf", &b);
      if (f) md_gguf_close(f);
    } else {
      expect_fails("nested-9.gguf", &b, MD_E_FORMAT, "test.deep", "nested more than 8 deep",
                   NULL);
    }
    gb_free(&b);
  }

  gb_header(&b, 3, 0, 2);
  gb_kv_u32(&b, "test.twice", 1);
  gb_kv_u32(&b, "test.twice", 2);
  expect_fails("key-twice.gguf", &b, MD_E_FORMAT, "test.twice", "appears twice", NULL);
  gb_free(&b);

  gb_header(&b, 3, 0, 1);
  gb_kv_u32(&b, "", 1);
  expect_fails("key-empty.gguf", &b, MD_E_FORMAT, NULL, "metadata entry 0's key",
               "is 0 bytes long");
  gb_free(&b);
  gb_header(&b, 3, 0, 1);
  gb_kv_u32(&b, "bad\nkey", 1);
  expect_fails("key-newline.gguf", &b, MD_E_FORMAT, NULL, "byte 0x0a at position 3",
               "control characters");
  gb_free(&b);
  gb_header(&b, 3, 0, 1);
  gb_u64(&b, 70000);
  gb_put(&b, "key, then too few bytes", 23);
  expect_fails("key-70000.gguf", &b, MD_E_FORMAT, NULL, "is 70000 bytes long",
               "1 to 65535 allowed");
  gb_free(&b);

  /* general.alignment: of the wrong type, not a power of two, zero. */
  gb_header(&b, 3, 0, 1);
  gb_kv_str(&b, "general.alignment", "32");
  expect_fails("alignment-string.gguf", &b, MD_E_FORMAT, "general.alignment",
               "is a string, expected an integer", NULL);
  gb_free(&b);
  gb_header(&b, 3, 0, 1);
  gb_kv_u32(&b, "general.alignment", 48);
  expect_fails("alignment-48.gguf", &b, MD_E_FORMAT, "general.alignment",
               "is 48, not a power of two", NULL);
  gb_free(&b);
  gb_header(&b, 3, 0, 1);
  gb_kv_u32(&b, "general.alignment", 0);
  expect_fails("alignment-0.gguf", &b, MD_E_FORMAT, "general.alignment",
               "is 0, not a power of two", NULL);
  gb_free(&b);
  one_kv(&b, "general.alignment", GB_I64);
  gb_u64(&b, (uint64_t)-64);
  expect_fails("alignment-negative.gguf", &b, MD_E_FORMAT, "general.alignment",
               "is -64, outside", NULL);
  gb_free(&b);

  /* Empty values and an alignment written as uint64 open. */
  gb_header(&b, 3, 0, 4);
  gb_str(&b, "test.empty_array");
  gb_u32(&b, GB_ARRAY);
  gb_u32(&b, GB_U32);
  gb_u64(&b, 0);
  gb_str(&b, "test.empty_strings");
  gb_u32(&b, GB_ARRAY);
  gb_u32(&b, GB_STRING);
  gb_u64(&b, 0);
  gb_kv_str(&b, "test.empty", "");
  gb_str(&b, "general.alignment");
  gb_u32(&b, GB_U64);
  gb_u64(&b, 64);
  md_gguf_file *f = open_ok("empty-values.gguf", &b);
  if (f) {
    md_error err = {0};
    md_gguf_array a;
    const md_gguf_string *items = NULL;
    uint64_t count = 1;
    const char *s = NULL;
    int64_t v;
    CHECK(md_gguf_get_array(f, "test.empty_array", &a, &err) == MD_OK && a.count == 0);
    CHECK(!md_gguf_array_int(&a, 0, &v));
    CHECK(md_gguf_get_string_array(f, "test.empty_strings", &items, &count, &err) == MD_OK);
    CHECK(count == 0 && items != NULL);
    CHECK(md_gguf_get_string(f, "test.empty", &s, NULL, &err) == MD_OK && !strcmp(s, ""));
    CHECK(md_gguf_alignment(f) == 64);
    md_gguf_close(f);
  }
  gb_free(&b);
}

/* --- tensors ------------------------------------------------------------------- */

/* After the tensor infos: padding to the default alignment (32), then a
 * data section of `data_len` bytes. */
static void data_section(gguf_bytes *b, size_t data_len) {
  gb_pad(b, 32);
  for (size_t i = 0; i < data_len; i++) gb_u8(b, (uint8_t)i);
}

static void test_tensors(void) {
  gguf_bytes b = {0};

  /* Lying offsets and sizes. */
  gb_header(&b, 3, 1, 0);
  gb_tensor(&b, "blk.0.attn_q.weight", 1, (uint64_t[]){8}, MD_GGML_F32, 4096);
  data_section(&b, 64);
  expect_fails("offset-past-end.gguf", &b, MD_E_FORMAT, "blk.0.attn_q.weight",
               "at data offset 4096 run past the end of the file", NULL);
  gb_free(&b);
  gb_header(&b, 3, 1, 0);
  gb_tensor(&b, "token_embd.weight", 2, (uint64_t[]){896, 151936}, MD_GGML_Q8_0, 0);
  data_section(&b, 64);
  expect_fails("size-past-end.gguf", &b, MD_E_FORMAT, "token_embd.weight",
               "its 144643072 bytes at data offset 0 run past the end", NULL);
  gb_free(&b);
  gb_header(&b, 3, 1, 0);
  gb_tensor(&b, "a", 1, (uint64_t[]){8}, MD_GGML_F32, UINT64_MAX - 31);
  data_section(&b, 64);
  expect_fails("offset-wraps.gguf", &b, MD_E_FORMAT, "a", "run past the end", NULL);
  gb_free(&b);

  /* Overlaps: the same range, and one inside another. */
  gb_header(&b, 3, 2, 0);
  gb_tensor(&b, "a", 1, (uint64_t[]){8}, MD_GGML_F32, 0);
  gb_tensor(&b, "b", 1, (uint64_t[]){16}, MD_GGML_F32, 0);
  data_section(&b, 64);
  expect_fails("overlap-same-start.gguf", &b, MD_E_FORMAT, "b",
               "tensors a [0, 32) and b [0, 64) overlap", NULL);
  gb_free(&b);
  gb_header(&b, 3, 3, 0);
  gb_tensor(&b, "c", 1, (uint64_t[]){8}, MD_GGML_F32, 64);
  gb_tensor(&b, "a", 1, (uint64_t[]){16}, MD_GGML_F32, 0);
  gb_tensor(&b, "b", 1, (uint64_t[]){8}, MD_GGML_F32, 32);
  data_section(&b, 96);
  expect_fails("overlap-inside.gguf", &b, MD_E_FORMAT, "b",
               "tensors a [0, 64) and b [32, 64) overlap", NULL);
  gb_free(&b);

  /* Types: unknown, removed, and rows not whole blocks. */
  gb_header(&b, 3, 1, 0);
  gb_tensor(&b, "a", 1, (uint64_t[]){32}, 99, 0);
  data_section(&b, 64);
  expect_fails("type-99.gguf", &b, MD_E_FORMAT, "a", "unknown ggml type 99", NULL);
  gb_free(&b);
  gb_header(&b, 3, 1, 0);
  gb_tensor(&b, "a", 1, (uint64_t[]){32}, 4, 0);
  data_section(&b, 64);
  expect_fails("type-4.gguf", &b, MD_E_FORMAT, "a", "unknown ggml type 4", NULL);
  gb_free(&b);
  gb_header(&b, 3, 1, 0);
  gb_tensor(&b, "a", 2, (uint64_t[]){16, 2}, MD_GGML_Q8_0, 0);
  data_section(&b, 64);
  expect_fails("row-not-blocks.gguf", &b, MD_E_FORMAT, "a", "(ne[0] = 16)",
               "not whole Q8_0 blocks of 32");
  gb_free(&b);

  /* Misaligned data. */
  gb_header(&b, 3, 1, 0);
  gb_tensor(&b, "a", 1, (uint64_t[]){4}, MD_GGML_F32, 16);
  data_section(&b, 64);
  expect_fails("misaligned.gguf", &b, MD_E_FORMAT, "a",
               "data offset 16 is not a multiple of the alignment 32", NULL);
  gb_free(&b);

  /* Shapes. */
  gb_header(&b, 3, 1, 0);
  gb_tensor(&b, "a", 5, (uint64_t[]){1, 1, 1, 1, 1}, MD_GGML_F32, 0);
  data_section(&b, 64);
  expect_fails("dims-5.gguf", &b, MD_E_FORMAT, "a", "has 5 dimensions (at most 4)", NULL);
  gb_free(&b);
  gb_header(&b, 3, 1, 0);
  gb_tensor(&b, "a", 2, (uint64_t[]){8, 0}, MD_GGML_F32, 0);
  data_section(&b, 64);
  expect_fails("extent-0.gguf", &b, MD_E_FORMAT, "a", "extent 1 of [8, 0] is 0", NULL);
  gb_free(&b);
  gb_header(&b, 3, 1, 0);
  gb_tensor(&b, "a", 2, (uint64_t[]){(uint64_t)1 << 32, (uint64_t)1 << 32}, MD_GGML_F32, 0);
  data_section(&b, 64);
  expect_fails("elements-overflow.gguf", &b, MD_E_FORMAT, "a",
               "element count of [4294967296, 4294967296] overflows 2^63", NULL);
  gb_free(&b);
  gb_header(&b, 3, 1, 0);
  gb_tensor(&b, "a", 2, (uint64_t[]){(uint64_t)1 << 31, (uint64_t)1 << 31}, MD_GGML_F32, 0);
  data_section(&b, 64);
  expect_fails("bytes-overflow.gguf", &b, MD_E_FORMAT, "a", "takes more than 2^63 bytes", NULL);
  gb_free(&b);

  /* Names. */
  gb_header(&b, 3, 2, 0);
  gb_tensor(&b, "output.weight", 1, (uint64_t[]){8}, MD_GGML_F32, 0);
  gb_tensor(&b, "output.weight", 1, (uint64_t[]){8}, MD_GGML_F32, 32);
  data_section(&b, 64);
  expect_fails("tensor-twice.gguf", &b, MD_E_FORMAT, "output.weight", "appears twice", NULL);
  gb_free(&b);
  char long_name[66];
  memset(long_name, 'x', 65);
  long_name[65] = '\0';
  gb_header(&b, 3, 1, 0);
  gb_tensor(&b, long_name, 1, (uint64_t[]){8}, MD_GGML_F32, 0);
  data_section(&b, 64);
  expect_fails("name-65.gguf", &b, MD_E_FORMAT, NULL, "tensor info 0's name",
               "is 65 bytes long (1 to 64 allowed)");
  gb_free(&b);

  /* The data section would start past the end: infos, then nothing. */
  gb_header(&b, 3, 1, 0);
  gb_tensor(&b, "a", 1, (uint64_t[]){8}, MD_GGML_F32, 0);
  expect_fails("no-data-section.gguf", &b, MD_E_FORMAT, NULL,
               "the data section would start at offset 64", NULL);
  gb_free(&b);

  /* Valid: no dimensions (one element), and alignment 1 with a tensor at
   * an odd address. */
  gb_header(&b, 3, 2, 1);
  gb_str(&b, "general.alignment");
  gb_u32(&b, GB_U8);
  gb_u8(&b, 1);
  gb_tensor(&b, "scalar", 0, NULL, MD_GGML_F32, 0);
  gb_tensor(&b, "odd", 1, (uint64_t[]){3}, MD_GGML_F32, 5);
  size_t data_start = b.len;
  gb_f32(&b, 2.5f);
  gb_u8(&b, 0);
  gb_f32(&b, -1.0f);
  gb_f32(&b, 0.5f);
  gb_f32(&b, 8.0f);
  md_gguf_file *f = open_ok("alignment-1.gguf", &b);
  if (f) {
    md_error err = {0};
    CHECK(md_gguf_alignment(f) == 1 && md_gguf_data_offset(f) == data_start);
    const md_gguf_tensor *s = md_gguf_find_tensor(f, "scalar");
    const md_gguf_tensor *o = md_gguf_find_tensor(f, "odd");
    CHECK(s && s->n_dims == 0 && s->n_elements == 1 && s->nbytes == 4 && s->ne[0] == 1);
    CHECK(o && o->offset == data_start + 5 && o->nbytes == 12);
    float out[3] = {0};
    if (s) CHECK(md_gguf_tensor_dequantize(f, s, out, &err) == MD_OK && out[0] == 2.5f);
    if (o) {
      CHECK(md_gguf_tensor_dequantize(f, o, out, &err) == MD_OK);
      CHECK(out[0] == -1.0f && out[1] == 0.5f && out[2] == 8.0f);
    }
    md_gguf_close(f);
  }
  gb_free(&b);
}

int main(void) {
  if (!mkdtemp(temp_dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_valid();
  test_header();
  test_metadata();
  test_tensors();
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", temp_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", temp_dir);
  return md_test_finish("gguf_hostile");
}
