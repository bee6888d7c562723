/* The results mapped into an md_config (memdecay-config(5)). */
#include "fit/regions/regions_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

static void map_region(const md_region_fit *fit, const md_regions_settings *settings,
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
  out->identification = (md_config_identification){
      .present = true,
      .identified = fit->window.identified,
      .reason = fit->window.reason,
      .window = fit->window.window,
      .censored_share = fit->window.censored_share,
      .half_life_half_window = fit->window.half_life_cut,
  };
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

static void map_pooled(const md_pooled_fit *fit, const md_regions_settings *settings,
                       md_config_pooled *out) {
  const md_exponential_fit *exponential = &fit->exponential;
  *out = (md_config_pooled){
      .present = fit->present,
      .n_regions = fit->n_regions,
      .regions = fit->regions,
      .lambda = exponential->estimable ? exponential->lambda : NAN,
      .half_life = exponential->estimable ? md_half_life(exponential->lambda) : NAN,
      .half_life_ci = {NAN, NAN},
      .n = (size_t)fit->totals.rows,
      .weight = fit->totals.weight,
      .events = fit->totals.events,
      .exposure = fit->totals.exposure,
      .ci_level = settings->level,
  };
  if (exponential->estimable) md_half_life_ci(exponential->lambda_ci_wald, out->half_life_ci);
  map_exponential(exponential, &out->exponential);
}

/* Policy, model and workload facts from the calibration sidecar. */
static md_status map_calibration(const md_regions_results *results, const md_calibration *calibration,
                                 md_config *config, md_regions_config_storage *storage,
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

md_status md_regions_config(const md_regions_results *results, const md_regions_settings *settings,
                        md_config *config, md_regions_config_storage *storage, md_error *err) {
  size_t n = results->n_regions;
  storage->regions = calloc(n + 1, sizeof *storage->regions);
  storage->test_regions = calloc(n + 1, sizeof *storage->test_regions);
  if (!storage->regions || !storage->test_regions) {
    md_regions_config_free(storage);
    return md_fail(err, MD_E_NOMEM, "out of memory building the config");
  }
  for (size_t i = 0; i < n; i++) {
    map_region(&results->regions[i], settings, &storage->regions[i]);
    storage->test_regions[i] = results->regions[i].name;
  }
  config->n_regions = n;
  config->regions = storage->regions;
  map_pooled(&results->pooled, settings, &config->pooled);
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
  if (status != MD_OK) md_regions_config_free(storage);
  return status;
}

void md_regions_config_free(md_regions_config_storage *storage) {
  free(storage->regions);
  free(storage->test_regions);
  free(storage->traces);
  memset(storage, 0, sizeof *storage);
}
