/* Kaplan-Meier estimate, Greenwood variance, bands and quantiles, following
 * R survival's survfitKM (C routine survfitkm, robust = FALSE),
 * survfit_confint and quantile.survfit (helpers doquant, findq). */
#include "survival/km.h"

#include "survival/risk_set.h"

#include <float.h>
#include <gsl/gsl_cdf.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

bool md_km_band_parse(const char *name, md_km_band *band) {
  static const struct {
    const char *name;
    md_km_band band;
  } names[] = {{"log", MD_KM_BAND_LOG}, {"log-log", MD_KM_BAND_LOG_LOG}, {"plain", MD_KM_BAND_PLAIN}};
  if (!name) return false;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(name, names[i].name) == 0) {
      *band = names[i].band;
      return true;
    }
  return false;
}

const char *md_km_band_name(md_km_band band) {
  switch (band) {
    case MD_KM_BAND_LOG: return "log";
    case MD_KM_BAND_LOG_LOG: return "log-log";
    case MD_KM_BAND_PLAIN: return "plain";
  }
  return "unknown";
}

void md_km_curve_free(md_km_curve *curve) {
  if (!curve) return;
  double *arrays[] = {curve->time, curve->n_risk, curve->n_event, curve->n_censor,
                      curve->surv, curve->std_err, curve->lower,  curve->upper};
  for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) free(arrays[i]);
  memset(curve, 0, sizeof *curve);
}

static bool allocate_curve(md_km_curve *curve, size_t n) {
  double **arrays[] = {&curve->time, &curve->n_risk, &curve->n_event, &curve->n_censor,
                       &curve->surv, &curve->std_err, &curve->lower,  &curve->upper};
  bool ok = true;
  for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
    *arrays[i] = calloc(n, sizeof(double));
    ok = ok && *arrays[i];
  }
  curve->n_times = n;
  return ok;
}

/* ---- counts ------------------------------------------------------------ */

static size_t count_distinct_times(const md_surv_table *table) {
  size_t n = 0;
  for (size_t i = 0; i < table->n; i++) n += i == 0 || table->time[i] != table->time[i - 1];
  return n;
}

/* Events, censorings and the risk set at each distinct time. */
static md_status fill_counts(const md_surv_table *table, md_km_curve *curve, md_error *err) {
  md_risk_sweep sweep;
  md_status status = md_risk_sweep_init(table, &sweep, err);
  if (status != MD_OK) return status;
  size_t row = table->n;
  for (size_t k = curve->n_times; k-- > 0;) {
    double t = table->time[row - 1];
    while (row > 0 && table->time[row - 1] == t) row--;
    curve->time[k] = t;
    curve->n_risk[k] = md_risk_sweep_to(&sweep, t, &curve->n_event[k], &curve->n_censor[k]);
  }
  md_risk_sweep_free(&sweep);
  return MD_OK;
}

/* Product-limit estimate and the Greenwood sum for var(log S). When all at
 * risk die, n - d is 0 up to the rounding of the risk-set sweep (which can
 * leave a residue with non-integer weights and delayed entry): a relative
 * 1e-12 counts as 0, so that S is exactly 0 and the se infinite. */
static void product_limit(md_km_curve *curve) {
  double km = 1.0, greenwood = 0.0;
  for (size_t k = 0; k < curve->n_times; k++) {
    double n = curve->n_risk[k], d = curve->n_event[k];
    if (d > 0.0) {
      double survivors = n - d;
      if (survivors <= 1e-12 * n) survivors = 0.0;
      km *= survivors / n;
      greenwood += d / (n * survivors);
    }
    curve->surv[k] = km;
    curve->std_err[k] = sqrt(greenwood);
  }
}

/* ---- bands (survfit_confint) -------------------------------------------- */

