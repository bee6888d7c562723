/* The calibration sidecar carried into the fit: its rows must be the
 * events', its pinning the fit's, and its shares give alpha. */
#include "fit/regions/regions_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


/* ---- the calibration sidecar ---------------------------------------------- */

/* The events must be the ones extract wrote with the calibration. */
md_status md_regions_check_calibration_rows(const md_events *events, const md_regions_settings *settings,
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
static md_status warn_pinning(const md_regions_settings *settings, md_warnings *warnings,
                              md_error *err) {
  const md_calibration *calibration = settings->calibration;
  md_status status = MD_OK;
  for (size_t i = 0; i < calibration->n_regions && status == MD_OK; i++) {
    const md_calibration_region *region = &calibration->regions[i];
    bool pinned = md_regions_pinned(region->name, settings);
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

/* alpha (md_regions_alpha): the median of the base priorities of the
 * unpinned regions with observed tokens, so that a token whose attention
 * EWMA sits at the kappa quantile scores like a fresh token of median
 * priority. Uses this config's pinning and priorities (priors file first). */
static md_status calibration_alpha(const md_regions_settings *settings, md_regions_results *results,
                                   md_error *err) {
  const md_calibration *calibration = settings->calibration;
  double *priorities = malloc((calibration->n_regions + 1) * sizeof *priorities);
  if (!priorities) return md_fail(err, MD_E_NOMEM, "out of memory");
  size_t n = 0;
  for (size_t i = 0; i < calibration->n_regions; i++) {
    const md_calibration_region *region = &calibration->regions[i];
    if (md_regions_pinned(region->name, settings) || isnan(region->refreshed_share)) continue;
    const md_prior *prior = settings->priors ? md_priors_find(settings->priors, region->name) : NULL;
    priorities[n++] = prior && prior->has_base_priority ? prior->base_priority
                                                        : region->refreshed_share;
  }
  md_status status = MD_OK;
  if (n > 0) {
    status = md_regions_alpha(priorities, n, &results->alpha, err);
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

md_status md_regions_apply_calibration(const md_regions_settings *settings, md_regions_results *results,
                                   md_error *err) {
  md_status status = copy_calibration_warnings(settings->calibration, &results->warnings, err);
  if (status == MD_OK) status = warn_pinning(settings, &results->warnings, err);
  if (status == MD_OK) status = calibration_alpha(settings, results, err);
  return status;
}
