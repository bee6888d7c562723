/* The forward pass on the CUDA back end against references, in both prefill
 * GEMM modes (FAST: BF16/F16 tensor cores; EXACT: fp32). Run by
 * tests/gpu/check.sh; one PASS or FAIL line per check.
 *
 *   gpu_parity fixtures [--only NAME] [--gemm fast|exact] [--device N]
 *       the committed random checkpoints of tests/model/fixtures against HF
 *       transformers' outputs (tests/model/make_fixtures.py): prompt and
 *       decode logits, greedy tokens, softmax rows seen through the hook,
 *       per-layer column sums, and the fused capture (prefill column sums
 *       and decode rows, mean and max over heads, averaged over layers)
 *   gpu_parity model DIR [--prompt N] [--steps S] [--device N]
 *       a checkpoint (tests/gpu/make_checkpoint: Qwen2.5-1.5B's shapes)
 *       against the CPU back end: logits, greedy tokens, captured rows
 *
 * Both also check that decode steps recorded as CUDA graphs (md_cuda_options
 * .graphs) compute exactly what the launched steps compute.
 *
 * Decode steps are teacher-forced with the reference's tokens, so every
 * step compares the same computation; our argmax must equal the
 * reference's token wherever the reference's top-two margin exceeds the
 * logit tolerance (closer calls may flip within rounding).
 *
 * Tolerances. EXACT mode (and any F32 checkpoint) computes in fp32 like the
 * CPU back end, so against HF it gets the CPU test's bounds (logits 1e-4,
 * softmax weights and decode captures 1e-5, column sums 1e-4; the fixtures
 * have 2-3 layers). Against the CPU on 28 layers: fp32 reordering gives
 * ~1e-6 relative per operation, grown by depth (~140 products in
 * sequence) to at most ~1e-4: the bound is 1e-3 relative to the largest
 * magnitude (logits, captured rows). FAST mode rounds prefill activations
 * to BF16 (2^-8, ~2e-3 relative per product for random signs) or F16
 * (2^-11); the errors of ~140 products in sequence add up to ~2e-2: the
 * bound is 5e-2 relative for the 28-layer model and 2e-2 for the 2-3
 * layer fixtures (BF16/F16 only; F32 fixtures keep the fp32 bounds). The
 * decode GEMV is fp32 in both modes; FAST's decode differences come from
 * the KV cache its prefill wrote. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collector/model/qwen2_forward.h"
#include "collector/model/qwen2_model.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cuda/cuda.h"
#include "tests/gpu/gpu_check.h"
#include "tests/model/fixture.h"

static int device = 0;
static const char *const GEMM_NAMES[] = {"fast", "exact", "tf32"};

static md_kernels *open_cuda_graphs(md_cuda_gemm gemm, int graphs) {
  md_cuda_options options = {.device = device, .gemm = gemm, .no_graphs = !graphs};
  md_kernels *k = NULL;
  md_error err;
  if (md_kernels_cuda_new(&options, &k, &err) != MD_OK) gpu_die("md_kernels_cuda_new", &err);
  return k;
}

static md_kernels *open_cuda(md_cuda_gemm gemm) { return open_cuda_graphs(gemm, 0); }

static void first_two(const float *v, int64_t n, int64_t *best, double *margin) {
  int64_t b = 0;
  for (int64_t i = 1; i < n; i++)
    if (v[i] > v[b]) b = i;
  double second = -INFINITY;
  for (int64_t i = 0; i < n; i++)
    if (i != b && v[i] > second) second = v[i];
  *best = b;
  *margin = (double)v[b] - second;
}

static double max_abs(const float *v, size_t n) {
  double m = 0.0;
  for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)v[i]));
  return m;
}

/* ---- fixtures against HF ---------------------------------------------------------- */

typedef struct recorder {
  int layers, heads;
  int64_t prompt_len, width;      /* width = prompt + steps */
  const int32_t *kept;            /* prompt rows whose weights are kept */
  int64_t n_kept;
  float *prefill_rows;            /* [L][H][n_kept][prompt_len] */
  double *colsum;                 /* [L][prompt_len] */
  float *decode_rows;             /* [S][L][H][width] */
} recorder;

