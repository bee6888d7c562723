/* What the PNG shows, checked pixel by pixel on hand-made curves whose
 * geometry is known: the region's colour, a white background, steps that
 * drop at the event times (right-continuous), a linear probability axis,
 * the stepwise band's tint, the half-life marker and the exponential fit,
 * decade spacing on the log-time axis, and NaN breaking an attention line.
 *
 * Positions are measured from the curve itself (the runs of the region's
 * colour), so the checks hold whatever the margins and fonts are. */
#include <cairo.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "io/plot/plot.h"
#include "tests/plot/plot_test_util.h"
#include "tests/test_util.h"

static char dir[4096];

typedef struct rgb {
  int r, g, b;
} rgb;

/* Okabe-Ito blue (0, 114, 178) and vermillion (213, 94, 0), the documented
 * colours of "system" and "user". */
static const rgb system_blue = {0, 114, 178};
static const rgb user_vermillion = {213, 94, 0};

typedef struct image {
  cairo_surface_t *surface;
  int width, height, stride;
  const unsigned char *data;
} image;

static bool render(const char *name, const md_plot_request *request, image *img) {
  char path[4096];
  join_path(path, sizeof path, dir, name);
  md_error err;
  md_status status = md_plot_write(path, request, &err);
  CHECK_MSG(status == MD_OK, "%s", err.message);
  img->surface = cairo_image_surface_create_from_png(path);
  if (status != MD_OK || cairo_surface_status(img->surface) != CAIRO_STATUS_SUCCESS) {
    CHECK_MSG(false, "%s could not be read back", name);
    return false;
  }
  cairo_surface_flush(img->surface);
  img->width = cairo_image_surface_get_width(img->surface);
  img->height = cairo_image_surface_get_height(img->surface);
  img->stride = cairo_image_surface_get_stride(img->surface);
  img->data = cairo_image_surface_get_data(img->surface);
  return true;
}

static rgb pixel(const image *img, int x, int y) {
  uint32_t value;
  memcpy(&value, img->data + (size_t)y * img->stride + (size_t)x * 4, 4);
  return (rgb){(value >> 16) & 0xff, (value >> 8) & 0xff, value & 0xff};
}

static bool near(rgb a, rgb b, int tolerance) {
  return abs(a.r - b.r) <= tolerance && abs(a.g - b.g) <= tolerance &&
         abs(a.b - b.b) <= tolerance;
}

static bool is_color(const image *img, int x, int y, rgb color) {
  if (x < 0 || y < 0 || x >= img->width || y >= img->height) return false;
  return near(pixel(img, x, y), color, 3);
}

/* The horizontal stretches of `color` at least min_length long, merged
 * over adjacent rows (a 2.6 px line covers two or three). */
typedef struct run {
  double y;        /* centre row */
  int x0, x1;      /* first and last pixel */
} run;

static size_t find_runs(const image *img, rgb color, int min_length, run *runs, size_t max) {
  size_t n = 0;
  int last_row = -10;
  for (int y = 0; y < img->height; y++) {
    int best0 = 0, best1 = -1;
    for (int x = 0; x < img->width;) {
      if (!is_color(img, x, y, color)) {
        x++;
        continue;
      }
      int start = x;
      while (x < img->width && is_color(img, x, y, color)) x++;
      if (x - start > best1 - best0 + 1) {
        best0 = start;
        best1 = x - 1;
      }
    }
    if (best1 - best0 + 1 < min_length) continue;
    if (n > 0 && y == last_row + 1) {
      run *r = &runs[n - 1];
      r->y = (r->y + y) / 2.0; /* rows arrive in order: centre of the first and last */
      if (best0 < r->x0) r->x0 = best0;
      if (best1 > r->x1) r->x1 = best1;
    } else if (n < max) {
      runs[n++] = (run){y, best0, best1};
    }
    last_row = y;
  }
  return n;
}

/* Longest vertical stretch of `color` in column x: its first and last row. */
static int vertical_extent(const image *img, int x, rgb color, int *y0, int *y1) {
  int best = 0;
  for (int y = 0; y < img->height;) {
    if (!is_color(img, x, y, color)) {
      y++;
      continue;
    }
    int start = y;
    while (y < img->height && is_color(img, x, y, color)) y++;
    if (y - start > best) {
      best = y - start;
      *y0 = start;
      *y1 = y - 1;
    }
  }
  return best;
}

/* One region, S = 1 until t = 10, 0.5 on [10, 20), 0 from t = 20: two
 * horizontal runs of equal length meeting at the drop at t = 10, the upper
 * at S = 1, the lower at S = 0.5, and a drop at t = 20 reaching S = 0 at
 * the same distance again below (the probability axis is linear). */
