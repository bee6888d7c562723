/* The CPU back end's ops table: buffers are plain float arrays; 2-D
 * weights of a file mapping are copies of the tensors in their file dtype
 * in this process's anonymous memory (resident_copy says why), shared by
 * the weights made from one tensor (a tied LM head and its embedding);
 * 2-D weights in memory the model owns (not mapped: a GGUF checkpoint's
 * dequantized tensors), and every 2-D weight with MD_CPU_WEIGHTS_MAPPED,
 * are read where they lie; 1-D weights (norms, biases) are converted to f32
 * once. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/blas_core.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_f32.h"

/* Weight tiles for the prefill sgemm: at most this many floats (64 MiB) of
 * converted weights at a time, so every matrix of Qwen2.5-0.5B and -1.5B
 * (the largest, 1.5B's MLP, 8960 x 1536 = 13.8M floats) is one tile and one
 * sgemm call: split in two, the down projection packed its 1,700 x 4,864
 * activations twice and ran as two narrower products. The pages are touched
 * only when F16/BF16 weights are converted. */
#define MD_GEMM_SCRATCH_FLOATS ((size_t)16 << 20)
/* Below this many rows a "matrix" product runs as repeated matvecs. */
#define MD_GEMM_MIN_ROWS 4

struct md_kbuf {
  float *data; /* the first MD_CPU_ALIGN boundary in block */
  size_t n;
  void *block; /* calloc'd: n floats and the alignment's slack */
};

/* A 2-D weight's resident copy. Why not read the tensor where it lies: on
 * an Intel Xeon, decode's matrix-vector kernels streamed f32 weights about
 * 15% faster from anonymous memory than from the safetensors file's
 * private mapping (page cache pages), whatever the pages' size or the
 * start's alignment (on an AMD Zen 5 the two are level). The mapping's
 * pages are dropped from the resident set as each tensor is copied
 * (md_tensor_drop_pages), so the process holds the weights once. */
typedef struct resident_copy {
  const void *host; /* the tensor's data */
  size_t nbytes;
  void *copy;       /* md_cpu_alloc'd */
  int refs;
  struct resident_copy *next;
} resident_copy;

/* A vocabulary-sized matrix most of whose rows are zero (a checkpoint
 * trained over part of its vocabulary, like the shipped demo, whose unused
 * ids have zero rows): the 4-row blocks that hold a nonzero
 * element, copied together, and the rows they were. The logits multiply
 * only these and write +0 to the others, the bits the whole product gives
 * them: a row of zeros sums +0 products (or -0 ones) into +0 accumulators,
 * so its result is +0 for any finite input. Blocks of 4 rows, because the
 * matrix-vector kernels compute every row in a 4-row group the same way
 * and the last rows % 4 of a matrix alone (matvec.c, matvec_chunk): the
 * packed matrix's rows take the path they take in the whole one. */
typedef struct packed_rows {
  void *data;      /* md_cpu_alloc'd [count, cols] in the weight's dtype */
  int64_t *rows;   /* [count]: the row of the whole matrix each packed row is */
  int64_t count;
  int64_t first_zero; /* the first row not packed (an all-zero one) */
} packed_rows;

/* At least this many rows for a matrix to be packed (a vocabulary). */
#define MD_PACK_MIN_ROWS 8192

struct md_kweight {
  md_dtype dtype;
  int64_t rows, cols;   /* [rows, cols]; 1-D tensors have rows = 1 */
  const void *data;     /* file dtype: the resident copy; for 1-D weights, `converted` */
  float *converted;     /* owned f32 copy of a 1-D weight, else NULL */
  resident_copy *resident; /* 2-D weights: the shared copy (NULL when mapped) */
  packed_rows *packed;  /* its nonzero row blocks when at most half are nonzero, else NULL */
};

typedef struct cpu_kernels {
  md_kernels base;
  int threads;
  md_cpu_isa isa;
  float *gemm_scratch;  /* MD_GEMM_SCRATCH_FLOATS, pages touched on use */
  bool bf16_gemm;       /* BF16 weights' products in BF16: prompts by md_gemm_bf16,
                           decode rows by md_bf16_rows */
  bool own_gemm;        /* float32 prompt products by md_gemm_f32 (md_cpu_gemm resolved) */
  uint32_t *bf16_x;     /* its packed activations, grown on demand */
  size_t bf16_x_words;
  uint32_t *rows_xb;    /* decode rows rounded and paired for BF16 products (rows_bf16) */
  size_t rows_xb_words;
  uint32_t *bf16_w;     /* its packed weight panels, one per thread */
  size_t bf16_w_words;
  float *f32_w;         /* its packed weight panels, one per thread */
  size_t f32_w_floats;
  float *row_scratch;   /* one normalised row for the LM head */
  size_t row_scratch_n;
  float *packed_logits; /* the packed rows' logits (packed_rows) */
  size_t packed_logits_n;
  bool dense_logits;    /* md_cpu_options.dense_logits: no packed_rows */
  md_cpu_weights weights; /* copy or read the 2-D weights in place */
  md_status deferred;   /* first allocation failure inside a compute op */
  char blas_library[64]; /* md_blas_library, for the facts */
  resident_copy *resident; /* the 2-D weights' copies */
} cpu_kernels;

static cpu_kernels *cpu(md_kernels *k) { return (cpu_kernels *)k; }

static void defer(cpu_kernels *c, md_status status) {
  if (c->deferred == MD_OK) c->deferred = status;
}

/* ---- memory ---------------------------------------------------------------- */

/* malloc's block, the pointer to it stored just below the line boundary
 * handed out. Not posix_memalign: glibc serves aligned requests from the
 * arena and keeps the freed blocks resident, where malloc gives these sizes
 * their own mappings and unmaps them on free (posix_memalign for the
 * prompt attention's per-call score tiles added 23-30 MB to the 0.5B
 * run's peak RSS). */
/* The first MD_CPU_ALIGN boundary at or after p. */
static void *line_boundary(const void *p) {
  return (void *)(((uintptr_t)p + MD_CPU_ALIGN - 1) & ~(uintptr_t)(MD_CPU_ALIGN - 1));
}

void *md_cpu_alloc(size_t bytes) {
  if (bytes > SIZE_MAX - MD_CPU_ALIGN - sizeof(void *)) return NULL;
  char *block = malloc(bytes + MD_CPU_ALIGN + sizeof(void *));
  if (!block) return NULL;
  void **at = line_boundary(block + sizeof(void *));
  at[-1] = block;
  return at;
}

void md_cpu_free(void *p) {
  if (p) free(((void **)p)[-1]);
}

static md_status cpu_buf_new(md_kernels *k, size_t n, md_kbuf **out, md_error *err) {
  (void)k;
  md_kbuf *buf = calloc(1, sizeof *buf);
  /* calloc, not md_cpu_alloc and a memset: its pages are zeroed lazily, so
   * RSS grows with use (a cache sized for 32k positions costs what it
   * holds); the data starts at the block's first cache line boundary. */
  void *block = n <= (SIZE_MAX - MD_CPU_ALIGN) / sizeof(float)
                    ? calloc(1, (n ? n : 1) * sizeof(float) + MD_CPU_ALIGN)
                    : NULL;
  if (!buf || !block) {
    free(buf);
    free(block);
    return md_fail(err, MD_E_NOMEM, "cpu kernels: cannot allocate a buffer of %zu floats", n);
  }
  buf->block = block;
  buf->data = line_boundary(block);
  buf->n = n;
  *out = buf;
  return MD_OK;
}

static void cpu_buf_free(md_kernels *k, md_kbuf *buf) {
  (void)k;
  if (!buf) return;
  free(buf->block);
  free(buf);
}

