/* Eviction in the Qwen2 forward pass (md_qwen2_evict, md_qwen2_rollback) on
 * the CPU back end, against HF transformers on the F32 checkpoints
 * hd128_f32 and theta1e4_f32: the schedule of tests/model/fixtures/<name>/
 * evict/ (tests/model/make_evict_fixtures.py: a prompt in three chunks, two
 * evictions of scattered positions, one with position 0 and one with a
 * just-decoded token and the token then in slot 0, decode steps, a prefill
 * chunk after eviction) must give HF's logits with the evicted keys masked
 * out (a 4-D attention mask, original position_ids), every token, within
 * 1e-4 (float32 summation order, as test_qwen2_forward.c), in a cache of
 * only as many slots as the schedule ever holds (memory reused).
 *
 * Then the contracts: slot positions after each step; refusals (a position
 * never run, negative, evicted before, listed twice) change nothing, bit
 * for bit; the cache through host memory (a back end without kv_compact)
 * equals kv_compact bit for bit; a probe (prefill, decode, an eviction of
 * its own tokens) rolled back leaves the run bit-identical to one without
 * it, before and after evictions; rollback refuses after an eviction below
 * the mark; the capture buffer and the hook are in slot coordinates. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/qwen2_forward.h"
#include "collector/model/qwen2_model.h"
#include "kernels/cpu/cpu.h"
#include "tests/model/evict_schedule.h"
#include "tests/test_util.h"

#define LOGIT_TOL 1e-4
#define CAPTURE_TOL 1e-6

static const char *const CHECKPOINTS[] = {"hd128_f32", "theta1e4_f32"};

typedef struct model_ctx {
  const char *name;
  md_qwen2_model *model;
  const md_qwen2_config *config;
  const md_qwen2_weights *weights;
  md_kernels *k;
  evict_fixture f;
} model_ctx;

static md_qwen2_forward *open_forward(model_ctx *m, int64_t capacity, int64_t max_batch) {
  md_qwen2_forward_options options = {.capacity = capacity, .max_batch = max_batch};
  md_qwen2_forward *fw = NULL;
  md_error err;
  md_status s = md_qwen2_forward_new(m->config, m->weights, m->k, &options, &fw, &err);
  CHECK_MSG(s == MD_OK, "%s: %s", m->name, err.message);
  if (s != MD_OK) exit(1);
  return fw;
}

static float *logits_buffer(const evict_fixture *f) {
  return calloc((size_t)f->n_tokens * (size_t)f->vocab, sizeof(float));
}

/* ---- the schedule against HF, with the state checked after each step ---------- */

/* What the cache should hold: the schedule replayed on a list. */
typedef struct expect_ctx {
  model_ctx *m;
  int64_t slots[256], n, pos, evicted_so_far;
  int64_t refusals;                /* refused calls that were checked */
  bool refuse;                     /* try the bad evictions after the first eviction */
} expect_ctx;

static void expect_advance(expect_ctx *x, int64_t op) {
  const evict_fixture *f = &x->m->f;
  int kind = f->schedule.i32[2 * op], count = f->schedule.i32[2 * op + 1];
  if (kind != EVICT_OP_EVICT) {
    for (int i = 0; i < count; i++) x->slots[x->n++] = x->pos++;
    return;
  }
  int64_t kept = 0;
  for (int64_t s = 0; s < x->n; s++) {
    bool gone = false;
    for (int i = 0; i < count; i++) gone |= f->positions.i32[x->evicted_so_far + i] == x->slots[s];
    if (!gone) x->slots[kept++] = x->slots[s];
  }
  x->n = kept;
  x->evicted_so_far += count;
}

static bool state_is(md_qwen2_forward *fw, int64_t pos, const int64_t *slots, int64_t n) {
  return md_qwen2_position(fw) == pos && md_qwen2_cached(fw) == n &&
         (n == 0 || memcmp(md_qwen2_slot_positions(fw), slots, (size_t)n * sizeof *slots) == 0);
}

