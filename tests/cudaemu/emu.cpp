// A CUDA emulator for testing the CUDA back end without a GPU (and without
// nvcc): the back end's own sources (kernels/cuda/*.c and *.cu) are compiled
// by the host compilers against the headers in tests/cudaemu/include, and
// this file runs them.
//
// Kernels. A launch runs its blocks one after another on the calling
// thread. Each CUDA thread of a block is a coroutine with its own stack; it
// runs until it reaches a barrier (__syncthreads, __syncwarp, a warp
// shuffle) and the scheduler then runs the next thread whose barrier is
// released, in thread order. A barrier that can never be released (a
// thread waits at a __syncthreads that others skip, a shuffle in a warp
// with exited lanes, a mask other than the full warp) fails the launch,
// which the back end sees as cudaErrorLaunchFailure. Dynamic shared memory
// is exactly the bytes asked for, followed by a canary that is checked
// after the launch; asking for more than 48 KiB without raising the
// kernel's limit (cudaFuncSetAttribute) fails as on a GPU.
//
// Graphs. Between cudaStreamBeginCapture and cudaStreamEndCapture, kernel
// launches, copies and fills are recorded with their arguments (by value,
// as CUDA copies kernel arguments at launch) instead of run; cudaGraphLaunch
// runs the recording.
//
// Memory. cudaMalloc places each allocation so that it ends at a
// PROT_NONE guard page (an access past the end faults at once); the bytes
// between the requested size and the 256-byte alignment hold a canary
// checked by cudaFree. Freed memory stays reserved and inaccessible (never
// handed out again), so a use after free faults too. Streams and events exist but everything runs at
// once, in order, so the emulation cannot find errors of stream ordering.
//
// cuBLAS. cublasGemmEx is a plain loop accumulating in double (TF32 rounds
// its inputs to 10-bit mantissas first).
//
// What it verifies: indexing, bounds, barrier placement, warp-uniform
// shuffles, shared-memory sizes and the arithmetic of every kernel. What it
// cannot: concurrency between threads (it runs them one at a time, so a
// missing barrier before reading another thread's shared-memory write may
// pass here), the GPU's memory model, timing, and real CUDA or driver
// behaviour.
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#if defined(__x86_64__)
// Saves the callee-saved registers and the stack pointer into *save, loads
// `load` and returns into the coroutine that saved it.
extern "C" void md_emu_swap(void **save, void *load);
asm(R"(
  .text
  .globl md_emu_swap
  .type md_emu_swap, @function
md_emu_swap:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size md_emu_swap, .-md_emu_swap
)");
#endif

