/* The weighted risk set of a survival table swept from the last time back,
 * as R survival's survfitkm does: rows with time >= t are added, rows with
 * entry >= t taken away again, which leaves entry < t <= time. Shared by the
 * Kaplan-Meier estimate and the log-rank test. */
#ifndef MD_SURVIVAL_RISK_SET_H
#define MD_SURVIVAL_RISK_SET_H

#include <stddef.h>

#include "survival/surv_data.h"

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
  double total_weight;     /* sum of the table's weights, in row order */
} md_risk_sweep;

/* Errors: MD_E_NOMEM. */
md_status md_risk_sweep_init(const md_surv_table *table, md_risk_sweep *sweep, md_error *err);

/* Moves to time t, which must not increase from call to call (inline: the
 * log-rank sweeps call it for every group at every event time). Returns the
 * weighted number at risk at t; *events and *censored (either may be NULL)
 * get the weights of rows ending exactly at t. */
static inline double md_risk_sweep_to(md_risk_sweep *sweep, double t, double *events,
                                       double *censored) {
  const md_surv_table *table = sweep->table;
  double ended_event = 0.0, ended_censored = 0.0;
  for (; sweep->rows_left > 0 && table->time[sweep->rows_left - 1] >= t; sweep->rows_left--) {
    size_t i = sweep->rows_left - 1;
    sweep->at_risk += table->weight[i];
    if (table->time[i] != t) continue;
    if (table->event[i]) ended_event += table->weight[i];
    else ended_censored += table->weight[i];
  }
  for (; sweep->entries_removed < sweep->n_entries &&
         sweep->entries[sweep->entries_removed].entry >= t;
       sweep->entries_removed++)
    sweep->at_risk -= sweep->entries[sweep->entries_removed].weight;
  if (events) *events = ended_event;
  if (censored) *censored = ended_censored;
  return sweep->at_risk;
}

/* Starts the sweep again from the last time (keeps the sorted entries). */
void md_risk_sweep_reset(md_risk_sweep *sweep);

void md_risk_sweep_free(md_risk_sweep *sweep);

#endif