static void on_row(void *ctx, int layer, int head, int64_t pos, const float *w, int64_t n_keys) {
  recorder *r = ctx;
  if (layer < 0 || layer >= r->layers || head < 0 || head >= r->heads || n_keys != pos + 1) return;
  if (pos < r->prompt_len) {
    for (int64_t j = 0; j < n_keys; j++) r->colsum[(size_t)layer * r->prompt_len + j] += w[j] / r->heads;
    for (int64_t m = 0; m < r->n_kept; m++)
      if (r->kept[m] == pos)
        memcpy(r->prefill_rows + (((size_t)layer * r->heads + head) * r->n_kept + m) * r->prompt_len, w,
               (size_t)n_keys * sizeof(float));
    return;
  }
  int64_t s = pos - r->prompt_len;
  memcpy(r->decode_rows + (((size_t)s * r->layers + layer) * r->heads + head) * r->width, w,
         (size_t)n_keys * sizeof(float));
}

typedef struct fixtures_set {
  fixture_array prompt, tokens, logit_rows, prefill_logits, decode_logits;
  fixture_array attn_rows, prefill_attn, colsum, decode_attn;
} fixtures_set;

typedef struct tolerances {
  double logits, attention, colsum, capture; /* relative to the reference's largest magnitude in FAST */
  bool relative;
} tolerances;

typedef struct fixture_errors {
  double prefill_logits, decode_logits, prefill_rows, decode_rows, colsum;
  double capture_prefill, capture_mean, capture_max;
  int token_mismatches, close_calls;
} fixture_errors;

/* HF's decode capture for step s: mean over layers of (mean or max over heads). */
static void hf_capture(const fixture_array *decode_attn, int64_t s, int L, int H, int64_t width, bool max,
                       float *out) {
  for (int64_t j = 0; j < width; j++) {
    double total = 0.0;
    for (int l = 0; l < L; l++) {
      double agg = 0.0;
      for (int h = 0; h < H; h++) {
        double w = decode_attn->f32[(((size_t)s * L + l) * H + h) * width + j];
        agg = max ? fmax(agg, w) : agg + w / H;
      }
      total += agg / L;
    }
    out[j] = (float)total;
  }
}

static double diff_scaled(const float *got, const float *want, size_t n, bool relative) {
  double scale = relative ? max_abs(want, n) : 1.0;
  return gpu_max_abs_diff(got, want, n) / (scale > 0 ? scale : 1.0);
}

static md_status set_capture(md_qwen2_forward *fw, md_kbuf *received, int layers, bool max,
                             md_error *err) {
  md_qwen2_capture capture = {.received = received, .layer_begin = 0, .layer_end = layers,
                              .heads = max ? MD_CAPTURE_HEADS_MAX : MD_CAPTURE_HEADS_MEAN};
  return md_qwen2_set_capture(fw, &capture, err);
}

