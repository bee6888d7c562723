#include "base/tensor.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void md_tensor_drop_pages(const md_tensor *t) {
  if (!t || !t->mapped || !t->data || t->nbytes == 0) return;
  long page_size = sysconf(_SC_PAGESIZE);
  if (page_size <= 0) return;
  uintptr_t page = (uintptr_t)page_size, start = (uintptr_t)t->data, end = start + t->nbytes;
  uintptr_t first = (start + page - 1) / page * page, last = end / page * page;
  if (last > first) (void)madvise((void *)first, last - first, MADV_DONTNEED);
}

size_t md_dtype_size(md_dtype dtype) {
  switch (dtype) {
    case MD_DTYPE_F32: return 4;
    case MD_DTYPE_F16: return 2;
    case MD_DTYPE_BF16: return 2;
  }
  return 0;
}

const char *md_dtype_name(md_dtype dtype) {
  switch (dtype) {
    case MD_DTYPE_F32: return "F32";
    case MD_DTYPE_F16: return "F16";
    case MD_DTYPE_BF16: return "BF16";
  }
  return "?";
}

/* IEEE 754 binary16 -> binary32, exact for every bit pattern: 1 sign bit,
 * 5 exponent bits (bias 15), 10 fraction bits.  Normal numbers rebias the
 * exponent to 127; subnormals (exponent 0) are normalised by shifting the
 * fraction up until its leading one reaches the hidden-bit position; inf and
 * NaN (exponent 31) keep their fraction, so NaN payloads and the quiet bit
 * survive as numpy's npy_half_to_float keeps them. */
float md_f16_to_f32(uint16_t bits) {
  uint32_t sign = (uint32_t)(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t fraction = bits & 0x03ffu;
  uint32_t out;
  if (exponent == 0x1fu) {
    out = sign | 0x7f800000u | (fraction << 13);
  } else if (exponent != 0) {
    out = sign | ((exponent + 127u - 15u) << 23) | (fraction << 13);
  } else if (fraction == 0) {
    out = sign;
  } else {
    /* value = fraction * 2^-24; move the leading one to bit 10. */
    int32_t unbiased = -14;
    while (!(fraction & 0x0400u)) {
      fraction <<= 1;
      unbiased--;
    }
    fraction &= 0x03ffu;
    out = sign | ((uint32_t)(unbiased + 127) << 23) | (fraction << 13);
  }
  float value;
  memcpy(&value, &out, sizeof value);
  return value;
}
