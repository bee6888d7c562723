/* Axis arithmetic, tick labels, number formatting and the region palette.
 * Every expected value is derived by hand in the comment beside it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/plot/plot_internal.h"
#include "tests/test_util.h"

static void test_nice_numbers(void) {
  /* Smallest of 1, 2, 5 x 10^k at or above the argument. */
  CHECK_REL(md_plot_nice_step(32.0), 50.0, 1e-12);
  CHECK_REL(md_plot_nice_step(0.1), 0.1, 1e-12);   /* exactly a nice value */
  CHECK_REL(md_plot_nice_step(0.11), 0.2, 1e-12);
  CHECK_REL(md_plot_nice_step(1.5), 2.0, 1e-12);
  CHECK_REL(md_plot_nice_step(7.0), 10.0, 1e-12);
  CHECK_REL(md_plot_nice_step(1000.0), 1000.0, 1e-12);
  CHECK_REL(md_plot_nice_floor(256.0), 200.0, 1e-12);
  CHECK_REL(md_plot_nice_floor(3.0), 2.0, 1e-12);
  CHECK_REL(md_plot_nice_floor(0.07), 0.05, 1e-12);
  CHECK_REL(md_plot_nice_floor(1.0), 1.0, 1e-12);
  CHECK_REL(md_plot_nice_ceil(256.0), 500.0, 1e-12);
  CHECK_REL(md_plot_nice_ceil(100.0), 100.0, 1e-12);
}

static size_t labelled_ticks(const md_plot_axis *axis, double *values, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < axis->n_ticks && n < max; i++)
    if (axis->ticks[i].labelled) values[n++] = axis->ticks[i].value;
  return n;
}

static void test_linear_axis(void) {
  md_plot_axis axis;
  char label[32];
  /* [0, 256] over 800 px, labels >= 90 px apart: at most 8 intervals, so a
   * step of at least 32, rounded to 50: ticks 0, 50, ..., 250. */
  md_plot_axis_linear(&axis, 0.0, 256.0, 800.0, 90.0, false);
  CHECK_REL(axis.step, 50.0, 1e-12);
  CHECK(axis.n_ticks == 6);
  CHECK_REL(axis.ticks[5].value, 250.0, 1e-12);
  CHECK_REL(axis.hi, 256.0, 1e-12);
  md_plot_tick_label(&axis, 150.0, label, sizeof label);
  CHECK(strcmp(label, "150") == 0);

  /* [0, 1] over 440 px, 44 px apart: 10 intervals of 0.1; the fourth tick
   * is 3 x 0.1, printed "0.3" (not 0.30000000000000004). */
  md_plot_axis_linear(&axis, 0.0, 1.0, 440.0, 44.0, false);
  CHECK(axis.n_ticks == 11);
  md_plot_tick_label(&axis, axis.ticks[3].value, label, sizeof label);
  CHECK(strcmp(label, "0.3") == 0);
  md_plot_tick_label(&axis, axis.ticks[0].value, label, sizeof label);
  CHECK(strcmp(label, "0.0") == 0);

  /* [0, 1] over 300 px: at most 6 intervals, step >= 0.167, so 0.2. */
  md_plot_axis_linear(&axis, 0.0, 1.0, 300.0, 44.0, false);
  CHECK_REL(axis.step, 0.2, 1e-12);
  CHECK(axis.n_ticks == 6);

  /* round_hi: [0, 4.6] over 300 px, 44 px apart: 6 intervals, step >= 0.77
   * so 1, and hi moves up to 5. */
  md_plot_axis_linear(&axis, 0.0, 4.6, 300.0, 44.0, true);
  CHECK_REL(axis.hi, 5.0, 1e-12);
  CHECK(axis.n_ticks == 6);

  /* Placed on [100, 900]: 50 of [0, 200] is a quarter of the way. */
  md_plot_axis_linear(&axis, 0.0, 200.0, 800.0, 90.0, false);
  md_plot_axis_place(&axis, 100.0, 900.0);
  CHECK_REL(md_plot_axis_map(&axis, 50.0), 300.0, 1e-12);
  /* A y axis runs upwards: lo at the bottom (px 500), hi at the top. */
  md_plot_axis_place(&axis, 500.0, 100.0);
  CHECK_REL(md_plot_axis_map(&axis, 50.0), 400.0, 1e-12);
}

