/* Pinning and base priorities: the defaults, the priors file, --pin and
 * --no-pin, and the measured shares of a calibration. */
#include "fit/regions/regions_internal.h"

#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/regions.h"

/* ---- pinning and base priorities ------------------------------------------ */

bool md_regions_pinned(const char *region, const md_regions_settings *settings) {
  const md_prior *prior = settings->priors ? md_priors_find(settings->priors, region) : NULL;
  bool pinned = md_region_pinned_by_default(region);
  if (prior && prior->has_pinned) pinned = prior->pinned;
  for (size_t i = 0; i < settings->n_pins; i++) {
    if (!strcmp(settings->pins[i].region, region)) pinned = settings->pins[i].pinned;
  }
  return pinned;
}

md_status md_regions_alpha(double *priorities, size_t n, double *alpha, md_error *err) {
  if (n == 0) return md_fail(err, MD_E_INVALID, "alpha: no unpinned region has a base priority");
  *alpha = gsl_stats_median(priorities, 1, n);
  return MD_OK;
}

/* The measured share of the region's tokens refreshed at least once; NaN
 * without a calibration or when none of its tokens was observed. */
static double measured_share(const md_regions_settings *settings, const char *region) {
  if (!settings->calibration) return NAN;
  const md_calibration_region *measured = md_calibration_find(settings->calibration, region);
  return measured ? measured->refreshed_share : NAN;
}

/* A base priority from the priors file wins; otherwise pinned regions get
 * 1, then the measured share, then the built-in prior. */
void md_regions_resolve_priority(md_region_fit *fit, const md_regions_settings *settings) {
  const md_prior *prior = settings->priors ? md_priors_find(settings->priors, fit->name) : NULL;
  fit->pinned = md_regions_pinned(fit->name, settings);
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

md_status md_regions_warn_unused_names(const md_events *events, const md_regions_settings *settings,
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