static md_status cpu_sync(md_kernels *k, md_error *err) {
  cpu_kernels *c = cpu(k);
  md_status status = c->deferred;
  c->deferred = MD_OK;
  if (status == MD_E_NOMEM)
    return md_fail(err, status, "cpu kernels: out of memory for scratch space");
  if (status != MD_OK)
    return md_fail(err, status, "cpu kernels: an operation was given a range outside its buffer");
  return MD_OK;
}

static md_status cpu_buf_read(md_kernels *k, const md_kbuf *buf, size_t offset, size_t n,
                              float *dst, md_error *err) {
  if (offset > buf->n || n > buf->n - offset)
    return md_fail(err, MD_E_INVALID, "cpu kernels: read of [%zu, %zu) from a buffer of %zu floats",
                   offset, offset + n, buf->n);
  memcpy(dst, buf->data + offset, n * sizeof(float));
  return cpu_sync(k, err);
}

static md_status cpu_buf_write(md_kernels *k, md_kbuf *buf, size_t offset, size_t n,
                               const float *src, md_error *err) {
  (void)k;
  if (offset > buf->n || n > buf->n - offset)
    return md_fail(err, MD_E_INVALID, "cpu kernels: write of [%zu, %zu) to a buffer of %zu floats",
                   offset, offset + n, buf->n);
  memcpy(buf->data + offset, src, n * sizeof(float));
  return MD_OK;
}

static void cpu_buf_zero(md_kernels *k, md_kbuf *buf, size_t offset, size_t n) {
  cpu_kernels *c = cpu(k);
  if (offset > buf->n || n > buf->n - offset) {
    defer(c, MD_E_INVALID);
    return;
  }
  memset(buf->data + offset, 0, n * sizeof(float));
}

/* The CPU has nothing to overlap: the copy happens at once. */
static md_status cpu_buf_read_start(md_kernels *k, const md_kbuf *buf, size_t offset, size_t n,
                                    float *dst, int slot, md_error *err) {
  if (slot < 0 || slot >= MD_KERNELS_READ_SLOTS)
    return md_fail(err, MD_E_INVALID, "cpu kernels: read slot %d out of range", slot);
  return cpu_buf_read(k, buf, offset, n, dst, err);
}

static md_status cpu_buf_read_finish(md_kernels *k, int slot, md_error *err) {
  (void)k;
  if (slot < 0 || slot >= MD_KERNELS_READ_SLOTS)
    return md_fail(err, MD_E_INVALID, "cpu kernels: read slot %d out of range", slot);
  return MD_OK;
}

/* The resident copy of the `nbytes` of 2-D tensor t (its shape's, which
 * a tensor made by hand may not have put in t->nbytes), shared with earlier
 * weights of the same tensor; NULL when out of memory. Copied in 1 MiB
 * pieces by the back end's threads (reading a fresh mapping is page faults
 * as much as copying), then the tensor's mapped pages leave the resident
 * set. */
static resident_copy *resident_for(cpu_kernels *c, const md_tensor *t, size_t nbytes) {
  for (resident_copy *r = c->resident; r; r = r->next)
    if (r->host == t->data && r->nbytes == nbytes) {
      r->refs++;
      return r;
    }
  resident_copy *r = calloc(1, sizeof *r);
  void *copy = md_cpu_alloc(nbytes);
  if (!r || !copy) {
    free(r);
    md_cpu_free(copy);
    return NULL;
  }
  const size_t piece = (size_t)1 << 20;
  int64_t pieces = (int64_t)((nbytes + piece - 1) / piece);
#pragma omp parallel for num_threads(c->threads) schedule(static) if (pieces > 1)
  for (int64_t i = 0; i < pieces; i++) {
    size_t at = (size_t)i * piece, n = nbytes - at < piece ? nbytes - at : piece;
    memcpy((char *)copy + at, (const char *)t->data + at, n);
  }
  md_tensor_drop_pages(t);
  *r = (resident_copy){.host = t->data, .nbytes = nbytes, .copy = copy, .refs = 1, .next = c->resident};
  c->resident = r;
  return r;
}

static void resident_release(cpu_kernels *c, resident_copy *r) {
  if (!r || --r->refs > 0) return;
  for (resident_copy **at = &c->resident; *at; at = &(*at)->next)
    if (*at == r) {
      *at = r->next;
      break;
    }
  md_cpu_free(r->copy);
  free(r);
}

/* Whether rows [r0, r1) of w are all zero (either sign). */
static bool rows_zero(const md_kweight *w, int64_t r0, int64_t r1) {
  size_t begin = (size_t)r0 * (size_t)w->cols, end = (size_t)r1 * (size_t)w->cols;
  for (size_t i = begin; i < end; i++)
    if (md_cpu_weight_at(w->data, w->dtype, i) != 0.0f) return false; /* NaN too */
  return true;
}

/* w->packed when w is vocabulary-sized and at most half of its 4-row blocks
 * hold a nonzero element; MD_E_NOMEM when the copy cannot be made. */
static md_status pack_rows(md_kweight *w) {
  if (w->rows < MD_PACK_MIN_ROWS || w->cols <= 0) return MD_OK;
  int64_t blocks = (w->rows + 3) / 4, kept_blocks = 0, kept_rows = 0;
  bool *keep = malloc((size_t)blocks);
  if (!keep) return MD_E_NOMEM;
  for (int64_t b = 0; b < blocks; b++) {
    int64_t r1 = 4 * b + 4 < w->rows ? 4 * b + 4 : w->rows;
    keep[b] = !rows_zero(w, 4 * b, r1);
    if (keep[b]) kept_blocks++, kept_rows += r1 - 4 * b;
  }
  md_status s = MD_OK;
  if (2 * kept_blocks <= blocks) {
    size_t row_bytes = (size_t)w->cols * md_dtype_size(w->dtype);
    packed_rows *p = calloc(1, sizeof *p);
    if (p) {
      p->data = md_cpu_alloc(kept_rows ? (size_t)kept_rows * row_bytes : 1);
      p->rows = malloc((size_t)(kept_rows ? kept_rows : 1) * sizeof *p->rows);
    }
    if (!p || !p->data || !p->rows) {
      if (p) md_cpu_free(p->data), free(p->rows);
      free(p);
      s = MD_E_NOMEM;
    } else {
      for (int64_t b = 0; b < blocks; b++) {
        if (!keep[b]) continue;
        for (int64_t r = 4 * b; r < 4 * b + 4 && r < w->rows; r++) {
          memcpy((char *)p->data + (size_t)p->count * row_bytes,
                 (const char *)w->data + (size_t)r * row_bytes, row_bytes);
          p->rows[p->count++] = r;
        }
      }
      /* rows[] ascends, so the first row missing from it is the first gap */
      while (p->first_zero < p->count && p->rows[p->first_zero] == p->first_zero) p->first_zero++;
      w->packed = p;
    }
  }
  free(keep);
  return s;
}

int64_t md_kweight_cpu_packed_rows(const md_kweight *w) { return w && w->packed ? w->packed->count : 0; }

static void packed_free(packed_rows *p) {
  if (!p) return;
  md_cpu_free(p->data);
  free(p->rows);
  free(p);
}

