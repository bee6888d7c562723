/* Parity of the Qwen2 forward pass with HF transformers (eager attention,
 * float32) on the random checkpoints of tests/model/fixtures/, made by
 * tests/model/make_fixtures.py: prompt logits, 32 greedy decode steps
 * (tokens and logits), the softmax weights of prompt rows and of every decode
 * step per layer and head as seen through the attention hook, and the hook's
 * aggregates (column sums over the prompt, means over heads). Then internal
 * consistency: prefill-then-decode equals one prefill of the whole sequence,
 * and a prefill run in small chunks equals one in a single chunk.
 *
 * Tolerances (absolute). Every checkpoint, whatever its file dtype, is
 * computed in float32 from exactly the weights HF computes from (the fixture
 * script checks that HF's upcast parameters equal the file's values), so BF16
 * and F16 get the same bounds as F32; only the summation order differs
 * (OpenBLAS sgemm / our AVX2 matvec against torch's kernels), which moves
 * results by a few float32 ulps per operation:
 *   logits 1e-4 (values of magnitude ~1-10), attention weights 1e-5,
 *   column sums over the prompt 1e-4 (sums of up to 300 weights),
 *   our prefill vs our decode, chunked vs single prefill: 2e-5. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/qwen2_forward.h"
#include "collector/model/qwen2_model.h"
#include "kernels/cpu/cpu.h"
#include "tests/model/fixture.h"
#include "tests/test_util.h"

#define LOGIT_TOL 1e-4
#define ATTN_TOL 1e-5
#define COLSUM_TOL 1e-4
#define SELF_TOL 2e-5
/* With --bf16-gemm the prompt's activations are rounded to bf16 (relative
 * 2^-9 each) before its matrix products, and its attention's weights and
 * values before P V, so its outputs, the KV cache and everything after
 * move by about 1e-3 relative (kernels/cpu/gemm_bf16.h); bounds 3 to 4
 * times the errors measured on the BF16 checkpoint (logits 0.035 prompt /
 * 0.020 decode, attention weights 0.0067 / 0.0074, column sums 0.0087). A
 * fault in the products (a block of K dropped, truncation for rounding)
 * moves them by 0.1 to 10. */
#define BF16_LOGIT_TOL 0.15
#define BF16_ATTN_TOL 0.02
#define BF16_COLSUM_TOL 0.04

static const char *const CHECKPOINTS[] = {"qwen05_heads_bf16", "hd128_f32", "theta1e4_f32",
                                          "theta1e4_f16"};

/* What the hook saw: rows kept for comparison, and the aggregates the
 * collector will compute (column sums over the prompt with heads averaged,
 * and the decode step's row averaged over heads and layers). */
typedef struct recorder {
  int layers, heads;
  int64_t prompt_len, steps, width;  /* width = prompt_len + steps */
  const int32_t *kept_rows;          /* prompt rows whose weights are kept */
  int64_t n_kept;
  float *prefill_rows;               /* [L][H][n_kept][prompt_len] */
  double *colsum;                    /* [L][prompt_len] */
  float *decode_rows;                /* [S][L][H][width] */
  double *decode_mean;               /* [S][width] */
  double worst_sum_error;            /* max |sum(weights) - 1| */
  int64_t calls, bad_lengths;
} recorder;

static void on_row(void *ctx, int layer, int head, int64_t pos, const float *w, int64_t n_keys) {
  recorder *r = ctx;
  r->calls++;
  if (n_keys != pos + 1 || layer < 0 || layer >= r->layers || head < 0 || head >= r->heads ||
      pos >= r->width) {
    r->bad_lengths++;
    return;
  }
  double sum = 0.0;
  for (int64_t j = 0; j < n_keys; j++) sum += w[j];
  if (fabs(sum - 1.0) > r->worst_sum_error) r->worst_sum_error = fabs(sum - 1.0);
  if (pos < r->prompt_len) {
    double *colsum = r->colsum + (size_t)layer * (size_t)r->prompt_len;
    for (int64_t j = 0; j < n_keys; j++) colsum[j] += w[j] / r->heads;
    for (int64_t m = 0; m < r->n_kept; m++)
      if (r->kept_rows[m] == pos)
        memcpy(r->prefill_rows + (((size_t)layer * r->heads + head) * r->n_kept + m) * r->prompt_len,
               w, (size_t)n_keys * sizeof(float));
    return;
  }
  int64_t s = pos - r->prompt_len;
  memcpy(r->decode_rows + (((size_t)s * r->layers + layer) * r->heads + head) * r->width, w,
         (size_t)n_keys * sizeof(float));
  for (int64_t j = 0; j < n_keys; j++)
    r->decode_mean[s * r->width + j] += w[j] / ((double)r->heads * r->layers);
}

