/* Kaplan-Meier product-limit estimate with case weights and delayed entry,
 * Greenwood variance, pointwise bands and the median with its interval.
 * Reference: R survival::survfit (conf.type, robust = FALSE) and
 * quantile.survfit. */
#ifndef MD_FIT_KM_H
#define MD_FIT_KM_H

#include <stdbool.h>
#include <stddef.h>

#include "fit/surv_data.h"

typedef enum md_km_band {
  MD_KM_BAND_LOG = 0,  /* exp(log S -/+ z se), upper capped at 1 (R's default) */
  MD_KM_BAND_LOG_LOG,  /* on log(-log S) */
  MD_KM_BAND_PLAIN,    /* S -/+ z se S, clipped to [0, 1] */
} md_km_band;

/* Parses "log", "log-log", "plain"; returns false for anything else. */
bool md_km_band_parse(const char *name, md_km_band *band);
const char *md_km_band_name(md_km_band band);

typedef struct md_km_curve {
  size_t n_times;    /* one row per distinct time with an event or a censoring */
  double *time;      /* [n_times] */
  double *n_risk;    /* [n_times] weighted number at risk: entry < t <= time */
  double *n_event;   /* [n_times] weighted events at t */
  double *n_censor;  /* [n_times] weighted censorings at t */
  double *surv;      /* [n_times] S(t) */
  double *std_err;   /* [n_times] Greenwood se of log S(t) (survfit's std.err); NaN once S = 0 */
  double *lower;     /* [n_times] band; NaN where undefined (as R's NA) */
  double *upper;     /* [n_times] */
  md_km_band band;
  double level;
  /* quantile.survfit rules: first time S <= 0.5; a flat stretch at exactly
   * 0.5 takes the midpoint to the next time; the interval from the bands.
   * NaN where the curve (or band) never reaches 0.5. */
  double median;
  double median_ci[2];
} md_km_curve;

md_status md_km_fit(const md_surv_table *table, md_km_band band, double level, md_km_curve *curve,
                    md_error *err);
void md_km_curve_free(md_km_curve *curve);

#endif
