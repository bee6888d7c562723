/* A timing back end around another one: see op_profile.h. */
#include "bench/op_profile.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A weight as the forward pass sees it through the profile: the inner back
 * end's weight, with the shape and a short name for the tallies. */
typedef struct profiled_weight {
  md_kweight *inner;
  char label[32];
  int64_t rows, cols; /* [out, in]; cols 1 for a 1-D weight */
  size_t nbytes;
} profiled_weight;

enum { MAX_TALLIES = 64, LABEL_MAX = 80 };

typedef struct tally {
  op_phase phase;
  char op[24];
  char label[LABEL_MAX];
  int64_t calls;
  double seconds, flops, bytes;
} tally;

struct op_profile {
  md_kernels base; /* first: the forward pass holds a md_kernels * */
  md_kernel_ops ops;
  md_kernels *inner;
  bool sync_each; /* a queueing (device) back end: sync after every call */
  op_phase phase;
  tally tallies[MAX_TALLIES];
  int count;
};

static op_profile *P(md_kernels *k) { return (op_profile *)k; }
static md_kernels *I(md_kernels *k) { return P(k)->inner; }
static const md_kweight *W(const md_kweight *w) {
  return w ? ((const profiled_weight *)w)->inner : NULL;
}
static const profiled_weight *PW(const md_kweight *w) { return (const profiled_weight *)w; }

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Adds one call to its tally (a new one when the table has room; calls past
 * 64 distinct lines go uncounted, which a Qwen2 pass never reaches). */
static void add(md_kernels *k, const char *op, const char *label, double seconds, double flops,
                double bytes) {
  op_profile *p = P(k);
  tally *t = NULL;
  for (int i = 0; i < p->count && !t; i++)
    if (p->tallies[i].phase == p->phase && !strcmp(p->tallies[i].op, op) &&
        !strcmp(p->tallies[i].label, label))
      t = &p->tallies[i];
  if (!t) {
    if (p->count == MAX_TALLIES) return;
    t = &p->tallies[p->count++];
    *t = (tally){.phase = p->phase};
    snprintf(t->op, sizeof t->op, "%s", op);
    snprintf(t->label, sizeof t->label, "%s", label);
  }
  t->calls++;
  t->seconds += seconds;
  t->flops += flops;
  t->bytes += bytes;
}

/* The end of a timed call: waits for a device back end's queue. */
static double stop(md_kernels *k, double t0) {
  if (P(k)->sync_each) {
    md_error err;
    (void)I(k)->ops->sync(I(k), &err); /* a failure stays recorded for the caller's sync */
  }
  return now() - t0;
}

/* "model.layers.7.self_attn.q_proj.weight" -> "q_proj"; "lm_head.weight" ->
 * "lm_head"; ".bias" names keep the suffix ("q_proj.bias"). */
static void short_name(const char *name, char *out, size_t size) {
  if (!name) {
    snprintf(out, size, "?");
    return;
  }
  const char *end = name + strlen(name);
  bool bias = end - name > 5 && !strcmp(end - 5, ".bias");
  if (bias || (end - name > 7 && !strcmp(end - 7, ".weight"))) end -= bias ? 5 : 7;
  const char *start = end;
  while (start > name && start[-1] != '.') start--;
  snprintf(out, size, "%.*s%s", (int)(end - start), start, bias ? ".bias" : "");
}

/* ---- memory: forwarded untimed ------------------------------------------- */

