// Shared by the CUDA back end's .cu files: the checked launch macro, warp
// reductions and weight conversions.
#ifndef MD_KERNELS_CUDA_COMMON_CUH
#define MD_KERNELS_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cuda/cuda_internal.h"

// Launches KERNEL (a kernel's name) on ctx->stream after checking the
// configuration, then checks the launch. Nothing is launched while an
// earlier failure is pending. MD_DYNAMIC_SMEM declares a kernel's dynamic
// shared memory. Under MD_CUDA_EMULATION (tests/cudaemu: the kernels
// compiled by a host C++ compiler and run on the CPU) both go through the
// emulator.
#ifndef MD_CUDA_EMULATION
#define MD_LAUNCH(ctx, kernel, grid, block, smem, ...)                                    \
  do {                                                                                    \
    const dim3 md_grid_ = (grid);                                                         \
    if (md_cuda_launch_begin((ctx), #kernel, md_grid_.x, md_grid_.y, md_grid_.z,          \
                             (unsigned)(block), (size_t)(smem), MD_CUDA_SITE)) {          \
      kernel<<<md_grid_, (unsigned)(block), (size_t)(smem), (ctx)->stream>>>(__VA_ARGS__); \
      md_cuda_launch_end((ctx), #kernel, MD_CUDA_SITE);                                   \
    }                                                                                     \
  } while (0)
#define MD_DYNAMIC_SMEM(type, name) extern __shared__ type name[]
// MD_LAUNCH, and when `pdl` is true a programmatic launch (PDL, Hopper and
// later): the kernel may start before the one queued before it finishes,
// and must wait for it (griddepcontrol.wait) before it touches what that
// one reads or writes. Captured into graphs as a programmatic edge.
#define MD_LAUNCH_PDL(ctx, pdl, kernel, grid, block, smem, ...)                           \
  do {                                                                                    \
    const dim3 md_grid_ = (grid);                                                         \
    if (md_cuda_launch_begin((ctx), #kernel, md_grid_.x, md_grid_.y, md_grid_.z,          \
                             (unsigned)(block), (size_t)(smem), MD_CUDA_SITE)) {          \
      cudaLaunchConfig_t md_config_ = {};                                                 \
      md_config_.gridDim = md_grid_;                                                      \
      md_config_.blockDim = dim3((unsigned)(block));                                      \
      md_config_.dynamicSmemBytes = (size_t)(smem);                                       \
      md_config_.stream = (ctx)->stream;                                                  \
      cudaLaunchAttribute md_attr_[1];                                                    \
      md_attr_[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;                \
      md_attr_[0].val.programmaticStreamSerializationAllowed = 1;                         \
      md_config_.attrs = md_attr_;                                                        \
      md_config_.numAttrs = (pdl) ? 1 : 0;                                                \
      (void)cudaLaunchKernelEx(&md_config_, kernel, __VA_ARGS__); /* last error: below */ \
      md_cuda_launch_end((ctx), #kernel, MD_CUDA_SITE);                                   \
    }                                                                                     \
  } while (0)
#else
#define MD_LAUNCH(ctx, kernel, grid, block, smem, ...)                                    \
  do {                                                                                    \
    const dim3 md_grid_ = (grid);                                                         \
    if (md_cuda_launch_begin((ctx), #kernel, md_grid_.x, md_grid_.y, md_grid_.z,          \
                             (unsigned)(block), (size_t)(smem), MD_CUDA_SITE)) {          \
      auto md_args_ = std::make_tuple(__VA_ARGS__); /* by value, as a launch copies */   \
      md_emu::launch((const void *)&kernel, #kernel, md_grid_, dim3((unsigned)(block)),    \
                     (size_t)(smem), [md_args_]() { std::apply(kernel, md_args_); });     \
      md_cuda_launch_end((ctx), #kernel, MD_CUDA_SITE);                                   \
    }                                                                                     \
  } while (0)
#define MD_LAUNCH_PDL(ctx, pdl, kernel, grid, block, smem, ...) \
  MD_LAUNCH(ctx, kernel, grid, block, smem, __VA_ARGS__)
#define MD_DYNAMIC_SMEM(type, name) type *name = static_cast<type *>(md_emu::g.dynamic_smem)
#endif

namespace md_cuda {

constexpr unsigned kFullMask = 0xffffffffu;

// Lets kernel take as much dynamic shared memory as the device allows a
// block beside the kernel's own static shared memory (the two together
// may not exceed the opt-in limit: asking for the whole limit fails).
template <typename F>
inline void allow_max_dynamic_smem(md_cuda_ctx *ctx, F *kernel) {
  cudaFuncAttributes attr;
  if (!MD_CUDA_CHECK(ctx, cudaFuncGetAttributes(&attr, kernel))) return;
  const int limit = (int)(ctx->max_smem_optin - attr.sharedSizeBytes);
  MD_CUDA_CHECK(ctx, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
}

// Blocks for a grid-stride loop over `count` items: enough to fill the GPU,
// never more than the items need.
inline unsigned grid_for(size_t count, unsigned block) {
  size_t blocks = (count + block - 1) / block;
  const size_t cap = (size_t)1 << 16;
  if (blocks > cap) blocks = cap;
  return blocks ? (unsigned)blocks : 1u;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ __forceinline__ double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// Programmatic dependent launch (Hopper and later; no-ops elsewhere and
// when the launch was not programmatic). allow_dependents lets the next
// kernel, when it is launched programmatically, be scheduled once every
// block of this one has started; that kernel may do only work independent
// of this one's (prefetching weights) before wait_for_previous_grid, which
// waits for this kernel to complete and its writes to be visible.
__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// bf16 -> f32 is exact: the bf16 bits are the high half of the f32.
__device__ __forceinline__ float bf16_bits_to_f32(uint32_t bits) { return __uint_as_float(bits << 16); }

// f16 -> f32 is exact for every input (subnormals, inf, NaN).
__device__ __forceinline__ float f16_bits_to_f32(uint32_t bits) {
  return __half2float(__ushort_as_half((unsigned short)bits));
}

// 1 / sqrt(mean(x[0 .. dim-1]^2) + eps) for the row x, computed by the
// whole block (HF's Qwen2RMSNorm: the variance in fp32; our sum of squares
// in double, as the CPU back end's). Every kernel that normalises a row
// calls this, with 256 threads, so that they agree bit for bit. warp_part
// is shared memory of one double per warp; the caller synchronises before
// reusing it.
__device__ __forceinline__ float rms_inverse(const float *x, int64_t dim, float eps, double *warp_part) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  double sum_sq = 0.0;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) sum_sq += (double)x[j] * (double)x[j];
  sum_sq = warp_sum(sum_sq);
  if (lane == 0) warp_part[warp] = sum_sq;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < warps; w++) total += warp_part[w];
  const float variance = (float)(total / (double)dim);
  return 1.0f / sqrtf(variance + eps);
}

// One normalised element: weight * (x * inv_rms), each product rounded.
__device__ __forceinline__ float rms_scale(float x, float inv_rms, float weight) {
  return __fmul_rn(weight, __fmul_rn(x, inv_rms));
}

// NeoX RoPE of the pair (x1, x2) = (v[i], v[i + head_dim / 2]) at position
// pos: the angle pos * inv_freq[i] in float32 as HF computes it, its cosine
// and sine evaluated in double and rounded (correctly rounded like glibc's
// cosf/sinf on the CPU side; CUDA's cosf is within 2 ulp only).
__device__ __forceinline__ void rope_pair(float x1, float x2, float pos, float inv_freq, float *o1,
                                          float *o2) {
  const float angle = __fmul_rn(pos, inv_freq);
  double sin_d, cos_d;
  sincos((double)angle, &sin_d, &cos_d);
  const float c = (float)cos_d, s = (float)sin_d;
  *o1 = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
  *o2 = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
}

__device__ __forceinline__ float weight_at(const void *w, md_dtype dtype, size_t index) {
  if (dtype == MD_DTYPE_F32) return static_cast<const float *>(w)[index];
  uint32_t bits = static_cast<const uint16_t *>(w)[index];
  return dtype == MD_DTYPE_BF16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
}

}  // namespace md_cuda

#endif
