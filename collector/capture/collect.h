/* The collector: runs a Qwen2 checkpoint over region-labelled agent traces
 * and records, at every decode step, the attention each token receives
 * (what is captured: memdecay-calibrate(1), COLLECT). The output is a run
 * directory, described file by file in memdecay-run(5):
 *
 *   RUN_DIR/run.json             identity, settings, complete episodes
 *   RUN_DIR/manifest.csv         one row per token (region, page, birth, ...)
 *   RUN_DIR/attn/<episode>.npy   float32 [S, P + S]: row t = the attention
 *                                the query of decode step t put on each token
 *                                (mean over the captured layers of the mean or
 *                                max over heads), exactly 0 for tokens not yet
 *                                born
 *   RUN_DIR/prefill/<episode>.npy float32 [P]: attention each prompt token
 *                                received from the prompt's own queries
 *
 * How it runs. First every episode is read, validated, rendered and
 * tokenised, and its positions checked against max_position_embeddings, so
 * that bad input fails before any model work (or, with skip_invalid, is
 * reported through on_warning and listed in run.json's "skipped"). Then per
 * episode: the prompt is prefilled with the fused capture on (-> prefill
 * row), then each decode step feeds one token (the teacher-forced
 * continuation, or the greedy choice) with the capture on and its row is
 * read back while the next step runs (two capture buffers, two read slots:
 * on a GPU the copy overlaps the next step; on the CPU it is a plain copy)
 * and appended to attn/<episode>.npy, a temporary file renamed into place
 * when the episode ends. Then the episode's manifest rows are appended and
 * fsynced, and only then is run.json rewritten (atomically) with the
 * episode listed: an episode is complete exactly when run.json lists it.
 *
 * Resume. With `resume`, an existing run directory is continued: its
 * run.json must have been made with the same model (config.json hash),
 * tokenizer, traces, captured layers, head aggregation, page size and step
 * limits; manifest.csv is cut back to the length run.json records, leftover
 * temporary files are removed, listed episodes are kept and every other
 * episode is (re)computed. A resumed run's files are byte-identical to an
 * uninterrupted run's on the same device and thread count.
 *
 * Shards. With `shard` set (collector/capture/shard.h), the whole collection is
 * planned as without it, and then only shard K's contiguous block of the
 * plan is collected; run.json records the shard and the plan it belongs to
 * (its episode and token counts and a digest of it), so that `extract` can
 * tell the shards of one calibration apart from unrelated runs and find a
 * missing or repeated one. A shard with no episode is a complete, empty
 * run. A resume must be of the same shard of the same plan.
 *
 * The library never prints: progress and warnings go to the callbacks. */
#ifndef MD_COLLECTOR_CAPTURE_COLLECT_H
#define MD_COLLECTOR_CAPTURE_COLLECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/capture/shard.h"
#include "base/error.h"
#include "kernels/kernels.h"

/* What has just happened when the progress callback is called. */
typedef enum md_collect_event {
  MD_COLLECT_START,          /* inputs checked and planned; totals known */
  MD_COLLECT_EPISODE_BEGIN,  /* an episode is about to be prefilled */
  MD_COLLECT_PREFILL,        /* its prompt is done (prefill/<id>.npy written) */
  MD_COLLECT_STEP,           /* one decode step is done */
  MD_COLLECT_EPISODE_FILES,  /* attn/<id>.npy renamed into place */
  MD_COLLECT_EPISODE_ROWS,   /* its manifest rows appended and fsynced */
  MD_COLLECT_EPISODE_DONE,   /* run.json lists it */
  MD_COLLECT_FINISH,         /* every episode done */
} md_collect_event;

typedef struct md_collect_progress {
  md_collect_event event;
  const char *episode_id;      /* the current episode; NULL for START and FINISH */
  size_t episodes_done;        /* complete, including those found complete on resume */
  size_t episodes_total;       /* to collect in the whole run (skipped ones excluded) */
  size_t episodes_resumed;     /* complete before this invocation started */
  size_t shard_index, shard_count; /* the shard collected; count 0 = not sharded */
  size_t plan_episodes;        /* of the whole collection (= episodes_total unsharded) */
  int64_t step, steps;         /* the current episode's decode steps done / in its window */
  /* Work of this invocation (resumed episodes excluded): */
  uint64_t prompt_tokens_done, prompt_tokens_total;
  uint64_t decode_steps_done, decode_steps_total;
  double prefill_seconds, decode_seconds; /* time spent in each so far */
  double elapsed_seconds;      /* since md_collect was called */
} md_collect_progress;

