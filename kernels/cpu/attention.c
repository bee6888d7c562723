/* Causal GQA attention over the KV cache.
 *
 * Prefill: one task is a tile of query rows for all the query heads that
 * share one KV head, stacked into one matrix Q_tile [group * rows, head_dim],
 * so each product is large and the KV head's keys and values are read once
 * for the whole group:
 *   S = scale * Q_tile K^T, a softmax per row, O = P V.
 * On the AVX2 and AVX-512 paths the two products are our own kernels
 * (attn_prefill.c says why): the stack is a list of row pointers into the
 * queries and the output, and the keys are packed once per call into the
 * kernels' panels; on the portable path they are sgemm calls on a copied
 * Q_tile. The tile's rows are chosen so that S holds at most
 * MD_ATTN_SCORE_FLOATS floats (4 MiB): memory is O(n) per thread and no
 * n x n matrix is formed. Tasks run in parallel; the sgemm calls inside the
 * OpenMP region run single-threaded (OpenBLAS's OpenMP build does so when
 * omp_in_parallel()).
 * Decode (one query row): the query heads that share a KV head go
 * together, so each key and value is read once per step, not once per
 * query head (7 times for Qwen2.5-0.5B's 14/2 heads): at a long context the
 * cache is the larger part of what a step reads. The keys are cut into
 * blocks of MD_ATTN_DECODE_BLOCK; a task is one KV head's block, so every
 * thread has work however few KV heads there are, and tasks go to threads
 * as they come free (a core slowed by another process does not hold the
 * other at the barrier; every task writes its own scores and partial
 * output, so the split changes no result). Three passes: the scores
 * S = scale * Q_group K_block^T, the softmax of each head's row, the partial
 * outputs P_block V_block, which are then added in block order: the result
 * does not depend on the thread count. The two products are our own
 * kernels on the AVX2 and AVX-512 paths (attn_decode.c says why), sgemm
 * with m = group on the portable one.
 *
 * Capture (md_attn_capture): prefill threads sum the softmax rows they
 * compute into a private column-sum vector (O(threads * n) memory), and the
 * vectors are added into `received` in thread order after the parallel
 * region; tasks go to threads round-robin (static schedule), so for a given
 * thread count every float is summed in the same order on every run and
 * the result is bitwise reproducible (a resumed collection equals an
 * uninterrupted one). Decode computes each head's softmax row directly into
 * a [n_heads, n_keys] scratch and reduces over heads (mean or max) once the
 * heads are done, the threads taking blocks of keys, each key's heads added
 * in head order; the capture adds no copy of a row and no pass over the
 * keys beyond that reduction.
 *
 * The scale is float(head_dim ** -0.5) applied to the dot product, and the
 * softmax is exp(s - max) * (1 / sum) in fp32, as HF's eager attention
 * (modeling_qwen2.eager_attention_forward) computes them. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/gemm_bf16.h"

#define MD_ATTN_SCORE_FLOATS ((int64_t)1 << 20)
#define MD_ATTN_MAX_TILE 64
#define MD_ATTN_DECODE_BLOCK 256

typedef struct attn_task {
  const md_attn_shape *shape;
  const float *q;        /* [n, n_heads * head_dim] */
  const float *cache;    /* one layer: [2][n_kv][capacity][head_dim] */
  float *out;            /* [n, n_heads * head_dim] */
  int64_t pos0;
  float scale;
  const md_attn_hook *hook;
  const md_attn_capture *capture; /* NULL: no capture */
  float *received;                /* capture->received's floats */
  float *head_rows;               /* decode: the heads' score rows and an accumulator,
                                     [n_heads + 1, pos0 + 1] */
  md_cpu_isa isa;
  bool bf16_values; /* prefill's P V with bf16 operands (md_bf16_prefill_values) */
} attn_task;

static const float *head_keys(const attn_task *a, int kv_head) {
  const md_attn_shape *s = a->shape;
  return a->cache + (size_t)kv_head * (size_t)s->capacity * (size_t)s->head_dim;
}

static const float *head_values(const attn_task *a, int kv_head) {
  const md_attn_shape *s = a->shape;
  return a->cache + (size_t)(s->n_kv_heads + kv_head) * (size_t)s->capacity * (size_t)s->head_dim;
}

/* Softmax of each row (query rows t0 .. t0 + rows - 1 of one head, `ld`
 * floats apart) over its visible keys, zeros beyond up to n_keys_tile, then
 * the capture's column sums (colsum may be NULL) and the hook. */
