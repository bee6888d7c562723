/* The matrix products with AVX-512 BF16 (kernels/cpu/gemm_bf16.c): the
 * prompt's GEMM, prefill attention's P V and the decode rows, the CPU back
 * end's "BF16 products" (md_cpu_options.bf16_gemm; on by default
 * for BF16 checkpoints on AMD Zen 4 and 5, kernels/device.c), for BF16
 * weights only. Not HF's arithmetic: the float32 activations are
 * rounded to bf16 (nearest even) before they are multiplied, as llama.cpp
 * does on such CPUs and as the CUDA back end's default tensor-core products
 * do, so results move by about 1e-3 relative against the float32 path.
 * Only called when md_cpu_facts.avx512_bf16 (and the AVX-512 path) hold. */
#ifndef MD_KERNELS_CPU_GEMM_BF16_H
#define MD_KERNELS_CPU_GEMM_BF16_H

#include <stddef.h>
#include <stdint.h>

/* Scratch sizes in 32-bit words: x rounded and packed (n rows, K columns),
 * and one thread's packed block of W for K columns (md_gemm_bf16 takes
 * `threads` of them, one after another). */
size_t md_gemm_bf16_x_words(int64_t n, int64_t k);
size_t md_gemm_bf16_w_words(int64_t k);

/* y[i, r] = bias[r] + sum_c bf16(x[i, c]) W[r, c] for i < n, r < rows:
 * x [n, k] float32, W [rows, k] bf16 bits, bias [rows] or NULL, y [n, rows];
 * the pairs of products summed in fp32 by vdpbf16ps, in an order fixed by
 * the shape (not by `threads`). n >= 1, k >= 1. */
void md_gemm_bf16(int threads, float *y, const float *x, const uint16_t *w, const float *bias,
                  int64_t n, int64_t rows, int64_t k, uint32_t *x_scratch,
                  uint32_t *w_scratch);

/* Several products of one x, x packed once and every product's work in one
 * parallel region: outs[o].y = x outs[o].w^T + outs[o].bias for o < count
 * (1 <= count <= MD_GEMM_BF16_MAX_SHARED), each W [rows, k]; every output
 * the same bits as md_gemm_bf16 gives it alone. */
#define MD_GEMM_BF16_MAX_SHARED 4
typedef struct md_gemm_bf16_out {
  float *y;
  const uint16_t *w;
  const float *bias; /* or NULL */
  int64_t rows;
} md_gemm_bf16_out;
void md_gemm_bf16_shared(int threads, const float *x, int64_t n, int64_t k,
                         const md_gemm_bf16_out *outs, int count, uint32_t *x_scratch,
                         uint32_t *w_scratch);

/* Prefill attention's P V with bf16 operands (--bf16-gemm; attention.c):
 * the softmax weights and the values rounded to bf16 (nearest even),
 * pairs of keys summed by vdpbf16ps. The weights themselves (the capture,
 * the hook) stay float32: only the attention output moves.
 *   md_bf16_pack_values: packed[j * hd + d] = bf16 pair (values[2j][d],
 *     values[2j + 1][d]) (the second 0 beyond n), for j < (n + 1) / 2:
 *     md_bf16_packed_values_words(n, hd) words;
 *   md_bf16_pack_row: dst[j] = bf16 pair (src[2j], src[2j + 1]) (the
 *     second 0 at an odd n) for j < (n + 1) / 2; dst may be src (a row of
 *     float weights becomes its first half of pair words, in place);
 *   md_bf16_prefill_values: out_rows[i][d] = sum over pairs j of row i's
 *     weights p[i * ld + j] (pair words) dotted with packed_values[j * hd
 *     + d], for d < hd (a multiple of 16), j < (largest visible[] of the
 *     row's block of 6 + 1) / 2: each row's pairs beyond its own visible
 *     keys must be zero, as the softmax leaves them. Each output one chain
 *     in a fixed order (pairs in order, in chunks, sums kept in out). */
size_t md_bf16_packed_values_words(int64_t n, int hd);
void md_bf16_pack_values(uint32_t *packed, const float *values, int64_t n, int hd);
void md_bf16_pack_row(uint32_t *dst, const float *src, int64_t n);
void md_bf16_prefill_values(float *const *out_rows, const uint32_t *p, int64_t ld,
                            const int64_t *visible, int64_t m, const uint32_t *packed_values,
                            int hd);

/* Decode rows with BF16 products (--bf16-gemm; md_cpu_matvec_rows_bf16):
 * y[j * y_stride + r] = bias[r] + sum_c bf16(x_j[c]) W[r, c] for r in
 * [r0, r1), j < nx; W [*, k] bf16 bits, xb the nx vectors rounded and
 * paired by md_bf16_pack_row, (k + 1) / 2 words each. Each (row, vector)
 * is one vdpbf16ps chain over 32 columns a step (the last < 32 masked),
 * reduced at the end: its bits depend on neither nx, nor [r0, r1), nor
 * the thread that runs it, so a batched decode step gives every sequence
 * the bits of its step alone. */
void md_bf16_rows(float *y, int64_t y_stride, const uint16_t *w, const uint32_t *xb,
                  int64_t nx, int64_t r0, int64_t r1, int64_t k, const float *bias);

#endif