static double max_abs_diff_f(const float *a, const float *b, size_t n) {
  double worst = 0.0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    if (!(d <= worst)) worst = d; /* NaN counts as worst */
  }
  return worst;
}

typedef struct fixtures {
  fixture_array prompt, tokens, logit_rows, prefill_logits, decode_logits;
  fixture_array attn_rows, prefill_attn, colsum, decode_attn;
} fixtures;

static fixtures load_fixtures(const char *dir) {
  fixtures f;
  f.prompt = fixture_load(dir, "prompt.npy", 1);
  f.tokens = fixture_load(dir, "tokens.npy", 1);
  f.logit_rows = fixture_load(dir, "prefill_logits_rows.npy", 1);
  f.prefill_logits = fixture_load(dir, "prefill_logits.npy", 0);
  f.decode_logits = fixture_load(dir, "decode_logits.npy", 0);
  f.attn_rows = fixture_load(dir, "prefill_attn_rows.npy", 1);
  f.prefill_attn = fixture_load(dir, "prefill_attn.npy", 0);
  f.colsum = fixture_load(dir, "prefill_attn_colsum.npy", 0);
  f.decode_attn = fixture_load(dir, "decode_attn.npy", 0);
  return f;
}

static void free_fixtures(fixtures *f) {
  fixture_array *all[] = {&f->prompt, &f->tokens, &f->logit_rows, &f->prefill_logits,
                          &f->decode_logits, &f->attn_rows, &f->prefill_attn, &f->colsum,
                          &f->decode_attn};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fixture_free(all[i]);
}

typedef struct errors {
  double prefill_logits, decode_logits, prefill_attn, decode_attn, colsum, decode_mean;
} errors;

/* Prefill + greedy decode against HF; returns our decode logits [S][vocab].
 * teacher_forced: every decode step is fed HF's token, and our greedy
 * choices are counted rather than required to match (the BF16 prompt
 * products move logits by more than a random checkpoint's smallest argmax
 * margins, and one different token changes every step after it). */
static float *check_against_hf(const char *name, md_qwen2_forward *fw, const md_qwen2_config *c,
                               const fixtures *f, errors *e, bool teacher_forced) {
  int64_t n = f->prompt.shape[0], steps = f->decode_logits.shape[0], vocab = c->vocab_size;
  int L = c->num_hidden_layers, H = c->num_attention_heads;
  recorder r = {.layers = L, .heads = H, .prompt_len = n, .steps = steps, .width = n + steps,
                .kept_rows = f->attn_rows.i32, .n_kept = f->attn_rows.shape[0]};
  r.prefill_rows = calloc((size_t)L * H * r.n_kept * n, sizeof(float));
  r.colsum = calloc((size_t)L * n, sizeof(double));
  r.decode_rows = calloc((size_t)steps * L * H * r.width, sizeof(float));
  r.decode_mean = calloc((size_t)steps * r.width, sizeof(double));
  float *all_logits = malloc((size_t)n * vocab * sizeof(float));
  float *decode_logits = malloc((size_t)steps * vocab * sizeof(float));
  md_attn_hook hook = {.on_row = on_row, .ctx = &r};
  md_qwen2_set_attn_hook(fw, &hook);
  md_error err;

  CHECK_MSG(md_qwen2_prefill(fw, f->prompt.i32, n, all_logits, &err) == MD_OK, "%s: %s", name, err.message);
  for (int64_t i = 0; i < f->logit_rows.shape[0]; i++) {
    double d = max_abs_diff_f(all_logits + (size_t)f->logit_rows.i32[i] * vocab,
                              f->prefill_logits.f32 + (size_t)i * vocab, (size_t)vocab);
    if (d > e->prefill_logits) e->prefill_logits = d;
  }
  int32_t token = -1;
  int64_t differ = 0;
  CHECK(md_qwen2_greedy(fw, &token, &err) == MD_OK);
  if (teacher_forced) differ += token != f->tokens.i32[0];
  else CHECK_MSG(token == f->tokens.i32[0], "%s: first greedy token %d, HF %d", name, token, f->tokens.i32[0]);
  for (int64_t s = 0; s < steps; s++) {
    CHECK(md_qwen2_decode(fw, teacher_forced ? f->tokens.i32[s] : token, &err) == MD_OK);
    CHECK(md_qwen2_logits(fw, decode_logits + s * vocab, &err) == MD_OK);
    double d = max_abs_diff_f(decode_logits + s * vocab, f->decode_logits.f32 + s * vocab, (size_t)vocab);
    if (d > e->decode_logits) e->decode_logits = d;
    CHECK(md_qwen2_greedy(fw, &token, &err) == MD_OK);
    if (teacher_forced) differ += token != f->tokens.i32[s + 1];
    else CHECK_MSG(token == f->tokens.i32[s + 1], "%s: greedy token %lld is %d, HF %d", name,
                   (long long)s + 1, token, f->tokens.i32[s + 1]);
  }
  if (teacher_forced)
    printf("  %s: teacher-forced, %lld of %lld greedy tokens differ from HF's\n", name,
           (long long)differ, (long long)steps + 1);
  md_qwen2_set_attn_hook(fw, NULL);

  /* The hook was called once per (layer, head, row), rows sum to one. */
  CHECK_MSG(r.calls == (int64_t)L * H * (n + steps), "%s: %lld hook calls", name, (long long)r.calls);
  CHECK(r.bad_lengths == 0);
  CHECK_MSG(r.worst_sum_error < 1e-5, "%s: attention row sums off by %g", name, r.worst_sum_error);
  e->prefill_attn = max_abs_diff_f(r.prefill_rows, f->prefill_attn.f32, f->prefill_attn.count);
  e->decode_attn = max_abs_diff_f(r.decode_rows, f->decode_attn.f32, f->decode_attn.count);
  for (size_t i = 0; i < f->colsum.count; i++) {
    double d = fabs(r.colsum[i] - f->colsum.f32[i]);
    if (!(d <= e->colsum)) e->colsum = d;
  }
  /* The decode aggregate (mean over heads and layers) against the same mean
   * of HF's rows. */
  for (int64_t s = 0; s < steps; s++)
    for (int64_t j = 0; j < r.width; j++) {
      double want = 0.0;
      for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
          want += f->decode_attn.f32[(((size_t)s * L + l) * H + h) * r.width + j];
      double d = fabs(r.decode_mean[s * r.width + j] - want / ((double)L * H));
      if (!(d <= e->decode_mean)) e->decode_mean = d;
    }
  free(r.prefill_rows);
  free(r.colsum);
  free(r.decode_rows);
  free(r.decode_mean);
  free(all_logits);
  return decode_logits;
}

