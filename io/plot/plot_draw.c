/* Layout of the figure and the two panels: survival curves (Kaplan-Meier
 * steps, band, exponential fit, half-life) and mean relative attention. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/plot/plot_internal.h"

/* Layout, in figure pixels. */
#define MARGIN 24.0
#define TITLE_HEIGHT 58.0        /* title line and the space under it */
#define PANEL_TITLE_HEIGHT 34.0  /* panel title above its plot area */
#define PANEL_GAP 34.0           /* between the stacked panels */
#define LEGEND_GAP 36.0          /* between the plot areas and the legend */
#define LEGEND_MAX_SHARE 0.32    /* of the figure width */
#define TICK_LENGTH 6.0
#define X_AXIS_HEIGHT 58.0       /* ticks, tick labels and the axis title */
#define CLIP_SLACK 4.0           /* lines at the plot edge stay whole */
#define MIN_X_SPACING 90.0       /* between labelled x ticks */
#define MIN_Y_SPACING 44.0
#define FIT_SAMPLES 240          /* points of a drawn exponential */

/* Line widths and the band's opacity. */
#define KM_WIDTH 2.6
#define FIT_WIDTH 2.2
#define ATTENTION_WIDTH 2.2
#define BAND_ALPHA 0.16

typedef struct panel {
  double left, top, right, bottom; /* the plot area */
  md_plot_axis x, y;
  const char *title;
  char x_title[96];
  char y_title[64];
} panel;

static const md_plot_rgb ink = {0.15, 0.15, 0.15};
static const md_plot_rgb grid_major = {0.88, 0.88, 0.88};
static const md_plot_rgb grid_minor = {0.95, 0.95, 0.95};
static const md_plot_rgb reference = {0.35, 0.35, 0.35};

static bool has_attention(const md_plot_request *request) {
  return request->attention && request->n_attention > 0;
}

bool md_plot_two_panels(const md_plot_request *request) {
  return request->n_survival > 0 && has_attention(request);
}

double md_plot_drawing_scale(const md_plot_request *request, double width, double height) {
  bool two = md_plot_two_panels(request);
  double default_height = two ? MD_PLOT_DEFAULT_HEIGHT_TWO_PANELS : MD_PLOT_DEFAULT_HEIGHT;
  double compact_height = two ? MD_PLOT_COMPACT_HEIGHT_TWO_PANELS : MD_PLOT_COMPACT_HEIGHT;
  double proportional = fmin(width / MD_PLOT_DEFAULT_WIDTH, height / default_height);
  double fitting = fmin(1.0, fmin(width / MD_PLOT_COMPACT_WIDTH, height / compact_height));
  return fmax(proportional, fitting);
}

/* ---- data ranges ------------------------------------------------------------- */

typedef struct range {
  double min_positive, max;
} range;

static range survival_time_range(const md_plot_request *request) {
  range r = {INFINITY, 0.0};
  double longest_half_life = 0.0;
  for (size_t i = 0; i < request->n_survival; i++) {
    const md_plot_survival_series *series = &request->survival[i];
    const md_km_curve *km = series->km;
    for (size_t j = 0; km && j < km->n_times; j++) {
      if (km->time[j] > 0 && km->time[j] < r.min_positive) r.min_positive = km->time[j];
      if (km->time[j] > r.max) r.max = km->time[j];
    }
    if (isfinite(series->half_life) && series->half_life > longest_half_life)
      longest_half_life = series->half_life;
  }
  /* Fits without any curve: show the first three half-lives. */
  if (r.max <= 0) r.max = longest_half_life > 0 ? 3.0 * longest_half_life : 10.0;
  if (!isfinite(r.min_positive)) r.min_positive = r.max < 1.0 ? r.max : 1.0;
  return r;
}

static bool attention_visible(double value, bool log_scale) {
  return isfinite(value) && (!log_scale || value > 0);
}

static range attention_value_range(const md_plot_request *request, bool *any_nonpositive) {
  range r = {INFINITY, 0.0};
  *any_nonpositive = false;
  for (size_t i = 0; i < request->n_attention; i++) {
    const md_plot_attention_series *series = &request->attention[i];
    for (size_t t = 0; t < series->n_steps; t++) {
      double value = series->mean_relative_attention[t];
      if (!isfinite(value)) continue;
      if (value <= 0) *any_nonpositive = true;
      if (value > 0 && value < r.min_positive) r.min_positive = value;
      if (value > r.max) r.max = value;
    }
  }
  return r;
}

