/* The legend column: one entry per region (swatch, name, "(pinned)", the
 * half-life with its interval or "half-life n/a"), then a key to the line
 * styles that appear in the figure. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/plot/plot_internal.h"

#define SWATCH_WIDTH 38.0
#define SWATCH_GAP 10.0         /* between swatch and text */
#define NAME_LINE 23.0          /* height of an entry's first line */
#define DETAIL_LINE 20.0        /* height of its half-life line */
#define ENTRY_GAP 9.0
#define KEY_GAP 18.0            /* between the entries and the key */
#define KEY_LINE 24.0
#define TEXT_X (SWATCH_WIDTH + SWATCH_GAP)

static const md_plot_rgb key_ink = {0.40, 0.40, 0.40};
static const md_plot_rgb detail_ink = {0.30, 0.30, 0.30};

static void entry_name(const md_plot_regions *regions, size_t i, char *buf, size_t size) {
  const md_plot_survival_series *series = regions->survival[i];
  snprintf(buf, size, "%s%s", regions->names[i], series && series->pinned ? " (pinned)" : "");
}

static bool half_life_ci_shown(const md_plot_survival_series *series) {
  const double *ci = series->half_life_ci;
  return isfinite(series->half_life) && isfinite(ci[0]) && isfinite(ci[1]) && ci[0] > 0 &&
         ci[0] <= ci[1];
}

static void entry_detail(const md_plot_survival_series *series, char *buf, size_t size) {
  if (!isfinite(series->half_life) || !(series->half_life > 0)) {
    snprintf(buf, size, "half-life n/a");
    return;
  }
  char value[32], lo[32], hi[32];
  md_plot_format_steps(series->half_life, value, sizeof value);
  if (!half_life_ci_shown(series)) {
    snprintf(buf, size, "half-life %s steps", value);
    return;
  }
  md_plot_format_steps(series->half_life_ci[0], lo, sizeof lo);
  md_plot_format_steps(series->half_life_ci[1], hi, sizeof hi);
  /* U+2013 EN DASH between the ends of a range. */
  snprintf(buf, size, "half-life %s steps (%s\u2013%s)", value, lo, hi);
}

static double entry_height(const md_plot_regions *regions, size_t i) {
  return NAME_LINE + (regions->survival[i] ? DETAIL_LINE : 0.0) + ENTRY_GAP;
}

typedef struct key_item {
  int kind;  /* 0 KM line, 1 band, 2 fit, 3 half-life, 4 censoring */
  char text[64];
} key_item;

static size_t key_items(const md_plot_legend *legend, key_item *items) {
  size_t n = 0;
  if (legend->show_km) items[n++] = (key_item){0, "Kaplan-Meier estimate"};
  if (legend->show_band) {
    items[n] = (key_item){1, ""};
    snprintf(items[n].text, sizeof items[n].text, "%g%% pointwise band",
             100.0 * legend->band_level);
    n++;
  }
  if (legend->show_fit) items[n++] = (key_item){2, "exponential fit"};
  if (legend->show_half_life) items[n++] = (key_item){3, "half-life (S = 0.5)"};
  if (legend->show_censor) items[n++] = (key_item){4, "censored"};
  return n;
}

static void scan_survival(const md_plot_request *request, md_plot_legend *legend) {
  for (size_t i = 0; i < request->n_survival; i++) {
    const md_plot_survival_series *series = &request->survival[i];
    const md_km_curve *km = series->km;
    if (km && km->n_times > 0) legend->show_km = true;
    if (km && km->n_times > 0 && km->lower && km->upper) {
      if (!legend->show_band) legend->band_level = km->level;
      legend->show_band = true;
    }
    if (isfinite(series->lambda) && series->lambda >= 0) legend->show_fit = true;
    if (isfinite(series->half_life) && series->half_life > 0) legend->show_half_life = true;
    if (request->censor_marks && km && km->n_censor) legend->show_censor = true;
  }
}

void md_plot_legend_measure(cairo_t *cr, const md_plot_request *request,
                            const md_plot_regions *regions, double max_width,
                            md_plot_legend *legend) {
  memset(legend, 0, sizeof *legend);
  scan_survival(request, legend);
  char text[256];
  double widest = 0.0, height = 0.0;
  for (size_t i = 0; i < regions->n; i++) {
    md_plot_font(cr, MD_PLOT_FONT_LEGEND, false);
    entry_name(regions, i, text, sizeof text);
    widest = fmax(widest, md_plot_text_width(cr, text));
    if (regions->survival[i]) {
      md_plot_font(cr, MD_PLOT_FONT_DETAIL, false);
      entry_detail(regions->survival[i], text, sizeof text);
      widest = fmax(widest, md_plot_text_width(cr, text));
    }
    height += entry_height(regions, i);
  }
  if (request->n_survival > 0) {
    key_item items[5];
    size_t n_items = key_items(legend, items);
    md_plot_font(cr, MD_PLOT_FONT_DETAIL, false);
    for (size_t i = 0; i < n_items; i++)
      widest = fmax(widest, md_plot_text_width(cr, items[i].text));
    height += KEY_GAP + n_items * KEY_LINE;
  }
  legend->width = fmin(TEXT_X + widest, max_width);
  legend->height = height;
}

/* ---- drawing ------------------------------------------------------------------- */

static void swatch_line(cairo_t *cr, double x, double y, const double *dashes, int n_dashes) {
  cairo_set_dash(cr, dashes, n_dashes, 0.0);
  cairo_move_to(cr, x, y);
  cairo_line_to(cr, x + SWATCH_WIDTH, y);
  cairo_stroke(cr);
  cairo_set_dash(cr, NULL, 0, 0.0);
}

