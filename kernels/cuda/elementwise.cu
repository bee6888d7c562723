// Per-element and per-row kernels: embedding, RMSNorm, RoPE, KV-cache
// stores and compaction, SwiGLU, residual add, bias rows, dtype conversions and
// argmax.
//
// They compute what the CPU back end computes, in the same order where the
// order decides the rounding: products and sums that the CPU code writes as
// separate float operations use __fmul_rn / __fadd_rn here, so that nvcc
// does not contract them into fused multiply-adds (the CPU build does not
// contract: -std=c11 implies -ffp-contract=off).
#include "kernels/cuda/common.cuh"

namespace md_cuda {

__global__ void embed_kernel(float *x, const void *table, md_dtype dtype, const int32_t *tokens,
                             int64_t n, int64_t dim) {
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    size_t base = (size_t)tokens[i] * (size_t)dim;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
      x[i * dim + j] = weight_at(table, dtype, base + (size_t)j);
  }
}

// One block per row (rms_inverse, common.cuh). out may alias x: each
// thread reads the elements it later writes, and all reads of the sum
// happen before the barrier.
__global__ void rmsnorm_kernel(float *out, const float *x, const float *weight, int64_t n,
                               int64_t dim, float eps) {
  __shared__ double warp_part[32];
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const float *xr = x + row * dim;
    const float inv_rms = rms_inverse(xr, dim, eps, warp_part);
    float *outr = out + row * dim;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) outr[j] = rms_scale(xr[j], inv_rms, weight[j]);
    __syncthreads();  // warp_part is reused by the next row
  }
}

// One block per token; threads over (head, i) pairs of queries then keys
// (rope_pair, common.cuh).
__global__ void rope_kernel(float *q, float *k, const float *inv_freq, int64_t n, int n_heads,
                            int n_kv_heads, int head_dim, int64_t pos0, const int64_t *pos_dev) {
  const int half = head_dim / 2;
  const int pairs = (n_heads + n_kv_heads) * half;
  const int64_t start = pos_dev ? *pos_dev : pos0;
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x) {
    const float pos = (float)(start + t);
    for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
      int head = p / half, i = p % half;
      float *v = head < n_heads ? q + (t * n_heads + head) * head_dim
                                : k + (t * n_kv_heads + (head - n_heads)) * head_dim;
      rope_pair(v[i], v[i + half], pos, inv_freq[i], &v[i], &v[i + half]);
    }
  }
}

// grid (tokens, kv heads): one head's key and value rows per block.
__global__ void kv_store_kernel(float *cache, const float *key, const float *value, int n_kv_heads,
                                int head_dim, int64_t capacity, int64_t pos0, const int64_t *pos_dev,
                                int64_t n) {
  const int g = blockIdx.y;
  if (pos_dev) pos0 = *pos_dev;
  const size_t values_offset = (size_t)n_kv_heads * (size_t)capacity * (size_t)head_dim;
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x) {
    size_t src = ((size_t)t * n_kv_heads + g) * head_dim;
    size_t dst = ((size_t)g * capacity + (size_t)(pos0 + t)) * head_dim;
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
      cache[dst + d] = key[src + d];
      cache[values_offset + dst + d] = value[src + d];
    }
  }
}

// grid (rows, planes): row j of plane p of dst = row rows[j] (rows NULL: j)
// of plane p of src; a plane is one KV head's keys or values, dst_rows and
// src_rows the rows per plane. Eviction's compaction runs it twice, cache to
// scratch with the kept slots, then scratch to cache: the gather's reads and
// writes never overlap, whatever order the blocks run in.
__global__ void rows_gather_kernel(float *dst, int64_t dst_rows, const float *src, int64_t src_rows,
                                   const int64_t *rows, int64_t n, int head_dim) {
  const size_t plane = blockIdx.y;
  for (int64_t j = blockIdx.x; j < n; j += gridDim.x) {
    const int64_t from = rows ? rows[j] : j;
    const float *s = src + (plane * (size_t)src_rows + (size_t)from) * (size_t)head_dim;
    float *d = dst + (plane * (size_t)dst_rows + (size_t)j) * (size_t)head_dim;
    for (int i = threadIdx.x; i < head_dim; i += blockDim.x) d[i] = s[i];
  }
}