/* The lowest value the log attention axis shows (see attention_axes). */
#define ATTENTION_LOG_FLOOR 1e-3

static bool attention_log_scale(const md_plot_request *request) {
  if (request->attention_scale == MD_PLOT_SCALE_LOG) return true;
  if (request->attention_scale == MD_PLOT_SCALE_LINEAR) return false;
  bool any_nonpositive;
  range r = attention_value_range(request, &any_nonpositive);
  return !any_nonpositive && isfinite(r.min_positive) && r.max / r.min_positive > 30.0;
}

/* ---- axes ---------------------------------------------------------------------- */

static void survival_axes(panel *p, const md_plot_request *request) {
  double height = p->bottom - p->top;
  md_plot_axis_linear(&p->y, 0.0, 1.0, height, MIN_Y_SPACING, false);
  p->title = "Probability a token is still in use";
  snprintf(p->y_title, sizeof p->y_title, "P(still in use)");
  snprintf(p->x_title, sizeof p->x_title, "decode steps since the token's time origin%s",
           request->log_time ? " (log scale)" : "");
}

static void survival_x_axis(panel *p, const md_plot_request *request) {
  range r = survival_time_range(request);
  double width = p->right - p->left;
  if (request->log_time)
    md_plot_axis_log(&p->x, r.min_positive, r.max, width, MIN_X_SPACING, false);
  else
    md_plot_axis_linear(&p->x, 0.0, r.max, width, MIN_X_SPACING, false);
}

static void attention_axes(panel *p, const md_plot_request *request) {
  bool log_scale = attention_log_scale(request);
  bool any_nonpositive;
  range r = attention_value_range(request, &any_nonpositive);
  double height = p->bottom - p->top;
  /* The uniform share (1.0) is always on the axis: it is the reference. */
  if (log_scale) {
    /* Below a thousandth of the uniform share a token is as good as
     * unattended; a mean that low (the last steps of a window, where few
     * tokens remain) would stretch the axis over a dozen empty decades.
     * Lower values are clipped at the bottom of the panel. */
    double lo = isfinite(r.min_positive) && r.min_positive < 1.0 ? r.min_positive : 1.0;
    if (lo < ATTENTION_LOG_FLOOR) lo = ATTENTION_LOG_FLOOR;
    double hi = r.max > 1.0 ? r.max : 1.0;
    md_plot_axis_log(&p->y, lo, hi, height, MIN_Y_SPACING, true);
  } else {
    double hi = r.max > 1.0 ? r.max : 1.0;
    md_plot_axis_linear(&p->y, 0.0, hi * 1.04, height, MIN_Y_SPACING, true);
  }
  p->title = "Mean attention received, relative to a uniform share";
  snprintf(p->y_title, sizeof p->y_title, "attention / uniform%s", log_scale ? " (log)" : "");
  snprintf(p->x_title, sizeof p->x_title, "%s",
           request->attention_x_title ? request->attention_x_title : "decode step");
}

static void attention_x_axis(panel *p, const md_plot_request *request) {
  size_t longest = 0;
  for (size_t i = 0; i < request->n_attention; i++)
    if (request->attention[i].n_steps > longest) longest = request->attention[i].n_steps;
  double last_step = longest > 1 ? (double)(longest - 1) : 1.0;
  md_plot_axis_linear(&p->x, 0.0, last_step, p->right - p->left, MIN_X_SPACING, false);
}

static double widest_tick_label(cairo_t *cr, const md_plot_axis *axis) {
  md_plot_font(cr, MD_PLOT_FONT_TICK, false);
  double widest = 0.0;
  char label[32];
  for (size_t i = 0; i < axis->n_ticks; i++) {
    if (!axis->ticks[i].labelled) continue;
    md_plot_tick_label(axis, axis->ticks[i].value, label, sizeof label);
    double width = md_plot_text_width(cr, label);
    if (width > widest) widest = width;
  }
  return widest;
}

/* ---- axis drawing ---------------------------------------------------------------- */

static void stroke_line(cairo_t *cr, double x0, double y0, double x1, double y1) {
  cairo_move_to(cr, x0, y0);
  cairo_line_to(cr, x1, y1);
  cairo_stroke(cr);
}

/* Pixel-aligned coordinate for a 1 px line, so grid lines stay crisp. */
static double crisp(double coordinate) { return floor(coordinate) + 0.5; }