/* Prefill and teacher-forced decode with the hook and the capture on. */
static void run_fixture(md_kernels *k, md_qwen2_forward *fw, const md_qwen2_config *c,
                        const fixtures_set *f, recorder *r, md_kbuf *received,
                        const tolerances *tol, fixture_errors *e) {
  int64_t n = f->prompt.shape[0], steps = f->decode_logits.shape[0], vocab = c->vocab_size;
  int L = c->num_hidden_layers, H = c->num_attention_heads;
  size_t width = (size_t)(n + steps);
  float *logits = malloc((size_t)(n > 1 ? n : 1) * (size_t)vocab * sizeof(float));
  float *got = malloc(width * sizeof(float)), *want = malloc(width * sizeof(float));
  md_attn_hook hook = {.on_row = on_row, .ctx = r};
  md_error err;
  md_qwen2_set_attn_hook(fw, &hook);
  k->ops->buf_zero(k, received, 0, width);
  if (set_capture(fw, received, L, false, &err) != MD_OK ||
      md_qwen2_prefill(fw, f->prompt.i32, n, logits, &err) != MD_OK ||
      k->ops->buf_read(k, received, 0, width, got, &err) != MD_OK)
    gpu_die("prefill", &err);
  for (int64_t i = 0; i < f->logit_rows.shape[0]; i++) {
    const float *ref = f->prefill_logits.f32 + (size_t)i * vocab;
    e->prefill_logits = fmax(e->prefill_logits, diff_scaled(logits + (size_t)f->logit_rows.i32[i] * vocab, ref,
                                                            (size_t)vocab, tol->relative));
  }
  for (int64_t j = 0; j < n; j++) { /* the capture is the layers' mean of HF's column sums */
    double total = 0.0;
    for (int l = 0; l < L; l++) total += f->colsum.f32[(size_t)l * n + j] / L;
    want[j] = (float)total;
  }
  e->capture_prefill = diff_scaled(got, want, (size_t)n, tol->relative);
  for (int64_t s = 0; s < steps; s++) {
    bool max = s % 2 == 1;
    k->ops->buf_zero(k, received, 0, width);
    if (set_capture(fw, received, L, max, &err) != MD_OK ||
        md_qwen2_decode(fw, f->tokens.i32[s], &err) != MD_OK ||
        md_qwen2_logits(fw, logits, &err) != MD_OK ||
        k->ops->buf_read(k, received, 0, width, got, &err) != MD_OK)
      gpu_die("decode", &err);
    const float *ref = f->decode_logits.f32 + (size_t)s * vocab;
    double d = diff_scaled(logits, ref, (size_t)vocab, tol->relative);
    e->decode_logits = fmax(e->decode_logits, d);
    int64_t ours, theirs;
    double margin, unused;
    first_two(logits, vocab, &ours, &unused);
    first_two(ref, vocab, &theirs, &margin);
    double bound = tol->logits * (tol->relative ? max_abs(ref, (size_t)vocab) : 1.0);
    if (ours != theirs) {
      if (margin > 2 * bound) e->token_mismatches++;
      else e->close_calls++;
    }
    hf_capture(&f->decode_attn, s, L, H, (int64_t)width, max, want);
    double c_err = diff_scaled(got, want, width, tol->relative);
    if (max) e->capture_max = fmax(e->capture_max, c_err);
    else e->capture_mean = fmax(e->capture_mean, c_err);
  }
  md_qwen2_set_attn_hook(fw, NULL);
  e->prefill_rows = gpu_max_abs_diff(r->prefill_rows, f->prefill_attn.f32, f->prefill_attn.count);
  e->decode_rows = gpu_max_abs_diff(r->decode_rows, f->decode_attn.f32, f->decode_attn.count);
  double colsum_scale = tol->relative ? max_abs(f->colsum.f32, f->colsum.count) : 1.0;
  for (size_t i = 0; i < f->colsum.count; i++)
    e->colsum = fmax(e->colsum, fabs(r->colsum[i] - f->colsum.f32[i]) / colsum_scale);
  free(logits);
  free(got);
  free(want);
}

