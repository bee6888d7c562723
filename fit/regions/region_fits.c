/* The whole fit: every region fitted (exponential, Weibull, Kaplan-Meier,
 * each estimator's failure a warning), then pinning and base priorities,
 * the tests between regions and the calibration (regions_internal.h). */
#include "fit/regions/regions_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


/* ---- per-region fits ---------------------------------------------------- */

/* An estimator that reports a numerical failure leaves that quantity out
 * (null in the config) with a warning; anything else stops the run. */
static md_status soft_failure(md_status status, const md_error *local, const char *region,
                              const char *what, md_warnings *warnings, md_error *err) {
  if (status == MD_E_NUMERIC) {
    return md_warnings_add(warnings, err, "regions.%s: %s failed: %s", region, what,
                           local->message);
  }
  *err = *local;
  return md_error_prefix(err, "region '%s'", region);
}

static md_status fit_exponential_part(md_region_fit *fit, const md_regions_settings *settings,
                                      md_warnings *warnings, md_error *err) {
  md_error local = {0};
  md_status status = md_fit_exponential(&fit->table, settings->level, &fit->exponential, &local);
  if (status != MD_OK) {
    md_exponential_fit_unavailable(&fit->exponential, settings->level, NULL);
    return soft_failure(status, &local, fit->name, "the exponential fit", warnings, err);
  }
  if (!fit->exponential.estimable) {
    return md_warnings_add(warnings, err,
                           "regions.%s: no observed events among %.17g rows (all censored): "
                           "lambda, half-life and the Weibull fit cannot be estimated",
                           fit->name, fit->totals.rows);
  }
  return MD_OK;
}

static md_status fit_weibull_part(md_region_fit *fit, const md_regions_settings *settings,
                                  md_warnings *warnings, md_error *err) {
  if (!fit->exponential.estimable) {
    md_weibull_fit_unavailable(&fit->weibull, settings->level, NULL);
    return MD_OK;
  }
  md_error local = {0};
  md_status status =
      md_fit_weibull(&fit->table, &fit->exponential, settings->level, &fit->weibull, &local);
  if (status != MD_OK) {
    md_weibull_fit_unavailable(&fit->weibull, settings->level, NULL);
    return soft_failure(status, &local, fit->name, "the Weibull fit", warnings, err);
  }
  if (fit->weibull.estimable) return MD_OK;
  const char *reason = fit->weibull.reason;
  if (!reason) {
    reason = fit->totals.distinct_event_times < 2 ? "events at fewer than 2 distinct times"
                                                   : "no convergence";
  }
  return md_warnings_add(warnings, err, "regions.%s: the Weibull fit cannot be estimated: %s",
                         fit->name, reason);
}

static md_status fit_km_part(md_region_fit *fit, const md_regions_settings *settings,
                             md_warnings *warnings, md_error *err) {
  md_error local = {0};
  md_status status = md_km_fit(&fit->table, settings->band, settings->level, &fit->km, &local);
  if (status != MD_OK) {
    memset(&fit->km, 0, sizeof fit->km);
    fit->km.median = fit->km.median_ci[0] = fit->km.median_ci[1] = NAN;
    return soft_failure(status, &local, fit->name, "the Kaplan-Meier estimate", warnings, err);
  }
  if (settings->drop_curves) {
    md_km_curve kept = {.median = fit->km.median,
                        .median_ci = {fit->km.median_ci[0], fit->km.median_ci[1]}};
    md_km_curve_free(&fit->km);
    fit->km = kept;
  }
  if (isnan(fit->km.median)) {
    return md_warnings_add(warnings, err,
                           "regions.%s: the Kaplan-Meier curve stays above 0.5: the median "
                           "lifetime is not reached within the observed times",
                           fit->name);
  }
  if (isnan(fit->km.median_ci[0]) || isnan(fit->km.median_ci[1])) {
    return md_warnings_add(warnings, err,
                           "regions.%s: a band curve stays above 0.5: the median's confidence "
                           "interval is open-ended",
                           fit->name);
  }
  return MD_OK;
}