static void softmax_rows(const attn_task *a, int head, float *scores, int64_t ld, int64_t t0,
                         int64_t rows, int64_t n_keys_tile, float *colsum) {
  for (int64_t i = 0; i < rows; i++) {
    int64_t pos = a->pos0 + t0 + i, visible = pos + 1;
    float *row = scores + (size_t)i * (size_t)ld;
    md_cpu_softmax(a->isa, row, visible);
    if (n_keys_tile > visible) memset(row + visible, 0, (size_t)(n_keys_tile - visible) * sizeof(float));
    if (colsum) md_cpu_add_into(a->isa, colsum, row, visible);
    if (a->hook) {
#pragma omp critical(md_attn_hook)
      a->hook->on_row(a->hook->ctx, a->shape->layer, head, pos, row, visible);
    }
  }
}

/* Prefill through sgemm (the portable path): query rows t0 .. t0 + rows - 1
 * of the query heads of one KV head. scratch holds the stacked queries and
 * outputs [group * rows, head_dim] each and the scores [group * rows,
 * n_keys_tile]. */
static void attend_group_tile_blas(const attn_task *a, int kv_head, int64_t t0, int64_t rows,
                              float *scratch, float *colsum) {
  const md_attn_shape *s = a->shape;
  int hd = s->head_dim, group = s->n_heads / s->n_kv_heads, h0 = kv_head * group;
  int64_t stride = (int64_t)s->n_heads * hd, m = group * rows;
  int64_t n_keys_tile = a->pos0 + t0 + rows; /* keys of the tile's last row */
  float *q_tile = scratch, *o_tile = q_tile + m * hd, *scores = o_tile + m * hd;
  for (int j = 0; j < group; j++)
    for (int64_t i = 0; i < rows; i++)
      memcpy(q_tile + (j * rows + i) * hd, a->q + (t0 + i) * stride + (h0 + j) * hd,
             (size_t)hd * sizeof(float));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n_keys_tile, hd, a->scale,
              q_tile, hd, head_keys(a, kv_head), hd, 0.0f, scores, (int)n_keys_tile);
  for (int j = 0; j < group; j++)
    softmax_rows(a, h0 + j, scores + (size_t)(j * rows) * (size_t)n_keys_tile, n_keys_tile, t0,
                 rows, n_keys_tile, colsum);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, hd, (int)n_keys_tile, 1.0f,
              scores, (int)n_keys_tile, head_values(a, kv_head), hd, 0.0f, o_tile, hd);
  for (int j = 0; j < group; j++)
    for (int64_t i = 0; i < rows; i++)
      memcpy(a->out + (t0 + i) * stride + (h0 + j) * hd, o_tile + (j * rows + i) * hd,
             (size_t)hd * sizeof(float));
}

/* A thread's scratch for prefill tiles: the scores and, for our own
 * kernels, the tile's rows (stacked as in attend_group_tile_blas: head j of
 * the group, then position i) as pointers into the queries and the output,
 * and the keys each row sees. */
typedef struct tile_scratch {
  float *floats;
  const float **q_rows;
  float **out_rows;
  int64_t *visible;
} tile_scratch;

/* Prefill through our own kernels (md_cpu_prefill_kernels): the same tile,
 * the queries read and the outputs written in place, the keys from the
 * packed panels of this KV head. The scores' rows are ld floats apart, ld
 * the tile's keys rounded up to the kernels' panels (md_cpu_prefill_ld). */
static void attend_group_tile_own(const attn_task *a, int kv_head, int64_t t0, int64_t rows,
                                  const tile_scratch *ts, float *colsum, const float *packed,
                                  const uint32_t *packed_values) {
  const md_attn_shape *s = a->shape;
  int hd = s->head_dim, group = s->n_heads / s->n_kv_heads, h0 = kv_head * group;
  int64_t stride = (int64_t)s->n_heads * hd, m = group * rows;
  int64_t n_keys_tile = a->pos0 + t0 + rows, ld = md_cpu_prefill_ld(n_keys_tile);
  for (int j = 0; j < group; j++)
    for (int64_t i = 0; i < rows; i++) {
      int64_t r = j * rows + i, offset = (t0 + i) * stride + (h0 + j) * hd;
      ts->q_rows[r] = a->q + offset;
      ts->out_rows[r] = a->out + offset;
      ts->visible[r] = a->pos0 + t0 + i + 1;
    }
  float *scores = ts->floats;
  md_cpu_prefill_scores(a->isa, scores, ld, ts->q_rows, ts->visible, m, packed, hd, a->scale);
  for (int j = 0; j < group; j++)
    softmax_rows(a, h0 + j, scores + (size_t)(j * rows) * (size_t)ld, ld, t0, rows, n_keys_tile,
                 colsum);
  if (packed_values) { /* each row's weights become bf16 pairs in place */
    for (int64_t r = 0; r < m; r++)
      md_bf16_pack_row((uint32_t *)(scores + r * ld), scores + r * ld, n_keys_tile);
    md_bf16_prefill_values(ts->out_rows, (const uint32_t *)scores, ld, ts->visible, m,
                           packed_values, hd);
    return;
  }
  md_cpu_prefill_values(a->isa, ts->out_rows, scores, ld, ts->visible, m, head_values(a, kv_head),
                        hd);
}

