/* The CUDA back end instance, shared by backend.c (instance, memory,
 * reads, weights, element-wise ops) and compute.c (matrix products and
 * attention). Private to kernels/cuda. */
#ifndef MD_KERNELS_CUDA_BACKEND_H
#define MD_KERNELS_CUDA_BACKEND_H

#include <cublas_v2.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/cuda_internal.h"

struct md_kbuf {
  float *data;   /* device memory */
  size_t n;      /* floats */
  md_kbuf *owner; /* a view (buf_view): the buffer whose memory it shares; NULL: owns data */
};

/* A 2-D weight's device copy, shared by every md_kweight made from the same
 * host tensor (a tied LM head and its embedding). */
typedef struct md_cuda_upload {
  const void *host;
  size_t nbytes;
  md_dtype dtype;
  void *device;
  int refs;
  struct md_cuda_upload *next;
} md_cuda_upload;

struct md_kweight {
  md_dtype dtype;          /* F32 for 1-D weights (converted on upload) */
  int64_t rows, cols;      /* [rows, cols]; 1-D weights have rows = 1 */
  const void *data;        /* device memory */
  md_cuda_upload *upload;  /* 2-D: the shared copy; 1-D: NULL, data owned */
};

/* One overlapped read (buf_read_start .. buf_read_finish). */
typedef struct md_cuda_read_slot {
  float *staging;          /* pinned host memory */
  size_t staging_floats;
  float *dst;
  size_t n;
  const md_kbuf *buf;
  bool pending;            /* started, not finished */
  bool guarded;            /* the compute stream already waits for the copy */
  cudaEvent_t ready;       /* compute stream: the buffer holds the values */
  cudaEvent_t done;        /* copy stream: the copy is complete */
} md_cuda_read_slot;

/* Device scratch that grows on demand (never shrinks). */
typedef struct md_cuda_scratch {
  void *ptr;
  size_t bytes;
} md_cuda_scratch;

/* ---- recorded decode steps (graph.c) ----------------------------------------- */

/* One operation of a decode step, logged between step_begin and step_end
 * with the arguments needed to run it (positions and the token id are the
 * step's). Entries are memset to zero before they are filled, so that two
 * logs compare with memcmp. */
typedef enum md_cuda_op_kind {
  MD_CUDA_OP_EMBED = 1,
  MD_CUDA_OP_RMSNORM,
  MD_CUDA_OP_MATMUL,
  MD_CUDA_OP_ROPE,
  MD_CUDA_OP_KV_STORE,
  MD_CUDA_OP_ATTENTION,
  MD_CUDA_OP_SWIGLU,
  MD_CUDA_OP_ADD,
  MD_CUDA_OP_LOGITS,
  MD_CUDA_OP_ZERO,
} md_cuda_op_kind;

typedef struct md_cuda_op {
  md_cuda_op_kind kind;
  md_kbuf *out, *out2;           /* the buffers the operation writes */
  const md_kbuf *in, *in2;       /* and reads */
  const md_kweight *w, *w2;
  int64_t n, row;
  int ints[3];                   /* rope: heads, kv heads, head_dim */
  float eps;
  double theta;
  size_t count, offset;
  md_attn_shape shape;
  md_attn_capture capture;       /* received NULL: none */
  md_attn_hook hook;             /* on_row NULL: none (a hooked step is not recorded) */
  const int32_t *tokens;         /* embed: the caller's (valid until step_end) */
} md_cuda_op;

#define MD_CUDA_GRAPH_CACHE 4

/* A recorded step: its log and the instantiated CUDA graph. */
typedef struct md_cuda_graph {
  md_cuda_op *ops;
  size_t n_ops;
  cudaGraphExec_t exec;
  uint64_t last_use;
  uint64_t kernels;  /* launched while it was recorded */
} md_cuda_graph;

/* What a replay reads at its start (pinned host memory). */
typedef struct md_cuda_step_params {
  int64_t pos;   /* then slot: copied to step_pos_dev[0..1] together */
  int64_t slot;
  int32_t token;
} md_cuda_step_params;