static void check_fixture(const char *name, md_cuda_gemm gemm) {
  char dir[4096];
  fixture_dir(dir, sizeof dir, name);
  md_error err;
  md_qwen2_model *model = NULL;
  if (md_qwen2_model_open(dir, &model, &err) != MD_OK) gpu_die(name, &err);
  const md_qwen2_config *c = md_qwen2_model_config(model);
  const md_qwen2_weights *w = md_qwen2_model_weights(model);
  fixtures_set f = {
      fixture_load(dir, "prompt.npy", 1),          fixture_load(dir, "tokens.npy", 1),
      fixture_load(dir, "prefill_logits_rows.npy", 1), fixture_load(dir, "prefill_logits.npy", 0),
      fixture_load(dir, "decode_logits.npy", 0),   fixture_load(dir, "prefill_attn_rows.npy", 1),
      fixture_load(dir, "prefill_attn.npy", 0),    fixture_load(dir, "prefill_attn_colsum.npy", 0),
      fixture_load(dir, "decode_attn.npy", 0)};
  int64_t n = f.prompt.shape[0], steps = f.decode_logits.shape[0];
  bool fp32 = gemm == MD_CUDA_GEMM_EXACT || w->dtype == MD_DTYPE_F32;
  tolerances tol = fp32 ? (tolerances){1e-4, 1e-5, 1e-4, 1e-5, false}
                        : (tolerances){2e-2, 2e-2, 2e-2, 2e-2, true};
  md_kernels *k = open_cuda(gemm);
  md_qwen2_forward_options options = {.capacity = n + steps};
  md_qwen2_forward *fw = NULL;
  if (md_qwen2_forward_new(c, w, k, &options, &fw, &err) != MD_OK) gpu_die(name, &err);
  md_kbuf *received = gpu_upload(k, NULL, (size_t)(n + steps));
  int L = c->num_hidden_layers, H = c->num_attention_heads;
  recorder r = {.layers = L, .heads = H, .prompt_len = n, .width = n + steps, .kept = f.attn_rows.i32,
                .n_kept = f.attn_rows.shape[0]};
  r.prefill_rows = calloc((size_t)L * H * r.n_kept * n, sizeof(float));
  r.colsum = calloc((size_t)L * n, sizeof(double));
  r.decode_rows = calloc((size_t)steps * L * H * r.width, sizeof(float));
  fixture_errors e = {0};
  run_fixture(k, fw, c, &f, &r, received, &tol, &e);

  char what[160];
  snprintf(what, sizeof what, "%s [%s, gemm %s]", name, md_dtype_name(w->dtype), GEMM_NAMES[gemm]);
  const char *unit = tol.relative ? " (relative to the largest)" : "";
  gpu_result(e.prefill_logits, tol.logits, "%s vs HF: prompt logits%s", what, unit);
  gpu_result(e.decode_logits, tol.logits, "%s vs HF: decode logits%s", what, unit);
  gpu_expect(e.token_mismatches == 0, "%s vs HF: greedy tokens (%d mismatches where HF's margin exceeds the tolerance, %d close calls)",
             what, e.token_mismatches, e.close_calls);
  gpu_result(e.prefill_rows, tol.attention, "%s vs HF: prompt softmax rows (hook)", what);
  gpu_result(e.decode_rows, tol.attention, "%s vs HF: decode softmax rows (hook)", what);
  gpu_result(e.colsum, tol.colsum, "%s vs HF: per-layer column sums (hook)%s", what, unit);
  gpu_result(e.capture_prefill, tol.colsum, "%s vs HF: captured prompt column sums%s", what, unit);
  gpu_result(e.capture_mean, tol.capture, "%s vs HF: captured decode rows, mean over heads%s", what, unit);
  gpu_result(e.capture_max, tol.capture, "%s vs HF: captured decode rows, max over heads%s", what, unit);
  free(r.prefill_rows);
  free(r.colsum);
  free(r.decode_rows);
  k->ops->buf_free(k, received);
  md_qwen2_forward_free(fw);
  md_kernels_free(k);
  fixture_array *all[] = {&f.prompt, &f.tokens, &f.logit_rows, &f.prefill_logits, &f.decode_logits,
                          &f.attn_rows, &f.prefill_attn, &f.colsum, &f.decode_attn};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fixture_free(all[i]);
  md_qwen2_model_close(model);
}

/* ---- a large checkpoint against the CPU back end ---------------------------------- */

typedef struct run_record {
  int64_t vocab, width, steps;
  float *logits;    /* [steps + 1][vocab]: after the prompt, then after each step */
  float *received;  /* [steps + 1][width]: the capture of the prompt, then of each step */
  int32_t *tokens;  /* [steps + 1]: the greedy token after the prompt, after each step */
  double seconds;
  double late_launches; /* CUDA: kernel launches per step over the second half of the steps */
} run_record;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Prompt, then `steps` decode steps fed `forced` tokens (NULL: our own
 * greedy ones), capture on over every layer: the prompt and odd steps
 * averaged over heads, even steps maxed. Step s captures into buffer s % 2
 * as the collector does (overlapped reads). */