static md_status cpu_weight_new(md_kernels *k, const md_tensor *t, md_kweight **out,
                                md_error *err) {
  cpu_kernels *c = cpu(k);
  if (t->ndim != 1 && t->ndim != 2)
    return md_fail(err, MD_E_UNSUPPORTED, "cpu kernels: tensor '%s' has %d dimensions, not 1 or 2",
                   t->name ? t->name : "?", t->ndim);
  md_kweight *w = calloc(1, sizeof *w);
  if (!w) return md_fail(err, MD_E_NOMEM, "cpu kernels: out of memory");
  w->dtype = t->dtype;
  w->rows = t->ndim == 2 ? t->shape[0] : 1;
  w->cols = t->ndim == 2 ? t->shape[1] : t->shape[0];
  if (t->ndim == 2) {
    size_t esize = md_dtype_size(t->dtype); /* 0: not a dtype md_dtype names */
    if (esize == 0 || w->rows < 0 || w->cols < 0 ||
        (w->cols > 0 && (size_t)w->rows > SIZE_MAX / esize / (size_t)w->cols)) {
      free(w);
      return md_fail(err, MD_E_INVALID, "cpu kernels: tensor '%s' has an impossible dtype or shape",
                     t->name ? t->name : "?");
    }
    size_t nbytes = (size_t)w->rows * (size_t)w->cols * esize;
    if (c->weights == MD_CPU_WEIGHTS_MAPPED || !t->mapped) {
      /* Read in place (weight_new's contract): a tensor outside a file
       * mapping is anonymous memory already, which is what the copy is for. */
      w->data = t->data;
    } else {
      w->resident = resident_for(c, t, nbytes);
      if (!w->resident) {
        free(w);
        return md_fail(err, MD_E_NOMEM, "cpu kernels: out of memory for a copy of '%s' (%zu bytes)",
                       t->name ? t->name : "?", nbytes);
      }
      w->data = w->resident->copy;
    }
    if (!c->dense_logits && pack_rows(w) != MD_OK) {
      resident_release(c, w->resident);
      free(w);
      return md_fail(err, MD_E_NOMEM, "cpu kernels: out of memory for the nonzero rows of '%s'",
                     t->name ? t->name : "?");
    }
  } else {
    w->converted = malloc((size_t)w->cols * sizeof(float));
    if (!w->converted) {
      free(w);
      return md_fail(err, MD_E_NOMEM, "cpu kernels: out of memory for '%s'", t->name ? t->name : "?");
    }
    for (int64_t i = 0; i < w->cols; i++)
      w->converted[i] = md_cpu_weight_at(t->data, t->dtype, (size_t)i);
    w->data = w->converted;
    w->dtype = MD_DTYPE_F32;
  }
  *out = w;
  return MD_OK;
}

static void cpu_weight_free(md_kernels *k, md_kweight *w) {
  if (!w) return;
  resident_release(cpu(k), w->resident);
  packed_free(w->packed);
  free(w->converted);
  free(w);
}

/* ---- elementwise and per-row ops ------------------------------------------ */

static void cpu_embed(md_kernels *k, md_kbuf *x, const md_kweight *table, const int32_t *tokens,
                      int64_t n) {
  cpu_kernels *c = cpu(k);
  int64_t dim = table->cols;
  MD_CPU_FOR_STATIC(md_cpu_team(c->threads, n * dim, MD_GRAIN_FLOATS), i, n, {
    float *row = x->data + (size_t)(i * dim);
    size_t base = (size_t)tokens[i] * (size_t)dim;
    for (int64_t j = 0; j < dim; j++) row[j] = md_cpu_weight_at(table->data, table->dtype, base + (size_t)j);
  });
}

/* HF's Qwen2RMSNorm in fp32: variance = mean(x^2); x * rsqrt(variance + eps),
 * then times the weight. The sum of squares is accumulated in double, a
 * little more exact than torch's fp32 reduction (each square is exact in
 * double), in four running sums: one chain of dependent double additions
 * waits the addition's latency (4 cycles) at every element. */
static void rmsnorm_row(float *out, const float *x, const float *weight, int64_t dim, float eps) {
  double sums[4] = {0.0, 0.0, 0.0, 0.0};
  int64_t j = 0;
  for (; j + 4 <= dim; j += 4)
    for (int l = 0; l < 4; l++) sums[l] += (double)x[j + l] * (double)x[j + l];
  for (; j < dim; j++) sums[0] += (double)x[j] * (double)x[j];
  double sum_sq = (sums[0] + sums[1]) + (sums[2] + sums[3]);
  float variance = (float)(sum_sq / (double)dim);
  float inv_rms = 1.0f / sqrtf(variance + eps);
  for (int64_t j = 0; j < dim; j++) out[j] = weight[j] * (x[j] * inv_rms);
}

static void cpu_rmsnorm(md_kernels *k, md_kbuf *out, const md_kbuf *x, const md_kweight *weight,
                        int64_t n, float eps) {
  cpu_kernels *c = cpu(k);
  int64_t dim = weight->cols;
  MD_CPU_FOR_STATIC(md_cpu_team(c->threads, n * dim, MD_GRAIN_FLOATS), i, n, {
    rmsnorm_row(out->data + (size_t)(i * dim), x->data + (size_t)(i * dim), weight->data, dim, eps);
  });
}

/* inv_freq[i] = 1 / theta^(2i / head_dim) and angle = pos * inv_freq[i], in
 * float32 exactly as HF's default RoPE (Qwen2RotaryEmbedding) computes them:
 * at position 1,700 the float32 angle differs from the exact one by ~1e-4,
 * which a double-precision RoPE would not reproduce. */
static void rotate_row(float *x, int heads, int head_dim, const float *cos_row, const float *sin_row) {
  int half = head_dim / 2;
  for (int h = 0; h < heads; h++) {
    float *v = x + (size_t)h * (size_t)head_dim;
    for (int i = 0; i < half; i++) {
      float x1 = v[i], x2 = v[i + half];
      v[i] = x1 * cos_row[i] - x2 * sin_row[i];
      v[i + half] = x2 * cos_row[i] + x1 * sin_row[i];
    }
  }
}

static void cpu_rope(md_kernels *k, md_kbuf *q, md_kbuf *kk, int64_t n, int n_heads,
                     int n_kv_heads, int head_dim, int64_t pos0, double theta) {
  cpu_kernels *c = cpu(k);
  int half = head_dim / 2;
  float *inv_freq = malloc((size_t)half * 3 * sizeof(float));
  if (!inv_freq) {
    defer(c, MD_E_NOMEM);
    return;
  }
  for (int i = 0; i < half; i++)
    inv_freq[i] = 1.0f / powf((float)theta, (float)(2 * i) / (float)head_dim);
  int team = md_cpu_team(c->threads, n * (n_heads + n_kv_heads) * head_dim, MD_GRAIN_FLOATS);
  MD_CPU_FOR_STATIC(team, t, n, {
    float cos_row[512], sin_row[512]; /* head_dim <= 1024, checked by the model */
    float pos = (float)(pos0 + t);
    for (int i = 0; i < half; i++) {
      float angle = pos * inv_freq[i];
      cos_row[i] = cosf(angle);
      sin_row[i] = sinf(angle);
    }
    rotate_row(q->data + (size_t)(t * n_heads * head_dim), n_heads, head_dim, cos_row, sin_row);
    rotate_row(kk->data + (size_t)(t * n_kv_heads * head_dim), n_kv_heads, head_dim, cos_row,
               sin_row);
  });
  free(inv_freq);
}

static void cpu_kv_store(md_kernels *k, md_kbuf *cache, const md_kbuf *key, const md_kbuf *value,
                         const md_attn_shape *s, int64_t pos0, int64_t n) {
  (void)k;
  size_t hd = (size_t)s->head_dim, cap = (size_t)s->capacity, nkv = (size_t)s->n_kv_heads;
  for (int64_t t = 0; t < n; t++)
    for (size_t g = 0; g < nkv; g++) {
      size_t src = ((size_t)t * nkv + g) * hd, dst = (g * cap + (size_t)(pos0 + t)) * hd;
      memcpy(cache->data + dst, key->data + src, hd * sizeof(float));
      memcpy(cache->data + (nkv * cap * hd) + dst, value->data + src, hd * sizeof(float));
    }
}