/* Bad evictions: each must fail with MD_E_INVALID and change nothing. */
static void check_refusals(expect_ctx *x, md_qwen2_forward *fw) {
  int64_t pos = md_qwen2_position(fw), first_evicted = x->m->f.positions.i32[0];
  int64_t kept = x->slots[x->n / 2];
  int64_t cases[][4] = { /* count, positions */
      {1, pos, 0},                  /* never run */
      {1, pos + 1000, 0},
      {1, -1, 0},                   /* negative */
      {1, first_evicted, 0},        /* evicted before */
      {2, kept, kept},              /* listed twice */
      {2, kept, first_evicted},     /* one good, one bad: nothing happens */
      {3, x->slots[0], kept, pos},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    md_error err = {0};
    md_status s = md_qwen2_evict(fw, &cases[i][1], cases[i][0], &err);
    CHECK_MSG(s == MD_E_INVALID && err.message[0], "%s: refusal %zu: status %d", x->m->name, i, (int)s);
    CHECK_MSG(state_is(fw, x->pos, x->slots, x->n), "%s: refusal %zu changed the state", x->m->name, i);
    x->refusals++;
  }
  md_error err;
  CHECK(md_qwen2_evict(fw, NULL, 1, &err) == MD_E_INVALID);
  CHECK(md_qwen2_evict(fw, x->slots, -1, &err) == MD_E_INVALID);
  CHECK(md_qwen2_evict(fw, NULL, 0, &err) == MD_OK); /* nothing to do */
  CHECK(state_is(fw, x->pos, x->slots, x->n));
}

static md_status after_expect(void *ctx, md_qwen2_forward *fw, int64_t op, md_error *err) {
  (void)err;
  expect_ctx *x = ctx;
  expect_advance(x, op);
  CHECK_MSG(state_is(fw, x->pos, x->slots, x->n), "%s: slot positions after step %lld", x->m->name,
            (long long)op);
  if (x->refuse && x->m->f.schedule.i32[2 * op] == EVICT_OP_EVICT && x->evicted_so_far ==
                                                                         x->m->f.schedule.i32[2 * op + 1])
    check_refusals(x, fw);
  return MD_OK;
}

/* Returns our logits of the plain run (refusals tried on the way). */
static float *check_against_hf(model_ctx *m) {
  const evict_fixture *f = &m->f;
  md_qwen2_forward *fw = open_forward(m, f->max_cached, 0);
  float *logits = logits_buffer(f);
  expect_ctx x = {.m = m, .refuse = true};
  md_error err;
  md_status s = evict_run(fw, f, logits, after_expect, &x, &err);
  CHECK_MSG(s == MD_OK, "%s: %s", m->name, err.message);
  double worst = evict_max_diff(f, logits);
  printf("%s: %lld tokens in a cache of %lld slots, %lld refusals checked: max |logit - HF| = %.3g\n",
         m->name, (long long)f->n_tokens, (long long)f->max_cached, (long long)x.refusals, worst);
  CHECK_MSG(worst <= LOGIT_TOL, "%s: logits differ from HF by %g", m->name, worst);
  CHECK(f->n_tokens > f->max_cached); /* the run needed the reused slots */
  /* The cache is full: one more token is refused, and fits after an eviction. */
  CHECK(md_qwen2_cached(fw) == f->max_cached);
  int32_t token = f->tokens.i32[0];
  CHECK(md_qwen2_decode(fw, token, &err) == MD_E_INVALID && strstr(err.message, "capacity"));
  CHECK(state_is(fw, x.pos, x.slots, x.n));
  int64_t oldest = x.slots[0];
  CHECK(md_qwen2_evict(fw, &oldest, 1, &err) == MD_OK && md_qwen2_decode(fw, token, &err) == MD_OK);
  CHECK(md_qwen2_position(fw) == f->n_tokens + 1 && md_qwen2_cached(fw) == f->max_cached);
  md_qwen2_forward_free(fw);
  return logits;
}

/* Prefill chunks of 4 rows (the prefill after eviction crosses chunks):
 * against HF. */
