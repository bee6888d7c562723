/* The per-region table and the log-rank line on stderr. */
#include "fit/regions/regions_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the table on stderr -------------------------------------------------- */

static const char *number(char *out, size_t size, const char *format, double value) {
  if (isfinite(value)) {
    snprintf(out, size, format, value);
  } else {
    snprintf(out, size, "-");
  }
  return out;
}

static const char *with_interval(char *out, size_t size, const char *format, double value,
                                 const double ci[2]) {
  char center[32], lower[32], upper[32];
  number(center, sizeof center, format, value);
  if (!isfinite(value)) return snprintf(out, size, "-"), out;
  snprintf(out, size, "%s [%s, %s]", center, number(lower, sizeof lower, format, ci[0]),
           number(upper, sizeof upper, format, ci[1]));
  return out;
}

static const char *p_value(char *out, size_t size, double p) {
  if (!isfinite(p)) return snprintf(out, size, "p = -"), out;
  if (p < 1e-300) return snprintf(out, size, "p < 1e-300"), out;
  snprintf(out, size, "p = %.3g", p);
  return out;
}

void md_regions_print_table(FILE *out, const md_regions_results *results, double level) {
  int width = 10;
  for (size_t i = 0; i < results->n_regions; i++) {
    int len = (int)strlen(results->regions[i].name);
    if (len > width) width = len;
  }
  char ci_label[32];
  snprintf(ci_label, sizeof ci_label, "[%g%% CI]", 100.0 * level);
  fprintf(out, "%-*s %9s %10s  %-28s %7s  %s\n", width, "region", "rows", "events",
          "half-life", "shape", "KM median");
  fprintf(out, "%-*s %9s %10s  %-28s %7s  %s\n", width, "", "", "", ci_label, "", ci_label);
  bool any_unidentified = false;
  for (size_t i = 0; i < results->n_regions; i++) {
    const md_region_fit *fit = &results->regions[i];
    char events[32], half_life[128], shape[32], median[128];
    double half_life_ci[2];
    md_half_life_ci(fit->exponential.lambda_ci_wald, half_life_ci);
    double center = fit->exponential.estimable ? md_half_life(fit->exponential.lambda) : NAN;
    bool unidentified = fit->exponential.estimable && !fit->window.identified;
    any_unidentified = any_unidentified || unidentified;
    fprintf(out, "%-*s %9.0f %10s  %-28s %7s  %s%s%s\n", width, fit->name, fit->totals.rows,
            number(events, sizeof events, "%.0f", fit->totals.events),
            with_interval(half_life, sizeof half_life, "%.1f", center, half_life_ci),
            number(shape, sizeof shape, "%.3f", fit->weibull.estimable ? fit->weibull.shape : NAN),
            with_interval(median, sizeof median, "%g", fit->km.median, fit->km.median_ci),
            fit->pinned ? "  (pinned)" : "", unidentified ? "  (not identified)" : "");
  }
  if (any_unidentified) {
    fprintf(out, "(not identified): the half-life follows the observation window or rests on "
                 "few ends; see the warnings and \"identification\" in the config\n");
  }
  const md_pooled_fit *pooled = &results->pooled;
  if (pooled->present) {
    char events[32], half_life[128], label[64];
    double half_life_ci[2];
    md_half_life_ci(pooled->exponential.lambda_ci_wald, half_life_ci);
    double center = pooled->exponential.estimable ? md_half_life(pooled->exponential.lambda) : NAN;
    snprintf(label, sizeof label, "(%zu unpinned regions pooled)", pooled->n_regions);
    fprintf(out, "%-*s %9.0f %10s  %-28s %7s  %s\n", width, "pooled", pooled->totals.rows,
            number(events, sizeof events, "%.0f", pooled->totals.events),
            with_interval(half_life, sizeof half_life, "%.1f", center, half_life_ci), "", label);
  }
  if (results->overall.estimable) {
    char p[32];
    fprintf(out, "log-rank, %zu regions: chi-square %.1f on %d df, %s\n", results->n_regions,
            results->overall.chisq, results->overall.df,
            p_value(p, sizeof p, results->overall.p_value));
  }
}
