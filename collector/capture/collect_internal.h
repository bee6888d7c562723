/* Shared between collector/capture/collect.c (the episode loop) and
 * collector/capture/collect_setup.c (inputs, plan, run directory). Not public. */
#ifndef MD_COLLECTOR_CAPTURE_COLLECT_INTERNAL_H
#define MD_COLLECTOR_CAPTURE_COLLECT_INTERNAL_H

#include "collector/capture/collect.h"
#include "collector/tokenizer/episode_tokens.h"
#include "collector/model/qwen2_forward.h"
#include "collector/model/qwen2_model.h"
#include "collector/tokenizer/tokenizer.h"
#include "io/files/dir_lock.h"
#include "base/digest.h"
#include "io/formats/run_writer.h"

/* An episode the run will collect, in trace order. */
typedef struct planned_episode {
  char *id;
  size_t prompt_tokens, decode_steps;
} planned_episode;

typedef struct collect_run {
  const md_collect_options *options;
  double started;
  /* inputs */
  md_kernels *kernels;
  md_qwen2_model *model;
  const md_qwen2_config *config;
  md_tokenizer *tokenizer;
  char *tokenizer_path;
  char device_name[32];
  int threads;
  int layer_begin, layer_end;
  size_t page_size;
  md_episode_tokens_options tokens_options;
  char traces_sha256[MD_SHA256_HEX], tokenizer_sha256[MD_SHA256_HEX];
  /* the plan */
  planned_episode *planned;
  size_t n_planned, planned_capacity;
  size_t episodes_in_file, n_skipped;
  size_t max_positions;        /* largest P + S planned: the KV cache's capacity */
  /* the whole plan, when this run is one shard of it (collector/capture/shard.h) */
  size_t plan_episodes;
  uint64_t plan_tokens;
  char plan_sha256[MD_SHA256_HEX];
  /* outputs */
  const char *out_dir;
  char *run_json, *manifest_path;
  md_run_record *record;
  md_manifest *manifest;
  md_dir_lock lock;            /* held on out_dir while the run writes it */
  /* the model run */
  md_qwen2_forward *forward;
  md_kbuf *capture[2];         /* [max_positions] each: two, so a step's row can be
                                  read back while the next step accumulates */
  float *rows[2];              /* host copies of the rows, [max_positions] each */
  /* episodes collected together (options.batch resolved); with more than
   * one, a sequence, a capture buffer and a host row for each */
  size_t batch;
  md_qwen2_seq **seqs;
  md_kbuf **batch_capture;
  float **batch_rows;
  md_collect_progress progress;
  size_t collected;
} collect_run;

void md_collect_run_init(collect_run *run, const md_collect_options *options);
void md_collect_run_free(collect_run *run);

/* Opens the device, the checkpoint and its tokenizer, plans the episodes,
 * prepares the run directory (new, or resumed) and the forward pass. */
md_status md_collect_setup(collect_run *run, md_error *err);

/* Installs the capture into `received` over the run's layers and heads. */
md_status md_collect_set_capture(collect_run *run, md_kbuf *received, md_error *err);

/* fsyncs attn/ and prefill/, so the renames of an episode's files are on
 * disk before run.json lists it. */
md_status md_collect_sync_dirs(collect_run *run, md_error *err);

/* dir/sub/name+suffix (sub may be ""); NULL when out of memory. */
char *md_collect_path(const char *dir, const char *sub, const char *name, const char *suffix);

double md_collect_now(void);
void md_collect_report(collect_run *run, md_collect_event event, const char *episode_id);
void md_collect_warn(collect_run *run, const char *message);

#endif
