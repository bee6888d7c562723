/* Kaplan-Meier product-limit estimate with case weights and delayed entry,
 * Greenwood variance, pointwise bands and the median with its interval.
 * Reference: R survival::survfit (conf.type, robust = FALSE) and
 * quantile.survfit. */
#ifndef MD_SURVIVAL_KM_H
#define MD_SURVIVAL_KM_H

#include <stdbool.h>
#include <stddef.h>

#include "survival/surv_data.h"

typedef enum md_km_band {
  MD_KM_BAND_LOG = 0,  /* exp(log S -/+ z se), upper capped at 1 (R's default) */
  MD_KM_BAND_LOG_LOG,  /* on log(-log S) */
  MD_KM_BAND_PLAIN,    /* S -/+ z se S, clipped to [0, 1] */
} md_km_band;

/* Parses "log", "log-log", "plain"; returns false for anything else. */
bool md_km_band_parse(const char *name, md_km_band *band);
const char *md_km_band_name(md_km_band band);

/* Case weights are frequency weights (survfit's robust = FALSE): weighted
 * counts enter the product-limit and Greenwood formulas as if each row were
 * repeated `weight` times, so integer weights give exactly the curve of the
 * expanded data. (survfit itself switches to a robust, infinitesimal
 * jackknife variance by default when weights are not integers; we never do.)
 *
 * Where R reports NA we hold NaN; R's Inf stays +INFINITY. */
typedef struct md_km_curve {
  size_t n_times;    /* one row per distinct time with an event or a censoring
                        (entry times add no rows, as in survfit) */
  double *time;      /* [n_times] */
  double *n_risk;    /* [n_times] weighted number at risk: entry < t <= time */
  double *n_event;   /* [n_times] weighted events at t */
  double *n_censor;  /* [n_times] weighted censorings at t */
  double *surv;      /* [n_times] S(t) */
  /* [n_times] Greenwood se of log S(t), sqrt(sum d / (n (n - d))) (survfit's
   * std.err); +INFINITY once S = 0, as in R. Never NaN. */
  double *std_err;
  /* [n_times] the band, exactly as survfit computes it:
   *   log:     exp(log S -/+ z se), upper capped at 1; NaN where S = 0;
   *   log-log: exp(-exp(log(-log S) -/+ z se / log S)); NaN where S = 0 or 1;
   *   plain:   S -/+ z se S clipped to [0, 1]; NaN where S = 0 (R: Inf * 0).
   * z = the normal quantile 1 - (1 - level) / 2. */
  double *lower;
  double *upper;
  md_km_band band;
  double level;
  /* quantile.survfit rules: first time S <= 0.5 (with a tolerance of
   * sqrt(DBL_EPSILON)); a flat stretch at 0.5 takes the midpoint to the next
   * time the curve drops (or to the last time if it never does); the
   * interval applies the same rule to the lower and upper band curves.
   * NaN where the curve (or band) never reaches 0.5. */
  double median;
  double median_ci[2];
} md_km_curve;

/* Errors: MD_E_INVALID (no table, empty table, unknown band, level outside
 * (0, 1)), MD_E_NUMERIC (the weights sum to more than
 * MD_SURV_MAX_TOTAL_WEIGHT, where the Greenwood sum would overflow),
 * MD_E_NOMEM. On error the curve holds no arrays and md_km_curve_free on it
 * is safe. */
md_status md_km_fit(const md_surv_table *table, md_km_band band, double level, md_km_curve *curve,
                    md_error *err);
void md_km_curve_free(md_km_curve *curve);

/* The p-quantile (0 < p < 1) of a curve by quantile.survfit's rules, with
 * its interval from the band: quantile[0] the estimate, quantile[1] from
 * the lower band, quantile[2] from the upper; NaN where not reached. The
 * curve's median fields hold this for p = 0.5. Returns MD_E_INVALID for p
 * outside (0, 1), MD_E_NOMEM. */
md_status md_km_quantile(const md_km_curve *curve, double p, double quantile[3], md_error *err);

#endif
