// Causal GQA attention over the KV cache, with the fused capture of the
// attention each key receives (kernels/kernels.h, md_attn_capture).
//
// Scores are q . k * scale, scale = float(head_dim ** -0.5); softmax in fp32
// as exp(s - max) * (1 / sum), the CPU back end's (and HF eager's) formula.
// Query head h reads KV head h / (n_heads / n_kv_heads).
//
// Decode (one query row per head), split over chunks of kDecodeChunk keys:
//   partial   grid (chunks, kv heads): the chunk's keys and values into
//             shared memory, a thread per (key, head) scores them for the
//             group's query heads, then the chunk's max and sum of
//             exp(s - max) and its partial output sum_j exp(s_j - max) v_j;
//             with RoPE fused (md_cuda_decode_rope), the queries are
//             rotated on the way in and the block holding the step's slot
//             rotates the new key and stores key and value there first;
//   finish    grid (max(heads, key blocks)): every block reduces the
//             chunks' maxima and sums per head; block h writes head h's
//             output (and the rotated query); when capturing or hooked,
//             one thread per key computes w = exp(s - M) * (1 / L) for
//             every head and adds the mean (or max) over heads into the
//             capture buffer: each key is owned by one thread, so no
//             atomics are needed.
// In a step recorded as a CUDA graph (graph.c) the slot and position are
// read from device memory and the grids cover the cache's capacity; blocks
// and threads beyond the visible keys do nothing.
// Prefill, flash-style with O(n * head_dim) memory (no n x n matrix):
//   forward   grid (row blocks of kRows, heads): one warp per query row runs
//             an online softmax over tiles of kTile keys (kept in shared
//             memory for the block's rows) and writes the output and the
//             row's final max and sum;
//   colsum    grid (key tiles, heads), for a capture: recomputes the tile's
//             scores against every query row that sees it, p = exp(s - max)
//             * (1 / sum), and sums each key's column per head;
//   reduce    adds weight / n_heads * (sum over heads) into the capture;
//   rows      the hook's rows, recomputed the same way (diagnostics).
// forward, colsum and rows compute a score with the same code (dot_seq: an
// fmaf chain in index order, then __fmul_rn by the scale) on the same
// values, so they agree bit for bit.
#include "kernels/cuda/common.cuh"

