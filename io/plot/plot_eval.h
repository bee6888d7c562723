/* The figure of `eval --plot`: probe recall per region (x, grouped) and
 * policy (bars, one colour each), one panel per budget, with the
 * full-cache ceiling drawn as a black line across each region's group, a
 * white diamond on each bar at the share of the answers' tokens still cached
 * when the questions were asked (retention), and pinned regions labelled in
 * bold. Same formats and atomic writing as
 * io/plot/plot.h (.png, .svg, .pdf). */
#ifndef MD_IO_PLOT_PLOT_EVAL_H
#define MD_IO_PLOT_PLOT_EVAL_H

#include "io/base/error.h"
#include "io/formats/eval_results.h"

md_status md_plot_eval(const char *path, const md_eval_results *results, md_error *err);

#endif
