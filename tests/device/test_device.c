/* Opening back ends by name (kernels/device.h), in every build and on every
 * machine: the CPU always opens; "cuda" and "cuda:N" open a CUDA back end on
 * a machine with a usable GPU, and otherwise fail with MD_E_DEVICE and a
 * message that says why: this build has no CUDA back end (built without
 * nvcc), or there is no usable device (no driver, no device, no device of
 * that number, a compute capability below 8.0). Unknown names are
 * MD_E_INVALID. */
#include <string.h>

#include "kernels/device.h"
#include "tests/test_util.h"

/* The message of a CUDA device that cannot be opened, for this build. */
static int cuda_refusal_ok(const char *name, const md_error *err) {
  if (!md_device_cuda_built())
    return strstr(err->message, "has no CUDA back end") != NULL &&
           strstr(err->message, name) != NULL;
  return strstr(err->message, "no usable CUDA device") != NULL ||
         strstr(err->message, "no CUDA device found") != NULL ||
         strstr(err->message, "no such device") != NULL ||
         strstr(err->message, "compute capability") != NULL;
}

static void check_cuda(const char *name, const char *prefix) {
  md_device_options options = {.device = name};
  md_kernels *k = NULL;
  md_error err = {0};
  md_status status = md_device_open(&options, &k, &err);
  if (status == MD_OK) { /* a machine with a usable GPU */
    CHECK(md_device_cuda_built());
    CHECK(strcmp(k->ops->name, "cuda") == 0);
    printf("%s: opened\n", name);
    md_kernels_free(k);
    return;
  }
  printf("%s: %s\n", name, err.message);
  CHECK_MSG(status == MD_E_DEVICE, "%s: status %d", name, (int)status);
  CHECK_MSG(cuda_refusal_ok(name, &err), "%s: unexpected message \"%s\"", name, err.message);
  if (md_device_cuda_built())
    CHECK_MSG(strncmp(err.message, prefix, strlen(prefix)) == 0, "%s: message \"%s\" does not start with %s",
              name, err.message, prefix);
}

int main(void) {
  md_error err;
  md_kernels *k = NULL;
  md_device_options cpu = {.device = "cpu", .threads = 1};
  CHECK(md_device_open(&cpu, &k, &err) == MD_OK);
  if (k) CHECK(strcmp(k->ops->name, "cpu") == 0);
  md_kernels_free(k);
  k = NULL;
  CHECK(md_device_open(NULL, &k, &err) == MD_OK); /* the default is the CPU */
  if (k) CHECK(strcmp(k->ops->name, "cpu") == 0);
  md_kernels_free(k);

  check_cuda("cuda", "cuda:0: ");
  check_cuda("cuda:0", "cuda:0: ");
  check_cuda("cuda:1000", "cuda:1000: "); /* no machine has that many */

  const char *bad[] = {"gpu", "cuda:", "cuda:-1", "cuda:x", "cuda:1x", "CUDA", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    md_device_options options = {.device = bad[i]};
    k = NULL;
    CHECK_MSG(md_device_open(&options, &k, &err) == MD_E_INVALID && k == NULL, "'%s'", bad[i]);
    CHECK_MSG(strstr(err.message, "unknown device") != NULL, "'%s': %s", bad[i], err.message);
  }
  return md_test_finish("test_device");
}