static void p_destroy(md_kernels *k) {
  md_kernels_free(I(k));
  free(k);
}
static md_status p_buf_new(md_kernels *k, size_t n, md_kbuf **buf, md_error *err) {
  return I(k)->ops->buf_new(I(k), n, buf, err);
}
static void p_buf_free(md_kernels *k, md_kbuf *buf) { I(k)->ops->buf_free(I(k), buf); }
static md_status p_buf_read(md_kernels *k, const md_kbuf *buf, size_t offset, size_t n, float *dst,
                            md_error *err) {
  return I(k)->ops->buf_read(I(k), buf, offset, n, dst, err);
}
static md_status p_buf_write(md_kernels *k, md_kbuf *buf, size_t offset, size_t n, const float *src,
                             md_error *err) {
  return I(k)->ops->buf_write(I(k), buf, offset, n, src, err);
}
static void p_buf_zero(md_kernels *k, md_kbuf *buf, size_t offset, size_t n) {
  I(k)->ops->buf_zero(I(k), buf, offset, n);
}
static md_status p_buf_read_start(md_kernels *k, const md_kbuf *buf, size_t offset, size_t n,
                                  float *dst, int slot, md_error *err) {
  return I(k)->ops->buf_read_start(I(k), buf, offset, n, dst, slot, err);
}
static md_status p_buf_read_finish(md_kernels *k, int slot, md_error *err) {
  return I(k)->ops->buf_read_finish(I(k), slot, err);
}
static md_status p_weight_new(md_kernels *k, const md_tensor *t, md_kweight **w, md_error *err) {
  profiled_weight *pw = calloc(1, sizeof *pw);
  if (!pw) return md_fail(err, MD_E_NOMEM, "op profile: out of memory");
  md_status st = I(k)->ops->weight_new(I(k), t, &pw->inner, err);
  if (st != MD_OK) {
    free(pw);
    return st;
  }
  short_name(t->name, pw->label, sizeof pw->label);
  pw->rows = t->shape[0];
  pw->cols = t->ndim > 1 ? t->shape[1] : 1;
  pw->nbytes = t->nbytes;
  *w = (md_kweight *)pw;
  return MD_OK;
}
static void p_weight_free(md_kernels *k, md_kweight *w) {
  if (!w) return;
  I(k)->ops->weight_free(I(k), ((profiled_weight *)w)->inner);
  free(w);
}

/* ---- compute: timed --------------------------------------------------------- */

