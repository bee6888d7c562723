/* NumPy files (io/formats/npy.h): md_npy_read, then md_npy_write of what was read.
 *
 * Invariants: a failure is MD_E_FORMAT, MD_E_UNSUPPORTED or MD_E_IO naming
 * the file, with the array zeroed; on success 0 .. MD_NPY_MAX_DIMS
 * dimensions, none negative, count their product, data present; writing it
 * back leaves exactly the target file in its directory (no temporary
 * behind), and reading that gives the same dtype, shape and bytes. */
#include <dirent.h>
#include <sys/stat.h>

#include "fuzz_util.h"
#include "io/formats/npy.h"

static char out_dir[4096];
static char out_path[4200];

static void remove_out(void) {
  unlink(out_path);
  rmdir(out_dir);
}

static const char *output_path(void) {
  if (!out_dir[0]) {
    snprintf(out_dir, sizeof out_dir, "%s/md-fuzz-npy-XXXXXX", fuzz_tmpdir());
    FUZZ_CHECK(mkdtemp(out_dir) != NULL);
    snprintf(out_path, sizeof out_path, "%s/out.npy", out_dir);
    atexit(remove_out);
  }
  return out_path;
}

/* Files in the output directory. */
static size_t entries(void) {
  DIR *d = opendir(out_dir);
  FUZZ_CHECK(d != NULL);
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_input_file(data, size, ".npy");
  md_npy_array array;
  md_error err = {0};
  md_status status = md_npy_read(path, &array, &err);
  if (status != MD_OK) {
    fuzz_check_failure(status, &err,
                       FUZZ_ST(MD_E_FORMAT) | FUZZ_ST(MD_E_UNSUPPORTED) | FUZZ_ST(MD_E_IO), path);
    FUZZ_CHECK(array.data == NULL && array.count == 0 && array.ndim == 0);
    return 0;
  }
  FUZZ_CHECK(array.ndim >= 0 && array.ndim <= MD_NPY_MAX_DIMS);
  size_t count = 1;
  for (int i = 0; i < array.ndim; i++) {
    FUZZ_CHECK(array.shape[i] >= 0);
    count *= (size_t)array.shape[i];
  }
  FUZZ_CHECK(count == array.count);
  size_t bytes = array.count * md_npy_dtype_size(array.dtype);
  FUZZ_CHECK(array.data != NULL || bytes == 0);
  /* The data section is exactly the shape's bytes. */
  FUZZ_CHECK(bytes <= size);

  const char *out = output_path();
  unlink(out);
  status = md_npy_write(out, array.dtype, array.ndim, array.shape, array.data, &err);
  if (status == MD_OK) {
    FUZZ_CHECK(entries() == 1);
    md_npy_array back;
    status = md_npy_read(out, &back, &err);
    FUZZ_CHECK_MSG(status == MD_OK, "what was written does not read back: %s", err.message);
    FUZZ_CHECK(back.dtype == array.dtype && back.ndim == array.ndim && back.count == array.count);
    for (int i = 0; i < array.ndim; i++) FUZZ_CHECK(back.shape[i] == array.shape[i]);
    FUZZ_CHECK(bytes == 0 || memcmp(back.data, array.data, bytes) == 0);
    md_npy_free(&back);
  } else {
    fuzz_check_failure(status, &err, FUZZ_ST(MD_E_IO) | FUZZ_ST(MD_E_INVALID), out);
    FUZZ_CHECK(entries() == 0);
  }
  md_npy_free(&array);
  return 0;
}
