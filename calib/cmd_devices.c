/* memdecay-calibrate devices: which compute back ends this build has and
 * whether each can run on this machine; with --device, opens that one
 * device exactly as the model commands do, and fails as they would. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/cli.h"
#include "calib/commands.h"
#include "kernels/device.h"
#include "md_build_config.h"

static const char command[] = "devices";

static void print_help(FILE *out) {
  fputs("Usage: " MD_PROGRAM " devices [--device NAME] [--threads N]\n"
        "\n"
        "Lists the compute back ends of this build and whether each can run here:\n"
        "the CPU always; CUDA when the build has it (meson -Dcuda) and the machine has\n"
        "an NVIDIA GPU of compute capability 8.0 or newer with a working driver.\n"
        "The CPU's line names our kernel path (avx512, avx2 or portable: the widest\n"
        "this CPU runs unless MEMDECAY_CPU_KERNELS says otherwise); the next line\n"
        "lists the CPU's vector features (CPUID, as the OS enables them), the next its\n"
        "vendor, family and model (CPUID's display values, as /proc/cpuinfo has them);\n"
        "then who multiplies the prompt's float32 products: our own GEMM (\"own\", the\n"
        "default on the avx2 path and on the avx512 path of an AMD Zen 5 or later,\n"
        "family 26 on) or OpenBLAS's sgemm (\"blas\"; MEMDECAY_CPU_GEMM chooses);\n"
        "then where the 2-D weights are read: a copy in the process's memory (\"copy\",\n"
        "the default) or the checkpoint's mapping (\"mapped\", shared by the processes\n"
        "of one machine; MEMDECAY_CPU_WEIGHTS chooses); then the products (prompt and\n"
        "decode) of BF16 weights: BF16 (vdpbf16ps, the default on AMD CPUs with\n"
        "AVX-512 BF16: Zen 4 and 5) or float32 (elsewhere, and with --exact-gemm on\n"
        "any command).\n"
        "The BLAS's line follows: the library, the OpenBLAS core (kernel set) it runs,\n"
        "the best core for this CPU, and who chose it (the program switches to the\n"
        "best core unless OPENBLAS_CORETYPE is set; see MEMDECAY_BLAS_CORE in the\n"
        "manual). The OpenMP line says how idle threads wait: unless OMP_WAIT_POLICY,\n"
        "GOMP_SPINCOUNT or KMP_BLOCKTIME is set, the model commands (run, collect,\n"
        "eval) bound their spinning (GOMP_SPINCOUNT=1000, KMP_BLOCKTIME=1) so that\n"
        "they do not hold cores another busy process needs.\n"
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
  char text[1024];
  md_device_describe(k, threads, text, sizeof text);
  fputs(text, stdout);
  md_kernels_free(k);
  return MD_EXIT_OK;
}

typedef struct options {
  const char *device;
  long threads;
} options;

enum { OPT_DEVICE, OPT_THREADS, OPT_HELP };

static const md_opt devices_table[] = {
    {"device", 0, OPT_DEVICE, "NAME"},
    {"threads", 0, OPT_THREADS, "N"},
    {"help", 'h', OPT_HELP, NULL},
    {NULL, 0, 0, NULL},
};

/* Handles one option; returns -1 to go on, else the exit code. */
static int take_option(void *context, const md_opt *opt, const char *value) {
  options *o = context;
  switch (opt->id) {
    case OPT_DEVICE: o->device = value; return -1;
    case OPT_THREADS:
      if (!md_cli_parse_long(value, 1, 4096, &o->threads))
        return md_cli_usage_error(command, "--threads: '%s' is not a whole number from 1 to 4096", value);
      return -1;
    case OPT_HELP: print_help(stdout); return MD_EXIT_OK;
    default: return md_cli_usage_error(command, "unknown option");
  }
}

static const md_opt_group groups[] = {{devices_table, take_option}, {NULL, NULL}};

const md_opt_command md_devices_command = {"devices", groups, print_help, 0};

int md_cmd_devices(int argc, char **argv) {
  options o = {0};
  char **args;
  int n_args;
  int code = md_opt_parse_or_report(&md_devices_command, &o, argc, argv, &args, &n_args);
  if (code >= 0) return code;
  if (n_args > 0) return md_cli_usage_error(command, "unexpected argument '%s'", args[0]);
  if (o.device) return open_device(o.device, (int)o.threads, false);
  open_device("cpu", (int)o.threads, true);
  char blas[256];
  md_device_describe_blas(blas, sizeof blas);
  fputs(blas, stdout);
  char omp[512];
  md_device_describe_omp_wait(omp, sizeof omp);
  fputs(omp, stdout);
  if (!md_device_cuda_built()) {
    printf("cuda: not in this build (rebuild with nvcc installed: meson setup -Dcuda=enabled)\n");
    return MD_EXIT_OK;
  }
  return open_device("cuda", (int)o.threads, true);
}