/* In place, slot by slot in ascending order: keep[j] >= j, so the source
 * of every move is still unwritten (kernels.h). */
static void cpu_kv_compact(md_kernels *k, md_kbuf *cache, const md_attn_shape *s,
                           const int64_t *keep, int64_t n_keep) {
  cpu_kernels *c = cpu(k);
  size_t hd = (size_t)s->head_dim, cap = (size_t)s->capacity, planes = 2 * (size_t)s->n_kv_heads;
  bool ok = n_keep >= 0 && (size_t)n_keep <= cap && planes * cap * hd <= cache->n;
  for (int64_t j = 0; ok && j < n_keep; j++)
    ok = keep[j] >= (j ? keep[j - 1] + 1 : 0) && (size_t)keep[j] < cap;
  if (!ok) {
    defer(c, MD_E_INVALID);
    return;
  }
  int64_t first = 0;
  while (first < n_keep && keep[first] == first) first++;
  for (size_t p = 0; p < planes; p++) {
    float *plane = cache->data + p * cap * hd;
    for (int64_t j = first; j < n_keep; j++)
      memcpy(plane + (size_t)j * hd, plane + (size_t)keep[j] * hd, hd * sizeof(float));
  }
}

static void cpu_attention(md_kernels *k, md_kbuf *out, const md_kbuf *q, const md_kbuf *cache,
                          const md_attn_shape *shape, int64_t pos0, int64_t n,
                          const md_attn_hook *hook, const md_attn_capture *capture) {
  cpu_kernels *c = cpu(k);
  md_status status = md_cpu_attention(c->isa, c->threads, out->data, q->data, cache->data, shape,
                                      pos0, n, hook, capture,
                                      capture ? capture->received->data : NULL, c->bf16_gemm);
  if (status != MD_OK) defer(c, status);
}

static void cpu_swiglu(md_kernels *k, md_kbuf *gate, const md_kbuf *up, size_t count) {
  cpu_kernels *c = cpu(k);
  size_t chunk = 1 << 14, chunks = (count + chunk - 1) / chunk;
  MD_CPU_FOR_STATIC(md_cpu_team(c->threads, (int64_t)count, MD_GRAIN_FLOATS), i, chunks, {
    size_t begin = (size_t)i * chunk, len = count - begin < chunk ? count - begin : chunk;
    md_cpu_silu_mul(c->isa, gate->data + begin, up->data + begin, len);
  });
}

static void cpu_add(md_kernels *k, md_kbuf *x, const md_kbuf *y, size_t count) {
  cpu_kernels *c = cpu(k);
  size_t chunk = 1 << 14, chunks = (count + chunk - 1) / chunk;
  MD_CPU_FOR_STATIC(md_cpu_team(c->threads, (int64_t)count, MD_GRAIN_FLOATS), i, chunks, {
    size_t end = ((size_t)i + 1) * chunk < count ? ((size_t)i + 1) * chunk : count;
    for (size_t j = (size_t)i * chunk; j < end; j++) x->data[j] += y->data[j];
  });
}

/* ---- matrix products -------------------------------------------------------- */

/* Prefill off the avx2 path: y = x W^T through cblas_sgemm; F16/BF16
 * weights are converted to f32 one tile of rows at a time (the conversion
 * is out*in operations against 2*n*out*in for the product, negligible at
 * prompt length). */
static void gemm(cpu_kernels *c, float *y, const float *x, const md_kweight *w,
                 const md_kweight *bias, int64_t n) {
  int64_t rows = w->rows, cols = w->cols;
  float beta = 0.0f;
  if (bias) {
    for (int64_t i = 0; i < n; i++) memcpy(y + i * rows, bias->data, (size_t)rows * sizeof(float));
    beta = 1.0f;
  }
  if (w->dtype == MD_DTYPE_F32) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)rows, (int)cols, 1.0f, x,
                (int)cols, w->data, (int)cols, beta, y, (int)rows);
    return;
  }
  /* Equal tiles: a small last tile would make an inefficient sgemm call. */
  int64_t max_tile = (int64_t)(MD_GEMM_SCRATCH_FLOATS / (size_t)cols);
  if (max_tile < 1) max_tile = 1;
  int64_t tiles = (rows + max_tile - 1) / max_tile, tile = (rows + tiles - 1) / tiles;
  for (int64_t r0 = 0; r0 < rows; r0 += tile) {
    int64_t r1 = r0 + tile < rows ? r0 + tile : rows;
    md_cpu_rows_to_f32(c->isa, c->threads, c->gemm_scratch, w->data, w->dtype, cols, r0, r1);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)(r1 - r0), (int)cols, 1.0f,
                x, (int)cols, c->gemm_scratch, (int)cols, beta, y + r0, (int)rows);
  }
}

/* A buffer of at least `n` elements of `size` bytes in place of buf, which
 * holds *have (contents not kept); NULL, with *have 0, when out of memory. */
static void *grow(void *buf, size_t *have, size_t n, size_t size) {
  if (*have >= n) return buf;
  md_cpu_free(buf);
  buf = md_cpu_alloc(n * size);
  *have = buf ? n : 0;
  return buf;
}

/* Prefill with --bf16-gemm: outs[i].y = x W_i^T + bias_i by AVX-512 BF16
 * (gemm_bf16.h), every W_i `cols` wide. */
static void gemm_bf16(cpu_kernels *c, const float *x, int64_t n, int64_t cols,
                      const md_gemm_bf16_out *outs, int count) {
  c->bf16_x = grow(c->bf16_x, &c->bf16_x_words, md_gemm_bf16_x_words(n, cols), sizeof(uint32_t));
  c->bf16_w = grow(c->bf16_w, &c->bf16_w_words, (size_t)c->threads * md_gemm_bf16_w_words(cols),
                   sizeof(uint32_t));
  if (!c->bf16_x || !c->bf16_w) {
    defer(c, MD_E_NOMEM);
    return;
  }
  md_gemm_bf16_shared(c->threads, x, n, cols, outs, count, c->bf16_x, c->bf16_w);
}

/* Prefill with our float32 GEMM: outs[i].y = x W_i^T + bias_i
 * (gemm_f32.h, its AVX-512 micro-kernel on the avx512 path), every W_i
 * `cols` wide, any dtype. */
static void gemm_f32(cpu_kernels *c, const float *x, int64_t n, int64_t cols,
                     const md_gemm_f32_out *outs, int count) {
  c->f32_w = grow(c->f32_w, &c->f32_w_floats, (size_t)c->threads * md_gemm_f32_w_floats(cols),
                  sizeof(float));
  if (!c->f32_w) {
    defer(c, MD_E_NOMEM);
    return;
  }
  md_gemm_f32_shared(c->isa, c->threads, x, n, cols, outs, count, c->f32_w);
}

/* Whether a product goes to our float32 GEMM (gemm_f32.h): md_cpu_gemm
 * resolved (by default the avx2 path and an AMD Zen 5's avx512 path, cpu.h
 * says why), a prompt; every weight dtype (F16/BF16 weights are widened
 * as they are packed instead of into a tile first; gemm_f32.c). */
static bool f32_product(const cpu_kernels *c, int64_t n) {
  return c->own_gemm && n >= MD_GEMM_MIN_ROWS;
}

/* Whether a product goes to the BF16 GEMM: --bf16-gemm, a BF16 weight, a
 * prompt of at least MD_CPU_BF16_GEMM_MIN_ROWS rows (cpu.h). */
