/* Axis ranges, 1-2-5 ticks, decade ticks and tick labels. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/plot/plot_internal.h"

/* Relative slack for comparisons of values computed as k * step or
 * m * 10^d, which are not exact in binary. */
#define REL_SLACK 1e-9

static double decade_of(double value) { return floor(log10(value) + REL_SLACK); }

double md_plot_nice_step(double raw) {
  if (!(raw > 0) || !isfinite(raw)) return 1.0;
  double magnitude = pow(10.0, decade_of(raw));
  static const double mantissas[] = {1.0, 2.0, 5.0};
  for (size_t i = 0; i < 3; i++)
    if (mantissas[i] * magnitude >= raw * (1.0 - REL_SLACK)) return mantissas[i] * magnitude;
  return 10.0 * magnitude;
}

double md_plot_nice_ceil(double value) { return md_plot_nice_step(value); }

double md_plot_nice_floor(double value) {
  if (!(value > 0) || !isfinite(value)) return 1.0;
  double magnitude = pow(10.0, decade_of(value));
  static const double mantissas[] = {5.0, 2.0, 1.0};
  for (size_t i = 0; i < 3; i++)
    if (mantissas[i] * magnitude <= value * (1.0 + REL_SLACK)) return mantissas[i] * magnitude;
  return magnitude;
}

static void add_tick(md_plot_axis *axis, double value, bool labelled) {
  if (axis->n_ticks == MD_PLOT_MAX_TICKS) return;
  axis->ticks[axis->n_ticks].value = value;
  axis->ticks[axis->n_ticks].labelled = labelled;
  axis->n_ticks++;
}

void md_plot_axis_linear(md_plot_axis *axis, double lo, double hi, double length_px,
                         double min_spacing_px, bool round_hi) {
  memset(axis, 0, sizeof *axis);
  if (!(hi > lo)) hi = lo + 1.0;
  double max_intervals = floor(length_px / min_spacing_px);
  if (max_intervals < 1) max_intervals = 1;
  double step = md_plot_nice_step((hi - lo) / max_intervals);
  if (round_hi) hi = ceil(hi / step - REL_SLACK) * step;
  axis->lo = lo;
  axis->hi = hi;
  axis->step = step;
  /* Ticks as integer multiples of the step, so 0.1 * 3 prints as 0.3. */
  double first = ceil(lo / step - REL_SLACK);
  double last = floor(hi / step + REL_SLACK);
  for (double k = first; k <= last; k++) {
    double value = k * step;
    if (fabs(value) < step * REL_SLACK) value = 0.0;
    add_tick(axis, value, true);
  }
}

void md_plot_axis_log(md_plot_axis *axis, double lo, double hi, double length_px,
                      double min_spacing_px, bool round_hi) {
  memset(axis, 0, sizeof *axis);
  axis->log = true;
  axis->lo = md_plot_nice_floor(lo);
  axis->hi = hi > lo ? hi : lo;
  if (round_hi) axis->hi = md_plot_nice_ceil(axis->hi);
  if (!(axis->hi > axis->lo)) axis->hi = axis->lo * 10.0;
  double px_per_decade = length_px / log10(axis->hi / axis->lo);
  /* The narrowest gap between labels at 1, 2, 5, 10 is log10(2) decades. */
  bool label_2_and_5 = px_per_decade * log10(2.0) >= min_spacing_px;
  double first = decade_of(axis->lo), last = decade_of(axis->hi);
  /* Many decades: ticks at the powers of ten only (nine a decade would not
   * fit in the tick array, nor be readable), labels on every k-th. */
  bool minor = (last - first + 1) * 9 <= MD_PLOT_MAX_TICKS;
  double label_every = px_per_decade >= min_spacing_px ? 1.0 : ceil(min_spacing_px / px_per_decade);
  size_t n_labelled = 0;
  for (double decade = first; decade <= last; decade++) {
    double unit = pow(10.0, decade);
    for (int m = 1; m <= (minor ? 9 : 1); m++) {
      double value = m * unit;
      if (value < axis->lo * (1 - REL_SLACK) || value > axis->hi * (1 + REL_SLACK)) continue;
      bool labelled = (m == 1 && fmod(last - decade, label_every) == 0.0) ||
                      (label_2_and_5 && (m == 2 || m == 5));
      add_tick(axis, value, labelled);
      n_labelled += labelled;
    }
  }
  /* Less than a decade and too short for 2 and 5: label the two ends. */
  if (n_labelled < 2) {
    axis->ticks[0].labelled = true;
    axis->ticks[axis->n_ticks - 1].labelled = true;
  }
}

void md_plot_axis_place(md_plot_axis *axis, double px_lo, double px_hi) {
  axis->px_lo = px_lo;
  axis->px_hi = px_hi;
}

double md_plot_axis_map(const md_plot_axis *axis, double value) {
  double fraction;
  if (axis->log)
    fraction = log10(value / axis->lo) / log10(axis->hi / axis->lo);
  else
    fraction = (value - axis->lo) / (axis->hi - axis->lo);
  return axis->px_lo + fraction * (axis->px_hi - axis->px_lo);
}

bool md_plot_axis_contains(const md_plot_axis *axis, double value) {
  double slack = REL_SLACK * (axis->log ? axis->hi : fabs(axis->hi - axis->lo));
  return value >= axis->lo - slack && value <= axis->hi + slack;
}

static int decimals_for(double spacing) {
  if (spacing >= 1.0) return 0;
  return (int)ceil(-log10(spacing) - REL_SLACK);
}

void md_plot_tick_label(const md_plot_axis *axis, double value, char *buf, size_t size) {
  if (fabs(value) >= 1e6 || (axis->log && value > 0 && value < 1e-3)) {
    /* "1e6", "2.5e7", "1e-5": short enough for an axis. */
    int exponent = (int)decade_of(fabs(value));
    snprintf(buf, size, "%ge%d", value / pow(10.0, exponent), exponent);
    return;
  }
  int decimals = axis->log ? decimals_for(value) : decimals_for(axis->step);
  snprintf(buf, size, "%.*f", decimals, value);
}
