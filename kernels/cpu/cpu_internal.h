/* Internals of the CPU back end, shared by its files and by the kernel tests
 * and benchmark (which compare the kernel paths). Not part of the
 * collector's interface: the collector sees kernels/kernels.h only. */
#ifndef MD_KERNELS_CPU_INTERNAL_H
#define MD_KERNELS_CPU_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/tensor.h"
#include "kernels/cpu/cpu.h"
#include "kernels/kernels.h"

/* Scratch and buffers the kernels stream through start on a cache line:
 * glibc's malloc hands out large blocks 16 bytes past a page boundary
 * (its chunk header), and then every 64-byte AVX-512 load of them spans
 * two lines (on an Intel Xeon the prompt attention's scores product ran
 * about 1.2x as fast from an aligned block).
 * md_cpu_alloc: `bytes` (not zeroed) at a multiple of MD_CPU_ALIGN, freed
 * with md_cpu_free (not free); NULL when out of memory. */
#define MD_CPU_ALIGN 64
void *md_cpu_alloc(size_t bytes);
void md_cpu_free(void *p);

/* The kernel paths, in order: each needs what the one before it needs
 * (md_cpu_kernels of cpu.h names them for callers, one higher). */
typedef enum md_cpu_isa {
  MD_CPU_ISA_PORTABLE = 0, /* plain C, any x86-64 or other CPU */
  MD_CPU_ISA_AVX2,         /* AVX2 + FMA + F16C */
  MD_CPU_ISA_AVX512,       /* and AVX-512 F, BW, VL, DQ (kernels/cpu/avx512.h) */
} md_cpu_isa;

/* The path a md_cpu_kernels value other than MD_CPU_KERNELS_BEST names. */
static inline md_cpu_isa md_cpu_isa_of(md_cpu_kernels kernels) { return (md_cpu_isa)(kernels - 1); }

/* The best instruction set this CPU runs (checked with CPUID and XGETBV, as
 * GCC's __builtin_cpu_supports does; the file compiles without
 * -march=native, with GCC and clang). */
md_cpu_isa md_cpu_detect_isa(void);

/* Whether `facts` are an AMD CPU of family 26 (Zen 5) or later: where the
 * two AMD choices of the defaults were measured better (our float32 prompt
 * GEMM on the avx512 path, md_cpu_gemm in cpu.h; the GEMV's far prefetch,
 * avx512.h), on a Zen 5 EPYC. A Zen 4 (family 25, its 512-bit operations
 * on 256-bit units) keeps the choices measured on it: OpenBLAS's
 * Cooperlake sgemm and the 1,024-byte prefetch (bench/README.md). */
bool md_cpu_amd_zen5_or_later(const md_cpu_facts *facts);

/* The same for this CPU, read once per process (CPUID traps to the
 * hypervisor in a VM, slow enough to show in a decode step if read per
 * call): md_cpu_matvec's prefetch distance. Safe from any thread. */
bool md_cpu_amd_zen5_or_later_once(void);

/* The best path `facts` allow (md_cpu_detect_isa applies it to this CPU). */
md_cpu_isa md_cpu_isa_for(const md_cpu_facts *facts);

/* "portable", "avx2", "avx512". */
const char *md_cpu_isa_name(md_cpu_isa isa);

/* Threads that fit the work. A parallel region costs its team a wake-up
 * and a barrier: little when idle threads spin (libgomp's default while
 * regions follow each other closely), far more when they sleep
 * (OMP_WAIT_POLICY=passive), above all on a virtual machine, where the
 * futex wake goes through the hypervisor (bench/README.md has the
 * figures). So a region gets one thread per `grain` units of its work and
 * never more than `threads`.
 * Every caller's result is the same whatever the team (each says why), so
 * a grain changes speed only. */
static inline int md_cpu_team(int threads, int64_t work, int64_t grain) {
  int64_t team = grain > 0 ? work / grain : threads;
  if (team > threads) team = threads;
  return team < 1 ? 1 : (int)team;
}

/* The CPUs a cgroup v2 CPU quota allows: the unified hierarchy's path
 * ("0::PATH" in `proc_cgroup`, normally /proc/self/cgroup), then
 * "QUOTA PERIOD" in CGROUP_ROOT/PATH/cpu.max, rounded up (containers limited
 * with `--cpus`); INT_MAX when there is no quota ("max"), no such file or
 * anything malformed. Parameters so that the tests can feed it files. */
int md_cpu_quota_cpus(const char *proc_cgroup, const char *cgroup_root);

/* The grains (md_cpu_team). Compute-bound work gets a thread per piece of
 * work long enough to pay for a sleeping thread's wake-up. A matrix-vector
 * product is bound by memory, and a second core reads more of it at once:
 * its grain is smaller (64 KiB of weights: a demo-sized model's matrices
 * stay on one thread, a real model's o-projection does not; a larger grain
 * measured slower decode, bench/README.md). */