namespace md_emu {

state g;

namespace {

constexpr size_t kStackBytes = 64 * 1024;
constexpr size_t kDefaultSmem = 48 * 1024;
constexpr size_t kOptinSmem = 227 * 1024;
constexpr unsigned char kCanary = 0xa5;

enum wait_kind { kReady, kWaitBlock, kWaitWarp, kDone };

struct thread {
  unsigned index;
  wait_kind wait;
  uint64_t wait_generation;
  uint64_t exchanges;  // shuffles done: selects the exchange buffer
#if defined(__x86_64__)
  void *sp;
#else
  ucontext_t context;
#endif
  char *stack;
};

struct block_state {
  std::vector<thread> threads;
  unsigned alive = 0, block_arrived = 0;
  uint64_t block_generation = 0;
  std::vector<unsigned> warp_alive, warp_arrived;
  std::vector<uint64_t> warp_generation;
  std::vector<uint64_t> exchange;  // [warp][2][32]
  const std::function<void()> *body = nullptr;
  thread *current = nullptr;
  bool failed = false;
  char failure[256] = {0};
#if defined(__x86_64__)
  void *scheduler_sp = nullptr;
#else
  ucontext_t scheduler;
#endif
};

block_state blk;
cudaError_t last_error = cudaSuccess;
// While a stream is captured: the work queued, to run when the graph is
// launched (kernels, copies and fills, with their arguments as queued).
std::vector<std::function<void()>> *capture = nullptr;
std::map<const void *, int> smem_limits;  // kernel -> MaxDynamicSharedMemorySize
std::vector<char *> stacks;

void fail(const char *fmt, ...) {
  if (blk.failed) return;
  blk.failed = true;
  va_list args;
  va_start(args, fmt);
  vsnprintf(blk.failure, sizeof blk.failure, fmt, args);
  va_end(args);
}


void yield_to_scheduler() {
#if defined(__x86_64__)
  md_emu_swap(&blk.current->sp, blk.scheduler_sp);
#else
  swapcontext(&blk.current->context, &blk.scheduler);
#endif
}

void resume(thread *t) {
  blk.current = t;
  g.thread_idx = dim3(t->index);
#if defined(__x86_64__)
  md_emu_swap(&blk.scheduler_sp, t->sp);
#else
  swapcontext(&blk.scheduler, &t->context);
#endif
}

unsigned warp_of(const thread *t) { return t->index / 32; }

// Releases the block's barrier, and warp w's, when their arrivals now
// equal the live threads.
void release_if_complete(size_t w) {
  if (blk.block_arrived > 0 && blk.block_arrived == blk.alive) {
    blk.block_arrived = 0;
    blk.block_generation++;
  }
  if (blk.warp_arrived[w] > 0 && blk.warp_arrived[w] == blk.warp_alive[w]) {
    if (blk.warp_alive[w] != 32 && blk.warp_alive[w] != blk.threads.size() - w * 32)
      fail("a warp barrier or shuffle in warp %zu with exited lanes", w);
    blk.warp_arrived[w] = 0;
    blk.warp_generation[w]++;
  }
}

void entry() {
  thread *t = blk.current;
  (*blk.body)();
  t->wait = kDone;
  blk.alive--;
  blk.warp_alive[warp_of(t)]--;
  release_if_complete(warp_of(t));
  yield_to_scheduler();
  std::abort();  // never resumed
}

#if !defined(__x86_64__)
void entry_context() { entry(); }
#endif

void prepare(thread *t) {
#if defined(__x86_64__)
  uintptr_t top = ((uintptr_t)(t->stack + kStackBytes)) & ~(uintptr_t)15;
  void **sp = (void **)top;
  *--sp = nullptr;                    // alignment: entry starts as if called
  *--sp = (void *)&entry;             // md_emu_swap's ret lands here
  for (int i = 0; i < 6; i++) *--sp = nullptr;  // rbp rbx r12 r13 r14 r15
  t->sp = sp;
#else
  getcontext(&t->context);
  t->context.uc_stack.ss_sp = t->stack;
  t->context.uc_stack.ss_size = kStackBytes;
  t->context.uc_link = nullptr;
  makecontext(&t->context, entry_context, 0);
#endif
}

bool released(const thread *t) {
  if (t->wait == kWaitBlock) return blk.block_generation != t->wait_generation;
  if (t->wait == kWaitWarp) return blk.warp_generation[warp_of(t)] != t->wait_generation;
  return t->wait == kReady;
}

void run_block(unsigned threads) {
  blk.threads.assign(threads, thread{});
  blk.alive = threads;
  blk.block_arrived = 0;
  unsigned warps = (threads + 31) / 32;
  blk.warp_alive.assign(warps, 0);
  blk.warp_arrived.assign(warps, 0);
  blk.warp_generation.assign(warps, 0);
  blk.exchange.assign((size_t)warps * 64, 0);
  for (unsigned i = 0; i < threads; i++) {
    thread *t = &blk.threads[i];
    t->index = i;
    t->wait = kReady;
    t->stack = stacks[i];
    blk.warp_alive[i / 32]++;
    prepare(t);
  }
  for (unsigned done = 0; done < threads && !blk.failed;) {
    bool progress = false;
    for (auto &t : blk.threads) {
      if (t.wait == kDone || !released(&t)) continue;
      t.wait = kReady;
      resume(&t);
      progress = true;
      if (t.wait == kDone) done++;
      if (blk.failed) break;
    }
    if (!progress && !blk.failed) fail("deadlock: threads wait at barriers that cannot be released");
  }
}

uint32_t round_tf32(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7f800000u) == 0x7f800000u) return x;
  x += 0xfffu + ((x >> 13) & 1u);
  return x & 0xffffe000u;
}

}  // namespace

