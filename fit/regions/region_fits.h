/* The middle shared by `fit`, `extract --plot` and `run`: per-region
 * survival fits, the log-rank tests between regions, pinning and base
 * priorities, the calibration sidecar carried into the config, the
 * translation into an md_config, the figure and the table on stderr. The
 * estimators themselves live in fit/; this only calls them and collects
 * warnings. */
#ifndef MD_FIT_REGIONS_REGION_FITS_H
#define MD_FIT_REGIONS_REGION_FITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "survival/exponential.h"
#include "survival/km.h"
#include "survival/logrank.h"
#include "survival/surv_data.h"
#include "survival/weibull.h"
#include "survival/window_check.h"
#include "io/formats/calibration.h"
#include "io/formats/config.h"
#include "io/formats/events.h"
#include "io/formats/priors.h"
#include "base/warnings.h"

typedef struct md_pin_override {
  const char *region;
  bool pinned;
} md_pin_override;

#define MD_REGIONS_LEVEL_DEFAULT 0.95 /* fit --level */

typedef struct md_regions_settings {
  double level;                     /* confidence level of every interval (fit --level) */
  md_km_band band;
  const md_priors *priors;          /* may be empty */
  const md_pin_override *pins;      /* --pin / --no-pin in command-line order */
  size_t n_pins;
  /* What extract measured (fit --calibration), or NULL; its path names it
   * in messages. */
  const md_calibration *calibration;
  const char *calibration_path;
  /* Keep only each region's Kaplan-Meier median and its interval, freeing
   * the curve as soon as they are known: the curves (one row per distinct
   * time, 64 bytes a row) are what --km-csv and --plot need, and with
   * continuous times they hold as many rows as the input. */
  bool drop_curves;
} md_regions_settings;

/* Whether `region` is pinned: the defaults (system), then the priors file,
 * then --pin/--no-pin in order. extract and fit decide it the same way. */
bool md_regions_pinned(const char *region, const md_regions_settings *settings);

/* alpha from the base priorities that count (the unpinned regions' measured
 * shares, or the priors file's values): their median, R's (the mean of the
 * two middle values for an even count). The array is reordered;
 * MD_E_INVALID when n = 0. */
md_status md_regions_alpha(double *priorities, size_t n, double *alpha, md_error *err);

typedef struct md_region_fit {
  const char *name;                 /* points into md_events */
  md_surv_table table;
  md_surv_totals totals;
  md_exponential_fit exponential;
  md_weibull_fit weibull;
  md_km_curve km;
  /* Whether the half-life is a property of the tokens or of the
   * observation window (survival/window_check.h). */
  md_window_check window;
  bool pinned;
  double base_priority;
  const char *base_priority_source;
} md_region_fit;

/* The pooled fit (memdecay-config(5), POOLED): one exponential fit of the
 * lifetimes of every unpinned region together, the single rate of a policy
 * without per-region rates (the runtime's memdecay-shared). Its MLE is
 * d / T over the pooled rows: the unpinned regions' events over their
 * exposure. */
typedef struct md_pooled_fit {
  bool present;                     /* false when every region is pinned */
  size_t n_regions;
  const char **regions;             /* the unpinned regions, in results order (names
                                       point into md_events) */
  md_surv_totals totals;            /* rows, weight, events, exposure: the regions' sums */
  md_exponential_fit exponential;   /* estimable false without events */
} md_pooled_fit;

typedef struct md_regions_results {
  size_t n_regions;
  md_region_fit *regions;           /* known regions in prompt order, then by name */
  md_logrank_result overall;        /* zeroed when fewer than 2 regions */
  bool have_overall;
  size_t n_pairs;
  md_config_logrank *pairwise;      /* chi-square, df, p per pair */
  md_pooled_fit pooled;
  md_warnings warnings;             /* the input's warnings, then the fits' */
  /* With a calibration: alpha, the median of the unpinned regions' base
   * priorities (measured shares, or the priors file's values); NaN when no
   * unpinned region has one. */
  double alpha;
} md_regions_results;

/* Fits every region of `events`, then the unpinned ones pooled, and runs
 * the tests. Regions whose
 * quantities cannot be estimated get NaN there plus a warning; only
 * allocation failures and invalid arguments fail, and, with a calibration,
 * events that are not the ones it was measured with (MD_E_INVALID: the rows
 * per region differ). */
md_status md_regions_fit_all(const md_events *events, const md_regions_settings *settings,
                     md_regions_results *results, md_error *err);
void md_regions_results_free(md_regions_results *results);

/* Fills `config` (its arrays allocated in `storage`, freed with
 * md_regions_config_free) from the results: regions, tests, warnings, and the
 * policy (defaults, or measured from settings->calibration, which then also
 * gives the model, the workload's facts and each region's "measured"). */
typedef struct md_regions_config_storage {
  md_config_region *regions;
  const char **test_regions;
  md_config_trace *traces;
} md_regions_config_storage;

md_status md_regions_config(const md_regions_results *results, const md_regions_settings *settings,
                        md_config *config, md_regions_config_storage *storage, md_error *err);
void md_regions_config_free(md_regions_config_storage *storage);

/* The figure (io/plot/plot.h): the survival panel from the fits and, when
 * `calibration` is given, the panel of mean uniform-relative attention per
 * region against the steps since the token's time origin (the decay curves
 * the half-lives summarise). */
md_status md_regions_plot(const md_regions_results *results, const md_calibration *calibration,
                      const char *path, bool log_time, md_error *err);

/* The per-region table and the log-rank line, for a reader on stderr. */
void md_regions_print_table(FILE *out, const md_regions_results *results, double level);

#endif
