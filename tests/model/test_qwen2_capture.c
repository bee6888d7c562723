/* The fused attention capture of the forward pass (md_qwen2_set_capture)
 * against HF transformers on the committed random checkpoints of
 * tests/model/fixtures (tests/model/make_fixtures.py: output_attentions=True,
 * eager, float32). The fixtures hold HF's softmax rows per layer and head
 * for every decode step (decode_attn.npy, [S, L, H, n + S]) and the prompt's
 * column sums per layer, heads averaged (prefill_attn_colsum.npy, [L, n]);
 * the expected aggregates are derived from them here by the definitions in
 * kernels/kernels.h (md_attn_capture):
 *
 *   decode row of step s, key k = mean over layers l in [begin, end) of
 *       (mean over heads h | max over heads h) of decode_attn[s, l, h, k]
 *   prefill, key k = mean over layers l in [begin, end) of colsum[l, k]
 *
 * for mean and max over heads and for several layer ranges, with the prompt
 * prefilled in one chunk and in chunks of 37, feeding the HF greedy tokens
 * with md_qwen2_decode and with md_qwen2_feed, reading rows back through
 * two buffers and two read slots as the collector does.
 *
 * Tolerances (absolute): decode rows 1e-5 (softmax weights in float32, as
 * in test_qwen2_forward.c); prefill column sums 1e-4 (sums over up to 300
 * query rows). Keys not yet visible must read exactly 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/qwen2_forward.h"
#include "collector/model/qwen2_model.h"
#include "kernels/cpu/cpu.h"
#include "tests/model/fixture.h"
#include "tests/test_util.h"

#define DECODE_TOL 1e-5
#define PREFILL_TOL 1e-4

static const char *const CHECKPOINTS[] = {"qwen05_heads_bf16", "hd128_f32", "theta1e4_f32",
                                          "theta1e4_f16"};

typedef struct setting {
  int begin, end;          /* end -1: all layers */
  md_capture_heads heads;
  int64_t max_batch;       /* prefill chunk; 0 = one chunk */
  int feed;                /* decode with md_qwen2_feed (no logits) */
} setting;

static const setting SETTINGS[] = {
    {0, -1, MD_CAPTURE_HEADS_MEAN, 0, 0},  {0, -1, MD_CAPTURE_HEADS_MAX, 0, 1},
    {1, -1, MD_CAPTURE_HEADS_MEAN, 37, 1}, {0, 1, MD_CAPTURE_HEADS_MAX, 37, 0},
    {1, 2, MD_CAPTURE_HEADS_MEAN, 0, 1},
};

typedef struct errors {
  double decode, prefill, unborn;
} errors;

/* HF's aggregate of decode step s at key k. */
static double want_decode(const fixture_array *attn, int64_t s, int64_t k, const setting *g, int end,
                          int heads) {
  int64_t L = attn->shape[1], width = attn->shape[3];
  double total = 0.0;
  for (int l = g->begin; l < end; l++) {
    const float *row = attn->f32 + ((size_t)s * L + l) * (size_t)heads * width;
    double sum = 0.0, max = 0.0;
    for (int h = 0; h < heads; h++) {
      double w = row[(size_t)h * width + k];
      sum += w;
      if (w > max) max = w;
    }
    total += g->heads == MD_CAPTURE_HEADS_MAX ? max : sum / heads;
  }
  return total / (end - g->begin);
}

static void compare_prefill(const float *got, const fixture_array *colsum, const setting *g, int end,
                            errors *e) {
  int64_t n = colsum->shape[1];
  for (int64_t k = 0; k < n; k++) {
    double want = 0.0;
    for (int l = g->begin; l < end; l++) want += colsum->f32[l * n + k];
    want /= end - g->begin;
    e->prefill = fmax(e->prefill, fabs(got[k] - want));
  }
}

static void compare_row(const float *got, const fixture_array *attn, int64_t n, int64_t s,
                        int64_t capacity, const setting *g, int end, int heads, errors *e) {
  for (int64_t k = 0; k < capacity; k++) {
    if (k > n + s) {
      e->unborn = fmax(e->unborn, fabs(got[k]));
      continue;
    }
    e->decode = fmax(e->decode, fabs(got[k] - want_decode(attn, s, k, g, end, heads)));
  }
}

/* Prefill then the decode steps, with the capture on; rows read through two
 * buffers and two read slots, each row compared when its read finishes. */
