/* Failure records of the CUDA back end: every CUDA runtime and cuBLAS call
 * and every kernel launch goes through these, so that the first failure is
 * kept with the call or kernel, the source line and CUDA's own error text,
 * and reported at the next synchronisation (kernels/kernels.h, Errors). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/cuda_internal.h"

const char *md_cuda_short_site(const char *site) {
  const char *project = strstr(site, "kernels/");
  return project ? project : site;
}

/* Errors of a kernel that faulted while running: they are sticky (the
 * context is unusable afterwards) and surface at the next call that waits,
 * so the call that reports them is rarely the one at fault. */
static bool is_kernel_fault(cudaError_t code) {
  switch (code) {
  case cudaErrorIllegalAddress:
  case cudaErrorLaunchTimeout:
  case cudaErrorAssert:
  case cudaErrorHardwareStackError:
  case cudaErrorIllegalInstruction:
  case cudaErrorMisalignedAddress:
  case cudaErrorInvalidAddressSpace:
  case cudaErrorInvalidPc:
  case cudaErrorLaunchFailure:
    return true;
  default:
    return false;
  }
}

static void record(md_cuda_ctx *ctx, md_status status, const char *message) {
  if (ctx->status != MD_OK) return; /* the first failure is the informative one */
  ctx->status = status;
  md_fail(&ctx->error, status, "%s", message);
}

/* The clause naming the last kernel queued, for a kernel fault. */
static void fault_context(const md_cuda_ctx *ctx, cudaError_t code, char *out, size_t size) {
  out[0] = '\0';
  if (!is_kernel_fault(code) || !ctx->last_kernel) return;
  snprintf(out, size, "; the last kernel queued was %s (launched at %s)%s", ctx->last_kernel,
           md_cuda_short_site(ctx->last_site),
           ctx->sync_each_launch ? ""
                                 : "; set MD_CUDA_SYNC=1 to synchronise after every kernel and name "
                                   "the one at fault");
}

bool md_cuda_check(md_cuda_ctx *ctx, cudaError_t code, const char *call, const char *site) {
  if (code == cudaSuccess) return true;
  (void)cudaGetLastError(); /* clears a non-sticky error so that it is not reported twice */
  char context[512], message[MD_ERROR_MESSAGE_MAX];
  fault_context(ctx, code, context, sizeof context);
  snprintf(message, sizeof message, "cuda:%d: %s failed at %s: %s (%s)%s", ctx->device, call,
           md_cuda_short_site(site), cudaGetErrorString(code), cudaGetErrorName(code), context);
  record(ctx, code == cudaErrorMemoryAllocation ? MD_E_NOMEM : MD_E_DEVICE, message);
  return false;
}

void md_cuda_fail(md_cuda_ctx *ctx, md_status status, const char *fmt, ...) {
  char message[MD_ERROR_MESSAGE_MAX];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof message, fmt, args);
  va_end(args);
  record(ctx, status, message);
}

bool md_cuda_launch_begin(md_cuda_ctx *ctx, const char *kernel, unsigned grid_x, unsigned grid_y,
                          unsigned grid_z, unsigned block, size_t smem, const char *site) {
  if (ctx->status != MD_OK) return false;
  const unsigned max_grid_x = 0x7fffffffu, max_grid_yz = 65535u, max_block = 1024u;
  if (block == 0 || block > max_block || grid_x == 0 || grid_x > max_grid_x || grid_y == 0 ||
      grid_y > max_grid_yz || grid_z == 0 || grid_z > max_grid_yz || smem > ctx->max_smem_optin) {
    md_cuda_fail(ctx, MD_E_DEVICE,
                 "cuda:%d: kernel %s at %s: launch configuration grid (%u, %u, %u), %u threads, "
                 "%zu bytes of shared memory is outside the device's limits (%u threads, grid y "
                 "and z <= %u, %zu bytes of shared memory)",
                 ctx->device, kernel, md_cuda_short_site(site), grid_x, grid_y, grid_z, block, smem,
                 max_block, max_grid_yz, ctx->max_smem_optin);
    return false;
  }
  return true;
}

void md_cuda_launch_end(md_cuda_ctx *ctx, const char *kernel, const char *site) {
  ctx->launches++;
  cudaError_t code = cudaGetLastError();
  if (code != cudaSuccess) {
    char message[MD_ERROR_MESSAGE_MAX], context[512];
    fault_context(ctx, code, context, sizeof context); /* names the kernel before this one */
    snprintf(message, sizeof message, "cuda:%d: kernel %s (launched at %s): %s (%s)%s",
             ctx->device, kernel, md_cuda_short_site(site), cudaGetErrorString(code),
             cudaGetErrorName(code), context);
    record(ctx, MD_E_DEVICE, message);
    return;
  }
  ctx->last_kernel = kernel;
  ctx->last_site = site;
  if (ctx->sync_each_launch) {
    code = cudaStreamSynchronize(ctx->stream);
    if (code != cudaSuccess) {
      (void)cudaGetLastError();
      char message[MD_ERROR_MESSAGE_MAX];
      snprintf(message, sizeof message, "cuda:%d: kernel %s (launched at %s) failed: %s (%s)",
               ctx->device, kernel, md_cuda_short_site(site), cudaGetErrorString(code),
               cudaGetErrorName(code));
      record(ctx, MD_E_DEVICE, message);
    }
  }
}