static run_record run_model(md_kernels *k, const md_qwen2_config *c, const md_qwen2_weights *w,
                            const int32_t *prompt, int64_t n, int64_t steps, int64_t max_batch,
                            const int32_t *forced) {
  run_record r = {.vocab = c->vocab_size, .width = n + steps, .steps = steps};
  r.logits = malloc((size_t)(steps + 1) * (size_t)r.vocab * sizeof(float));
  r.received = malloc((size_t)(steps + 1) * (size_t)r.width * sizeof(float));
  r.tokens = malloc((size_t)(steps + 1) * sizeof(int32_t));
  md_qwen2_forward_options options = {.capacity = n + steps, .max_batch = max_batch};
  md_qwen2_forward *fw = NULL;
  md_error err;
  if (md_qwen2_forward_new(c, w, k, &options, &fw, &err) != MD_OK) gpu_die("forward", &err);
  md_kbuf *buffers[2] = {gpu_upload(k, NULL, (size_t)r.width), gpu_upload(k, NULL, (size_t)r.width)};
  bool cuda = !strcmp(k->ops->name, "cuda");
  uint64_t launches_half = 0;
  double t0 = now();
  for (int64_t s = 0; s <= steps; s++) {
    md_kbuf *received = buffers[s % 2];
    if (cuda && s == steps / 2 + 1) launches_half = md_kernels_cuda_launches(k);
    k->ops->buf_zero(k, received, 0, (size_t)r.width);
    md_status status = set_capture(fw, received, c->num_hidden_layers, s % 2 == 0 && s > 0, &err);
    if (status == MD_OK)
      status = s == 0 ? md_qwen2_prefill(fw, prompt, n, NULL, &err)
                      : md_qwen2_decode(fw, forced ? forced[s - 1] : r.tokens[s - 1], &err);
    if (status == MD_OK) status = md_qwen2_logits(fw, r.logits + (size_t)s * r.vocab, &err);
    if (status == MD_OK)
      status = k->ops->buf_read(k, received, 0, (size_t)r.width, r.received + (size_t)s * r.width, &err);
    if (status == MD_OK) status = md_qwen2_greedy(fw, &r.tokens[s], &err);
    if (status != MD_OK) gpu_die("run", &err);
  }
  r.seconds = now() - t0;
  if (cuda)
    r.late_launches = (double)(md_kernels_cuda_launches(k) - launches_half) / (double)(steps - steps / 2);
  k->ops->buf_free(k, buffers[0]);
  k->ops->buf_free(k, buffers[1]);
  md_qwen2_forward_free(fw);
  return r;
}

static void free_record(run_record *r) {
  free(r->logits);
  free(r->received);
  free(r->tokens);
}

static void compare_runs(const char *what, const run_record *got, const run_record *want, double tol) {
  double worst_prefill = 0.0, worst_decode = 0.0, worst_mean = 0.0, worst_max = 0.0, worst_colsum = 0.0;
  int mismatches = 0, close_calls = 0;
  for (int64_t s = 0; s <= want->steps; s++) {
    const float *gl = got->logits + (size_t)s * want->vocab, *wl = want->logits + (size_t)s * want->vocab;
    double d = diff_scaled(gl, wl, (size_t)want->vocab, true);
    if (s == 0) worst_prefill = d;
    else worst_decode = fmax(worst_decode, d);
    int64_t ours, theirs;
    double margin, unused;
    first_two(gl, want->vocab, &ours, &unused);
    first_two(wl, want->vocab, &theirs, &margin);
    if (ours != theirs) {
      if (margin > 2 * tol * max_abs(wl, (size_t)want->vocab)) mismatches++;
      else close_calls++;
    }
    const float *gr = got->received + (size_t)s * want->width, *wr = want->received + (size_t)s * want->width;
    double c_err = diff_scaled(gr, wr, (size_t)want->width, true);
    if (s == 0) worst_colsum = c_err;
    else if (s % 2 == 0) worst_max = fmax(worst_max, c_err);
    else worst_mean = fmax(worst_mean, c_err);
  }
  gpu_result(worst_prefill, tol, "%s: prompt logits (relative to the largest)", what);
  gpu_result(worst_decode, tol, "%s: decode logits (relative to the largest)", what);
  gpu_expect(mismatches == 0, "%s: greedy tokens (%d mismatches where the CPU's margin exceeds the tolerance, %d close calls)",
             what, mismatches, close_calls);
  gpu_result(worst_colsum, tol, "%s: captured prompt column sums (relative to the largest)", what);
  gpu_result(worst_mean, tol, "%s: captured decode rows, mean over heads (relative to the largest)", what);
  gpu_result(worst_max, tol, "%s: captured decode rows, max over heads (relative to the largest)", what);
}