static void p_embed(md_kernels *k, md_kbuf *x, const md_kweight *table, const int32_t *tokens,
                    int64_t n) {
  double t0 = now();
  I(k)->ops->embed(I(k), x, W(table), tokens, n);
  add(k, "embed", "", stop(k, t0), 0.0, 0.0);
}
static void p_rmsnorm(md_kernels *k, md_kbuf *out, const md_kbuf *x, const md_kweight *weight,
                      int64_t n, float eps) {
  double t0 = now();
  I(k)->ops->rmsnorm(I(k), out, x, W(weight), n, eps);
  add(k, "rmsnorm", "", stop(k, t0), 0.0, 0.0);
}
static void p_matmul(md_kernels *k, md_kbuf *y, const md_kbuf *x, const md_kweight *w,
                     const md_kweight *bias, int64_t n) {
  double t0 = now();
  I(k)->ops->matmul(I(k), y, x, W(w), W(bias), n);
  const profiled_weight *pw = PW(w);
  add(k, "matmul", pw->label, stop(k, t0), 2.0 * (double)n * (double)pw->rows * (double)pw->cols,
      (double)pw->nbytes);
}
static void p_matmul_shared(md_kernels *k, md_kbuf *const *ys, const md_kbuf *x,
                            const md_kweight *const *ws, const md_kweight *const *biases, int count,
                            int64_t n) {
  const md_kweight *inner_w[MD_KERNELS_MAX_SHARED], *inner_b[MD_KERNELS_MAX_SHARED];
  char label[LABEL_MAX] = "";
  double flops = 0.0, bytes = 0.0;
  for (int i = 0; i < count && i < MD_KERNELS_MAX_SHARED; i++) {
    inner_w[i] = W(ws[i]);
    inner_b[i] = biases ? W(biases[i]) : NULL;
    size_t used = strlen(label);
    snprintf(label + used, sizeof label - used, "%s%s", i ? "+" : "", PW(ws[i])->label);
    flops += 2.0 * (double)n * (double)PW(ws[i])->rows * (double)PW(ws[i])->cols;
    bytes += (double)PW(ws[i])->nbytes;
  }
  double t0 = now();
  I(k)->ops->matmul_shared(I(k), ys, x, inner_w, biases ? inner_b : NULL, count, n);
  add(k, "matmul_shared", label, stop(k, t0), flops, bytes);
}
static void p_matmul_swiglu(md_kernels *k, md_kbuf *gate, md_kbuf *up, const md_kbuf *x,
                            const md_kweight *w_gate, const md_kweight *w_up, int64_t n) {
  char label[LABEL_MAX];
  snprintf(label, sizeof label, "%s+%s, swiglu", PW(w_gate)->label, PW(w_up)->label);
  double flops = 2.0 * (double)n * (double)PW(w_gate)->cols *
                 (double)(PW(w_gate)->rows + PW(w_up)->rows);
  double t0 = now();
  I(k)->ops->matmul_swiglu(I(k), gate, up, x, W(w_gate), W(w_up), n);
  add(k, "matmul_swiglu", label, stop(k, t0), flops,
      (double)(PW(w_gate)->nbytes + PW(w_up)->nbytes));
}
static void p_rope(md_kernels *k, md_kbuf *q, md_kbuf *kk, int64_t n, int n_heads, int n_kv_heads,
                   int head_dim, int64_t pos0, double theta) {
  double t0 = now();
  I(k)->ops->rope(I(k), q, kk, n, n_heads, n_kv_heads, head_dim, pos0, theta);
  add(k, "rope", "", stop(k, t0), 0.0, 0.0);
}
static void p_kv_store(md_kernels *k, md_kbuf *cache, const md_kbuf *key, const md_kbuf *value,
                       const md_attn_shape *shape, int64_t pos0, int64_t n) {
  double t0 = now();
  I(k)->ops->kv_store(I(k), cache, key, value, shape, pos0, n);
  add(k, "kv_store", "", stop(k, t0), 0.0, 0.0);
}
static void p_kv_compact(md_kernels *k, md_kbuf *cache, const md_attn_shape *shape,
                         const int64_t *keep, int64_t n_keep) {
  double t0 = now();
  I(k)->ops->kv_compact(I(k), cache, shape, keep, n_keep);
  add(k, "kv_compact", "", stop(k, t0), 0.0, 0.0);
}
static void p_attention(md_kernels *k, md_kbuf *out, const md_kbuf *q, const md_kbuf *cache,
                        const md_attn_shape *shape, int64_t pos0, int64_t n,
                        const md_attn_hook *hook, const md_attn_capture *capture) {
  double t0 = now();
  I(k)->ops->attention(I(k), out, q, cache, shape, pos0, n, hook, capture);
  double seconds = stop(k, t0);
  /* Causal: row i sees pos0 + i + 1 keys. Two products (q.k and p.v) of
   * head_dim multiply-adds per key, per query head; the keys and values of
   * every KV head read once (float32). */
  double keys = (double)n * (double)pos0 + 0.5 * (double)n * (double)(n + 1);
  double flops = 4.0 * (double)shape->head_dim * (double)shape->n_heads * keys;
  double bytes = 2.0 * (double)shape->n_kv_heads * (double)shape->head_dim * 4.0 *
                 (double)(pos0 + n);
  add(k, "attention", capture ? "capture on" : "", seconds, flops, bytes);
}
static void p_swiglu(md_kernels *k, md_kbuf *gate, const md_kbuf *up, size_t count) {
  double t0 = now();
  I(k)->ops->swiglu(I(k), gate, up, count);
  add(k, "swiglu", "", stop(k, t0), 0.0, 0.0);
}
static void p_add(md_kernels *k, md_kbuf *x, const md_kbuf *y, size_t count) {
  double t0 = now();
  I(k)->ops->add(I(k), x, y, count);
  add(k, "add", "", stop(k, t0), 0.0, 0.0);
}
static void p_logits(md_kernels *k, md_kbuf *logits, const md_kbuf *x, int64_t row,
                     const md_kweight *norm, const md_kweight *lm_head, float eps) {
  double t0 = now();
  I(k)->ops->logits(I(k), logits, x, row, W(norm), W(lm_head), eps);
  const profiled_weight *pw = PW(lm_head);
  add(k, "logits", pw->label, stop(k, t0), 2.0 * (double)pw->rows * (double)pw->cols,
      (double)pw->nbytes);
}
static md_status p_argmax(md_kernels *k, const md_kbuf *v, size_t n, int64_t *index,
                          md_error *err) {
  double t0 = now();
  md_status st = I(k)->ops->argmax(I(k), v, n, index, err);
  add(k, "argmax", "", now() - t0, 0.0, 0.0);
  return st;
}
static md_status p_sync(md_kernels *k, md_error *err) { return I(k)->ops->sync(I(k), err); }
static void p_facts(const md_kernels *k, md_kernel_facts *facts) {
  I((md_kernels *)k)->ops->facts(I((md_kernels *)k), facts);
}
static void p_step_begin(md_kernels *k, int64_t pos, int64_t slot) {
  I(k)->ops->step_begin(I(k), pos, slot);
}
static void p_step_end(md_kernels *k) { I(k)->ops->step_end(I(k)); }