static void band_at(md_km_band band, double s, double se, double z, double *lower,
                    double *upper) {
  switch (band) {
    case MD_KM_BAND_LOG:
      if (s == 0.0) {
        *lower = *upper = NAN;
      } else {
        *lower = exp(log(s) - z * se);
        *upper = fmin(exp(log(s) + z * se), 1.0);
      }
      return;
    case MD_KM_BAND_LOG_LOG:
      if (s == 0.0 || s == 1.0) {
        *lower = *upper = NAN;
      } else {
        double shift = z * se / log(s);
        *lower = exp(-exp(log(-log(s)) - shift));
        *upper = exp(-exp(log(-log(s)) + shift));
      }
      return;
    case MD_KM_BAND_PLAIN: {
      double half_width = se * s * z; /* Inf * 0 = NaN where S = 0, as in R */
      *lower = isnan(half_width) ? NAN : fmax(s - half_width, 0.0);
      *upper = isnan(half_width) ? NAN : fmin(s + half_width, 1.0);
      return;
    }
  }
}

/* ---- quantiles (findq) -------------------------------------------------- */

typedef struct curve_point {
  double y;
  size_t position;
} curve_point;

static int by_y_then_position(const void *a, const void *b) {
  const curve_point *p = a, *q = b;
  if (p->y != q->y) return p->y < q->y ? -1 : 1;
  return (p->position > q->position) - (p->position < q->position);
}

/* Marks in keep[] the first occurrence of each distinct value of y (NaN
 * counting as one value), as R's !duplicated(y) does. y = 1 - S is
 * nondecreasing, and so is 1 - lower for the log band, where equal values
 * are adjacent; other bands are sorted. */
static bool first_occurrences(const double *y, size_t n, bool *keep) {
  bool monotone = true, seen_nan = false;
  double previous = -INFINITY;
  for (size_t i = 0; i < n; i++) {
    keep[i] = false;
    if (isnan(y[i])) {
      if (!seen_nan) keep[i] = seen_nan = true;
      continue;
    }
    if (y[i] < previous) monotone = false;
    keep[i] = y[i] != previous;
    previous = y[i];
  }
  if (monotone) return true;
  curve_point *points = malloc(n * sizeof *points);
  if (!points) return false;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isnan(y[i])) {
      keep[i] = false;
      points[m++] = (curve_point){y[i], i};
    }
  }
  qsort(points, m, sizeof *points, by_y_then_position);
  for (size_t j = 0; j < m; j++)
    if (j == 0 || points[j].y != points[j - 1].y) keep[points[j].position] = true;
  free(points);
  return true;
}

/* R's approx(y + shift, 1:n, p, method = "constant", f = 1) over the kept,
 * non-NA points: the point whose y + shift is the smallest value >= p,
 * or none (SIZE_MAX) when p lies outside [min, max] of y + shift. */
static size_t step_index(const double *y, const bool *keep, size_t n, double shift, double p) {
  size_t best = SIZE_MAX;
  double best_value = INFINITY, lowest = INFINITY;
  for (size_t i = 0; i < n; i++) {
    if (!keep[i] || isnan(y[i])) continue;
    double v = y[i] + shift;
    if (v < lowest) lowest = v;
    if (v >= p && v < best_value) {
      best_value = v;
      best = i;
    }
  }
  return p < lowest ? SIZE_MAX : best;
}

/* findq(x, y, p, tol) with x = (0, times), y = (0, 1 - curve). */
static double find_quantile(const double *x, const double *y, size_t n, double p, bool *keep) {
  const double tol = sqrt(DBL_EPSILON);
  double y_max = -INFINITY;
  for (size_t i = 0; i < n; i++)
    if (!isnan(y[i]) && y[i] > y_max) y_max = y[i];
  if (y_max < p) return NAN;
  double x_max = x[n - 1];
  size_t last_kept = 0;
  for (size_t i = 0; i < n; i++)
    if (keep[i]) last_kept = i;
  size_t index1 = step_index(y, keep, n, tol, p);
  size_t index2 = step_index(y, keep, n, -tol, p);
  if (!isnan(y[last_kept]) && fabs(p - y[last_kept]) < tol)
    return index1 == SIZE_MAX ? NAN : (x[index1] + x_max) / 2.0;
  if (index1 == SIZE_MAX || index2 == SIZE_MAX) return NAN;
  return (x[index1] + x[index2]) / 2.0;
}

