/* Causal GQA attention over the KV cache, one tile of query rows of one head
 * at a time: scores S = scale * Q_tile K^T (sgemm), a softmax per row, then
 * O_tile = P V (sgemm). A tile holds MD_ATTN_TILE rows of scores, so memory
 * is O(tile * n) per thread and no n x n matrix is ever formed. Tasks
 * (head, tile) run in parallel; the sgemm calls inside the OpenMP region run
 * single-threaded (OpenBLAS's OpenMP build does so when omp_in_parallel()).
 * The decode step (one query row) uses sgemv instead.
 *
 * The scale is float(head_dim ** -0.5) applied to the dot product, and the
 * softmax is exp(s - max) * (1 / sum) in fp32, as HF's eager attention
 * (modeling_qwen2.eager_attention_forward) computes them. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "kernels/cpu/cpu_internal.h"

#define MD_ATTN_TILE 32

typedef struct attn_task {
  const md_attn_shape *shape;
  const float *q;        /* [n, n_heads * head_dim] */
  const float *cache;    /* one layer: [2][n_kv][capacity][head_dim] */
  float *out;            /* [n, n_heads * head_dim] */
  int64_t pos0;
  float scale;
  const md_attn_hook *hook;
  md_cpu_isa isa;
} attn_task;

static const float *head_keys(const attn_task *a, int kv_head) {
  const md_attn_shape *s = a->shape;
  return a->cache + (size_t)kv_head * (size_t)s->capacity * (size_t)s->head_dim;
}

static const float *head_values(const attn_task *a, int kv_head) {
  const md_attn_shape *s = a->shape;
  return a->cache + (size_t)(s->n_kv_heads + kv_head) * (size_t)s->capacity * (size_t)s->head_dim;
}

/* Softmax of each row over its visible keys, zeros beyond, hook per row. */
static void softmax_rows(const attn_task *a, int head, float *scores, int64_t t0, int64_t rows,
                         int64_t n_keys_tile) {
  for (int64_t i = 0; i < rows; i++) {
    int64_t pos = a->pos0 + t0 + i, visible = pos + 1;
    float *row = scores + (size_t)i * (size_t)n_keys_tile;
    md_cpu_softmax(a->isa, row, visible);
    for (int64_t j = visible; j < n_keys_tile; j++) row[j] = 0.0f;
    if (a->hook) {
#pragma omp critical(md_attn_hook)
      a->hook->on_row(a->hook->ctx, a->shape->layer, head, pos, row, visible);
    }
  }
}

/* Query rows t0 .. t0 + rows - 1 (relative to pos0) of one head. */
static void attend_tile(const attn_task *a, int head, int64_t t0, int64_t rows, float *scores) {
  const md_attn_shape *s = a->shape;
  int hd = s->head_dim, kv_head = head / (s->n_heads / s->n_kv_heads);
  int64_t stride = (int64_t)s->n_heads * hd;
  int64_t n_keys_tile = a->pos0 + t0 + rows; /* keys of the tile's last row */
  const float *q = a->q + t0 * stride + (int64_t)head * hd;
  float *out = a->out + t0 * stride + (int64_t)head * hd;
  const float *keys = head_keys(a, kv_head), *values = head_values(a, kv_head);
  if (rows == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)n_keys_tile, hd, a->scale, keys, hd, q, 1,
                0.0f, scores, 1);
    softmax_rows(a, head, scores, t0, 1, n_keys_tile);
    cblas_sgemv(CblasRowMajor, CblasTrans, (int)n_keys_tile, hd, 1.0f, values, hd, scores, 1,
                0.0f, out, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)n_keys_tile, hd,
              a->scale, q, (int)stride, keys, hd, 0.0f, scores, (int)n_keys_tile);
  softmax_rows(a, head, scores, t0, rows, n_keys_tile);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, hd, (int)n_keys_tile, 1.0f,
              scores, (int)n_keys_tile, values, hd, 0.0f, out, (int)stride);
}

md_status md_cpu_attention(md_cpu_isa isa, int threads, float *out, const float *q,
                           const float *cache, const md_attn_shape *shape, int64_t pos0,
                           int64_t n, const md_attn_hook *hook) {
  attn_task a = {.shape = shape, .q = q, .cache = cache, .out = out, .pos0 = pos0,
                 .scale = (float)pow((double)shape->head_dim, -0.5),
                 .hook = (hook && hook->on_row) ? hook : NULL, .isa = isa};
  int64_t tile = n < MD_ATTN_TILE ? n : MD_ATTN_TILE;
  int64_t tiles = (n + tile - 1) / tile, tasks = tiles * shape->n_heads;
  size_t scratch_floats = (size_t)tile * (size_t)(pos0 + n);
  int failed = 0;
#pragma omp parallel num_threads(threads) reduction(| : failed)
  {
    float *scores = malloc(scratch_floats * sizeof(float));
    if (!scores) failed = 1;
    /* Later tiles see more keys: dynamic scheduling, largest tiles first. */
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; task++) {
      if (!scores) continue;
      int64_t t = tiles - 1 - task / shape->n_heads;
      int head = (int)(task % shape->n_heads);
      int64_t t0 = t * tile, rows = n - t0 < tile ? n - t0 : tile;
      attend_tile(&a, head, t0, rows, scores);
    }
    free(scores);
  }
  return failed ? MD_E_NOMEM : MD_OK;
}