namespace md_cuda {

constexpr int kDecodeChunk = 32;    // keys per decode block
constexpr int kDecodeThreads = 256;
constexpr int kFinishThreads = 1024;
constexpr int kRows = 8;            // prefill query rows per block (one warp each)
constexpr int kTile = 32;           // prefill keys per tile (one per lane)
constexpr int kMaxDimPerLane = MD_CUDA_MAX_HEAD_DIM / 32;

// The first query position: a->pos0, or, in a recorded decode step, the
// position written to device memory before each replay.
__device__ __forceinline__ int64_t first_position(const md_cuda_attn_args &a) {
  return a.pos_dev ? *a.pos_dev : a.pos0;
}

// The token position of a decode step's RoPE: r.pos, or in a recorded step
// the one written to device memory before each replay.
__device__ __forceinline__ int64_t rope_position(const md_cuda_decode_rope &r) {
  return r.pos_dev ? *r.pos_dev : r.pos;
}

__device__ __forceinline__ const float *keys_of(const md_cuda_attn_args &a, int kv) {
  return a.cache + (size_t)kv * (size_t)a.capacity * (size_t)a.head_dim;
}

__device__ __forceinline__ const float *values_of(const md_cuda_attn_args &a, int kv) {
  return a.cache + (size_t)(a.n_kv_heads + kv) * (size_t)a.capacity * (size_t)a.head_dim;
}

// q . k in index order, one fmaf at a time.
__device__ __forceinline__ float dot_seq(const float *q, const float *k, int n) {
  float acc = 0.0f;
  for (int d = 0; d < n; d++) acc = fmaf(q[d], k[d], acc);
  return acc;
}

// Row stride of a key tile in shared memory: odd, so that the 32 lanes
// reading 32 different rows at the same column hit 32 different banks.
__host__ __device__ __forceinline__ int key_stride(int head_dim) { return head_dim | 1; }

// ---- decode ------------------------------------------------------------------

// Copies n floats from global to shared memory (dst row stride dst_stride
// for rows of `width` floats), kLoadBatch independent loads in flight per
// thread, so that a block's tile arrives in a few memory round trips.
constexpr int kLoadBatch = 8;
__device__ __forceinline__ void load_tile(float *dst, int dst_stride, const float *src, int rows,
                                          int width) {
  const int n = rows * width;
  for (int base = threadIdx.x; base < n; base += kLoadBatch * blockDim.x) {
    float v[kLoadBatch];
#pragma unroll
    for (int u = 0; u < kLoadBatch; u++) {
      const int i = base + u * blockDim.x;
      v[u] = i < n ? src[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kLoadBatch; u++) {
      const int i = base + u * blockDim.x;
      if (i < n) dst[(i / width) * dst_stride + i % width] = v[u];
    }
  }
}

// Shared memory: the group's queries [group][hd], the chunk's keys
// [kDecodeChunk][key_stride] and values [kDecodeChunk][hd], and the scores
// [group][kDecodeChunk] (then exp(s - chunk max)).
__global__ void __launch_bounds__(kDecodeThreads)
    attn_decode_partial_kernel(md_cuda_attn_args a, md_cuda_decode_scratch s, md_cuda_decode_rope r) {
  MD_DYNAMIC_SMEM(float, smem);
  const int hd = a.head_dim, half = hd / 2, ks = key_stride(hd), H = a.n_heads;
  const int group = a.n_heads / a.n_kv_heads;
  const int kv = blockIdx.y, h0 = kv * group;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int64_t n_keys = first_position(a) + 1, j0 = (int64_t)blockIdx.x * kDecodeChunk;
  if (j0 >= n_keys) return;  // a grid sized for the capacity: the whole block has no keys
  const int nk = (int)(n_keys - j0 < kDecodeChunk ? n_keys - j0 : kDecodeChunk);
  float *q_s = smem;                          // [group][hd]
  float *k_s = q_s + group * hd;              // [kDecodeChunk][ks]
  float *v_s = k_s + kDecodeChunk * ks;       // [kDecodeChunk][hd]
  float *p_s = v_s + kDecodeChunk * hd;       // [group][kDecodeChunk]
  const float *keys = keys_of(a, kv), *values = values_of(a, kv);

  if (!r.inv_freq) {
    for (int i = threadIdx.x; i < group * hd; i += blockDim.x) q_s[i] = a.q[(size_t)h0 * hd + i];
  } else {
    // RoPE fused: the group's queries rotated here (the finish kernel
    // writes them back), and the block that holds the new slot rotates
    // its key and stores key and value there (kv_store) before the tiles
    // are read.
    const float pos = (float)rope_position(r);
    for (int i = threadIdx.x; i < group * half; i += blockDim.x) {
      const int g = i / half, j = i % half;
      const float *qh = a.q + (size_t)(h0 + g) * hd;
      rope_pair(qh[j], qh[j + half], pos, r.inv_freq[j], &q_s[g * hd + j], &q_s[g * hd + j + half]);
    }
    const int64_t slot = n_keys - 1;
    if (slot < j0 + nk) {
      float *kh = r.key + (size_t)kv * hd;
      float *kc = const_cast<float *>(keys) + (size_t)slot * hd;
      float *vc = const_cast<float *>(values) + (size_t)slot * hd;
      for (int j = threadIdx.x; j < half; j += blockDim.x) {
        float k1, k2;
        rope_pair(kh[j], kh[j + half], pos, r.inv_freq[j], &k1, &k2);
        kh[j] = k1;
        kh[j + half] = k2;
        kc[j] = k1;
        kc[j + half] = k2;
      }
      for (int d = threadIdx.x; d < hd; d += blockDim.x) vc[d] = r.value[(size_t)kv * hd + d];
      __syncthreads();  // the stores are visible to the tile loads below
    }
  }
  load_tile(k_s, ks, keys + (size_t)j0 * hd, nk, hd);
  load_tile(v_s, hd, values + (size_t)j0 * hd, nk, hd);
  __syncthreads();
  // A warp per (head, 32 keys): the lanes' keys differ (odd key stride: no
  // bank conflicts), the query is one broadcast address.
  for (int item = threadIdx.x; item < group * kDecodeChunk; item += blockDim.x) {
    const int g = item / kDecodeChunk, jj = item % kDecodeChunk;
    if (jj >= nk) continue;
    const float score = __fmul_rn(dot_seq(q_s + g * hd, k_s + jj * ks, hd), a.scale);
    p_s[g * kDecodeChunk + jj] = score;
    s.scores[(size_t)(h0 + g) * n_keys + j0 + jj] = score;
  }
  __syncthreads();
  for (int g = warp; g < group; g += warps) {
    float *row = p_s + g * kDecodeChunk;
    float max = -INFINITY;
    for (int jj = lane; jj < nk; jj += 32) max = fmaxf(max, row[jj]);
    max = warp_max(max);
    float sum = 0.0f;
    for (int jj = lane; jj < nk; jj += 32) {
      const float e = expf(__fsub_rn(row[jj], max));
      row[jj] = e;
      sum += e;
    }
    sum = warp_sum(sum);
    if (lane == 0) {
      s.part_max[(size_t)blockIdx.x * H + h0 + g] = max;
      s.part_sum[(size_t)blockIdx.x * H + h0 + g] = sum;
    }
  }
  __syncthreads();
  for (int item = threadIdx.x; item < group * hd; item += blockDim.x) {
    const int g = item / hd, d = item % hd;
    const float *row = p_s + g * kDecodeChunk;
    float acc = 0.0f;
    for (int jj = 0; jj < nk; jj++) acc = fmaf(row[jj], v_s[jj * hd + d], acc);
    s.part_out[((size_t)blockIdx.x * H + h0 + g) * hd + d] = acc;
  }
}

// Every block first reduces the chunks' statistics of every head into
// shared memory [n_heads][2] (a warp a head: the lanes' maxima and sums of
// part_sum * exp(part_max - max) over chunks lane, lane + 32, ..., then
// the warp's; the same order in every block). Block h < n_heads then
// writes head h's output (the chunks' partial outputs rescaled and summed
// in blockDim / head_dim slices of chunks, then the slices in order) and, with
// RoPE fused, head h's rotated query back into q. With weights, every
// block turns keys of a grid-stride range into softmax weights for every
// head: written over the scores (write_rows, the hook's rows) and reduced
// over heads into the capture as the CPU back end does: heads in order,
// sum / n_heads (mean) or max starting from 0, then received += weight *
// that, each a separately rounded float operation. Each key is owned by
// one thread, so no atomics are needed.
__global__ void __launch_bounds__(kFinishThreads)
    attn_decode_finish_kernel(md_cuda_attn_args a, md_cuda_decode_scratch s, md_cuda_decode_rope r,
                              md_cuda_decode_weights f) {
  MD_DYNAMIC_SMEM(float, smem);  // [n_heads][2] statistics, [kFinishThreads] partial outputs
  allow_dependents();  // the output projection may start prefetching its weights
  float *stats = smem, *part = smem + 2 * a.n_heads;
  const int H = a.n_heads, hd = a.head_dim;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int64_t n_keys = first_position(a) + 1;
  const int64_t chunks = (n_keys + kDecodeChunk - 1) / kDecodeChunk;
  for (int h = warp; h < H; h += warps) {
    float max = -INFINITY;
    for (int64_t c = lane; c < chunks; c += 32) max = fmaxf(max, s.part_max[c * H + h]);
    max = warp_max(max);
    float sum = 0.0f;
    for (int64_t c = lane; c < chunks; c += 32)
      sum += s.part_sum[c * H + h] * expf(__fsub_rn(s.part_max[c * H + h], max));
    sum = warp_sum(sum);
    if (lane == 0) {
      stats[2 * h] = max;
      stats[2 * h + 1] = sum;
    }
  }
  __syncthreads();
  if ((int)blockIdx.x < H) {
    const int h = blockIdx.x;
    const float max = stats[2 * h], inv = 1.0f / stats[2 * h + 1];
    const int slices = blockDim.x / hd > 0 ? (int)(blockDim.x / hd) : 1;
    for (int d0 = 0; d0 < hd; d0 += blockDim.x / slices) {
      const int d = d0 + threadIdx.x % (blockDim.x / slices), slice = threadIdx.x / (blockDim.x / slices);
      float acc = 0.0f;
      if (d < hd && slice < slices) {
#pragma unroll 4
        for (int64_t c = slice; c < chunks; c += slices)
          acc = fmaf(s.part_out[((size_t)c * H + h) * hd + d],
                     expf(__fsub_rn(s.part_max[c * H + h], max)), acc);
      }
      part[threadIdx.x] = acc;
      __syncthreads();
      if (slice == 0 && d < hd) {
        float total = part[threadIdx.x];
        for (int p = 1; p < slices; p++) total += part[p * (blockDim.x / slices) + threadIdx.x];
        a.out[(size_t)h * hd + d] = total * inv;
      }
      __syncthreads();
    }
    if (r.inv_freq) {
      const int half = hd / 2;
      const float pos = (float)rope_position(r);
      float *qh = const_cast<float *>(a.q) + (size_t)h * hd;
      for (int j = threadIdx.x; j < half; j += blockDim.x)
        rope_pair(qh[j], qh[j + half], pos, r.inv_freq[j], &qh[j], &qh[j + half]);
    }
  }
  if (!f.write_rows && !f.received) return;
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n_keys;
       j += (int64_t)gridDim.x * blockDim.x) {
    float sum = 0.0f, max = 0.0f;
#pragma unroll 4
    for (int h = 0; h < H; h++) {
      const float row_max = stats[2 * h], inv = 1.0f / stats[2 * h + 1];
      float *score = s.scores + (size_t)h * n_keys + j;
      const float w = __fmul_rn(expf(__fsub_rn(*score, row_max)), inv);
      if (f.write_rows) *score = w;
      sum = __fadd_rn(sum, w);
      if (w > max) max = w;
    }
    if (f.received)
      f.received[j] = __fadd_rn(f.received[j], __fmul_rn(f.weight, f.heads_max ? max : sum / (float)H));
  }
}

// ---- prefill -----------------------------------------------------------------

// Shared memory: the key tile [kTile][key_stride], the value tile
// [kTile][hd] and one query row per warp [kRows][hd]. (The launch bounds
// say one block per SM at least: with the block size alone, nvcc 13's
// ptxas held the kernel to 32 registers and spilled.)
__global__ void __launch_bounds__(kRows * 32, 1)
    attn_prefill_kernel(md_cuda_attn_args a, float *row_max, float *row_sum) {
  MD_DYNAMIC_SMEM(float, smem);
  const int hd = a.head_dim, ks = key_stride(hd), H = a.n_heads;
  const int h = blockIdx.y, kv = h / (H / a.n_kv_heads);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float *k_s = smem, *v_s = k_s + kTile * ks, *q_s = v_s + kTile * hd + warp * hd;
  const int64_t i = (int64_t)blockIdx.x * kRows + warp;  // this warp's query row
  const bool active = i < a.n;                           // warp-uniform
  const int64_t pos = a.pos0 + i;
  const int64_t block_end = (int64_t)(blockIdx.x + 1) * kRows < a.n ? (int64_t)(blockIdx.x + 1) * kRows : a.n;
  const int64_t last_key = a.pos0 + block_end - 1;       // the block's last row sees keys 0..last_key
  const float *keys = keys_of(a, kv), *values = values_of(a, kv);

  if (active)
    for (int d = lane; d < hd; d += 32) q_s[d] = a.q[((size_t)i * H + h) * hd + d];
  float max = -INFINITY, sum = 0.0f, acc[kMaxDimPerLane];
#pragma unroll
  for (int c = 0; c < kMaxDimPerLane; c++) acc[c] = 0.0f;

  for (int64_t t0 = 0; t0 <= last_key; t0 += kTile) {  // the same trip count for every warp
    __syncthreads();                                     // the previous tile has been read
    for (int idx = threadIdx.x; idx < kTile * hd; idx += blockDim.x) {
      const int jj = idx / hd, d = idx % hd;
      const int64_t key = t0 + jj;
      const bool in = key <= last_key;
      k_s[jj * ks + d] = in ? keys[(size_t)key * hd + d] : 0.0f;
      v_s[jj * hd + d] = in ? values[(size_t)key * hd + d] : 0.0f;
    }
    __syncthreads();
    if (!active) continue;
    const int64_t key = t0 + lane;
    const bool visible = key <= pos;
    const float score = visible ? __fmul_rn(dot_seq(q_s, k_s + lane * ks, hd), a.scale) : -INFINITY;
    // Key 0 is in the first tile and visible to every row, so the running
    // max is finite from then on; before it, exp(-inf) = 0 clears nothing.
    const float new_max = fmaxf(max, warp_max(score));
    const float p = visible ? expf(__fsub_rn(score, new_max)) : 0.0f;
    const float rescale = expf(__fsub_rn(max, new_max));
    sum = sum * rescale + warp_sum(p);
#pragma unroll
    for (int c = 0; c < kMaxDimPerLane; c++) acc[c] *= rescale;
    for (int jj = 0; jj < kTile; jj++) {
      const float pj = __shfl_sync(kFullMask, p, jj);
#pragma unroll
      for (int c = 0; c < kMaxDimPerLane; c++) {
        const int d = lane + 32 * c;
        if (d < hd) acc[c] = fmaf(pj, v_s[jj * hd + d], acc[c]);
      }
    }
    max = new_max;
  }
  if (!active) return;
  const float inv = 1.0f / sum;
#pragma unroll
  for (int c = 0; c < kMaxDimPerLane; c++) {
    const int d = lane + 32 * c;
    if (d < hd) a.out[((size_t)i * H + h) * hd + d] = acc[c] * inv;
  }
  if (lane == 0) {
    row_max[i * H + h] = max;
    row_sum[i * H + h] = sum;
  }
}

// Shared memory: the key tile [kTile][key_stride], one query row per warp
// [kRows][hd], the warps' partial column sums [kRows][kTile].
__global__ void __launch_bounds__(kRows * 32, 1)
    attn_prefill_colsum_kernel(md_cuda_attn_args a, const float *row_max, const float *row_sum,
                               float *colsum) {
  MD_DYNAMIC_SMEM(float, smem);
  const int hd = a.head_dim, ks = key_stride(hd), H = a.n_heads;
  const int h = blockIdx.y, kv = h / (H / a.n_kv_heads);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t n_keys = a.pos0 + a.n, t0 = (int64_t)blockIdx.x * kTile;
  float *k_s = smem, *q_s = k_s + kTile * ks + warp * hd, *part = k_s + kTile * ks + kRows * hd;
  const float *keys = keys_of(a, kv);

  for (int idx = threadIdx.x; idx < kTile * hd; idx += blockDim.x) {
    const int jj = idx / hd, d = idx % hd;
    const int64_t key = t0 + jj;
    k_s[jj * ks + d] = key < n_keys ? keys[(size_t)key * hd + d] : 0.0f;
  }
  __syncthreads();
  const int64_t key = t0 + lane;
  const int64_t first_row = t0 > a.pos0 ? t0 - a.pos0 : 0;  // rows before it see none of the tile
  float column = 0.0f;
  for (int64_t i = first_row + warp; i < a.n; i += kRows) {
    for (int d = lane; d < hd; d += 32) q_s[d] = a.q[((size_t)i * H + h) * hd + d];
    __syncwarp();
    if (key <= a.pos0 + i) {
      const float score = __fmul_rn(dot_seq(q_s, k_s + lane * ks, hd), a.scale);
      const float inv = 1.0f / row_sum[i * H + h];
      column += __fmul_rn(expf(__fsub_rn(score, row_max[i * H + h])), inv);
    }
    __syncwarp();  // q_s is overwritten next
  }
  part[warp * kTile + lane] = column;
  __syncthreads();
  if (warp == 0 && key < n_keys) {
    float total = 0.0f;
    for (int w = 0; w < kRows; w++) total += part[w * kTile + lane];
    colsum[(size_t)h * n_keys + key] = total;
  }
}

__global__ void attn_colsum_reduce_kernel(const float *colsum, int n_heads, int64_t n_keys,
                                          float *received, float weight_per_head) {
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n_keys;
       j += (int64_t)gridDim.x * blockDim.x) {
    float total = 0.0f;
    for (int h = 0; h < n_heads; h++) total += colsum[(size_t)h * n_keys + j];
    received[j] = __fadd_rn(received[j], __fmul_rn(weight_per_head, total));
  }
}

