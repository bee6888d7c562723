/* The eval figure (io/plot/plot_eval.h): recall per region and policy, one panel
 * per budget, grouped bars with the full-cache ceiling drawn over them. */
#include "io/plot/plot_eval.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/plot/plot_internal.h"

/* The legend's column holds the longest policy name of the table (16
 * characters: memdecay-nodecay) beside its swatch. */
enum { WIDTH = 1400, PANEL_HEIGHT = 380, TITLE_HEIGHT = 70, LEGEND_WIDTH = 250 };

/* A policy's colour: the one given (eval's policy table: Okabe-Ito, MemDecay
 * in the strongest colours so that it stands out), else a blue. */
static md_plot_rgb policy_color(const md_plot_policy_color *colors, size_t n, const char *policy) {
  for (size_t i = 0; colors && i < n; i++)
    if (colors[i].policy && !strcmp(colors[i].policy, policy))
      return (md_plot_rgb){colors[i].rgb[0], colors[i].rgb[1], colors[i].rgb[2]};
  return (md_plot_rgb){0.0, 0.447, 0.698};
}

typedef struct figure {
  const md_eval_results *r;
  double budgets[MD_EVAL_MAX_RUNS];
  size_t n_budgets;
  const char *policies[MD_EVAL_MAX_RUNS];
  size_t n_policies;
  size_t regions[64];          /* region indices with probes */
  size_t n_regions;
  char title[256];
  const md_plot_policy_color *colors;
  size_t n_colors;
} figure;

static double share(const md_eval_cell *c) {
  return c->total ? (double)c->recalled / (double)c->total : NAN;
}

/* A black-edged white diamond of half-width h centred at (x, y). */
static void diamond(cairo_t *cr, double x, double y, double h) {
  cairo_move_to(cr, x, y - h);
  cairo_line_to(cr, x + h, y);
  cairo_line_to(cr, x, y + h);
  cairo_line_to(cr, x - h, y);
  cairo_close_path(cr);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_fill_preserve(cr);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1.5);
  cairo_stroke(cr);
}

static void draw_panel(cairo_t *cr, const figure *f, size_t b, double x0, double y0, double w,
                       double h) {
  const md_eval_results *r = f->r;
  double left = x0 + 70, right = x0 + w - 10, top = y0 + 40, bottom = y0 + h - 60;
  md_plot_font(cr, MD_PLOT_FONT_PANEL, true);
  cairo_set_source_rgb(cr, 0, 0, 0);
  char title[96];
  if (f->n_budgets)
    snprintf(title, sizeof title, "budget %g%% of each episode", 100.0 * f->budgets[b]);
  else
    snprintf(title, sizeof title, "full cache");
  md_plot_text(cr, left, y0 + 12, title, 0.0, 1.0);
  md_plot_axis axis;
  md_plot_axis_linear(&axis, 0.0, 1.0, bottom - top, 30, true);
  md_plot_axis_place(&axis, bottom, top);
  md_plot_font(cr, MD_PLOT_FONT_TICK, false);
  cairo_set_line_width(cr, 1.0);
  for (size_t t = 0; t < axis.n_ticks; t++) {
    if (!axis.ticks[t].labelled) continue;
    double y = md_plot_axis_map(&axis, axis.ticks[t].value);
    cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
    cairo_move_to(cr, left, y);
    cairo_line_to(cr, right, y);
    cairo_stroke(cr);
    char label[32];
    snprintf(label, sizeof label, "%.0f%%", 100.0 * axis.ticks[t].value);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    md_plot_text(cr, left - 8, y, label, 1.0, 0.5);
  }
  size_t groups = f->n_regions ? f->n_regions : 1;
  double group_w = (right - left) / (double)groups;
  size_t bars = f->n_policies ? f->n_policies : 1;
  double bar_w = group_w * 0.8 / (double)bars;
  for (size_t gi = 0; gi < f->n_regions; gi++) {
    size_t g = f->regions[gi];
    double gx = left + group_w * (double)gi + group_w * 0.1;
    for (size_t p = 0; p < f->n_policies; p++) {
      int run = f->n_budgets ? md_eval_run_index(r, f->policies[p], f->budgets[b]) : -1;
      if (run < 0) continue;
      double v = share(md_eval_cell_at(r, (size_t)run, g));
      if (!isfinite(v)) continue;
      double y = md_plot_axis_map(&axis, v);
      md_plot_set_color(cr, policy_color(f->colors, f->n_colors, f->policies[p]), 1.0);
      cairo_rectangle(cr, gx + bar_w * (double)p + 1, y, bar_w - 2, bottom - y);
      cairo_fill(cr);
    }
    /* retention: a diamond per bar at the share of the answers' tokens kept */
    for (size_t p = 0; p < f->n_policies; p++) {
      int run = f->n_budgets ? md_eval_run_index(r, f->policies[p], f->budgets[b]) : -1;
      if (run < 0) continue;
      const md_eval_cell *c = md_eval_cell_at(r, (size_t)run, g);
      if (!c->answer_tokens) continue;
      double y = md_plot_axis_map(&axis, (double)c->answer_kept / (double)c->answer_tokens);
      diamond(cr, gx + bar_w * ((double)p + 0.5), y, 6.0);
    }
    /* the full-cache ceiling: a black bar across the group */
    double ceiling = share(md_eval_cell_at(r, 0, g));
    if (isfinite(ceiling)) {
      double y = md_plot_axis_map(&axis, ceiling);
      cairo_set_source_rgb(cr, 0, 0, 0);
      cairo_set_line_width(cr, 3.0);
      cairo_move_to(cr, gx - 4, y);
      cairo_line_to(cr, gx + group_w * 0.8 + 4, y);
      cairo_stroke(cr);
    }
    md_plot_font(cr, MD_PLOT_FONT_AXIS, r->pinned[g]);
    cairo_set_source_rgb(cr, 0, 0, 0);
    md_plot_text(cr, gx + group_w * 0.4, bottom + 12, r->regions[g], 0.5, 0.0);
    if (r->pinned[g]) {
      md_plot_font(cr, MD_PLOT_FONT_DETAIL, false);
      md_plot_text(cr, gx + group_w * 0.4, bottom + 36, "(pinned)", 0.5, 0.0);
    }
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1.0);
  cairo_move_to(cr, left, top);
  cairo_line_to(cr, left, bottom);
  cairo_line_to(cr, right, bottom);
  cairo_stroke(cr);
}

