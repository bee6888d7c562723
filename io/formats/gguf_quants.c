#include "io/formats/gguf_quants.h"

#include <inttypes.h>
#include <string.h>

#include "base/tensor.h"

/* Bit-exactness with the reference: every product below is exact in
 * float32 (a half-precision scale has an 11-bit significand; times a
 * sub-block scale of at most 8 bits and a quant of at most 6 bits it stays
 * within float32's 24, far inside its exponent range), so a value is the
 * exactly rounded result of its formula's one final addition, however the
 * compiler orders or fuses the operations; tests/gguf/test_gguf_quants.c
 * checks it against gguf-py. */

/* The format and the reference are little-endian; blocks are read in place. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian host required");

/* ggml's QK_K: elements of a k-quant super-block. */
enum { QK_K = 256, K_SCALE_BYTES = 12 };

typedef struct ggml_type_info {
  const char *name;
  uint32_t block_elements;
  uint32_t block_bytes;
} ggml_type_info;

/* ggml.h's type table as gguf-py 0.19.0 gives it (GGML_QUANT_SIZES). */
static const ggml_type_info type_table[] = {
    [MD_GGML_F32] = {"F32", 1, 4},
    [MD_GGML_F16] = {"F16", 1, 2},
    [MD_GGML_Q4_0] = {"Q4_0", 32, 2 + 16},
    [MD_GGML_Q4_1] = {"Q4_1", 32, 2 + 2 + 16},
    [MD_GGML_Q5_0] = {"Q5_0", 32, 2 + 4 + 16},
    [MD_GGML_Q5_1] = {"Q5_1", 32, 2 + 2 + 4 + 16},
    [MD_GGML_Q8_0] = {"Q8_0", 32, 2 + 32},
    [MD_GGML_Q8_1] = {"Q8_1", 32, 4 + 4 + 32},
    [MD_GGML_Q2_K] = {"Q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4},
    [MD_GGML_Q3_K] = {"Q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12},
    [MD_GGML_Q4_K] = {"Q4_K", QK_K, 2 + 2 + QK_K / 2 + 12},
    [MD_GGML_Q5_K] = {"Q5_K", QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12},
    [MD_GGML_Q6_K] = {"Q6_K", QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16},
    [MD_GGML_Q8_K] = {"Q8_K", QK_K, 4 + QK_K + QK_K / 8},
    [MD_GGML_IQ2_XXS] = {"IQ2_XXS", QK_K, 2 + QK_K / 4},
    [MD_GGML_IQ2_XS] = {"IQ2_XS", QK_K, 2 + QK_K / 4 + QK_K / 32},
    [MD_GGML_IQ3_XXS] = {"IQ3_XXS", QK_K, 2 + QK_K / 4 + QK_K / 8},
    [MD_GGML_IQ1_S] = {"IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16},
    [MD_GGML_IQ4_NL] = {"IQ4_NL", 32, 2 + 16},
    [MD_GGML_IQ3_S] = {"IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4},
    [MD_GGML_IQ2_S] = {"IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16},
    [MD_GGML_IQ4_XS] = {"IQ4_XS", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64},
    [MD_GGML_I8] = {"I8", 1, 1},
    [MD_GGML_I16] = {"I16", 1, 2},
    [MD_GGML_I32] = {"I32", 1, 4},
    [MD_GGML_I64] = {"I64", 1, 8},
    [MD_GGML_F64] = {"F64", 1, 8},
    [MD_GGML_IQ1_M] = {"IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32},
    [MD_GGML_BF16] = {"BF16", 1, 2},
    [MD_GGML_TQ1_0] = {"TQ1_0", QK_K, 2 + 4 * 13},
    [MD_GGML_TQ2_0] = {"TQ2_0", QK_K, 2 + 64},
    [MD_GGML_MXFP4] = {"MXFP4", 32, 1 + 16},
    [MD_GGML_NVFP4] = {"NVFP4", 64, 4 + 32},
    [MD_GGML_Q1_0] = {"Q1_0", 128, 2 + 16},
};

static const ggml_type_info *type_info(uint32_t type) {
  if (type >= sizeof type_table / sizeof type_table[0]) return NULL;
  return type_table[type].name ? &type_table[type] : NULL;
}

bool md_ggml_type_known(uint32_t type) { return type_info(type) != NULL; }

const char *md_ggml_type_name(uint32_t type) {
  const ggml_type_info *info = type_info(type);
  return info ? info->name : NULL;
}

uint32_t md_ggml_block_elements(uint32_t type) {
  const ggml_type_info *info = type_info(type);
  return info ? info->block_elements : 0;
}

uint32_t md_ggml_block_bytes(uint32_t type) {
  const ggml_type_info *info = type_info(type);
  return info ? info->block_bytes : 0;
}

static float half_at(const uint8_t *p) {
  uint16_t bits;
  memcpy(&bits, p, sizeof bits);
  return md_f16_to_f32(bits);
}

/* Each block_* function expands one block at `b` into `y` (its block size
 * of floats). Layouts as ggml-common.h's block_* structs. */

/* Q4_0: f16 d, 16 bytes of nibbles; element j is the low nibble of qs[j],
 * element j + 16 the high nibble; value d * (q - 8). */
static void block_q4_0(const uint8_t *b, float *y) {
  const float d = half_at(b);
  const uint8_t *qs = b + 2;
  for (int j = 0; j < 16; j++) {
    y[j] = d * (float)((qs[j] & 0x0f) - 8);
    y[j + 16] = d * (float)((qs[j] >> 4) - 8);
  }
}

/* Q4_1: f16 d, f16 m, nibbles as Q4_0; value d * q + m. */
static void block_q4_1(const uint8_t *b, float *y) {
  const float d = half_at(b), m = half_at(b + 2);
  const uint8_t *qs = b + 4;
  for (int j = 0; j < 16; j++) {
    float lo = d * (float)(qs[j] & 0x0f);
    float hi = d * (float)(qs[j] >> 4);
    y[j] = lo + m;
    y[j + 16] = hi + m;
  }
}

/* Q5_0: f16 d, u32 qh (bit i is element i's fifth bit), nibbles as Q4_0;
 * value d * (q - 16). */
static void block_q5_0(const uint8_t *b, float *y) {
  const float d = half_at(b);
  uint32_t qh;
  memcpy(&qh, b + 2, sizeof qh);
  const uint8_t *qs = b + 6;
  for (int j = 0; j < 16; j++) {
    int lo = (qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
    int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
    y[j] = d * (float)(lo - 16);
    y[j + 16] = d * (float)(hi - 16);
  }
}

/* Q5_1: f16 d, f16 m, u32 qh, nibbles; value d * q + m. */
static void block_q5_1(const uint8_t *b, float *y) {
  const float d = half_at(b), m = half_at(b + 2);
  uint32_t qh;
  memcpy(&qh, b + 4, sizeof qh);
  const uint8_t *qs = b + 8;
  for (int j = 0; j < 16; j++) {
    int lo = (qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
    int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
    float plo = d * (float)lo;
    float phi = d * (float)hi;
    y[j] = plo + m;
    y[j + 16] = phi + m;
  }
}

/* Q8_0: f16 d, 32 int8; value q * d. */
static void block_q8_0(const uint8_t *b, float *y) {
  const float d = half_at(b);
  const int8_t *qs = (const int8_t *)(b + 2);
  for (int j = 0; j < 32; j++) y[j] = (float)qs[j] * d;
}

/* Q2_K: 16 scale bytes (low nibble scale, high nibble min of 16 elements
 * each), 64 bytes of 2-bit values, f16 d, f16 dmin. Element 128 h + 32 s + l
 * (h < 2, s < 4, l < 32) is bits 2s..2s+1 of qs[32 h + l]; value
 * (d * scale) * q - (dmin * min). */
static void block_q2_k(const uint8_t *b, float *y) {
  const uint8_t *scales = b, *qs = b + QK_K / 16;
  const float d = half_at(b + QK_K / 16 + QK_K / 4);
  const float dmin = half_at(b + QK_K / 16 + QK_K / 4 + 2);
  float dl[16], ml[16];
  for (int k = 0; k < 16; k++) {
    dl[k] = d * (float)(scales[k] & 0x0f);
    ml[k] = dmin * (float)(scales[k] >> 4);
  }
  for (int e = 0; e < QK_K; e++) {
    int h = e / 128, s = (e / 32) % 4, l = e % 32;
    float p = dl[e / 16] * (float)((qs[32 * h + l] >> (2 * s)) & 3);
    y[e] = p - ml[e / 16];
  }
}

/* Q3_K: 32 bytes hmask, 64 bytes of 2-bit values, 12 bytes of sixteen 6-bit
 * scales, f16 d. Scale k: low 4 bits from byte k % 8 (high nibble for
 * k >= 8), high 2 bits from byte 8 + k % 4 at bit 2 (k / 4); minus 32.
 * Element e = 128 h + 32 s + l: q = ((qs[32 h + l] >> 2 s) & 3) minus 4
 * when bit (4 h + s) of hmask[l] is clear; value (d * scale) * q. */
static void block_q3_k(const uint8_t *b, float *y) {
  const uint8_t *hmask = b, *qs = b + QK_K / 8, *packed = b + QK_K / 8 + QK_K / 4;
  const float d = half_at(b + QK_K / 8 + QK_K / 4 + 12);
  float dl[16];
  for (int k = 0; k < 16; k++) {
    int low = k < 8 ? (packed[k] & 0x0f) : (packed[k - 8] >> 4);
    int high = (packed[8 + k % 4] >> (2 * (k / 4))) & 3;
    dl[k] = d * (float)((low | (high << 4)) - 32);
  }
  for (int e = 0; e < QK_K; e++) {
    int h = e / 128, s = (e / 32) % 4, l = e % 32;
    int q = (qs[32 * h + l] >> (2 * s)) & 3;
    if (!((hmask[l] >> (4 * h + s)) & 1)) q -= 4;
    y[e] = dl[e / 16] * (float)q;
  }
}

/* The eight 6-bit scales and mins of Q4_K and Q5_K (ggml's
 * get_scale_min_k4): for j < 4, scale j is the low 6 bits of byte j and
 * min j those of byte j + 4; for j >= 4, the low nibble (scale) and high
 * nibble (min) of byte j + 4 give the low 4 bits and the top 2 bits of
 * bytes j - 4 (scale) and j (min) the high 2. */
static void scales_k4(const uint8_t *packed, int sc[8], int mn[8]) {
  for (int j = 0; j < 8; j++) {
    if (j < 4) {
      sc[j] = packed[j] & 63;
      mn[j] = packed[j + 4] & 63;
    } else {
      sc[j] = (packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4);
      mn[j] = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
    }
  }
}

/* Q4_K: f16 d, f16 dmin, 12 scale bytes, 128 bytes of nibbles. Element
 * e = 64 c + 32 n + l is nibble n of qs[32 c + l], in group e / 32; value
 * (d * scale) * q - (dmin * min). */
static void block_q4_k(const uint8_t *b, float *y) {
  const float d = half_at(b), dmin = half_at(b + 2);
  int sc[8], mn[8];
  scales_k4(b + 4, sc, mn);
  const uint8_t *qs = b + 4 + K_SCALE_BYTES;
  for (int g = 0; g < 8; g++) {
    float d1 = d * (float)sc[g];
    float m1 = dmin * (float)mn[g];
    int c = g / 2, shift = 4 * (g % 2);
    for (int l = 0; l < 32; l++) {
      float p = d1 * (float)((qs[32 * c + l] >> shift) & 0x0f);
      y[32 * g + l] = p - m1;
    }
  }
}

/* Q5_K: as Q4_K with 32 bytes qh before the nibbles: element e's fifth bit
 * is bit e / 32 of qh[e % 32]. */
static void block_q5_k(const uint8_t *b, float *y) {
  const float d = half_at(b), dmin = half_at(b + 2);
  int sc[8], mn[8];
  scales_k4(b + 4, sc, mn);
  const uint8_t *qh = b + 4 + K_SCALE_BYTES, *qs = qh + QK_K / 8;
  for (int g = 0; g < 8; g++) {
    float d1 = d * (float)sc[g];
    float m1 = dmin * (float)mn[g];
    int c = g / 2, shift = 4 * (g % 2);
    for (int l = 0; l < 32; l++) {
      int q = ((qs[32 * c + l] >> shift) & 0x0f) | (((qh[l] >> g) & 1) << 4);
      float p = d1 * (float)q;
      y[32 * g + l] = p - m1;
    }
  }
}

/* Q6_K: 128 bytes ql, 64 bytes qh, 16 int8 scales, f16 d. Element
 * e = 128 h + 64 n + k (k < 64) takes nibble n of ql[64 h + k] and, with
 * s = (e / 32) % 4 and l = e % 32, bits 2s..2s+1 of qh[32 h + l] as its
 * high two bits; minus 32; value (d * scale[e / 16]) * q. */
static void block_q6_k(const uint8_t *b, float *y) {
  const uint8_t *ql = b, *qh = b + QK_K / 2;
  const int8_t *scales = (const int8_t *)(b + QK_K / 2 + QK_K / 4);
  const float d = half_at(b + QK_K / 2 + QK_K / 4 + QK_K / 16);
  float dl[16];
  for (int k = 0; k < 16; k++) dl[k] = d * (float)scales[k];
  for (int e = 0; e < QK_K; e++) {
    int h = e / 128, n = (e / 64) % 2, k = e % 64, s = (e / 32) % 4, l = e % 32;
    int low = (ql[64 * h + k] >> (4 * n)) & 0x0f;
    int high = (qh[32 * h + l] >> (2 * s)) & 3;
    y[e] = dl[e / 16] * (float)((low | (high << 4)) - 32);
  }
}

typedef void (*block_fn)(const uint8_t *block, float *out);

static block_fn block_function(uint32_t type) {
  switch (type) {
    case MD_GGML_Q4_0: return block_q4_0;
    case MD_GGML_Q4_1: return block_q4_1;
    case MD_GGML_Q5_0: return block_q5_0;
    case MD_GGML_Q5_1: return block_q5_1;
    case MD_GGML_Q8_0: return block_q8_0;
    case MD_GGML_Q2_K: return block_q2_k;
    case MD_GGML_Q3_K: return block_q3_k;
    case MD_GGML_Q4_K: return block_q4_k;
    case MD_GGML_Q5_K: return block_q5_k;
    case MD_GGML_Q6_K: return block_q6_k;
    default: return NULL;
  }
}

bool md_ggml_type_dequantizable(uint32_t type) {
  return type == MD_GGML_F32 || type == MD_GGML_F16 || type == MD_GGML_BF16 ||
         block_function(type) != NULL;
}

static const char dequantizable_list[] =
    "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K";

static md_status check_request(uint32_t type, uint64_t n, md_error *err) {
  const char *name = md_ggml_type_name(type);
  if (!name)
    return md_fail(err, MD_E_UNSUPPORTED, "unknown ggml type %" PRIu32 " (dequantized: %s)",
                   type, dequantizable_list);
  if (!md_ggml_type_dequantizable(type))
    return md_fail(err, MD_E_UNSUPPORTED,
                   "ggml type %s cannot be dequantized here (dequantized: %s)", name,
                   dequantizable_list);
  uint32_t block = md_ggml_block_elements(type);
  if (n % block != 0)
    return md_fail(err, MD_E_INVALID,
                   "%" PRIu64 " elements of ggml type %s are not whole blocks of %" PRIu32, n,
                   name, block);
  return MD_OK;
}

/* Converts whole blocks; `n` has been checked. */
static void dequantize_checked(uint32_t type, const uint8_t *src, uint64_t n, float *out) {
  switch (type) {
    case MD_GGML_F32:
      memcpy(out, src, n * sizeof *out);
      return;
    case MD_GGML_F16:
      for (uint64_t i = 0; i < n; i++) out[i] = half_at(src + 2 * i);
      return;
    case MD_GGML_BF16:
      for (uint64_t i = 0; i < n; i++) {
        uint16_t bits;
        memcpy(&bits, src + 2 * i, sizeof bits);
        out[i] = md_bf16_to_f32(bits);
      }
      return;
    default: break;
  }
  block_fn fn = block_function(type);
  uint32_t elements = md_ggml_block_elements(type), bytes = md_ggml_block_bytes(type);
  for (uint64_t blk = 0; blk < n / elements; blk++) fn(src + blk * bytes, out + blk * elements);
}

md_status md_ggml_dequantize(uint32_t type, const void *blocks, uint64_t n, float *out,
                             md_error *err) {
  md_status status = check_request(type, n, err);
  if (status != MD_OK) return status;
  dequantize_checked(type, blocks, n, out);
  return MD_OK;
}

uint16_t md_f32_to_bf16_rne(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0; /* NaN, as torch */
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

md_status md_ggml_dequantize_bf16(uint32_t type, const void *blocks, uint64_t n,
                                  uint16_t *out, md_error *err) {
  md_status status = check_request(type, n, err);
  if (status != MD_OK) return status;
  /* Through a float32 buffer of whole blocks (QK_K is a multiple of every
   * block size here). */
  enum { CHUNK = 16 * QK_K };
  float buffer[CHUNK];
  const uint8_t *src = blocks;
  uint64_t per_chunk = CHUNK / md_ggml_block_elements(type) * md_ggml_block_bytes(type);
  for (uint64_t done = 0; done < n; done += CHUNK) {
    uint64_t count = n - done < CHUNK ? n - done : CHUNK;
    dequantize_checked(type, src, count, buffer);
    for (uint64_t i = 0; i < count; i++) out[done + i] = md_f32_to_bf16_rne(buffer[i]);
    src += per_chunk;
  }
  return MD_OK;
}
