/* Writes a run directory for a CLI test, damages it as asked, then runs the
 * test's command:
 *
 *   make_run_dir DIR BASE [OP...] -- COMMAND [ARGS...]
 *
 * BASE: small (tests/run_dir/README.md) or fixture (the R dataset of
 * tests/extract/fixtures; needs MD_SOURCE_ROOT). DIR is removed first.
 * OP, applied in order:
 *   drop:PATH            remove run.json's key PATH ("model.name", "episodes[1].id")
 *   set:PATH=JSON        set run.json's key PATH to the JSON text
 *   line:N=TEXT          replace manifest.csv's line N (manifest_bytes follows)
 *   truncate:FILE=BYTES  truncate DIR/FILE
 *   remove:FILE          delete DIR/FILE
 *   npy:SUB/ID=AxB[@V[#I]]  rewrite DIR/SUB/ID.npy as float32 zeros of shape
 *                        AxB (or A), element I (default 0, C order) set to V
 *   scale:SUB/ID=F       multiply every element of DIR/SUB/ID.npy by F
 * Exits 99 when the directory cannot be made (a broken test, not a failure
 * of the program under test). */
#define _XOPEN_SOURCE 700 /* nftw */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/formats/npy.h"
#include "tests/run_dir/run_dir_writer.h"

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static int apply_npy(const char *dir, char *spec) {
  char *eq = strchr(spec, '=');
  char *slash = strchr(spec, '/');
  if (!eq || !slash || slash > eq) return -1;
  *eq = '\0';
  *slash = '\0';
  long shape[2];
  int ndim = 1;
  float value = 0.0f;
  long index = 0;
  char *at = strchr(eq + 1, '@'), *hash = strchr(eq + 1, '#');
  if (at) value = strtof(at + 1, NULL);
  if (hash) index = strtol(hash + 1, NULL, 10);
  shape[0] = strtol(eq + 1, NULL, 10);
  char *x = strchr(eq + 1, 'x');
  if (x && (!at || x < at)) {
    shape[1] = strtol(x + 1, NULL, 10);
    ndim = 2;
  }
  return test_write_npy(dir, spec, slash + 1, ndim, shape, value, index);
}

static int apply_scale(const char *dir, const char *spec, double factor) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.npy", dir, spec);
  md_npy_array array;
  md_error err = {0};
  if (md_npy_read(path, &array, &err) != MD_OK || array.dtype != MD_NPY_F32) return -1;
  float *x = array.data;
  for (size_t i = 0; i < array.count; i++) x[i] = (float)(x[i] * factor);
  int rc = md_npy_write(path, array.dtype, array.ndim, array.shape, array.data, &err) == MD_OK
               ? 0
               : -1;
  md_npy_free(&array);
  return rc;
}

static int apply(const char *dir, const char *op_text) {
  char op[1024];
  snprintf(op, sizeof op, "%s", op_text);
  char *colon = strchr(op, ':');
  if (!colon) return -1;
  *colon = '\0';
  char *arg = colon + 1, *eq = strchr(arg, '=');
  if (!strcmp(op, "drop")) return test_run_json_edit(dir, arg, NULL);
  if (!strcmp(op, "remove")) return test_truncate(dir, arg, -1);
  if (!strcmp(op, "npy")) return apply_npy(dir, arg);
  if (!eq) return -1;
  *eq = '\0';
  if (!strcmp(op, "set")) return test_run_json_edit(dir, arg, eq + 1);
  if (!strcmp(op, "line")) return test_manifest_replace_line(dir, strtoul(arg, NULL, 10), eq + 1);
  if (!strcmp(op, "truncate")) return test_truncate(dir, arg, strtol(eq + 1, NULL, 10));
  if (!strcmp(op, "scale")) return apply_scale(dir, arg, strtod(eq + 1, NULL));
  return -1;
}

int main(int argc, char **argv) {
  int sep = 1;
  while (sep < argc && strcmp(argv[sep], "--") != 0) sep++;
  if (argc < 3 || sep + 1 >= argc) {
    fprintf(stderr, "usage: make_run_dir DIR BASE [OP...] -- COMMAND [ARGS...]\n");
    return 99;
  }
  const char *dir = argv[1], *base = argv[2];
  if (access(dir, F_OK) == 0) nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  const char *root = getenv("MD_SOURCE_ROOT");
  int rc = !strcmp(base, "small")     ? test_run_write(dir, test_run_small())
           : !strcmp(base, "fixture") ? test_run_write_fixture(dir, root ? root : ".")
                                      : -1;
  for (int i = 3; i < sep && rc == 0; i++) {
    rc = apply(dir, argv[i]);
    if (rc) fprintf(stderr, "make_run_dir: cannot apply '%s'\n", argv[i]);
  }
  if (rc) return 99;
  execvp(argv[sep + 1], argv + sep + 1);
  perror(argv[sep + 1]);
  return 99;
}
