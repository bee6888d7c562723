/* Choosing a compute back end by name, as the command line does
 * (--device cpu | cuda | cuda:N). */
#ifndef MD_KERNELS_DEVICE_H
#define MD_KERNELS_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "kernels/kernels.h"

typedef struct md_device_options {
  const char *device; /* "cpu" (default when NULL), "cuda" (= "cuda:0") or "cuda:N" */
  int threads;        /* CPU threads (OpenMP, OpenBLAS); 0 = all cores */
  bool exact_gemm;    /* prompt (prefill) products in fp32: on CUDA instead of
                         BF16/F16 tensor cores (kernels/cuda/cuda.h,
                         MD_CUDA_GEMM_EXACT), on the CPU instead of the BF16
                         products that are its default where
                         md_cpu_bf16_gemm_preferred (AMD Zen 4 and 5) */
  bool no_cuda_graphs; /* CUDA: launch decode steps kernel by kernel instead of
                          replaying them as CUDA graphs (kernels/cuda/graph.c) */
  bool bf16_gemm;     /* CPU: products (prompt and decode) of BF16 weights
                         with AVX-512 BF16, the activations rounded to BF16
                         (md_cpu_options.bf16_gemm), also where it is not
                         the default; the CUDA back end's default already
                         multiplies so, and ignores it */
  bool bf16_matrices; /* the checkpoint's weight matrices are BF16: only then
                          are BF16 products the CPU's default (on an
                          F32 or F16 checkpoint the default stays float32) */
} md_device_options;

/* True when this build contains the CUDA back end (meson -Dcuda). */
bool md_device_cuda_built(void);

/* The CPU threads a run asking for `requested` (0: all cores) computes
 * with: at most the CPUs this process may run on (its affinity mask, a
 * cgroup CPU quota) and OpenMP's thread limit (OMP_THREAD_LIMIT). What
 * run.json and the eval's results record. */
int md_device_threads(int requested);

/* The environment variable that chooses the CPU back end's kernel path:
 * best (the default, also when unset or empty), portable, avx2 or avx512. */
#define MD_DEVICE_ENV_CPU_KERNELS "MEMDECAY_CPU_KERNELS"

/* The environment variable that chooses who multiplies the CPU back end's
 * float32 prompt products: auto (the default, also when unset or empty:
 * ours on the avx2 path and on an AMD Zen 5's or later avx512 path,
 * OpenBLAS on the others), own or blas (md_cpu_gemm). */
#define MD_DEVICE_ENV_CPU_GEMM "MEMDECAY_CPU_GEMM"

/* The environment variable that chooses where the CPU back end reads its
 * 2-D weights: copy (the default, also when unset or empty) or mapped
 * (md_cpu_weights). */
#define MD_DEVICE_ENV_CPU_WEIGHTS "MEMDECAY_CPU_WEIGHTS"

/* The environment variables of OpenBLAS's kernel choice
 * (md_device_blas_startup): OpenBLAS's own, the program's setting
 * (auto, keep, simulate-weak or a core name; memdecay-calibrate(1),
 * MEMDECAY_BLAS_CORE) and the note of the core OpenBLAS had chosen. */
#define MD_DEVICE_ENV_BLAS_CORETYPE "OPENBLAS_CORETYPE"
#define MD_DEVICE_ENV_BLAS_SETTING "MEMDECAY_BLAS_CORE"
#define MD_DEVICE_ENV_BLAS_FROM "MD_BLAS_CORE_FROM"

/* What a program does about OpenBLAS's kernels at start-up, before anything
 * calls OpenBLAS: OpenBLAS chose them when it loaded and reads
 * OPENBLAS_CORETYPE only then, so when it chose narrower kernels than this
 * CPU runs (a library older than the CPU falls back to SSE3) the program
 * sets the two variables and executes itself again. */
typedef struct md_device_blas_startup {
  char warning[512];  /* "" or a warning to print first (no program name, no newline) */
  bool reexec;        /* set OPENBLAS_CORETYPE=coretype and MD_BLAS_CORE_FROM=from, run again */
  char coretype[64];
  char from[64];
} md_device_blas_startup;

/* Decides from the environment, the core OpenBLAS runs and the CPU
 * (kernels/cpu/blas_core.h). Each re-execution leads to a state where the
 * next decision is not to, but for simulate-weak's first, which leads to
 * one more. */
void md_device_blas_startup_decide(md_device_blas_startup *startup);

/* The OpenMP runtime's waiting threads (md_device_omp_wait_startup). After
 * a parallel region idle threads spin before they sleep, by default for
 * milliseconds (libgomp's GOMP_SPINCOUNT, libomp's KMP_BLOCKTIME; their
 * defaults are in memdecay-calibrate(1), ENVIRONMENT): on cores shared with
 * another busy process (a second run, a training job) they hold the cores
 * the other needs, and both slow down. The program bounds the spin unless
 * the user chose: the runtime reads these variables only when it loads, so
 * the program sets them and executes itself again. */
#define MD_DEVICE_ENV_OMP_WAIT_POLICY "OMP_WAIT_POLICY"
#define MD_DEVICE_ENV_GOMP_SPINCOUNT "GOMP_SPINCOUNT"
#define MD_DEVICE_ENV_KMP_BLOCKTIME "KMP_BLOCKTIME"
#define MD_DEVICE_ENV_OMP_WAIT_FROM "MD_OMP_WAIT_FROM"
/* The bound: short enough that idle threads sleep soon after their
 * process's work stops, long enough to catch the next parallel region of
 * the same step (libgomp uses this count itself when it knows the cores are
 * oversubscribed); libomp's block time is in whole milliseconds, so its
 * smallest non-zero value. bench/shared_cores.sh measures the choice. */
#define MD_DEVICE_OMP_SPINCOUNT "1000"
#define MD_DEVICE_OMP_BLOCKTIME "1"

/* True when none of OMP_WAIT_POLICY, GOMP_SPINCOUNT, KMP_BLOCKTIME and
 * MD_OMP_WAIT_FROM is set in the environment: the program should set
 * GOMP_SPINCOUNT and KMP_BLOCKTIME to the bound, MD_OMP_WAIT_FROM to its
 * name, and execute itself again. */
bool md_device_omp_wait_startup(void);

/* The OpenMP line of `devices`: how waiting threads wait and who chose it,
 * ending in '\n'; truncated to size. */
void md_device_describe_omp_wait(char *text, size_t size);

/* The BLAS line of `devices`: the library, the core it runs, the best core
 * for this CPU and who chose it, ending in '\n'; truncated to size. */
void md_device_describe_blas(char *text, size_t size);

/* What `devices` prints about an opened back end (its describe op; its name
 * when it has none): lines ending in '\n', truncated to size. `threads` is
 * what was asked for (0: all cores). */
void md_device_describe(const md_kernels *k, int threads, char *text, size_t size);

/* Creates the back end. Fails with MD_E_INVALID for an unknown device name,
 * an unknown MEMDECAY_CPU_KERNELS, MEMDECAY_CPU_GEMM or MEMDECAY_CPU_WEIGHTS
 * value, or exact_gemm with bf16_gemm; with MD_E_DEVICE when CUDA was asked
 * for but this build has no CUDA back end or the machine has no usable GPU,
 * when MEMDECAY_CPU_KERNELS asks for a path this CPU cannot run, or
 * bf16_gemm for a CPU without AVX-512 BF16 (the message says which). */
md_status md_device_open(const md_device_options *options, md_kernels **kernels, md_error *err);

#endif
