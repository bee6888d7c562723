/* Writing a run directory, the collector's output (memdecay-run(5);
 * every file and field is described in memdecay-run(5)):
 *
 *   run.json       identity, settings and the list of complete episodes,
 *                  rewritten atomically after each episode (md_run_record)
 *   manifest.csv   one row per token, appended episode by episode and
 *                  fsynced (md_manifest)
 *
 * The attention matrices (attn/, prefill/) are NPY files (io/formats/npy.h).
 * An episode counts as complete only once run.json lists it; run.json also
 * records the byte length of manifest.csv that covers exactly the complete
 * episodes, so that a resumed run can cut off the rows of an episode that
 * was interrupted. */
#ifndef MD_IO_FORMATS_RUN_WRITER_H
#define MD_IO_FORMATS_RUN_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define MD_RUN_FORMAT "memdecay-run/1"
#define MD_RUN_MANIFEST_HEADER "episode,pos,region,page,birth,token_id,piece\n"

/* ---- run.json ---------------------------------------------------------------- */

typedef struct md_run_model {
  const char *path;             /* the checkpoint directory as given */
  const char *name;             /* its last path component */
  const char *architecture;     /* "Qwen2ForCausalLM" */
  const char *config_sha256;    /* hex SHA-256 of config.json */
  const char *dtype;            /* weight dtype in the file: "BF16", "F16", "F32" */
  int layers, heads, kv_heads, hidden, vocab, max_position_embeddings;
} md_run_model;

/* A run that is one shard of a larger collection (collector/capture/shard.h). */
typedef struct md_run_shard {
  size_t index, count;          /* shard K of N */
  size_t episodes;              /* the episodes of this shard */
  size_t plan_episodes;         /* of the whole collection */
  uint64_t plan_tokens;         /* prompt + decoded tokens of the whole collection */
  const char *plan_sha256;      /* the digest of the whole plan */
} md_run_shard;

/* Everything run.json records besides the episode lists. */
typedef struct md_run_settings {
  const char *version;          /* the program's version */
  const char *created;          /* ISO 8601 UTC timestamp, or NULL (--reproducible) */
  md_run_model model;
  const char *tokenizer_path, *tokenizer_sha256;
  const char *traces_path, *traces_sha256;
  size_t traces_episodes;       /* valid episodes in the trace file */
  int layer_begin, layer_end;   /* captured layers [begin, end) */
  const char *heads;            /* "mean" or "max" */
  int page_size;
  size_t max_steps;             /* decode-window cap; 0 = none (null) */
  size_t default_steps;         /* window of an episode without a continuation */
  const char *device;           /* "cpu", "cuda:0" */
  int threads;
  const md_run_shard *shard;    /* NULL: not sharded (no "shard" key) */
  /* The BLAS the CPU back end ran on ("OpenBLAS 0.3.21", and its core
   * "Zen"), for the record only: a resume takes the new run's. Both NULL:
   * not known (no "blas" key). cpu_kernels: the path of our own CPU
   * kernels beside it ("avx512", "avx2", "portable"); NULL: no such key.
   * prompt_products: "fp32" or "bf16" (--bf16-gemm); NULL: no such key.
   * prompt_gemm: who multiplied the float32 prompt products, "own" (our
   * GEMM) or "blas" (MEMDECAY_CPU_GEMM); NULL: no such key. */
  const char *blas_library, *blas_core, *cpu_kernels, *prompt_products, *prompt_gemm;
} md_run_settings;

typedef struct md_run_episode {
  const char *id;
  size_t line;                  /* line of the episode in the trace file */
  size_t prompt_tokens, decode_steps;
  const char *continuation;     /* "teacher-forced" or "generated" */
  const char *region;           /* the decode window's region */
} md_run_episode;

typedef struct md_run_record md_run_record;

/* A new record with no episodes, not complete, manifest_bytes 0. */
md_status md_run_record_new(const md_run_settings *settings, md_run_record **record, md_error *err);

/* Reads run.json for a resume. Refuses, naming the file and the key, a file
 * that is not JSON, is not format memdecay-run/1 or lacks a field this
 * module writes. */
md_status md_run_record_load(const char *path, md_run_record **record, md_error *err);

/* For a resume: the identity and settings of `settings` must be those the
 * record was made with (model config hash, tokenizer and traces hashes,
 * captured layers, head aggregation, page size, decode-step limits, and the
 * shard: the same K of the same N of the same plan, or none). Fails
 * with MD_E_INVALID and a message saying what differs (path = run.json, for
 * the message). Then the record takes the new run's device, threads and
 * BLAS. */
md_status md_run_record_resume(md_run_record *record, const md_run_settings *settings,
                               const char *path, md_error *err);

size_t md_run_record_episode_count(const md_run_record *record);
bool md_run_record_has_episode(const md_run_record *record, const char *id);
uint64_t md_run_record_manifest_bytes(const md_run_record *record);

/* Lists an episode as complete and sets manifest_bytes. */
md_status md_run_record_add_episode(md_run_record *record, const md_run_episode *episode,
                                    uint64_t manifest_bytes, md_error *err);

/* Replaces the list of skipped episodes with an empty one / appends to it
 * (id may be NULL when the line had no valid id). */
md_status md_run_record_clear_skipped(md_run_record *record, md_error *err);
md_status md_run_record_add_skipped(md_run_record *record, const char *id, size_t line,
                                    const char *reason, md_error *err);

void md_run_record_set_complete(md_run_record *record, bool complete);
bool md_run_record_complete(const md_run_record *record);

/* Writes the record to `path` atomically: keys in a fixed order, two-space
 * indentation, a final newline. */
md_status md_run_record_write(const md_run_record *record, const char *path, md_error *err);

void md_run_record_free(md_run_record *record);

/* ---- manifest.csv ------------------------------------------------------------ */

typedef struct md_manifest md_manifest;

/* Opens manifest.csv for appending. fresh: creates it (or empties it) and
 * writes the header row. Else the file must hold at least keep_bytes bytes
 * (run.json's manifest_bytes) and is cut to exactly that length, dropping
 * the rows of an episode that never completed. */
md_status md_manifest_open(const char *path, bool fresh, uint64_t keep_bytes, md_manifest **manifest,
                           md_error *err);

/* One row: episode,pos,region,page,birth,token_id,piece. The piece is the
 * token's bytes, written as UTF-8 with each byte that is not part of a
 * complete character (and NUL) shown as U+FFFD, and quoted as RFC 4180 says
 * when it holds a comma, a quote, CR or LF, or begins or ends with a space
 * or tab (which CSV readers such as libcsv would trim). */
md_status md_manifest_append(md_manifest *manifest, const char *episode, size_t pos,
                             const char *region, size_t page, int64_t birth, int32_t token_id,
                             const char *piece, size_t piece_length, md_error *err);

/* Flushes and fsyncs the rows appended so far; *bytes = the file's length. */
md_status md_manifest_sync(md_manifest *manifest, uint64_t *bytes, md_error *err);

void md_manifest_close(md_manifest *manifest);

#endif
