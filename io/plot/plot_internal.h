/* Pieces of io/plot shared between its files and its tests: the palette,
 * axes (range, ticks, labels, mapping) and the drawing entry point. Not a
 * public interface: callers use io/plot/plot.h. All lengths are in figure pixels
 * (1/96 in); the PDF surface is scaled to points before drawing. */
#ifndef MD_IO_PLOT_PLOT_INTERNAL_H
#define MD_IO_PLOT_PLOT_INTERNAL_H

#include <cairo.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "io/plot/plot.h"

/* ---- files (io/plot/plot.c) ----------------------------------------------------- */

/* Draws a figure of width x height layout pixels at (0, 0). */
typedef cairo_status_t (*md_plot_draw_fn)(cairo_t *cr, void *context, double width,
                                          double height);

/* Writes a figure of width x height pixels to `path` atomically, in the
 * format its extension names, by calling `draw` on a surface scaled by
 * layout_scale (1 draws at the figure's own size); `title` goes into PDF
 * metadata. Errors as md_plot_write's. */
md_status md_plot_render_file(const char *path, const char *title, md_plot_draw_fn draw,
                              void *context, double layout_scale, int width, int height,
                              md_error *err);

/* ---- palette (io/plot/plot_style.c) ------------------------------------------ */

typedef struct md_plot_rgb {
  double r, g, b; /* 0..1 */
} md_plot_rgb;

/* The fixed colour of one of the seven known regions; false for any other
 * name. */
bool md_plot_known_region_color(const char *region, md_plot_rgb *color);

/* The colour for the rank-th other region (rank 0, 1, ... in name order);
 * cycles after the extra palette runs out. */
md_plot_rgb md_plot_extra_region_color(size_t rank);

/* Every distinct region of a request, in order of first appearance
 * (survival series, then attention series), with its colour. */
typedef struct md_plot_regions {
  size_t n;
  const char **names;       /* [n], borrowed from the request */
  md_plot_rgb *colors;      /* [n] */
  const md_plot_survival_series **survival; /* [n], NULL when the region has no survival series */
} md_plot_regions;

md_status md_plot_regions_build(const md_plot_request *request, md_plot_regions *regions,
                                md_error *err);
void md_plot_regions_free(md_plot_regions *regions);
md_plot_rgb md_plot_regions_color(const md_plot_regions *regions, const char *region);

/* ---- axes (io/plot/plot_axis.c) ----------------------------------------------- */

#define MD_PLOT_MAX_TICKS 64

typedef struct md_plot_tick {
  double value;
  bool labelled;            /* major tick with a label and a grid line */
} md_plot_tick;

typedef struct md_plot_axis {
  bool log;
  double lo, hi;            /* data values at the two ends of the axis */
  double px_lo, px_hi;      /* where lo and hi are drawn (y: px_lo is the bottom) */
  double step;              /* linear axes: tick spacing, sets the label decimals */
  size_t n_ticks;
  md_plot_tick ticks[MD_PLOT_MAX_TICKS];
} md_plot_axis;

/* The smallest of 1, 2, 5 x 10^k that is >= raw (raw > 0). */
double md_plot_nice_step(double raw);
/* The largest 1-2-5 value <= value, the smallest >= value (value > 0). */
double md_plot_nice_floor(double value);
double md_plot_nice_ceil(double value);

/* A linear axis over [lo, hi] with 1-2-5 ticks at least min_spacing_px
 * apart on an axis length_px long. round_hi moves hi up to the next tick. */
void md_plot_axis_linear(md_plot_axis *axis, double lo, double hi, double length_px,
                         double min_spacing_px, bool round_hi);

/* A logarithmic axis from the 1-2-5 value at or below lo to hi (0 < lo <=
 * hi), or to the 1-2-5 value at or above hi with round_hi: labelled
 * decades, unlabelled 2..9 multiples; the 2 and 5 multiples are labelled
 * too when the decades are wide enough. */
void md_plot_axis_log(md_plot_axis *axis, double lo, double hi, double length_px,
                      double min_spacing_px, bool round_hi);