/* Query rows per prefill tile: as many as keep the scores within
 * MD_ATTN_SCORE_FLOATS at the longest tile, at most MD_ATTN_MAX_TILE. */
static int64_t prefill_tile_rows(const md_attn_shape *s, int64_t pos0, int64_t n) {
  int64_t group = s->n_heads / s->n_kv_heads;
  int64_t rows = MD_ATTN_SCORE_FLOATS / (group * (pos0 + n));
  if (rows > MD_ATTN_MAX_TILE) rows = MD_ATTN_MAX_TILE;
  if (rows > n) rows = n;
  return rows < 1 ? 1 : rows;
}

/* received[k] += scale * (sum over threads, in thread order, of colsums[t][k]). */
static void add_column_sums(const attn_task *a, float *colsums, int threads, size_t n_keys) {
  float scale = a->capture->weight / (float)a->shape->n_heads;
  for (int t = 1; t < threads; t++) {
    const float *colsum = colsums + (size_t)t * n_keys;
    for (size_t k = 0; k < n_keys; k++) colsums[k] += colsum[k];
  }
  for (size_t k = 0; k < n_keys; k++) a->received[k] += scale * colsums[k];
}

static void tile_scratch_free(tile_scratch *ts) {
  md_cpu_free(ts->floats);
  free(ts->q_rows);
  free(ts->out_rows);
  free(ts->visible);
}

static bool tile_scratch_new(tile_scratch *ts, size_t floats, size_t rows, bool own) {
  *ts = (tile_scratch){.floats = md_cpu_alloc(floats * sizeof(float))};
  if (own) {
    ts->q_rows = malloc(rows * sizeof *ts->q_rows);
    ts->out_rows = malloc(rows * sizeof *ts->out_rows);
    ts->visible = malloc(rows * sizeof *ts->visible);
  }
  if (ts->floats && (!own || (ts->q_rows && ts->out_rows && ts->visible))) return true;
  tile_scratch_free(ts);
  return false;
}

static int prefill(const attn_task *a, int threads, int64_t n) {
  const md_attn_shape *s = a->shape;
  int hd = s->head_dim;
  int64_t tile = prefill_tile_rows(s, a->pos0, n), group = s->n_heads / s->n_kv_heads;
  int64_t tiles = (n + tile - 1) / tile, tasks = tiles * s->n_kv_heads;
  size_t n_keys = (size_t)(a->pos0 + n);
  /* sgemm: stacked queries, outputs and scores; ours: scores, rows padded
   * to the kernels' stride. */
  bool own = md_cpu_prefill_kernels(a->isa, hd);
  size_t scratch_floats = (size_t)(group * tile) *
                          (own ? (size_t)md_cpu_prefill_ld((int64_t)n_keys) : (size_t)(2 * hd) + n_keys);
  size_t packed_floats = (size_t)md_cpu_packed_keys_floats((int64_t)n_keys, hd);
  float *packed = own ? md_cpu_alloc((size_t)s->n_kv_heads * packed_floats * sizeof(float)) : NULL;
  bool bf16 = own && a->bf16_values;
  size_t value_words = bf16 ? md_bf16_packed_values_words((int64_t)n_keys, hd) : 0;
  uint32_t *packed_values =
      bf16 ? md_cpu_alloc((size_t)s->n_kv_heads * value_words * sizeof(uint32_t)) : NULL;
  float *colsums = a->capture ? calloc((size_t)threads * n_keys, sizeof(float)) : NULL;
  if ((own && !packed) || (bf16 && !packed_values) || (a->capture && !colsums)) {
    md_cpu_free(packed);
    md_cpu_free(packed_values);
    free(colsums);
    return 1;
  }
  int failed = 0;
#pragma omp parallel num_threads(threads) reduction(| : failed)
  {
    tile_scratch ts;
    bool ready = tile_scratch_new(&ts, scratch_floats, (size_t)(group * tile), own);
    float *colsum = colsums ? colsums + (size_t)omp_get_thread_num() * n_keys : NULL;
    if (!ready) failed = 1;
    if (own) {
#pragma omp for schedule(static)
      for (int kv = 0; kv < s->n_kv_heads; kv++) {
        md_cpu_pack_keys(packed + (size_t)kv * packed_floats, head_keys(a, kv), (int64_t)n_keys, hd);
        if (bf16)
          md_bf16_pack_values(packed_values + (size_t)kv * value_words, head_values(a, kv),
                              (int64_t)n_keys, hd);
      }
    }
    /* Later tiles see more keys: largest tiles first, dealt round-robin. */
#pragma omp for schedule(static, 1)
    for (int64_t task = 0; task < tasks; task++) {
      if (!ready) continue;
      int64_t t = tiles - 1 - task / s->n_kv_heads, t0 = t * tile, rows = n - t0 < tile ? n - t0 : tile;
      int kv = (int)(task % s->n_kv_heads);
      if (own)
        attend_group_tile_own(a, kv, t0, rows, &ts, colsum, packed + (size_t)kv * packed_floats,
                              bf16 ? packed_values + (size_t)kv * value_words : NULL);
      else
        attend_group_tile_blas(a, kv, t0, rows, ts.floats, colsum);
    }
    if (ready) tile_scratch_free(&ts);
  }
  if (colsums && !failed) add_column_sums(a, colsums, threads, n_keys);
  free(colsums);
  md_cpu_free(packed);
  md_cpu_free(packed_values);
  return failed;
}

