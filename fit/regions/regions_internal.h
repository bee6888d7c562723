/* What the files of fit/regions share and nothing else includes: the steps
 * of md_regions_fit_all (region_fits.c) that live in the files of their
 * concern. */
#ifndef MD_FIT_REGIONS_REGIONS_INTERNAL_H
#define MD_FIT_REGIONS_REGIONS_INTERNAL_H

#include "fit/regions/region_fits.h"

/* calibration_checks.c: the events are the ones the calibration measured
 * (same rows per region); its pinning, alpha and warnings carried in. */
md_status md_regions_check_calibration_rows(const md_events *events, const md_regions_settings *settings,
                                        md_error *err);
md_status md_regions_apply_calibration(const md_regions_settings *settings, md_regions_results *results,
                                   md_error *err);

/* pinning.c: pinned or not and the base priority with its source; a warning
 * for --pin/--no-pin or priors naming no region of the events. */
void md_regions_resolve_priority(md_region_fit *fit, const md_regions_settings *settings);
md_status md_regions_warn_unused_names(const md_events *events, const md_regions_settings *settings,
                                   md_warnings *warnings, md_error *err);

/* pooled_fit.c: the exponential fit of the unpinned regions' lifetimes
 * pooled (after pinning is resolved); a warning when no region is unpinned
 * (the pooled fit is left out) or the pooled rows have no event. */
md_status md_regions_fit_pooled(const md_regions_settings *settings, md_regions_results *results,
                                md_error *err);

/* logrank_tests.c: the overall and pairwise log-rank tests. */
md_status md_regions_run_tests(md_regions_results *results, md_error *err);

#endif
