#include "kernels/device.h"

#include <errno.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "md_build_config.h"
#if MD_HAVE_CUDA
#include "kernels/cuda/cuda.h"
#endif

bool md_device_cuda_built(void) { return MD_HAVE_CUDA != 0; }

int md_device_threads(int requested) {
  int threads = requested > 0 ? requested : omp_get_num_procs();
  int limit = omp_get_thread_limit();
  return limit > 0 && threads > limit ? limit : threads;
}

/* "cuda" -> 0, "cuda:N" -> N; -1 when the name is not a CUDA device. */
static int cuda_ordinal(const char *name) {
  if (strcmp(name, "cuda") == 0) return 0;
  if (strncmp(name, "cuda:", 5) != 0 || name[5] == '\0') return -1;
  char *end = NULL;
  errno = 0;
  long ordinal = strtol(name + 5, &end, 10);
  if (errno || *end != '\0' || ordinal < 0 || ordinal > 1024) return -1;
  return (int)ordinal;
}

md_status md_device_open(const md_device_options *options, md_kernels **kernels, md_error *err) {
  const char *name = options && options->device ? options->device : "cpu";
  int threads = options ? options->threads : 0;
  if (options && options->exact_gemm && options->bf16_gemm)
    return md_fail(err, MD_E_INVALID, "--exact-gemm and --bf16-gemm contradict each other: "
                   "float32 or BF16 prompt products, not both");
  if (strcmp(name, "cpu") == 0) {
    md_cpu_options cpu = {.threads = threads, .bf16_gemm = options && options->bf16_gemm};
    const char *path = getenv(MD_DEVICE_ENV_CPU_KERNELS);
    if (path && *path && !md_cpu_kernels_parse(path, &cpu.kernels))
      return md_fail(err, MD_E_INVALID,
                     MD_DEVICE_ENV_CPU_KERNELS " is '%s'; expected best, portable, avx2 or avx512",
                     path);
    const char *gemm = getenv(MD_DEVICE_ENV_CPU_GEMM);
    if (gemm && *gemm && !md_cpu_gemm_parse(gemm, &cpu.gemm))
      return md_fail(err, MD_E_INVALID,
                     MD_DEVICE_ENV_CPU_GEMM " is '%s'; expected auto, own or blas", gemm);
    const char *weights = getenv(MD_DEVICE_ENV_CPU_WEIGHTS);
    if (weights && *weights && !md_cpu_weights_parse(weights, &cpu.weights))
      return md_fail(err, MD_E_INVALID,
                     MD_DEVICE_ENV_CPU_WEIGHTS " is '%s'; expected copy or mapped", weights);
    return md_kernels_cpu_new(&cpu, kernels, err);
  }
  int ordinal = cuda_ordinal(name);
  if (ordinal < 0)
    return md_fail(err, MD_E_INVALID, "unknown device '%s' (expected cpu, cuda or cuda:N)", name);
#if MD_HAVE_CUDA
  md_cuda_options cuda = {.device = ordinal,
                          .gemm = options && options->exact_gemm ? MD_CUDA_GEMM_EXACT
                                                                 : MD_CUDA_GEMM_FAST,
                          .no_graphs = options && options->no_cuda_graphs};
  return md_kernels_cuda_new(&cuda, kernels, err);
#else
  return md_fail(err, MD_E_DEVICE,
                 "device '%s': this build of memdecay-calibrate has no CUDA back end "
                 "(rebuild with nvcc installed, meson setup -Dcuda=enabled)",
                 name);
#endif
}
