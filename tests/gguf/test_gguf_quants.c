/* io/formats/gguf_quants: dequantization of every supported ggml type, bit
 * for bit against gguf-py's gguf.quants.dequantize (numpy), whose results
 * tests/gguf/make_fixtures.py stored in fixtures/ref/ next to the tensors
 * of fixtures/quants.gguf; the bf16 output against the same rounded as
 * torch rounds; whole tensors, single blocks and a run of blocks in the
 * middle; refusals by name; and the type table against ggml's sizes. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "io/formats/gguf.h"
#include "io/formats/gguf_quants.h"
#include "io/formats/npy.h"
#include "tests/test_util.h"

static void fixture(char *buf, size_t size, const char *name) {
  const char *root = getenv("MD_SOURCE_ROOT");
  snprintf(buf, size, "%s/tests/gguf/fixtures/%s", root ? root : ".", name);
}

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* The reference array for `type_name` and `mode` ("f32", "bf16"). */
static bool load_reference(const char *type_name, const char *mode, md_npy_array *ref) {
  char name[64], path[1024];
  snprintf(name, sizeof name, "ref/%s.%s.npy", type_name, mode);
  fixture(path, sizeof path, name);
  md_error err = {0};
  md_status status = md_npy_read(path, ref, &err);
  CHECK_MSG(status == MD_OK, "%s", err.message);
  if (status != MD_OK) return false;
  CHECK_MSG(ref->dtype == MD_NPY_F32 && ref->ndim == 1, "%s: not a flat float32 array", path);
  return ref->dtype == MD_NPY_F32 && ref->ndim == 1;
}

/* Counts the elements whose bits differ, reporting the first few. */
static size_t compare_bits(const char *what, const float *got, const float *want, size_t n) {
  size_t wrong = 0;
  for (size_t i = 0; i < n; i++) {
    if (bits_of(got[i]) == bits_of(want[i])) continue;
    if (wrong++ < 4)
      fprintf(stderr, "%s: element %zu is 0x%08" PRIx32 " (%.9g), reference 0x%08" PRIx32
              " (%.9g)\n", what, i, bits_of(got[i]), (double)got[i], bits_of(want[i]),
              (double)want[i]);
  }
  return wrong;
}

static const char *const dequantized_types[] = {"F32",  "F16",  "BF16", "Q4_0", "Q4_1",
                                                 "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K",
                                                 "Q4_K", "Q5_K", "Q6_K"};

static void lower(const char *in, char *out, size_t size) {
  size_t i = 0;
  for (; in[i] && i + 1 < size; i++) out[i] = (char)(in[i] >= 'A' && in[i] <= 'Z' ? in[i] + 32 : in[i]);
  out[i] = '\0';
}

static void test_type(const md_gguf_file *file, const char *type_name) {
  char tensor_name[32];
  lower(type_name, tensor_name, sizeof tensor_name);
  const md_gguf_tensor *t = NULL;
  md_error err = {0};
  CHECK_MSG(md_gguf_get_tensor(file, tensor_name, &t, &err) == MD_OK, "%s", err.message);
  if (!t) return;
  CHECK_MSG(!strcmp(md_ggml_type_name(t->type), type_name), "tensor %s has type %s",
            tensor_name, md_ggml_type_name(t->type));
  CHECK(md_ggml_type_dequantizable(t->type));
  md_npy_array ref32 = {0}, ref16 = {0};
  if (!load_reference(type_name, "f32", &ref32) || !load_reference(type_name, "bf16", &ref16)) {
    md_npy_free(&ref32);
    md_npy_free(&ref16);
    return;
  }
  size_t n = (size_t)t->n_elements;
  CHECK_MSG(ref32.count == n && ref16.count == n, "%s: %zu elements, references %zu and %zu",
            type_name, n, ref32.count, ref16.count);
  if (ref32.count != n || ref16.count != n) goto done;

  /* The whole tensor, float32. */
  float *out = malloc(n * sizeof *out);
  CHECK(md_gguf_tensor_dequantize(file, t, out, &err) == MD_OK);
  size_t wrong = compare_bits(type_name, out, ref32.data, n);
  CHECK_MSG(wrong == 0, "%s: %zu of %zu elements differ from gguf.quants.dequantize", type_name,
            wrong, n);

  /* bf16, widened for the comparison (exact). */
  uint16_t *out16 = malloc(n * sizeof *out16);
  CHECK(md_gguf_tensor_dequantize_bf16(file, t, out16, &err) == MD_OK);
  for (size_t i = 0; i < n; i++) out[i] = md_bf16_to_f32(out16[i]);
  char what[64];
  snprintf(what, sizeof what, "%s as bf16", type_name);
  wrong = compare_bits(what, out, ref16.data, n);
  CHECK_MSG(wrong == 0, "%s: %zu of %zu elements differ from the rounded reference", what,
            wrong, n);

  /* Block by block, and a run of blocks starting in the middle: the same
   * values from the same bytes. */
  uint32_t block = md_ggml_block_elements(t->type), bytes = md_ggml_block_bytes(t->type);
  const uint8_t *src = t->data;
  wrong = 0;
  for (size_t b = 0; b < n / block; b++) {
    float one[256];
    CHECK(md_ggml_dequantize(t->type, src + b * bytes, block, one, &err) == MD_OK);
    wrong += compare_bits(type_name, one, (const float *)ref32.data + b * block, block);
  }
  CHECK_MSG(wrong == 0, "%s: %zu elements differ when dequantized one block at a time",
            type_name, wrong);
  size_t first = n / block / 2, count = n / block - first;
  CHECK(md_ggml_dequantize(t->type, src + first * bytes, (uint64_t)count * block, out, &err) ==
        MD_OK);
  CHECK(compare_bits(type_name, out, (const float *)ref32.data + first * block,
                     count * block) == 0);

  /* Not a whole number of blocks. */
  if (block > 1) {
    md_status status = md_ggml_dequantize(t->type, src, block + 1, out, &err);
    CHECK(status == MD_E_INVALID && strstr(err.message, type_name) != NULL);
  }
  free(out16);
  free(out);
done:
  md_npy_free(&ref32);
  md_npy_free(&ref16);
}

