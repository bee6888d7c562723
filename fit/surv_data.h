/* Survival data for one group (one region): lifetimes with right censoring,
 * optional delayed entry (left truncation) and optional case weights.
 * These are the columns of the events CSV (memdecay-events(5)). */
#ifndef MD_FIT_SURV_DATA_H
#define MD_FIT_SURV_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "io/error.h"

typedef struct md_surv_data {
  size_t n;              /* number of rows */
  const double *time;    /* [n] end of the lifetime, decode steps; time > entry */
  const uint8_t *event;  /* [n] 1 = observed end, 0 = right-censored */
  const double *entry;   /* [n] delayed entry >= 0, or NULL for all 0 */
  const double *weight;  /* [n] case weight > 0, or NULL for all 1 */
} md_surv_data;

/* The same data with identical (entry, time, event) rows merged (weights
 * summed) and sorted by time, then event (events first), then entry. Every
 * estimator in fit/ gives identical results on the compressed form, which is
 * typically a few thousand rows for millions of tokens (times are integer
 * decode steps). Owns its arrays. */
typedef struct md_surv_table {
  size_t n;
  double *time;
  uint8_t *event;
  double *entry;   /* always allocated (0 where there was no entry) */
  double *weight;  /* always allocated */
  int has_entry;   /* any entry > 0 */
} md_surv_table;

md_status md_surv_table_build(const md_surv_data *data, md_surv_table *table, md_error *err);
void md_surv_table_free(md_surv_table *table);

/* Totals used by several estimators. */
typedef struct md_surv_totals {
  double rows;       /* number of input rows (before compression) */
  double weight;     /* sum of weights */
  double events;     /* d = sum of w * event */
  double exposure;   /* T = sum of w * (time - entry) */
  size_t distinct_event_times;
} md_surv_totals;

void md_surv_table_totals(const md_surv_table *table, md_surv_totals *totals);

#endif
