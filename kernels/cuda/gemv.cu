// The decode step's matrix-vector products, y = W x + b, W [rows, cols] in
// its file dtype (F32, F16, BF16), x and y f32, fp32 accumulation. They are
// bound by memory bandwidth: every weight byte is read once, with 16-byte
// loads (8 BF16/F16 or 4 F32 values), converted in registers.
//
// One kernel serves every product of a decode step (md_cuda_gemv_args):
// up to three matrices of one input in one launch (their rows
// concatenated: q/k/v, gate/up), optionally the RMSNorm of the input
// computed by every block into shared memory first (the norm that feeds
// the product, so its output need not make a round trip through a launch
// of its own), and an epilogue: none, the residual add x += y, or SwiGLU
// (gate = silu(gate) * up, a block holding the same rows of both).
//
// A block of 8 warps covers 8 / split rows; the `split` warps of a row take
// consecutive slices of its columns (split_for: more warps for long rows,
// so that enough loads are in flight to fill the memory system) and their
// sums are added in slice order. Each lane keeps kUnroll independent loads
// in flight. Shapes whose rows are not a whole number of 16-byte vectors
// (or misaligned pointers) take a scalar kernel.
//
// On Hopper and later the launch may be programmatic (md_cuda_ctx.pdl,
// PDL): the kernel starts while the one before it finishes, prefetches its
// block's weight rows into L2 (they do not depend on the earlier kernel)
// and waits for the earlier kernel's results (griddepcontrol.wait) before
// it reads x or writes anything.
//
// The results are bit-identical whichever way a product is launched: the
// norm is rmsnorm_kernel's code (md_cuda::rms_inverse and rms_scale), and
// x is the same floats whether read from global or shared memory.
#include "kernels/cuda/common.cuh"

