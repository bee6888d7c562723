/* The AVX2 exp and SiLU of the CPU back end, in one place for the
 * elementwise kernels (vmath.c: softmax, SiLU) and the float32 GEMM's fused
 * SwiGLU epilogue (gemm_f32.c), so that both give every element the same
 * bits. The exp is the Cephes single-precision algorithm (S. L. Moshier,
 * Cephes Math Library, expf.c): exp(x) = 2^n * exp(r), n = round(x / ln 2),
 * r = x - n ln 2 split into two parts for exactness, exp(r) by a degree-6
 * polynomial; worst 1.01 ulp against double over [-87.3, 88.3], 0 below
 * ln(FLT_MIN), NaN stays NaN (vmath.c's tests). Intrinsics only. */
#ifndef MD_KERNELS_CPU_VEXP_H
#define MD_KERNELS_CPU_VEXP_H

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define MD_VEXP_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

MD_VEXP_INLINE __m256 md_exp8(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.3762626647949f);
  const __m256 lo = _mm256_set1_ps(-87.3365447504f); /* ln(FLT_MIN): below it, 0 */
  /* n = x / ln 2 rounded to nearest by adding 1.5 * 2^23, whose float then
   * holds n in its low mantissa bits: 2^n is those bits shifted into the
   * exponent field (the constant's own bits shift out), plus the bias. */
  const __m256 round = _mm256_set1_ps(12582912.0f);
  __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  /* A NaN x passes through min and max (it is their second operand) and
   * every step after: the result is NaN. */
  __m256 v = _mm256_max_ps(lo, _mm256_min_ps(hi, x));
  __m256 t = _mm256_fmadd_ps(v, _mm256_set1_ps(1.44269504088896341f), round);
  __m256 n = _mm256_sub_ps(t, round);
  v = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), v);
  v = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), v);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, v, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, v, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, v, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, v, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, v, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(v, v), v);
  p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
  __m256i e = _mm256_add_epi32(_mm256_slli_epi32(_mm256_castps_si256(t), 23),
                               _mm256_set1_epi32(127 << 23));
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

/* SwiGLU's product: silu(g) * u = g / (1 + exp(-g)) * u, as HF's
 * F.silu(gate) * up computes it in float32. */
MD_VEXP_INLINE __m256 md_silu_mul8(__m256 g, __m256 u) {
  __m256 e = md_exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}
#endif

#endif
