#include "fit/regions/fit_regions.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fit/extract/attention_norm.h"
#include "io/plot/plot.h"
#include "io/base/regions.h"

/* ---- per-region fits ---------------------------------------------------- */

static void exponential_unavailable(md_exponential_fit *fit) {
  double level = fit->level;
  memset(fit, 0, sizeof *fit);
  fit->level = level;
  fit->lambda = fit->log_lambda_se = fit->loglik = fit->aic = NAN;
  fit->lambda_ci_wald[0] = fit->lambda_ci_wald[1] = NAN;
  fit->lambda_ci_profile[0] = fit->lambda_ci_profile[1] = NAN;
}

static void weibull_unavailable(md_weibull_fit *fit) {
  memset(fit, 0, sizeof *fit);
  fit->shape = fit->scale = fit->loglik = fit->aic = fit->lrt_statistic = fit->lrt_p = NAN;
  fit->shape_ci[0] = fit->shape_ci[1] = fit->scale_ci[0] = fit->scale_ci[1] = NAN;
}

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

static md_status fit_exponential_part(md_region_fit *fit, const md_fit_settings *settings,
                                      md_warnings *warnings, md_error *err) {
  md_error local = {0};
  md_status status = md_fit_exponential(&fit->table, settings->level, &fit->exponential, &local);
  if (status != MD_OK) {
    fit->exponential.level = settings->level;
    exponential_unavailable(&fit->exponential);
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

static md_status fit_weibull_part(md_region_fit *fit, const md_fit_settings *settings,
                                  md_warnings *warnings, md_error *err) {
  if (!fit->exponential.estimable) {
    weibull_unavailable(&fit->weibull);
    return MD_OK;
  }
  md_error local = {0};
  md_status status =
      md_fit_weibull(&fit->table, &fit->exponential, settings->level, &fit->weibull, &local);
  if (status != MD_OK) {
    weibull_unavailable(&fit->weibull);
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

static md_status fit_km_part(md_region_fit *fit, const md_fit_settings *settings,
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

static md_status fit_region(const md_events_region *source, const md_fit_settings *settings,
                            md_region_fit *fit, md_warnings *warnings, md_error *err) {
  fit->name = source->name;
  md_surv_data data = md_events_region_data(source);
  md_status status = md_surv_table_build(&data, &fit->table, err);
  if (status != MD_OK) return md_error_prefix(err, "region '%s'", fit->name);
  md_surv_table_totals(&fit->table, &fit->totals);
  status = fit_exponential_part(fit, settings, warnings, err);
  if (status == MD_OK) status = fit_weibull_part(fit, settings, warnings, err);
  if (status == MD_OK) status = fit_km_part(fit, settings, warnings, err);
  return status;
}

/* ---- pinning and base priorities ------------------------------------------ */

bool md_fit_region_pinned(const char *region, const md_fit_settings *settings) {
  const md_prior *prior = settings->priors ? md_priors_find(settings->priors, region) : NULL;
  bool pinned = md_region_pinned_by_default(region);
  if (prior && prior->has_pinned) pinned = prior->pinned;
  for (size_t i = 0; i < settings->n_pins; i++) {
    if (!strcmp(settings->pins[i].region, region)) pinned = settings->pins[i].pinned;
  }
  return pinned;
}

/* The measured share of the region's tokens refreshed at least once; NaN
 * without a calibration or when none of its tokens was observed. */
static double measured_share(const md_fit_settings *settings, const char *region) {
  if (!settings->calibration) return NAN;
  const md_calibration_region *measured = md_calibration_find(settings->calibration, region);
  return measured ? measured->refreshed_share : NAN;
}

/* A base priority from the priors file wins; otherwise pinned regions get
 * 1, then the measured share, then the built-in prior. */
static void resolve_priority(md_region_fit *fit, const md_fit_settings *settings) {
  const md_prior *prior = settings->priors ? md_priors_find(settings->priors, fit->name) : NULL;
  fit->pinned = md_fit_region_pinned(fit->name, settings);
  double share = measured_share(settings, fit->name);
  if (prior && prior->has_base_priority) {
    fit->base_priority = prior->base_priority;
    fit->base_priority_source = "priors-file";
  } else if (fit->pinned) {
    fit->base_priority = 1.0;
    fit->base_priority_source = "pinned";
  } else if (isfinite(share)) {
    fit->base_priority = share;
    fit->base_priority_source = "measured";
  } else {
    fit->base_priority = md_region_default_base_priority(fit->name);
    fit->base_priority_source = "default-prior";
  }
}

static md_status warn_unused_names(const md_events *events, const md_fit_settings *settings,
                                   md_warnings *warnings, md_error *err) {
  md_status status = MD_OK;
  for (size_t i = 0; settings->priors && i < settings->priors->n && status == MD_OK; i++) {
    const char *name = settings->priors->regions[i].region;
    if (!md_events_find(events, name)) {
      status = md_warnings_add(warnings, err,
                               "priors: region '%s' has no rows in the events (entry ignored)",
                               name);
    }
  }
  for (size_t i = 0; i < settings->n_pins && status == MD_OK; i++) {
    const char *name = settings->pins[i].region;
    if (!md_events_find(events, name)) {
      status = md_warnings_add(warnings, err, "pin: region '%s' has no rows in the events", name);
    }
  }
  return status;
}

/* ---- tests between regions ------------------------------------------------ */

/* The overall test over every region, then each pair alone (as survdiff on
 * the pair's rows). */
static md_status run_pairwise(md_fit_results *results, const md_surv_table *tables,
                              md_error *err) {
  size_t n = results->n_regions;
  double *chisq = malloc(n * n * sizeof *chisq);
  double *p_value = malloc(n * n * sizeof *p_value);
  results->pairwise = calloc(n * (n - 1) / 2, sizeof *results->pairwise);
  md_status status = MD_OK;
  if (!chisq || !p_value || !results->pairwise) {
    status = md_fail(err, MD_E_NOMEM, "out of memory for the log-rank tests");
  } else {
    status = md_logrank_pairwise(tables, n, chisq, p_value, err);
  }
  for (size_t i = 0; i < n && status == MD_OK; i++) {
    for (size_t j = i + 1; j < n; j++) {
      /* Two groups: 1 df when the test exists (NaN marks one that does not). */
      results->pairwise[results->n_pairs++] = (md_config_logrank){
          .regions = {results->regions[i].name, results->regions[j].name},
          .statistic = chisq[i * n + j],
          .df = isnan(chisq[i * n + j]) ? 0 : 1,
          .p = p_value[i * n + j],
      };
    }
  }
  free(chisq);
  free(p_value);
  return status;
}

static md_status run_tests(md_fit_results *results, md_error *err) {
  size_t n = results->n_regions;
  if (n < 2) {
    return md_warnings_add(&results->warnings, err,
                           "tests.logrank: only one region, nothing to compare");
  }
  md_surv_table *tables = malloc(n * sizeof *tables);
  if (!tables) return md_fail(err, MD_E_NOMEM, "out of memory for the log-rank tests");
  for (size_t i = 0; i < n; i++) tables[i] = results->regions[i].table;
  md_status status = md_logrank(tables, n, &results->overall, err);
  results->have_overall = status == MD_OK;
  if (status == MD_OK) status = run_pairwise(results, tables, err);
  free(tables);
  if (status != MD_OK) return md_error_prefix(err, "log-rank test");
  if (!results->overall.estimable) {
    return md_warnings_add(&results->warnings, err, "tests.logrank: no overall test: %s",
                           results->overall.reason ? results->overall.reason
                                                   : "no region has events");
  }
  return MD_OK;
}

/* ---- the calibration sidecar ---------------------------------------------- */

/* The events must be the ones extract wrote with the calibration. */
static md_status check_calibration_rows(const md_events *events, const md_fit_settings *settings,
                                        md_error *err) {
  const md_calibration *calibration = settings->calibration;
  const char *path = settings->calibration_path ? settings->calibration_path : "calibration";
  for (size_t i = 0; i < events->n_regions; i++) {
    const md_events_region *region = &events->regions[i];
    const md_calibration_region *measured = md_calibration_find(calibration, region->name);
    if (!measured)
      return md_fail(err, MD_E_INVALID, "%s: no region '%s', which the events have: the "
                     "calibration was measured with other events (run extract again, or leave "
                     "out --calibration)", path, region->name);
    if (measured->event_rows != region->n)
      return md_fail(err, MD_E_INVALID, "%s: regions.%s.event_rows is %llu, but the events have "
                     "%zu rows of region '%s': the calibration was measured with other events "
                     "(run extract again, or leave out --calibration)", path, region->name,
                     (unsigned long long)measured->event_rows, region->n, region->name);
  }
  return MD_OK;
}

/* kappa and alpha depend on which regions are unpinned: say so when this
 * config pins differently from extract. */
static md_status warn_pinning(const md_fit_settings *settings, md_warnings *warnings,
                              md_error *err) {
  const md_calibration *calibration = settings->calibration;
  md_status status = MD_OK;
  for (size_t i = 0; i < calibration->n_regions && status == MD_OK; i++) {
    const md_calibration_region *region = &calibration->regions[i];
    bool pinned = md_fit_region_pinned(region->name, settings);
    if (pinned == region->pinned) continue;
    status = md_warnings_add(warnings, err,
                             "policy: attention_norm.kappa was measured with region '%s' %s, "
                             "but this config %s it: run extract with the same pinning to "
                             "measure kappa for this config",
                             region->name, region->pinned ? "pinned" : "unpinned",
                             pinned ? "pins" : "unpins");
  }
  if (status == MD_OK && isnan(calibration->policy.kappa))
    status = md_warnings_add(warnings, err,
                             "policy: attention_norm.kappa cannot be estimated: it is null in "
                             "the calibration (no unpinned attention, or its quantile is 0)");
  return status;
}

/* alpha (fit/extract/attention_norm.h): the median of the base priorities of the
 * unpinned regions with observed tokens, so that a token whose attention
 * EWMA sits at the kappa quantile scores like a fresh token of median
 * priority. Uses this config's pinning and priorities (priors file first). */
static md_status calibration_alpha(const md_fit_settings *settings, md_fit_results *results,
                                   md_error *err) {
  const md_calibration *calibration = settings->calibration;
  double *priorities = malloc((calibration->n_regions + 1) * sizeof *priorities);
  if (!priorities) return md_fail(err, MD_E_NOMEM, "out of memory");
  size_t n = 0;
  for (size_t i = 0; i < calibration->n_regions; i++) {
    const md_calibration_region *region = &calibration->regions[i];
    if (md_fit_region_pinned(region->name, settings) || isnan(region->refreshed_share)) continue;
    const md_prior *prior = settings->priors ? md_priors_find(settings->priors, region->name) : NULL;
    priorities[n++] = prior && prior->has_base_priority ? prior->base_priority
                                                        : region->refreshed_share;
  }
  md_status status = MD_OK;
  if (n > 0) {
    status = md_attn_norm_alpha(priorities, n, &results->alpha, err);
  } else {
    status = md_warnings_add(&results->warnings, err,
                             "policy: alpha cannot be estimated: no unpinned region has an "
                             "observed token in the calibration");
  }
  free(priorities);
  return status;
}

/* The sidecar's facts about the run and its regions ("run: ...",
 * "regions.NAME: ..."); its "policy:" lines are remade here for this
 * config's pinning. */
static md_status copy_calibration_warnings(const md_calibration *calibration,
                                           md_warnings *warnings, md_error *err) {
  md_status status = MD_OK;
  for (size_t i = 0; i < calibration->warnings.n && status == MD_OK; i++) {
    const char *line = calibration->warnings.lines[i];
    if (strncmp(line, "policy:", 7) != 0) status = md_warnings_add(warnings, err, "%s", line);
  }
  return status;
}

static md_status apply_calibration(const md_fit_settings *settings, md_fit_results *results,
                                   md_error *err) {
  md_status status = copy_calibration_warnings(settings->calibration, &results->warnings, err);
  if (status == MD_OK) status = warn_pinning(settings, &results->warnings, err);
  if (status == MD_OK) status = calibration_alpha(settings, results, err);
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

md_status md_fit_all(const md_events *events, const md_fit_settings *settings,
                     md_fit_results *results, md_error *err) {
  memset(results, 0, sizeof *results);
  results->alpha = NAN;
  if (settings->calibration) {
    md_status status = check_calibration_rows(events, settings, err);
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
    resolve_priority(fit, settings);
  }
  free(names);
  if (status == MD_OK && settings->calibration)
    status = apply_calibration(settings, results, err);
  if (status == MD_OK) status = warn_unused_names(events, settings, &results->warnings, err);
  if (status == MD_OK) status = run_tests(results, err);
  if (status != MD_OK) md_fit_results_free(results);
  return status;
}

void md_fit_results_free(md_fit_results *results) {
  for (size_t i = 0; i < results->n_regions; i++) {
    md_surv_table_free(&results->regions[i].table);
    md_km_curve_free(&results->regions[i].km);
  }
  free(results->regions);
  if (results->have_overall) md_logrank_result_free(&results->overall);
  free(results->pairwise);
  md_warnings_free(&results->warnings);
  memset(results, 0, sizeof *results);
}

/* ---- into the config ------------------------------------------------------ */

static void map_exponential(const md_exponential_fit *fit, md_config_exponential *out) {
  bool ok = fit->estimable;
  *out = (md_config_exponential){
      .lambda = ok ? fit->lambda : NAN,
      .lambda_ci = {ok ? fit->lambda_ci_wald[0] : NAN, ok ? fit->lambda_ci_wald[1] : NAN},
      .ci_method = "wald-log",
      /* The profile interval exists without events (lower end 0). */
      .lambda_ci_profile = {fit->lambda_ci_profile[0], fit->lambda_ci_profile[1]},
      .loglik = ok ? fit->loglik : NAN,
      .aic = ok ? fit->aic : NAN,
  };
}

static void map_weibull(const md_weibull_fit *fit, md_config_weibull *out) {
  if (!fit->estimable) {
    *out = (md_config_weibull){NAN, NAN, {NAN, NAN}, {NAN, NAN}, NAN, NAN, NAN, NAN};
    return;
  }
  *out = (md_config_weibull){
      .shape = fit->shape,
      .scale = fit->scale,
      .shape_ci = {fit->shape_ci[0], fit->shape_ci[1]},
      .scale_ci = {fit->scale_ci[0], fit->scale_ci[1]},
      .loglik = fit->loglik,
      .aic = fit->aic,
      .lrt_statistic = fit->lrt_statistic,
      .lrt_p = fit->lrt_p,
  };
}

static void map_region(const md_region_fit *fit, const md_fit_settings *settings,
                       md_config_region *out) {
  const md_exponential_fit *exponential = &fit->exponential;
  memset(out, 0, sizeof *out);
  out->name = fit->name;
  out->pinned = fit->pinned;
  out->base_priority = fit->base_priority;
  out->base_priority_source = fit->base_priority_source;
  out->lambda = exponential->estimable ? exponential->lambda : NAN;
  out->half_life = exponential->estimable ? md_half_life(exponential->lambda) : NAN;
  out->half_life_ci[0] = out->half_life_ci[1] = NAN;
  if (exponential->estimable) md_half_life_ci(exponential->lambda_ci_wald, out->half_life_ci);
  out->fit.n = (size_t)fit->totals.rows;
  out->fit.weight = fit->totals.weight;
  out->fit.events = fit->totals.events;
  out->fit.exposure = fit->totals.exposure;
  out->fit.ci_level = settings->level;
  map_exponential(exponential, &out->fit.exponential);
  map_weibull(&fit->weibull, &out->fit.weibull);
  out->fit.km = (md_config_km){
      .median = fit->km.median,
      .median_ci = {fit->km.median_ci[0], fit->km.median_ci[1]},
      .band = md_km_band_name(settings->band),
  };
  const md_calibration_region *measured =
      settings->calibration ? md_calibration_find(settings->calibration, fit->name) : NULL;
  if (measured) {
    out->measured = (md_config_region_measured){
        .present = true,
        .refreshed_share = measured->refreshed_share,
        .mean_relative_attention = measured->mean_relative_attention,
        .tokens = (double)measured->tokens,
    };
  }
}

/* Policy, model and workload facts from the calibration sidecar. */
static md_status map_calibration(const md_fit_results *results, const md_calibration *calibration,
                                 md_config *config, md_fit_config_storage *storage,
                                 md_error *err) {
  config->policy.source = "measured";
  config->policy.page_size = (int)calibration->run.page_size;
  config->policy.tau = calibration->workload.tau;
  config->policy.ewma_beta = calibration->policy.ewma_beta;
  config->policy.alpha = results->alpha;
  config->policy.attention_norm.kappa = calibration->policy.kappa;
  config->policy.attention_norm.quantile = calibration->policy.quantile;
  config->model_name = calibration->model.name;
  config->model_config_sha256 = calibration->model.config_sha256;
  md_config_workload *workload = &config->workload;
  workload->estimand = calibration->workload.estimand;
  workload->episodes = (double)calibration->workload.episodes;
  workload->tokens = (double)calibration->workload.tokens;
  workload->decode_steps = (double)calibration->workload.decode_steps;
  workload->tau = calibration->workload.tau;
  workload->guard = (double)calibration->workload.guard;
  size_t n = calibration->workload.n_sources;
  storage->traces = calloc(n + 1, sizeof *storage->traces);
  if (!storage->traces) return md_fail(err, MD_E_NOMEM, "out of memory building the config");
  for (size_t i = 0; i < n; i++) {
    storage->traces[i].path = calibration->workload.sources[i];
    storage->traces[i].sha256 = calibration->workload.sources_sha256[i];
  }
  workload->n_traces = n;
  workload->traces = storage->traces;
  return MD_OK;
}

md_status md_fit_config(const md_fit_results *results, const md_fit_settings *settings,
                        md_config *config, md_fit_config_storage *storage, md_error *err) {
  size_t n = results->n_regions;
  storage->regions = calloc(n + 1, sizeof *storage->regions);
  storage->test_regions = calloc(n + 1, sizeof *storage->test_regions);
  if (!storage->regions || !storage->test_regions) {
    md_fit_config_free(storage);
    return md_fail(err, MD_E_NOMEM, "out of memory building the config");
  }
  for (size_t i = 0; i < n; i++) {
    map_region(&results->regions[i], settings, &storage->regions[i]);
    storage->test_regions[i] = results->regions[i].name;
  }
  config->n_regions = n;
  config->regions = storage->regions;
  config->tests = (md_config_tests){
      .present = true,
      .n_regions = n,
      .regions = storage->test_regions,
      .overall = {.statistic = results->overall.estimable ? results->overall.chisq : NAN,
                  .df = results->have_overall ? results->overall.df : 0,
                  .p = results->overall.estimable ? results->overall.p_value : NAN},
      .n_pairwise = results->n_pairs,
      .pairwise = results->pairwise,
  };
  config->warnings = &results->warnings;
  md_config_policy_defaults(&config->policy);
  if (!settings->calibration) return MD_OK;
  md_status status = map_calibration(results, settings->calibration, config, storage, err);
  if (status != MD_OK) md_fit_config_free(storage);
  return status;
}

void md_fit_config_free(md_fit_config_storage *storage) {
  free(storage->regions);
  free(storage->test_regions);
  free(storage->traces);
  memset(storage, 0, sizeof *storage);
}

/* ---- the figure ------------------------------------------------------------ */

static void survival_series(const md_fit_results *results, md_plot_survival_series *series) {
  for (size_t i = 0; i < results->n_regions; i++) {
    const md_region_fit *fit = &results->regions[i];
    bool estimable = fit->exponential.estimable;
    series[i] = (md_plot_survival_series){
        .region = fit->name,
        .km = fit->km.n_times ? &fit->km : NULL,
        .lambda = estimable ? fit->exponential.lambda : NAN,
        .half_life = estimable ? md_half_life(fit->exponential.lambda) : NAN,
        .pinned = fit->pinned,
    };
    if (estimable) md_half_life_ci(fit->exponential.lambda_ci_wald, series[i].half_life_ci);
  }
}

/* One curve per measured region that was visible at some age. */
static size_t attention_series(const md_calibration *calibration,
                               md_plot_attention_series *series) {
  size_t n = 0;
  for (size_t i = 0; i < calibration->n_regions; i++) {
    const md_calibration_region *region = &calibration->regions[i];
    if (region->curve_length == 0) continue;
    series[n++] = (md_plot_attention_series){.region = region->name,
                                             .n_steps = region->curve_length,
                                             .mean_relative_attention = region->curve_mean};
  }
  return n;
}

md_status md_fit_plot(const md_fit_results *results, const md_calibration *calibration,
                      const char *path, bool log_time, md_error *err) {
  size_t n_measured = calibration ? calibration->n_regions : 0;
  md_plot_survival_series *survival = calloc(results->n_regions + 1, sizeof *survival);
  md_plot_attention_series *attention = calloc(n_measured + 1, sizeof *attention);
  md_status status = MD_OK;
  if (!survival || !attention) {
    status = md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  } else {
    survival_series(results, survival);
    size_t n_attention = calibration ? attention_series(calibration, attention) : 0;
    md_plot_request request = {.survival = survival,
                               .n_survival = results->n_regions,
                               .attention = n_attention ? attention : NULL,
                               .n_attention = n_attention,
                               .attention_x_title = "decode steps since the token's time origin",
                               .log_time = log_time,
                               .censor_marks = true};
    status = md_plot_write(path, &request, err);
  }
  free(survival);
  free(attention);
  return status;
}

/* ---- the table on stderr -------------------------------------------------- */

static const char *number(char *out, size_t size, const char *format, double value) {
  if (isfinite(value)) {
    snprintf(out, size, format, value);
  } else {
    snprintf(out, size, "-");
  }
  return out;
}

static const char *with_interval(char *out, size_t size, const char *format, double value,
                                 const double ci[2]) {
  char center[32], lower[32], upper[32];
  number(center, sizeof center, format, value);
  if (!isfinite(value)) return snprintf(out, size, "-"), out;
  snprintf(out, size, "%s [%s, %s]", center, number(lower, sizeof lower, format, ci[0]),
           number(upper, sizeof upper, format, ci[1]));
  return out;
}

static const char *p_value(char *out, size_t size, double p) {
  if (!isfinite(p)) return snprintf(out, size, "p = -"), out;
  if (p < 1e-300) return snprintf(out, size, "p < 1e-300"), out;
  snprintf(out, size, "p = %.3g", p);
  return out;
}

void md_fit_print_table(FILE *out, const md_fit_results *results, double level) {
  int width = 10;
  for (size_t i = 0; i < results->n_regions; i++) {
    int len = (int)strlen(results->regions[i].name);
    if (len > width) width = len;
  }
  char ci_label[32];
  snprintf(ci_label, sizeof ci_label, "[%g%% CI]", 100.0 * level);
  fprintf(out, "%-*s %9s %10s  %-28s %7s  %s\n", width, "region", "rows", "events",
          "half-life", "shape", "KM median");
  fprintf(out, "%-*s %9s %10s  %-28s %7s  %s\n", width, "", "", "", ci_label, "", ci_label);
  for (size_t i = 0; i < results->n_regions; i++) {
    const md_region_fit *fit = &results->regions[i];
    char events[32], half_life[128], shape[32], median[128];
    double half_life_ci[2];
    md_half_life_ci(fit->exponential.lambda_ci_wald, half_life_ci);
    double center = fit->exponential.estimable ? md_half_life(fit->exponential.lambda) : NAN;
    fprintf(out, "%-*s %9.0f %10s  %-28s %7s  %s%s\n", width, fit->name, fit->totals.rows,
            number(events, sizeof events, "%.0f", fit->totals.events),
            with_interval(half_life, sizeof half_life, "%.1f", center, half_life_ci),
            number(shape, sizeof shape, "%.3f", fit->weibull.estimable ? fit->weibull.shape : NAN),
            with_interval(median, sizeof median, "%g", fit->km.median, fit->km.median_ci),
            fit->pinned ? "  (pinned)" : "");
  }
  if (results->overall.estimable) {
    char p[32];
    fprintf(out, "log-rank, %zu regions: chi-square %.1f on %d df, %s\n", results->n_regions,
            results->overall.chisq, results->overall.df,
            p_value(p, sizeof p, results->overall.p_value));
  }
}
