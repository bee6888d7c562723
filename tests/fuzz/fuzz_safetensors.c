/* safetensors files (io/formats/safetensors.h): md_safetensors_open and every
 * tensor through md_safetensors_get.
 *
 * Invariants: a failure is MD_E_FORMAT, MD_E_UNSUPPORTED or MD_E_IO naming
 * the file, with *file NULL; on success the names come in strictly
 * increasing order and are found by md_safetensors_contains, each has a
 * dtype name, and md_safetensors_get either refuses with MD_E_UNSUPPORTED
 * or gives a tensor of that name with at most MD_TENSOR_MAX_DIMS
 * non-negative dimensions, nbytes = product x element size, data aligned
 * to the element size and inside readable memory. */
#include "fuzz_util.h"
#include "io/formats/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_input_file(data, size, ".safetensors");
  md_safetensors *file = (md_safetensors *)&file; /* must be set to NULL on failure */
  md_error err = {0};
  md_status status = md_safetensors_open(path, &file, &err);
  if (status != MD_OK) {
    fuzz_check_failure(status, &err,
                       FUZZ_ST(MD_E_FORMAT) | FUZZ_ST(MD_E_UNSUPPORTED) | FUZZ_ST(MD_E_IO), path);
    FUZZ_CHECK(file == NULL);
    return 0;
  }
  FUZZ_CHECK(file != NULL && !strcmp(md_safetensors_path(file), path));
  size_t n = md_safetensors_count(file);
  volatile uint8_t sink = 0;
  for (size_t i = 0; i < n; i++) {
    const char *name = md_safetensors_name(file, i);
    FUZZ_CHECK(name != NULL && strcmp(name, "__metadata__") != 0);
    if (i > 0) FUZZ_CHECK(strcmp(md_safetensors_name(file, i - 1), name) < 0);
    FUZZ_CHECK(md_safetensors_contains(file, name));
    FUZZ_CHECK(md_safetensors_dtype_name(file, name) != NULL);
    const md_tensor *tensor = NULL;
    status = md_safetensors_get(file, name, &tensor, &err);
    if (status != MD_OK) {
      fuzz_check_failure(status, &err, FUZZ_ST(MD_E_UNSUPPORTED), NULL);
      FUZZ_CHECK(strstr(err.message, name) != NULL);
      continue;
    }
    FUZZ_CHECK(tensor && !strcmp(tensor->name, name));
    FUZZ_CHECK(!strcmp(md_dtype_name(tensor->dtype), md_safetensors_dtype_name(file, name)));
    FUZZ_CHECK(tensor->ndim >= 0 && tensor->ndim <= MD_TENSOR_MAX_DIMS);
    size_t count = 1;
    for (int d = 0; d < tensor->ndim; d++) {
      FUZZ_CHECK(tensor->shape[d] >= 0);
      count *= (size_t)tensor->shape[d];
    }
    size_t elem = md_dtype_size(tensor->dtype);
    FUZZ_CHECK(tensor->nbytes == count * elem);
    FUZZ_CHECK(tensor->nbytes <= size);
    FUZZ_CHECK(((uintptr_t)tensor->data % elem) == 0);
    /* Touch the first and last bytes: ASan sees a view outside the map. */
    if (tensor->nbytes > 0) {
      const uint8_t *bytes = tensor->data;
      sink ^= bytes[0];
      sink ^= bytes[tensor->nbytes - 1];
    }
  }
  (void)sink;
  FUZZ_CHECK(!md_safetensors_contains(file, "no such tensor"));
  const md_tensor *none = NULL;
  status = md_safetensors_get(file, "no such tensor", &none, &err);
  FUZZ_CHECK(status == MD_E_FORMAT && strstr(err.message, path) != NULL);
  md_safetensors_close(file);
  return 0;
}