// silu(g) * u = g / (1 + exp(-g)) * u, as torch and the CPU back end.
__global__ void swiglu_kernel(float *gate, const float *up, size_t count) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
       i += (size_t)gridDim.x * blockDim.x) {
    float g = gate[i];
    gate[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

__global__ void add_kernel(float *x, const float *y, size_t count) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
       i += (size_t)gridDim.x * blockDim.x)
    x[i] = x[i] + y[i];
}

__global__ void fill_rows_kernel(float *y, const float *row, int64_t n, int64_t cols) {
  size_t count = (size_t)n * (size_t)cols;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
       i += (size_t)gridDim.x * blockDim.x)
    y[i] = row[i % (size_t)cols];
}

__global__ void to_bf16_kernel(uint16_t *dst, const float *src, size_t count) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = __bfloat16_as_ushort(__float2bfloat16_rn(src[i]));
}

__global__ void to_f16_kernel(uint16_t *dst, const float *src, size_t count, int *overflow) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
       i += (size_t)gridDim.x * blockDim.x) {
    __half h = __float2half_rn(src[i]);
    if (__hisinf(h) || __hisnan(h)) *overflow = 1;
    dst[i] = __half_as_ushort(h);
  }
}

__global__ void rows_to_f32_kernel(float *dst, const void *w, md_dtype dtype, int64_t cols,
                                   int64_t r0, int64_t r1) {
  size_t count = (size_t)(r1 - r0) * (size_t)cols, base = (size_t)r0 * (size_t)cols;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = weight_at(w, dtype, base + i);
}

// One block. "b beats a" when b is larger, or equal and earlier: the first
// index of the maximum, as torch.argmax and the CPU back end (for finite
// values; NaN logits give an unspecified index).
__device__ __forceinline__ bool beats(float bv, int64_t bi, float av, int64_t ai) {
  return bv > av || (bv == av && bi < ai);
}

// A thread's first largest of v[i] for i = begin, begin + stride, ... < n
// (its indices increase, so "strictly larger" keeps the first); INT64_MAX
// as the index when it has none, which loses every tie.
__device__ __forceinline__ void thread_first_max(const float *v, int64_t begin, int64_t n,
                                                 int64_t stride, float &bv, int64_t &bi) {
  bv = -INFINITY;
  bi = INT64_MAX;
  for (int64_t i = begin; i < n; i += stride)
    if (bi == INT64_MAX || v[i] > bv) {
      bv = v[i];
      bi = i;
    }
}