// grid (rows, heads); shared memory: the query row [hd].
__global__ void attn_prefill_rows_kernel(md_cuda_attn_args a, const float *row_max,
                                         const float *row_sum, int64_t i0, float *dst) {
  MD_DYNAMIC_SMEM(float, q_s);
  const int hd = a.head_dim, H = a.n_heads;
  const int h = blockIdx.y, kv = h / (H / a.n_kv_heads);
  const int64_t r = blockIdx.x, i = i0 + r, pos = a.pos0 + i, n_keys = a.pos0 + a.n;
  const float *keys = keys_of(a, kv);
  for (int d = threadIdx.x; d < hd; d += blockDim.x) q_s[d] = a.q[((size_t)i * H + h) * hd + d];
  __syncthreads();
  const float max = row_max[i * H + h], inv = 1.0f / row_sum[i * H + h];
  float *row = dst + ((size_t)r * H + h) * n_keys;
  for (int64_t j = threadIdx.x; j < n_keys; j += blockDim.x) {
    float w = 0.0f;
    if (j <= pos) {
      const float score = __fmul_rn(dot_seq(q_s, keys + (size_t)j * hd, hd), a.scale);
      w = __fmul_rn(expf(__fsub_rn(score, max)), inv);
    }
    row[j] = w;
  }
}

