#include "survival/risk_set.h"

#include <stdlib.h>
#include <string.h>

static int by_entry_descending(const void *a, const void *b) {
  double x = ((const md_risk_entry *)a)->entry, y = ((const md_risk_entry *)b)->entry;
  return (x < y) - (x > y);
}

md_status md_risk_sweep_init(const md_surv_table *table, md_risk_sweep *sweep, md_error *err) {
  memset(sweep, 0, sizeof *sweep);
  sweep->table = table;
  sweep->rows_left = table->n;
  size_t n = 0;
  for (size_t i = 0; i < table->n; i++) {
    n += table->entry[i] > 0.0;
    sweep->total_weight += table->weight[i];
  }
  sweep->entries = malloc((n ? n : 1) * sizeof *sweep->entries);
  if (!sweep->entries) return md_fail(err, MD_E_NOMEM, "risk set: out of memory");
  for (size_t i = 0; i < table->n; i++)
    if (table->entry[i] > 0.0)
      sweep->entries[sweep->n_entries++] = (md_risk_entry){table->entry[i], table->weight[i]};
  qsort(sweep->entries, sweep->n_entries, sizeof *sweep->entries, by_entry_descending);
  return MD_OK;
}

/* total_weight is the table's and stays. */
void md_risk_sweep_reset(md_risk_sweep *sweep) {
  sweep->rows_left = sweep->table->n;
  sweep->entries_removed = 0;
  sweep->at_risk = 0.0;
}

void md_risk_sweep_free(md_risk_sweep *sweep) {
  if (!sweep) return;
  free(sweep->entries);
  memset(sweep, 0, sizeof *sweep);
}
