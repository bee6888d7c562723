/* Internals of the CUDA back end, shared by its C file (backend.c: the ops
 * table, memory, streams, cuBLAS) and its CUDA files (the kernels and their
 * launchers), and by the GPU check programs in tests/gpu. Not part of the
 * collector's interface. C and C++ (nvcc) compatible.
 *
 * Every launcher checks its launch configuration, launches on ctx->stream
 * and checks the launch; failures are recorded in ctx (the first one wins)
 * and every later launch is skipped until the back end reports it. */
#ifndef MD_KERNELS_CUDA_INTERNAL_H
#define MD_KERNELS_CUDA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "base/error.h"
#include "base/tensor.h"

/* The attention kernels hold up to this many floats of a head. */
#define MD_CUDA_MAX_HEAD_DIM 256

typedef struct md_cuda_ctx {
  cudaStream_t stream;        /* the compute stream: every kernel, in order */
  int device;
  bool sync_each_launch;      /* synchronise after each launch (diagnostics) */
  size_t max_smem_optin;      /* shared memory a block may opt in to (bytes) */
  bool pdl;                   /* programmatic launches of the decode GEMVs (Hopper+) */
  int sms;                    /* streaming multiprocessors (grid sizes) */
  bool gemv_rows;             /* decode products a warp a row (gemv.cu; MD_CUDA_GEMV=rows) */
  uint64_t launches;          /* kernels launched */
  md_status status;           /* first failure since the last report, MD_OK if none */
  md_error error;             /* its message */
  const char *last_kernel;    /* the last kernel launched, for asynchronous faults */
  const char *last_site;      /* where it was launched */
} md_cuda_ctx;

/* "file:line" of the caller, for messages. */
#define MD_CUDA_STR2(x) #x
#define MD_CUDA_STR(x) MD_CUDA_STR2(x)
#define MD_CUDA_SITE __FILE__ ":" MD_CUDA_STR(__LINE__)

/* The project-relative part of a site: "../kernels/cuda/gemv.cu:12" ->
 * "kernels/cuda/gemv.cu:12". */
const char *md_cuda_short_site(const char *site);

/* Records a failed CUDA runtime call (code != cudaSuccess) as
 * "cuda: CALL failed at SITE: <error text> (<error name>)"; returns whether
 * the call succeeded. */
bool md_cuda_check(md_cuda_ctx *ctx, cudaError_t code, const char *call, const char *site);
#define MD_CUDA_CHECK(ctx, call) md_cuda_check((ctx), (call), #call, MD_CUDA_SITE)