/* A half-life that follows the observation window is reported, with a
 * warning, as not identified rather than as a measurement. */
static md_status window_check_part(md_region_fit *fit, md_warnings *warnings, md_error *err) {
  md_status status = md_window_check_run(&fit->table, &fit->totals, &fit->window, err);
  if (status != MD_OK) return md_error_prefix(err, "region '%s'", fit->name);
  if (fit->window.identified || !fit->exponential.estimable) return MD_OK;
  char why[256];
  md_window_check_describe(&fit->window, why, sizeof why);
  return md_warnings_add(warnings, err,
                         "regions.%s: the half-life (%.4g decode steps) is not identifiable from "
                         "the observation window (%s): %s",
                         fit->name, fit->window.half_life, fit->window.reason, why);
}

static md_status fit_region(const md_events_region *source, const md_regions_settings *settings,
                            md_region_fit *fit, md_warnings *warnings, md_error *err) {
  fit->name = source->name;
  md_surv_data data = md_events_region_data(source);
  md_status status = md_surv_table_build(&data, &fit->table, err);
  if (status != MD_OK) return md_error_prefix(err, "region '%s'", fit->name);
  md_surv_table_totals(&fit->table, &fit->totals);
  status = fit_exponential_part(fit, settings, warnings, err);
  if (status == MD_OK) status = fit_weibull_part(fit, settings, warnings, err);
  if (status == MD_OK) status = fit_km_part(fit, settings, warnings, err);
  if (status == MD_OK) status = window_check_part(fit, warnings, err);
  return status;
}

/* ---- the whole fit -------------------------------------------------------- */

static md_status copy_warnings(const md_warnings *from, md_warnings *to, md_error *err) {
  for (size_t i = 0; i < from->n; i++) {
    md_status status = md_warnings_add(to, err, "%s", from->lines[i]);
    if (status != MD_OK) return status;
  }
  return MD_OK;
}

md_status md_regions_fit_all(const md_events *events, const md_regions_settings *settings,
                     md_regions_results *results, md_error *err) {
  memset(results, 0, sizeof *results);
  results->alpha = NAN;
  if (settings->calibration) {
    md_status status = md_regions_check_calibration_rows(events, settings, err);
    if (status != MD_OK) return status;
  }
  size_t n = events->n_regions;
  const char **names = malloc((n + 1) * sizeof *names);
  results->regions = calloc(n + 1, sizeof *results->regions);
  if (!names || !results->regions) {
    free(names);
    return md_fail(err, MD_E_NOMEM, "out of memory for the region fits");
  }
  for (size_t i = 0; i < n; i++) names[i] = events->regions[i].name;
  qsort(names, n, sizeof *names, md_region_name_compare);
  md_status status = copy_warnings(&events->warnings, &results->warnings, err);
  for (size_t i = 0; i < n && status == MD_OK; i++) {
    md_region_fit *fit = &results->regions[results->n_regions++];
    status = fit_region(md_events_find(events, names[i]), settings, fit, &results->warnings, err);
    md_regions_resolve_priority(fit, settings);
  }
  free(names);
  if (status == MD_OK) status = md_regions_fit_pooled(settings, results, err);
  if (status == MD_OK && settings->calibration)
    status = md_regions_apply_calibration(settings, results, err);
  if (status == MD_OK) status = md_regions_warn_unused_names(events, settings, &results->warnings, err);
  if (status == MD_OK) status = md_regions_run_tests(results, err);
  if (status != MD_OK) md_regions_results_free(results);
  return status;
}

void md_regions_results_free(md_regions_results *results) {
  for (size_t i = 0; i < results->n_regions; i++) {
    md_surv_table_free(&results->regions[i].table);
    md_km_curve_free(&results->regions[i].km);
  }
  free(results->regions);
  free(results->pooled.regions);
  if (results->have_overall) md_logrank_result_free(&results->overall);
  free(results->pairwise);
  md_warnings_free(&results->warnings);
  memset(results, 0, sizeof *results);
}
