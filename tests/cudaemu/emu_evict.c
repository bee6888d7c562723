/* Eviction on the CUDA back end, run by the emulator (tests/cudaemu): the
 * schedule of tests/model/fixtures/<name>/evict/ (see
 * tests/model/make_evict_fixtures.py and tests/model/test_qwen2_evict.c,
 * its CPU twin) against HF's logits with the evicted keys masked out,
 * within 1e-4 (F32 checkpoints: the emulated back end computes in fp32,
 * the bound tests/gpu/gpu_parity.c uses for them), through kv_compact's
 * gather kernels, in a cache of only the slots the schedule holds.
 *
 * With probes rolled back on the way (decode steps before any eviction,
 * where steps may be recorded as CUDA graphs; a prefill chunk between
 * recorded steps that grows the token scratch, which the recordings must
 * not outlive; decode steps and an eviction of the probe's own tokens after
 * evictions), and with graphs off and on: the logits must equal HF's, and
 * the two runs must agree bit for bit. With graphs on (the steps fused:
 * kernels/cuda/fuse.c), steps are replayed (one launch) before and after
 * evictions: the graph reads the step's position and slot from device
 * memory.
 *
 *   cuda_emu_evict [NAME ...]    default: hd128_f32 theta1e4_f32 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/qwen2_forward.h"
#include "collector/model/qwen2_model.h"
#include "kernels/cuda/cuda.h"
#include "tests/model/evict_schedule.h"
#include "tests/test_util.h"

#define LOGIT_TOL 1e-4

typedef struct probe_ctx {
  const char *name;
  const evict_fixture *f;
  md_kernels *k;
  bool graphs;
  int64_t probes;
  uint64_t before_eviction_max, after_eviction_min; /* launches of a late probe step */
} probe_ctx;

/* Kernel launches of one decode step (the logits read included). */
static md_status timed_decode(probe_ctx *p, md_qwen2_forward *fw, int32_t token, uint64_t *launches,
                              md_error *err) {
  uint64_t before = md_kernels_cuda_launches(p->k);
  md_status s = md_qwen2_decode(fw, token, err);
  float logits[1024];
  if (s == MD_OK && p->f->vocab <= 1024) s = md_qwen2_logits(fw, logits, err);
  *launches = md_kernels_cuda_launches(p->k) - before;
  return s;
}

static md_status probe(void *ctx, md_qwen2_forward *fw, int64_t op, md_error *err) {
  probe_ctx *p = ctx;
  const evict_fixture *f = p->f;
  int kind = f->schedule.i32[2 * op];
  bool evicted = md_qwen2_cached(fw) < md_qwen2_position(fw);
  if (!(op == 0 || op == 2 || kind == EVICT_OP_EVICT)) return MD_OK;
  md_qwen2_mark mark = md_qwen2_mark_get(fw);
  const int32_t *q = f->tokens.i32 + f->n_tokens - 20;
  uint64_t launches = 0;
  md_status s = MD_OK;
  for (int i = 0; i < 3 && s == MD_OK; i++) s = timed_decode(p, fw, q[i], &launches, err);
  if (s == MD_OK && !evicted && launches > p->before_eviction_max) p->before_eviction_max = launches;
  if (s == MD_OK && evicted && (p->after_eviction_min == 0 || launches < p->after_eviction_min))
    p->after_eviction_min = launches;
  if (op == 0) {
    /* a chunk longer than any before: the token scratch grows */
    if (s == MD_OK) s = md_qwen2_prefill(fw, q + 3, 16, NULL, err);
    for (int i = 0; i < 3 && s == MD_OK; i++) s = timed_decode(p, fw, q[i], &launches, err);
  } else {
    int64_t own[2] = {mark.pos + 1, mark.pos + 2};
    if (s == MD_OK) s = md_qwen2_evict(fw, own, 2, err);
    if (s == MD_OK) s = timed_decode(p, fw, q[4], &launches, err);
  }
  if (s == MD_OK) s = md_qwen2_rollback(fw, &mark, err);
  if (s == MD_OK) p->probes++;
  return s;
}

/* The schedule with probes; our logits of every token. */
static float *run(const char *name, const md_qwen2_config *c, const md_qwen2_weights *w,
                  const evict_fixture *f, bool graphs, probe_ctx *p) {
  md_cuda_options options = {.gemm = MD_CUDA_GEMM_EXACT, .no_graphs = !graphs};
  md_kernels *k = NULL;
  md_qwen2_forward *fw = NULL;
  md_error err;
  md_qwen2_forward_options fo = {.capacity = f->max_cached + 24};
  if (md_kernels_cuda_new(&options, &k, &err) != MD_OK ||
      md_qwen2_forward_new(c, w, k, &fo, &fw, &err) != MD_OK) {
    fprintf(stderr, "%s: %s\n", name, err.message);
    exit(1);
  }
  *p = (probe_ctx){.name = name, .f = f, .k = k, .graphs = graphs};
  float *logits = calloc((size_t)f->n_tokens * (size_t)f->vocab, sizeof(float));
  md_status s = evict_run(fw, f, logits, probe, p, &err);
  CHECK_MSG(s == MD_OK, "%s: %s", name, err.message);
  CHECK(p->probes == 4);
  md_qwen2_forward_free(fw);
  md_kernels_free(k);
  return logits;
}

static void check(const char *name) {
  char dir[4096];
  fixture_dir(dir, sizeof dir, name);
  md_qwen2_model *model = NULL;
  md_error err;
  if (md_qwen2_model_open(dir, &model, &err) != MD_OK) {
    fprintf(stderr, "%s: %s\n", name, err.message);
    exit(1);
  }
  const md_qwen2_config *c = md_qwen2_model_config(model);
  const md_qwen2_weights *w = md_qwen2_model_weights(model);
  evict_fixture f = evict_fixture_load(name);
  probe_ctx off, on;
  float *launched = run(name, c, w, &f, false, &off);
  float *recorded = run(name, c, w, &f, true, &on);
  double d_off = evict_max_diff(&f, launched), d_on = evict_max_diff(&f, recorded);
  printf("%s [cuda, emulated]: max |logit - HF| = %.3g (graphs off), %.3g (graphs on); launches "
         "per probe step with graphs: at most %llu before eviction, at least %llu after\n",
         name, d_off, d_on, (unsigned long long)on.before_eviction_max,
         (unsigned long long)on.after_eviction_min);
  CHECK_MSG(d_off <= LOGIT_TOL, "%s: logits differ from HF by %g", name, d_off);
  CHECK_MSG(memcmp(launched, recorded, f.logits.count * sizeof(float)) == 0,
            "%s: recorded steps differ from launched ones", name);
  CHECK(on.before_eviction_max <= 2);  /* replayed graphs */
  CHECK(on.after_eviction_min <= 2);   /* also after evictions */
  CHECK(off.before_eviction_max > 10); /* launched op by op */
  free(launched);
  free(recorded);
  evict_fixture_free(&f);
  md_qwen2_model_close(model);
}

int main(int argc, char **argv) {
  const char *defaults[] = {"hd128_f32", "theta1e4_f32"};
  if (argc > 1)
    for (int i = 1; i < argc; i++) check(argv[i]);
  else
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) check(defaults[i]);
  return md_test_finish("cuda_emu_evict");
}
