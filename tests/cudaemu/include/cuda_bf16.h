/* CUDA emulation (tests/cudaemu): __nv_bfloat16 and its conversions. */
#ifndef MD_CUDAEMU_BF16_H
#define MD_CUDAEMU_BF16_H

#include <cstdint>
#include <cstring>

struct __nv_bfloat16 {
  uint16_t bits;
};

inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.bits; }

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{(uint16_t)((x >> 16) | 0x40u)}; /* NaN */
  x += 0x7fffu + ((x >> 16) & 1u);
  return __nv_bfloat16{(uint16_t)(x >> 16)};
}

#endif