/* Places the axis on the figure; lo maps to px_lo, hi to px_hi. */
void md_plot_axis_place(md_plot_axis *axis, double px_lo, double px_hi);
double md_plot_axis_map(const md_plot_axis *axis, double value);
bool md_plot_axis_contains(const md_plot_axis *axis, double value);

/* The label of a tick: as many decimals as the step needs, no exponent
 * below one million. */
void md_plot_tick_label(const md_plot_axis *axis, double value, char *buf, size_t size);

/* ---- text and style (io/plot/plot_style.c) ------------------------------------ */

/* Font sizes in figure pixels: big enough to read when a 1200 px wide PNG is
 * shown scaled down in a README. */
#define MD_PLOT_FONT_TITLE 27.0
#define MD_PLOT_FONT_PANEL 20.0
#define MD_PLOT_FONT_AXIS 18.0
#define MD_PLOT_FONT_TICK 16.0
#define MD_PLOT_FONT_LEGEND 17.0
#define MD_PLOT_FONT_DETAIL 15.0

/* "sans-serif" through fontconfig: DejaVu Sans on a minimal Debian (it comes
 * with fontconfig-config), whatever the system prefers elsewhere. */
void md_plot_font(cairo_t *cr, double size, bool bold);
double md_plot_text_width(cairo_t *cr, const char *text);
/* Draws text with (x, y) at the fraction halign of its width (0 left, 0.5
 * centre, 1 right) and valign of the height of its capitals (0 top,
 * 0.5 middle, 1 baseline). */
void md_plot_text(cairo_t *cr, double x, double y, const char *text, double halign,
                  double valign);
/* Shortens text with a trailing "..." until it fits max_width. */
void md_plot_fit_text(cairo_t *cr, const char *text, double max_width, char *buf, size_t size);
void md_plot_set_color(cairo_t *cr, md_plot_rgb color, double alpha);
/* "165", "14.8", "1.23": three significant digits without an exponent. */
void md_plot_format_steps(double value, char *buf, size_t size);

/* ---- legend (io/plot/plot_legend.c) -------------------------------------------- */

typedef struct md_plot_legend {
  double width, height;     /* of the whole block */
  bool show_km, show_band, show_fit, show_half_life, show_censor;
  double band_level;        /* for "95% pointwise band" */
} md_plot_legend;

/* Measures the legend that md_plot_legend_draw draws within max_width. */
void md_plot_legend_measure(cairo_t *cr, const md_plot_request *request,
                            const md_plot_regions *regions, double max_width,
                            md_plot_legend *legend);
/* Draws it with its top-left corner at (x, y); entries that do not fit
 * max_height are summarised as "+ N more". */
void md_plot_legend_draw(cairo_t *cr, const md_plot_request *request,
                         const md_plot_regions *regions, const md_plot_legend *legend,
                         double x, double y, double max_height);

/* ---- drawing (io/plot/plot_draw.c) ----------------------------------------------- */

/* Default figure sizes, and the smallest that holds the layout at full
 * font size (io/plot/plot.h documents the defaults). */
#define MD_PLOT_DEFAULT_WIDTH 1200
#define MD_PLOT_DEFAULT_HEIGHT 700
#define MD_PLOT_DEFAULT_HEIGHT_TWO_PANELS 1150
#define MD_PLOT_COMPACT_WIDTH 900.0
#define MD_PLOT_COMPACT_HEIGHT 520.0
#define MD_PLOT_COMPACT_HEIGHT_TWO_PANELS 860.0

bool md_plot_two_panels(const md_plot_request *request);

/* Figure pixels per layout unit. The layout is designed for the default
 * size: a figure k times as large in both directions is drawn k times as
 * large (a high-resolution PNG), one larger in one direction only gets more
 * room at the same font size, and one smaller than the compact size is
 * shrunk just enough to hold the layout. */
double md_plot_drawing_scale(const md_plot_request *request, double width, double height);

/* The request's title, or the default for the panels it has. */
const char *md_plot_title(const md_plot_request *request);

/* Draws the whole figure onto `cr`, whose user space is width x height
 * figure pixels. Returns cairo's status (CAIRO_STATUS_SUCCESS or the first
 * error). */
cairo_status_t md_plot_draw(cairo_t *cr, const md_plot_request *request,
                            const md_plot_regions *regions, double width, double height);

#endif
