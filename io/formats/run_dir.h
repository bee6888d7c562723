/* A collector run directory (memdecay-run(5)), read
 * one episode at a time:
 *
 *     RUN_DIR/run.json          identity, settings, the complete episodes
 *     RUN_DIR/manifest.csv      one row per token: episode,pos,region,page,birth,token_id,piece
 *     RUN_DIR/attn/<id>.npy     float32 [decode_steps, prompt_tokens + decode_steps]
 *     RUN_DIR/prefill/<id>.npy  float32 [prompt_tokens]
 *
 * md_run_info_read() reads run.json (jansson) and then streams the manifest
 * once through libcsv, validating every row, so that a bad run directory is
 * refused before any work is done and the region names are known up front.
 * md_run_reader_next() streams the manifest again and, per episode, loads
 * its two NPY files: memory is O(one episode) whatever the run's size.
 *
 * What is checked (the rules agreed with the writer, `collect`):
 *  - run.json: "format" is "memdecay-run/1"; model.name and
 *    model.config_sha256, aggregation.page_size, traces.path,
 *    manifest_bytes, complete and episodes[] (id, prompt_tokens,
 *    decode_steps) are present with the right types. "shard", when
 *    present, has index < count <= MD_RUN_SHARD_COUNT_MAX, episodes <=
 *    plan.episodes, plan.tokens >= 1 and plan.sha256 of 64 hex digits; a
 *    complete shard lists exactly shard.episodes episodes. Unknown keys are
 *    ignored (later versions add some). Episode ids are unique and usable
 *    as file names (no '/', not "." or "..", no control characters).
 *  - Only the first manifest_bytes bytes of manifest.csv are read: they hold
 *    exactly the rows of the listed episodes, in the listed order, ending
 *    with a line feed (bytes after them belong to an episode in progress).
 *    The header names the columns (found by name; `piece` and unknown
 *    columns are not needed). Per episode of P prompt and S decoded tokens:
 *    P + S rows, pos = 0 .. P+S-1 in order, birth = -1 for pos < P and
 *    pos - P after, page = pos / page_size, token_id >= 0 (< model.vocab
 *    when run.json states it), region a valid region name.
 *  - attn/<id>.npy is float32 of shape [S, P+S]; prefill/<id>.npy is float32
 *    of shape [P]. Every row t of attn is one decode step's aggregated
 *    softmax attention: entries finite and >= 0, exactly 0 after position
 *    P+t (tokens not yet born), and the row's sum that of an average of
 *    softmax rows: 1 within MD_RUN_ATTN_ROW_TOLERANCE with the heads'
 *    mean, from 1 to the query heads' number (model.heads, where stated)
 *    within it with their maximum (each layer's row of head maxima sums to
 *    at least one head's row, 1, and at most to all heads', and the layers
 *    are averaged). A zeroed or doubled row is no softmax average and is
 *    refused with the file and the row. A run.json that states no
 *    aggregation.heads (it is optional) gets the entry checks only. (fit/extract/lifetimes.h checks
 *    the values again, per entry, for matrices from elsewhere.)
 *
 * Errors are MD_E_FORMAT (or MD_E_IO for a file that cannot be read, and
 * MD_E_UNSUPPORTED for another format version) with a message naming the
 * file: "RUN/run.json: episodes[2].decode_steps: expected ...",
 * "RUN/manifest.csv:LINE:COLUMN: ...", "RUN/attn/ep-3.npy: shape ...". */
#ifndef MD_IO_FORMATS_RUN_DIR_H
#define MD_IO_FORMATS_RUN_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define MD_RUN_FORMAT "memdecay-run/1"

/* The largest shard count of a sharded collection (collector/capture/shard.h). */
enum { MD_RUN_SHARD_COUNT_MAX = 65536 };

/* How far a row of attn/<id>.npy may sum from its bounds. Float32 rounding
 * of a softmax and of the averages over heads and layers moves a row's sum
 * by about 1e-7 per thousand columns (real runs: under 1e-7), and another
 * back end's arithmetic by well under 1e-4; a row that is no softmax
 * average (zeroed, doubled, cut) misses by far more. */
#define MD_RUN_ATTN_ROW_TOLERANCE 1e-3

