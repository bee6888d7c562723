/* The options of the collect stage that `collect` and `run` share (--device,
 * --threads, --layers, --heads, --page-size, --max-steps, --max-episodes,
 * --shard, --batch, --exact-gemm, --bf16-gemm, --gguf-f32, --no-cuda-graphs), with one parser so that both
 * validate them alike. */
#ifndef MD_CALIB_COLLECT_OPTIONS_H
#define MD_CALIB_COLLECT_OPTIONS_H

#include "calib/options.h"
#include "collector/capture/collect.h"

enum {
  MD_COLLECT_OPT_DEVICE,
  MD_COLLECT_OPT_THREADS,
  MD_COLLECT_OPT_LAYERS,
  MD_COLLECT_OPT_HEADS,
  MD_COLLECT_OPT_PAGE_SIZE,
  MD_COLLECT_OPT_MAX_STEPS,
  MD_COLLECT_OPT_MAX_EPISODES,
  MD_COLLECT_OPT_SHARD,
  MD_COLLECT_OPT_EXACT_GEMM,
  MD_COLLECT_OPT_BF16_GEMM,
  MD_COLLECT_OPT_GGUF_F32,
  MD_COLLECT_OPT_CUDA_GRAPHS,
  MD_COLLECT_OPT_NO_CUDA_GRAPHS,
  MD_COLLECT_OPT_BATCH,
};

/* The table of these options (calib/options.h), ids MD_COLLECT_OPT_*. */
extern const md_opt md_collect_option_table[];

/* Applies `opt`, an entry of md_collect_option_table, with `value` to
 * `options`. Returns -1 when applied, or the exit code after printing a usage
 * error (messages start with "memdecay-calibrate COMMAND:"). */
int md_collect_option(const char *command, const md_opt *opt, const char *value,
                      md_collect_options *options);

#endif