void syncthreads() {
  thread *t = blk.current;
  uint64_t generation = blk.block_generation;
  blk.block_arrived++;
  release_if_complete(warp_of(t));
  if (blk.block_generation != generation) return;
  t->wait = kWaitBlock;
  t->wait_generation = generation;
  yield_to_scheduler();
}

void syncwarp(unsigned mask) {
  thread *t = blk.current;
  unsigned w = warp_of(t);
  unsigned lanes = blk.threads.size() - w * 32 < 32 ? (unsigned)(blk.threads.size() - w * 32) : 32;
  if (mask != 0xffffffffu && !(lanes < 32 && mask == (1u << lanes) - 1u))
    fail("warp operation with mask %#x: the emulator supports whole warps only", mask);
  uint64_t generation = blk.warp_generation[w];
  blk.warp_arrived[w]++;
  release_if_complete(w);
  if (blk.warp_generation[w] != generation) return;
  t->wait = kWaitWarp;
  t->wait_generation = generation;
  yield_to_scheduler();
}

uint64_t exchange(uint64_t value, int src_lane, unsigned mask) {
  thread *t = blk.current;
  unsigned w = warp_of(t), lane = t->index % 32;
  uint64_t *slots = &blk.exchange[((size_t)w * 2 + (t->exchanges & 1)) * 32];
  t->exchanges++;
  slots[lane] = value;
  syncwarp(mask);  // everyone has written; the next exchange uses the other half
  if (src_lane < 0 || src_lane >= 32 || w * 32 + (unsigned)src_lane >= blk.threads.size()) {
    fail("shuffle from lane %d, outside the warp", src_lane);
    return value;
  }
  return slots[src_lane];
}

void launch(const void *kernel, const char *name, dim3 grid, dim3 block, size_t smem,
            const std::function<void()> &body) {
  if (capture) {
    std::function<void()> queued = body;
    capture->push_back([=]() { launch(kernel, name, grid, block, smem, queued); });
    return;
  }
  if (block.y != 1 || block.z != 1) {
    std::fprintf(stderr, "cudaemu: %s: only 1-D blocks are emulated\n", name);
    last_error = cudaErrorLaunchFailure;
    return;
  }
  auto limit = smem_limits.find(kernel);
  size_t allowed = limit != smem_limits.end() ? (size_t)limit->second : kDefaultSmem;
  if (smem > allowed || smem > kOptinSmem) {
    std::fprintf(stderr, "cudaemu: %s: %zu bytes of dynamic shared memory, the kernel may use %zu\n", name, smem,
                 allowed);
    last_error = cudaErrorInvalidValue;
    return;
  }
  while (stacks.size() < block.x) stacks.push_back(static_cast<char *>(std::malloc(kStackBytes)));
  std::vector<unsigned char> shared(smem + 64, 0);
  std::memset(shared.data() + smem, kCanary, 64);
  g.dynamic_smem = shared.data();
  g.block_dim = block;
  g.grid_dim = grid;
  blk.body = &body;
  blk.failed = false;
  for (unsigned z = 0; z < grid.z && !blk.failed; z++)
    for (unsigned y = 0; y < grid.y && !blk.failed; y++)
      for (unsigned x = 0; x < grid.x && !blk.failed; x++) {
        g.block_idx = dim3(x, y, z);
        run_block(block.x);
      }
  for (size_t i = smem; i < smem + 64 && !blk.failed; i++)
    if (shared[i] != kCanary) fail("a write past the %zu bytes of dynamic shared memory", smem);
  if (blk.failed) {
    std::fprintf(stderr, "cudaemu: kernel %s failed in block (%u, %u, %u): %s\n", name, g.block_idx.x,
                 g.block_idx.y, g.block_idx.z, blk.failure);
    last_error = cudaErrorLaunchFailure;
  }
}

}  // namespace md_emu

// ---- the runtime API ----------------------------------------------------------------

namespace {

struct allocation {
  char *base;
  size_t mapped, size;
};
std::map<const void *, allocation> allocations;
size_t allocated = 0;

bool check_canary(const void *ptr, const allocation &a) {
  const unsigned char *bytes = static_cast<const unsigned char *>(ptr);
  size_t padded = (a.size + 255) / 256 * 256;
  for (size_t i = a.size; i < padded; i++)
    if (bytes[i] != md_emu::kCanary) return false;
  return true;
}

}  // namespace

