/* The CPU back end: OpenBLAS (sgemm for the prefill's products on the
 * portable and AVX-512 paths, and for attention on the portable path), our
 * own F32/F16/BF16 matrix-vector, attention, softmax and SiLU kernels
 * (AVX-512, AVX2+FMA, or portable C, chosen at run time), our own float32
 * GEMM for the prefill's products on the AVX2 path, and on the AVX-512
 * path when asked (gemm_f32.h, md_cpu_gemm), AVX-512 BF16 products for
 * BF16 prompts and decode rows (gemm_bf16.h; the device layer's default on AMD Zen 4 and 5,
 * md_cpu_bf16_gemm_preferred) and OpenMP over output
 * rows, attention tiles and blocks of keys. */
#ifndef MD_KERNELS_CPU_CPU_H
#define MD_KERNELS_CPU_CPU_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/kernels.h"

/* Which of our kernel paths a back end uses. */
typedef enum md_cpu_kernels {
  MD_CPU_KERNELS_BEST = 0,  /* the widest this CPU runs */
  MD_CPU_KERNELS_PORTABLE,  /* plain C */
  MD_CPU_KERNELS_AVX2,      /* AVX2 + FMA + F16C */
  MD_CPU_KERNELS_AVX512,    /* AVX-512 F/BW/VL/DQ besides AVX2 */
} md_cpu_kernels;

/* Who multiplies the prompt's float32 products (the MEMDECAY_CPU_GEMM
 * setting, kernels/device.h). Decode rows are matrix-vector products
 * either way, and --bf16-gemm's BF16 products are its own. */
typedef enum md_cpu_gemm {
  MD_CPU_GEMM_AUTO = 0, /* ours where it measured faster than OpenBLAS's
                           sgemm: the avx2 path, and the avx512 path of an
                           AMD Zen 5 or later (md_cpu_amd_zen5_or_later);
                           OpenBLAS on the other avx512 paths (ours not
                           reliably faster on the Intel Xeons measured; a
                           Zen 4 measured on OpenBLAS only) and on the
                           portable one. bench/README.md has the figures. */
  MD_CPU_GEMM_OWN,      /* ours (gemm_f32.h) on the avx2 or avx512 path */
  MD_CPU_GEMM_BLAS,     /* OpenBLAS's sgemm on every path */
} md_cpu_gemm;

/* Where the 2-D weights are read from (the MEMDECAY_CPU_WEIGHTS setting,
 * kernels/device.h). Either way the products are the same bits. */
typedef enum md_cpu_weights {
  MD_CPU_WEIGHTS_COPY = 0, /* a copy in this process's memory, the mapped
                              file's pages dropped as each is copied:
                              faster to stream on some CPUs (backend.c),
                              but each process holds its own copy */
  MD_CPU_WEIGHTS_MAPPED,   /* where the tensor lies (the checkpoint's
                              mapping): processes of one machine on one
                              checkpoint share its page cache, for example
                              several shard tasks on one node */
} md_cpu_weights;

typedef struct md_cpu_options {
  int threads;            /* OpenMP and OpenBLAS threads; 0 = all cores */
  md_cpu_kernels kernels; /* 0 = the best this CPU runs */
  bool bf16_gemm;         /* the products (prompt and decode) of BF16 weights with
                             AVX-512 BF16 (kernels/cpu/gemm_bf16.h): the
                             activations rounded to bf16; faster where
                             vdpbf16ps runs at twice the FMA rate (AMD Zen
                             4 and 5), slower where at half (the Intel
                             Xeons measured); off: float32, HF's
                             arithmetic. Other dtypes and decode steps are
                             float32 either way. */
  md_cpu_gemm gemm;       /* 0 = auto */
  md_cpu_weights weights; /* 0 = copy */
  bool dense_logits;      /* the LM head's all-zero row blocks multiplied
                             too (backend.c, packed_rows: skipping them
                             gives the same bits; tests compare the two) */
} md_cpu_options;

/* The CPUs this process may run on: its affinity mask's (taskset, Slurm's
 * cpusets), fewer under a cgroup v2 CPU quota (cpu.max, rounded up). */
int md_cpu_available(void);

/* The threads a run asking for `requested` (0 or less: all) computes with:
 * at most md_cpu_available() and OpenMP's thread limit (OMP_THREAD_LIMIT);
 * more threads than CPUs only take turns on them. */
int md_cpu_threads(int requested);