static void run_setting(md_kernels *k, const md_qwen2_config *c, const md_qwen2_weights *w,
                        const fixture_array *prompt, const fixture_array *tokens,
                        const fixture_array *attn, const fixture_array *colsum, const setting *g,
                        errors *e) {
  int64_t n = prompt->shape[0], steps = attn->shape[0], capacity = n + steps;
  int end = g->end < 0 ? c->num_hidden_layers : g->end;
  md_qwen2_forward_options options = {.capacity = capacity, .max_batch = g->max_batch};
  md_qwen2_forward *fw = NULL;
  md_kbuf *buf[2] = {NULL, NULL};
  md_error err;
  float *rows[2] = {calloc((size_t)capacity, sizeof(float)), calloc((size_t)capacity, sizeof(float))};
  CHECK(md_qwen2_forward_new(c, w, k, &options, &fw, &err) == MD_OK);
  CHECK(k->ops->buf_new(k, (size_t)capacity, &buf[0], &err) == MD_OK);
  CHECK(k->ops->buf_new(k, (size_t)capacity, &buf[1], &err) == MD_OK);
  md_qwen2_capture capture = {.received = buf[0], .layer_begin = g->begin, .layer_end = end,
                              .heads = g->heads};
  CHECK(md_qwen2_set_capture(fw, &capture, &err) == MD_OK);
  CHECK(md_qwen2_prefill(fw, prompt->i32, n, NULL, &err) == MD_OK);
  CHECK(k->ops->buf_read(k, buf[0], 0, (size_t)n, rows[0], &err) == MD_OK);
  compare_prefill(rows[0], colsum, g, end, e);
  for (int64_t s = 0; s <= steps; s++) {
    int slot = (int)(s & 1);
    if (s < steps) {
      k->ops->buf_zero(k, buf[slot], 0, (size_t)capacity);
      capture.received = buf[slot];
      CHECK(md_qwen2_set_capture(fw, &capture, &err) == MD_OK);
      md_status st = g->feed ? md_qwen2_feed(fw, &tokens->i32[s], 1, &err)
                             : md_qwen2_decode(fw, tokens->i32[s], &err);
      CHECK(st == MD_OK);
      CHECK(k->ops->buf_read_start(k, buf[slot], 0, (size_t)capacity, rows[slot], slot, &err) == MD_OK);
    }
    if (s > 0) {
      CHECK(k->ops->buf_read_finish(k, slot ^ 1, &err) == MD_OK);
      compare_row(rows[slot ^ 1], attn, n, s - 1, capacity, g, end, c->num_attention_heads, e);
    }
  }
  k->ops->buf_free(k, buf[0]);
  k->ops->buf_free(k, buf[1]);
  md_qwen2_forward_free(fw);
  free(rows[0]);
  free(rows[1]);
}

static void run_checkpoint(const char *name, md_cpu_kernels path, errors *total) {
  char dir[4096];
  fixture_dir(dir, sizeof dir, name);
  md_error err;
  md_qwen2_model *model = NULL;
  if (md_qwen2_model_open(dir, &model, &err) != MD_OK) {
    CHECK_MSG(0, "%s: %s", name, err.message);
    return;
  }
  const md_qwen2_config *c = md_qwen2_model_config(model);
  fixture_array prompt = fixture_load(dir, "prompt.npy", 1), tokens = fixture_load(dir, "tokens.npy", 1);
  fixture_array attn = fixture_load(dir, "decode_attn.npy", 0);
  fixture_array colsum = fixture_load(dir, "prefill_attn_colsum.npy", 0);
  md_cpu_options cpu_options = {.threads = 0, .kernels = path};
  md_kernels *k = NULL;
  CHECK(md_kernels_cpu_new(&cpu_options, &k, &err) == MD_OK);
  for (size_t i = 0; i < sizeof SETTINGS / sizeof SETTINGS[0]; i++) {
    const setting *g = &SETTINGS[i];
    if (g->end > c->num_hidden_layers) continue;
    errors e = {0};
    run_setting(k, c, md_qwen2_model_weights(model), &prompt, &tokens, &attn, &colsum, g, &e);
    printf("%s [%s] layers %d:%d heads %s chunk %lld %s: max |ours - HF| decode %.3g, prefill %.3g, "
           "unborn %.3g\n",
           name, md_kernels_cpu_isa(k), g->begin, g->end < 0 ? c->num_hidden_layers : g->end,
           g->heads == MD_CAPTURE_HEADS_MAX ? "max" : "mean", (long long)g->max_batch,
           g->feed ? "feed" : "decode", e.decode, e.prefill, e.unborn);
    CHECK_MSG(e.decode <= DECODE_TOL, "%s: decode rows off by %g", name, e.decode);
    CHECK_MSG(e.prefill <= PREFILL_TOL, "%s: prefill column sums off by %g", name, e.prefill);
    CHECK_MSG(e.unborn == 0.0, "%s: %g on a key not yet born", name, e.unborn);
    total->decode = fmax(total->decode, e.decode);
    total->prefill = fmax(total->prefill, e.prefill);
  }
  md_kernels_free(k);
  fixture_free(&prompt);
  fixture_free(&tokens);
  fixture_free(&attn);
  fixture_free(&colsum);
  md_qwen2_model_close(model);
}

int main(void) {
  /* Every kernel path this CPU runs (portable, AVX2, AVX-512). */
  md_cpu_kernels paths[3];
  int n_paths = md_cpu_kernel_paths(paths);
  errors total = {0};
  for (size_t i = 0; i < sizeof CHECKPOINTS / sizeof CHECKPOINTS[0]; i++) {
    for (int j = 0; j < n_paths; j++) run_checkpoint(CHECKPOINTS[i], paths[j], &total);
  }
  printf("capture vs HF over all checkpoints and settings: decode rows %.3g (tolerance %g), "
         "prefill column sums %.3g (tolerance %g)\n",
         total.decode, DECODE_TOL, total.prefill, PREFILL_TOL);
  return md_test_finish("test_qwen2_capture");
}
