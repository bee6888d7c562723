// The decode step's matrix-vector product y = W x + b, W [rows, cols] in
// its file dtype (F32, F16, BF16), x and y f32, fp32 accumulation. It is
// bound by memory bandwidth: every weight byte is read once, with 16-byte
// loads (8 BF16/F16 or 4 F32 values), converted in registers.
//
// A block of 8 warps covers 8 / split rows; the `split` warps of a row take
// consecutive slices of its columns (more warps for matrices with few rows,
// so that enough loads are in flight to fill the memory system) and their
// sums are added in slice order. Each lane keeps kUnroll independent loads
// in flight. Shapes whose rows are not a whole number of 16-byte vectors
// (or misaligned pointers) take a scalar kernel.
#include "kernels/cuda/common.cuh"

namespace md_cuda {

constexpr int kWarps = 8;   // warps per block
constexpr int kUnroll = 4;  // 16-byte weight loads in flight per lane

// acc += w . x over one 16-byte weight vector; x holds the matching floats.
template <int DT>
__device__ __forceinline__ float dot_vec(uint4 w, const float4 *x, float acc) {
  if (DT == MD_DTYPE_F32) {
    float4 a = __ldg(x);
    acc = fmaf(__uint_as_float(w.x), a.x, acc);
    acc = fmaf(__uint_as_float(w.y), a.y, acc);
    acc = fmaf(__uint_as_float(w.z), a.z, acc);
    acc = fmaf(__uint_as_float(w.w), a.w, acc);
    return acc;
  }
  float4 a = __ldg(x), b = __ldg(x + 1);
  // Little-endian: the low half of each 32-bit word is the earlier element.
  if (DT == MD_DTYPE_BF16) {
    acc = fmaf(__uint_as_float(w.x << 16), a.x, acc);
    acc = fmaf(__uint_as_float(w.x & 0xffff0000u), a.y, acc);
    acc = fmaf(__uint_as_float(w.y << 16), a.z, acc);
    acc = fmaf(__uint_as_float(w.y & 0xffff0000u), a.w, acc);
    acc = fmaf(__uint_as_float(w.z << 16), b.x, acc);
    acc = fmaf(__uint_as_float(w.z & 0xffff0000u), b.y, acc);
    acc = fmaf(__uint_as_float(w.w << 16), b.z, acc);
    acc = fmaf(__uint_as_float(w.w & 0xffff0000u), b.w, acc);
    return acc;
  }
  acc = fmaf(f16_bits_to_f32(w.x & 0xffffu), a.x, acc);
  acc = fmaf(f16_bits_to_f32(w.x >> 16), a.y, acc);
  acc = fmaf(f16_bits_to_f32(w.y & 0xffffu), a.z, acc);
  acc = fmaf(f16_bits_to_f32(w.y >> 16), a.w, acc);
  acc = fmaf(f16_bits_to_f32(w.z & 0xffffu), b.x, acc);
  acc = fmaf(f16_bits_to_f32(w.z >> 16), b.y, acc);
  acc = fmaf(f16_bits_to_f32(w.w & 0xffffu), b.z, acc);
  acc = fmaf(f16_bits_to_f32(w.w >> 16), b.w, acc);
  return acc;
}

// Adds the `split` partial sums of each row (slice order) and the bias.
__device__ __forceinline__ void finish_row(float acc, int split, bool active, int64_t row,
                                           float *y, const float *bias) {
  __shared__ float partial[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  acc = warp_sum(acc);
  if (lane == 0) partial[warp] = acc;
  __syncthreads();
  if (active && lane == 0 && warp % split == 0) {
    float sum = partial[warp];
    for (int p = 1; p < split; p++) sum += partial[warp + p];
    y[row] = bias ? sum + bias[row] : sum;
  }
}

// W as 16-byte vectors: vecs_per_row of them per row; x as float4s.
template <int DT>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_vec_kernel(float *y, const uint4 *w, int64_t rows, int64_t vecs_per_row,
                    const float4 *x, const float *bias, int split) {
  constexpr int x_per_vec = DT == MD_DTYPE_F32 ? 1 : 2;  // float4s of x per weight vector
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t row = (int64_t)blockIdx.x * (kWarps / split) + warp / split;
  const bool active = row < rows;  // no early return: finish_row has a barrier
  float acc = 0.0f;
  if (active) {
    const int part = warp % split;
    const int64_t per_part = (vecs_per_row + split - 1) / split;
    const int64_t begin = part * per_part;
    const int64_t end = begin + per_part < vecs_per_row ? begin + per_part : vecs_per_row;
    const uint4 *wr = w + row * vecs_per_row;
    int64_t v = begin + lane;
    for (; v + 32 * (kUnroll - 1) < end; v += 32 * kUnroll) {
      uint4 wv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; u++) wv[u] = __ldg(wr + v + 32 * u);
#pragma unroll
      for (int u = 0; u < kUnroll; u++) acc = dot_vec<DT>(wv[u], x + (v + 32 * u) * x_per_vec, acc);
    }
    for (; v < end; v += 32) acc = dot_vec<DT>(__ldg(wr + v), x + v * x_per_vec, acc);
  }
  finish_row(acc, split, active, row, y, bias);
}

// Any shape and alignment: one warp per row, element by element.
__global__ void __launch_bounds__(kWarps * 32)
    gemv_scalar_kernel(float *y, const void *w, md_dtype dtype, int64_t rows, int64_t cols,
                       const float *x, const float *bias) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t row = (int64_t)blockIdx.x * kWarps + warp;
  const bool active = row < rows;
  float acc = 0.0f;
  if (active)
    for (int64_t c = lane; c < cols; c += 32)
      acc = fmaf(weight_at(w, dtype, (size_t)row * (size_t)cols + (size_t)c), x[c], acc);
  finish_row(acc, 1, active, row, y, bias);
}