static bool bf16_product(const cpu_kernels *c, const md_kweight *w, int64_t n) {
  return c->bf16_gemm && w->dtype == MD_DTYPE_BF16 && n >= MD_CPU_BF16_GEMM_MIN_ROWS;
}

/* Whether a product goes to md_bf16_rows (rows_products): --bf16-gemm, a
 * BF16 weight, fewer rows than the BF16 GEMM takes (decode rows, a short
 * prompt). */
static bool bf16_rows(const cpu_kernels *c, const md_kweight *w, int64_t n) {
  return c->bf16_gemm && w->dtype == MD_DTYPE_BF16 && n < MD_CPU_BF16_GEMM_MIN_ROWS;
}

/* The decode rows (n rows of x, fewer than a prompt's) of `count` products
 * of one x, every W `cols` wide: with --bf16-gemm, BF16 weights by
 * md_cpu_matvec_rows_bf16 (x rounded and paired once, gemm_bf16.h), the
 * others by md_cpu_matvec_rows (one row: md_cpu_matvec_shared). Either
 * way every row of every y has the bits it gets alone. */
static void rows_products(cpu_kernels *c, const md_cpu_matvec_out *outs, int count, int64_t cols,
                          const float *x, int64_t n) {
  md_cpu_matvec_out bf16[MD_CPU_MATVEC_MAX_SHARED], other[MD_CPU_MATVEC_MAX_SHARED];
  int n_bf16 = 0, n_other = 0;
  for (int i = 0; i < count; i++) {
    if (c->bf16_gemm && outs[i].dtype == MD_DTYPE_BF16) bf16[n_bf16++] = outs[i];
    else other[n_other++] = outs[i];
  }
  if (n_bf16 > 0) {
    size_t words = (size_t)((cols + 1) / 2);
    c->rows_xb = grow(c->rows_xb, &c->rows_xb_words, words * (size_t)n, sizeof(uint32_t));
    if (!c->rows_xb) {
      defer(c, MD_E_NOMEM);
      return;
    }
    for (int64_t i = 0; i < n; i++) md_bf16_pack_row(c->rows_xb + (size_t)i * words, x + i * cols, cols);
    md_cpu_matvec_rows_bf16(c->threads, bf16, n_bf16, cols, c->rows_xb, n);
  }
  if (n_other > 0) md_cpu_matvec_rows(c->isa, c->threads, other, n_other, cols, x, n);
}

static void cpu_matmul(md_kernels *k, md_kbuf *y, const md_kbuf *x, const md_kweight *w,
                       const md_kweight *bias, int64_t n) {
  cpu_kernels *c = cpu(k);
  const float *b = bias ? bias->data : NULL;
  if (bf16_product(c, w, n)) {
    md_gemm_bf16_out out = {.y = y->data, .w = w->data, .bias = b, .rows = w->rows};
    gemm_bf16(c, x->data, n, w->cols, &out, 1);
    return;
  }
  if (bf16_rows(c, w, n)) {
    md_cpu_matvec_out out = {.y = y->data, .w = w->data, .dtype = w->dtype, .rows = w->rows, .bias = b};
    rows_products(c, &out, 1, w->cols, x->data, n);
    return;
  }
  if (f32_product(c, n)) {
    md_gemm_f32_out out = {.y = y->data, .w = w->data, .dtype = w->dtype, .bias = b, .rows = w->rows};
    gemm_f32(c, x->data, n, w->cols, &out, 1);
    return;
  }
  if (n >= MD_GEMM_MIN_ROWS && (size_t)w->cols <= MD_GEMM_SCRATCH_FLOATS) {
    gemm(c, y->data, x->data, w, bias, n);
    return;
  }
  for (int64_t i = 0; i < n; i++)
    md_cpu_matvec(c->isa, c->threads, y->data + i * w->rows, w->data, w->dtype, w->rows, w->cols,
                  x->data + i * w->cols, b);
}

/* Whether a prompt's products of one x go to md_gemm_f32_shared together:
 * f32_product, at most MD_GEMM_F32_MAX_SHARED products of one width, none
 * of them the BF16 GEMM's (with --bf16-gemm and our float32 GEMM both on,
 * a Zen 5's avx512 path, a group of BF16 and F32 weights goes matmul by
 * matmul, so that each gets the bits it gets alone). */
static bool f32_shared(const cpu_kernels *c, const md_kweight *const *ws, int count, int64_t n) {
  bool ok = f32_product(c, n) && count <= MD_GEMM_F32_MAX_SHARED;
  for (int i = 0; ok && i < count; i++)
    ok = ws[i]->cols == ws[0]->cols && !bf16_product(c, ws[i], n) && !bf16_rows(c, ws[i], n);
  return ok;
}

/* With --bf16-gemm, a prompt's products of BF16 weights on one x share its
 * packing and one parallel region (md_gemm_bf16_shared); with our float32
 * GEMM (f32_product) a prompt's products of one x share one parallel
 * region (md_gemm_f32_shared); otherwise matmul by matmul. */
static void cpu_matmul_shared(md_kernels *k, md_kbuf *const *ys, const md_kbuf *x,
                              const md_kweight *const *ws, const md_kweight *const *biases,
                              int count, int64_t n) {
  _Static_assert(MD_KERNELS_MAX_SHARED <= MD_GEMM_BF16_MAX_SHARED, "md_gemm_bf16_shared's limit");
  _Static_assert(MD_KERNELS_MAX_SHARED <= MD_GEMM_F32_MAX_SHARED, "md_gemm_f32_shared's limit");
  _Static_assert(MD_KERNELS_MAX_SHARED <= MD_CPU_MATVEC_MAX_SHARED, "md_cpu_matvec_shared's limit");
  cpu_kernels *c = cpu(k);
  /* A decode row, or a short prompt's BF16 products (bf16_rows): the
   * matrix-vector products in one parallel region (each with the bits it
   * gets alone), where k and v alone were too small to run on more than
   * one thread. */
  bool one_width = true;
  for (int i = 0; i < count; i++) one_width = one_width && ws[i]->cols == ws[0]->cols;
  bool rows = one_width && count <= MD_KERNELS_MAX_SHARED;
  for (int i = 0; rows && n > 1 && i < count; i++) rows = bf16_rows(c, ws[i], n);
  if (rows) {
    md_cpu_matvec_out outs[MD_CPU_MATVEC_MAX_SHARED];
    for (int i = 0; i < count; i++)
      outs[i] = (md_cpu_matvec_out){.y = ys[i]->data, .w = ws[i]->data, .dtype = ws[i]->dtype,
                                    .rows = ws[i]->rows,
                                    .bias = biases && biases[i] ? biases[i]->data : NULL};
    rows_products(c, outs, count, ws[0]->cols, x->data, n);
    return;
  }
  bool shared = one_width && count <= MD_KERNELS_MAX_SHARED;
  for (int i = 0; shared && i < count; i++) shared = bf16_product(c, ws[i], n);
  if (!shared && f32_shared(c, ws, count, n)) {
    md_gemm_f32_out outs[MD_GEMM_F32_MAX_SHARED];
    for (int i = 0; i < count; i++)
      outs[i] = (md_gemm_f32_out){.y = ys[i]->data, .w = ws[i]->data, .dtype = ws[i]->dtype,
                                  .bias = biases && biases[i] ? biases[i]->data : NULL,
                                  .rows = ws[i]->rows};
    gemm_f32(c, x->data, n, ws[0]->cols, outs, count);
    return;
  }
  if (!shared) {
    for (int i = 0; i < count; i++) cpu_matmul(k, ys[i], x, ws[i], biases ? biases[i] : NULL, n);
    return;
  }
  md_gemm_bf16_out outs[MD_KERNELS_MAX_SHARED];
  for (int i = 0; i < count; i++)
    outs[i] = (md_gemm_bf16_out){.y = ys[i]->data, .w = ws[i]->data,
                                 .bias = biases && biases[i] ? biases[i]->data : NULL,
                                 .rows = ws[i]->rows};
  gemm_bf16(c, x->data, n, ws[0]->cols, outs, count);
}

