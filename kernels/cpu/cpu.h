/* The CPU back end: OpenBLAS (sgemm for prefill, sgemv for decode
 * attention), our own F32/F16/BF16 matrix-vector kernels (AVX2+FMA with a
 * portable C fallback, chosen at run time) and OpenMP over output rows and
 * attention heads. */
#ifndef MD_KERNELS_CPU_CPU_H
#define MD_KERNELS_CPU_CPU_H

#include "kernels/kernels.h"

typedef struct md_cpu_options {
  int threads;   /* OpenMP and OpenBLAS threads; 0 = all cores */
  int portable;  /* nonzero: use the portable C kernels even where AVX2 exists */
} md_cpu_options;

/* Creates a CPU back end. `options` may be NULL (all cores, best kernels).
 * OpenBLAS's thread count is process-wide: the last back end created sets
 * it. */
md_status md_kernels_cpu_new(const md_cpu_options *options, md_kernels **k, md_error *err);

/* The instruction set the back end's kernels use: "avx2" or "portable". */
const char *md_kernels_cpu_isa(const md_kernels *k);

#endif