static void check_small_chunks(model_ctx *m) {
  md_qwen2_forward *fw = open_forward(m, m->f.max_cached, 4);
  float *logits = logits_buffer(&m->f);
  md_error err;
  CHECK_MSG(evict_run(fw, &m->f, logits, NULL, NULL, &err) == MD_OK, "%s: %s", m->name, err.message);
  double worst = evict_max_diff(&m->f, logits);
  printf("%s: prefill in chunks of 4: max |logit - HF| = %.3g\n", m->name, worst);
  CHECK(worst <= LOGIT_TOL);
  free(logits);
  md_qwen2_forward_free(fw);
}

/* A back end without kv_compact: the forward pass moves the cache through
 * host memory, with the same result bit for bit. */
static void check_host_fallback(model_ctx *m, const float *want) {
  md_kernel_ops ops = *m->k->ops;
  ops.kv_compact = NULL;
  const md_kernel_ops *saved = m->k->ops;
  m->k->ops = &ops;
  md_qwen2_forward *fw = open_forward(m, m->f.max_cached, 0);
  float *logits = logits_buffer(&m->f);
  md_error err;
  CHECK_MSG(evict_run(fw, &m->f, logits, NULL, NULL, &err) == MD_OK, "%s: %s", m->name, err.message);
  CHECK_MSG(memcmp(logits, want, m->f.logits.count * sizeof(float)) == 0,
            "%s: compaction through host memory differs from kv_compact", m->name);
  free(logits);
  md_qwen2_forward_free(fw);
  m->k->ops = saved;
}

/* ---- probes rolled back ---------------------------------------------------------- */

typedef struct probe_ctx {
  model_ctx *m;
  int64_t probes;
} probe_ctx;

/* mark, prefill 5, decode 2 with an eviction of a probe token between them,
 * rollback: the state is the mark's again. */
static md_status probe(void *ctx, md_qwen2_forward *fw, int64_t op, md_error *err) {
  probe_ctx *p = ctx;
  const evict_fixture *f = &p->m->f;
  int kind = f->schedule.i32[2 * op];
  /* after the second prompt chunk (no eviction yet), after each eviction,
   * after the last prefill chunk */
  bool here = op == 1 || kind == EVICT_OP_EVICT || (op + 1 < f->n_ops && kind == EVICT_OP_PREFILL &&
                                                    f->schedule.i32[2 * (op + 1)] == EVICT_OP_DECODE);
  if (!here) return MD_OK;
  md_qwen2_mark mark = md_qwen2_mark_get(fw);
  int64_t n = md_qwen2_cached(fw);
  int64_t *slots = malloc((size_t)(n ? n : 1) * sizeof *slots);
  memcpy(slots, md_qwen2_slot_positions(fw), (size_t)n * sizeof *slots);
  CHECK(mark.pos == md_qwen2_position(fw) && mark.cached == n);
  /* A rollback with nothing run in between keeps everything, logits too. */
  CHECK(md_qwen2_rollback(fw, &mark, err) == MD_OK && state_is(fw, mark.pos, slots, n));
  int32_t question[5];
  for (int i = 0; i < 5; i++) question[i] = f->tokens.i32[f->n_tokens - 1 - i];
  md_status s = md_qwen2_prefill(fw, question, 5, NULL, err);
  int64_t own[2] = {mark.pos + 3, mark.pos + 1};
  if (s == MD_OK) s = md_qwen2_decode(fw, question[0], err);
  if (s == MD_OK) s = md_qwen2_evict(fw, own, 2, err);
  if (s == MD_OK) s = md_qwen2_decode(fw, question[1], err);
  if (s == MD_OK) s = md_qwen2_rollback(fw, &mark, err);
  if (s != MD_OK) {
    free(slots);
    return s;
  }
  CHECK_MSG(state_is(fw, mark.pos, slots, n), "%s: the state after a rollback", p->m->name);
  float one[1];
  md_error expected;
  CHECK(md_qwen2_logits(fw, one, &expected) == MD_E_INVALID); /* the probe's are gone */
  p->probes++;
  free(slots);
  return MD_OK;
}

