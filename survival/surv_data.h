/* Survival data for one group (one region): lifetimes with right censoring,
 * optional delayed entry (left truncation) and optional case weights.
 * These are the columns of the events CSV (memdecay-events(5)). */
#ifndef MD_SURVIVAL_SURV_DATA_H
#define MD_SURVIVAL_SURV_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

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
 * decode steps). Owns its arrays.
 *
 * Rows are identical when their values are bit-for-bit equal (entry 0 and
 * -0 are the same); unlike R's survival (timefix = TRUE, aeqSurv), times
 * that differ by rounding error are not merged. */
typedef struct md_surv_table {
  size_t n;        /* distinct rows */
  double *time;    /* [n] */
  uint8_t *event;  /* [n] */
  double *entry;   /* [n] always allocated (0 where there was no entry) */
  double *weight;  /* [n] always allocated; sum of the merged rows' weights */
  int has_entry;   /* any entry > 0 */
  size_t n_input;  /* rows of the md_surv_data it was built from */
  /* When md_surv_table_build returns MD_E_INVALID for a bad row: that row's
   * 0-based index (the message says what is wrong); SIZE_MAX otherwise. */
  size_t invalid_row;
} md_surv_table;

/* Validates every row (finite time > entry >= 0, event 0 or 1, finite
 * weight > 0; at least one row) and compresses. Errors: MD_E_INVALID (a bad
 * row, see invalid_row; or no rows), MD_E_NOMEM. On error the table holds no
 * arrays, and md_surv_table_free on it is still safe.
 *
 * Method: identical rows are first aggregated in a hash table that stays
 * small when few distinct values occur (integer decode steps); if the rows
 * turn out to be mostly distinct, all of them are sorted instead by an LSD
 * radix sort on the bits of (time, event, entry) and merged. Either way the
 * cost is O(n) and the weights of identical rows are summed in input order.
 * Transient memory: a few bytes per row on the first path, 48 bytes per row
 * on the second. */
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

/* The largest total weight the estimators accept. Kaplan-Meier and the
 * log-rank test multiply numbers at risk (n (n - d), a_j a_k), so their
 * squares must stay well inside a double; every row being finite does not
 * make the sums finite. Above it md_km_fit and md_logrank give up (see
 * there) rather than return infinities or NaN. */
#define MD_SURV_MAX_TOTAL_WEIGHT 1e150

#endif
