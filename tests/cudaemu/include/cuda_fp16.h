/* CUDA emulation (tests/cudaemu): __half and its conversions, in software
 * (round to nearest even, subnormals, infinities and NaN as the hardware). */
#ifndef MD_CUDAEMU_FP16_H
#define MD_CUDAEMU_FP16_H

#include <cstdint>
#include <cstring>

struct __half {
  uint16_t bits;
};

inline __half __ushort_as_half(unsigned short bits) { return __half{bits}; }
inline unsigned short __half_as_ushort(__half h) { return h.bits; }
inline bool __hisinf(__half h) { return (h.bits & 0x7fffu) == 0x7c00u; }
inline bool __hisnan(__half h) { return (h.bits & 0x7c00u) == 0x7c00u && (h.bits & 0x3ffu) != 0; }

inline float __half2float(__half h) {
  uint32_t sign = (uint32_t)(h.bits & 0x8000u) << 16, exponent = (h.bits >> 10) & 0x1fu,
           mantissa = h.bits & 0x3ffu, bits;
  if (exponent == 0) {
    float magnitude = (float)mantissa * 5.9604644775390625e-08f; /* 2^-24 */
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) bits = sign | 0x7f800000u | (mantissa << 13);
  else bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline __half __float2half_rn(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t exponent = (x >> 23) & 0xffu, mantissa = x & 0x7fffffu;
  if (exponent == 0xffu) return __half{(uint16_t)(sign | 0x7c00u | (mantissa ? 0x200u : 0u))};
  int e = (int)exponent - 127 + 15;
  if (e >= 31) return __half{(uint16_t)(sign | 0x7c00u)};
  if (e <= 0) { /* a subnormal half, or zero */
    if (e < -10) return __half{sign};
    uint32_t full = mantissa | 0x800000u;
    int shift = 14 - e;
    uint32_t m = full >> shift, rest = full & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (m & 1u))) m++;
    return __half{(uint16_t)(sign | m)};
  }
  uint32_t h = (uint32_t)sign | ((uint32_t)e << 10) | (mantissa >> 13), rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++; /* a carry rounds up to the next binade */
  return __half{(uint16_t)h};
}

#endif