// The block's winner of its threads' (bv, bi) by "beats": the warps by
// shuffles, then thread 0 over the warps' winners; thread 0 holds it after.
// Every thread of the block calls it.
__device__ void block_first_max(float &bv, int64_t &bi) {
  __shared__ float best_v[32];
  __shared__ int64_t best_i[32];
  for (int offset = 16; offset > 0; offset >>= 1) {
    float ov = __shfl_xor_sync(kFullMask, bv, offset);
    int64_t oi = __shfl_xor_sync(kFullMask, bi, offset);
    if (beats(ov, oi, bv, bi)) {
      bv = ov;
      bi = oi;
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    best_v[warp] = bv;
    best_i[warp] = bi;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const int warps = (blockDim.x + 31) >> 5;
    for (int w = 1; w < warps; w++)
      if (beats(best_v[w], best_i[w], bv, bi)) {
        bv = best_v[w];
        bi = best_i[w];
      }
  }
}

// Each block finds the first largest of a grid-stride share of v; the
// last block to finish (a counter, reset by that block) reduces the
// blocks' winners. Whichever order blocks finish in, "beats" picks the
// same index.
__global__ void argmax_kernel(const float *v, int64_t n, int64_t *index, md_cuda_argmax_scratch s) {
  __shared__ bool last;
  float bv;
  int64_t bi;
  thread_first_max(v, blockIdx.x * (int64_t)blockDim.x + threadIdx.x, n,
                   (int64_t)gridDim.x * blockDim.x, bv, bi);
  block_first_max(bv, bi);
  if (threadIdx.x == 0) {
    s.block_value[blockIdx.x] = bv;
    s.block_index[blockIdx.x] = bi;
    __threadfence();  // the winner is visible before the count says so
    last = atomicAdd(s.done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last || threadIdx.x != 0) return;
  __threadfence();
  bv = s.block_value[0];
  bi = s.block_index[0];
  for (unsigned b = 1; b < gridDim.x; b++) {
    const float ov = ((volatile float *)s.block_value)[b];
    const int64_t oi = ((volatile int64_t *)s.block_index)[b];
    if (beats(ov, oi, bv, bi)) {
      bv = ov;
      bi = oi;
    }
  }
  *index = bi;
  *s.done = 0;
}

// index[r] = the first largest of row r of v [rows, cols]: a block a row
// (blockIdx.x + k * gridDim.x), the same choice as argmax_kernel's.
__global__ void argmax_rows_kernel(const float *v, int64_t rows, int64_t cols, int64_t *index) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float bv;
    int64_t bi;
    thread_first_max(v + r * cols, threadIdx.x, cols, blockDim.x, bv, bi);
    block_first_max(bv, bi);
    if (threadIdx.x == 0) index[r] = bi;
    __syncthreads();  // block_first_max's shared winners are reused by the next row
  }
}

}  // namespace md_cuda

using namespace md_cuda;

extern "C" void md_cuda_embed(md_cuda_ctx *ctx, float *x, const void *table, md_dtype dtype,
                              const int32_t *tokens, int64_t n, int64_t dim) {
  if (n <= 0 || dim <= 0) return;
  unsigned rows = n < 65536 ? (unsigned)n : 65536u;
  MD_LAUNCH(ctx, embed_kernel, dim3(rows), 256, 0, x, table, dtype, tokens, n, dim);
}

extern "C" void md_cuda_rmsnorm(md_cuda_ctx *ctx, float *out, const float *x, const float *weight,
                                int64_t n, int64_t dim, float eps) {
  if (n <= 0 || dim <= 0) return;
  unsigned rows = n < 65536 ? (unsigned)n : 65536u;
  MD_LAUNCH(ctx, rmsnorm_kernel, dim3(rows), 256, 0, out, x, weight, n, dim, eps);
}

extern "C" void md_cuda_rope(md_cuda_ctx *ctx, float *q, float *k, const float *inv_freq, int64_t n,
                             int n_heads, int n_kv_heads, int head_dim, int64_t pos0,
                             const int64_t *pos_dev) {
  if (n <= 0) return;
  unsigned rows = n < 65536 ? (unsigned)n : 65536u;
  MD_LAUNCH(ctx, rope_kernel, dim3(rows), 128, 0, q, k, inv_freq, n, n_heads, n_kv_heads, head_dim,
            pos0, pos_dev);
}

extern "C" void md_cuda_kv_store(md_cuda_ctx *ctx, float *cache, const float *key,
                                 const float *value, int n_kv_heads, int head_dim,
                                 int64_t capacity, int64_t pos0, const int64_t *pos_dev, int64_t n) {
  if (n <= 0) return;
  unsigned rows = n < 65536 ? (unsigned)n : 65536u;
  unsigned block = head_dim < 256 ? (unsigned)((head_dim + 31) / 32 * 32) : 256u;
  MD_LAUNCH(ctx, kv_store_kernel, dim3(rows, (unsigned)n_kv_heads), block, 0, cache, key, value,
            n_kv_heads, head_dim, capacity, pos0, pos_dev, n);
}