size_t decode_smem(const md_cuda_attn_args *a) {
  const size_t group = (size_t)(a->n_heads / a->n_kv_heads), hd = (size_t)a->head_dim;
  const size_t ks = (size_t)key_stride(a->head_dim);
  return (group * hd + kDecodeChunk * ks + kDecodeChunk * hd + group * kDecodeChunk) * sizeof(float);
}

size_t prefill_smem(const md_cuda_attn_args *a) {
  const size_t hd = (size_t)a->head_dim, ks = (size_t)key_stride(a->head_dim);
  return (kTile * ks + kTile * hd + kRows * hd) * sizeof(float);
}

size_t colsum_smem(const md_cuda_attn_args *a) {
  const size_t hd = (size_t)a->head_dim, ks = (size_t)key_stride(a->head_dim);
  return (kTile * ks + kRows * hd + kRows * kTile) * sizeof(float);
}

}  // namespace md_cuda

using namespace md_cuda;

extern "C" int64_t md_cuda_decode_chunks(int64_t n_keys) {
  return (n_keys + kDecodeChunk - 1) / kDecodeChunk;
}

extern "C" void md_cuda_attention_init(md_cuda_ctx *ctx) {
  allow_max_dynamic_smem(ctx, attn_decode_partial_kernel);
  allow_max_dynamic_smem(ctx, attn_decode_finish_kernel);
  allow_max_dynamic_smem(ctx, attn_prefill_kernel);
  allow_max_dynamic_smem(ctx, attn_prefill_colsum_kernel);
}