static cairo_status_t draw(cairo_t *cr, void *context, double width, double height) {
  const figure *f = context;
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  /* A long model or traces name would run the title past the right edge:
   * it is set smaller until it fits. */
  md_plot_font(cr, MD_PLOT_FONT_TITLE, true);
  cairo_text_extents_t extents;
  cairo_text_extents(cr, f->title, &extents);
  if (extents.x_advance > width - 48)
    md_plot_font(cr, MD_PLOT_FONT_TITLE * (width - 48) / extents.x_advance, true);
  cairo_set_source_rgb(cr, 0, 0, 0);
  md_plot_text(cr, 24, 40, f->title, 0.0, 1.0);
  size_t panels = f->n_budgets ? f->n_budgets : 1;
  double plot_w = width - LEGEND_WIDTH;
  double panel_h = (height - TITLE_HEIGHT) / (double)panels;
  for (size_t b = 0; b < panels; b++)
    draw_panel(cr, f, b, 0, TITLE_HEIGHT + panel_h * (double)b, plot_w, panel_h);
  /* legend */
  double lx = plot_w + 20, ly = TITLE_HEIGHT + 40;
  md_plot_font(cr, MD_PLOT_FONT_LEGEND, false);
  for (size_t p = 0; p < f->n_policies; p++) {
    md_plot_set_color(cr, policy_color(f->colors, f->n_colors, f->policies[p]), 1.0);
    cairo_rectangle(cr, lx, ly + 30.0 * (double)p, 22, 18);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    md_plot_text(cr, lx + 32, ly + 30.0 * (double)p + 9, f->policies[p], 0.0, 0.5);
  }
  double y = ly + 30.0 * (double)f->n_policies + 9;
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 3.0);
  cairo_move_to(cr, lx, y);
  cairo_line_to(cr, lx + 22, y);
  cairo_stroke(cr);
  md_plot_text(cr, lx + 32, y, "full cache", 0.0, 0.5);
  y += 30;
  diamond(cr, lx + 11, y, 7.0);
  md_plot_set_color(cr, (md_plot_rgb){0, 0, 0}, 1.0);
  md_plot_text(cr, lx + 32, y - 9, "answer tokens", 0.0, 0.5);
  md_plot_text(cr, lx + 32, y + 11, "still cached", 0.0, 0.5);
  return cairo_status(cr);
}

md_status md_plot_eval(const char *path, const md_eval_results *r,
                       const md_plot_policy_color *colors, size_t n_colors, md_error *err) {
  md_status s = md_plot_check_path(path, err);
  if (s != MD_OK) return s;
  if (r->n_runs == 0 || r->n_regions == 0)
    return md_fail(err, MD_E_INVALID, "%s: no results to draw", path);
  figure f = {.r = r, .colors = colors, .n_colors = n_colors};
  for (size_t run = 1; run < r->n_runs; run++) {
    bool seen = false;
    for (size_t b = 0; b < f.n_budgets; b++) seen |= f.budgets[b] == r->run_budget[run];
    if (!seen) f.budgets[f.n_budgets++] = r->run_budget[run];
    seen = false;
    for (size_t p = 0; p < f.n_policies; p++) seen |= !strcmp(f.policies[p], r->run_policy[run]);
    if (!seen) f.policies[f.n_policies++] = r->run_policy[run];
  }
  for (size_t g = 0; g < r->n_regions && f.n_regions < 64; g++)
    if (md_eval_cell_at(r, 0, g)->total > 0) f.regions[f.n_regions++] = g;
  const char *traces = r->traces_path ? strrchr(r->traces_path, '/') : NULL;
  traces = traces ? traces + 1 : r->traces_path;
  snprintf(f.title, sizeof f.title, "Probe recall by region: %s on %s, %zu episode%s",
           r->model_name ? r->model_name : "model", traces ? traces : "traces", r->n_episodes,
           r->n_episodes == 1 ? "" : "s");
  size_t panels = f.n_budgets ? f.n_budgets : 1;
  int height = TITLE_HEIGHT + PANEL_HEIGHT * (int)panels;
  /* Tall enough for the legend (draw: a 30-pixel row per policy from 40
   * below the title, then the full cache's and the diamond's rows and a
   * margin), which many policies over one budget outgrow. */
  int legend_bottom = TITLE_HEIGHT + 40 + 30 * (int)f.n_policies + 9 + 30 + 11 + 20;
  if (legend_bottom > height) height = legend_bottom;
  return md_plot_render_file(path, f.title, draw, &f, 1.0, WIDTH, height, err);
}