#define MD_GRAIN_FLOATS ((int64_t)1 << 16)       /* elementwise ops: floats read */
#define MD_GRAIN_MATVEC_BYTES ((int64_t)1 << 16)  /* matrix-vector: weight bytes */
#define MD_GRAIN_ATTN_DECODE ((int64_t)1 << 18)  /* decode attention: n_heads * keys * head_dim */

/* A parallel region only where its team has more than one thread. libgomp
 * ends every parallel region, a team of one thread included (num_threads(1)
 * or a false if clause), with a futex system call, and a decode step of a
 * small model runs dozens of regions whose team is one (md_cpu_team); the
 * cost is measured in the commit that added these. So:
 *   MD_CPU_FOR_STATIC(team, i, count, body) / MD_CPU_FOR_DYNAMIC (chunks of
 *     1): for (int64_t i = 0; i < count; i++) { body } shared by a team of
 *     `team` threads, or a plain loop on this thread when team is 1;
 *   md_cpu_run(team, fn, arg): fn(arg) on each thread of a team, or once on
 *     this thread; fn's `omp for` loops, orphaned when it runs alone, are
 *     then plain loops (OpenMP runs a worksharing loop outside any region
 *     on the one thread, and libgomp makes no system call for it). */
#define MD_CPU_PRAGMA(x) _Pragma(#x)
#define MD_CPU_FOR_SCHEDULED(TEAM, SCHEDULE, VAR, COUNT, ...)                  \
  do {                                                                         \
    int md_team_ = (TEAM);                                                     \
    int64_t md_count_ = (int64_t)(COUNT);                                      \
    if (md_team_ > 1) {                                                        \
      MD_CPU_PRAGMA(omp parallel for num_threads(md_team_) schedule(SCHEDULE)) \
      for (int64_t VAR = 0; VAR < md_count_; VAR++) { __VA_ARGS__ }            \
    } else {                                                                   \
      for (int64_t VAR = 0; VAR < md_count_; VAR++) { __VA_ARGS__ }            \
    }                                                                          \
  } while (0)
#define MD_CPU_FOR_STATIC(TEAM, VAR, COUNT, ...) MD_CPU_FOR_SCHEDULED(TEAM, static, VAR, COUNT, __VA_ARGS__)
#define MD_CPU_FOR_DYNAMIC(TEAM, VAR, COUNT, ...) MD_CPU_FOR_SCHEDULED(TEAM, dynamic, VAR, COUNT, __VA_ARGS__)
void md_cpu_run(int team, void (*fn)(void *), void *arg);

/* y[r] = sum_c W[r, c] * x[c] (+ bias[r]) for r in [0, rows): one row of
 * activations against a weight matrix in its file dtype, fp32 accumulation,
 * rows handed out in chunks to `threads` OpenMP threads as they come free
 * (the bits of every row are the same whatever the thread count). bias may
 * be NULL. */
void md_cpu_matvec(md_cpu_isa isa, int threads, float *y, const void *w, md_dtype dtype,
                   int64_t rows, int64_t cols, const float *x, const float *bias);

/* One product of md_cpu_matvec_shared: y = W x (+ bias), W [rows, cols]. */
typedef struct md_cpu_matvec_out {
  float *y;
  const void *w;
  md_dtype dtype;
  int64_t rows;
  const float *bias; /* or NULL */
} md_cpu_matvec_out;

#define MD_CPU_MATVEC_MAX_SHARED 4

/* md_cpu_matvec for `count` (1 to MD_CPU_MATVEC_MAX_SHARED) matrices of
 * one x, their rows dealt out in one parallel region: a decode step's
 * q, k and v products (k and v too small to be worth a region of their
 * own) or gate and up. Each matrix is cut into the chunks md_cpu_matvec
 * cuts it into, so each y has md_cpu_matvec's bits. */
void md_cpu_matvec_shared(md_cpu_isa isa, int threads, const md_cpu_matvec_out *outs, int count,
                          int64_t cols, const float *x);

/* md_cpu_matvec_shared for n rows of x ([n, cols]) at once: outs[i].y is
 * [n, rows_i] and its row b holds, bit for bit, what md_cpu_matvec_shared
 * writes for x's row b alone. Each piece of rows is small enough to stay
 * in the core's L2 while the n rows of x go through it, so the weights are
 * read from memory once per call (a batched decode step). */
void md_cpu_matvec_rows(md_cpu_isa isa, int threads, const md_cpu_matvec_out *outs, int count,
                        int64_t cols, const float *x, int64_t n);

/* md_cpu_matvec_rows with BF16 products (--bf16-gemm): every outs[i] a
 * BF16 matrix, xb the n rows of x rounded and paired (md_bf16_pack_row,
 * (cols + 1) / 2 words a row); each row of each y has the bits of
 * md_bf16_rows, whatever n, the pieces or the threads (gemm_bf16.h). Only
 * where md_cpu_facts.avx512_bf16 holds. */
void md_cpu_matvec_rows_bf16(int threads, const md_cpu_matvec_out *outs, int count, int64_t cols,
                             const uint32_t *xb, int64_t n);

/* dst[(r - r0) * cols + c] = W[r, c] as f32 for r in [r0, r1): the weight
 * tile a prefill matmul hands to sgemm. */
