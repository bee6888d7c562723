/* Figures for a reader to take in at a glance, drawn with cairo: survival
 * curves per region (Kaplan-Meier steps with their band and the fitted
 * exponential over them, half-life marked) and, when attention data are
 * given, a second panel of mean uniform-relative attention against decode
 * step. The format follows the file name: .png, .svg or .pdf.
 *
 * Every field added after the first version of this header has zero as its
 * default, so requests built with designated initializers keep working.
 *
 * Layout: a title on top, the survival panel, the attention panel stacked
 * under it (when given), and one legend in a column on the right shared by
 * both panels, so that it never covers a curve. Colours are fixed per region
 * (Okabe-Ito palette for the seven known regions, see io/plot/plot_style.c),
 * the same in both panels. */
#ifndef MD_IO_PLOT_PLOT_H
#define MD_IO_PLOT_PLOT_H

#include <stdbool.h>
#include <stddef.h>

#include "survival/km.h"
#include "base/error.h"

typedef struct md_plot_survival_series {
  const char *region;       /* legend label; required, unique within the request */
  const md_km_curve *km;    /* may be NULL (no data). Reads n_times, time, surv,
                             * lower/upper (the band; both NULL: no band; NaN
                             * entries break it), n_censor (censoring marks;
                             * may be NULL) and level (band legend). */
  double lambda;            /* fitted exponential rate; NaN when not estimable */
  double half_life;         /* ln 2 / lambda; NaN when not estimable */
  bool pinned;              /* drawn, and marked "(pinned)" in the legend */
  /* Interval of the half-life, shown in the legend as "(lo–hi)" when both
   * ends are finite and 0 < lo <= hi; the zero default hides it. */
  double half_life_ci[2];
} md_plot_survival_series;

typedef struct md_plot_attention_series {
  const char *region;
  size_t n_steps;           /* decode steps 0 .. n_steps-1 */
  const double *mean_relative_attention; /* [n_steps]; NaN where no token of the region is visible */
} md_plot_attention_series;

/* Value axis of the attention panel. */
typedef enum md_plot_scale {
  MD_PLOT_SCALE_AUTO = 0, /* logarithmic when every value is positive and they
                           * span more than a factor of 30, else linear */
  MD_PLOT_SCALE_LINEAR,
  MD_PLOT_SCALE_LOG,      /* values <= 0 then break the line like NaN */
} md_plot_scale;

typedef struct md_plot_request {
  const md_plot_survival_series *survival;
  size_t n_survival;
  const md_plot_attention_series *attention; /* NULL: survival panel only */
  size_t n_attention;
  bool log_time;            /* logarithmic decode-step axis (survival panel):
                             * decade ticks, starting at the largest 1-2-5
                             * value <= the smallest positive time */
  const char *title;        /* NULL for the default title */
  /* Figure size in pixels (1/96 in); 0 for the defaults: 1200 x 700, or
   * 1200 x 1150 with the attention panel. At least 480 x 320. PNG files
   * have exactly this many pixels; SVG states the size in px; PDF pages
   * have the same physical size (1 px = 0.75 pt). */
  int width;
  int height;
  bool censor_marks;        /* a small vertical tick where tokens were censored */
  md_plot_scale attention_scale;
  /* Title of the attention panel's horizontal axis; NULL: "decode step".
   * Per-age curves say what their step counts from. */
  const char *attention_x_title;
} md_plot_request;

/* Writes the figure to `path` atomically; the extension picks the format
 * (.png, .svg, .pdf; case does not matter). Errors, each naming `path`:
 * - MD_E_UNSUPPORTED: another extension (the message lists the supported ones);
 * - MD_E_INVALID: an empty or inconsistent request (no series, a repeated or
 *   missing region name, KM times not positive and increasing, S outside
 *   [0, 1], half a band), a size out of range, or what cairo rejects (a PNG
 *   side over 32767 px, a label that is not UTF-8);
 * - MD_E_IO: the file cannot be created, written or renamed, or cairo fails
 *   otherwise (cairo's own message is quoted); MD_E_NOMEM.
 * On error no file is created, no temporary file is left, and an existing
 * `path` is untouched. The region colours are those of io/plot/plot_style.c. */
md_status md_plot_write(const char *path, const md_plot_request *request, md_error *err);

/* Checks only that `path` has a supported extension, so that a command can
 * reject "--plot out.jpg" before doing the work that precedes the figure. */
md_status md_plot_check_path(const char *path, md_error *err);

#endif
