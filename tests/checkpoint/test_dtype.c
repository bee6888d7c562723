/* io/tensor: dtype sizes and names, and the half-precision conversions over
 * every bit pattern: md_f16_to_f32 against numpy (f16_reference.json, from
 * make_f16_reference.py) and against the IEEE 754 definition evaluated
 * independently with ldexp; md_bf16_to_f32 against the same definition. */
#include <jansson.h>
#include <math.h>
#include <nettle/sha2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/tensor.h"
#include "tests/checkpoint/checkpoint_util.h"
#include "tests/test_util.h"

static uint32_t float_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, 4);
  return bits;
}

/* IEEE 754 binary16 (1 sign, 5 exponent bits with bias 15, 10 fraction bits):
 * exponent 0 means fraction * 2^-24, exponent 31 infinity (fraction 0) or
 * NaN, else (1024 + fraction) * 2^(exponent - 25).  A NaN keeps its sign and
 * its fraction, shifted to the top of float32's 23 fraction bits. */
static uint32_t f16_by_definition(uint16_t half) {
  int negative = half >> 15, exponent = (half >> 10) & 31, fraction = half & 1023;
  if (exponent == 31 && fraction)
    return ((uint32_t)negative << 31) | 0x7f800000u | ((uint32_t)fraction << 13);
  double magnitude = exponent == 31  ? INFINITY
                     : exponent == 0 ? ldexp(fraction, -24)
                                     : ldexp(1024 + fraction, exponent - 25);
  return float_bits((float)(negative ? -magnitude : magnitude));
}

/* bfloat16 (1 sign, 8 exponent bits with bias 127, 7 fraction bits), read
 * the same way: exponent 0 is fraction * 2^-133, else (128 + fraction) *
 * 2^(exponent - 134). */
static uint32_t bf16_by_definition(uint16_t half) {
  int negative = half >> 15, exponent = (half >> 7) & 255, fraction = half & 127;
  if (exponent == 255 && fraction)
    return ((uint32_t)negative << 31) | 0x7f800000u | ((uint32_t)fraction << 16);
  double magnitude = exponent == 255 ? INFINITY
                     : exponent == 0 ? ldexp(fraction, -133)
                                     : ldexp(128 + fraction, exponent - 134);
  return float_bits((float)(negative ? -magnitude : magnitude));
}

static void test_names(void) {
  CHECK(md_dtype_size(MD_DTYPE_F32) == 4 && md_dtype_size(MD_DTYPE_F16) == 2 &&
        md_dtype_size(MD_DTYPE_BF16) == 2);
  CHECK(!strcmp(md_dtype_name(MD_DTYPE_F32), "F32") && !strcmp(md_dtype_name(MD_DTYPE_F16), "F16"));
  CHECK(!strcmp(md_dtype_name(MD_DTYPE_BF16), "BF16"));
}

static void test_by_definition(void) {
  size_t f16_mismatches = 0, bf16_mismatches = 0;
  for (uint32_t bits = 0; bits < 65536; bits++) {
    uint32_t got = float_bits(md_f16_to_f32((uint16_t)bits)), want = f16_by_definition((uint16_t)bits);
    if (got != want && f16_mismatches++ < 5)
      fprintf(stderr, "f16 %04x: got %08x, definition %08x\n", bits, got, want);
    got = float_bits(md_bf16_to_f32((uint16_t)bits));
    want = bf16_by_definition((uint16_t)bits);
    if (got != want && bf16_mismatches++ < 5)
      fprintf(stderr, "bf16 %04x: got %08x, definition %08x\n", bits, got, want);
  }
  CHECK(f16_mismatches == 0);
  CHECK(bf16_mismatches == 0);
}

static void test_against_numpy(void) {
  char path[4096];
  fixture_path(path, sizeof path, "f16_reference.json");
  json_error_t jerr;
  json_t *reference = json_load_file(path, 0, &jerr);
  CHECK_MSG(reference != NULL, "%s: %s", path, jerr.text);
  if (!reference) return;
  size_t index;
  json_t *sample;
  json_array_foreach(json_object_get(reference, "samples"), index, sample) {
    uint16_t half = (uint16_t)json_integer_value(json_object_get(sample, "f16"));
    uint32_t want = (uint32_t)json_integer_value(json_object_get(sample, "f32"));
    CHECK_MSG(float_bits(md_f16_to_f32(half)) == want, "f16 %04x: got %08x, numpy %08x", half,
              float_bits(md_f16_to_f32(half)), want);
  }
  CHECK(index >= 20);
  /* All 65536 results, little-endian, hashed as the script hashed numpy's. */
  struct sha256_ctx ctx;
  sha256_init(&ctx);
  for (uint32_t bits = 0; bits < 65536; bits++) {
    uint32_t value = float_bits(md_f16_to_f32((uint16_t)bits));
    uint8_t bytes[4] = {(uint8_t)value, (uint8_t)(value >> 8), (uint8_t)(value >> 16),
                        (uint8_t)(value >> 24)};
    sha256_update(&ctx, 4, bytes);
  }
  uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_digest(&ctx, sizeof digest, digest);
  char hex[2 * SHA256_DIGEST_SIZE + 1];
  for (size_t i = 0; i < sizeof digest; i++) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
  const char *want = json_string_value(json_object_get(reference, "float32_bits_sha256"));
  CHECK_MSG(want && !strcmp(hex, want), "all 65536: sha256 %s, numpy %s", hex, want);
  json_decref(reference);
}

int main(void) {
  test_names();
  test_by_definition();
  test_against_numpy();
  return md_test_finish("checkpoint_dtype");
}