static void draw_grid(cairo_t *cr, const panel *p) {
  cairo_set_line_width(cr, 1.0);
  for (int pass = 0; pass < 2; pass++) {
    bool major = pass == 1; /* minor lines first, majors over them */
    md_plot_set_color(cr, major ? grid_major : grid_minor, 1.0);
    for (size_t i = 0; i < p->x.n_ticks; i++) {
      if (p->x.ticks[i].labelled != major) continue;
      double x = crisp(md_plot_axis_map(&p->x, p->x.ticks[i].value));
      stroke_line(cr, x, p->top, x, p->bottom);
    }
    for (size_t i = 0; i < p->y.n_ticks; i++) {
      if (p->y.ticks[i].labelled != major) continue;
      double y = crisp(md_plot_axis_map(&p->y, p->y.ticks[i].value));
      stroke_line(cr, p->left, y, p->right, y);
    }
  }
}

static void draw_x_ticks(cairo_t *cr, const panel *p) {
  char label[32];
  md_plot_font(cr, MD_PLOT_FONT_TICK, false);
  for (size_t i = 0; i < p->x.n_ticks; i++) {
    const md_plot_tick *tick = &p->x.ticks[i];
    double x = md_plot_axis_map(&p->x, tick->value);
    double length = tick->labelled ? TICK_LENGTH : TICK_LENGTH * 0.6;
    stroke_line(cr, x, p->bottom, x, p->bottom + length);
    if (!tick->labelled) continue;
    md_plot_tick_label(&p->x, tick->value, label, sizeof label);
    md_plot_text(cr, x, p->bottom + TICK_LENGTH + 7.0, label, 0.5, 0.0);
  }
}

static void draw_y_ticks(cairo_t *cr, const panel *p) {
  char label[32];
  md_plot_font(cr, MD_PLOT_FONT_TICK, false);
  for (size_t i = 0; i < p->y.n_ticks; i++) {
    const md_plot_tick *tick = &p->y.ticks[i];
    double y = md_plot_axis_map(&p->y, tick->value);
    double length = tick->labelled ? TICK_LENGTH : TICK_LENGTH * 0.6;
    stroke_line(cr, p->left - length, y, p->left, y);
    if (!tick->labelled) continue;
    md_plot_tick_label(&p->y, tick->value, label, sizeof label);
    md_plot_text(cr, p->left - TICK_LENGTH - 6.0, y, label, 1.0, 0.5);
  }
}

static void draw_axes(cairo_t *cr, const panel *p, double y_title_x) {
  md_plot_set_color(cr, ink, 1.0);
  cairo_set_line_width(cr, 1.3);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_SQUARE);
  stroke_line(cr, p->left, p->top, p->left, p->bottom);
  stroke_line(cr, p->left, p->bottom, p->right, p->bottom);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
  draw_x_ticks(cr, p);
  draw_y_ticks(cr, p);

  md_plot_font(cr, MD_PLOT_FONT_AXIS, false);
  md_plot_text(cr, (p->left + p->right) / 2, p->bottom + X_AXIS_HEIGHT, p->x_title, 0.5, 1.0);
  cairo_save(cr);
  cairo_translate(cr, y_title_x, (p->top + p->bottom) / 2);
  cairo_rotate(cr, -M_PI / 2);
  md_plot_text(cr, 0.0, 0.0, p->y_title, 0.5, 0.0);
  cairo_restore(cr);

  md_plot_font(cr, MD_PLOT_FONT_PANEL, true);
  md_plot_text(cr, p->left, p->top - PANEL_TITLE_HEIGHT + 4.0, p->title, 0.0, 0.0);
}

/* A dashed horizontal reference line at `value`. */
static void draw_reference(cairo_t *cr, const panel *p, double value) {
  if (!md_plot_axis_contains(&p->y, value)) return;
  double y = md_plot_axis_map(&p->y, value);
  double dashes[] = {6.0, 4.0};
  md_plot_set_color(cr, reference, 1.0);
  cairo_set_line_width(cr, 1.4);
  cairo_set_dash(cr, dashes, 2, 0.0);
  stroke_line(cr, p->left, y, p->right, y);
  cairo_set_dash(cr, NULL, 0, 0.0);
}

/* Labels the reference line at `value`: beside the plot's right edge when
 * the legend leaves that space free (free_below: the legend's bottom), else
 * inside above the line's right end, haloed in white to read over curves. */
