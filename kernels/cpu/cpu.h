/* The CPU back end: OpenBLAS (sgemm for the prefill's products and for
 * attention, prefill and decode), our own F32/F16/BF16 matrix-vector
 * kernels (AVX2+FMA with a portable C fallback, chosen at run time) and
 * OpenMP over output rows, attention tiles and blocks of keys. */
#ifndef MD_KERNELS_CPU_CPU_H
#define MD_KERNELS_CPU_CPU_H

#include <stdbool.h>

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

typedef enum md_cpu_vendor {
  MD_CPU_VENDOR_OTHER = 0,
  MD_CPU_VENDOR_INTEL,
  MD_CPU_VENDOR_AMD,
} md_cpu_vendor;

/* What this CPU offers, as CPUID reports it and the OS enables it: the AVX
 * features count only when the OS saves the YMM registers (XCR0 bits 1-2),
 * the AVX-512 ones only when it also saves the opmask and ZMM registers
 * (XCR0 bits 5-7). All false on CPUs other than x86. */
typedef struct md_cpu_facts {
  md_cpu_vendor vendor;
  bool avx, avx2, fma, f16c;
  bool avx512f, avx512bw, avx512vl, avx512dq, avx512cd;
} md_cpu_facts;

/* Reads the facts of the CPU this runs on: the CPUID reading that also
 * picks the back end's own kernels (md_cpu_detect_isa). */
md_cpu_facts md_cpu_read_facts(void);

#endif