/* gate = silu(x W_gate^T) * (x W_up^T): with our float32 GEMM on the avx2
 * path in one pass (md_gemm_f32_swiglu: the up product's tiles become the
 * SwiGLU as they are stored, the same bits); otherwise matmul_shared, then
 * swiglu. */
static void cpu_swiglu(md_kernels *k, md_kbuf *gate, const md_kbuf *up, size_t count);
static void cpu_matmul_swiglu(md_kernels *k, md_kbuf *gate, md_kbuf *up, const md_kbuf *x,
                              const md_kweight *w_gate, const md_kweight *w_up, int64_t n) {
  cpu_kernels *c = cpu(k);
  if (f32_product(c, n) && c->isa == MD_CPU_ISA_AVX2 && !bf16_product(c, w_gate, n) &&
      !bf16_product(c, w_up, n) && w_gate->rows == w_up->rows && w_gate->cols == w_up->cols) {
    c->f32_w = grow(c->f32_w, &c->f32_w_floats,
                    (size_t)c->threads * md_gemm_f32_w_floats(w_gate->cols), sizeof(float));
    if (!c->f32_w) {
      defer(c, MD_E_NOMEM);
      return;
    }
    md_gemm_f32_out g = {.y = gate->data, .w = w_gate->data, .dtype = w_gate->dtype,
                         .rows = w_gate->rows};
    md_gemm_f32_out u = {.y = up->data, .w = w_up->data, .dtype = w_up->dtype,
                         .rows = w_up->rows};
    md_gemm_f32_swiglu(c->threads, x->data, n, w_gate->cols, &g, &u, c->f32_w);
    return;
  }
  md_kbuf *ys[] = {gate, up};
  const md_kweight *ws[] = {w_gate, w_up};
  cpu_matmul_shared(k, ys, x, ws, NULL, 2, n);
  cpu_swiglu(k, gate, up, (size_t)n * (size_t)w_gate->rows);
}

/* Batched decode rows (kernels.h): md_cpu_matvec_rows, each row with the
 * bits of the one-row path (matmul_shared with n = 1 is
 * md_cpu_matvec_shared, or md_cpu_matvec per weight for mixed widths: the
 * same row kernels). */
static void cpu_matmul_rows(md_kernels *k, md_kbuf *const *ys, const md_kbuf *x,
                            const md_kweight *const *ws, const md_kweight *const *biases,
                            int count, int64_t n) {
  cpu_kernels *c = cpu(k);
  md_cpu_matvec_out group[MD_CPU_MATVEC_MAX_SHARED];
  int same = 0;
  for (int i = 0; i < count; i++) {
    md_cpu_matvec_out out = {.y = ys[i]->data, .w = ws[i]->data, .dtype = ws[i]->dtype,
                             .rows = ws[i]->rows,
                             .bias = biases && biases[i] ? biases[i]->data : NULL};
    if (ws[i]->cols == ws[0]->cols) group[same++] = out;
    else rows_products(c, &out, 1, ws[i]->cols, x->data, n);
  }
  rows_products(c, group, same, ws[0]->cols, x->data, n);
}

static md_status cpu_buf_view(md_kernels *k, md_kbuf *buf, size_t offset, size_t n,
                              md_kbuf **view, md_error *err) {
  (void)k;
  if (offset > buf->n || n > buf->n - offset)
    return md_fail(err, MD_E_INVALID, "cpu kernels: a view of floats [%zu, %zu) of a buffer of %zu",
                   offset, offset + n, buf->n);
  md_kbuf *v = calloc(1, sizeof *v);
  if (!v) return md_fail(err, MD_E_NOMEM, "cpu kernels: out of memory");
  v->data = buf->data + offset; /* block NULL: buf_free leaves the memory alone */
  v->n = n;
  *view = v;
  return MD_OK;
}

/* The products of n normalised rows x (n x cols) with the LM head's packed
 * rows (packed_rows) into c->packed_logits, row b's at b * count; false
 * (nothing done) when the head is not packed or an input is not finite (a
 * zero row's product would be NaN then). The packed rows go through
 * md_cpu_matvec_rows as the whole matrix would, so every packed logit has
 * the whole product's bits. */
static bool packed_products(cpu_kernels *c, const md_kweight *lm_head, const float *x, int64_t n) {
  const packed_rows *p = lm_head->packed;
  if (!p) return false;
  size_t inputs = (size_t)n * (size_t)lm_head->cols;
  for (size_t i = 0; i < inputs; i++)
    if (!isfinite(x[i])) return false;
  size_t need = (size_t)n * (size_t)(p->count ? p->count : 1);
  if (c->packed_logits_n < need) {
    float *grown = realloc(c->packed_logits, need * sizeof(float));
    if (!grown) return false; /* the whole product then */
    c->packed_logits = grown;
    c->packed_logits_n = need;
  }
  md_cpu_matvec_out out = {.y = c->packed_logits, .w = p->data, .dtype = lm_head->dtype,
                           .rows = p->count};
  rows_products(c, &out, 1, lm_head->cols, x, n);
  return true;
}

/* Row b of the whole logits from the packed products: +0 where the head's
 * row is zero. */
static void scatter_packed(const cpu_kernels *c, float *row, const md_kweight *lm_head, int64_t b) {
  const packed_rows *p = lm_head->packed;
  const float *got = c->packed_logits + (size_t)b * (size_t)p->count;
  memset(row, 0, (size_t)lm_head->rows * sizeof(float));
  for (int64_t j = 0; j < p->count; j++) row[p->rows[j]] = got[j];
}

/* The logits of n normalised rows x by the packed rows, +0 elsewhere: the
 * whole product's bits; false as packed_products. */
static bool logits_packed(cpu_kernels *c, float *logits, const md_kweight *lm_head, const float *x,
                          int64_t n) {
  if (!packed_products(c, lm_head, x, n)) return false;
  for (int64_t b = 0; b < n; b++)
    scatter_packed(c, logits + (size_t)b * (size_t)lm_head->rows, lm_head, b);
  return true;
}

/* md_cpu_argmax over row b of the whole logits (scatter_packed's), read
 * from the packed products alone. Without a NaN among them the whole row
 * holds the packed values and +0s, and its first largest is the first
 * largest packed value m (at the smallest row: rows[] ascends) when m > 0,
 * the first zero row when m < 0, and the smaller of the two when m == 0
 * (-0 == +0, and the loop keeps the first of equals). A NaN changes which
 * elements the loop compares, so that row is scattered into `row` (scratch
 * of the head's rows) and searched whole. */
static int64_t packed_argmax(const cpu_kernels *c, float *row, const md_kweight *lm_head, int64_t b) {
  const packed_rows *p = lm_head->packed;
  const float *got = c->packed_logits + (size_t)b * (size_t)p->count;
  bool nan = false;
  for (int64_t j = 0; j < p->count; j++) nan |= got[j] != got[j];
  if (nan) {
    scatter_packed(c, row, lm_head, b);
    return (int64_t)md_cpu_argmax(c->isa, row, (size_t)lm_head->rows);
  }
  if (p->count == 0) return 0;
  int64_t j = (int64_t)md_cpu_argmax(c->isa, got, (size_t)p->count);
  int64_t packed_row = p->rows[j], zero_row = p->first_zero;
  if (got[j] > 0) return packed_row;
  if (got[j] < 0) return zero_row;
  return packed_row < zero_row ? packed_row : zero_row;
}

