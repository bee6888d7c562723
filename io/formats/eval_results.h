/* memdecay-eval/1: the results of the eviction-probe evaluation
 * (collector/eval/eval.h), as a JSON document (memdecay-eval(5)): every probe's
 * outcome per episode, policy and budget, and the recall per region,
 * policy and budget.
 *
 * The writer builds the document with jansson in a fixed key order and
 * writes it atomically (a temporary file renamed into place); numbers are
 * written in their shortest round-trip form (base/numfmt.h), so the same
 * results always give the same bytes. The reader loads what `check`
 * compares (the summary), validating every field it reads; errors name the
 * file and the field. */
#ifndef MD_IO_FORMATS_EVAL_RESULTS_H
#define MD_IO_FORMATS_EVAL_RESULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define MD_EVAL_FORMAT "memdecay-eval/1"

enum {
  MD_EVAL_MAX_POLICIES = 16,  /* the full cache included: the whole policy table fits */
  MD_EVAL_MAX_BUDGETS = 16,
  /* the full cache, then every policy at every budget */
  MD_EVAL_MAX_RUNS = 1 + MD_EVAL_MAX_POLICIES * MD_EVAL_MAX_BUDGETS,
  MD_EVAL_POLICY_NAME_MAX = 24,
};

/* One probe of one run. */
typedef struct md_eval_probe {
  size_t index;               /* in the episode's probes */
  const char *region;         /* = the episode probe's region (borrowed) */
  bool correct;
  bool answer_in_region;      /* the answer was found in its region's text */
  size_t answer_tokens;       /* its tokens there (0 when not found) */
  size_t answer_kept;         /* of which still cached when asked */
  char *output;               /* the decoded answer (UTF-8, may end mid-character) */
} md_eval_probe;

/* One (policy, budget) run of one episode. */
typedef struct md_eval_run {
  int64_t budget_pages;
  int64_t max_cached;         /* most tokens the cache held at once (during a chunk too) */
  int64_t max_cached_after_eviction; /* most held right after an eviction point */
  int64_t evicted;            /* tokens evicted */
  int64_t final_cached;       /* tokens cached when the probes were asked */
  md_eval_probe *probes;      /* [episode's n_probes] */
} md_eval_run;

typedef struct md_eval_episode_probe {
  char *region, *question, *answer;
} md_eval_episode_probe;

typedef struct md_eval_episode {
  char *id;
  size_t line;                /* in the traces file */
  size_t prompt_tokens, continuation_tokens, chunks;
  int64_t pages;              /* ceil((P + S) / page_size) */
  md_eval_episode_probe *probes;
  size_t n_probes;
  md_eval_run *runs;          /* [n_runs], in the results' run order */
} md_eval_episode;

/* Recall counts of one (policy, budget) over all episodes, for one region. */
typedef struct md_eval_cell {
  size_t recalled, total;
  size_t flagged;             /* answer not found in its region */
  size_t answer_tokens, answer_kept;
  /* Probes whose answer was found in its region and none of whose tokens
   * were still cached when asked, and how many of those were recalled
   * anyway (what the model answers without the fact: the eval
   * discriminates only when this stays low). */
  size_t evicted_total, evicted_recalled;
} md_eval_cell;

typedef struct md_eval_results {
  /* identity (NULL when unknown) */
  char *created;              /* ISO 8601 UTC; NULL leaves it out */
  char *model_path, *model_name, *model_config_sha256;
  char *traces_path, *traces_sha256;
  char *config_path, *config_sha256;
  char device[32];
  int threads;
  char prompt_products[16];   /* "fp32", "bf16" (CPU), "tensor cores" (CUDA); "" unknown */
  /* settings */
  int page_size;
  size_t max_answer_tokens;
  uint64_t seed;
  int sink_tokens;
  /* runs: (policy, budget) in order: the full cache first */
  size_t n_runs;
  char run_policy[MD_EVAL_MAX_RUNS][MD_EVAL_POLICY_NAME_MAX];
  double run_budget[MD_EVAL_MAX_RUNS];
  /* the config's regions, in its order */
  size_t n_regions;
  char **regions;
  bool *pinned;
  md_eval_cell *cells;        /* [n_runs * n_regions] */
  md_eval_episode *episodes;  /* the reader leaves these out (n_episodes counts them) */
  size_t n_episodes;
  size_t episodes_skipped;
  double seconds;             /* wall time of the evaluation; NaN: not known */
} md_eval_results;

/* The cell of run `run` and region index `region`. */
static inline md_eval_cell *md_eval_cell_at(const md_eval_results *r, size_t run, size_t region) {
  return &r->cells[run * r->n_regions + region];
}

/* Index of the run (policy, budget), or -1. Budgets compare within 1e-9. */
int md_eval_run_index(const md_eval_results *r, const char *policy, double budget);

/* Serialises the results (md_eval_results as filled by md_eval). *text is
 * malloc'd, NUL-terminated, ends in '\n'. `reproducible` leaves out
 * "created" and "seconds". */
md_status md_eval_results_dump(const md_eval_results *results, bool reproducible, char **text,
                               md_error *err);

/* Writes the document to `path` atomically. */
md_status md_eval_results_write(const char *path, const md_eval_results *results,
                                bool reproducible, md_error *err);

/* Reads the identity, settings, regions and summary of a results file
 * (not the episodes). A cell's retention comes back as answer_kept out of
 * answer_tokens = 10^6 (0 out of 0 for null): the file holds the share. Syntax errors: "PATH:LINE:COLUMN: ..."; structure
 * errors name the field: "PATH: summary[3].regions.plan.recalled: ...". */
md_status md_eval_results_read(const char *path, md_eval_results *results, md_error *err);

void md_eval_results_free(md_eval_results *results);

#endif
