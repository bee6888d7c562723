/* Batched decode steps (md_qwen2_step): five sequences of different prompt
 * lengths, evicting at different steps and finishing at different steps,
 * run as one batch (the batch shrinking as they finish) must give, bit for
 * bit, what each gives run alone with md_qwen2_feed / md_qwen2_decode: the
 * greedy tokens, the captured attention of every step, the slots, and the
 * cache (the logits of one more token run alone afterwards). On the demo
 * checkpoint (BF16 weights) and hd128_f32 (F32), with the back end's
 * batched products (matmul_rows) and without them (each row through the
 * one-row operations), on every CPU kernel path. Then the refusals.
 *
 * Built with MD_TEST_CUDA (tests/cudaemu: the CUDA back end's own sources
 * on the emulator; tests/gpu: a GPU), the same on the CUDA back end, whose
 * one-sequence steps are fused and recorded as graphs while a batched step
 * runs matmul_rows, logits_rows and views: on the F32, F16 and BF16
 * fixtures (the demo's 151,936-row LM head is too slow to emulate). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/qwen2_forward.h"
#include "collector/model/qwen2_model.h"
#include "kernels/cpu/cpu.h"
#ifdef MD_TEST_CUDA
#include "kernels/cuda/cuda.h"
#endif
#include "tests/test_util.h"

enum { SEQS = 5, MAX_STEPS = 12, CAPACITY = 64 };

static const int prompt_len[SEQS] = {7, 12, 3, 20, 9};
static const int feed_steps[SEQS] = {4, 6, 2, 5, 6};  /* teacher-forced steps */
static const int greedy_steps[SEQS] = {2, 4, 0, 3, 6}; /* then greedy ones */
/* After this many feed steps, sequence s evicts positions evict_at[s] ... (-1: none). */
static const int evict_after[SEQS] = {-1, 2, -1, 1, 5};

typedef struct seq_record {
  int32_t prompt[32], fed[MAX_STEPS], greedy[MAX_STEPS];
  float captured[MAX_STEPS][CAPACITY];
  int64_t cached[MAX_STEPS];
  float *final_logits;
} seq_record;

static uint32_t rng = 12345;
static int32_t random_token(int vocab) {
  rng = rng * 1664525u + 1013904223u;
  return (int32_t)((rng >> 8) % (uint32_t)vocab);
}

static void evict_some(md_qwen2_forward *fw, int s) {
  /* every third cached position from the second on, and the first */
  int64_t cached = md_qwen2_cached(fw), positions[CAPACITY], n = 0;
  const int64_t *slots = md_qwen2_slot_positions(fw);
  for (int64_t i = 0; i < cached; i++)
    if (i == 0 || (i % 3 == 1 && i != cached - 1)) positions[n++] = slots[i];
  md_error err;
  CHECK_MSG(md_qwen2_evict(fw, positions, n, &err) == MD_OK, "sequence %d: %s", s, err.message);
}

static void capture_on(md_qwen2_forward *fw, md_kernels *k, md_kbuf *received, int layers) {
  md_qwen2_capture cap = {.received = received, .layer_begin = 0, .layer_end = layers,
                          .heads = MD_CAPTURE_HEADS_MEAN};
  md_error err;
  CHECK(md_qwen2_set_capture(fw, &cap, &err) == MD_OK);
  (void)k;
}