/* c->row_scratch rows 0 .. n-1 = rmsnorm_row of x's rows row0 .. row0 +
 * n - 1 (the final norm); false (recorded) when the scratch cannot grow. */
static bool norm_rows(cpu_kernels *c, const md_kbuf *x, int64_t row0, int64_t n,
                      const md_kweight *norm, float eps) {
  size_t dim = (size_t)norm->cols;
  if (c->row_scratch_n < dim * (size_t)n) {
    float *grown = realloc(c->row_scratch, dim * (size_t)n * sizeof(float));
    if (!grown) {
      defer(c, MD_E_NOMEM);
      return false;
    }
    c->row_scratch = grown;
    c->row_scratch_n = dim * (size_t)n;
  }
  for (int64_t r = 0; r < n; r++)
    rmsnorm_row(c->row_scratch + (size_t)r * dim, x->data + (size_t)(row0 + r) * dim, norm->data,
                (int64_t)dim, eps);
  return true;
}

/* logits [n, vocab] = the LM head's whole product with the n normalised
 * rows in c->row_scratch (md_cpu_matvec_rows: a row gets md_cpu_matvec's
 * bits). */
static void whole_logits(cpu_kernels *c, float *logits, const md_kweight *lm_head, int64_t n) {
  md_cpu_matvec_out out = {.y = logits, .w = lm_head->data, .dtype = lm_head->dtype,
                           .rows = lm_head->rows};
  rows_products(c, &out, 1, lm_head->cols, c->row_scratch, n);
}

static void cpu_logits(md_kernels *k, md_kbuf *logits, const md_kbuf *x, int64_t row,
                       const md_kweight *norm, const md_kweight *lm_head, float eps) {
  cpu_kernels *c = cpu(k);
  if (!norm_rows(c, x, row, 1, norm, eps)) return;
  if (!logits_packed(c, logits->data, lm_head, c->row_scratch, 1))
    whole_logits(c, logits->data, lm_head, 1);
}

/* The final norm of n rows (as cpu_logits) and the LM head read once for
 * them: each row gets cpu_logits's bits. */
static void cpu_logits_rows(md_kernels *k, md_kbuf *logits, const md_kbuf *x, int64_t n,
                            const md_kweight *norm, const md_kweight *lm_head, float eps) {
  cpu_kernels *c = cpu(k);
  if (!norm_rows(c, x, 0, n, norm, eps)) return;
  if (!logits_packed(c, logits->data, lm_head, c->row_scratch, n))
    whole_logits(c, logits->data, lm_head, n);
}

/* cpu_logits_rows then md_cpu_argmax of each row; a packed head's rows are
 * searched in its packed products (packed_argmax) without writing the
 * vocabulary-long rows. */
static md_status cpu_greedy_rows(md_kernels *k, int64_t *index, md_kbuf *logits, const md_kbuf *x,
                                 int64_t n, const md_kweight *norm, const md_kweight *lm_head,
                                 float eps, md_error *err) {
  cpu_kernels *c = cpu(k);
  size_t vocab = (size_t)lm_head->rows;
  if (n < 1 || (size_t)n * vocab > logits->n)
    return md_fail(err, MD_E_INVALID, "cpu kernels: greedy tokens of %lld rows of %zu logits in "
                   "%zu floats", (long long)n, vocab, logits->n);
  if (norm_rows(c, x, 0, n, norm, eps)) {
    if (packed_products(c, lm_head, c->row_scratch, n)) {
      for (int64_t b = 0; b < n; b++) index[b] = packed_argmax(c, logits->data, lm_head, b);
    } else {
      whole_logits(c, logits->data, lm_head, n);
      for (int64_t b = 0; b < n; b++)
        index[b] = (int64_t)md_cpu_argmax(c->isa, logits->data + (size_t)b * vocab, vocab);
    }
  }
  return cpu_sync(k, err);
}

static md_status cpu_argmax(md_kernels *k, const md_kbuf *v, size_t n, int64_t *index,
                            md_error *err) {
  if (n == 0 || n > v->n)
    return md_fail(err, MD_E_INVALID, "cpu kernels: argmax over %zu of %zu floats", n, v->n);
  *index = (int64_t)md_cpu_argmax(cpu(k)->isa, v->data, n);
  return cpu_sync(k, err);
}

static void cpu_destroy(md_kernels *k) {
  cpu_kernels *c = cpu(k);
  md_cpu_free(c->gemm_scratch);
  md_cpu_free(c->bf16_x);
  md_cpu_free(c->rows_xb);
  md_cpu_free(c->bf16_w);
  md_cpu_free(c->f32_w);
  free(c->row_scratch);
  free(c->packed_logits);
  free(c);
}

static void cpu_facts(const md_kernels *k, md_kernel_facts *facts);
static void cpu_describe(const md_kernels *k, int threads, char *text, size_t size);

static const md_kernel_ops cpu_ops = {
  .name = "cpu",
  .destroy = cpu_destroy,
  .buf_new = cpu_buf_new,
  .buf_free = cpu_buf_free,
  .buf_read = cpu_buf_read,
  .buf_write = cpu_buf_write,
  .buf_zero = cpu_buf_zero,
  .buf_read_start = cpu_buf_read_start,
  .buf_read_finish = cpu_buf_read_finish,
  .buf_view = cpu_buf_view,
  .weight_new = cpu_weight_new,
  .weight_free = cpu_weight_free,
  .embed = cpu_embed,
  .rmsnorm = cpu_rmsnorm,
  .matmul = cpu_matmul,
  .matmul_shared = cpu_matmul_shared,
  .matmul_swiglu = cpu_matmul_swiglu,
  .matmul_rows = cpu_matmul_rows,
  .logits_rows = cpu_logits_rows,
  .rope = cpu_rope,
  .kv_store = cpu_kv_store,
  .kv_compact = cpu_kv_compact,
  .attention = cpu_attention,
  .swiglu = cpu_swiglu,
  .add = cpu_add,
  .logits = cpu_logits,
  .argmax = cpu_argmax,
  .greedy_rows = cpu_greedy_rows,
  .sync = cpu_sync,
  .facts = cpu_facts,
  .describe = cpu_describe,
};