/* The fixture's extremes are in the reference already; these say in
 * numbers what the references must hold, so that a fixture regenerated
 * wrongly cannot pass by matching itself. */
static void test_known_values(const md_gguf_file *file) {
  const md_gguf_tensor *q4_0 = md_gguf_find_tensor(file, "q4_0");
  if (!q4_0) return;
  md_error err = {0};
  float y[32];
  CHECK(md_ggml_dequantize(MD_GGML_Q4_0, q4_0->data, 32, y, &err) == MD_OK);
  /* Block 0's scale is 0x3C00 = 1.0 (SPECIAL_HALVES[0]), so element j is
   * (nibble - 8) exactly: low nibbles first, then high nibbles. */
  const uint8_t *qs = (const uint8_t *)q4_0->data + 2;
  for (int j = 0; j < 16; j++) {
    CHECK(y[j] == (float)((qs[j] & 15) - 8));
    CHECK(y[j + 16] == (float)((qs[j] >> 4) - 8));
  }
  /* Q8_0 block 10's scale is 65504 (0x7BFF, SPECIAL_HALVES[10]) and its
   * quants are random int8, so each value is q x 65504, exact in float32. */
  const md_gguf_tensor *q8 = md_gguf_find_tensor(file, "q8_0");
  if (!q8) return;
  const uint8_t *b10 = (const uint8_t *)q8->data + 10 * 34;
  CHECK(b10[0] == 0xff && b10[1] == 0x7b);
  CHECK(md_ggml_dequantize(MD_GGML_Q8_0, b10, 32, y, &err) == MD_OK);
  for (int j = 0; j < 32; j++) CHECK(y[j] == (float)(int8_t)b10[2 + j] * 65504.0f);
  /* Block 4's scale is the smallest subnormal half, 2^-24; its quants are
   * bytes 128 .. 159 (arange(256) over blocks 0 .. 7), int8 -128 .. -97. */
  const uint8_t *b4 = (const uint8_t *)q8->data + 4 * 34;
  CHECK(b4[0] == 0x01 && b4[1] == 0x00);
  CHECK(md_ggml_dequantize(MD_GGML_Q8_0, b4, 32, y, &err) == MD_OK);
  for (int j = 0; j < 32; j++) CHECK(y[j] == (float)(int8_t)b4[2 + j] * 0x1p-24f);
}