static void test_log_axis(void) {
  md_plot_axis axis;
  double values[32];
  char label[32];
  /* [1, 256] over 770 px: 2.408 decades, 319.7 px each; 1 -> 2 is 0.301 of
   * a decade = 96 px >= 90, so 2 and 5 are labelled too. Ticks: 1..9,
   * 10..90, 100, 200 = 20; labelled 1 2 5 10 20 50 100 200. */
  md_plot_axis_log(&axis, 1.0, 256.0, 770.0, 90.0, false);
  CHECK(axis.log);
  CHECK_REL(axis.lo, 1.0, 1e-12);
  CHECK_REL(axis.hi, 256.0, 1e-12);
  CHECK(axis.n_ticks == 20);
  size_t n = labelled_ticks(&axis, values, 32);
  const double want[] = {1, 2, 5, 10, 20, 50, 100, 200};
  CHECK(n == 8);
  for (size_t i = 0; i < n && i < 8; i++) CHECK_REL(values[i], want[i], 1e-12);

  /* Over 500 px: 207.6 px a decade, 62.5 px from 1 to 2 < 90: decades only. */
  md_plot_axis_log(&axis, 1.0, 256.0, 500.0, 90.0, false);
  n = labelled_ticks(&axis, values, 32);
  CHECK(n == 3 && values[0] == 1.0 && fabs(values[2] - 100.0) < 1e-9);

  /* Starting at the smallest positive time 3: the axis starts at 2. With
   * round_hi, [0.3, 7] becomes [0.2, 10]. */
  md_plot_axis_log(&axis, 3.0, 300.0, 500.0, 90.0, false);
  CHECK_REL(axis.lo, 2.0, 1e-12);
  md_plot_axis_log(&axis, 0.3, 7.0, 500.0, 90.0, true);
  CHECK_REL(axis.lo, 0.2, 1e-12);
  CHECK_REL(axis.hi, 10.0, 1e-12);

  /* Less than a decade on a short axis: [20, 50] over 100 px labels no 1,
   * 2 or 5 multiple in between but both ends. */
  md_plot_axis_log(&axis, 20.0, 50.0, 100.0, 90.0, false);
  n = labelled_ticks(&axis, values, 32);
  CHECK(n == 2 && fabs(values[0] - 20.0) < 1e-9 && fabs(values[1] - 50.0) < 1e-9);

  /* Placed on [0, 200] for [1, 100]: 10 is half way. */
  md_plot_axis_log(&axis, 1.0, 100.0, 200.0, 90.0, false);
  md_plot_axis_place(&axis, 0.0, 200.0);
  CHECK_REL(md_plot_axis_map(&axis, 10.0), 100.0, 1e-12);

  md_plot_tick_label(&axis, 0.2, label, sizeof label);
  CHECK(strcmp(label, "0.2") == 0);
  md_plot_tick_label(&axis, 0.05, label, sizeof label);
  CHECK(strcmp(label, "0.05") == 0);
  md_plot_tick_label(&axis, 1000.0, label, sizeof label);
  CHECK(strcmp(label, "1000") == 0);
  md_plot_tick_label(&axis, 1e6, label, sizeof label);
  CHECK(strcmp(label, "1e6") == 0);
  md_plot_tick_label(&axis, 2.5e7, label, sizeof label);
  CHECK(strcmp(label, "2.5e7") == 0);

  /* Eighteen decades, [1e-17, 10] over 300 px (16.7 px a decade, 90 px
   * between labels): ticks at the powers of ten only (nine a decade would
   * overflow the tick array), labelled every 6th decade counted down from
   * the top: 1e-5, 1e1 ... and the smallest values in exponent form. */
  md_plot_axis_log(&axis, 1e-17, 10.0, 300.0, 90.0, false);
  CHECK(axis.n_ticks == 19);
  n = labelled_ticks(&axis, values, 32);
  const double sparse[] = {1e-17, 1e-11, 1e-5, 10.0};
  CHECK(n == 4);
  for (size_t i = 0; i < n && i < 4; i++) CHECK_REL(values[i], sparse[i], 1e-9);
  md_plot_tick_label(&axis, 1e-5, label, sizeof label);
  CHECK(strcmp(label, "1e-5") == 0);
  md_plot_tick_label(&axis, 0.001, label, sizeof label);
  CHECK(strcmp(label, "0.001") == 0);
}