typedef struct md_cuda_kernels {
  md_kernels base;
  md_cuda_ctx ctx;
  cudaStream_t copy_stream;
  cublasHandle_t blas;
  md_cuda_gemm gemm;
  char description[256];
  md_cuda_upload *uploads;
  md_cuda_read_slot slots[MD_KERNELS_READ_SLOTS];
  md_cuda_scratch half_act;   /* prefill activations rounded to BF16/F16 */
  md_cuda_scratch f32_tiles;  /* EXACT prefill: weight tiles converted to f32 */
  md_cuda_scratch attn;       /* attention: scores, partial sums, row statistics */
  md_cuda_scratch hook_rows;  /* attention rows for the hook */
  md_cuda_scratch tokens;     /* embed: token ids */
  md_cuda_scratch compact;    /* kv_compact: the kept slots' rows */
  md_cuda_scratch compact_rows; /* kv_compact: their indices */
  md_cuda_scratch norm_rows;  /* logits_rows: the final norm of each row */
  float *hook_host;           /* host copy of hook rows */
  size_t hook_host_floats;
  int32_t *tokens_pinned;     /* embed: staging of the token ids */
  size_t tokens_pinned_n;
  cudaEvent_t tokens_copied;  /* the staging may be rewritten after it */
  float *inv_freq;            /* RoPE inverse frequencies (device), for: */
  int inv_freq_dim;
  double inv_freq_theta;
  int *overflow;              /* device flag: F16 activations overflowed */
  bool overflow_armed;        /* an F16 conversion ran since the last check */
  int64_t *argmax_index;      /* device */
  md_cuda_argmax_scratch argmax_blocks; /* device: the blocks' winners */
  int64_t *argmax_host;       /* pinned */
  md_cuda_scratch greedy;     /* greedy_rows: each row's token (device) */
  int64_t *greedy_host;       /* pinned copy of them */
  size_t greedy_host_n;
  /* recorded decode steps (graph.c) */
  bool graphs;                /* record and replay decode steps */
  bool logging;               /* between step_begin and step_end: ops are logged */
  bool replayable;            /* the logged step may be recorded */
  bool capturing;             /* a logged step runs under stream capture */
  md_cuda_op *log;
  size_t log_n, log_capacity;
  int64_t step_pos;           /* the step's token position (RoPE) */
  int64_t step_slot;          /* and its cache slot (kv_store, attention) */
  int32_t step_token;         /* the step's token id (-1: none logged) */
  const int32_t *step_tokens; /* the caller's ids, for running the log as it is */
  md_cuda_graph graph_cache[MD_CUDA_GRAPH_CACHE];
  uint64_t graph_clock;
  md_cuda_step_params *step_params; /* pinned */
  int64_t *step_pos_dev;      /* device copy of step_params->pos and ->slot in a replay */
  cudaEvent_t graph_done;     /* the last replay is complete */
  uint64_t step_kernels;      /* kernels in the last replayed graph */
} md_cuda_kernels;

static inline md_cuda_kernels *md_cuda_of(md_kernels *k) { return (md_cuda_kernels *)k; }

/* Starts an operation: false (do nothing) while a failure is pending. */
bool md_cuda_enter(md_cuda_kernels *c);

/* Makes the compute stream wait for pending reads of buf before work that
 * writes it is queued. */
void md_cuda_guard_write(md_cuda_kernels *c, const md_kbuf *buf);

/* At least `bytes` of scratch s (grown after the queued work is done);
 * NULL with a recorded failure when it cannot be allocated. */
void *md_cuda_scratch_get(md_cuda_kernels *c, md_cuda_scratch *s, size_t bytes, const char *what);

/* RoPE inverse frequencies for (head_dim, theta), device memory; NULL
 * with a recorded failure. */
const float *md_cuda_rope_table(md_cuda_kernels *c, int head_dim, double theta);

/* Checks a buffer holds at least `floats` floats (recorded failure if not). */
bool md_cuda_fits(md_cuda_kernels *c, const char *op, const char *name, const md_kbuf *buf,
                  size_t floats);

/* graph.c: step_begin / step_end, the log, and resources */
void md_cuda_step_begin(md_kernels *k, int64_t pos, int64_t slot);
/* In a recorded step, the device copies of the step's position and slot. */
static inline const int64_t *md_cuda_step_pos_dev(const md_cuda_kernels *c) { return c->step_pos_dev; }
static inline const int64_t *md_cuda_step_slot_dev(const md_cuda_kernels *c) { return c->step_pos_dev + 1; }
void md_cuda_step_end(md_kernels *k);
/* When logging, appends op (zeroed with md_cuda_op_init, then filled:
 * MD_CUDA_LOG_OR_RUN) and returns true: the operation must not run now. */
