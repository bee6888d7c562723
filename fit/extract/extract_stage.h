/* The extract stage, as `extract` and `run` call it: one run directory or
 * several read as one collection (io/formats/run_set.h: the shards of a
 * sharded calibration, or pooled runs) in; the events CSV
 * (memdecay-events(5)) and the calibration sidecar (memdecay-calibration(5))
 * out, and optionally the figure.
 *
 * Episodes are read one at a time, in the set's merge order, and go through
 * fit/extract/lifetimes.h, which sends the event rows to the CSV and every
 * token's series to fit/extract/attention_norm.h; when the EWMA values outgrow
 * norm.memory_bytes the episodes are read a second time for the exact kappa.
 * Every output is prepared in full before any is committed, so a failure
 * leaves no output behind and existing files untouched.
 *
 * The library never prints: progress goes to the callback; the outcome holds
 * what a caller reports. */
#ifndef MD_FIT_EXTRACT_EXTRACT_STAGE_H
#define MD_FIT_EXTRACT_EXTRACT_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fit/extract/attention_norm.h"
#include "fit/extract/lifetimes.h"
#include "fit/regions/region_fits.h"
#include "base/error.h"
#include "io/formats/calibration.h"

typedef struct md_extract_progress {
  int pass;                        /* 1, or 2 for the exact kappa's second reading */
  size_t episodes_done, episodes_total;
  bool pass_done;                  /* the last call of a pass */
} md_extract_progress;

typedef void (*md_extract_progress_fn)(void *context, const md_extract_progress *progress);

typedef struct md_extract_options {
  const char *const *run_dirs;     /* [n_run_dirs] */
  size_t n_run_dirs;
  const char *events_path;         /* the events CSV to write */
  const char *calibration_path;    /* NULL: md_extract_calibration_path(events_path) */
  md_lifetime_params lifetimes;    /* estimand, tau, guard */
  md_attn_norm_params norm;        /* ewma_beta, quantile, memory_bytes */
  md_regions_settings settings;    /* pinning (pins, priors); level and band for the figure */
  bool allow_incomplete;           /* use the complete episodes of an unfinished run */
  bool allow_partial;              /* a sharded collection may lack shards */
  const char *expect_traces_sha256; /* when set, every run must be of these traces */
  const char *expect_config_sha256; /* and of this model (config.json) */
  const char *plot;                /* NULL: no figure */
  bool plot_log_time;
  bool reproducible;               /* no "created" in the sidecar */
  md_extract_progress_fn progress; /* may be NULL */
  void *context;                   /* passed to progress */
} md_extract_options;

/* Defaults: last-use, tau, guard, EWMA beta, quantile and kappa memory of
 * base/policy_defaults.h, the fit's confidence level, a log band. */
void md_extract_options_init(md_extract_options *options);

/* What a successful extract wrote and measured. */
typedef struct md_extract_outcome {
  md_calibration calibration;      /* the sidecar as written (its warnings too) */
  char *calibration_path;          /* where it was written */
  uint64_t rows;                   /* event rows written */
} md_extract_outcome;

void md_extract_outcome_free(md_extract_outcome *outcome);

/* "DIR/events.csv" -> "DIR/events.calibration.json"; a name without the
 * .csv suffix gets ".calibration.json" appended. malloc'd; NULL when out of
 * memory. */
char *md_extract_calibration_path(const char *events_path);

/* Runs the stage. Outputs that would replace an input or each other, or
 * land inside a run directory, are refused before anything is read
 * (io/files/output_guard.h); run directories that are missing, incomplete or
 * do not belong together are MD_KIND_INPUT errors naming the directory;
 * later failures are the run's. On failure nothing is written and
 * `outcome` is left empty. */
md_status md_extract(const md_extract_options *options, md_extract_outcome *outcome,
                     md_error *err);

#endif