static void test_step_format(void) {
  char text[32];
  /* Three significant digits, no exponent. */
  md_plot_format_steps(165.04, text, sizeof text);
  CHECK(strcmp(text, "165") == 0);
  md_plot_format_steps(14.84, text, sizeof text);
  CHECK(strcmp(text, "14.8") == 0);
  md_plot_format_steps(1.234, text, sizeof text);
  CHECK(strcmp(text, "1.23") == 0);
  md_plot_format_steps(99.96, text, sizeof text);
  CHECK(strcmp(text, "100") == 0);
  md_plot_format_steps(9.996, text, sizeof text);
  CHECK(strcmp(text, "10.0") == 0);
  md_plot_format_steps(NAN, text, sizeof text);
  CHECK(strcmp(text, "n/a") == 0);
}

static bool same_color(md_plot_rgb color, int r, int g, int b) {
  return fabs(color.r * 255 - r) < 1e-9 && fabs(color.g * 255 - g) < 1e-9 &&
         fabs(color.b * 255 - b) < 1e-9;
}

static void test_palette(void) {
  /* Okabe & Ito (2008) values, as documented in io/plot/plot_style.c. */
  md_plot_rgb color;
  CHECK(md_plot_known_region_color("system", &color) && same_color(color, 0, 114, 178));
  CHECK(md_plot_known_region_color("plan", &color) && same_color(color, 204, 121, 167));
  CHECK(md_plot_known_region_color("user", &color) && same_color(color, 213, 94, 0));
  CHECK(md_plot_known_region_color("tool_in", &color) && same_color(color, 0, 158, 115));
  CHECK(md_plot_known_region_color("tool_out", &color) && same_color(color, 86, 180, 233));
  CHECK(md_plot_known_region_color("retrieval", &color) && same_color(color, 230, 159, 0));
  CHECK(md_plot_known_region_color("scratchpad", &color) && same_color(color, 0, 0, 0));
  CHECK(!md_plot_known_region_color("memory", &color));

  /* Other regions take the extra colours in name order, whatever order
   * they come in: "alpha" the first, "zeta" the second. */
  md_plot_survival_series forward[] = {{.region = "zeta"}, {.region = "system"},
                                       {.region = "alpha"}};
  md_plot_survival_series backward[] = {{.region = "alpha"}, {.region = "zeta"}};
  double value = 1.0;
  md_plot_attention_series attention[] = {{"zeta", 1, &value}, {"omega", 1, &value}};
  md_plot_request request = {.survival = forward, .n_survival = 3, .attention = attention,
                             .n_attention = 2};
  md_plot_regions regions;
  md_error err;
  CHECK(md_plot_regions_build(&request, &regions, &err) == MD_OK);
  /* zeta, system, alpha from the survival series, omega from attention. */
  CHECK(regions.n == 4);
  CHECK(regions.survival[3] == NULL && regions.survival[0] == &forward[0]);
  md_plot_rgb first = md_plot_extra_region_color(0), second = md_plot_extra_region_color(1),
              third = md_plot_extra_region_color(2);
  CHECK(memcmp(&regions.colors[2], &first, sizeof first) == 0);   /* alpha */
  CHECK(memcmp(&regions.colors[3], &second, sizeof second) == 0); /* omega */
  CHECK(memcmp(&regions.colors[0], &third, sizeof third) == 0);   /* zeta */
  CHECK(same_color(regions.colors[1], 0, 114, 178));              /* system */
  md_plot_regions_free(&regions);

  request = (md_plot_request){.survival = backward, .n_survival = 2};
  CHECK(md_plot_regions_build(&request, &regions, &err) == MD_OK);
  CHECK(memcmp(&regions.colors[0], &first, sizeof first) == 0);   /* alpha */
  CHECK(memcmp(&regions.colors[1], &second, sizeof second) == 0); /* zeta */
  md_plot_regions_free(&regions);
  /* The extra palette cycles (7 colours). */
  md_plot_rgb eighth = md_plot_extra_region_color(7);
  CHECK(memcmp(&eighth, &first, sizeof first) == 0);
}

int main(void) {
  test_nice_numbers();
  test_linear_axis();
  test_log_axis();
  test_step_format();
  test_palette();
  return md_test_finish("plot_axis");
}
