/* The weighted risk set of a survival table swept from the last time back,
 * as R survival's survfitkm does: rows with time >= t are added, rows with
 * entry >= t taken away again, which leaves entry < t <= time. Shared by the
 * Kaplan-Meier estimate and the log-rank test. */
#ifndef MD_FIT_SURVIVAL_RISK_SET_H
#define MD_FIT_SURVIVAL_RISK_SET_H

#include <stddef.h>

#include "fit/survival/surv_data.h"

typedef struct md_risk_entry {
  double entry;
  double weight;
} md_risk_entry;

typedef struct md_risk_sweep {
  const md_surv_table *table;
  size_t rows_left;        /* rows [0, rows_left) not yet added */
  md_risk_entry *entries;  /* entries > 0, latest first */
  size_t n_entries, entries_removed;
  double at_risk;
} md_risk_sweep;

/* Errors: MD_E_NOMEM. */
md_status md_risk_sweep_init(const md_surv_table *table, md_risk_sweep *sweep, md_error *err);

/* Moves to time t, which must not increase from call to call. Returns the
 * weighted number at risk at t; *events and *censored (either may be NULL)
 * get the weights of rows ending exactly at t. */
double md_risk_sweep_to(md_risk_sweep *sweep, double t, double *events, double *censored);

/* Starts the sweep again from the last time (keeps the sorted entries). */
void md_risk_sweep_reset(md_risk_sweep *sweep);

void md_risk_sweep_free(md_risk_sweep *sweep);

#endif
