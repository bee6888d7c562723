// Shared by the CUDA back end's .cu files: the checked launch macro, warp
// reductions and weight conversions.
#ifndef MD_KERNELS_CUDA_COMMON_CUH
#define MD_KERNELS_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

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
#define MD_DYNAMIC_SMEM(type, name) type *name = static_cast<type *>(md_emu::g.dynamic_smem)
#endif

namespace md_cuda {

constexpr unsigned kFullMask = 0xffffffffu;

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

// bf16 -> f32 is exact: the bf16 bits are the high half of the f32.
__device__ __forceinline__ float bf16_bits_to_f32(uint32_t bits) { return __uint_as_float(bits << 16); }

// f16 -> f32 is exact for every input (subnormals, inf, NaN).
__device__ __forceinline__ float f16_bits_to_f32(uint32_t bits) {
  return __half2float(__ushort_as_half((unsigned short)bits));
}

__device__ __forceinline__ float weight_at(const void *w, md_dtype dtype, size_t index) {
  if (dtype == MD_DTYPE_F32) return static_cast<const float *>(w)[index];
  uint32_t bits = static_cast<const uint16_t *>(w)[index];
  return dtype == MD_DTYPE_BF16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
}

}  // namespace md_cuda

#endif
