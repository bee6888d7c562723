/* The pooled fit: the unpinned regions' lifetimes as one sample, fitted by
 * the same exponential estimator as each region (survival/exponential.h). */
#include "fit/regions/regions_internal.h"

#include <stdlib.h>
#include <string.h>

/* The rows of every unpinned region's table, one after another: the
 * exponential fit needs only d = sum w event and T = sum w (time - entry),
 * which the compressed tables keep exactly. */
static md_status pooled_table(const md_regions_results *results, md_surv_table *table,
                              md_error *err) {
  size_t n = 0;
  for (size_t i = 0; i < results->n_regions; i++)
    if (!results->regions[i].pinned) n += results->regions[i].table.n;
  double *time = malloc((n + 1) * sizeof *time);
  uint8_t *event = malloc(n + 1);
  double *entry = malloc((n + 1) * sizeof *entry);
  double *weight = malloc((n + 1) * sizeof *weight);
  md_status status = MD_OK;
  if (!time || !event || !entry || !weight) {
    status = md_fail(err, MD_E_NOMEM, "out of memory for the pooled fit");
  } else {
    size_t at = 0;
    for (size_t i = 0; i < results->n_regions; i++) {
      const md_region_fit *fit = &results->regions[i];
      if (fit->pinned) continue;
      const md_surv_table *from = &fit->table;
      memcpy(time + at, from->time, from->n * sizeof *time);
      memcpy(event + at, from->event, from->n);
      memcpy(entry + at, from->entry, from->n * sizeof *entry);
      memcpy(weight + at, from->weight, from->n * sizeof *weight);
      at += from->n;
    }
    md_surv_data data = {.n = n, .time = time, .event = event, .entry = entry, .weight = weight};
    status = md_surv_table_build(&data, table, err);
    if (status != MD_OK) md_error_prefix(err, "pooled");
  }
  free(time);
  free(event);
  free(entry);
  free(weight);
  return status;
}

md_status md_regions_fit_pooled(const md_regions_settings *settings, md_regions_results *results,
                                md_error *err) {
  md_pooled_fit *pooled = &results->pooled;
  memset(pooled, 0, sizeof *pooled);
  pooled->regions = calloc(results->n_regions + 1, sizeof *pooled->regions);
  if (!pooled->regions) return md_fail(err, MD_E_NOMEM, "out of memory for the pooled fit");
  for (size_t i = 0; i < results->n_regions; i++) {
    const md_region_fit *fit = &results->regions[i];
    if (fit->pinned) continue;
    pooled->regions[pooled->n_regions++] = fit->name;
    pooled->totals.rows += fit->totals.rows;
  }
  if (pooled->n_regions == 0) {
    return md_warnings_add(&results->warnings, err,
                           "pooled: every region is pinned: there is no pooled fit");
  }
  md_surv_table table = {0};
  md_status status = pooled_table(results, &table, err);
  if (status != MD_OK) return status;
  md_surv_totals sums;
  md_surv_table_totals(&table, &sums);
  pooled->totals.weight = sums.weight;
  pooled->totals.events = sums.events;
  pooled->totals.exposure = sums.exposure;
  pooled->totals.distinct_event_times = sums.distinct_event_times;
  md_error local = {0};
  status = md_fit_exponential(&table, settings->level, &pooled->exponential, &local);
  md_surv_table_free(&table);
  pooled->present = true;
  if (status == MD_E_NUMERIC) {
    md_exponential_fit_unavailable(&pooled->exponential, settings->level, NULL);
    return md_warnings_add(&results->warnings, err, "pooled: the exponential fit failed: %s",
                           local.message);
  }
  if (status != MD_OK) {
    *err = local;
    return md_error_prefix(err, "pooled");
  }
  if (!pooled->exponential.estimable) {
    return md_warnings_add(&results->warnings, err,
                           "pooled: no observed events among %.17g rows of the unpinned regions "
                           "(all censored): the pooled lambda and half-life cannot be estimated",
                           pooled->totals.rows);
  }
  return MD_OK;
}
