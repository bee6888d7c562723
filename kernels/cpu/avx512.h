/* The CPU back end's AVX-512 kernels (kernels/cpu/avx512.c): the same
 * contracts as the AVX2 ones in matvec.c, vmath.c, attn_decode.c and attn_prefill.c, 16 floats per
 * register and masked loads and stores for every remainder, so no scalar
 * tail and no call out of the file. That last property is what lets
 * tests/kernels/avx512_emulated run this very file in an emulated AVX-512
 * CPU on machines without one: the file must stay freestanding (no libc,
 * no libm, no OpenMP). The dispatchers in matvec.c and vmath.c call these
 * when md_cpu_detect_isa says MD_CPU_ISA_AVX512.
 *
 * Needs AVX-512 F, BW, VL and DQ (x86-64-v4) besides AVX2, FMA and F16C:
 * BW and VL for the masked 16-bit loads of F16/BF16 weight tails. */
#ifndef MD_KERNELS_CPU_AVX512_H
#define MD_KERNELS_CPU_AVX512_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How far ahead the matrix-vector kernels (these and matvec.c's AVX2 ones)
 * prefetch each stream of 16-bit weights, in bytes: the rows of a bf16
 * matrix are too short for the hardware prefetchers to run far enough
 * ahead. On an Intel Xeon's AVX-512 path 1,024 bytes measured best (bf16
 * rows about 1.15x as fast as without, level with f32 rows; 256, 512 and
 * 2,048 less). f32 rows stream at the limit without it and go without. A
 * prefetch never faults, so reading ahead of the last row is harmless.
 *
 * On an AMD Zen 5 twice as far was better (bf16 rows about 1.02x and
 * decode steps about 1.04x as fast as with 1,024). The _far kernels below
 * prefetch MD_MATVEC_PREFETCH_FAR_BYTES ahead; md_cpu_matvec runs them on
 * an AMD Zen 5 or later (md_cpu_amd_zen5_or_later_once), these on the
 * others: a Zen 4 was measured with these. */
#define MD_MATVEC_PREFETCH_BYTES 1024
#define MD_MATVEC_PREFETCH_FAR_BYTES 2048

/* y[r] = sum_c W[r, c] x[c] (+ bias[r]) for r in [r0, r1); W row-major
 * [*, cols] in F32, F16 or BF16 bits; bias may be NULL. fp32 FMA
 * accumulation; the weight conversions are exact. */
void md_avx512_matvec_f32(float *y, const float *w, const float *x, int64_t r0, int64_t r1,
                          int64_t cols, const float *bias);
void md_avx512_matvec_f16(float *y, const uint16_t *w, const float *x, int64_t r0, int64_t r1,
                          int64_t cols, const float *bias);
void md_avx512_matvec_bf16(float *y, const uint16_t *w, const float *x, int64_t r0, int64_t r1,
                           int64_t cols, const float *bias);
/* The same with the 16-bit weights prefetched MD_MATVEC_PREFETCH_FAR_BYTES
 * ahead (the same bits). */
void md_avx512_matvec_f16_far(float *y, const uint16_t *w, const float *x, int64_t r0, int64_t r1,
                              int64_t cols, const float *bias);
void md_avx512_matvec_bf16_far(float *y, const uint16_t *w, const float *x, int64_t r0,
                               int64_t r1, int64_t cols, const float *bias);
/* The kernels above for nx vectors x + j * cols (j < nx) into y + j *
 * y_stride, rows [r0, r1): each (row, vector) has the bits the one-vector
 * kernel gives it for the same [r0, r1) (a batched decode step,
 * md_cpu_matvec_rows). */
void md_avx512_matvec_rows_f32(float *y, int64_t y_stride, const float *w, const float *x,
                               int64_t nx, int64_t r0, int64_t r1, int64_t cols, const float *bias);
void md_avx512_matvec_rows_f16(float *y, int64_t y_stride, const uint16_t *w, const float *x,
                               int64_t nx, int64_t r0, int64_t r1, int64_t cols, const float *bias);
void md_avx512_matvec_rows_bf16(float *y, int64_t y_stride, const uint16_t *w, const float *x,
                                int64_t nx, int64_t r0, int64_t r1, int64_t cols,
                                const float *bias);

/* dst[i] = src[i] widened to f32 for i < count; bf16 nonzero: BF16 bits,
 * else F16 bits. */
void md_avx512_to_f32(float *dst, const uint16_t *src, size_t count, int bf16);

/* In place: x = exp(x - max x) * (1 / sum); n >= 1. */
void md_avx512_softmax(float *x, int64_t n);

/* gate[i] = gate[i] / (1 + exp(-gate[i])) * up[i]. */
void md_avx512_silu_mul(float *gate, const float *up, size_t n);

/* The index of the first largest of v[0 .. n-1] as the loop "best = 0; for
 * each i, if v[i] > v[best] then best = i" finds it: NaNs are never chosen
 * (and v[0] NaN gives 0), and of equal values (-0 and +0 alike) the first. */
size_t md_avx512_argmax(const float *v, size_t n);

/* Decode attention's products for one KV head and a block of keys (see
 * md_cpu_decode_scores / md_cpu_decode_values in cpu_internal.h); hd a
 * multiple of 16. */
void md_avx512_decode_scores(float *scores, int64_t ld, const float *q, int group,
                             const float *keys, int64_t len, int hd, float scale);
void md_avx512_decode_values(float *out, const float *p, int64_t ld, int group,
                             const float *values, int64_t len, int hd);

/* Prefill attention's products for a tile of rows of one KV head (see
 * md_cpu_prefill_scores / md_cpu_prefill_values in cpu_internal.h); hd a
 * multiple of 16, keys packed by md_cpu_pack_keys. */
void md_avx512_prefill_scores(float *scores, int64_t ld, const float *const *q_rows,
                              const int64_t *visible, int64_t m, const float *packed_keys, int hd,
                              float scale);
void md_avx512_prefill_values(float *const *out_rows, const float *p, int64_t ld,
                              const int64_t *visible, int64_t m, const float *values, int hd);

/* One work item of the prompt's float32 GEMM (kernels/cpu/gemm_f32.h, which
 * plans the items and runs them on its threads): outputs [j0, j0 + 64)
 * (clipped to `rows`) of y[n, rows] += x[n, k] W[rows, k]^T over the K
 * block [c0, c0 + kc), x's rows [panel0 * MD_AVX512_GEMM_MR,
 * panel1 * MD_AVX512_GEMM_MR) (clipped to n). The first block (c0 == 0)
 * starts from the bias (or zero), later ones add to y. W in its file dtype
 * (md_dtype's values, repeated here so that the file stays freestanding);
 * w_scratch holds 64 * kc floats. Each output is one FMA chain over the
 * block's columns in order: the same bits as gemm_f32.c's AVX2 item. */
#define MD_AVX512_GEMM_MR 12
enum { MD_AVX512_F32 = 0, MD_AVX512_F16 = 1, MD_AVX512_BF16 = 2 };
typedef struct md_avx512_gemm_item {
  float *y;
  const float *x;
  const void *w;
  const float *bias; /* or NULL */
  float *w_scratch;
  int64_t n, rows, k, c0, kc, j0, panel0, panel1;
  int32_t dtype;
} md_avx512_gemm_item;
void md_avx512_gemm_f32_item(const md_avx512_gemm_item *it);

#endif