/* The shard of a sharded plan that holds one of its episodes
 * (collector/capture/shard.h, the rule; memdecay-calibrate(1), SHARDS):
 * floor(count (2 before + weight) / (2 total)), at most count - 1, with
 * `before` the weight (prompt tokens + decode steps) of the plan's
 * episodes before it, `weight` its own and `total` the plan's. A plan of
 * zero weight splits by position (the episode's index among n). The caller
 * keeps 2 total count within 64 bits (total <= UINT64_MAX / 2 / count). */
size_t md_run_shard_owner(uint64_t before, uint64_t weight, uint64_t total, size_t position,
                          size_t n, size_t count);

typedef struct md_run_episode_meta {
  char *id;
  long line;                 /* line in the traces file; 0 when not stated */
  size_t prompt_tokens;      /* P */
  size_t decode_steps;       /* S */
  char *continuation;        /* "teacher-forced", "generated"; NULL when not stated */
} md_run_episode_meta;

/* Strings are NULL and numbers -1 where run.json does not state them
 * (only the fields listed as required above are always set). */
typedef struct md_run_info {
  char *dir;                 /* as given */
  char *generator_version;
  char *created;
  struct {
    char *path, *name, *architecture, *config_sha256, *dtype;
    long layers, heads, kv_heads, hidden, vocab;
  } model;
  struct {
    char *path, *sha256;
  } tokenizer, traces;
  struct {
    long layers[2];          /* [begin, end) of the captured layers */
    char *heads;             /* "mean" or "max" */
    long page_size;
  } aggregation;
  struct {
    bool present;            /* run.json has "shard": one shard of a larger collection */
    size_t index, count;     /* shard K of N */
    size_t episodes;         /* the episodes this shard collects */
    size_t plan_episodes;    /* of the whole collection */
    uint64_t plan_tokens;
    char *plan_sha256;       /* the digest of the whole plan */
  } shard;
  char *device;
  long threads;
  uint64_t manifest_bytes;
  bool complete;             /* every episode of the traces is done */
  size_t n_skipped;          /* episodes the collector skipped */
  size_t n_episodes;
  md_run_episode_meta *episodes; /* [n_episodes], in manifest order */
  /* From the manifest. */
  size_t n_regions;
  char **regions;            /* [n_regions], in md_region_name_compare order */
  uint64_t tokens;           /* sum of P + S */
  uint64_t prompt_tokens;    /* sum of P */
  uint64_t decode_steps;     /* sum of S */
  size_t max_decode_steps;   /* the longest observation window */
  size_t min_decode_steps;
} md_run_info;

/* Reads RUN_DIR/run.json and validates RUN_DIR/manifest.csv. On failure
 * `info` is left empty (nothing to free). */
md_status md_run_info_read(const char *dir, md_run_info *info, md_error *err);
void md_run_info_free(md_run_info *info);

/* Index of region `name` in info->regions, or info->n_regions. */
size_t md_run_region_index(const md_run_info *info, const char *name);

/* One loaded episode. The arrays belong to the reader and stay valid until
 * the next call of md_run_reader_next or md_run_reader_close. */
typedef struct md_run_episode_data {
  const md_run_episode_meta *meta;
  size_t index;              /* into info->episodes */
  size_t steps;              /* S: rows of attn */
  size_t tokens;             /* P + S: columns of attn */
  size_t prompt_tokens;      /* P */
  const float *attn;         /* [steps][tokens] */
  const float *prefill;      /* [prompt_tokens] */
  const uint32_t *region;    /* [tokens] index into info->regions */
  const int32_t *birth;      /* [tokens] -1 or the decode step */
  const int64_t *page;       /* [tokens] */
  const int64_t *token_id;   /* [tokens] */
} md_run_episode_data;

typedef struct md_run_reader md_run_reader;

/* `info` must outlive the reader. */
md_status md_run_reader_open(const md_run_info *info, md_run_reader **reader, md_error *err);

/* Loads the next episode into `episode`; at the end sets *done (and leaves
 * `episode` zeroed). A reader can be reopened to go over the run again. */
md_status md_run_reader_next(md_run_reader *reader, md_run_episode_data *episode, bool *done,
                             md_error *err);
void md_run_reader_close(md_run_reader *reader);

/* Path of a run file: "DIR/NAME" or "DIR/SUB/ID.npy" (malloc'd; NULL when
 * out of memory). */
char *md_run_path(const char *dir, const char *sub, const char *id, const char *suffix);

#endif
