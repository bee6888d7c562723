#include "kernels/device.h"

#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/blas_core.h"
#include "kernels/cpu/cpu.h"
#include "md_build_config.h"
#if MD_HAVE_CUDA
#include "kernels/cuda/cuda.h"
#endif

bool md_device_cuda_built(void) { return MD_HAVE_CUDA != 0; }

int md_device_threads(int requested) { return md_cpu_threads(requested); }

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
    /* BF16 products by default for a BF16 checkpoint where they are twice
     * as fast, on the avx512 path they run on (not with
     * MEMDECAY_CPU_KERNELS choosing another); --exact-gemm keeps float32. */
    md_cpu_facts facts = md_cpu_read_facts();
    if (options && options->bf16_matrices && !options->exact_gemm &&
        md_cpu_bf16_gemm_preferred(&facts) &&
        (cpu.kernels == MD_CPU_KERNELS_BEST || cpu.kernels == MD_CPU_KERNELS_AVX512))
      cpu.bf16_gemm = true;
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

void md_device_describe(const md_kernels *k, int threads, char *text, size_t size) {
  if (size == 0) return;
  if (k->ops->describe) k->ops->describe(k, threads, text, size);
  else snprintf(text, size, "%s\n", k->ops->name);
}

static md_blas_env blas_env(void) {
  return (md_blas_env){.coretype = getenv(MD_DEVICE_ENV_BLAS_CORETYPE),
                       .setting = getenv(MD_DEVICE_ENV_BLAS_SETTING),
                       .from = getenv(MD_DEVICE_ENV_BLAS_FROM)};
}

void md_device_blas_startup_decide(md_device_blas_startup *startup) {
  *startup = (md_device_blas_startup){0};
  md_blas_env env = blas_env();
  const char *current = md_blas_core_current();
  md_cpu_facts facts = md_cpu_read_facts();
  md_blas_decision d = md_blas_core_decide(&env, current, &facts);
  switch (d.action) {
    case MD_BLAS_STAY: return;
    case MD_BLAS_WARN_WEAK:
      snprintf(startup->warning, sizeof startup->warning, "OpenBLAS has no %s kernels for this "
               "CPU: matrix products run on its %s kernels", d.requested, current);
      return;
    case MD_BLAS_WARN_SETTING:
      snprintf(startup->warning, sizeof startup->warning, MD_DEVICE_ENV_BLAS_SETTING "=%s: not an "
               "OpenBLAS core this CPU runs (expected auto, keep, simulate-weak or a core such as "
               "%s): OpenBLAS keeps its %s kernels", d.requested, d.best ? d.best : "Prescott",
               current);
      return;
    case MD_BLAS_REPLACE:
      snprintf(startup->warning, sizeof startup->warning, MD_DEVICE_ENV_BLAS_CORETYPE "=%s names "
               "OpenBLAS kernels this CPU cannot run (they would stop the program on an illegal "
               "instruction): using its %s kernels instead", d.requested, d.coretype);
      break;
    case MD_BLAS_REEXEC: break;
  }
  /* Copies: the caller's setenv may free what getenv returned. */
  startup->reexec = true;
  snprintf(startup->coretype, sizeof startup->coretype, "%s", d.coretype);
  snprintf(startup->from, sizeof startup->from, "%s", d.from ? d.from : "");
}

/* The variables by which a user chooses how OpenMP's idle threads wait. */
static const char *const omp_wait_settings[] = {
    MD_DEVICE_ENV_OMP_WAIT_POLICY, MD_DEVICE_ENV_GOMP_SPINCOUNT, MD_DEVICE_ENV_KMP_BLOCKTIME};
enum { n_omp_wait_settings = sizeof omp_wait_settings / sizeof omp_wait_settings[0] };

bool md_device_omp_wait_startup(void) {
  for (int i = 0; i < n_omp_wait_settings; i++)
    if (getenv(omp_wait_settings[i])) return false;
  return getenv(MD_DEVICE_ENV_OMP_WAIT_FROM) == NULL;
}

void md_device_describe_omp_wait(char *text, size_t size) {
  const char *from = getenv(MD_DEVICE_ENV_OMP_WAIT_FROM);
  const char *spin = getenv(MD_DEVICE_ENV_GOMP_SPINCOUNT);
  const char *block = getenv(MD_DEVICE_ENV_KMP_BLOCKTIME);
  if (from && spin && block && !getenv(MD_DEVICE_ENV_OMP_WAIT_POLICY)) {
    snprintf(text, size, "openmp: waiting threads spin %s rounds (libgomp, "
             MD_DEVICE_ENV_GOMP_SPINCOUNT ") or %s ms (libomp, " MD_DEVICE_ENV_KMP_BLOCKTIME
             "), then sleep (set by %s: " MD_DEVICE_ENV_OMP_WAIT_POLICY ", "
             MD_DEVICE_ENV_GOMP_SPINCOUNT " and " MD_DEVICE_ENV_KMP_BLOCKTIME " were unset)\n",
             spin, block, from);
    return;
  }
  char set[256] = "";
  size_t used = 0;
  for (int i = 0; i < n_omp_wait_settings; i++) {
    const char *value = getenv(omp_wait_settings[i]);
    if (!value || used >= sizeof set) continue;
    int n = snprintf(set + used, sizeof set - used, "%s%s=%s", used ? ", " : "",
                     omp_wait_settings[i], value);
    if (n > 0) used += (size_t)n;
  }
  if (used)
    snprintf(text, size, "openmp: waiting as the environment says (%s)\n", set);
  else
    snprintf(text, size, "openmp: the runtime's default waiting (" MD_DEVICE_ENV_GOMP_SPINCOUNT
             " could not be set)\n");
}

void md_device_describe_blas(char *text, size_t size) {
  md_blas_env env = blas_env();
  const char *core = md_blas_core_current();
  md_cpu_facts facts = md_cpu_read_facts();
  md_blas_decision d = md_blas_core_decide(&env, core, &facts);
  char library[64];
  md_blas_library(library, sizeof library);
  /* A core as good as the one this CPU deserves is named as the best:
   * OpenBLAS 0.3.21 runs AMD Zen 4 on Cooperlake, SkylakeX's kernels plus
   * BF16 ones, which is right, and "best: SkylakeX" would read as a fault. */
  const char *best = d.best ? d.best : "any";
  if (d.best && *core && md_blas_core_rank(core) >= md_blas_core_rank(d.best)) best = core;
  const char *chosen = "";
  char switched[96] = "";
  switch (d.origin) {
    case MD_BLAS_ORIGIN_LIBRARY: break;
    case MD_BLAS_ORIGIN_USER: chosen = " (set by " MD_DEVICE_ENV_BLAS_CORETYPE ")"; break;
    case MD_BLAS_ORIGIN_KEEP: chosen = " (kept: " MD_DEVICE_ENV_BLAS_SETTING "=keep)"; break;
    case MD_BLAS_ORIGIN_SWITCHED:
      snprintf(switched, sizeof switched, " (switched from %s)", d.from);
      chosen = switched;
      break;
    case MD_BLAS_ORIGIN_SIMULATED:
      chosen = " (simulated: " MD_DEVICE_ENV_BLAS_SETTING "=simulate-weak)";
      break;
  }
  snprintf(text, size, "blas: %s, core %s (best for this CPU: %s)%s\n", library,
           *core ? core : "unknown", best, chosen);
}