static void swatch_band(cairo_t *cr, double x, double y, md_plot_rgb color) {
  md_plot_set_color(cr, color, 0.16);
  cairo_rectangle(cr, x, y - 7.0, SWATCH_WIDTH, 14.0);
  cairo_fill(cr);
}

static void draw_entry(cairo_t *cr, const md_plot_regions *regions, size_t i,
                       const md_plot_legend *legend, double x, double y) {
  char text[256];
  md_plot_rgb color = regions->colors[i];
  double middle = y + NAME_LINE / 2;
  const md_plot_survival_series *series = regions->survival[i];
  bool has_km = series && series->km && series->km->n_times > 0;
  if (has_km && series->km->lower && series->km->upper) swatch_band(cr, x, middle, color);
  /* The swatch shows what the region has on the plot: a fit alone is
   * dashed. */
  static const double fit_dashes[] = {9.0, 6.0};
  bool fit_only = series && !has_km && isfinite(series->lambda) && series->lambda >= 0;
  md_plot_set_color(cr, color, 1.0);
  cairo_set_line_width(cr, fit_only ? 2.2 : 2.8);
  swatch_line(cr, x, middle, fit_only ? fit_dashes : NULL, fit_only ? 2 : 0);

  double text_width = legend->width - TEXT_X;
  md_plot_font(cr, MD_PLOT_FONT_LEGEND, false);
  md_plot_set_color(cr, (md_plot_rgb){0.1, 0.1, 0.1}, 1.0);
  entry_name(regions, i, text, sizeof text);
  char fitted[256];
  md_plot_fit_text(cr, text, text_width, fitted, sizeof fitted);
  md_plot_text(cr, x + TEXT_X, middle, fitted, 0.0, 0.5);
  if (!series) return;
  md_plot_font(cr, MD_PLOT_FONT_DETAIL, false);
  md_plot_set_color(cr, detail_ink, 1.0);
  entry_detail(series, text, sizeof text);
  md_plot_fit_text(cr, text, text_width, fitted, sizeof fitted);
  md_plot_text(cr, x + TEXT_X, y + NAME_LINE + DETAIL_LINE / 2 - 2.0, fitted, 0.0, 0.5);
}

static void draw_key_swatch(cairo_t *cr, int kind, double x, double y) {
  static const double dashes[] = {9.0, 6.0};
  md_plot_set_color(cr, key_ink, 1.0);
  switch (kind) {
    case 0:
      cairo_set_line_width(cr, 2.6);
      swatch_line(cr, x, y, NULL, 0);
      break;
    case 1:
      swatch_band(cr, x, y, (md_plot_rgb){0.25, 0.25, 0.25});
      break;
    case 2:
      cairo_set_line_width(cr, 2.2);
      swatch_line(cr, x, y, dashes, 2);
      break;
    case 3:
      cairo_new_path(cr); /* drop the current point the text left behind */
      cairo_arc(cr, x + SWATCH_WIDTH / 2, y, 5.5, 0, 2 * M_PI);
      cairo_fill(cr);
      break;
    default:
      cairo_set_line_width(cr, 1.6);
      cairo_move_to(cr, x + SWATCH_WIDTH / 2, y - 6.0);
      cairo_line_to(cr, x + SWATCH_WIDTH / 2, y + 6.0);
      cairo_stroke(cr);
  }
}

static void draw_key(cairo_t *cr, const md_plot_legend *legend, double x, double y) {
  key_item items[5];
  size_t n_items = key_items(legend, items);
  md_plot_set_color(cr, (md_plot_rgb){0.85, 0.85, 0.85}, 1.0);
  cairo_set_line_width(cr, 1.0);
  cairo_move_to(cr, x, floor(y - KEY_GAP / 2) + 0.5);
  cairo_line_to(cr, x + legend->width, floor(y - KEY_GAP / 2) + 0.5);
  cairo_stroke(cr);
  md_plot_font(cr, MD_PLOT_FONT_DETAIL, false);
  for (size_t i = 0; i < n_items; i++) {
    double middle = y + i * KEY_LINE + KEY_LINE / 2;
    draw_key_swatch(cr, items[i].kind, x, middle);
    md_plot_set_color(cr, detail_ink, 1.0);
    md_plot_text(cr, x + TEXT_X, middle, items[i].text, 0.0, 0.5);
  }
}

void md_plot_legend_draw(cairo_t *cr, const md_plot_request *request,
                         const md_plot_regions *regions, const md_plot_legend *legend,
                         double x, double y, double max_height) {
  key_item items[5];
  double key_height =
      request->n_survival > 0 ? KEY_GAP + key_items(legend, items) * KEY_LINE : 0.0;
  double room = max_height - key_height;
  double cursor = y;
  size_t i = 0;
  for (; i < regions->n; i++) {
    bool last = i + 1 == regions->n;
    /* Keep a line free for "+ N more" unless this entry is the last. */
    double needed = entry_height(regions, i) + (last ? 0.0 : NAME_LINE);
    if (cursor - y + needed > room) break;
    draw_entry(cr, regions, i, legend, x, cursor);
    cursor += entry_height(regions, i);
  }
  if (i < regions->n) {
    char more[64];
    snprintf(more, sizeof more, "+ %zu more", regions->n - i);
    md_plot_font(cr, MD_PLOT_FONT_LEGEND, false);
    md_plot_set_color(cr, detail_ink, 1.0);
    md_plot_text(cr, x + TEXT_X, cursor + NAME_LINE / 2, more, 0.0, 0.5);
    cursor += NAME_LINE + ENTRY_GAP;
  }
  if (request->n_survival > 0) draw_key(cr, legend, x, cursor + KEY_GAP);
}
