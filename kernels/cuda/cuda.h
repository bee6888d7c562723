/* The CUDA back end: the kernel interface of kernels/kernels.h on an NVIDIA
 * GPU of compute capability 8.0 or newer (Ampere, Ada, Hopper; built for
 * sm_80 and sm_90 with PTX for later GPUs). It gives the CPU back end's
 * results up to float32 rounding, except where `gemm` below says otherwise.
 *
 * Memory. Weights are uploaded once (cudaMalloc, no managed memory) in their
 * file dtype; a tensor given twice (a tied LM head is the embedding) is
 * uploaded once. Norm weights and biases are converted to f32 on upload.
 * Activations (md_kbuf) and the KV cache are f32 device buffers in the
 * interface's layouts.
 *
 * Matrix products. Decode (n = 1) runs our matrix-vector kernel: the weight
 * in its file dtype with 16-byte loads, f32 activations, fp32 accumulation,
 * bias fused, over a grid of a few blocks per SM that loop over the rows;
 * it is bound by memory bandwidth. Prefill (n > 1) runs cuBLAS:
 *   MD_CUDA_GEMM_FAST (default): BF16 and F16 weights on tensor cores with
 *     fp32 accumulation; the f32 activations are rounded to the weight's
 *     dtype first (relative error up to 2^-8 for BF16, 2^-11 for F16 per
 *     element; about 2^-8 / sqrt(3) = 2e-3 relative per product for random
 *     signs), so prefill outputs, the KV cache and hence later logits and
 *     attention weights differ from the CPU's by about 1e-3 to 1e-2
 *     relative (tests/gpu/check.sh measures it). F16 activations overflow beyond 65504: the back end then
 *     fails (reported at sync) rather than return infinities. F32 weights
 *     run true fp32 SGEMM (no TF32).
 *   MD_CUDA_GEMM_EXACT: every dtype in fp32: weight tiles are converted to
 *     f32 and multiplied by cuBLAS's fp32 GEMM without TF32, so prefill
 *     matches the CPU back end to fp32 rounding (several times slower than
 *     FAST, still far faster than the CPU).
 *   MD_CUDA_GEMM_TF32: as FAST, and F32 weights use TF32 tensor cores
 *     (10-bit mantissa inputs).
 *
 * Attention. Decode, split-K over the cache ("flash decoding"): one kernel
 * per chunk of 32 keys and KV head loads the chunk's keys and values into
 * shared memory, scores them for the group's query heads and keeps the
 * chunk's softmax max, sum and partial output; a second combines the chunks
 * per head and, when capturing or hooked, turns each key's scores into its
 * softmax weights for every head and adds the mean or max over heads into
 * the capture buffer (one thread per key: no atomics, no n x n matrix).
 * Prefill is tiled (online softmax over 32-key tiles, O(n * head_dim)
 * memory) and writes each row's softmax max and sum; with a capture, a
 * second pass recomputes the scores tile by tile, p = exp(s - max) / sum,
 * and sums each key's column over query rows per head, then over heads. The
 * attention hook is supported for tests and diagnostics: rows are computed
 * into device memory and copied to the host (slow).
 *
 * Decode steps (kernels.h, step_begin). By default the operations between
 * step_begin and step_end are logged, then run fused (fuse.c: the norm in
 * the prologue of the products that read it, q/k/v and gate/up as one
 * product each, SwiGLU and the residual adds in the products' epilogues,
 * RoPE and the cache store inside attention: six kernels a layer instead
 * of about fifteen) and recorded once as a CUDA graph, replayed with one
 * launch in later steps; the graph reads the step's position (RoPE) and
 * cache slot (kv_store, attention) from device memory, so it serves steps
 * after evictions too, and decode attention's grids cover the cache's
 * capacity (blocks beyond the visible keys return at once). Fused or not,
 * recorded or not, the results are the same bits (the products' split of a
 * row among warps depends on the row's length only). `no_graphs` (or
 * MD_CUDA_GRAPHS=0) launches the operations one by one. On Hopper and later
 * the decode products are programmatic launches (PDL): each may start, and
 * prefetch its weights into L2, while the kernel before it finishes
 * (`no_pdl`, MD_CUDA_PDL=0: off). MD_CUDA_GEMV=rows runs the decode products
 * a warp per row instead of a few rows per block (gemv.cu), a variant kept
 * for measurement beside the default.
 *
 * Overlapped reads. buf_read_start copies on a second stream into pinned
 * memory, after an event recorded on the compute stream; compute work that
 * would write the buffer again waits for the copy's event.
 *
 * Errors. Every CUDA and cuBLAS call is checked; a failure records the
 * call, the kernel, the source file and line and the CUDA error text, and
 * later operations are skipped until it is reported (by sync, buf_read,
 * buf_read_finish or argmax). A kernel's fault surfaces at the next
 * synchronisation and names the last kernel queued; with sync_each_launch
 * (or MD_CUDA_SYNC=1 in the environment) every launch is synchronised so
 * the message names the kernel at fault. */
#ifndef MD_KERNELS_CUDA_CUDA_H
#define MD_KERNELS_CUDA_CUDA_H

#include "kernels/kernels.h"

typedef enum md_cuda_gemm {
  MD_CUDA_GEMM_FAST = 0,  /* tensor cores for BF16/F16 weights (see above) */
  MD_CUDA_GEMM_EXACT = 1, /* fp32 for every dtype: the CPU's results */
  MD_CUDA_GEMM_TF32 = 2,  /* FAST, and TF32 for F32 weights */
} md_cuda_gemm;

typedef struct md_cuda_options {
  int device;            /* CUDA device ordinal (cuda:N) */
  md_cuda_gemm gemm;     /* prefill matrix products */
  int sync_each_launch;  /* nonzero: synchronise after every kernel (slow) */
  int no_graphs;         /* nonzero: launch decode steps kernel by kernel
                            instead of recording them as CUDA graphs and
                            replaying them (also MD_CUDA_GRAPHS=0) */
  int no_pdl;            /* nonzero: no programmatic launches of the decode
                            products (also MD_CUDA_PDL=0) */
} md_cuda_options;

/* Creates a CUDA back end on device options->device (options may be NULL:
 * device 0, FAST). Fails with MD_E_DEVICE and a message that says why when
 * there is no usable device: no driver, no device, no device of that
 * ordinal, a compute capability below 8.0, or a failing CUDA call. */
md_status md_kernels_cuda_new(const md_cuda_options *options, md_kernels **k, md_error *err);

/* One line about the device in use, e.g. "cuda:0 NVIDIA H200, compute
 * capability 9.0, 132 SMs, 139.8 GiB". */
const char *md_kernels_cuda_describe(const md_kernels *k);

/* Kernel launches queued so far (a decode step's count tells how
 * launch-bound small models are; a replayed graph counts one). */
uint64_t md_kernels_cuda_launches(const md_kernels *k);

/* Kernels in the most recently replayed decode-step graph (0 before the
 * first): what one step launches on the GPU. */
uint64_t md_kernels_cuda_step_kernels(const md_kernels *k);

#endif