/* The whole sequence (prompt + fed decode tokens) in one prefill, optionally
 * in chunks of max_batch: its last rows must equal the decode steps' logits. */
static void check_consistency(const char *name, const md_qwen2_config *c,
                              const md_qwen2_weights *w, md_kernels *k, const fixtures *f,
                              const float *decode_logits, int64_t max_batch) {
  int64_t n = f->prompt.shape[0], steps = f->decode_logits.shape[0], vocab = c->vocab_size;
  int64_t total = n + steps;
  int32_t *sequence = malloc((size_t)total * sizeof(int32_t));
  memcpy(sequence, f->prompt.i32, (size_t)n * sizeof(int32_t));
  memcpy(sequence + n, f->tokens.i32, (size_t)steps * sizeof(int32_t));
  float *all_logits = malloc((size_t)total * vocab * sizeof(float));
  md_qwen2_forward_options options = {.capacity = total, .max_batch = max_batch};
  md_qwen2_forward *fw = NULL;
  md_error err;
  CHECK_MSG(md_qwen2_forward_new(c, w, k, &options, &fw, &err) == MD_OK, "%s", err.message);
  if (fw) {
    CHECK(md_qwen2_prefill(fw, sequence, total, all_logits, &err) == MD_OK);
    CHECK(md_qwen2_position(fw) == total);
    double d = max_abs_diff_f(all_logits + (size_t)n * vocab, decode_logits, (size_t)steps * vocab);
    CHECK_MSG(d <= SELF_TOL, "%s: prefill (chunks of %lld) vs decode logits differ by %g", name,
              (long long)max_batch, d);
    printf("  %s: one prefill (chunks of %lld) vs prefill+decode: max |diff| %.3g\n", name,
           (long long)max_batch, d);
    /* Without all_logits only the last token's logits are made: the same. */
    float *last = malloc((size_t)vocab * sizeof(float));
    md_qwen2_reset(fw);
    CHECK(md_qwen2_prefill(fw, sequence, total, NULL, &err) == MD_OK);
    CHECK(md_qwen2_logits(fw, last, &err) == MD_OK);
    d = max_abs_diff_f(last, all_logits + (size_t)(total - 1) * vocab, (size_t)vocab);
    CHECK_MSG(d <= 1e-6, "%s: last logits without all_logits differ by %g", name, d);
    free(last);
    md_qwen2_forward_free(fw);
  }
  free(sequence);
  free(all_logits);
}