/* Records a failure of our own (bad arguments to an operation). */
void md_cuda_fail(md_cuda_ctx *ctx, md_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Before a launch: false (and nothing launched) when an earlier failure is
 * pending or the configuration exceeds the device's limits (recorded). */
bool md_cuda_launch_begin(md_cuda_ctx *ctx, const char *kernel, unsigned grid_x, unsigned grid_y,
                          unsigned grid_z, unsigned block, size_t smem, const char *site);
/* After a launch: checks cudaGetLastError, and with sync_each_launch
 * synchronises so that a fault names this kernel. */
void md_cuda_launch_end(md_cuda_ctx *ctx, const char *kernel, const char *site);

/* ---- elementwise.cu ------------------------------------------------------- */

/* x[i, :] = table[tokens[i], :] as f32; tokens is device memory. */
void md_cuda_embed(md_cuda_ctx *ctx, float *x, const void *table, md_dtype dtype,
                   const int32_t *tokens, int64_t n, int64_t dim);
/* out[i, :] = x[i, :] / sqrt(mean(x[i, :]^2) + eps) * weight (out may be x). */
void md_cuda_rmsnorm(md_cuda_ctx *ctx, float *out, const float *x, const float *weight, int64_t n,
                     int64_t dim, float eps);
/* NeoX RoPE in place on q [n, n_heads*hd] and k [n, n_kv*hd] at positions
 * pos0.., with inv_freq [hd/2] (device) computed by the host as the CPU
 * back end does. When pos_dev is not NULL, pos0 is read from it (device
 * memory): a recorded decode step replays at a new position. */
void md_cuda_rope(md_cuda_ctx *ctx, float *q, float *k, const float *inv_freq, int64_t n,
                  int n_heads, int n_kv_heads, int head_dim, int64_t pos0, const int64_t *pos_dev);
/* Keys and values [n, n_kv*hd] into the cache [2][n_kv][capacity][hd]
 * (pos_dev as for rope). */
void md_cuda_kv_store(md_cuda_ctx *ctx, float *cache, const float *key, const float *value,
                      int n_kv_heads, int head_dim, int64_t capacity, int64_t pos0,
                      const int64_t *pos_dev, int64_t n);
/* For planes p < `planes` of head_dim-float rows: dst row j of plane p =
 * src row rows[j] (device memory; NULL: row j) of plane p, j < n; planes
 * hold dst_rows and src_rows rows. dst and src must not overlap. */
void md_cuda_rows_gather(md_cuda_ctx *ctx, float *dst, int64_t dst_rows, const float *src,
                         int64_t src_rows, const int64_t *rows, int64_t n, int planes,
                         int head_dim);
/* gate = silu(gate) * up. */
void md_cuda_swiglu(md_cuda_ctx *ctx, float *gate, const float *up, size_t count);
/* x += y. */
void md_cuda_add(md_cuda_ctx *ctx, float *x, const float *y, size_t count);
/* y[i, :] = row for i < n: the bias a GEMM then accumulates onto. */
void md_cuda_fill_rows(md_cuda_ctx *ctx, float *y, const float *row, int64_t n, int64_t cols);
/* dst = src rounded to nearest-even BF16 or F16 (dtype); for F16, *overflow
 * (device memory) is set to 1 when some |src| exceeds the F16 range or is
 * not finite. */
void md_cuda_to_half(md_cuda_ctx *ctx, uint16_t *dst, const float *src, size_t count,
                     md_dtype dtype, int *overflow);
/* dst[(r - r0) * cols + c] = W[r, c] as f32, r in [r0, r1). */
void md_cuda_rows_to_f32(md_cuda_ctx *ctx, float *dst, const void *w, md_dtype dtype, int64_t cols,
                         int64_t r0, int64_t r1);
/* Blocks of the multi-block argmax at most, and their scratch (device
 * memory; `done` zero between launches, which leave it so). */
#define MD_CUDA_ARGMAX_BLOCKS 64
typedef struct md_cuda_argmax_scratch {
  float *block_value;    /* [MD_CUDA_ARGMAX_BLOCKS] */
  int64_t *block_index;  /* [MD_CUDA_ARGMAX_BLOCKS] */
  unsigned *done;        /* blocks finished */
} md_cuda_argmax_scratch;
/* *index (device memory) = the first index of the largest of v[0 .. n-1]. */
void md_cuda_argmax(md_cuda_ctx *ctx, const float *v, int64_t n, int64_t *index,
                    const md_cuda_argmax_scratch *s);
/* index[r] (device memory) = the first index of the largest of row r of
 * v [rows, cols], r < rows: argmax's choice for each row, one launch. */
void md_cuda_argmax_rows(md_cuda_ctx *ctx, const float *v, int64_t rows, int64_t cols,
                         int64_t *index);

/* ---- gemv.cu -------------------------------------------------------------- */

/* y[r] = W[r, :] . x (+ bias[r]) for r < rows: the decode product. */
void md_cuda_gemv(md_cuda_ctx *ctx, float *y, const void *w, md_dtype dtype, int64_t rows,
                  int64_t cols, const float *x, const float *bias);

typedef enum md_cuda_gemv_epilogue {
  MD_CUDA_GEMV_PLAIN = 0,    /* y[m] = W[m] x + b[m] */
  MD_CUDA_GEMV_RESIDUAL = 1, /* and residual += y[0] (count 1) */
  MD_CUDA_GEMV_SWIGLU = 2,   /* count 2, equal rows: y[1] = up, y[0] = silu(gate) * up */
} md_cuda_gemv_epilogue;

/* The decode step's products in one launch: y[m] = W[m] x' + bias[m] for
 * the count (1 to 3) matrices of one dtype and `cols` columns, where x' is
 * x, or with norm_weight its RMSNorm (rmsnorm's bits; written to norm_out
 * too when not NULL), then the epilogue. */
typedef struct md_cuda_gemv_args {
  int count;
  const void *w[3];          /* device memory, [rows[m], cols] in `dtype` */
  int64_t rows[3];
  const float *bias[3];      /* NULL: none */
  float *y[3];
  md_dtype dtype;
  int64_t cols;
  const float *x;            /* [cols] */
  const float *norm_weight;  /* [cols] or NULL: no norm */
  float eps;
  float *norm_out;           /* [cols] or NULL */
  md_cuda_gemv_epilogue epilogue;
  float *residual;           /* MD_CUDA_GEMV_RESIDUAL: [rows[0]] */
  int64_t total_rows;        /* set by the launcher */
  bool prefetch;             /* set by the launcher: a PDL launch */
} md_cuda_gemv_args;
void md_cuda_gemv_fused(md_cuda_ctx *ctx, const md_cuda_gemv_args *args);
/* The products of args for n rows of x (row b at x + b * cols, its results
 * at y[m] + b * rows[m]), W read once per 8 rows; row b gets the bits
 * md_cuda_gemv_fused gives it alone. No norm, no epilogue. */
void md_cuda_gemv_batch(md_cuda_ctx *ctx, const md_cuda_gemv_args *args, int64_t n);
/* Raises the GEMV kernels' shared-memory limit (the normalised input). */
void md_cuda_gemv_init(md_cuda_ctx *ctx);

/* ---- attention.cu --------------------------------------------------------- */

typedef struct md_cuda_attn_args {
  float *out;          /* [n, n_heads * hd] */
  const float *q;      /* [n, n_heads * hd] */
  const float *cache;  /* one layer: [2][n_kv][capacity][hd] */
  int n_heads, n_kv_heads, head_dim;
  int64_t capacity;
  int64_t pos0, n;     /* query positions pos0 .. pos0 + n - 1 */
  const int64_t *pos_dev; /* decode: when not NULL, pos0 is read from it (device
                             memory), for a recorded step replayed at a new position */
  float scale;         /* 1 / sqrt(head_dim) as float */
} md_cuda_attn_args;

/* Decode scratch, for n_keys = pos0 + 1 visible keys. */
typedef struct md_cuda_decode_scratch {
  float *scores;   /* [n_heads][n_keys]: scaled scores; softmax weights with write_rows */
  float *part_max; /* [chunks][n_heads] per chunk: max score */
  float *part_sum; /* [chunks][n_heads]: sum of exp(score - chunk max) */
  float *part_out; /* [chunks][n_heads][hd]: sum of exp(score - chunk max) * value */
} md_cuda_decode_scratch;

/* RoPE and the KV store fused into decode attention (inv_freq NULL: not):
 * the queries in a->q and the key are rotated at position pos (or *pos_dev)
 * and written back, and the key and value stored in the cache at the
 * step's slot (a->pos0 or *a->pos_dev): what rope then kv_store do. */
typedef struct md_cuda_decode_rope {
  const float *inv_freq;  /* [head_dim / 2] */
  float *key;             /* [n_kv_heads * head_dim] */
  const float *value;     /* [n_kv_heads * head_dim] */
  int64_t pos;            /* the token's position (RoPE) */
  const int64_t *pos_dev; /* when not NULL, pos is read from it */
} md_cuda_decode_rope;

/* The softmax weights of a decode step: over the scores (write_rows, the
 * hook's rows) and/or received[k] += weight * (mean or max over heads). */
typedef struct md_cuda_decode_weights {
  bool write_rows;
  float *received;
  float weight;
  bool heads_max;
} md_cuda_decode_weights;

/* Chunks of the cache a decode step splits the keys into. */
int64_t md_cuda_decode_chunks(int64_t n_keys);

/* Raises the shared-memory limit of the attention kernels to what the
 * device allows (needed for head_dim > 128 and large GQA groups). */
void md_cuda_attention_init(md_cuda_ctx *ctx);

/* Decode (n = 1), two launches: a->out and the scores, with RoPE and the KV
 * store fused when rope is not NULL, and the weights when weights is not
 * NULL. The grids cover max_keys keys (pos0 + 1, or the capacity when the
 * slot is read from a->pos_dev); blocks beyond the visible keys do
 * nothing. The scratch holds max_keys keys. */
void md_cuda_attn_decode(md_cuda_ctx *ctx, const md_cuda_attn_args *a,
                         const md_cuda_decode_scratch *s, int64_t max_keys,
                         const md_cuda_decode_rope *rope, const md_cuda_decode_weights *weights);

/* Prefill (n >= 1): a->out, and each query row's softmax max and sum
 * (row_max, row_sum: [n][n_heads]). */
void md_cuda_attn_prefill(md_cuda_ctx *ctx, const md_cuda_attn_args *a, float *row_max,
                          float *row_sum);
/* After md_cuda_attn_prefill: colsum[h][k] = sum over the batch's query
 * rows of head h's weight on key k (k < pos0 + n), then received[k] +=
 * weight_per_head * sum over h of colsum[h][k]. */
void md_cuda_attn_prefill_colsum(md_cuda_ctx *ctx, const md_cuda_attn_args *a,
                                 const float *row_max, const float *row_sum, float *colsum,
                                 float *received, float weight_per_head);
/* After md_cuda_attn_prefill: the softmax rows of query rows i0 .. i0 +
 * rows - 1 for every head, dst [rows][n_heads][pos0 + n] (zeros beyond
 * each row's visible keys): the attention hook's data. */
void md_cuda_attn_prefill_rows(md_cuda_ctx *ctx, const md_cuda_attn_args *a,
                               const float *row_max, const float *row_sum, int64_t i0,
                               int64_t rows, float *dst);

#ifdef __cplusplus
}
#endif

#endif
