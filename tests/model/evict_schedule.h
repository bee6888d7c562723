/* The eviction reference of tests/model/fixtures/<name>/evict/ (written by
 * tests/model/make_evict_fixtures.py: a schedule of prefill chunks, decode
 * steps and evictions, and HF's logits of every token) and a runner that
 * plays the schedule through md_qwen2_forward. Shared by the CPU test
 * (tests/model/test_qwen2_evict.c) and the emulated CUDA one
 * (tests/cudaemu/emu_evict.c). */
#ifndef MD_TESTS_MODEL_EVICT_SCHEDULE_H
#define MD_TESTS_MODEL_EVICT_SCHEDULE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/qwen2_forward.h"
#include "tests/model/fixture.h"

enum { EVICT_OP_PREFILL = 0, EVICT_OP_DECODE = 1, EVICT_OP_EVICT = 2 };

typedef struct evict_fixture {
  fixture_array schedule;   /* int32 [ops, 2]: kind, count */
  fixture_array tokens;     /* int32 [T] */
  fixture_array positions;  /* int32 [E] */
  fixture_array logits;     /* float32 [T, vocab] */
  int64_t n_ops, n_tokens, vocab;
  int64_t max_cached;       /* the most tokens cached at once */
} evict_fixture;

/* Loads the reference of checkpoint `name` (exits on a broken fixture). */
static inline evict_fixture evict_fixture_load(const char *name) {
  char dir[4096];
  fixture_dir(dir, sizeof dir, name);
  size_t len = strlen(dir);
  snprintf(dir + len, sizeof dir - len, "/evict");
  evict_fixture f = {.schedule = fixture_load(dir, "schedule.npy", 1),
                     .tokens = fixture_load(dir, "tokens.npy", 1),
                     .positions = fixture_load(dir, "positions.npy", 1),
                     .logits = fixture_load(dir, "logits.npy", 0)};
  f.n_ops = f.schedule.shape[0];
  f.n_tokens = f.tokens.shape[0];
  f.vocab = f.logits.shape[1];
  int64_t cached = 0, run = 0, evicted = 0;
  for (int64_t op = 0; op < f.n_ops; op++) {
    int kind = f.schedule.i32[2 * op], count = f.schedule.i32[2 * op + 1];
    if (kind == EVICT_OP_EVICT) {
      cached -= count;
      evicted += count;
    } else {
      cached += count;
      run += count;
    }
    if (cached > f.max_cached) f.max_cached = cached;
  }
  if (f.schedule.ndim != 2 || f.schedule.shape[1] != 2 || run != f.n_tokens ||
      evicted != f.positions.shape[0] || f.logits.shape[0] != f.n_tokens) {
    fprintf(stderr, "fixture: %s: the schedule does not match the tokens, positions and logits\n", dir);
    exit(2);
  }
  return f;
}

static inline void evict_fixture_free(evict_fixture *f) {
  fixture_free(&f->schedule);
  fixture_free(&f->tokens);
  fixture_free(&f->positions);
  fixture_free(&f->logits);
}

/* Called after each operation of the schedule (op = its index), with the
 * forward state; returns MD_OK to go on. Tests check the state or run a
 * probe here. */
typedef md_status (*evict_after_op)(void *ctx, md_qwen2_forward *fw, int64_t op, md_error *err);

/* Plays the schedule: prefill chunks with every row's logits, decode steps
 * (md_qwen2_decode, so that back ends that record steps may), evictions;
 * the logits of every token into logits [T, vocab]. */
static inline md_status evict_run(md_qwen2_forward *fw, const evict_fixture *f, float *logits,
                                  evict_after_op after, void *ctx, md_error *err) {
  int64_t t = 0, e = 0;
  md_status s = MD_OK;
  for (int64_t op = 0; op < f->n_ops && s == MD_OK; op++) {
    int kind = f->schedule.i32[2 * op], count = f->schedule.i32[2 * op + 1];
    float *row = logits + (size_t)t * (size_t)f->vocab;
    if (kind == EVICT_OP_PREFILL) {
      s = md_qwen2_prefill(fw, f->tokens.i32 + t, count, row, err);
      t += count;
    } else if (kind == EVICT_OP_DECODE) {
      s = md_qwen2_decode(fw, f->tokens.i32[t], err);
      if (s == MD_OK) s = md_qwen2_logits(fw, row, err);
      t += 1;
    } else {
      int64_t positions[64];
      if (count > 64) return md_fail(err, MD_E_INVALID, "evict fixture: more than 64 positions at once");
      for (int i = 0; i < count; i++) positions[i] = f->positions.i32[e + i];
      s = md_qwen2_evict(fw, positions, count, err);
      e += count;
    }
    if (s == MD_OK && after) s = after(ctx, fw, op, err);
  }
  return s;
}

/* The largest |ours - HF| over every token's logits. */
static inline double evict_max_diff(const evict_fixture *f, const float *logits) {
  double worst = 0.0;
  for (size_t i = 0; i < f->logits.count; i++) {
    double d = fabs((double)logits[i] - (double)f->logits.f32[i]);
    if (!(d <= worst)) worst = d; /* NaN wins */
  }
  return worst;
}

#endif