struct md_emu_stream {
  int unused;
};
struct md_emu_event {
  int unused;
};
struct md_emu_blas {
  int unused;
};

extern "C" {

cudaError_t cudaGetDeviceCount(int *count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "CUDA emulator (tests/cudaemu)");
  prop->totalGlobalMem = (size_t)16 << 30;
  prop->sharedMemPerBlockOptin = md_emu::kOptinSmem;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }

cudaError_t cudaRuntimeGetVersion(int *version) {
  *version = 13000;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = md_emu::last_error;
  md_emu::last_error = cudaSuccess;
  return e;
}

const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess: return "no error";
  case cudaErrorMemoryAllocation: return "out of memory";
  case cudaErrorInvalidValue: return "invalid argument";
  case cudaErrorLaunchFailure: return "unspecified launch failure";
  default: return "emulated error";
  }
}

const char *cudaGetErrorName(cudaError_t error) {
  switch (error) {
  case cudaSuccess: return "cudaSuccess";
  case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
  case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
  case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  default: return "cudaErrorUnknown";
  }
}

cudaError_t cudaMalloc(void **ptr, size_t size) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t padded = (size + 255) / 256 * 256;
  if (padded == 0) padded = 256;
  size_t data_pages = (padded + page - 1) / page, mapped = (data_pages + 1) * page;
  void *base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return cudaErrorMemoryAllocation;
  char *guard = static_cast<char *>(base) + data_pages * page;
  mprotect(guard, page, PROT_NONE);
  char *data = guard - padded;  // 256-aligned: page-aligned guard minus a multiple of 256
  std::memset(data + size, md_emu::kCanary, padded - size);
  allocations[data] = allocation{static_cast<char *>(base), mapped, size};
  allocated += size;
  *ptr = data;
  return cudaSuccess;
}

cudaError_t cudaFree(void *ptr) {
  if (!ptr) return cudaSuccess;
  auto it = allocations.find(ptr);
  if (it == allocations.end()) {
    std::fprintf(stderr, "cudaemu: cudaFree of %p, which cudaMalloc did not return\n", ptr);
    return cudaErrorInvalidValue;
  }
  bool intact = check_canary(ptr, it->second);
  const allocation freed = it->second;
  allocated -= freed.size;
  allocations.erase(it);
  // Quarantine: the pages are released but the addresses stay reserved and
  // inaccessible, so a stale pointer (a recorded graph that outlived its
  // scratch) faults instead of reaching a later allocation at the same place.
  if (mmap(freed.base, freed.mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
           -1, 0) == MAP_FAILED)
    munmap(freed.base, freed.mapped);
  if (!intact) {
    std::fprintf(stderr, "cudaemu: a kernel wrote past the end of a %zu-byte allocation\n", freed.size);
    return cudaErrorIllegalAddress;
  }
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size) {
  *ptr = std::malloc(size ? size : 1);
  return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void *ptr) {
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  *total_bytes = (size_t)16 << 30;
  *free_bytes = *total_bytes - allocated;
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
  (void)kind;
  if (count) std::memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
  (void)stream;
  if (md_emu::capture) {
    md_emu::capture->push_back([=]() { cudaMemcpy(dst, src, count, kind); });
    return cudaSuccess;
  }
  return cudaMemcpy(dst, src, count, kind);
}

