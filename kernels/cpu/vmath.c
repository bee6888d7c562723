/* Elementwise fp32 maths: softmax, SiLU and a running sum (the AVX-512 versions are in
 * avx512.c). The AVX2 exp (vexp.h) is the Cephes single-precision
 * algorithm, within 2 ulp of the correctly rounded value over the normal
 * range, like the SLEEF exp that torch uses on the CPU. The portable path
 * calls libm's expf. */
#include <math.h>

#include "kernels/cpu/avx512.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/vexp.h"

#if defined(__x86_64__) || defined(__i386__)
#define MD_HAVE_X86 1
#include <immintrin.h>
#define MD_AVX2 __attribute__((target("avx2,fma,f16c")))
#else
#define MD_HAVE_X86 0
#endif

#if MD_HAVE_X86
MD_AVX2 static void softmax_avx2(float *x, int64_t n) {
  int64_t n8 = n & ~(int64_t)7, i;
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  for (i = 0; i < n8; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
  float lanes[8], max = -INFINITY;
  _mm256_storeu_ps(lanes, vmax);
  for (int l = 0; l < 8; l++) max = lanes[l] > max ? lanes[l] : max;
  for (; i < n; i++) max = x[i] > max ? x[i] : max;

  __m256 vsum = _mm256_setzero_ps(), shift = _mm256_set1_ps(max);
  for (i = 0; i < n8; i += 8) {
    __m256 e = md_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), shift));
    _mm256_storeu_ps(x + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  _mm256_storeu_ps(lanes, vsum);
  float sum = 0.0f;
  for (int l = 0; l < 8; l++) sum += lanes[l];
  for (; i < n; i++) {
    x[i] = expf(x[i] - max);
    sum += x[i];
  }
  __m256 inv = _mm256_set1_ps(1.0f / sum);
  for (i = 0; i < n8; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
  for (; i < n; i++) x[i] *= 1.0f / sum;
}

MD_AVX2 static void silu_mul_avx2(float *gate, const float *up, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(gate + i, md_silu_mul8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) { /* the last < 8 through the same vector code, so that every
                  element has the same bits as in the GEMM's fused epilogue */
    float g[8] = {0}, u[8] = {0}, out[8];
    for (size_t j = 0; i + j < n; j++) g[j] = gate[i + j], u[j] = up[i + j];
    _mm256_storeu_ps(out, md_silu_mul8(_mm256_loadu_ps(g), _mm256_loadu_ps(u)));
    for (size_t j = 0; i + j < n; j++) gate[i + j] = out[j];
  }
}
#endif

static void softmax_portable(float *x, int64_t n) {
  float max = -INFINITY, sum = 0.0f;
  for (int64_t i = 0; i < n; i++) max = x[i] > max ? x[i] : max;
  for (int64_t i = 0; i < n; i++) {
    x[i] = expf(x[i] - max);
    sum += x[i];
  }
  float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

void md_cpu_softmax(md_cpu_isa isa, float *x, int64_t n) {
#if defined(__x86_64__)
  if (isa == MD_CPU_ISA_AVX512) {
    md_avx512_softmax(x, n);
    return;
  }
#endif
#if MD_HAVE_X86
  if (isa == MD_CPU_ISA_AVX2) {
    softmax_avx2(x, n);
    return;
  }
#endif
  (void)isa;
  softmax_portable(x, n);
}

#if MD_HAVE_X86
MD_AVX2 static void add_into_avx2(float *sum, const float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(sum + i, _mm256_add_ps(_mm256_loadu_ps(sum + i), _mm256_loadu_ps(x + i)));
  for (; i < n; i++) sum[i] += x[i];
}
#endif

void md_cpu_add_into(md_cpu_isa isa, float *sum, const float *x, int64_t n) {
#if MD_HAVE_X86
  /* Bound by memory, not by the vector width: the AVX-512 path uses this too. */
  if (isa >= MD_CPU_ISA_AVX2) {
    add_into_avx2(sum, x, n);
    return;
  }
#endif
  (void)isa;
  for (int64_t i = 0; i < n; i++) sum[i] += x[i];
}

void md_cpu_silu_mul(md_cpu_isa isa, float *gate, const float *up, size_t n) {
#if defined(__x86_64__)
  if (isa == MD_CPU_ISA_AVX512) {
    md_avx512_silu_mul(gate, up, n);
    return;
  }
#endif
#if MD_HAVE_X86
  if (isa == MD_CPU_ISA_AVX2) {
    silu_mul_avx2(gate, up, n);
    return;
  }
#endif
  (void)isa;
  for (size_t i = 0; i < n; i++) gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

size_t md_cpu_argmax(md_cpu_isa isa, const float *v, size_t n) {
#if defined(__x86_64__)
  if (isa == MD_CPU_ISA_AVX512) return md_avx512_argmax(v, n);
#endif
  (void)isa;
  size_t best = 0;
  for (size_t i = 1; i < n; i++)
    if (v[i] > v[best]) best = i;
  return best;
}