/* Bounds on |ours - HF|. */
typedef struct tolerances {
  double logits, attn, colsum;
} tolerances;

static const tolerances FLOAT32 = {LOGIT_TOL, ATTN_TOL, COLSUM_TOL};
static const tolerances BF16_GEMM = {BF16_LOGIT_TOL, BF16_ATTN_TOL, BF16_COLSUM_TOL};

static void run_checkpoint(const char *name, md_cpu_kernels path, bool bf16_gemm) {
  char dir[4096];
  fixture_dir(dir, sizeof dir, name);
  md_error err;
  md_qwen2_model *model = NULL;
  if (md_qwen2_model_open(dir, &model, &err) != MD_OK) {
    CHECK_MSG(0, "%s: %s", name, err.message);
    return;
  }
  const md_qwen2_config *c = md_qwen2_model_config(model);
  const md_qwen2_weights *w = md_qwen2_model_weights(model);
  fixtures f = load_fixtures(dir);
  md_cpu_options cpu_options = {.threads = 0, .kernels = path, .bf16_gemm = bf16_gemm};
  const tolerances *tol = bf16_gemm ? &BF16_GEMM : &FLOAT32;
  md_kernels *k = NULL;
  CHECK(md_kernels_cpu_new(&cpu_options, &k, &err) == MD_OK);
  md_qwen2_forward_options options = {.capacity = f.prompt.shape[0] + f.decode_logits.shape[0]};
  md_qwen2_forward *fw = NULL;
  CHECK_MSG(md_qwen2_forward_new(c, w, k, &options, &fw, &err) == MD_OK, "%s: %s", name, err.message);
  if (fw) {
    errors e = {0};
    float *decode_logits = check_against_hf(name, fw, c, &f, &e, bf16_gemm);
    printf("%s [%s, %s%s]: max |ours - HF|: prompt logits %.3g, decode logits %.3g, "
           "prompt attention %.3g, decode attention %.3g, column sums %.3g, decode mean %.3g\n",
           name, md_dtype_name(w->dtype), md_kernels_cpu_isa(k), bf16_gemm ? ", bf16 gemm" : "",
           e.prefill_logits, e.decode_logits,
           e.prefill_attn, e.decode_attn, e.colsum, e.decode_mean);
    CHECK_MSG(e.prefill_logits <= tol->logits, "%s: prompt logits off by %g", name, e.prefill_logits);
    CHECK_MSG(e.decode_logits <= tol->logits, "%s: decode logits off by %g", name, e.decode_logits);
    CHECK_MSG(e.prefill_attn <= tol->attn, "%s: prompt attention off by %g", name, e.prefill_attn);
    CHECK_MSG(e.decode_attn <= tol->attn, "%s: decode attention off by %g", name, e.decode_attn);
    CHECK_MSG(e.colsum <= tol->colsum, "%s: column sums off by %g", name, e.colsum);
    CHECK_MSG(e.decode_mean <= tol->attn, "%s: decode means off by %g", name, e.decode_mean);
    /* Our prefill against our decode holds in float32 only: with the BF16
     * products a prompt and a decode row are multiplied differently. */
    if (!bf16_gemm) {
      check_consistency(name, c, w, k, &f, decode_logits, 0);
      check_consistency(name, c, w, k, &f, decode_logits, 37);
    }
    free(decode_logits);
    md_qwen2_forward_free(fw);
  }
  md_kernels_free(k);
  free_fixtures(&f);
  md_qwen2_model_close(model);
}

int main(void) {
  /* Every kernel path this CPU runs (portable, AVX2, AVX-512). */
  md_cpu_kernels paths[3];
  int n_paths = md_cpu_kernel_paths(paths);
  for (size_t i = 0; i < sizeof CHECKPOINTS / sizeof CHECKPOINTS[0]; i++) {
    for (int j = 0; j < n_paths; j++) run_checkpoint(CHECKPOINTS[i], paths[j], false);
  }
  /* The opt-in BF16 products (--bf16-gemm) on the BF16 checkpoint,
   * where the CPU has AVX-512 BF16 (tests/kernels/test_gemm_bf16 checks the
   * refusal elsewhere). */
  if (md_cpu_read_facts().avx512_bf16) run_checkpoint("qwen05_heads_bf16", MD_CPU_KERNELS_BEST, true);
  else printf("bf16 gemm: not run, this CPU has no AVX-512 BF16\n");
  return md_test_finish("test_qwen2_forward");
}
