/* Choosing a compute back end by name, as the command line does
 * (--device cpu | cuda | cuda:N). */
#ifndef MD_KERNELS_DEVICE_H
#define MD_KERNELS_DEVICE_H

#include <stdbool.h>

#include "io/base/error.h"
#include "kernels/kernels.h"

typedef struct md_device_options {
  const char *device; /* "cpu" (default when NULL), "cuda" (= "cuda:0") or "cuda:N" */
  int threads;        /* CPU threads (OpenMP, OpenBLAS); 0 = all cores */
  bool exact_gemm;    /* CUDA: prompt (prefill) products in fp32, the CPU back
                         end's results to fp32 rounding, instead of BF16/F16
                         tensor cores (kernels/cuda/cuda.h, MD_CUDA_GEMM_EXACT) */
  bool no_cuda_graphs; /* CUDA: launch decode steps kernel by kernel instead of
                          replaying them as CUDA graphs (kernels/cuda/graph.c) */
  bool bf16_gemm;     /* CPU: prompt products of BF16 weights with AVX-512
                         BF16, the activations rounded to BF16
                         (md_cpu_options.bf16_gemm); the CUDA back end's
                         default already multiplies so, and ignores it */
} md_device_options;

/* True when this build contains the CUDA back end (meson -Dcuda). */
bool md_device_cuda_built(void);

/* The CPU threads a run asking for `requested` (0: all cores) computes
 * with: at most OpenMP's thread limit (OMP_THREAD_LIMIT). What run.json
 * records. */
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

/* Creates the back end. Fails with MD_E_INVALID for an unknown device name,
 * an unknown MEMDECAY_CPU_KERNELS, MEMDECAY_CPU_GEMM or MEMDECAY_CPU_WEIGHTS
 * value, or exact_gemm with bf16_gemm; with MD_E_DEVICE when CUDA was asked
 * for but this build has no CUDA back end or the machine has no usable GPU,
 * when MEMDECAY_CPU_KERNELS asks for a path this CPU cannot run, or
 * bf16_gemm for a CPU without AVX-512 BF16 (the message says which). */
md_status md_device_open(const md_device_options *options, md_kernels **kernels, md_error *err);

#endif