/* collect --batch's default on a back end with batched products (kernels.h,
 * matmul_rows): a decode step of a real model reads its weights once for 8
 * episodes, where the KV caches of 8 episodes of a few thousand positions
 * still fit the memory of a laptop (0.5B: 24 KiB per position each). */
#define MD_COLLECT_DEFAULT_BATCH 8
/* The most episodes collected together. */
#define MD_COLLECT_MAX_BATCH 256

typedef void (*md_collect_progress_fn)(void *context, const md_collect_progress *progress);
typedef void (*md_collect_warning_fn)(void *context, const char *message);

typedef struct md_collect_options {
  const char *model_dir;       /* Hugging Face checkpoint: config.json, safetensors, tokenizer.json */
  const char *traces_path;     /* memdecay-traces(5) */
  const char *out_dir;         /* the run directory (created; its parent must exist) */
  const char *device;          /* "cpu" (NULL), "cuda", "cuda:N" */
  int threads;                 /* CPU threads; 0 = all cores */
  bool exact_gemm;             /* CUDA: prompt products in fp32 (md_device_options) */
  bool bf16_gemm;              /* CPU: BF16 products by AVX-512 BF16 (same) */
  bool gguf_f32;               /* a GGUF model's matrices expanded to float32, not bfloat16 */
  bool no_cuda_graphs;         /* CUDA: decode steps launched kernel by kernel, not as graphs */
  int layer_begin, layer_end;  /* captured layers [begin, end); end -1 = the last layer + 1 */
  md_capture_heads heads;      /* mean or max over heads (decode rows) */
  int page_size;               /* KV-cache page of a position = pos / page_size; 0 = 16 */
  size_t max_steps;            /* cap on every decode window; 0 = none */
  size_t max_episodes;         /* collect only the first N valid episodes; 0 = all */
  bool resume;                 /* continue an existing run directory */
  bool skip_invalid;           /* skip (and report) invalid or over-long episodes */
  bool reproducible;           /* no "created" timestamp in run.json */
  md_shard shard;              /* collect only shard K of N; count 0 = the whole plan */
  size_t batch;                /* episodes collected together, one decode step for all
                                  (md_qwen2_step); 0 = MD_COLLECT_DEFAULT_BATCH where the
                                  back end multiplies batched rows (the CPU's and
                                  CUDA's), else 1.
                                  The run directory's bytes do not depend on it. */
  md_collect_progress_fn progress; /* may be NULL */
  md_collect_warning_fn on_warning; /* skipped episodes, checkpoint notes; may be NULL */
  void *context;               /* passed to both callbacks */
} md_collect_options;

typedef struct md_collect_summary {
  size_t episodes_in_file;     /* valid episodes in the trace file */
  size_t episodes_total;       /* to collect (after skips, max_episodes and sharding) */
  size_t plan_episodes;        /* the whole plan's, of which a shard collects a part */
  size_t episodes_resumed;     /* found complete */
  size_t episodes_collected;   /* by this invocation */
  size_t episodes_skipped;
  uint64_t prompt_tokens, decode_steps; /* this invocation's */
  double prefill_seconds, decode_seconds, seconds;
  char device[32];             /* the device used, e.g. "cpu" */
  int threads;
  bool started;                /* the work began: a failure before it changed nothing */
} md_collect_summary;

/* Defaults: cpu, all cores, all layers, mean over heads, page size 16, no
 * caps, strict, not resuming. */
void md_collect_options_init(md_collect_options *options);

/* Runs the collection. Errors name the file, line and episode (trace
 * problems), the file and tensor (checkpoint problems) or the run directory
 * (an existing run without `resume`, a resume with other inputs or
 * settings). Errors before the work starts are of kind MD_KIND_INPUT (but
 * for running out of memory); later ones are the run's (MD_KIND_IO,
 * MD_KIND_RESOURCE, MD_KIND_DEVICE: what was complete stays complete;
 * resume it). summary may be NULL. */
md_status md_collect(const md_collect_options *options, md_collect_summary *summary, md_error *err);

#endif