/* Sequence s alone, on the forward state's own sequence. */
static void run_alone(md_qwen2_forward *fw, md_kernels *k, md_kbuf *received, int layers,
                      int vocab, int s, seq_record *r) {
  md_error err;
  md_qwen2_reset(fw);
  capture_on(fw, k, received, layers);
  CHECK(md_qwen2_feed(fw, r->prompt, prompt_len[s], &err) == MD_OK);
  int step = 0;
  for (int i = 0; i < feed_steps[s]; i++, step++) {
    if (i == evict_after[s]) evict_some(fw, s);
    k->ops->buf_zero(k, received, 0, CAPACITY);
    CHECK_MSG(md_qwen2_feed(fw, &r->fed[i], 1, &err) == MD_OK, "%s", err.message);
    r->cached[step] = md_qwen2_cached(fw);
    CHECK(k->ops->buf_read(k, received, 0, CAPACITY, r->captured[step], &err) == MD_OK);
  }
  int32_t next = r->fed[feed_steps[s] - 1];
  for (int i = 0; i < greedy_steps[s]; i++, step++) {
    k->ops->buf_zero(k, received, 0, CAPACITY);
    CHECK(md_qwen2_decode(fw, next, &err) == MD_OK);
    CHECK(md_qwen2_greedy(fw, &next, &err) == MD_OK);
    r->greedy[i] = next;
    r->cached[step] = md_qwen2_cached(fw);
    CHECK(k->ops->buf_read(k, received, 0, CAPACITY, r->captured[step], &err) == MD_OK);
  }
  md_qwen2_set_capture(fw, NULL, NULL);
  r->final_logits = malloc((size_t)vocab * sizeof(float));
  CHECK(md_qwen2_prefill(fw, &r->fed[0], 1, NULL, &err) == MD_OK);
  CHECK(md_qwen2_logits(fw, r->final_logits, &err) == MD_OK);
}

static void check_batched(const char *label, md_qwen2_forward *fw, md_kernels *k, int layers,
                          int vocab, seq_record *want) {
  md_error err;
  md_qwen2_seq *seqs[SEQS];
  md_kbuf *received[SEQS];
  for (int s = 0; s < SEQS; s++) {
    seqs[s] = s == 0 ? md_qwen2_seq_own(fw) : NULL;
    if (s > 0) CHECK(md_qwen2_seq_new(fw, &seqs[s], &err) == MD_OK);
    CHECK(k->ops->buf_new(k, CAPACITY, &received[s], &err) == MD_OK);
    md_qwen2_select(fw, seqs[s]);
    md_qwen2_reset(fw);
    capture_on(fw, k, received[s], layers);
    CHECK(md_qwen2_feed(fw, want[s].prompt, prompt_len[s], &err) == MD_OK);
  }
  int32_t next[SEQS];
  for (int step = 0; step < MAX_STEPS; step++) {
    md_qwen2_seq *active[SEQS];
    int32_t tokens[SEQS], out[SEQS];
    int who[SEQS], n = 0;
    bool greedy_step = false, any = false;
    /* the teacher-forced steps of every sequence first, as one batch per
     * step; then the greedy steps, as another */
    for (int s = 0; s < SEQS; s++)
      if (step < feed_steps[s]) any = true;
    greedy_step = !any;
    for (int s = 0; s < SEQS; s++) {
      int g = step - (greedy_step ? 0 : 0);
      if (!greedy_step && step < feed_steps[s]) {
        md_qwen2_select(fw, seqs[s]);
        if (step == evict_after[s]) evict_some(fw, s);
        tokens[n] = want[s].fed[step];
      } else if (greedy_step) {
        int first = 0;
        for (int t = 0; t < SEQS; t++) first = feed_steps[t] > first ? feed_steps[t] : first;
        g = step - first;
        if (g < 0 || g >= greedy_steps[s]) continue;
        tokens[n] = g == 0 ? want[s].fed[feed_steps[s] - 1] : next[s];
      } else {
        continue;
      }
      k->ops->buf_zero(k, received[s], 0, CAPACITY);
      active[n] = seqs[s];
      who[n++] = s;
    }
    if (n == 0) continue;
    md_qwen2_select(fw, NULL);
    md_status st = md_qwen2_step(fw, active, tokens, n, greedy_step ? out : NULL, &err);
    CHECK_MSG(st == MD_OK, "%s: step %d: %s", label, step, err.message);
    if (st != MD_OK) break;
    for (int b = 0; b < n; b++) {
      int s = who[b];
      int first = 0;
      for (int t = 0; t < SEQS; t++) first = feed_steps[t] > first ? feed_steps[t] : first;
      int index = greedy_step ? feed_steps[s] + (step - first) : step;
      float got[CAPACITY];
      CHECK(k->ops->buf_read(k, received[s], 0, CAPACITY, got, &err) == MD_OK);
      md_qwen2_select(fw, seqs[s]);
      CHECK_MSG(md_qwen2_cached(fw) == want[s].cached[index], "%s: sequence %d step %d: %lld "
                "cached, alone %lld", label, s, index, (long long)md_qwen2_cached(fw),
                (long long)want[s].cached[index]);
      CHECK_MSG(!memcmp(got, want[s].captured[index], sizeof got),
                "%s: sequence %d step %d: the captured attention differs from the run alone",
                label, s, index);
      if (greedy_step) {
        next[s] = out[b];
        CHECK_MSG(out[b] == want[s].greedy[step - first], "%s: sequence %d greedy step %d: "
                  "token %d, alone %d", label, s, step - first, out[b], want[s].greedy[step - first]);
      }
    }
  }
  float *logits = malloc((size_t)vocab * sizeof(float));
  for (int s = 0; s < SEQS; s++) {
    md_qwen2_select(fw, seqs[s]);
    md_qwen2_set_capture(fw, NULL, NULL);
    CHECK(md_qwen2_logits(fw, logits, &err) != MD_OK); /* none after a batched step */
    CHECK(md_qwen2_prefill(fw, &want[s].fed[0], 1, NULL, &err) == MD_OK);
    CHECK(md_qwen2_logits(fw, logits, &err) == MD_OK);
    CHECK_MSG(!memcmp(logits, want[s].final_logits, (size_t)vocab * sizeof(float)),
              "%s: sequence %d: the cache after the batch differs from the run alone", label, s);
  }
  free(logits);
  /* a fork: a copy of sequence 3 runs on as sequence 3 does */
  md_qwen2_seq *fork = NULL;
  CHECK(md_qwen2_seq_new(fw, &fork, &err) == MD_OK);
  CHECK(md_qwen2_seq_copy(fw, fork, seqs[3], &err) == MD_OK);
  md_qwen2_select(fw, fork);
  CHECK(md_qwen2_cached(fw) == (md_qwen2_select(fw, seqs[3]), md_qwen2_cached(fw)));
  md_qwen2_seq_free(fw, fork);
  /* refusals, changing nothing */
  md_qwen2_seq *twice[] = {seqs[1], seqs[1]};
  int32_t tok[] = {1, 1}, bad[] = {-1};
  md_qwen2_select(fw, seqs[1]);
  int64_t pos = md_qwen2_position(fw);
  CHECK(md_qwen2_step(fw, twice, tok, 2, NULL, &err) == MD_E_INVALID);
  CHECK(md_qwen2_step(fw, twice, bad, 1, NULL, &err) == MD_E_INVALID);
  CHECK(md_qwen2_step(fw, twice, tok, 0, NULL, &err) == MD_E_INVALID);
  CHECK(md_qwen2_position(fw) == pos);
  for (int s = 0; s < SEQS; s++) {
    k->ops->buf_free(k, received[s]);
    if (s > 0) md_qwen2_seq_free(fw, seqs[s]);
  }
  md_qwen2_select(fw, NULL);
}