namespace md_cuda {

constexpr int kWarps = 8;   // warps per block
constexpr int kUnroll = 4;  // 16-byte weight loads in flight per lane

// acc += w . x over one 16-byte weight vector; x holds the matching floats.
template <int DT, bool SMEM_X>
__device__ __forceinline__ float dot_vec(uint4 w, const float4 *x, float acc) {
  if (DT == MD_DTYPE_F32) {
    float4 a = SMEM_X ? *x : __ldg(x);
    acc = fmaf(__uint_as_float(w.x), a.x, acc);
    acc = fmaf(__uint_as_float(w.y), a.y, acc);
    acc = fmaf(__uint_as_float(w.z), a.z, acc);
    acc = fmaf(__uint_as_float(w.w), a.w, acc);
    return acc;
  }
  float4 a = SMEM_X ? x[0] : __ldg(x), b = SMEM_X ? x[1] : __ldg(x + 1);
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

// Which matrix a row of the concatenation belongs to, and its row there.
__device__ __forceinline__ int matrix_of(const md_cuda_gemv_args &a, int64_t row, int64_t *local) {
  int m = 0;
  while (m + 1 < a.count && row >= a.rows[m]) row -= a.rows[m++];
  *local = row;
  return m;
}

// The row a warp works on in a group of rows (a block's share of one
// round): in the SwiGLU layout a group's first half of row slots are gate
// rows r0.., its second half the same rows of up.
__device__ __forceinline__ int64_t row_of_slot(const md_cuda_gemv_args &a, int64_t group, int slot,
                                               int slots) {
  if (a.epilogue == MD_CUDA_GEMV_SWIGLU) {
    const int half = slots / 2;
    const int64_t r = group * half + slot % half;
    return r < a.rows[0] ? (slot < half ? r : a.rows[0] + r) : -1;
  }
  const int64_t r = group * slots + slot;
  return r < a.total_rows ? r : -1;
}

__device__ __forceinline__ void prefetch_l2(const void *p) {
#if defined(__CUDA_ARCH__)
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#else
  (void)p;
#endif
}

// x_s = RMSNorm(a.x) (rmsnorm's bits), computed by the whole block; block 0
// also writes it to a.norm_out. Ends with a barrier.
__device__ __forceinline__ void normalise_into(const md_cuda_gemv_args &a, float *x_s,
                                               double *norm_part) {
  const float inv_rms = rms_inverse(a.x, a.cols, a.eps, norm_part);
  for (int64_t j = threadIdx.x; j < a.cols; j += blockDim.x) {
    const float v = rms_scale(a.x[j], inv_rms, a.norm_weight[j]);
    x_s[j] = v;
    if (a.norm_out && blockIdx.x == 0) a.norm_out[j] = v;
  }
  __syncthreads();
}

// A row's result y (its sum, bias not yet added) of matrix m, local row r:
// written to y[m] and, with the residual epilogue, added into the residual.
__device__ __forceinline__ void store_row(const md_cuda_gemv_args &a, int m, int64_t r, float sum) {
  const float y = a.bias[m] ? sum + a.bias[m][r] : sum;
  a.y[m][r] = y;
  if (a.epilogue == MD_CUDA_GEMV_RESIDUAL) a.residual[r] = a.residual[r] + y;
}

// The SwiGLU epilogue of row r from the gate and up sums (bias not yet
// added): up into y[1], silu(gate) * up into y[0].
__device__ __forceinline__ void store_swiglu(const md_cuda_gemv_args &a, int64_t r, float g, float u) {
  if (a.bias[0]) g = g + a.bias[0][r];
  if (a.bias[1]) u = u + a.bias[1][r];
  a.y[1][r] = u;
  a.y[0][r] = g / (1.0f + expf(-g)) * u;  // swiglu_kernel's expression
}

// The epilogue of a group's row slots, from the warps' partial sums.
__device__ __forceinline__ void finish_rows(const md_cuda_gemv_args &a, int64_t group,
                                           const float *partial, int split, int slots) {
  const int t = threadIdx.x;
  if (a.epilogue == MD_CUDA_GEMV_SWIGLU) {
    const int half = slots / 2;
    if (t >= half) return;
    const int64_t r = group * half + t;
    if (r >= a.rows[0]) return;
    float g = partial[t * split], u = partial[(t + half) * split];
    for (int p = 1; p < split; p++) g += partial[t * split + p];
    for (int p = 1; p < split; p++) u += partial[(t + half) * split + p];
    store_swiglu(a, r, g, u);
    return;
  }
  if (t >= slots) return;
  const int64_t row = row_of_slot(a, group, t, slots);
  if (row < 0) return;
  int64_t local;
  const int m = matrix_of(a, row, &local);
  float sum = partial[t * split];
  for (int p = 1; p < split; p++) sum += partial[t * split + p];
  store_row(a, m, local, sum);
}

// W as 16-byte vectors, x as float4s (from shared memory when NORM: the
// normalised input). A block works through groups of rows blockIdx.x,
// blockIdx.x + gridDim.x, ... (a grid of a few blocks per SM): the norm is
// computed once per block, not once per group.
template <int DT, bool NORM>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_vec_kernel(md_cuda_gemv_args a, int split, int64_t groups) {
  constexpr int per_vec = DT == MD_DTYPE_F32 ? 4 : 8;
  constexpr int x_per_vec = per_vec / 4;  // float4s of x per weight vector
  MD_DYNAMIC_SMEM(float, x_s);            // NORM: [cols]
  __shared__ float partial[kWarps];
  __shared__ double norm_part[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, slots = kWarps / split;
  const int64_t vecs_per_row = a.cols / per_vec;
  const int part = warp % split;
  const int64_t per_part = (vecs_per_row + split - 1) / split;
  const int64_t begin = part * per_part;
  const int64_t end = begin + per_part < vecs_per_row ? begin + per_part : vecs_per_row;
  // The warp's slice of its row in a group, or NULL.
  auto slice = [&](int64_t group) -> const uint4 * {
    const int64_t row = row_of_slot(a, group, warp / split, slots);
    if (row < 0) return nullptr;
    int64_t local;
    const int m = matrix_of(a, row, &local);
    return static_cast<const uint4 *>(a.w[m]) + local * vecs_per_row;
  };
  allow_dependents();
  if (a.prefetch) {  // the first group's weights, a lane per 128-byte line
    const uint4 *wr = slice(blockIdx.x);
    if (wr)
      for (int64_t v = begin + 8 * lane; v < end; v += 8 * 32) prefetch_l2(wr + v);
  }
  wait_for_previous_grid();

  const float4 *x;
  if (NORM) {
    normalise_into(a, x_s, norm_part);
    x = reinterpret_cast<const float4 *>(x_s);
  } else {
    x = reinterpret_cast<const float4 *>(a.x);
  }
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const uint4 *wr = slice(group);
    float acc = 0.0f;
    if (wr) {
      // kUnroll loads in flight, the last round's predicated: a lane adds
      // its vectors v = begin + lane + 32 i in increasing order either way.
      for (int64_t v = begin + lane; v < end; v += 32 * kUnroll) {
        uint4 wv[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; u++)
          if (v + 32 * u < end) wv[u] = __ldg(wr + v + 32 * u);
#pragma unroll
        for (int u = 0; u < kUnroll; u++)
          if (v + 32 * u < end) acc = dot_vec<DT, NORM>(wv[u], x + (v + 32 * u) * x_per_vec, acc);
      }
    }
    acc = warp_sum(acc);
    if (lane == 0) partial[warp] = acc;
    __syncthreads();
    finish_rows(a, group, partial, split, slots);
    __syncthreads();  // partial is rewritten by the next group
  }
}

// The warp-per-row variant (md_cuda_ctx.gemv_rows, MD_CUDA_GEMV=rows): each
// warp takes whole rows (a SwiGLU warp the same row of gate and up) in turn
// over the grid, kRowUnroll loads per lane and matrix in flight, and writes
// its results itself: no block barrier after the norm prologue, so a warp's
// next row's loads never wait for the other warps. A lane adds its vectors
// lane + 32 i in increasing order, then the warp's lanes are summed: the
// bits of gemv_vec_kernel with split 1.
constexpr int kRowUnroll = 8;

// A warp-per-row unit's first matrix and its row there (SwiGLU: row `unit`
// of gate, and of up as matrix 1).
__device__ __forceinline__ int unit_row(const md_cuda_gemv_args &a, int64_t unit, int64_t *local) {
  if (a.epilogue != MD_CUDA_GEMV_SWIGLU) return matrix_of(a, unit, local);
  *local = unit;
  return 0;
}

template <int DT, bool NORM>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_rows_kernel(md_cuda_gemv_args a, int64_t units) {
  constexpr int per_vec = DT == MD_DTYPE_F32 ? 4 : 8;
  constexpr int x_per_vec = per_vec / 4;
  MD_DYNAMIC_SMEM(float, x_s);  // NORM: [cols]
  __shared__ double norm_part[kWarps];
  const int lane = threadIdx.x & 31;
  const int64_t warp0 = (int64_t)blockIdx.x * kWarps + (threadIdx.x >> 5);
  const int64_t warps = (int64_t)gridDim.x * kWarps;
  const int64_t vecs = a.cols / per_vec;
  const bool swiglu = a.epilogue == MD_CUDA_GEMV_SWIGLU;
  allow_dependents();
  if (a.prefetch && warp0 < units) {
    int64_t local;
    const int m = unit_row(a, warp0, &local);
    const uint4 *wr = static_cast<const uint4 *>(a.w[m]) + local * vecs;
    for (int64_t v = 8 * lane; v < vecs; v += 8 * 32) prefetch_l2(wr + v);
  }
  wait_for_previous_grid();
  const float4 *x = reinterpret_cast<const float4 *>(a.x);
  if (NORM) {
    normalise_into(a, x_s, norm_part);
    x = reinterpret_cast<const float4 *>(x_s);
  }
  for (int64_t unit = warp0; unit < units; unit += warps) {
    int64_t local;
    const int m = unit_row(a, unit, &local);
    const uint4 *w0 = static_cast<const uint4 *>(a.w[m]) + local * vecs;
    const uint4 *w1 = swiglu ? static_cast<const uint4 *>(a.w[1]) + local * vecs : nullptr;
    float acc0 = 0.0f, acc1 = 0.0f;
    for (int64_t v = lane; v < vecs; v += 32 * kRowUnroll) {
      uint4 g[kRowUnroll], u[kRowUnroll];
#pragma unroll
      for (int i = 0; i < kRowUnroll; i++)
        if (v + 32 * i < vecs) {
          g[i] = __ldg(w0 + v + 32 * i);
          if (swiglu) u[i] = __ldg(w1 + v + 32 * i);
        }
#pragma unroll
      for (int i = 0; i < kRowUnroll; i++)
        if (v + 32 * i < vecs) {
          acc0 = dot_vec<DT, NORM>(g[i], x + (v + 32 * i) * x_per_vec, acc0);
          if (swiglu) acc1 = dot_vec<DT, NORM>(u[i], x + (v + 32 * i) * x_per_vec, acc1);
        }
    }
    acc0 = warp_sum(acc0);
    if (swiglu) acc1 = warp_sum(acc1);
    if (lane != 0) continue;
    if (swiglu) store_swiglu(a, local, acc0, acc1);
    else store_row(a, m, local, acc0);
  }
}

// Batched decode products (matmul_rows): nb <= kBatchRows rows of x, row b
// at x + b * cols, its results at y[m] + b * rows[m]; no norm, no epilogue.
// Every weight vector a lane loads serves the nb rows, so W is read once
// per launch instead of once per row. For each row the lane, warp and
// slice assignment and the order of the fmaf chain, the warp sum and the
// slices' sum are those of gemv_vec_kernel (gemv_rows_kernel in the
// warp-per-row variant) on that row alone: a row's results are the bits of
// its own launch.
constexpr int kBatchRows = 8;

// The bias epilogue of store_row for row b of a batch.
__device__ __forceinline__ void store_batch_row(const md_cuda_gemv_args &a, int m, int64_t r, int b,
                                                float sum) {
  const float y = a.bias[m] ? sum + a.bias[m][r] : sum;
  a.y[m][(int64_t)b * a.rows[m] + r] = y;
}

// One round of a lane's loads in a batched product: the weight vectors
// v, v + 32, ..., v + 32 (U - 1) of row wr below end, U loads in flight,
// each dotted with the same columns of rows 0 .. nb-1 of x (x_stride
// float4s apart) into acc[b], in the one-row kernels' order.
template <int DT, int U>
__device__ __forceinline__ void dot_batch(const uint4 *wr, const float4 *x, int64_t x_stride, int64_t v,
                                          int64_t end, int nb, float (&acc)[kBatchRows]) {
  constexpr int x_per_vec = (DT == MD_DTYPE_F32 ? 4 : 8) / 4;
  uint4 wv[U];
#pragma unroll
  for (int u = 0; u < U; u++)
    if (v + 32 * u < end) wv[u] = __ldg(wr + v + 32 * u);
#pragma unroll
  for (int u = 0; u < U; u++)
    if (v + 32 * u < end)
#pragma unroll
      for (int b = 0; b < kBatchRows; b++)
        if (b < nb) acc[b] = dot_vec<DT, false>(wv[u], x + b * x_stride + (v + 32 * u) * x_per_vec, acc[b]);
}

template <int DT>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_vec_batch_kernel(md_cuda_gemv_args a, int split, int64_t groups, int nb) {
  constexpr int per_vec = DT == MD_DTYPE_F32 ? 4 : 8;
  __shared__ float partial[kBatchRows][kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, slots = kWarps / split;
  const int64_t vecs_per_row = a.cols / per_vec;
  const int64_t x_stride = a.cols / 4;  // float4s per row of x
  const int part = warp % split;
  const int64_t per_part = (vecs_per_row + split - 1) / split;
  const int64_t begin = part * per_part;
  const int64_t end = begin + per_part < vecs_per_row ? begin + per_part : vecs_per_row;
  const float4 *x = reinterpret_cast<const float4 *>(a.x);
  allow_dependents();
  wait_for_previous_grid();
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const int64_t row = row_of_slot(a, group, warp / split, slots);
    const uint4 *wr = nullptr;
    if (row >= 0) {
      int64_t local;
      const int m = matrix_of(a, row, &local);
      wr = static_cast<const uint4 *>(a.w[m]) + local * vecs_per_row;
    }
    float acc[kBatchRows];
#pragma unroll
    for (int b = 0; b < kBatchRows; b++) acc[b] = 0.0f;
    if (wr)
      for (int64_t v = begin + lane; v < end; v += 32 * kUnroll)
        dot_batch<DT, kUnroll>(wr, x, x_stride, v, end, nb, acc);
#pragma unroll
    for (int b = 0; b < kBatchRows; b++) {
      if (b >= nb) break;  // nb is the same for the whole block: warp_sum stays uniform
      const float sum = warp_sum(acc[b]);
      if (lane == 0) partial[b][warp] = sum;
    }
    __syncthreads();
    const int t = threadIdx.x;
    if (t < slots * nb) {
      const int b = t / slots, slot = t % slots;
      const int64_t r = row_of_slot(a, group, slot, slots);
      if (r >= 0) {
        int64_t local;
        const int m = matrix_of(a, r, &local);
        float sum = partial[b][slot * split];
        for (int p = 1; p < split; p++) sum += partial[b][slot * split + p];
        store_batch_row(a, m, local, b, sum);
      }
    }
    __syncthreads();  // partial is rewritten by the next group
  }
}

template <int DT>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_rows_batch_kernel(md_cuda_gemv_args a, int64_t units, int nb) {
  constexpr int per_vec = DT == MD_DTYPE_F32 ? 4 : 8;
  const int lane = threadIdx.x & 31;
  const int64_t warp0 = (int64_t)blockIdx.x * kWarps + (threadIdx.x >> 5);
  const int64_t warps = (int64_t)gridDim.x * kWarps;
  const int64_t vecs = a.cols / per_vec;
  const int64_t x_stride = a.cols / 4;
  const float4 *x = reinterpret_cast<const float4 *>(a.x);
  allow_dependents();
  wait_for_previous_grid();
  for (int64_t unit = warp0; unit < units; unit += warps) {
    int64_t local;
    const int m = matrix_of(a, unit, &local);
    const uint4 *w0 = static_cast<const uint4 *>(a.w[m]) + local * vecs;
    float acc[kBatchRows];
#pragma unroll
    for (int b = 0; b < kBatchRows; b++) acc[b] = 0.0f;
    for (int64_t v = lane; v < vecs; v += 32 * kRowUnroll)
      dot_batch<DT, kRowUnroll>(w0, x, x_stride, v, vecs, nb, acc);
#pragma unroll
    for (int b = 0; b < kBatchRows; b++) {
      if (b >= nb) break;
      const float sum = warp_sum(acc[b]);
      if (lane == 0) store_batch_row(a, m, local, b, sum);
    }
  }
}

// Any shape and alignment: one warp per row, element by element (the norm,
// when asked for, into shared memory as above).
__global__ void __launch_bounds__(kWarps * 32) gemv_scalar_kernel(md_cuda_gemv_args a) {
  MD_DYNAMIC_SMEM(float, x_s);
  __shared__ float partial[kWarps];
  __shared__ double norm_part[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  allow_dependents();
  wait_for_previous_grid();
  const float *x = a.x;
  if (a.norm_weight) {
    normalise_into(a, x_s, norm_part);
    x = x_s;
  }
  const int64_t row = row_of_slot(a, blockIdx.x, warp, kWarps);
  float acc = 0.0f;
  if (row >= 0) {
    int64_t local;
    const int m = matrix_of(a, row, &local);
    for (int64_t c = lane; c < a.cols; c += 32)
      acc = fmaf(weight_at(a.w[m], a.dtype, (size_t)local * (size_t)a.cols + (size_t)c), x[c], acc);
  }
  acc = warp_sum(acc);
  if (lane == 0) partial[warp] = acc;
  __syncthreads();
  finish_rows(a, blockIdx.x, partial, 1, kWarps);
}

// Warps per row: 1, 2 or 4, at least 64 vectors (two rounds of loads) a
// warp. A function of the row's length only, never of the rows in the
// launch, so that a matrix gives the same bits launched alone or fused
// with others.
inline int split_for(int64_t vecs_per_row) {
  if (vecs_per_row >= 4 * 64) return 4;
  if (vecs_per_row >= 2 * 64) return 2;
  return 1;
}

// Blocks per SM of the vector kernel's grid (8 x 256 threads fill an SM's
// 2048 threads); the groups beyond them are looped over.
constexpr int kBlocksPerSm = 8;

// The grid: kBlocksPerSm blocks an SM, fewer when `needed` blocks do.
inline unsigned resident_blocks(const md_cuda_ctx *ctx, int64_t needed) {
  const int64_t blocks = (int64_t)(ctx->sms > 0 ? ctx->sms : 1) * kBlocksPerSm;
  return (unsigned)(needed < blocks ? needed : blocks);
}

template <int DT, bool NORM>
void launch_vec(md_cuda_ctx *ctx, const md_cuda_gemv_args &a, int64_t groups, int split, size_t smem) {
  const unsigned blocks = resident_blocks(ctx, groups);
  MD_LAUNCH_PDL(ctx, a.prefetch, (gemv_vec_kernel<DT, NORM>), dim3(blocks), kWarps * 32, smem, a,
                split, groups);
}

template <int DT, bool NORM>
void launch_rows(md_cuda_ctx *ctx, const md_cuda_gemv_args &a, int64_t units, size_t smem) {
  const unsigned blocks = resident_blocks(ctx, (units + kWarps - 1) / kWarps);
  MD_LAUNCH_PDL(ctx, a.prefetch, (gemv_rows_kernel<DT, NORM>), dim3(blocks), kWarps * 32, smem,
                a, units);
}

template <int DT>
void launch_dtype(md_cuda_ctx *ctx, const md_cuda_gemv_args &a, int64_t groups, int split, size_t smem) {
  if (ctx->gemv_rows) {
    const int64_t units = a.epilogue == MD_CUDA_GEMV_SWIGLU ? a.rows[0] : a.total_rows;
    if (a.norm_weight) launch_rows<DT, true>(ctx, a, units, smem);
    else launch_rows<DT, false>(ctx, a, units, smem);
    return;
  }
  if (a.norm_weight) launch_vec<DT, true>(ctx, a, groups, split, smem);
  else launch_vec<DT, false>(ctx, a, groups, split, smem);
}

// a.total_rows set; false when the arguments name no product (nothing to launch).
inline bool count_rows(md_cuda_gemv_args &a) {
  a.total_rows = 0;
  for (int m = 0; m < a.count; m++) a.total_rows += a.rows[m];
  return a.count >= 1 && a.count <= 3 && a.total_rows > 0 && a.cols > 0;
}

// Whether the vector kernels may run the product: x and every W on 16-byte
// boundaries and rows a whole number of weight vectors; else the scalar
// kernel. One predicate for the one-row and the batched launches, whose
// bits agree only if they choose alike.
inline bool vector_aligned(const md_cuda_gemv_args &a) {
  const int per_vec = a.dtype == MD_DTYPE_F32 ? 4 : 8;
  bool aligned = ((uintptr_t)a.x % 16 == 0) && a.cols % per_vec == 0;
  for (int m = 0; m < a.count; m++) aligned = aligned && (uintptr_t)a.w[m] % 16 == 0;
  return aligned;
}

// One launch of a batched product (nb rows of x): the warp-per-row or the
// vector variant, as md_cuda_gemv_fused chooses for one row.
template <int DT>
void launch_batch(md_cuda_ctx *ctx, const md_cuda_gemv_args &a, int64_t groups, int split, int nb) {
  if (ctx->gemv_rows) {
    const unsigned blocks = resident_blocks(ctx, (a.total_rows + kWarps - 1) / kWarps);
    MD_LAUNCH_PDL(ctx, false, gemv_rows_batch_kernel<DT>, dim3(blocks), kWarps * 32, 0, a, a.total_rows, nb);
  } else {
    const unsigned blocks = resident_blocks(ctx, groups);
    MD_LAUNCH_PDL(ctx, false, gemv_vec_batch_kernel<DT>, dim3(blocks), kWarps * 32, 0, a, split, groups, nb);
  }
}

}  // namespace md_cuda

using namespace md_cuda;

extern "C" void md_cuda_gemv_fused(md_cuda_ctx *ctx, const md_cuda_gemv_args *args) {
  md_cuda_gemv_args a = *args;
  if (!count_rows(a)) return;
  if (a.epilogue == MD_CUDA_GEMV_SWIGLU && (a.count != 2 || a.rows[0] != a.rows[1])) {
    md_cuda_fail(ctx, MD_E_INVALID, "cuda kernels: a SwiGLU product needs two matrices of equal rows");
    return;
  }
  a.prefetch = ctx->pdl;
  const size_t smem = a.norm_weight ? (size_t)a.cols * sizeof(float) : 0;
  const int per_vec = a.dtype == MD_DTYPE_F32 ? 4 : 8;
  const bool aligned = vector_aligned(a);
  const int64_t swiglu_rows = a.epilogue == MD_CUDA_GEMV_SWIGLU ? 2 : 1;
  if (!aligned) {
    a.prefetch = false;
    // One warp per row slot; SwiGLU: 4 gate and 4 up rows a block.
    const int64_t per_block = kWarps / swiglu_rows;
    const unsigned blocks = (unsigned)((a.total_rows / swiglu_rows + per_block - 1) / per_block);
    MD_LAUNCH_PDL(ctx, false, gemv_scalar_kernel, dim3(blocks), kWarps * 32, smem, a);
    return;
  }
  const int split = split_for(a.cols / per_vec);
  const int64_t rows_per_group = kWarps / split / swiglu_rows;
  const int64_t groups = (a.total_rows / swiglu_rows + rows_per_group - 1) / rows_per_group;
  switch (a.dtype) {
  case MD_DTYPE_F32: launch_dtype<MD_DTYPE_F32>(ctx, a, groups, split, smem); break;
  case MD_DTYPE_F16: launch_dtype<MD_DTYPE_F16>(ctx, a, groups, split, smem); break;
  case MD_DTYPE_BF16: launch_dtype<MD_DTYPE_BF16>(ctx, a, groups, split, smem); break;
  }
}

extern "C" void md_cuda_gemv_batch(md_cuda_ctx *ctx, const md_cuda_gemv_args *args, int64_t n) {
  md_cuda_gemv_args a = *args;
  if (n <= 0) return;
  if (a.norm_weight || a.epilogue != MD_CUDA_GEMV_PLAIN) {
    md_cuda_fail(ctx, MD_E_INVALID, "cuda kernels: a batched product with a norm or an epilogue");
    return;
  }
  if (n == 1) {
    md_cuda_gemv_fused(ctx, &a);
    return;
  }
  if (!count_rows(a)) return;
  if (!vector_aligned(a)) {  // the scalar kernel, a launch per row: its bits, W read n times
    for (int64_t b = 0; b < n && ctx->status == MD_OK; b++) {
      md_cuda_gemv_args row = *args;
      row.x = args->x + b * args->cols;
      for (int m = 0; m < row.count; m++) row.y[m] = args->y[m] + b * args->rows[m];
      md_cuda_gemv_fused(ctx, &row);
    }
    return;
  }
  a.prefetch = false;
  const int split = split_for(a.cols / (a.dtype == MD_DTYPE_F32 ? 4 : 8));
  const int64_t rows_per_group = kWarps / split;
  const int64_t groups = (a.total_rows + rows_per_group - 1) / rows_per_group;
  for (int64_t b0 = 0; b0 < n && ctx->status == MD_OK; b0 += kBatchRows) {
    const int nb = (int)(n - b0 < kBatchRows ? n - b0 : kBatchRows);
    md_cuda_gemv_args part = a;
    part.x = a.x + b0 * a.cols;
    for (int m = 0; m < a.count; m++) part.y[m] = a.y[m] + b0 * a.rows[m];
    switch (a.dtype) {
    case MD_DTYPE_F32: launch_batch<MD_DTYPE_F32>(ctx, part, groups, split, nb); break;
    case MD_DTYPE_F16: launch_batch<MD_DTYPE_F16>(ctx, part, groups, split, nb); break;
    case MD_DTYPE_BF16: launch_batch<MD_DTYPE_BF16>(ctx, part, groups, split, nb); break;
    }
  }
}

extern "C" void md_cuda_gemv(md_cuda_ctx *ctx, float *y, const void *w, md_dtype dtype,
                             int64_t rows, int64_t cols, const float *x, const float *bias) {
  md_cuda_gemv_args a;
  memset(&a, 0, sizeof a);
  a.count = 1;
  a.w[0] = w;
  a.rows[0] = rows;
  a.bias[0] = bias;
  a.y[0] = y;
  a.dtype = dtype;
  a.cols = cols;
  a.x = x;
  md_cuda_gemv_fused(ctx, &a);
}

extern "C" void md_cuda_gemv_init(md_cuda_ctx *ctx) {
  allow_max_dynamic_smem(ctx, gemv_vec_kernel<MD_DTYPE_F32, true>);
  allow_max_dynamic_smem(ctx, gemv_vec_kernel<MD_DTYPE_F16, true>);
  allow_max_dynamic_smem(ctx, gemv_vec_kernel<MD_DTYPE_BF16, true>);
  allow_max_dynamic_smem(ctx, gemv_rows_kernel<MD_DTYPE_F32, true>);
  allow_max_dynamic_smem(ctx, gemv_rows_kernel<MD_DTYPE_F16, true>);
  allow_max_dynamic_smem(ctx, gemv_rows_kernel<MD_DTYPE_BF16, true>);
  allow_max_dynamic_smem(ctx, gemv_scalar_kernel);
}