static void check_rollback(model_ctx *m, const float *want) {
  const evict_fixture *f = &m->f;
  /* room for the probes on top of the schedule's tokens */
  md_qwen2_forward *fw = open_forward(m, f->max_cached + 7, 0);
  float *logits = logits_buffer(f);
  probe_ctx p = {.m = m};
  md_error err;
  CHECK_MSG(evict_run(fw, f, logits, probe, &p, &err) == MD_OK, "%s: %s", m->name, err.message);
  CHECK(p.probes >= 4);
  CHECK_MSG(memcmp(logits, want, f->logits.count * sizeof(float)) == 0,
            "%s: probes rolled back changed the run's logits", m->name);
  printf("%s: %lld probes rolled back, logits bit-identical\n", m->name, (long long)p.probes);
  free(logits);

  /* Refusals: an eviction below the mark, a mark beyond the sequence. */
  md_qwen2_reset(fw);
  CHECK(md_qwen2_prefill(fw, f->tokens.i32, 10, NULL, &err) == MD_OK);
  md_qwen2_mark mark = md_qwen2_mark_get(fw);
  CHECK(md_qwen2_prefill(fw, f->tokens.i32 + 10, 3, NULL, &err) == MD_OK);
  int64_t own = 11, below = 2;
  CHECK(md_qwen2_evict(fw, &own, 1, &err) == MD_OK);   /* a token appended after the mark */
  CHECK(md_qwen2_rollback(fw, &mark, &err) == MD_OK);
  CHECK(md_qwen2_position(fw) == 10 && md_qwen2_cached(fw) == 10);
  CHECK(md_qwen2_prefill(fw, f->tokens.i32 + 10, 3, NULL, &err) == MD_OK);
  CHECK(md_qwen2_evict(fw, &below, 1, &err) == MD_OK); /* a token the mark had */
  CHECK(md_qwen2_rollback(fw, &mark, &err) == MD_E_INVALID && strstr(err.message, "evict"));
  CHECK(md_qwen2_position(fw) == 13 && md_qwen2_cached(fw) == 12);
  md_qwen2_mark later = {.pos = 20, .cached = 12}, wrong = {.pos = 5, .cached = 6};
  CHECK(md_qwen2_rollback(fw, &later, &err) == MD_E_INVALID);
  CHECK(md_qwen2_rollback(fw, &wrong, &err) == MD_E_INVALID);
  CHECK(md_qwen2_position(fw) == 13 && md_qwen2_cached(fw) == 12);
  md_qwen2_forward_free(fw);
}

/* ---- capture and hook in slot coordinates -------------------------------------- */

typedef struct hook_ctx {
  int heads, layers;
  int64_t expect_keys, bad;
  double *mean;  /* [capacity]: the decode row, heads and layers averaged */
} hook_ctx;

static void on_row(void *ctx, int layer, int head, int64_t query, const float *w, int64_t n_keys) {
  hook_ctx *h = ctx;
  (void)layer;
  (void)head;
  if (n_keys != h->expect_keys || query != n_keys - 1) {
    h->bad++;
    return;
  }
  for (int64_t j = 0; j < n_keys; j++) h->mean[j] += w[j] / ((double)h->heads * h->layers);
}

/* Decode steps after evictions, with the capture over every layer and the
 * hook: received[s] is the attention on slot s, what the hook's rows (over
 * the cached slots) average to; nothing beyond the cached slots. */