/* Recorded decode steps (CUDA graphs, their operations fused: fuse.c)
 * compute exactly what the step-by-step launches of the unfused kernels
 * compute: identical logits and captures, bit for bit; one graph launch
 * (plus the argmax) per step once both capture buffers' steps are
 * recorded; and at most 6 kernels a layer in the recorded step, plus the
 * embedding and the LM head. */
static void check_graphs(const char *name, const md_qwen2_config *c, const md_qwen2_weights *w,
                         const int32_t *prompt, int64_t n, int64_t steps, md_cuda_gemm gemm) {
  md_kernels *off = open_cuda_graphs(gemm, 0), *on = open_cuda_graphs(gemm, 1);
  run_record want = run_model(off, c, w, prompt, n, steps, 0, NULL);
  run_record got = run_model(on, c, w, prompt, n, steps, 0, want.tokens);
  double logits = gpu_max_abs_diff(got.logits, want.logits, (size_t)(steps + 1) * (size_t)want.vocab);
  double received = gpu_max_abs_diff(got.received, want.received, (size_t)(steps + 1) * (size_t)want.width);
  gpu_result(fmax(logits, received), 0.0, "%s [gemm %s]: decode steps replayed as CUDA graphs equal the launched ones (logits and captures)",
             name, GEMM_NAMES[gemm]);
  gpu_expect(got.late_launches <= 2.0 && want.late_launches > 20.0,
             "%s [gemm %s]: launches per step %.1f with graphs, %.1f without", name, GEMM_NAMES[gemm],
             got.late_launches, want.late_launches);
  const uint64_t kernels = md_kernels_cuda_step_kernels(on);
  gpu_expect(kernels > 0 && kernels <= 6 * (uint64_t)c->num_hidden_layers + 2,
             "%s [gemm %s]: %llu kernels in a recorded decode step of %d layers (at most 6 a layer "
             "plus the embedding and the LM head)",
             name, GEMM_NAMES[gemm], (unsigned long long)kernels, c->num_hidden_layers);
  free_record(&want);
  free_record(&got);
  md_kernels_free(off);
  md_kernels_free(on);
}

/* check_graphs on a committed fixture's prompt, 8 steps. */
static void check_fixture_graphs(const char *name, md_cuda_gemm gemm) {
  char dir[4096];
  fixture_dir(dir, sizeof dir, name);
  md_error err;
  md_qwen2_model *model = NULL;
  if (md_qwen2_model_open(dir, &model, &err) != MD_OK) gpu_die(name, &err);
  fixture_array prompt = fixture_load(dir, "prompt.npy", 1);
  check_graphs(name, md_qwen2_model_config(model), md_qwen2_model_weights(model), prompt.i32,
               prompt.shape[0], 8, gemm);
  fixture_free(&prompt);
  md_qwen2_model_close(model);
}

static int32_t *read_prompt(const char *path, int64_t *n) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  int32_t *tokens = malloc((size_t)*n * sizeof(int32_t));
  size_t got = fread(tokens, sizeof(int32_t), (size_t)*n, fp);
  fclose(fp);
  *n = (int64_t)got;
  return tokens;
}