static void test_refusals(const md_gguf_file *file) {
  md_error err = {0};
  float out[64];
  uint16_t out16[64];
  const md_gguf_tensor *iq = md_gguf_find_tensor(file, "iq4_nl");
  CHECK(iq != NULL);
  if (iq) {
    CHECK(!md_ggml_type_dequantizable(iq->type));
    md_status status = md_gguf_tensor_dequantize(file, iq, out, &err);
    CHECK(status == MD_E_UNSUPPORTED);
    CHECK_MSG(strstr(err.message, "IQ4_NL") && strstr(err.message, "tensor iq4_nl") &&
                  strstr(err.message, md_gguf_path(file)),
              "%s", err.message);
    CHECK(!strcmp(err.record, "iq4_nl"));
    CHECK(md_gguf_tensor_dequantize_bf16(file, iq, out16, &err) == MD_E_UNSUPPORTED);
  }
  unsigned char zeros[64] = {0};
  CHECK(md_ggml_dequantize(MD_GGML_Q8_K, zeros, 256, out, &err) == MD_E_UNSUPPORTED);
  CHECK(strstr(err.message, "Q8_K") != NULL);
  CHECK(md_ggml_dequantize(4, zeros, 32, out, &err) == MD_E_UNSUPPORTED);
  CHECK(strstr(err.message, "unknown ggml type 4") != NULL);
  CHECK(md_ggml_dequantize_bf16(99, zeros, 1, out16, &err) == MD_E_UNSUPPORTED);
  CHECK(md_ggml_dequantize(MD_GGML_F32, zeros, 0, out, &err) == MD_OK);
}

/* ggml.h / gguf-py GGML_QUANT_SIZES, and the block layouts of
 * ggml-common.h: e.g. block_q4_K is d, dmin (2 + 2), scales[12],
 * qs[QK_K/2] = 144 bytes; block_q6_K ql[128], qh[64], scales[16], d = 210. */
static void test_type_table(void) {
  struct { uint32_t type; const char *name; uint32_t elements, bytes; } expect[] = {
      {0, "F32", 1, 4},       {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},
      {3, "Q4_1", 32, 20},    {6, "Q5_0", 32, 22},    {7, "Q5_1", 32, 24},
      {8, "Q8_0", 32, 34},    {9, "Q8_1", 32, 40},    {10, "Q2_K", 256, 84},
      {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
      {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292}, {20, "IQ4_NL", 32, 18},
      {30, "BF16", 1, 2},     {39, "MXFP4", 32, 17},  {41, "Q1_0", 128, 18},
  };
  for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
    CHECK(md_ggml_type_known(expect[i].type));
    CHECK(!strcmp(md_ggml_type_name(expect[i].type), expect[i].name));
    CHECK(md_ggml_block_elements(expect[i].type) == expect[i].elements);
    CHECK(md_ggml_block_bytes(expect[i].type) == expect[i].bytes);
  }
  const uint32_t removed[] = {4, 5, 31, 32, 33, 36, 37, 38, 42, 1000};
  for (size_t i = 0; i < sizeof removed / sizeof removed[0]; i++) {
    CHECK(!md_ggml_type_known(removed[i]));
    CHECK(md_ggml_type_name(removed[i]) == NULL);
    CHECK(md_ggml_block_elements(removed[i]) == 0 && md_ggml_block_bytes(removed[i]) == 0);
  }
}

/* torch's rounding, case by case (c10/util/BFloat16.h). */
static void test_bf16_rounding(void) {
  struct { uint32_t in; uint16_t out; } cases[] = {
      {0x3f800000, 0x3f80}, /* 1.0 */
      {0x3f808000, 0x3f80}, /* tie, even below: down */
      {0x3f818000, 0x3f82}, /* tie, odd below: up */
      {0x3f808001, 0x3f81}, /* above the tie: up */
      {0x7f7fffff, 0x7f80}, /* largest float rounds to infinity */
      {0xff800000, 0xff80}, /* -inf */
      {0x80000001, 0x8000}, /* tiny negative subnormal: -0 */
      {0x7fc00001, 0x7fc0}, /* NaNs: 0x7FC0 whatever the sign and payload */
      {0xffc00000, 0x7fc0},
      {0x7f800001, 0x7fc0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    float f;
    memcpy(&f, &cases[i].in, sizeof f);
    uint16_t got = md_f32_to_bf16_rne(f);
    CHECK_MSG(got == cases[i].out, "0x%08" PRIx32 " -> 0x%04x, expected 0x%04x", cases[i].in,
              got, cases[i].out);
  }
}

int main(void) {
  char path[1024];
  fixture(path, sizeof path, "quants.gguf");
  md_gguf_file *file = NULL;
  md_error err = {0};
  md_status status = md_gguf_open(path, &file, &err);
  CHECK_MSG(status == MD_OK, "%s", err.message);
  if (file) {
    CHECK(md_gguf_tensor_count(file) == 14);
    for (size_t i = 0; i < sizeof dequantized_types / sizeof dequantized_types[0]; i++)
      test_type(file, dequantized_types[i]);
    test_known_values(file);
    test_refusals(file);
    md_gguf_close(file);
  }
  test_type_table();
  test_bf16_rounding();
  return md_test_finish("gguf_quants");
}
