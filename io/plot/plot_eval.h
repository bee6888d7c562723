/* The figure of `eval --plot`: probe recall per region (x, grouped) and
 * policy (bars, one colour each), one panel per budget, with the
 * full-cache ceiling drawn as a black line across each region's group, a
 * white diamond on each bar at the share of the answers' tokens still cached
 * when the questions were asked (retention), and pinned regions labelled in
 * bold. Same formats and atomic writing as
 * io/plot/plot.h (.png, .svg, .pdf). */
#ifndef MD_IO_PLOT_PLOT_EVAL_H
#define MD_IO_PLOT_PLOT_EVAL_H

#include <stddef.h>

#include "base/error.h"
#include "io/formats/eval_results.h"

/* A policy's colour: sRGB components in [0, 1]. eval passes those of its
 * policy table (runtime/policy_table.h: each class's color); a policy of the
 * results without one is drawn in a blue. */
typedef struct md_plot_policy_color {
  const char *policy;
  double rgb[3];
} md_plot_policy_color;

md_status md_plot_eval(const char *path, const md_eval_results *results,
                       const md_plot_policy_color *colors, size_t n_colors, md_error *err);

#endif