/* Creates a CPU back end. `options` may be NULL (all cores, best kernels).
 * Fails with MD_E_DEVICE when the kernels asked for need instructions this
 * CPU lacks (bf16_gemm: AVX-512 BF16 and the avx512 path; gemm OWN: the
 * avx2 or avx512 path). OpenBLAS's
 * thread count is process-wide: the last back end created sets it. */
md_status md_kernels_cpu_new(const md_cpu_options *options, md_kernels **k, md_error *err);

/* The instruction set the back end's kernels use: "avx512", "avx2" or
 * "portable". */
const char *md_kernels_cpu_isa(const md_kernels *k);

/* Whether the back end multiplies BF16 prompts with AVX-512 BF16
 * (md_cpu_options.bf16_gemm). */
bool md_kernels_cpu_bf16_gemm(const md_kernels *k);
/* Rows of a CPU weight's packed copy of its nonzero 4-row blocks (the
 * logits multiply only those; md_cpu_options.dense_logits), 0 when it has
 * none: a matrix of fewer than 8,192 rows, or with more than half of its
 * blocks nonzero. */
int64_t md_kweight_cpu_packed_rows(const md_kweight *w);

/* Who multiplies the prompt's float32 products, md_cpu_gemm resolved:
 * "own" (gemm_f32.h) or "blas" (OpenBLAS's sgemm). */
const char *md_kernels_cpu_gemm(const md_kernels *k);

/* "auto", "own", "blas" -> the value; false for anything else (the
 * MEMDECAY_CPU_GEMM setting, kernels/device.h). */
bool md_cpu_gemm_parse(const char *name, md_cpu_gemm *gemm);

/* Where the back end reads its 2-D weights: "copy" or "mapped"
 * (md_cpu_options.weights). */
const char *md_kernels_cpu_weights(const md_kernels *k);

/* "copy", "mapped" -> the value; false for anything else (the
 * MEMDECAY_CPU_WEIGHTS setting, kernels/device.h). */
bool md_cpu_weights_parse(const char *name, md_cpu_weights *weights);

/* The kernel paths this CPU runs, narrowest first (portable always):
 * fills `paths` (room for 3) and returns how many. For tests and
 * benchmarks that compare them. */
int md_cpu_kernel_paths(md_cpu_kernels paths[3]);

/* "best", "portable", "avx2", "avx512" -> the value; false for anything
 * else (the MEMDECAY_CPU_KERNELS setting, kernels/device.h). */
bool md_cpu_kernels_parse(const char *name, md_cpu_kernels *kernels);

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
  int family, model; /* CPUID leaf 1 EAX's display family and model (the
                        extended fields added as both vendors' manuals say:
                        AMD Zen 3/4 are family 25, Zen 5 26); 0 off x86 */
  bool avx, avx2, fma, f16c;
  bool avx512f, avx512bw, avx512vl, avx512dq, avx512cd;
  bool avx512_bf16; /* CPUID leaf 7 subleaf 1 EAX bit 5; used only by
                       md_cpu_options.bf16_gemm (prompt and decode products; on by
                       default where md_cpu_bf16_gemm_preferred) */
} md_cpu_facts;

/* The facts as words, for `devices`: "avx avx2 fma f16c avx512f ...",
 * the features present in that order; "none" when there are none.
 * Returns `out`. */
char *md_cpu_facts_describe(const md_cpu_facts *facts, char *out, size_t size);

/* "Intel", "AMD" or "other", for `devices`. */
const char *md_cpu_vendor_name(md_cpu_vendor vendor);

/* Reads the facts of the CPU this runs on: the CPUID reading that also
 * picks the back end's own kernels (md_cpu_detect_isa). */
md_cpu_facts md_cpu_read_facts(void);

/* With BF16 products (md_cpu_options.bf16_gemm), a product of BF16
 * weights with at least this many rows of x goes to the BF16 GEMM
 * (gemm_bf16.h), fewer to md_bf16_rows (decode steps, batched or not, and
 * short prompts): the GEMM repacks all of W on every call, which for a
 * short prompt (an eval probe's question, a short message) costs more than
 * its products; long prompts run faster through the GEMM (bench/README.md
 * has the measurements that chose 64). */
#define MD_CPU_BF16_GEMM_MIN_ROWS 64

/* Whether BF16 products (md_cpu_options.bf16_gemm) are the default
 * on this CPU: an AMD CPU with AVX-512 BF16 (Zen 4 and 5), whose
 * vdpbf16ps runs at twice the float32 FMA rate; not the Intel Xeons
 * measured, where it was no faster (bench/README.md).
 * The user's --exact-gemm keeps float32. */
bool md_cpu_bf16_gemm_preferred(const md_cpu_facts *facts);

#endif