void md_cpu_rows_to_f32(md_cpu_isa isa, int threads, float *dst, const void *w, md_dtype dtype,
                        int64_t cols, int64_t r0, int64_t r1);

/* Converts one element of a weight in its file dtype. */
float md_cpu_weight_at(const void *w, md_dtype dtype, size_t index);

/* The index of the first largest of v[0 .. n-1] (0 for n = 0): the loop
 * "best = 0; if v[i] > v[best] then best = i" (torch.argmax's choice for
 * ties; NaNs never chosen, v[0] NaN gives 0), vectorized on the avx512 path. */
size_t md_cpu_argmax(md_cpu_isa isa, const float *v, size_t n);

/* In place: x = exp(x - max x) / sum; fp32 like torch.softmax. */
void md_cpu_softmax(md_cpu_isa isa, float *x, int64_t n);

/* sum[i] += x[i] for i < n (each a single fp32 addition, as the loop). */
void md_cpu_add_into(md_cpu_isa isa, float *sum, const float *x, int64_t n);

/* gate[i] = gate[i] / (1 + exp(-gate[i])) * up[i] (SiLU as torch computes it). */
void md_cpu_silu_mul(md_cpu_isa isa, float *gate, const float *up, size_t n);

/* Decode attention's two products for one KV head and a block of `len`
 * keys (attention.c), for the `group` query heads that share the KV head:
 *   scores[h * ld + k] = scale * sum_d q[h * hd + d] keys[k * hd + d],
 *   out[h * hd + d] = sum_k p[h * ld + k] values[k * hd + d],
 * h < group, k < len, in fp32 with a fixed summation order. False, with
 * nothing written, when `isa` has no kernel for the shape (the portable
 * path, or a head_dim that is not a multiple of 8): the caller uses sgemm. */
bool md_cpu_decode_scores(md_cpu_isa isa, float *scores, int64_t ld, const float *q, int group,
                          const float *keys, int64_t len, int hd, float scale);
bool md_cpu_decode_values(md_cpu_isa isa, float *out, const float *p, int64_t ld, int group,
                          const float *values, int64_t len, int hd);

/* Prefill attention's two products (attn_prefill.c) for a tile of m query
 * rows that share one KV head, row i seeing keys [0, visible[i]):
 *   md_cpu_pack_keys: packed[(j / 16) * hd * 16 + d * 16 + j % 16] =
 *     keys[j * hd + d] for j < n, zeros up to the next multiple of 16 keys
 *     (md_cpu_packed_keys_floats(n, hd) floats);
 *   md_cpu_prefill_scores: scores[i * ld + j] = scale * sum_d q_rows[i][d]
 *     keys[j * hd + d] for j < visible[i]; entries of a row beyond its
 *     visible keys, up to the next multiple of 16 of the largest visible[]
 *     of its block of 6 rows, are written with unspecified values, so ld
 *     must be at least that multiple of 16 (md_cpu_prefill_ld of the
 *     largest visible[] is);
 *   md_cpu_prefill_values: out_rows[i][d] = sum_{k < visible[i]} p[i * ld + k]
 *     values[k * hd + d] for d < hd; p[i * ld + k] must be 0 for k from
 *     visible[i] up to the largest visible[] (the kernel may read them).
 * fp32, each output one chain in a fixed order. md_cpu_prefill_kernels says
 * whether `isa` has them for head_dim `hd` (AVX2 and AVX-512 paths, hd a
 * multiple of 16); the two products return false, writing nothing, where it
 * does not, and the caller uses sgemm. */
int64_t md_cpu_prefill_ld(int64_t n); /* n rounded up to the next multiple of 16 */
int64_t md_cpu_packed_keys_floats(int64_t n, int hd);
void md_cpu_pack_keys(float *packed, const float *keys, int64_t n, int hd);
bool md_cpu_prefill_kernels(md_cpu_isa isa, int hd);
bool md_cpu_prefill_scores(md_cpu_isa isa, float *scores, int64_t ld, const float *const *q_rows,
                           const int64_t *visible, int64_t m, const float *packed_keys, int hd,
                           float scale);
bool md_cpu_prefill_values(md_cpu_isa isa, float *const *out_rows, const float *p, int64_t ld,
                           const int64_t *visible, int64_t m, const float *values, int hd);

/* Attention (see md_kernel_ops.attention); scratch is allocated per call.
 * `received` is the capture buffer's floats (ignored when capture is NULL).
 * bf16_values (--bf16-gemm; only with the AVX-512 path on a CPU with
 * AVX-512 BF16): prefill's P V by md_bf16_prefill_values (gemm_bf16.h);
 * the scores, softmax, capture and decode stay float32.
 * Returns MD_E_NOMEM when a thread's score tile could not be allocated. */
md_status md_cpu_attention(md_cpu_isa isa, int threads, float *out, const float *q,
                           const float *cache, const md_attn_shape *shape, int64_t pos0,
                           int64_t n, const md_attn_hook *hook, const md_attn_capture *capture,
                           float *received, bool bf16_values);

#endif
