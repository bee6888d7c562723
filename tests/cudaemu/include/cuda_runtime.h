/* CUDA emulation (tests/cudaemu): what the CUDA back end's kernels use of
 * CUDA C++, for compiling them with a host C++ compiler. Every CUDA thread
 * of a block runs as a coroutine on the calling CPU thread (blocks one
 * after another); barriers and warp shuffles switch between them. See
 * tests/cudaemu/emu.cpp. */
#ifndef MD_CUDAEMU_RUNTIME_H
#define MD_CUDAEMU_RUNTIME_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(16) float4 {
  float x, y, z, w;
};

namespace md_emu {
struct state {
  dim3 thread_idx, block_idx, block_dim, grid_dim;
  void *dynamic_smem;
};
extern state g;
void syncthreads();
void syncwarp(unsigned mask);
/* Exchanges 8 bytes with lane src of this warp (all 32 lanes take part). */
uint64_t exchange(uint64_t value, int src_lane, unsigned mask);
void launch(const void *kernel, const char *name, dim3 grid, dim3 block, size_t smem,
            const std::function<void()> &body);

template <typename T>
inline T shuffle(T value, int src_lane, unsigned mask) {
  static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = exchange(bits, src_lane, mask);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
}  // namespace md_emu

#define threadIdx (md_emu::g.thread_idx)
#define blockIdx (md_emu::g.block_idx)
#define blockDim (md_emu::g.block_dim)
#define gridDim (md_emu::g.grid_dim)

inline void __syncthreads() { md_emu::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { md_emu::syncwarp(mask); }
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T value, int lane_mask) {
  return md_emu::shuffle(value, (int)(threadIdx.x & 31) ^ lane_mask, mask);
}
template <typename T>
inline T __shfl_sync(unsigned mask, T value, int src_lane) {
  return md_emu::shuffle(value, src_lane & 31, mask);
}
template <typename T>
inline T __ldg(const T *p) {
  return *p;
}
/* Blocks run one after another on one CPU thread: memory is always
 * coherent, and an atomic is a plain read-modify-write. */
inline void __threadfence() {}
inline unsigned atomicAdd(unsigned *address, unsigned value) {
  unsigned old = *address;
  *address = old + value;
  return old;
}
/* Separately rounded float operations (the emulation is compiled with
 * -ffp-contract=off, so a * b is never fused). */
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __uint_as_float(unsigned bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
#endif

#endif