/* The back end under test and its name in the labels. */
static md_status open_kernels(md_cpu_kernels path, bool bf16, md_kernels **k, md_error *err) {
#ifdef MD_TEST_CUDA
  (void)path, (void)bf16;
  return md_kernels_cuda_new(NULL, k, err);
#else
  md_cpu_options o = {.threads = 2, .kernels = path, .bf16_gemm = bf16};
  return md_kernels_cpu_new(&o, k, err);
#endif
}

static const char *kernels_name(md_kernels *k) {
#ifdef MD_TEST_CUDA
  (void)k;
  return "cuda";
#else
  return md_kernels_cpu_bf16_gemm(k) ? "avx512 with BF16 products" : md_kernels_cpu_isa(k);
#endif
}

static void run_checkpoint(const char *dir, const char *label, md_cpu_kernels path, bool bf16) {
  md_error err;
  md_qwen2_model *model = NULL;
  md_kernels *k = NULL;
  if (md_qwen2_model_open(dir, &model, &err) != MD_OK || open_kernels(path, bf16, &k, &err) != MD_OK) {
    CHECK_MSG(0, "%s: %s", dir, err.message);
    return;
  }
  const md_qwen2_config *c = md_qwen2_model_config(model);
  md_qwen2_forward_options fo = {.capacity = CAPACITY};
  md_qwen2_forward *fw = NULL;
  CHECK(md_qwen2_forward_new(c, md_qwen2_model_weights(model), k, &fo, &fw, &err) == MD_OK);
  md_kbuf *received = NULL;
  CHECK(k->ops->buf_new(k, CAPACITY, &received, &err) == MD_OK);
  seq_record want[SEQS];
  memset(want, 0, sizeof want);
  for (int s = 0; s < SEQS; s++) {
    for (int i = 0; i < prompt_len[s]; i++) want[s].prompt[i] = random_token(c->vocab_size);
    for (int i = 0; i < feed_steps[s]; i++) want[s].fed[i] = random_token(c->vocab_size);
    run_alone(fw, k, received, c->num_hidden_layers, c->vocab_size, s, &want[s]);
  }
  k->ops->buf_free(k, received);
  char name[128];
  snprintf(name, sizeof name, "%s, %s kernels, batched products", label,
           kernels_name(k));
  check_batched(name, fw, k, c->num_hidden_layers, c->vocab_size, want);
  /* Without matmul_rows: each row through the one-row operations. */
  md_kernel_ops rowwise = *k->ops;
  const md_kernel_ops *saved = k->ops;
  rowwise.matmul_rows = NULL;
  rowwise.logits_rows = NULL;
  k->ops = &rowwise;
  snprintf(name, sizeof name, "%s, %s kernels, row by row", label, kernels_name(k));
  check_batched(name, fw, k, c->num_hidden_layers, c->vocab_size, want);
  /* Without buf_view: one sequence after another. */
  rowwise.buf_view = NULL;
  snprintf(name, sizeof name, "%s, %s kernels, one by one", label, kernels_name(k));
  check_batched(name, fw, k, c->num_hidden_layers, c->vocab_size, want);
  k->ops = saved;
  for (int s = 0; s < SEQS; s++) free(want[s].final_logits);
  md_qwen2_forward_free(fw);
  md_kernels_free(k);
  md_qwen2_model_close(model);
}