/* One quantile from one curve (values[] = S, lower or upper). */
static md_status quantile_of(const md_km_curve *curve, const double *values, double p,
                             double *quantile, md_error *err) {
  size_t n = curve->n_times + 1;
  double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
  bool *keep = malloc(n * sizeof *keep);
  md_status status = MD_OK;
  if (!x || !y || !keep) {
    status = md_fail(err, MD_E_NOMEM, "Kaplan-Meier quantile: out of memory");
  } else {
    x[0] = 0.0;
    y[0] = 0.0;
    for (size_t k = 0; k < curve->n_times; k++) {
      x[k + 1] = curve->time[k];
      y[k + 1] = 1.0 - values[k];
    }
    if (first_occurrences(y, n, keep))
      *quantile = find_quantile(x, y, n, p, keep);
    else
      status = md_fail(err, MD_E_NOMEM, "Kaplan-Meier quantile: out of memory");
  }
  free(x);
  free(y);
  free(keep);
  return status;
}

md_status md_km_quantile(const md_km_curve *curve, double p, double quantile[3], md_error *err) {
  if (!curve || curve->n_times == 0)
    return md_fail(err, MD_E_INVALID, "Kaplan-Meier quantile: empty curve");
  if (!(p > 0.0 && p < 1.0))
    return md_fail(err, MD_E_INVALID, "Kaplan-Meier quantile: probability %g is not in (0, 1)", p);
  md_status status = quantile_of(curve, curve->surv, p, &quantile[0], err);
  if (status == MD_OK) status = quantile_of(curve, curve->lower, p, &quantile[1], err);
  if (status == MD_OK) status = quantile_of(curve, curve->upper, p, &quantile[2], err);
  return status;
}

/* ---- the fit ----------------------------------------------------------- */

md_status md_km_fit(const md_surv_table *table, md_km_band band, double level, md_km_curve *curve,
                    md_error *err) {
  if (!curve) return md_fail(err, MD_E_INVALID, "Kaplan-Meier: no curve to fill");
  memset(curve, 0, sizeof *curve);
  if (!table || table->n == 0) return md_fail(err, MD_E_INVALID, "Kaplan-Meier: no data");
  if (band != MD_KM_BAND_LOG && band != MD_KM_BAND_LOG_LOG && band != MD_KM_BAND_PLAIN)
    return md_fail(err, MD_E_INVALID, "Kaplan-Meier: unknown band %d", (int)band);
  if (!(level > 0.0 && level < 1.0))
    return md_fail(err, MD_E_INVALID, "Kaplan-Meier: confidence level %g is not in (0, 1)", level);
  md_surv_totals totals;
  md_surv_table_totals(table, &totals);
  if (!(totals.weight <= MD_SURV_MAX_TOTAL_WEIGHT))
    return md_fail(err, MD_E_NUMERIC, "Kaplan-Meier: the weights sum to %g, more than %g (the "
                   "Greenwood variance would overflow)", totals.weight, MD_SURV_MAX_TOTAL_WEIGHT);
  if (!allocate_curve(curve, count_distinct_times(table))) {
    md_km_curve_free(curve);
    return md_fail(err, MD_E_NOMEM, "Kaplan-Meier: out of memory");
  }
  md_status status = fill_counts(table, curve, err);
  if (status != MD_OK) {
    md_km_curve_free(curve);
    return status;
  }
  curve->band = band;
  curve->level = level;
  product_limit(curve);
  double z = gsl_cdf_ugaussian_Pinv(1.0 - (1.0 - level) / 2.0);
  for (size_t k = 0; k < curve->n_times; k++)
    band_at(band, curve->surv[k], curve->std_err[k], z, &curve->lower[k], &curve->upper[k]);
  double median[3];
  status = md_km_quantile(curve, 0.5, median, err);
  if (status != MD_OK) {
    md_km_curve_free(curve);
    return status;
  }
  curve->median = median[0];
  curve->median_ci[0] = median[1];
  curve->median_ci[1] = median[2];
  return MD_OK;
}
