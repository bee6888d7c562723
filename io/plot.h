/* Figures for a reader to take in at a glance, drawn with cairo: survival
 * curves per region (Kaplan-Meier steps with their band and the fitted
 * exponential over them, half-life marked) and, when attention data are
 * given, a second panel of mean uniform-relative attention against decode
 * step. The format follows the file name: .png, .svg or .pdf. */
#ifndef MD_IO_PLOT_H
#define MD_IO_PLOT_H

#include <stdbool.h>
#include <stddef.h>

#include "fit/km.h"
#include "io/error.h"

typedef struct md_plot_survival_series {
  const char *region;       /* legend label */
  const md_km_curve *km;    /* may be NULL (no data) */
  double lambda;            /* fitted exponential rate; NaN when not estimable */
  double half_life;         /* ln 2 / lambda; NaN when not estimable */
  bool pinned;              /* drawn, and marked "(pinned)" in the legend */
} md_plot_survival_series;

typedef struct md_plot_attention_series {
  const char *region;
  size_t n_steps;           /* decode steps 0 .. n_steps-1 */
  const double *mean_relative_attention; /* [n_steps]; NaN where no token of the region is visible */
} md_plot_attention_series;

typedef struct md_plot_request {
  const md_plot_survival_series *survival;
  size_t n_survival;
  const md_plot_attention_series *attention; /* NULL: survival panel only */
  size_t n_attention;
  bool log_time;            /* logarithmic decode-step axis */
  const char *title;        /* NULL for the default title */
} md_plot_request;

/* Writes the figure to `path` atomically; the extension picks the format. */
md_status md_plot_write(const char *path, const md_plot_request *request, md_error *err);

#endif