int main(int argc, char **argv) {
  const char *root = getenv("MD_SOURCE_ROOT");
  if (!root) root = ".";
  char demo[4096], f32[4096];
  snprintf(demo, sizeof demo, "%s/data/models/qwen2-tiny", root);
  snprintf(f32, sizeof f32, "%s/tests/model/fixtures/hd128_f32", root);
#ifdef MD_TEST_CUDA
  char f16[4096], bf16[4096];
  snprintf(f16, sizeof f16, "%s/tests/model/fixtures/theta1e4_f16", root);
  snprintf(bf16, sizeof bf16, "%s/tests/model/fixtures/qwen05_heads_bf16", root);
  /* An argument names the one fixture to run. */
  const char *only = argc > 1 ? argv[1] : NULL;
  if (!only || !strcmp(only, "hd128_f32")) run_checkpoint(f32, "hd128_f32", MD_CPU_KERNELS_BEST, false);
  if (!only || !strcmp(only, "theta1e4_f16")) run_checkpoint(f16, "theta1e4_f16", MD_CPU_KERNELS_BEST, false);
  if (!only || !strcmp(only, "qwen05_heads_bf16"))
    run_checkpoint(bf16, "qwen05_heads_bf16", MD_CPU_KERNELS_BEST, false);
  (void)demo;
  return md_test_finish("qwen2 batch (cuda)");
#endif
  (void)argc;
  (void)argv;
  md_cpu_kernels paths[3];
  int n_paths = md_cpu_kernel_paths(paths);
  for (int i = 0; i < n_paths; i++) {
    run_checkpoint(demo, "demo (BF16)", paths[i], false);
    run_checkpoint(f32, "hd128_f32", paths[i], false);
  }
  /* BF16 products (--bf16-gemm): BF16 decode rows by md_bf16_rows, whose
   * bits are the same batched or alone; only on a CPU with AVX-512 BF16. */
  if (md_cpu_read_facts().avx512_bf16) run_checkpoint(demo, "demo (BF16)", MD_CPU_KERNELS_AVX512, true);
  else printf("qwen2 batch: this CPU has no AVX-512 BF16: BF16 products not run\n");
  return md_test_finish("qwen2 batch");
}
