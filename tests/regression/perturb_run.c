/* Stands in for another machine's arithmetic: multiplies every attention
 * value of a run directory (every attn/ID.npy and prefill/ID.npy) by 1 + EPS u, u
 * uniform in [-1, 1] from a seeded Mersenne Twister, keeping zeros (tokens
 * not yet born) at zero and decode attention within [0, 1].
 *
 *   perturb_run RUN_DIR EPS [SEED]
 *
 * Different BLAS kernels (AVX2, AVX-512, portable), thread counts and bf16
 * conversion paths change float32 results by a few ulps (relative 1e-7 to
 * 1e-6 after a layer's accumulations); EPS = 1e-4 is well beyond that. */
#include <gsl/gsl_rng.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/formats/npy.h"
#include "io/formats/run_dir.h"

static int perturb(const char *path, double eps, gsl_rng *rng, int clamp) {
  md_npy_array array;
  md_error err = {0};
  if (md_npy_read(path, &array, &err) != MD_OK || array.dtype != MD_NPY_F32) {
    fprintf(stderr, "perturb_run: %s\n", err.message[0] ? err.message : path);
    return -1;
  }
  float *x = array.data;
  for (size_t i = 0; i < array.count; i++) {
    double u = 2.0 * gsl_rng_uniform(rng) - 1.0;
    double value = x[i] * (1.0 + eps * u);
    if (clamp && value > 1.0) value = 1.0;
    x[i] = (float)value;
  }
  int rc = md_npy_write_f32(path, array.ndim, array.shape, x, &err) == MD_OK ? 0 : -1;
  if (rc) fprintf(stderr, "perturb_run: %s\n", err.message);
  md_npy_free(&array);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: perturb_run RUN_DIR EPS [SEED]\n");
    return 2;
  }
  double eps = strtod(argv[2], NULL);
  md_run_info info;
  md_error err = {0};
  if (md_run_info_read(argv[1], &info, &err) != MD_OK) {
    fprintf(stderr, "perturb_run: %s\n", err.message);
    return 1;
  }
  gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
  gsl_rng_set(rng, argc > 3 ? strtoul(argv[3], NULL, 10) : 1);
  int rc = 0;
  for (size_t i = 0; i < info.n_episodes && !rc; i++) {
    char *attn = md_run_path(info.dir, "attn", info.episodes[i].id, ".npy");
    char *prefill = md_run_path(info.dir, "prefill", info.episodes[i].id, ".npy");
    rc = perturb(attn, eps, rng, 1);
    if (!rc) rc = perturb(prefill, eps, rng, 0);
    free(attn);
    free(prefill);
  }
  gsl_rng_free(rng);
  md_run_info_free(&info);
  return rc ? 1 : 0;
}