md_kernels *op_profile_wrap(md_kernels *inner) {
  op_profile *p = calloc(1, sizeof *p);
  if (!p) {
    md_kernels_free(inner);
    return NULL;
  }
  const md_kernel_ops *in = inner->ops;
  p->inner = inner;
  p->sync_each = strcmp(in->name, "cpu") != 0;
  /* Optional operations stay NULL where the inner back end has none, so
   * the forward pass takes the same road through both. */
  p->ops = (md_kernel_ops){
      .name = in->name,
      .destroy = p_destroy,
      .buf_new = p_buf_new,
      .buf_free = p_buf_free,
      .buf_read = p_buf_read,
      .buf_write = p_buf_write,
      .buf_zero = p_buf_zero,
      .buf_read_start = p_buf_read_start,
      .buf_read_finish = p_buf_read_finish,
      .weight_new = p_weight_new,
      .weight_free = p_weight_free,
      .embed = p_embed,
      .rmsnorm = p_rmsnorm,
      .matmul = p_matmul,
      .matmul_shared = in->matmul_shared ? p_matmul_shared : NULL,
      .matmul_swiglu = in->matmul_swiglu ? p_matmul_swiglu : NULL,
      .rope = p_rope,
      .kv_store = p_kv_store,
      .kv_compact = in->kv_compact ? p_kv_compact : NULL,
      .attention = p_attention,
      .swiglu = p_swiglu,
      .add = p_add,
      .logits = p_logits,
      .argmax = p_argmax,
      .sync = p_sync,
      .step_begin = in->step_begin ? p_step_begin : NULL,
      .step_end = in->step_end ? p_step_end : NULL,
      .facts = in->facts ? p_facts : NULL,
  };
  p->base.ops = &p->ops;
  return &p->base;
}

void op_profile_set_phase(md_kernels *profiled, op_phase phase) { P(profiled)->phase = phase; }

void op_profile_reset(md_kernels *profiled) { P(profiled)->count = 0; }

static int by_seconds_desc(const void *a, const void *b) {
  double x = ((const tally *)a)->seconds, y = ((const tally *)b)->seconds;
  return (x < y) - (x > y);
}

void op_profile_print(md_kernels *profiled, FILE *out, op_phase phase, double wall_s,
                      double fma_peak_gflops) {
  op_profile *p = P(profiled);
  tally lines[MAX_TALLIES];
  int n = 0;
  double total = 0.0;
  for (int i = 0; i < p->count; i++)
    if (p->tallies[i].phase == phase) {
      lines[n++] = p->tallies[i];
      total += p->tallies[i].seconds;
    }
  qsort(lines, (size_t)n, sizeof *lines, by_seconds_desc);
  bool prompt = phase == OP_PHASE_PROMPT;
  fprintf(out, "  %-14s %-28s %7s %9s %6s %9s %s\n", "op", "on", "calls", "seconds", "share",
          prompt ? "GFLOP/s" : "GB/s", prompt ? "of FMA peak" : "");
  for (int i = 0; i < n; i++) {
    const tally *t = &lines[i];
    fprintf(out, "  %-14s %-28s %7lld %9.4f %5.1f%%", t->op, t->label[0] ? t->label : "-",
            (long long)t->calls, t->seconds, total > 0 ? 100.0 * t->seconds / total : 0.0);
    if (prompt && t->flops > 0 && t->seconds > 0) {
      double gflops = t->flops / t->seconds / 1e9;
      fprintf(out, " %9.1f", gflops);
      if (fma_peak_gflops > 0) fprintf(out, " %.3f", gflops / fma_peak_gflops);
    } else if (!prompt && t->bytes > 0 && t->seconds > 0) {
      fprintf(out, " %9.2f", t->bytes / t->seconds / 1e9);
    }
    fputc('\n', out);
  }
  fprintf(out, "  timed %.4f s of %.4f s wall (%.1f%%; the rest is the forward pass's own code)\n",
          total, wall_s, wall_s > 0 ? 100.0 * total / wall_s : 0.0);
}
