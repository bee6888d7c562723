/* The log-rank tests between regions: overall and pairwise. */
#include "fit/regions/regions_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- tests between regions ------------------------------------------------ */

/* The overall test over every region, then each pair alone (as survdiff on
 * the pair's rows). */
static md_status run_pairwise(md_regions_results *results, const md_surv_table *tables,
                              md_error *err) {
  size_t n = results->n_regions;
  double *chisq = malloc(n * n * sizeof *chisq);
  double *p_value = malloc(n * n * sizeof *p_value);
  results->pairwise = calloc(n * (n - 1) / 2, sizeof *results->pairwise);
  md_status status = MD_OK;
  if (!chisq || !p_value || !results->pairwise) {
    status = md_fail(err, MD_E_NOMEM, "out of memory for the log-rank tests");
  } else {
    status = md_logrank_pairwise(tables, n, chisq, p_value, err);
  }
  for (size_t i = 0; i < n && status == MD_OK; i++) {
    for (size_t j = i + 1; j < n; j++) {
      /* Two groups: 1 df when the test exists (NaN marks one that does not). */
      results->pairwise[results->n_pairs++] = (md_config_logrank){
          .regions = {results->regions[i].name, results->regions[j].name},
          .statistic = chisq[i * n + j],
          .df = isnan(chisq[i * n + j]) ? 0 : 1,
          .p = p_value[i * n + j],
      };
    }
  }
  free(chisq);
  free(p_value);
  return status;
}

md_status md_regions_run_tests(md_regions_results *results, md_error *err) {
  size_t n = results->n_regions;
  if (n < 2) {
    return md_warnings_add(&results->warnings, err,
                           "tests.logrank: only one region, nothing to compare");
  }
  md_surv_table *tables = malloc(n * sizeof *tables);
  if (!tables) return md_fail(err, MD_E_NOMEM, "out of memory for the log-rank tests");
  for (size_t i = 0; i < n; i++) tables[i] = results->regions[i].table;
  md_status status = md_logrank(tables, n, &results->overall, err);
  results->have_overall = status == MD_OK;
  if (status == MD_OK) status = run_pairwise(results, tables, err);
  free(tables);
  if (status != MD_OK) return md_error_prefix(err, "log-rank test");
  if (!results->overall.estimable) {
    return md_warnings_add(&results->warnings, err, "tests.logrank: no overall test: %s",
                           results->overall.reason ? results->overall.reason
                                                   : "no region has events");
  }
  return MD_OK;
}