md_status md_kernels_cpu_new(const md_cpu_options *options, md_kernels **k, md_error *err) {
  int threads = options ? options->threads : 0;
  if (threads < 0)
    return md_fail(err, MD_E_INVALID, "cpu kernels: thread count %d is negative", threads);
  md_cpu_kernels asked = options ? options->kernels : MD_CPU_KERNELS_BEST;
  if ((unsigned)asked > MD_CPU_KERNELS_AVX512)
    return md_fail(err, MD_E_INVALID, "cpu kernels: unknown kernel path %d", (int)asked);
  md_cpu_facts facts = md_cpu_read_facts();
  md_cpu_isa best = md_cpu_isa_for(&facts);
  if (asked != MD_CPU_KERNELS_BEST && md_cpu_isa_of(asked) > best)
    return md_fail(err, MD_E_DEVICE, "cpu kernels: this CPU cannot run the %s kernels (best here: %s)",
                   md_cpu_isa_name(md_cpu_isa_of(asked)), md_cpu_isa_name(best));
  md_cpu_isa isa = asked == MD_CPU_KERNELS_BEST ? best : md_cpu_isa_of(asked);
  bool bf16_gemm = options && options->bf16_gemm;
  if (bf16_gemm && !facts.avx512_bf16)
    return md_fail(err, MD_E_DEVICE, "cpu kernels: the BF16 products (--bf16-gemm) need "
                   "AVX-512 BF16, which this CPU does not have");
  if (bf16_gemm && isa != MD_CPU_ISA_AVX512)
    return md_fail(err, MD_E_DEVICE, "cpu kernels: the BF16 products (--bf16-gemm) run "
                   "with the avx512 kernels, not the %s ones", md_cpu_isa_name(isa));
  md_cpu_gemm gemm = options ? options->gemm : MD_CPU_GEMM_AUTO;
  if ((unsigned)gemm > MD_CPU_GEMM_BLAS)
    return md_fail(err, MD_E_INVALID, "cpu kernels: unknown prompt GEMM %d", (int)gemm);
  md_cpu_weights weights = options ? options->weights : MD_CPU_WEIGHTS_COPY;
  if ((unsigned)weights > MD_CPU_WEIGHTS_MAPPED)
    return md_fail(err, MD_E_INVALID, "cpu kernels: unknown weights placement %d", (int)weights);
  if (gemm == MD_CPU_GEMM_OWN && isa == MD_CPU_ISA_PORTABLE)
    return md_fail(err, MD_E_DEVICE, "cpu kernels: our prompt GEMM (MEMDECAY_CPU_GEMM=own) runs "
                   "with the avx2 or avx512 kernels, not the portable ones");
  threads = md_cpu_threads(threads);
  cpu_kernels *c = calloc(1, sizeof *c);
  float *scratch = md_cpu_alloc(MD_GEMM_SCRATCH_FLOATS * sizeof(float));
  if (!c || !scratch) {
    free(c);
    md_cpu_free(scratch);
    return md_fail(err, MD_E_NOMEM, "cpu kernels: out of memory");
  }
  c->base.ops = &cpu_ops;
  c->threads = threads;
  c->isa = isa;
  c->gemm_scratch = scratch;
  c->bf16_gemm = bf16_gemm;
  c->weights = weights;
  c->dense_logits = options && options->dense_logits;
  /* auto: ours where it measured faster than OpenBLAS's sgemm (cpu.h). */
  bool own_faster = isa == MD_CPU_ISA_AVX2 ||
                    (isa == MD_CPU_ISA_AVX512 && md_cpu_amd_zen5_or_later(&facts));
  c->own_gemm = gemm == MD_CPU_GEMM_OWN || (gemm == MD_CPU_GEMM_AUTO && own_faster);
  openblas_set_num_threads(c->threads);
  md_blas_library(c->blas_library, sizeof c->blas_library);
  *k = &c->base;
  return MD_OK;
}

const char *md_kernels_cpu_isa(const md_kernels *k) {
  const cpu_kernels *c = (const cpu_kernels *)k;
  return md_cpu_isa_name(c->isa);
}

bool md_kernels_cpu_bf16_gemm(const md_kernels *k) {
  return ((const cpu_kernels *)k)->bf16_gemm;
}

const char *md_kernels_cpu_gemm(const md_kernels *k) {
  return ((const cpu_kernels *)k)->own_gemm ? "own" : "blas";
}

static void cpu_facts(const md_kernels *k, md_kernel_facts *facts) {
  const cpu_kernels *c = (const cpu_kernels *)k;
  const char *core = md_blas_core_current();
  /* The BLAS only with both its version and its kernels known. */
  if (c->blas_library[0] && core && core[0]) {
    facts->blas_library = c->blas_library;
    facts->blas_core = core;
  }
  facts->cpu_kernels = md_kernels_cpu_isa(k);
  facts->prompt_products = c->bf16_gemm ? "bf16" : "fp32";
  facts->prompt_gemm = md_kernels_cpu_gemm(k);
}

/* "LABEL: VALUE", and " (ENV=SETTING)" when the environment variable that
 * chose it is set, then a newline; appended at text[*used]. */
static void describe_choice(char *text, size_t size, size_t *used, const char *label,
                            const char *value, const char *env) {
  const char *asked = getenv(env);
  int n = asked && *asked ? snprintf(text + *used, size - *used, "%s: %s (%s=%s)\n", label, value,
                                     env, asked)
                          : snprintf(text + *used, size - *used, "%s: %s\n", label, value);
  if (n > 0) *used = *used + (size_t)n < size ? *used + (size_t)n : size - 1;
}

/* The kernel path and threads, the CPU's vector features and identity, who
 * multiplies float32 prompts, where the 2-D weights are read. */
static void cpu_describe(const md_kernels *k, int threads, char *text, size_t size) {
  if (size == 0) return;
  md_cpu_facts facts = md_cpu_read_facts();
  char words[160];
  int n = threads > 0 ? snprintf(text, size, "cpu: %s kernels, %d thread%s\n", md_kernels_cpu_isa(k),
                                 threads, threads == 1 ? "" : "s")
                      : snprintf(text, size, "cpu: %s kernels, all cores\n", md_kernels_cpu_isa(k));
  size_t used = n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1;
  n = snprintf(text + used, size - used, "cpu features: %s\ncpu id: %s, family %d, model %d\n",
               md_cpu_facts_describe(&facts, words, sizeof words), md_cpu_vendor_name(facts.vendor),
               facts.family, facts.model);
  if (n > 0) used = used + (size_t)n < size ? used + (size_t)n : size - 1;
  describe_choice(text, size, &used, "prompt gemm", md_kernels_cpu_gemm(k), MD_DEVICE_ENV_CPU_GEMM);
  describe_choice(text, size, &used, "weights", md_kernels_cpu_weights(k), MD_DEVICE_ENV_CPU_WEIGHTS);
  /* What a BF16 checkpoint's prompts get by default (kernels/device.c). */
  bool bf16 = md_kernels_cpu_bf16_gemm(k) ||
              (md_cpu_bf16_gemm_preferred(&facts) && cpu((md_kernels *)k)->isa == MD_CPU_ISA_AVX512);
  n = snprintf(text + used, size - used, "products of a BF16 checkpoint (prompt and decode): %s (%s)\n",
               bf16 ? "bf16" : "fp32",
               bf16 ? "AVX-512 BF16, the default on this CPU; --exact-gemm for float32"
               : facts.avx512_bf16 ? "the default on this CPU; --bf16-gemm for AVX-512 BF16"
                                   : "this CPU has no AVX-512 BF16");
  if (n > 0) used = used + (size_t)n < size ? used + (size_t)n : size - 1;
}

/* The settings' names, each table in its enum's order. */
static const char *const weights_names[] = {"copy", "mapped"};
static const char *const gemm_names[] = {"auto", "own", "blas"};
#define NAMES_COUNT(names) ((int)(sizeof(names) / sizeof((names)[0])))

/* `name`'s index in names[0 .. count - 1], or -1. */
static int name_index(const char *name, const char *const *names, int count) {
  for (int i = 0; i < count; i++)
    if (!strcmp(name, names[i])) return i;
  return -1;
}

const char *md_kernels_cpu_weights(const md_kernels *k) {
  return weights_names[((const cpu_kernels *)k)->weights];
}

bool md_cpu_weights_parse(const char *name, md_cpu_weights *weights) {
  int i = name_index(name, weights_names, NAMES_COUNT(weights_names));
  if (i >= 0) *weights = (md_cpu_weights)i;
  return i >= 0;
}

bool md_cpu_gemm_parse(const char *name, md_cpu_gemm *gemm) {
  int i = name_index(name, gemm_names, NAMES_COUNT(gemm_names));
  if (i >= 0) *gemm = (md_cpu_gemm)i;
  return i >= 0;
}