extern "C" void md_cuda_attn_decode(md_cuda_ctx *ctx, const md_cuda_attn_args *a,
                                    const md_cuda_decode_scratch *s, int64_t max_keys,
                                    const md_cuda_decode_rope *rope,
                                    const md_cuda_decode_weights *weights) {
  const int64_t chunks = md_cuda_decode_chunks(max_keys);
  md_cuda_decode_rope r;
  md_cuda_decode_weights f;
  memset(&r, 0, sizeof r);
  memset(&f, 0, sizeof f);
  if (rope) r = *rope;
  if (weights) f = *weights;
  MD_LAUNCH(ctx, attn_decode_partial_kernel, dim3((unsigned)chunks, (unsigned)a->n_kv_heads),
            kDecodeThreads, decode_smem(a), *a, *s, r);
  int64_t blocks = a->n_heads;
  if ((f.write_rows || f.received) && (max_keys + kFinishThreads - 1) / kFinishThreads > blocks)
    blocks = (max_keys + kFinishThreads - 1) / kFinishThreads;
  MD_LAUNCH(ctx, attn_decode_finish_kernel, dim3((unsigned)blocks), kFinishThreads,
            (2 * (size_t)a->n_heads + kFinishThreads) * sizeof(float), *a, *s, r, f);
}

