/* Several run directories read as one collection: the shards of a sharded
 * calibration (collector/capture/shard.h), or runs a user pools (the same model and
 * capture settings over other traces, say, collected on other machines).
 * `extract` reads a run set; one directory is a set of one.
 *
 * What belongs together (checked against the first directory, and a
 * refusal names both sides): the model (config.json sha256, and the weight
 * dtype and tokenizer.json sha256 where both state them), the captured
 * layers, the head aggregation and the page size. Shards that state the
 * same plan (shard.plan.sha256) are the shards of one calibration: they
 * must also agree on the shard count and the traces, each index may appear
 * once, and every index 0 .. N-1 must be there unless `allow_partial`. An
 * episode id may appear in one directory only (events name episodes).
 *
 * No shard is taken at its word: the shards of a plan are checked against
 * it (check_plan in run_set.c): episodes in trace order across the shards,
 * each of its shard's block by shard.h's rule (md_run_shard_owner) where
 * the tokens before it are known, and, with every shard given and
 * complete, the episodes in shard order must be the plan: its count, its
 * tokens and its digest (shard.plan.sha256, which collect computed from
 * the traces).
 *
 * The order. Episodes are read in merge order: the collections in the order
 * their first directory was given, a sharded one shard by shard (index
 * 0, 1, ...), each directory in its manifest's order. For the shards of one
 * plan that is the unsharded collection's own order, so `extract` over the
 * shards computes exactly what it computes over the unsharded run.
 *
 * Totals are sums over the directories; the skipped episodes are counted
 * once per collection (every shard of a plan records the same skips); the
 * traces are listed once per distinct file (sha256). */
#ifndef MD_IO_FORMATS_RUN_SET_H
#define MD_IO_FORMATS_RUN_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "io/formats/run_dir.h"

typedef struct md_run_set_options {
  bool allow_incomplete;  /* directories whose collection is not finished are used */
  bool allow_partial;     /* a sharded collection may lack shards */
  const char *traces_sha256;  /* NULL, or every run must have read this trace file */
  const char *config_sha256;  /* NULL, or every run must be of this model */
} md_run_set_options;

typedef struct md_run_set {
  size_t n_runs;
  md_run_info *runs;            /* [n_runs], in merge order */
  /* The union of the runs' regions, in md_region_name_compare order, and
   * for each run the index of each of its regions in it. */
  size_t n_regions;
  char **regions;
  uint32_t **region_map;        /* [n_runs][runs[i].n_regions] */
  /* Totals over the runs. */
  size_t n_episodes;
  uint64_t tokens, prompt_tokens, decode_steps;
  size_t max_decode_steps, min_decode_steps;
  size_t n_skipped;             /* once per collection */
  bool complete;                /* every run complete and no shard missing */
  size_t shards_missing;        /* indices absent from partial sharded collections */
  char missing_list[256];       /* "shard 2/4, shard 3/4" (cut at 256) */
  bool devices_differ;          /* on different devices, or CPU thread counts */
  size_t n_traces;              /* distinct trace files, in merge order */
  const char **traces_path;     /* [n_traces] borrowed from the runs */
  const char **traces_sha256;   /* [n_traces] may be NULL entries */
} md_run_set;

/* Reads and checks the n directories (n >= 1). On failure `set` is left
 * empty. Errors: those of md_run_info_read; MD_E_INVALID naming the
 * directories that do not belong together, a repeated or missing shard, a
 * repeated episode, an incomplete collection (unless allow_incomplete) or a
 * set without any episode. */
md_status md_run_set_read(const char *const *dirs, size_t n, const md_run_set_options *options,
                          md_run_set *set, md_error *err);
void md_run_set_free(md_run_set *set);

typedef struct md_run_set_reader md_run_set_reader;

/* Every episode of every run in merge order. The episode's `region` indexes
 * set->regions (remapped from its run's own); `run` is its directory. The
 * data stays valid until the next call or close. */
md_status md_run_set_reader_open(const md_run_set *set, md_run_set_reader **reader, md_error *err);
md_status md_run_set_reader_next(md_run_set_reader *reader, md_run_episode_data *episode,
                                 const md_run_info **run, bool *done, md_error *err);
void md_run_set_reader_close(md_run_set_reader *reader);

#endif