// Warps per row: enough warps in total to keep loads in flight on a large
// GPU (a 256-row K projection alone would occupy 32 blocks).
inline int split_for(int64_t rows) {
  if (rows >= 8192) return 1;
  if (rows >= 2048) return 2;
  if (rows >= 512) return 4;
  return 8;
}

}  // namespace md_cuda

using namespace md_cuda;

extern "C" void md_cuda_gemv(md_cuda_ctx *ctx, float *y, const void *w, md_dtype dtype,
                             int64_t rows, int64_t cols, const float *x, const float *bias) {
  if (rows <= 0 || cols <= 0) return;
  const int per_vec = dtype == MD_DTYPE_F32 ? 4 : 8;
  const bool aligned = ((uintptr_t)w % 16 == 0) && ((uintptr_t)x % 16 == 0);
  if (!aligned || cols % per_vec != 0) {
    unsigned blocks = (unsigned)((rows + kWarps - 1) / kWarps);
    MD_LAUNCH(ctx, gemv_scalar_kernel, dim3(blocks), kWarps * 32, 0, y, w, dtype, rows, cols, x,
              bias);
    return;
  }
  const int split = split_for(rows);
  const int64_t rows_per_block = kWarps / split;
  const unsigned blocks = (unsigned)((rows + rows_per_block - 1) / rows_per_block);
  const uint4 *wv = static_cast<const uint4 *>(w);
  const float4 *xv = reinterpret_cast<const float4 *>(x);
  const int64_t vecs = cols / per_vec;
  switch (dtype) {
  case MD_DTYPE_F32:
    MD_LAUNCH(ctx, gemv_vec_kernel<MD_DTYPE_F32>, dim3(blocks), kWarps * 32, 0, y, wv, rows, vecs,
              xv, bias, split);
    break;
  case MD_DTYPE_F16:
    MD_LAUNCH(ctx, gemv_vec_kernel<MD_DTYPE_F16>, dim3(blocks), kWarps * 32, 0, y, wv, rows, vecs,
              xv, bias, split);
    break;
  case MD_DTYPE_BF16:
    MD_LAUNCH(ctx, gemv_vec_kernel<MD_DTYPE_BF16>, dim3(blocks), kWarps * 32, 0, y, wv, rows, vecs,
              xv, bias, split);
    break;
  }
}