static void test_steps(void) {
  test_curve curve;
  const double time[] = {10, 20}, surv[] = {0.5, 0.0};
  const double lower[] = {0.3, NAN}, upper[] = {0.7, NAN};
  test_curve_init(&curve, 2, time, surv, lower, upper);
  md_plot_survival_series series = {.region = "system", .km = &curve.km, .lambda = NAN,
                                    .half_life = NAN};
  md_plot_request request = {.survival = &series, .n_survival = 1};
  image img;
  if (!render("steps.png", &request, &img)) return;

  CHECK(near(pixel(&img, 1, 1), (rgb){255, 255, 255}, 0));
  CHECK(near(pixel(&img, img.width - 2, img.height - 2), (rgb){255, 255, 255}, 0));

  run runs[8];
  size_t n = find_runs(&img, system_blue, 100, runs, 8);
  CHECK_MSG(n == 2, "%zu long horizontal runs of the region's colour, expected 2", n);
  if (n != 2) goto done;
  const run *top = &runs[0], *middle = &runs[1];
  double unit = middle->y - top->y; /* pixels for a probability of 0.5 */
  CHECK_MSG(unit > 100, "S = 1 and S = 0.5 only %.1f px apart", unit);
  CHECK_MSG(abs(top->x1 - middle->x0) <= 3, "the drop at t = 10 does not join the steps: "
            "%d vs %d", top->x1, middle->x0);
  int top_length = top->x1 - top->x0, middle_length = middle->x1 - middle->x0;
  CHECK_MSG(abs(top_length - middle_length) <= 3,
            "steps over [0, 10) and [10, 20) are %d and %d px long", top_length, middle_length);

  /* The drop is the longest vertical stretch among the last columns of the
   * lower step (antialiasing leaves one or two columns of exact colour). */
  int y0 = 0, y1 = 0, drop = 0;
  for (int x = middle->x1 - 2; x <= middle->x1; x++) {
    int top_row = 0, bottom_row = 0;
    int length = vertical_extent(&img, x, system_blue, &top_row, &bottom_row);
    if (length > drop) {
      drop = length;
      y0 = top_row;
      y1 = bottom_row;
    }
  }
  CHECK_MSG(abs(y0 - (int)lround(middle->y)) <= 3, "the drop at t = 20 starts at row %d", y0);
  CHECK_MSG(drop > 0 && fabs(y1 - (middle->y + unit)) <= 3,
            "the drop at t = 20 ends at row %d, S = 0 is at row %.1f", y1, middle->y + unit);

  /* The band over [10, 20) is the region's colour at 16% over white, at
   * S = 0.65 (between the grid lines at 0.6 and 0.7), t = 13. */
  int band_x = (int)lround(top->x1 + 0.3 * middle_length);
  int band_y = (int)lround(middle->y - 0.3 * unit);
  rgb tint = {(int)lround(255 * 0.84), (int)lround(255 * 0.84 + 114 * 0.16),
              (int)lround(255 * 0.84 + 178 * 0.16)};
  rgb seen = pixel(&img, band_x, band_y);
  CHECK_MSG(near(seen, tint, 3), "band pixel is (%d, %d, %d), expected (%d, %d, %d)", seen.r,
            seen.g, seen.b, tint.r, tint.g, tint.b);
  /* Above the band's upper end (0.7) it is white again, at S = 0.75. */
  CHECK(near(pixel(&img, band_x, (int)lround(middle->y - 0.5 * unit)), (rgb){255, 255, 255}, 0));
  /* Before the first event the band is [1, 1]: nothing under S = 1. */
  CHECK(near(pixel(&img, top->x0 + top_length / 3, (int)lround(top->y + 0.3 * unit)),
             (rgb){255, 255, 255}, 0));

  /* Twice the default size in both directions draws everything twice as
   * large (a high-resolution PNG): the steps are twice as far apart. */
  request.width = 2400;
  request.height = 1400;
  image large;
  if (render("steps-2x.png", &request, &large)) {
    run large_runs[8];
    if (find_runs(&large, system_blue, 200, large_runs, 8) == 2) {
      double large_unit = large_runs[1].y - large_runs[0].y;
      CHECK_MSG(fabs(large_unit - 2 * unit) <= 3, "S = 1 to 0.5 is %.1f px at 2x, %.1f at 1x",
                large_unit, unit);
    } else {
      CHECK_MSG(false, "the 2x figure does not show two steps");
    }
    cairo_surface_destroy(large.surface);
  }
  request.width = request.height = 0;

  /* With the exponential fitted, half-life 15: the marker sits on S = 0.5
   * at t = 15 (its disc reaches 3 px above the step), and the dashed fit
   * passes through S(t) = exp(-lambda t) between t = 3 and t = 7. */
  series.lambda = log(2) / 15.0;
  series.half_life = 15.0;
  image fitted;
  if (!render("fitted.png", &request, &fitted)) goto done;
  int marker_x = (int)lround(top->x1 + 0.5 * middle_length);
  CHECK(!is_color(&img, marker_x, (int)lround(middle->y - 3), system_blue));
  CHECK(is_color(&fitted, marker_x, (int)lround(middle->y - 3), system_blue));
  int on_curve = 0, columns = 0;
  for (int x = top->x0 + (int)(0.3 * top_length); x <= top->x0 + (int)(0.7 * top_length); x++) {
    double t = 10.0 * (x - top->x0) / top_length;
    double y = top->y + 2.0 * unit * (1.0 - exp(-series.lambda * t));
    columns++;
    for (int dy = -1; dy <= 1; dy++)
      if (is_color(&fitted, x, (int)lround(y) + dy, system_blue)) {
        on_curve++;
        break;
      }
  }
  /* Dashes of 9 px with gaps of 6 px cover 60% of the columns. */
  CHECK_MSG(on_curve >= columns / 2, "fit drawn in %d of %d columns", on_curve, columns);
  cairo_surface_destroy(fitted.surface);
done:
  cairo_surface_destroy(img.surface);
}