static int check_model(const char *dir, int64_t prompt_len, int64_t steps) {
  md_error err;
  md_qwen2_model *model = NULL;
  if (md_qwen2_model_open(dir, &model, &err) != MD_OK) gpu_die(dir, &err);
  const md_qwen2_config *c = md_qwen2_model_config(model);
  const md_qwen2_weights *w = md_qwen2_model_weights(model);
  char path[4096];
  snprintf(path, sizeof path, "%s/prompt.i32", dir);
  int64_t n = prompt_len;
  int32_t *prompt = read_prompt(path, &n);
  if (!prompt || n < 2) {
    fprintf(stderr, "FAIL cannot read %s\n", path);
    return 1;
  }
  const md_cuda_gemm modes[] = {MD_CUDA_GEMM_EXACT, MD_CUDA_GEMM_FAST};
  md_kernels *cuda[2] = {open_cuda(modes[0]), open_cuda(modes[1])}; /* no GPU: stop before the CPU run */
  md_kernels *cpu = NULL;
  if (md_kernels_cpu_new(NULL, &cpu, &err) != MD_OK) gpu_die("cpu", &err);
  run_record want = run_model(cpu, c, w, prompt, n, steps, 0, NULL);
  printf("cpu (%s): %lld-token prompt and %lld steps in %.2f s\n", md_kernels_cpu_isa(cpu), (long long)n,
         (long long)steps, want.seconds);
  md_kernels_free(cpu);
  for (int m = 0; m < 2; m++) {
    md_kernels *k = cuda[m];
    /* Chunks of 256: later chunks run the prefill kernels at pos0 > 0. */
    run_record got = run_model(k, c, w, prompt, n, steps, 256, want.tokens);
    char what[256];
    snprintf(what, sizeof what, "%s vs cpu [%s, %lld-token prompt in chunks of 256, %lld steps, gemm %s]",
             md_kernels_cuda_describe(k), md_dtype_name(w->dtype), (long long)n, (long long)steps,
             GEMM_NAMES[modes[m]]);
    compare_runs(what, &got, &want, modes[m] == MD_CUDA_GEMM_EXACT ? 1e-3 : 5e-2);
    free_record(&got);
    md_kernels_free(k);
  }
  free_record(&want);
  check_graphs("1.5B shapes", c, w, prompt, n, steps, MD_CUDA_GEMM_FAST);
  free(prompt);
  md_qwen2_model_close(model);
  return 0;
}

int main(int argc, char **argv) {
  const char *command = argc > 1 ? argv[1] : "", *dir = NULL, *only = NULL, *gemm_only = NULL;
  int64_t prompt_len = 600, steps = 16;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--device") && i + 1 < argc) device = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--gemm") && i + 1 < argc) gemm_only = argv[++i];
    else if (!strcmp(argv[i], "--prompt") && i + 1 < argc) prompt_len = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoll(argv[++i]);
    else if (!dir) dir = argv[i];
    else command = "";
  }
  if (!strcmp(command, "fixtures") && !dir) {
    const char *names[] = {"qwen05_heads_bf16", "hd128_f32", "theta1e4_f32", "theta1e4_f16"};
    for (int i = 0; i < 4; i++) {
      if (only && strcmp(only, names[i]) != 0) continue;
      if (!gemm_only || !strcmp(gemm_only, "exact")) check_fixture(names[i], MD_CUDA_GEMM_EXACT);
      if (!gemm_only || !strcmp(gemm_only, "fast")) {
        check_fixture(names[i], MD_CUDA_GEMM_FAST);
        check_fixture_graphs(names[i], MD_CUDA_GEMM_FAST);
      }
    }
    return gpu_finish("gpu_parity fixtures");
  }
  if (!strcmp(command, "model") && dir && prompt_len > 1 && steps > 0) {
    if (check_model(dir, prompt_len, steps) != 0) return 1;
    return gpu_finish("gpu_parity model");
  }
  fprintf(stderr, "usage: gpu_parity fixtures [--only NAME] [--gemm fast|exact] [--device N]\n"
                  "       gpu_parity model DIR [--prompt N] [--steps S] [--device N]\n");
  return 2;
}
