/* The figure's request (io/plot/plot.h): the survival panel and the decay
 * curves of the calibration. */
#include "fit/regions/regions_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/plot/plot.h"

/* ---- the figure ------------------------------------------------------------ */

static void survival_series(const md_regions_results *results, md_plot_survival_series *series) {
  for (size_t i = 0; i < results->n_regions; i++) {
    const md_region_fit *fit = &results->regions[i];
    bool estimable = fit->exponential.estimable;
    series[i] = (md_plot_survival_series){
        .region = fit->name,
        .km = fit->km.n_times ? &fit->km : NULL,
        .lambda = estimable ? fit->exponential.lambda : NAN,
        .half_life = estimable ? md_half_life(fit->exponential.lambda) : NAN,
        .pinned = fit->pinned,
    };
    if (estimable) md_half_life_ci(fit->exponential.lambda_ci_wald, series[i].half_life_ci);
  }
}

/* One curve per measured region that was visible at some age. */
static size_t attention_series(const md_calibration *calibration,
                               md_plot_attention_series *series) {
  size_t n = 0;
  for (size_t i = 0; i < calibration->n_regions; i++) {
    const md_calibration_region *region = &calibration->regions[i];
    if (region->curve_length == 0) continue;
    series[n++] = (md_plot_attention_series){.region = region->name,
                                             .n_steps = region->curve_length,
                                             .mean_relative_attention = region->curve_mean};
  }
  return n;
}

md_status md_regions_plot(const md_regions_results *results, const md_calibration *calibration,
                      const char *path, bool log_time, md_error *err) {
  size_t n_measured = calibration ? calibration->n_regions : 0;
  md_plot_survival_series *survival = calloc(results->n_regions + 1, sizeof *survival);
  md_plot_attention_series *attention = calloc(n_measured + 1, sizeof *attention);
  md_status status = MD_OK;
  if (!survival || !attention) {
    status = md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  } else {
    survival_series(results, survival);
    size_t n_attention = calibration ? attention_series(calibration, attention) : 0;
    md_plot_request request = {.survival = survival,
                               .n_survival = results->n_regions,
                               .attention = n_attention ? attention : NULL,
                               .n_attention = n_attention,
                               .attention_x_title = "decode steps since the token's time origin",
                               .log_time = log_time,
                               .censor_marks = true};
    status = md_plot_write(path, &request, err);
  }
  free(survival);
  free(attention);
  return status;
}
