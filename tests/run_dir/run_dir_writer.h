/* Writes small collector run directories for the tests (the layout of
 * io/formats/run_dir.h and the run contract): manifest.csv, attn/<id>.npy,
 * prefill/<id>.npy and run.json, all from in-memory episodes. The tests
 * then damage them on purpose with the helpers below. */
#ifndef MD_TESTS_RUN_DIR_WRITER_H
#define MD_TESTS_RUN_DIR_WRITER_H

#include <stdbool.h>
#include <stddef.h>

typedef struct test_episode {
  const char *id;
  size_t prompt;                 /* P */
  size_t steps;                  /* S */
  const char *const *region;     /* [P + S] region names */
  const float *attn;             /* [S][P + S] */
} test_episode;

typedef struct test_run {
  size_t n_episodes;
  const test_episode *episodes;
  long page_size;
  bool complete;
  const char *model_name;
  const char *traces;            /* traces path written into run.json */
} test_run;

/* Creates DIR (and attn/, prefill/) and writes the run; returns 0 or
 * prints why and returns -1. Token ids are 1000 * (episode + 1) + pos;
 * prefill values are 1 / (pos + 1). */
int test_run_write(const char *dir, const test_run *run);

/* The two-episode run whose events, shares, kappa and curves are derived by
 * hand in tests/run_dir/README.md (page size 2). */
const test_run *test_run_small(void);

/* The seeded synthetic dataset of tests/extract/fixtures (R reference) as a
 * run; `source_root` holds tests/. Its run.json states no head aggregation:
 * the drawn rows do not sum to 1 (io/formats/run_dir.h). Returns 0 or -1. */
int test_run_write_fixture(const char *dir, const char *source_root);

/* Damage: replaces run.json's value at a dotted PATH ("model.name",
 * "episodes[1].decode_steps") with the JSON text `value`, or removes the key
 * when `value` is NULL. Returns 0 or -1. */
int test_run_json_edit(const char *dir, const char *path, const char *value);

/* Replaces line `line` (1-based) of DIR/manifest.csv with `text` and fixes
 * run.json's manifest_bytes to the new length. */
int test_manifest_replace_line(const char *dir, size_t line, const char *text);

/* Truncates FILE (relative to DIR) to `size` bytes; size < 0 removes it. */
int test_truncate(const char *dir, const char *file, long size);

/* Rewrites DIR/SUB/ID.npy as float32 zeros of the given shape, except
 * element `index` (C order), set to `value`. */
int test_write_npy(const char *dir, const char *sub, const char *id, int ndim,
                   const long *shape, float value, long index);

#endif