/* Decode capture, keys [k0, k0 + len): received[k] += weight * (mean or max over
 * the heads' rows at k). The heads are folded into the scratch row after
 * the last head's (acc = row 0, then acc += row h or acc = max(acc, row h)
 * for h = 1, 2, ...: per key the same additions in the same order as a
 * loop over heads, so the result does not depend on how the keys are
 * split), row by row: contiguous loops the compiler vectorizes. */
static void reduce_head_rows(const attn_task *a, int64_t k0, size_t len) {
  const md_attn_shape *s = a->shape;
  size_t n_keys = (size_t)(a->pos0 + 1);
  const float *rows = a->head_rows + k0;
  float *acc = a->head_rows + (size_t)s->n_heads * n_keys + k0;
  memcpy(acc, rows, len * sizeof(float));
  bool max = a->capture->heads == MD_CAPTURE_HEADS_MAX;
  for (int h = 1; h < s->n_heads; h++) {
    const float *row = rows + (size_t)h * n_keys;
    if (max)
      for (size_t k = 0; k < len; k++) acc[k] = row[k] > acc[k] ? row[k] : acc[k];
    else
      for (size_t k = 0; k < len; k++) acc[k] += row[k];
  }
  float weight = a->capture->weight, heads = (float)s->n_heads;
  float *received = a->received + k0;
  if (max)
    for (size_t k = 0; k < len; k++) received[k] += weight * acc[k];
  else
    for (size_t k = 0; k < len; k++) received[k] += weight * (acc[k] / heads);
}

/* Decode's block `block` of the keys: [*k0, *k0 + *len). */
static void block_keys(const attn_task *a, int64_t block, int64_t *k0, int64_t *len) {
  int64_t n_keys = a->pos0 + 1;
  *k0 = block * MD_ATTN_DECODE_BLOCK;
  *len = n_keys - *k0 < MD_ATTN_DECODE_BLOCK ? n_keys - *k0 : MD_ATTN_DECODE_BLOCK;
}

/* Decode task `task` (KV head task / blocks, block task % blocks): its keys
 * [*k0, *k0 + *len) and the first of its query heads. */
static int task_keys(const attn_task *a, int64_t task, int64_t blocks, int64_t *k0,
                     int64_t *len) {
  const md_attn_shape *s = a->shape;
  block_keys(a, task % blocks, k0, len);
  return (int)(task / blocks) * (s->n_heads / s->n_kv_heads);
}

/* One decode step's work (decode): the region's body, its loops shared by
 * the team md_cpu_run starts, or plain loops alone. */
typedef struct decode_work {
  const attn_task *a;
  int64_t n_keys, blocks, tasks;
  float *scores, *partial;
} decode_work;