/* On a log-time axis, [1, 10) and [10, 100) are a decade each: equally
 * long steps, the first starting at the axis (time 1, the smallest). */
static void test_log_time(void) {
  test_curve curve;
  const double time[] = {1, 10, 100}, surv[] = {0.75, 0.5, 0.25};
  test_curve_init(&curve, 3, time, surv, NULL, NULL);
  md_plot_survival_series series = {.region = "user", .km = &curve.km, .lambda = NAN,
                                    .half_life = NAN};
  md_plot_request request = {.survival = &series, .n_survival = 1, .log_time = true};
  image img;
  if (!render("log.png", &request, &img)) return;
  run runs[8];
  size_t n = find_runs(&img, user_vermillion, 100, runs, 8);
  CHECK_MSG(n == 2, "%zu long horizontal runs, expected 2", n);
  if (n == 2) {
    int first = runs[0].x1 - runs[0].x0, second = runs[1].x1 - runs[1].x0;
    CHECK_MSG(abs(first - second) <= 3, "decades drawn %d and %d px long", first, second);
    /* S = 0.75 and 0.5: a quarter of the probability axis apart. */
    CHECK(runs[1].y - runs[0].y > 50);
  }
  cairo_surface_destroy(img.surface);
}

/* A constant attention of 2.0 with NaN for steps 30-49 draws two separate
 * stretches: steps 0-29 and, the longer, 50-99. */
static void test_attention_gap(void) {
  double values[100];
  for (int t = 0; t < 100; t++) values[t] = t >= 30 && t < 50 ? NAN : 2.0;
  md_plot_attention_series series = {"user", 100, values};
  md_plot_request request = {.attention = &series, .n_attention = 1};
  image img;
  if (!render("attention.png", &request, &img)) return;
  run runs[8];
  size_t n = find_runs(&img, user_vermillion, 100, runs, 8);
  CHECK_MSG(n == 1, "%zu rows of long runs, expected 1", n);
  if (n == 1) {
    /* The longest run is steps 50-99; step k is at x0 + (k - 50) * per_step. */
    double per_step = (runs[0].x1 - runs[0].x0) / 49.0;
    int y = (int)lround(runs[0].y);
    int coloured_in_gap = 0;
    for (int x = (int)lround(runs[0].x0 - 19 * per_step) + 2; x <= runs[0].x0 - 3; x++)
      coloured_in_gap += is_color(&img, x, y, user_vermillion);
    CHECK_MSG(coloured_in_gap == 0, "%d coloured pixels where the values are NaN",
              coloured_in_gap);
    int before = (int)lround(runs[0].x0 - 35 * per_step);
    CHECK_MSG(is_color(&img, before, y, user_vermillion), "no line before the gap (step 15)");
  }
  cairo_surface_destroy(img.surface);
}

int main(void) {
  scratch_dir(dir, sizeof dir);
  test_steps();
  test_log_time();
  test_attention_gap();
  /* MD_KEEP_FIGURES=1 keeps the rendered images, to look at a failure. */
  if (getenv("MD_KEEP_FIGURES"))
    printf("figures kept in %s\n", dir);
  else
    remove_dir(dir);
  return md_test_finish("plot_pixels");
}