extern "C" void md_cuda_attn_prefill(md_cuda_ctx *ctx, const md_cuda_attn_args *a, float *row_max,
                                     float *row_sum) {
  const unsigned row_blocks = (unsigned)((a->n + kRows - 1) / kRows);
  MD_LAUNCH(ctx, attn_prefill_kernel, dim3(row_blocks, (unsigned)a->n_heads), kRows * 32,
            prefill_smem(a), *a, row_max, row_sum);
}

extern "C" void md_cuda_attn_prefill_colsum(md_cuda_ctx *ctx, const md_cuda_attn_args *a,
                                            const float *row_max, const float *row_sum,
                                            float *colsum, float *received,
                                            float weight_per_head) {
  const int64_t n_keys = a->pos0 + a->n;
  const unsigned key_tiles = (unsigned)((n_keys + kTile - 1) / kTile);
  MD_LAUNCH(ctx, attn_prefill_colsum_kernel, dim3(key_tiles, (unsigned)a->n_heads), kRows * 32,
            colsum_smem(a), *a, row_max, row_sum, colsum);
  MD_LAUNCH(ctx, attn_colsum_reduce_kernel, dim3(grid_for((size_t)n_keys, 256)), 256, 0, colsum,
            a->n_heads, n_keys, received, weight_per_head);
}

extern "C" void md_cuda_attn_prefill_rows(md_cuda_ctx *ctx, const md_cuda_attn_args *a,
                                          const float *row_max, const float *row_sum, int64_t i0,
                                          int64_t rows, float *dst) {
  if (rows <= 0) return;
  MD_LAUNCH(ctx, attn_prefill_rows_kernel, dim3((unsigned)rows, (unsigned)a->n_heads), 256,
            (size_t)a->head_dim * sizeof(float), *a, row_max, row_sum, i0, dst);
}
