/* The calibration sidecar (memdecay-calibration(5)): what `extract` measured
 * besides the lifetimes, written next to the events file
 * (events.csv -> events.calibration.json) and read by `fit --calibration`,
 * which carries it into memdecay.json. Format "memdecay-calibration/1":
 *
 *   {"format": "memdecay-calibration/1",
 *    "generator": {"name": "memdecay-calibrate", "version": "0.1.0"},
 *    "created": "...Z",                          (absent with --reproducible)
 *    "run": {"path": RUN_DIR, ("paths": [RUN_DIR, ...] when several were read,)
 *            "device": "cpu", "complete": true,
 *            "aggregation": {"layers": [0, 24], "heads": "mean", "page_size": 16}},
 *    "model": {"name", "config_sha256", "path", "architecture", "dtype"},
 *    "workload": {"sources": [TRACES], "sources_sha256": [HEX], "episodes", "tokens",
 *                 "prompt_tokens", "decoded_tokens", "decode_steps", "decode_steps_min",
 *                 "estimand", "tau", "guard"},
 *    "events": {"path": "events.csv", "rows": N},
 *    "policy": {"ewma_beta", "alpha", "alpha_regions",
 *               "attention_norm": {"kind": "uniform", "kappa", "quantile", "samples", "passes"}},
 *    "regions": {NAME: {"pinned", "tokens", "observed_tokens", "refreshed_tokens",
 *                       "refreshed_share", "base_priority", "event_rows", "visible_pairs",
 *                       "mean_relative_attention",
 *                       "curve": {"mean": [...], "pairs": [...]}}},
 *    "warnings": [...]}
 *
 * Keys in this order, numbers in their shortest round-trip form (base/numfmt.h),
 * arrays of numbers on one line: the same measurement always gives the same
 * bytes. A quantity that cannot be estimated is null, with a warning. */
#ifndef MD_IO_FORMATS_CALIBRATION_H
#define MD_IO_FORMATS_CALIBRATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/warnings.h"

#define MD_CALIBRATION_FORMAT "memdecay-calibration/1"

typedef struct md_calibration_region {
  char *name;
  bool pinned;                     /* pinned when extract ran: left out of kappa and alpha */
  uint64_t tokens;                 /* tokens of the region */
  uint64_t observed_tokens;        /* those that could have been refreshed */
  uint64_t refreshed_tokens;       /* observed tokens refreshed at least once */
  double refreshed_share;          /* refreshed / observed; NaN when none observed */
  double base_priority;            /* 1 when pinned, else refreshed_share */
  uint64_t event_rows;             /* rows of the region in the events file */
  uint64_t visible_pairs;          /* (token, step) pairs with the token visible */
  double mean_relative_attention;  /* mean a_hat over them; NaN when none */
  size_t curve_length;             /* ages 0 .. curve_length-1 */
  double *curve_mean;              /* [curve_length] mean a_hat at each age */
  uint64_t *curve_pairs;           /* [curve_length] pairs at each age */
} md_calibration_region;

/* Strings may be NULL (left out, or null where the format has the key). */
typedef struct md_calibration {
  char *generator_version;
  char *created;
  struct {
    char *path;                    /* the (first) run directory, as given to extract */
    size_t n_paths;                /* 0, or every run directory when extract read several */
    char **paths;                  /* [n_paths], in the order they were merged */
    char *device;
    bool complete;                 /* the collector had finished every episode */
    long layers[2];                /* -1 when not stated */
    char *heads;
    long page_size;
  } run;
  struct {
    char *name, *config_sha256, *path, *architecture, *dtype;
  } model;
  struct {
    size_t n_sources;
    char **sources;                /* trace files the run read */
    char **sources_sha256;         /* [n_sources], entries may be NULL */
    uint64_t episodes, tokens, prompt_tokens, decoded_tokens;
    uint64_t decode_steps;         /* the longest observation window */
    uint64_t decode_steps_min;     /* the shortest */
    char *estimand;                /* "last-use" or "gap" */
    double tau;
    long guard;
  } workload;
  struct {
    char *path;                    /* the events file, as written */
    uint64_t rows;
  } events;
  struct {
    double ewma_beta;
    double alpha;                  /* NaN: not estimable */
    uint64_t alpha_regions;        /* shares the median was taken over */
    double kappa;                  /* NaN: not estimable */
    double quantile;
    uint64_t kappa_samples;
    int passes;                    /* 1, or 2 when the values outgrew memory */
  } policy;
  size_t n_regions;
  md_calibration_region *regions;  /* in md_region_name_compare order */
  md_warnings warnings;
} md_calibration;

/* Serialises `calibration`; *text is malloc'd and ends in '\n'. */
md_status md_calibration_dump(const md_calibration *calibration, char **text, md_error *err);

/* Reads and validates `path`: syntax errors "PATH:LINE:COLUMN: ...", others
 * name the key ("PATH: regions.user.curve.mean: ..."). On failure
 * `calibration` is left empty. */
md_status md_calibration_read(const char *path, md_calibration *calibration, md_error *err);

/* The region called `name`, or NULL. */
const md_calibration_region *md_calibration_find(const md_calibration *calibration,
                                                 const char *name);

/* Frees everything the struct owns (also for one filled by hand with
 * malloc'd strings and arrays) and zeroes it. */
void md_calibration_free(md_calibration *calibration);

#endif
