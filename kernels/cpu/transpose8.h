/* An 8 x 8 float transpose in AVX registers, shared by the float32 GEMM's
 * weight packing on the AVX2 path (gemm_f32.c) and on the AVX-512 path
 * (avx512.c). Intrinsics only, so the freestanding avx512.c can include it;
 * compiled for AVX, it inlines into callers built for AVX2 or AVX-512. */
#ifndef MD_KERNELS_CPU_TRANSPOSE8_H
#define MD_KERNELS_CPU_TRANSPOSE8_H

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* r[0..7] (one row each, 8 columns) -> r[c] = column c (8 rows): pairs of
 * rows interleaved, then pairs of pairs, then the 128-bit halves swapped. */
__attribute__((target("avx"), always_inline)) static inline void md_transpose_8x8(__m256 r[8]) {
  __m256 t[8], s[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);     /* rows i, i+1: cols 0 1 | 4 5 */
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]); /* cols 2 3 | 6 7 */
  }
  for (int i = 0; i < 8; i += 4) {
    s[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);     /* col 0 | 4 of rows i..i+3 */
    s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee); /* col 1 | 5 */
    s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int c = 0; c < 4; c++) {
    r[c] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x20);
    r[4 + c] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x31);
  }
}
#endif

#endif