static void decode_region(void *arg) {
  const decode_work *w = arg;
  const attn_task *a = w->a;
  const md_attn_shape *s = a->shape;
  int hd = s->head_dim, group = s->n_heads / s->n_kv_heads;
  int64_t n_keys = w->n_keys, blocks = w->blocks, tasks = w->tasks;
  float *scores = w->scores, *partial = w->partial;
#pragma omp for schedule(dynamic, 2)
  for (int64_t task = 0; task < tasks; task++) {
    int64_t k0, len;
    int h0 = task_keys(a, task, blocks, &k0, &len);
    const float *qg = a->q + (int64_t)h0 * hd, *keys = head_keys(a, h0 / group) + k0 * hd;
    float *sg = scores + (size_t)h0 * (size_t)n_keys + (size_t)k0;
    if (!md_cpu_decode_scores(a->isa, sg, n_keys, qg, group, keys, len, hd, a->scale))
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, group, (int)len, hd, a->scale, qg, hd,
                  keys, hd, 0.0f, sg, (int)n_keys);
  }
#pragma omp for schedule(static)
  for (int head = 0; head < s->n_heads; head++)
    softmax_rows(a, head, scores + (size_t)head * (size_t)n_keys, n_keys, 0, 1, n_keys, NULL);
#pragma omp for schedule(dynamic, 2)
  for (int64_t task = 0; task < tasks; task++) {
    int64_t k0, len;
    int h0 = task_keys(a, task, blocks, &k0, &len);
    const float *pg = scores + (size_t)h0 * (size_t)n_keys + (size_t)k0;
    const float *values = head_values(a, h0 / group) + k0 * hd;
    float *og = partial + (size_t)task * (size_t)(group * hd);
    if (!md_cpu_decode_values(a->isa, og, pg, n_keys, group, values, len, hd))
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, group, hd, (int)len, 1.0f, pg,
                  (int)n_keys, values, hd, 0.0f, og, hd);
  }
  /* The capture's reduction over heads, a block of keys per task. */
  if (a->capture) {
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; b++) {
      int64_t k0, len;
      block_keys(a, b, &k0, &len);
      reduce_head_rows(a, k0, (size_t)len);
    }
  }
  /* out[head] = the sum of its partial outputs, in block order. */
#pragma omp for schedule(static)
  for (int head = 0; head < s->n_heads; head++) {
    float *out = a->out + (int64_t)head * hd;
    const float *first = partial + ((size_t)(head / group) * (size_t)blocks * (size_t)group +
                                    (size_t)(head % group)) * (size_t)hd;
    memcpy(out, first, (size_t)hd * sizeof(float));
    for (int64_t b = 1; b < blocks; b++) {
      const float *p = first + (size_t)b * (size_t)(group * hd);
      for (int d = 0; d < hd; d++) out[d] += p[d];
    }
  }
}

static int decode(const attn_task *a, int threads) {
  const md_attn_shape *s = a->shape;
  int hd = s->head_dim, group = s->n_heads / s->n_kv_heads;
  decode_work w = {.a = a, .n_keys = a->pos0 + 1, .scores = a->head_rows};
  w.blocks = (w.n_keys + MD_ATTN_DECODE_BLOCK - 1) / MD_ATTN_DECODE_BLOCK;
  w.tasks = w.blocks * s->n_kv_heads;
  w.partial = malloc((size_t)w.tasks * (size_t)group * (size_t)hd * sizeof(float));
  if (!w.partial) return 1;
  threads = md_cpu_team(threads, (int64_t)s->n_heads * w.n_keys * hd, MD_GRAIN_ATTN_DECODE);
  md_cpu_run(threads, decode_region, &w);
  free(w.partial);
  return 0;
}

md_status md_cpu_attention(md_cpu_isa isa, int threads, float *out, const float *q,
                           const float *cache, const md_attn_shape *shape, int64_t pos0,
                           int64_t n, const md_attn_hook *hook, const md_attn_capture *capture,
                           float *received, bool bf16_values) {
  attn_task a = {.shape = shape, .q = q, .cache = cache, .out = out, .pos0 = pos0,
                 .scale = (float)pow((double)shape->head_dim, -0.5),
                 .hook = (hook && hook->on_row) ? hook : NULL,
                 .capture = (capture && received) ? capture : NULL, .received = received,
                 .isa = isa, .bf16_values = bf16_values};
  if (n == 1) { /* the heads' rows and the capture's accumulator row */
    a.head_rows = malloc((size_t)(shape->n_heads + 1) * (size_t)(pos0 + 1) * sizeof(float));
    if (!a.head_rows) return MD_E_NOMEM;
  }
  int failed = n == 1 ? decode(&a, threads) : prefill(&a, threads, n);
  free(a.head_rows);
  return failed ? MD_E_NOMEM : MD_OK;
}
