/* The prompt's matrix products in float32 with AVX2 + FMA or AVX-512
 * (kernels/cpu/gemm_f32.c; the AVX-512 micro-kernel in avx512.c): the CPU
 * back end's GEMM for every prompt product on the avx2 kernel path, in
 * place of cblas_sgemm, and on the avx512 path when MEMDECAY_CPU_GEMM
 * asks for it (md_cpu_options.gemm). The
 * arithmetic is the float32 product HF computes (no rounding of the
 * activations or weights beyond float32; F16/BF16 weights widened
 * exactly): each output one FMA chain over K in a fixed order, so results
 * differ from sgemm's only by the order of the fp32 sums. `isa`
 * MD_CPU_ISA_AVX512 runs the AVX-512 micro-kernel (12 x 32), anything else
 * the AVX2 one (6 x 16): the same sums in the same order, the same bits.
 * Only called where md_cpu_facts has AVX2, FMA and F16C (the avx2 path or
 * above), with MD_CPU_ISA_AVX512 only where the avx512 path runs. */
#ifndef MD_KERNELS_CPU_GEMM_F32_H
#define MD_KERNELS_CPU_GEMM_F32_H

#include <stddef.h>
#include <stdint.h>

#include "base/tensor.h"
#include "kernels/cpu/cpu_internal.h"

/* Scratch size in floats: one thread's packed block of W for k columns
 * (the products take `threads` of them, one after another). */
size_t md_gemm_f32_w_floats(int64_t k);

/* Several products of one x, x read in place and every product's work in one
 * parallel region of `threads` OpenMP threads:
 *   outs[o].y[i, r] = outs[o].bias[r] + sum_c x[i, c] W_o[r, c]
 * for i < n, r < outs[o].rows: x [n, k] float32, W_o [rows, k] in its file
 * dtype (F32, F16 or BF16), bias [rows] or NULL, y [n, rows]. Every sum
 * runs over c in one order fixed by k alone (not by `threads`, the work
 * split or the other products), so each output has the same bits alone or
 * shared. 1 <= count <= MD_GEMM_F32_MAX_SHARED, n >= 1, k >= 1. */
#define MD_GEMM_F32_MAX_SHARED 4
typedef struct md_gemm_f32_out {
  float *y;
  const void *w;
  md_dtype dtype;
  const float *bias; /* or NULL */
  int64_t rows;
} md_gemm_f32_out;
void md_gemm_f32_shared(md_cpu_isa isa, int threads, const float *x, int64_t n, int64_t k,
                        const md_gemm_f32_out *outs, int count, float *w_scratch);

/* The MLP's gate and up products of one x, fused with SwiGLU, on the AVX2
 * micro-kernel: gate->y = silu(x W_gate^T + bias) * (x W_up^T + bias), the
 * bits of md_gemm_f32_shared on {gate, up} followed by md_cpu_silu_mul on
 * the avx2 path (the same sums; the same vector silu, vexp.h), without
 * storing the up product or reading both back. up->y is scratch: it holds
 * the up product's partial sums when K is blocked (above 1,024 columns)
 * and is undefined after. gate and up have the same rows (and dtype
 * need not match); n >= 1, k >= 1. */
void md_gemm_f32_swiglu(int threads, const float *x, int64_t n, int64_t k,
                        const md_gemm_f32_out *gate, const md_gemm_f32_out *up, float *w_scratch);

/* One product: md_gemm_f32_shared with count 1. */
void md_gemm_f32(md_cpu_isa isa, int threads, float *y, const float *x, const void *w,
                 md_dtype dtype, const float *bias, int64_t n, int64_t rows, int64_t k,
                 float *w_scratch);

#endif
