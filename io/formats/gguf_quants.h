/* ggml's tensor types, as GGUF files store them: each type's name, block
 * size (elements per block) and block size in bytes, and dequantization of
 * the types a Qwen2 GGUF checkpoint uses to float32 (or to bf16).
 *
 * The type ids, names and sizes are ggml's (ggml.h, `enum ggml_type`; the
 * same table as gguf-py's GGML_QUANT_SIZES in the `gguf` package 0.19.0).
 * A tensor of `n` elements of a type with block size B and type size S
 * stores n / B blocks of S bytes each, and its row length (ne[0]) is a
 * multiple of B.
 *
 * Dequantization follows ggml's reference C code (ggml-quants.c,
 * dequantize_row_*) and gguf-py's numpy port (gguf/quants.py), and is bit
 * for bit equal to gguf.quants.dequantize: half-precision scales are
 * widened exactly (md_f16_to_f32), every product of scales and quants is
 * exact in float32, and the one sum (of a min or offset) rounds once, as in
 * the reference. tests/gguf/test_gguf_quants.c compares every supported
 * type with that reference bit for bit. */
#ifndef MD_IO_FORMATS_GGUF_QUANTS_H
#define MD_IO_FORMATS_GGUF_QUANTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* ggml's type ids (a GGUF tensor info stores one as a uint32). Ids that
 * ggml removed (4, 5: Q4_2, Q4_3; 31-33, 36-38: repacked layouts that
 * never appear in files) are unknown here, as in ggml. */
typedef enum md_ggml_type {
  MD_GGML_F32 = 0,
  MD_GGML_F16 = 1,
  MD_GGML_Q4_0 = 2,
  MD_GGML_Q4_1 = 3,
  MD_GGML_Q5_0 = 6,
  MD_GGML_Q5_1 = 7,
  MD_GGML_Q8_0 = 8,
  MD_GGML_Q8_1 = 9,
  MD_GGML_Q2_K = 10,
  MD_GGML_Q3_K = 11,
  MD_GGML_Q4_K = 12,
  MD_GGML_Q5_K = 13,
  MD_GGML_Q6_K = 14,
  MD_GGML_Q8_K = 15,
  MD_GGML_IQ2_XXS = 16,
  MD_GGML_IQ2_XS = 17,
  MD_GGML_IQ3_XXS = 18,
  MD_GGML_IQ1_S = 19,
  MD_GGML_IQ4_NL = 20,
  MD_GGML_IQ3_S = 21,
  MD_GGML_IQ2_S = 22,
  MD_GGML_IQ4_XS = 23,
  MD_GGML_I8 = 24,
  MD_GGML_I16 = 25,
  MD_GGML_I32 = 26,
  MD_GGML_I64 = 27,
  MD_GGML_F64 = 28,
  MD_GGML_IQ1_M = 29,
  MD_GGML_BF16 = 30,
  MD_GGML_TQ1_0 = 34,
  MD_GGML_TQ2_0 = 35,
  MD_GGML_MXFP4 = 39,
  MD_GGML_NVFP4 = 40,
  MD_GGML_Q1_0 = 41,
} md_ggml_type;

/* True when `type` is one of the ids above. */
bool md_ggml_type_known(uint32_t type);

/* "Q4_K", "F32", ... as ggml and gguf-py name them; NULL for an unknown id. */
const char *md_ggml_type_name(uint32_t type);

/* Elements per block and bytes per block; 0 for an unknown id. */
uint32_t md_ggml_block_elements(uint32_t type);
uint32_t md_ggml_block_bytes(uint32_t type);

/* True for the types md_ggml_dequantize converts: F32, F16, BF16, Q4_0,
 * Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K. */
bool md_ggml_type_dequantizable(uint32_t type);

/* Converts `n` elements stored as `type` at `blocks` (n / block elements
 * blocks, packed, any alignment) to float32 in `out`. Fails with
 * MD_E_UNSUPPORTED naming the type (by name, or by id when unknown) for a
 * type that is not dequantizable, and MD_E_INVALID when n is not a multiple
 * of the type's block size. Bit for bit gguf.quants.dequantize, NaN
 * payloads included. */
md_status md_ggml_dequantize(uint32_t type, const void *blocks, uint64_t n, float *out,
                             md_error *err);

/* As md_ggml_dequantize, then each float32 rounded to bf16 as torch rounds
 * (c10/util/BFloat16.h, round_to_nearest_even): to nearest, ties to even;
 * every NaN becomes 0x7FC0. Output as bf16 bit patterns. */
md_status md_ggml_dequantize_bf16(uint32_t type, const void *blocks, uint64_t n,
                                  uint16_t *out, md_error *err);

/* float32 -> bf16 bits, rounded as md_ggml_dequantize_bf16 rounds. */
uint16_t md_f32_to_bf16_rne(float value);

#endif