bool md_cuda_log(md_cuda_kernels *c, const md_cuda_op *op);
/* A zeroed op of this kind, to fill and log. */
static inline void md_cuda_op_init(md_cuda_op *op, md_cuda_op_kind kind) {
  memset(op, 0, sizeof *op);
  op->kind = kind;
}
/* At the start of every operation a step logs (all but kv_compact):
 * between step_begin and step_end, declares md_cuda_op `op` zeroed with
 * md_cuda_op_init(&op, kind), runs the statements that follow (they fill
 * op's fields from the operation's arguments), logs it with md_cuda_log
 * and returns from the calling operation. Outside a step it does nothing
 * and the operation runs. */
#define MD_CUDA_LOG_OR_RUN(c, op, kind, ...)                                    \
  do {                                                                          \
    if ((c)->logging) {                                                         \
      md_cuda_op op;                                                            \
      md_cuda_op_init(&op, (kind));                                             \
      __VA_ARGS__;                                                              \
      if (md_cuda_log((c), &op)) return;                                        \
    }                                                                           \
  } while (0)
void md_cuda_graphs_free(md_cuda_kernels *c);
/* Drops every recorded step: a graph holds the device addresses of the
 * scratch and tables it ran with, so when one of them moves (it grew) the
 * recordings are stale. */
void md_cuda_graphs_forget(md_cuda_kernels *c);
/* Drops the recorded steps that name buf or w (either may be NULL), which
 * are being freed: steps are found by comparing logs, which name buffers
 * and weights by their host addresses, so a buffer or weight allocated
 * later at the same address would replay a recording that reads and
 * writes the freed one's device memory. */
void md_cuda_graphs_forget_uses(md_cuda_kernels *c, const md_kbuf *buf, const md_kweight *w);
/* Runs a step's logged operations now (no recording): what buffer reads
 * and writes, synchronisation and memory management do when called inside
 * a step, so that they see the operations queued before them. */
void md_cuda_flush_log(md_cuda_kernels *c);

/* fuse.c: how many of the logged operations ops[i..] of the step at
 * c->step_pos and c->step_slot one fused launch sequence runs (having run
 * them), or 0 when ops[i] starts no fusion. */
size_t md_cuda_fuse(md_cuda_kernels *c, const md_cuda_op *ops, size_t n_ops, size_t i);

/* compute.c */
/* rope, kv_store and attention of one decode step in two launches (RoPE
 * and the store inside attention; md_cuda_decode_rope). */
void md_cuda_fused_attention(md_cuda_kernels *c, const md_cuda_op *rope, const md_cuda_op *store,
                             const md_cuda_op *attn, int64_t pos, int64_t slot);
/* count one-row matmuls of one input in one launch, after the rmsnorm
 * that produces their input (norm, or NULL), with the epilogue that
 * stands for `tail` (an add or a swiglu, or NULL). */
void md_cuda_fused_gemv(md_cuda_kernels *c, const md_cuda_op *norm, const md_cuda_op *const *products,
                        int count, md_cuda_gemv_epilogue epilogue, const md_cuda_op *tail);
/* Bytes of decode scratch for max_keys keys. */
size_t md_cuda_decode_scratch_bytes(int n_heads, int head_dim, int64_t max_keys);
void md_cuda_op_matmul(md_kernels *k, md_kbuf *y, const md_kbuf *x, const md_kweight *w,
                       const md_kweight *bias, int64_t n);
/* matmul_rows and logits_rows (kernels.h): the batched decode products. */
void md_cuda_op_matmul_rows(md_kernels *k, md_kbuf *const *ys, const md_kbuf *x,
                            const md_kweight *const *ws, const md_kweight *const *biases, int count,
                            int64_t n);
void md_cuda_op_logits_rows(md_kernels *k, md_kbuf *logits, const md_kbuf *x, int64_t n,
                            const md_kweight *norm, const md_kweight *lm_head, float eps);
void md_cuda_op_attention(md_kernels *k, md_kbuf *out, const md_kbuf *q, const md_kbuf *cache,
                          const md_attn_shape *shape, int64_t pos0, int64_t n,
                          const md_attn_hook *hook, const md_attn_capture *capture);

#endif