static void label_reference(cairo_t *cr, const panel *p, double value, const char *label,
                            double free_below, double room_right) {
  if (!md_plot_axis_contains(&p->y, value)) return;
  double y = md_plot_axis_map(&p->y, value);
  md_plot_font(cr, MD_PLOT_FONT_DETAIL, false);
  double width = md_plot_text_width(cr, label);
  md_plot_set_color(cr, reference, 1.0);
  if (y - MD_PLOT_FONT_DETAIL > free_below && width + 10.0 <= room_right) {
    md_plot_text(cr, p->right + 10.0, y, label, 0.0, 0.5);
    return;
  }
  cairo_move_to(cr, p->right - 6.0 - width, y - 7.0);
  cairo_text_path(cr, label);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_set_line_width(cr, 5.0);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  cairo_stroke_preserve(cr);
  md_plot_set_color(cr, reference, 1.0);
  cairo_fill(cr);
}

static void clip_to(cairo_t *cr, const panel *p) {
  cairo_rectangle(cr, p->left - CLIP_SLACK, p->top - CLIP_SLACK,
                  p->right - p->left + 2 * CLIP_SLACK, p->bottom - p->top + 2 * CLIP_SLACK);
  cairo_clip(cr);
}

/* ---- survival panel ------------------------------------------------------------- */

static double curve_start(const panel *p) { return p->x.log ? p->x.lo : 0.0; }

/* The band is a step function too: [lower_i, upper_i] holds on
 * [time_i, time_i+1). Undefined (NaN) stretches break it. */
static void draw_band(cairo_t *cr, const panel *p, const md_km_curve *km) {
  size_t i = 0;
  while (i + 1 < km->n_times) {
    if (!isfinite(km->lower[i]) || !isfinite(km->upper[i])) {
      i++;
      continue;
    }
    size_t run_end = i;
    while (run_end + 1 < km->n_times && isfinite(km->lower[run_end]) &&
           isfinite(km->upper[run_end]))
      run_end++;
    /* Rows i .. run_end-1 hold over [time_i, time_run_end). */
    for (size_t j = i; j < run_end; j++) {
      double x0 = md_plot_axis_map(&p->x, km->time[j]);
      double x1 = md_plot_axis_map(&p->x, km->time[j + 1]);
      if (j == i) cairo_move_to(cr, x0, md_plot_axis_map(&p->y, km->upper[j]));
      cairo_line_to(cr, x0, md_plot_axis_map(&p->y, km->upper[j]));
      cairo_line_to(cr, x1, md_plot_axis_map(&p->y, km->upper[j]));
    }
    for (size_t j = run_end; j-- > i;) {
      double x0 = md_plot_axis_map(&p->x, km->time[j]);
      double x1 = md_plot_axis_map(&p->x, km->time[j + 1]);
      cairo_line_to(cr, x1, md_plot_axis_map(&p->y, km->lower[j]));
      cairo_line_to(cr, x0, md_plot_axis_map(&p->y, km->lower[j]));
    }
    cairo_close_path(cr);
    cairo_fill(cr);
    i = run_end;
  }
}

/* Right-continuous steps: S = 1 before the first time, S(time_i) = surv_i,
 * each drop drawn as a vertical segment at time_i. */
static void draw_km(cairo_t *cr, const panel *p, const md_km_curve *km) {
  double survival = 1.0;
  cairo_move_to(cr, md_plot_axis_map(&p->x, curve_start(p)), md_plot_axis_map(&p->y, 1.0));
  for (size_t i = 0; i < km->n_times; i++) {
    double x = md_plot_axis_map(&p->x, km->time[i]);
    cairo_line_to(cr, x, md_plot_axis_map(&p->y, survival));
    survival = km->surv[i];
    cairo_line_to(cr, x, md_plot_axis_map(&p->y, survival));
  }
  cairo_set_line_width(cr, KM_WIDTH);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_MITER);
  cairo_stroke(cr);
}

