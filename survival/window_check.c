/* The observation-window check of survival/window_check.h. */
#include "survival/window_check.h"

#include <math.h>
#include <stdio.h>

#include "survival/exponential.h"

md_status md_window_check_run(const md_surv_table *table, const md_surv_totals *totals,
                              md_window_check *check, md_error *err) {
  if (!table || table->n == 0 || !totals)
    return md_fail(err, MD_E_INVALID, "window check: no rows");
  double window = 0, censored = 0;
  for (size_t i = 0; i < table->n; i++) {
    if (table->time[i] > window) window = table->time[i];
    if (!table->event[i]) censored += table->weight[i];
  }
  double weight = totals->weight, events = totals->events, exposure = totals->exposure;
  double cut = window / 2, events_cut = 0, exposure_cut = 0;
  for (size_t i = 0; i < table->n; i++) {
    if (table->entry[i] >= cut) continue; /* not at risk before the cut */
    double w = table->weight[i];
    bool ended = table->event[i] && table->time[i] <= cut;
    events_cut += ended ? w : 0;
    exposure_cut += w * (fmin(table->time[i], cut) - table->entry[i]);
  }
  check->window = window;
  check->censored_share = weight > 0 ? censored / weight : NAN;
  check->half_life = events > 0 ? md_half_life(events / exposure) : NAN;
  check->half_life_cut = events_cut > 0 ? md_half_life(events_cut / exposure_cut) : NAN;
  check->reason = NULL;
  if (!(events > 0) || !(events_cut > 0)) {
    check->reason = "no-events";
  } else if (check->censored_share > MD_WINDOW_CHECK_CENSORED) {
    check->reason = "mostly-censored";
  } else {
    double ratio = check->half_life_cut / check->half_life;
    if (!(ratio <= MD_WINDOW_CHECK_RATIO && ratio >= 1 / MD_WINDOW_CHECK_RATIO))
      check->reason = "window-bound";
  }
  check->identified = check->reason == NULL;
  return MD_OK;
}

void md_window_check_describe(const md_window_check *check, char *text, size_t size) {
  if (size == 0) return;
  if (!check->reason) {
    snprintf(text, size, "identified: halving the %.17g-step window moves the half-life from "
                         "%.4g to %.4g steps", check->window, check->half_life, check->half_life_cut);
  } else if (check->reason[0] == 'n') {
    snprintf(text, size, "no lifetime ended within the first half of the %.17g-step window",
             check->window);
  } else if (check->reason[0] == 'm') {
    snprintf(text, size, "%.0f%% of the tokens were still in use when the %.17g-step window closed",
             100 * check->censored_share, check->window);
  } else {
    snprintf(text, size, "halving the %.17g-step window moves the half-life from %.4g to %.4g "
                         "steps: it follows the window, not the tokens",
             check->window, check->half_life, check->half_life_cut);
  }
}