cudaError_t cudaMemset(void *ptr, int value, size_t count) {
  if (count) std::memset(ptr, value, count);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream) {
  (void)stream;
  if (md_emu::capture) {
    md_emu::capture->push_back([=]() { cudaMemset(ptr, value, count); });
    return cudaSuccess;
  }
  return cudaMemset(ptr, value, count);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
  (void)flags;
  *stream = new md_emu_stream{};
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  (void)stream;
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  (void)stream;
  (void)event;
  (void)flags;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
  (void)flags;
  *event = new md_emu_event{};
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  (void)event;
  (void)stream;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  (void)event;
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  (void)stream;
  (void)mode;
  if (md_emu::capture) return cudaErrorInvalidValue;
  md_emu::capture = new std::vector<std::function<void()>>();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
  (void)stream;
  if (!md_emu::capture) return cudaErrorInvalidValue;
  *graph = reinterpret_cast<cudaGraph_t>(md_emu::capture);
  md_emu::capture = nullptr;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *exec, cudaGraph_t graph,
                                          unsigned long long flags) {
  (void)flags;
  auto *nodes = reinterpret_cast<std::vector<std::function<void()>> *>(graph);
  *exec = reinterpret_cast<cudaGraphExec_t>(new std::vector<std::function<void()>>(*nodes));
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  (void)stream;
  if (md_emu::capture) return cudaErrorInvalidValue;
  for (auto &node : *reinterpret_cast<std::vector<std::function<void()>> *>(exec)) {
    node();
    if (md_emu::last_error != cudaSuccess) return cudaGetLastError();
  }
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete reinterpret_cast<std::vector<std::function<void()>> *>(graph);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete reinterpret_cast<std::vector<std::function<void()>> *>(exec);
  return cudaSuccess;
}

cudaError_t md_emu_func_set_attribute(const void *func, enum cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || (size_t)value > md_emu::kOptinSmem)
    return cudaErrorInvalidValue;
  md_emu::smem_limits[func] = value;
  return cudaSuccess;
}

// ---- cuBLAS ------------------------------------------------------------------------------

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
  *handle = new md_emu_blas{};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  (void)handle;
  (void)stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  (void)handle;
  (void)mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "success" : "emulated cuBLAS failure";
}

const char *cublasGetStatusName(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_NOT_SUPPORTED";
}

static float element(const void *p, cudaDataType_t type, size_t i, bool tf32) {
  float f;
  if (type == CUDA_R_32F) {
    f = static_cast<const float *>(p)[i];
    if (tf32) {
      uint32_t bits = md_emu::round_tf32(f);
      std::memcpy(&f, &bits, sizeof f);
    }
    return f;
  }
  uint16_t bits = static_cast<const uint16_t *>(p)[i];
  if (type == CUDA_R_16F) return __half2float(__ushort_as_half(bits));
  uint32_t wide = (uint32_t)bits << 16;
  std::memcpy(&f, &wide, sizeof f);
  return f;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                            int m, int n, int k, const void *alpha, const void *A, cudaDataType_t Atype,
                            int lda, const void *B, cudaDataType_t Btype, int ldb, const void *beta,
                            void *C, cudaDataType_t Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
  (void)handle;
  (void)algo;
  if (Ctype != CUDA_R_32F || Atype != Btype || m < 0 || n < 0 || k < 0 ||
      lda < (transa == CUBLAS_OP_N ? m : k) || ldb < (transb == CUBLAS_OP_N ? k : n) || ldc < m)
    return CUBLAS_STATUS_INVALID_VALUE;
  const bool tf32 = computeType == CUBLAS_COMPUTE_32F_FAST_TF32;
  const float a = *static_cast<const float *>(alpha), b = *static_cast<const float *>(beta);
  float *c = static_cast<float *>(C);
  // op(A) by rows and op(B) by columns, each element widened once: the
  // products and their order are the plain loop's, without decoding every
  // element again for every output.
  std::vector<double> rows((size_t)m * k), cols((size_t)n * k);
  for (int i = 0; i < m; i++)
    for (int p = 0; p < k; p++)
      rows[(size_t)i * k + p] = element(A, Atype, transa == CUBLAS_OP_N ? (size_t)i + (size_t)p * lda
                                                                        : (size_t)p + (size_t)i * lda, tf32);
  for (int j = 0; j < n; j++)
    for (int p = 0; p < k; p++)
      cols[(size_t)j * k + p] = element(B, Btype, transb == CUBLAS_OP_N ? (size_t)p + (size_t)j * ldb
                                                                        : (size_t)j + (size_t)p * ldb, tf32);
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      const double *x = rows.data() + (size_t)i * k, *y = cols.data() + (size_t)j * k;
      double sum = 0.0;
      for (int p = 0; p < k; p++) sum += x[p] * y[p];
      float *out = c + (size_t)i + (size_t)j * ldc;
      *out = (float)(a * sum + (b != 0.0f ? (double)b * *out : 0.0));
    }
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
