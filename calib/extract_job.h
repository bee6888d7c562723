/* The extract stage as `extract` and `run` both run it: one run directory
 * or several read as one collection (io/formats/run_set.h: the shards of a sharded
 * calibration, or pooled runs) in, the events CSV
 * (memdecay-events(5)) and the calibration sidecar (memdecay-calibration(5))
 * out, and optionally the figure.
 *
 * Episodes are read one at a time, in the set's merge order, and go through
 * fit/extract/lifetimes.h, which sends the event rows to the CSV and every
 * token's series to fit/extract/attention_norm.h; when the EWMA values outgrow
 * --kappa-memory the episodes are read a second time for the exact kappa.
 * Both files are prepared in full before either is committed, so a failure
 * leaves no output behind and existing files untouched. */
#ifndef MD_CALIB_EXTRACT_JOB_H
#define MD_CALIB_EXTRACT_JOB_H

#include <stdbool.h>
#include <stddef.h>

#include "fit/regions/region_fits.h"
#include "fit/extract/lifetimes.h"
#include "fit/extract/attention_norm.h"

typedef struct md_extract_job {
  const char *command;             /* "extract" or "run", for messages */
  const char *const *run_dirs;     /* [n_run_dirs] */
  size_t n_run_dirs;
  const char *events_path;         /* the events CSV to write */
  const char *calibration_path;    /* NULL: md_extract_calibration_path(events_path) */
  md_lifetime_params lifetimes;    /* estimand, tau, guard */
  md_attn_norm_params norm;        /* ewma_beta, quantile, memory_bytes */
  md_regions_settings settings;        /* pinning (pins, priors); level and band for --plot */
  bool allow_incomplete;           /* use the complete episodes of an unfinished run */
  bool allow_partial;              /* a sharded collection may lack shards */
  const char *expect_traces_sha256; /* when set, every run must be of these traces */
  const char *expect_config_sha256; /* and of this model (config.json) */
  const char *plot;                /* NULL: no figure */
  bool plot_log_time;
  bool reproducible;               /* no "created" in the sidecar */
  bool quiet;
  bool progress;                   /* a progress line on stderr (a terminal) */
} md_extract_job;

/* "DIR/events.csv" -> "DIR/events.calibration.json"; a name without the
 * .csv suffix gets ".calibration.json" appended. malloc'd; NULL when out of
 * memory. */
char *md_extract_calibration_path(const char *events_path);

/* What a successful extract measured, for a caller's own report. */
typedef struct md_extract_outcome {
  size_t episodes;
  uint64_t tokens;
  uint64_t rows;                   /* event rows written */
  size_t regions;
  double kappa, alpha;             /* NaN: not estimable */
  int passes;
} md_extract_outcome;

/* Returns the exit code (calib/cli.h); errors and the summary go to stderr.
 * `outcome` may be NULL. */
int md_extract_job_run(const md_extract_job *job, md_extract_outcome *outcome);

#endif