extern "C" void md_cuda_rows_gather(md_cuda_ctx *ctx, float *dst, int64_t dst_rows, const float *src,
                                    int64_t src_rows, const int64_t *rows, int64_t n, int planes,
                                    int head_dim) {
  if (n <= 0 || planes <= 0) return;
  unsigned grid = n < 65536 ? (unsigned)n : 65536u;
  unsigned block = head_dim < 256 ? (unsigned)((head_dim + 31) / 32 * 32) : 256u;
  MD_LAUNCH(ctx, rows_gather_kernel, dim3(grid, (unsigned)planes), block, 0, dst, dst_rows, src,
            src_rows, rows, n, head_dim);
}

extern "C" void md_cuda_swiglu(md_cuda_ctx *ctx, float *gate, const float *up, size_t count) {
  if (count == 0) return;
  MD_LAUNCH(ctx, swiglu_kernel, dim3(grid_for(count, 256)), 256, 0, gate, up, count);
}

extern "C" void md_cuda_add(md_cuda_ctx *ctx, float *x, const float *y, size_t count) {
  if (count == 0) return;
  MD_LAUNCH(ctx, add_kernel, dim3(grid_for(count, 256)), 256, 0, x, y, count);
}

extern "C" void md_cuda_fill_rows(md_cuda_ctx *ctx, float *y, const float *row, int64_t n,
                                  int64_t cols) {
  if (n <= 0 || cols <= 0) return;
  size_t count = (size_t)n * (size_t)cols;
  MD_LAUNCH(ctx, fill_rows_kernel, dim3(grid_for(count, 256)), 256, 0, y, row, n, cols);
}

extern "C" void md_cuda_to_half(md_cuda_ctx *ctx, uint16_t *dst, const float *src, size_t count,
                                md_dtype dtype, int *overflow) {
  if (count == 0) return;
  if (dtype == MD_DTYPE_BF16)
    MD_LAUNCH(ctx, to_bf16_kernel, dim3(grid_for(count, 256)), 256, 0, dst, src, count);
  else
    MD_LAUNCH(ctx, to_f16_kernel, dim3(grid_for(count, 256)), 256, 0, dst, src, count, overflow);
}

extern "C" void md_cuda_rows_to_f32(md_cuda_ctx *ctx, float *dst, const void *w, md_dtype dtype,
                                    int64_t cols, int64_t r0, int64_t r1) {
  if (r1 <= r0 || cols <= 0) return;
  size_t count = (size_t)(r1 - r0) * (size_t)cols;
  MD_LAUNCH(ctx, rows_to_f32_kernel, dim3(grid_for(count, 256)), 256, 0, dst, w, dtype, cols, r0,
            r1);
}

extern "C" void md_cuda_argmax(md_cuda_ctx *ctx, const float *v, int64_t n, int64_t *index,
                               const md_cuda_argmax_scratch *s) {
  if (n <= 0) return;
  int64_t blocks = (n + 4095) / 4096;  // at least 4 elements a thread
  if (blocks > MD_CUDA_ARGMAX_BLOCKS) blocks = MD_CUDA_ARGMAX_BLOCKS;
  MD_LAUNCH(ctx, argmax_kernel, dim3((unsigned)blocks), 1024, 0, v, n, index, *s);
}

extern "C" void md_cuda_argmax_rows(md_cuda_ctx *ctx, const float *v, int64_t rows, int64_t cols,
                                    int64_t *index) {
  if (rows <= 0 || cols <= 0) return;
  unsigned blocks = rows < 65536 ? (unsigned)rows : 65536u;
  MD_LAUNCH(ctx, argmax_rows_kernel, dim3(blocks), 1024, 0, v, rows, cols, index);
}
