/* memdecay-calibrate devices: which compute back ends this build has and
 * whether each can run on this machine; with --device, opens that one
 * device exactly as the model commands do, and fails as they would. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/cli.h"
#include "kernels/cpu/blas_core.h"
#include "kernels/cpu/cpu.h"
#include "kernels/device.h"
#include "md_build_config.h"
#if MD_HAVE_CUDA
#include "kernels/cuda/cuda.h"
#endif

static const char command[] = "devices";

static void print_help(FILE *out) {
  fputs("Usage: " MD_PROGRAM " devices [--device NAME] [--threads N]\n"
        "\n"
        "Lists the compute back ends of this build and whether each can run here:\n"
        "the CPU always; CUDA when the build has it (meson -Dcuda) and the machine has\n"
        "an NVIDIA GPU of compute capability 8.0 or newer with a working driver.\n"
        "The CPU's line is followed by the BLAS's: the library, the OpenBLAS core\n"
        "(kernel set) it runs, the best core for this CPU, and who chose it (the\n"
        "program switches to the best core unless OPENBLAS_CORETYPE is set; see\n"
        "MEMDECAY_BLAS_CORE in the manual).\n"
        "\n"
        "Options:\n"
        "      --device NAME   check only this device (cpu, cuda or cuda:N), as the model\n"
        "                      commands open it; exit 3 when it cannot be used\n"
        "      --threads N     CPU threads (default: all cores)\n"
        "  -h, --help          this text\n"
        "\n"
        "Exit status: 0 when the device asked for can be used (without --device:\n"
        "always); 2 for a usage error or an unknown device name; 3 when the device\n"
        "cannot be used (the message says why).\n",
        out);
}

/* One line for an opened back end. */
static void describe(const char *name, const md_kernels *k, int threads) {
  if (!strcmp(k->ops->name, "cpu")) {
    if (threads > 0)
      printf("%s: %s kernels, %d thread%s\n", name, md_kernels_cpu_isa(k), threads, threads == 1 ? "" : "s");
    else printf("%s: %s kernels, all cores\n", name, md_kernels_cpu_isa(k));
    return;
  }
#if MD_HAVE_CUDA
  printf("%s\n", md_kernels_cuda_describe(k));
#else
  printf("%s: %s\n", name, k->ops->name);
#endif
}

/* The BLAS line: which OpenBLAS core runs, the one this CPU deserves, and
 * who chose (main.c may have switched it before this ran). */
static void describe_blas(void) {
  md_blas_env env = {.coretype = getenv(MD_BLAS_ENV_CORETYPE),
                     .setting = getenv(MD_BLAS_ENV_SETTING),
                     .from = getenv(MD_BLAS_ENV_FROM)};
  const char *core = md_blas_core_current();
  md_cpu_facts facts = md_cpu_read_facts();
  md_blas_decision d = md_blas_core_decide(&env, core, &facts);
  char library[64];
  md_blas_library(library, sizeof library);
  printf("blas: %s, core %s (best for this CPU: %s)", library, *core ? core : "unknown",
         d.best ? d.best : "any");
  switch (d.origin) {
    case MD_BLAS_ORIGIN_LIBRARY: break;
    case MD_BLAS_ORIGIN_USER: printf(" (set by " MD_BLAS_ENV_CORETYPE ")"); break;
    case MD_BLAS_ORIGIN_KEEP: printf(" (kept: " MD_BLAS_ENV_SETTING "=keep)"); break;
    case MD_BLAS_ORIGIN_SWITCHED: printf(" (switched from %s)", d.from); break;
    case MD_BLAS_ORIGIN_SIMULATED: printf(" (simulated: " MD_BLAS_ENV_SETTING "=simulate-weak)"); break;
  }
  putchar('\n');
}

/* Opens `name`; prints its line, or the reason to stderr. */
static int open_device(const char *name, int threads, bool listing) {
  md_device_options options = {.device = name, .threads = threads};
  md_kernels *k = NULL;
  md_error err = {0};
  if (md_device_open(&options, &k, &err) != MD_OK) {
    if (listing) {
      printf("%s: unavailable: %s\n", name, err.message);
      return MD_EXIT_OK;
    }
    return md_cli_report(&err);
  }
  describe(name, k, threads);
  md_kernels_free(k);
  return MD_EXIT_OK;
}

int md_cmd_devices(int argc, char **argv) {
  const char *device = NULL;
  long threads = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      print_help(stdout);
      return MD_EXIT_OK;
    } else if (!strcmp(argv[i], "--device") || !strcmp(argv[i], "--threads")) {
      if (i + 1 >= argc) return md_cli_usage_error(command, "option %s needs a value", argv[i]);
      if (!strcmp(argv[i], "--device")) device = argv[++i];
      else if (!md_cli_parse_long(argv[++i], 1, 4096, &threads))
        return md_cli_usage_error(command, "--threads: '%s' is not a whole number from 1 to 4096", argv[i]);
    } else {
      return md_cli_usage_error(command, "unexpected argument '%s'", argv[i]);
    }
  }
  if (device) return open_device(device, (int)threads, false);
  open_device("cpu", (int)threads, true);
  describe_blas();
  if (!md_device_cuda_built()) {
    printf("cuda: not in this build (rebuild with nvcc installed: meson setup -Dcuda=enabled)\n");
    return MD_EXIT_OK;
  }
  return open_device("cuda", (int)threads, true);
}