static void draw_fit(cairo_t *cr, const panel *p, double lambda) {
  double start = curve_start(p);
  for (int k = 0; k <= FIT_SAMPLES; k++) {
    double fraction = (double)k / FIT_SAMPLES;
    double t = p->x.log ? start * pow(p->x.hi / start, fraction)
                        : start + fraction * (p->x.hi - start);
    double x = md_plot_axis_map(&p->x, t), y = md_plot_axis_map(&p->y, exp(-lambda * t));
    if (k == 0)
      cairo_move_to(cr, x, y);
    else
      cairo_line_to(cr, x, y);
  }
  double dashes[] = {9.0, 6.0};
  cairo_set_dash(cr, dashes, 2, 0.0);
  cairo_set_line_width(cr, FIT_WIDTH);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  cairo_stroke(cr);
  cairo_set_dash(cr, NULL, 0, 0.0);
}

/* A dotted drop line from S = 0.5 to the time axis, and a dot on S = 0.5. */
static void draw_half_life(cairo_t *cr, const panel *p, double half_life, md_plot_rgb color) {
  if (!(half_life > 0) || !md_plot_axis_contains(&p->x, half_life)) return;
  double x = md_plot_axis_map(&p->x, half_life), y = md_plot_axis_map(&p->y, 0.5);
  double dots[] = {2.0, 3.0};
  cairo_new_path(cr);
  md_plot_set_color(cr, color, 0.75);
  cairo_set_line_width(cr, 1.4);
  cairo_set_dash(cr, dots, 2, 0.0);
  stroke_line(cr, x, y, x, p->bottom);
  cairo_set_dash(cr, NULL, 0, 0.0);
  cairo_arc(cr, x, y, 5.5, 0, 2 * M_PI);
  md_plot_set_color(cr, color, 1.0);
  cairo_fill_preserve(cr);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_set_line_width(cr, 1.6);
  cairo_stroke(cr);
}

static void draw_censor_marks(cairo_t *cr, const panel *p, const md_km_curve *km) {
  if (!km->n_censor) return;
  cairo_set_line_width(cr, 1.6);
  for (size_t i = 0; i < km->n_times; i++) {
    if (!(km->n_censor[i] > 0)) continue;
    double x = md_plot_axis_map(&p->x, km->time[i]), y = md_plot_axis_map(&p->y, km->surv[i]);
    stroke_line(cr, x, y - 6.0, x, y + 6.0);
  }
}

static bool has_band(const md_km_curve *km) {
  return km && km->n_times > 0 && km->lower && km->upper;
}

static void draw_survival_data(cairo_t *cr, const panel *p, const md_plot_request *request,
                               const md_plot_regions *regions) {
  cairo_save(cr);
  clip_to(cr, p);
  /* Layers across regions: bands under every line, fits over the steps. */
  for (int layer = 0; layer < 5; layer++) {
    for (size_t i = 0; i < request->n_survival; i++) {
      const md_plot_survival_series *series = &request->survival[i];
      const md_km_curve *km = series->km;
      md_plot_rgb color = md_plot_regions_color(regions, series->region);
      md_plot_set_color(cr, color, layer == 0 ? BAND_ALPHA : 1.0);
      if (layer == 0 && has_band(km)) draw_band(cr, p, km);
      if (layer == 1 && km && km->n_times > 0) draw_km(cr, p, km);
      if (layer == 2 && isfinite(series->lambda) && series->lambda >= 0)
        draw_fit(cr, p, series->lambda);
      if (layer == 3) draw_half_life(cr, p, series->half_life, color);
      if (layer == 4 && request->censor_marks && km) draw_censor_marks(cr, p, km);
    }
  }
  cairo_restore(cr);
}

/* ---- attention panel ------------------------------------------------------------- */

/* NaN (and, on a log axis, values <= 0) break the line; a point with no
 * neighbour is drawn as a dot. */
static void draw_attention_series(cairo_t *cr, const panel *p,
                                  const md_plot_attention_series *series) {
  const double *values = series->mean_relative_attention;
  cairo_set_line_width(cr, ATTENTION_WIDTH);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  cairo_new_path(cr);
  for (size_t t = 0; t < series->n_steps; t++) {
    if (!attention_visible(values[t], p->y.log)) continue;
    double x = md_plot_axis_map(&p->x, (double)t), y = md_plot_axis_map(&p->y, values[t]);
    bool joined_before = t > 0 && attention_visible(values[t - 1], p->y.log);
    bool joined_after = t + 1 < series->n_steps && attention_visible(values[t + 1], p->y.log);
    if (joined_before) {
      cairo_line_to(cr, x, y);
    } else if (joined_after) {
      cairo_move_to(cr, x, y);
    } else {
      cairo_stroke(cr); /* the lines so far, before filling a lone dot */
      cairo_arc(cr, x, y, ATTENTION_WIDTH, 0, 2 * M_PI);
      cairo_fill(cr);
    }
  }
  cairo_stroke(cr);
}