static void check_capture(model_ctx *m) {
  const evict_fixture *f = &m->f;
  int64_t cap = f->max_cached;
  md_qwen2_forward *fw = open_forward(m, cap, 0);
  md_kernels *k = m->k;
  md_kbuf *received = NULL;
  md_error err;
  CHECK(k->ops->buf_new(k, (size_t)cap, &received, &err) == MD_OK);
  hook_ctx h = {.heads = m->config->num_attention_heads, .layers = m->config->num_hidden_layers,
                .mean = calloc((size_t)cap, sizeof(double))};
  float *got = calloc((size_t)cap, sizeof(float));
  /* Prompt and the first eviction, then capture each decode step. */
  float *logits = logits_buffer(f);
  int64_t t = 0, e = 0, steps = 0;
  double worst = 0.0;
  for (int64_t op = 0; op < f->n_ops; op++) {
    int kind = f->schedule.i32[2 * op], count = f->schedule.i32[2 * op + 1];
    if (kind == EVICT_OP_PREFILL) {
      CHECK(md_qwen2_prefill(fw, f->tokens.i32 + t, count, NULL, &err) == MD_OK);
      t += count;
    } else if (kind == EVICT_OP_EVICT) {
      int64_t positions[64];
      for (int i = 0; i < count; i++) positions[i] = f->positions.i32[e + i];
      CHECK(md_qwen2_evict(fw, positions, count, &err) == MD_OK);
      e += count;
    } else {
      int64_t n = md_qwen2_cached(fw) + 1;
      md_qwen2_capture capture = {.received = received, .layer_begin = 0,
                                  .layer_end = m->config->num_hidden_layers,
                                  .heads = MD_CAPTURE_HEADS_MEAN};
      md_attn_hook hook = {.on_row = on_row, .ctx = &h};
      k->ops->buf_zero(k, received, 0, (size_t)cap);
      memset(h.mean, 0, (size_t)cap * sizeof(double));
      h.expect_keys = n;
      md_qwen2_set_attn_hook(fw, &hook);
      CHECK(md_qwen2_set_capture(fw, &capture, &err) == MD_OK);
      CHECK(md_qwen2_decode(fw, f->tokens.i32[t], &err) == MD_OK);
      CHECK(md_qwen2_logits(fw, logits + (size_t)t * (size_t)f->vocab, &err) == MD_OK);
      md_qwen2_set_attn_hook(fw, NULL);
      CHECK(md_qwen2_set_capture(fw, NULL, &err) == MD_OK);
      CHECK(k->ops->buf_read(k, received, 0, (size_t)cap, got, &err) == MD_OK);
      double sum = 0.0;
      for (int64_t s = 0; s < cap; s++) {
        if (s < n) worst = fmax(worst, fabs(got[s] - h.mean[s]));
        else CHECK(got[s] == 0.0f);
        sum += got[s];
      }
      CHECK(fabs(sum - 1.0) < 1e-5);
      t++;
      steps++;
      /* the logits of a captured step are HF's too */
      const float *ref = f->logits.f32 + (size_t)(t - 1) * (size_t)f->vocab;
      for (int64_t v = 0; v < f->vocab; v++)
        CHECK(fabs(logits[(size_t)(t - 1) * (size_t)f->vocab + v] - ref[v]) <= LOGIT_TOL);
    }
  }
  CHECK(h.bad == 0);
  CHECK(steps == 8);
  printf("%s: %lld captured decode steps after evictions: max |received - hook mean| = %.3g\n",
         m->name, (long long)steps, worst);
  CHECK(worst <= CAPTURE_TOL);
  free(logits);
  free(got);
  free(h.mean);
  k->ops->buf_free(k, received);
  md_qwen2_forward_free(fw);
}

int main(void) {
  md_cpu_options options = {.threads = 2};
  for (size_t i = 0; i < sizeof CHECKPOINTS / sizeof CHECKPOINTS[0]; i++) {
    model_ctx m = {.name = CHECKPOINTS[i]};
    char dir[4096];
    md_error err;
    fixture_dir(dir, sizeof dir, m.name);
    if (md_qwen2_model_open(dir, &m.model, &err) != MD_OK || md_kernels_cpu_new(&options, &m.k, &err) != MD_OK) {
      fprintf(stderr, "%s: %s\n", m.name, err.message);
      return 1;
    }
    m.config = md_qwen2_model_config(m.model);
    m.weights = md_qwen2_model_weights(m.model);
    m.f = evict_fixture_load(m.name);
    CHECK(m.f.vocab == m.config->vocab_size);
    float *want = check_against_hf(&m);
    check_small_chunks(&m);
    check_host_fallback(&m, want);
    check_rollback(&m, want);
    check_capture(&m);
    free(want);
    evict_fixture_free(&m.f);
    md_kernels_free(m.k);
    md_qwen2_model_close(m.model);
  }
  return md_test_finish("qwen2 evict");
}