static void draw_attention_data(cairo_t *cr, const panel *p, const md_plot_request *request,
                                const md_plot_regions *regions) {
  cairo_save(cr);
  clip_to(cr, p);
  for (size_t i = 0; i < request->n_attention; i++) {
    md_plot_set_color(cr, md_plot_regions_color(regions, request->attention[i].region), 1.0);
    draw_attention_series(cr, p, &request->attention[i]);
  }
  cairo_restore(cr);
}

/* ---- the figure ----------------------------------------------------------------- */

const char *md_plot_title(const md_plot_request *request) {
  if (request->title) return request->title;
  if (request->n_survival == 0) return "Attention by region";
  if (has_attention(request)) return "Token survival and attention by region";
  return "Token survival by region";
}

/* Splits the height below the title between the panels (the survival panel
 * gets the larger share) and sets their y axes. */
static size_t layout_rows(panel *panels, const md_plot_request *request, double top,
                          double bottom) {
  size_t n = 0;
  bool survival = request->n_survival > 0, attention = has_attention(request);
  double available = bottom - top - (survival && attention ? PANEL_GAP : 0.0);
  double survival_share = survival && attention ? 0.56 : 1.0;
  double row_top = top;
  for (int kind = 0; kind < 2; kind++) {
    if ((kind == 0 && !survival) || (kind == 1 && !attention)) continue;
    double row_height = available * (kind == 0 ? survival_share : 1.0 - survival_share);
    if (!survival) row_height = available;
    panel *p = &panels[n++];
    memset(p, 0, sizeof *p);
    p->top = row_top + PANEL_TITLE_HEIGHT;
    p->bottom = row_top + row_height - X_AXIS_HEIGHT;
    if (kind == 0)
      survival_axes(p, request);
    else
      attention_axes(p, request);
    row_top += row_height + PANEL_GAP;
  }
  return n;
}

cairo_status_t md_plot_draw(cairo_t *cr, const md_plot_request *request,
                            const md_plot_regions *regions, double width, double height) {
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);

  md_plot_font(cr, MD_PLOT_FONT_TITLE, true);
  md_plot_set_color(cr, ink, 1.0);
  char title[256];
  md_plot_fit_text(cr, md_plot_title(request),
                   width - 2 * MARGIN, title, sizeof title);
  md_plot_text(cr, MARGIN, MARGIN, title, 0.0, 0.0);

  md_plot_legend legend;
  md_plot_legend_measure(cr, request, regions, width * LEGEND_MAX_SHARE, &legend);

  panel panels[2];
  size_t n_panels = layout_rows(panels, request, MARGIN + TITLE_HEIGHT, height - MARGIN);
  /* One left edge for both panels, wide enough for either's tick labels. */
  double tick_labels = 0.0;
  for (size_t i = 0; i < n_panels; i++) {
    double widest = widest_tick_label(cr, &panels[i].y);
    if (widest > tick_labels) tick_labels = widest;
  }
  double y_title_x = MARGIN;
  double left = y_title_x + MD_PLOT_FONT_AXIS + 14.0 + tick_labels + TICK_LENGTH + 6.0;
  double right = width - MARGIN - legend.width - LEGEND_GAP;
  for (size_t i = 0; i < n_panels; i++) {
    panel *p = &panels[i];
    p->left = left;
    p->right = right;
    md_plot_axis_place(&p->y, p->bottom, p->top);
    bool survival = i == 0 && request->n_survival > 0;
    if (survival)
      survival_x_axis(p, request);
    else
      attention_x_axis(p, request);
    md_plot_axis_place(&p->x, p->left, p->right);

    draw_grid(cr, p);
    if (survival) {
      draw_reference(cr, p, 0.5);
      draw_survival_data(cr, p, request, regions);
    } else {
      draw_attention_data(cr, p, request, regions);
      draw_reference(cr, p, 1.0);
      label_reference(cr, p, 1.0, "uniform share", panels[0].top + legend.height,
                      width - MARGIN - p->right);
    }
    draw_axes(cr, p, y_title_x);
  }
  md_plot_legend_draw(cr, request, regions, &legend, width - MARGIN - legend.width,
                      panels[0].top, height - MARGIN - panels[0].top);
  return cairo_status(cr);
}
