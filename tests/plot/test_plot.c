/* md_plot_write: the three formats (signature, size, PNG dimensions) and
 * every error path (message names the path; no file and no temporary file
 * left; an existing file untouched). */
#include <cairo.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/plot/plot.h"
#include "tests/plot/plot_test_util.h"
#include "tests/test_util.h"

static char dir[4096];

/* Two regions: one with a band and a fit, one whose rate was not
 * estimable (its curve is still drawn, the legend says "n/a"). */
static test_curve system_curve, tool_curve;
static md_plot_survival_series survival[2];
static double attention_values[2][50];
static md_plot_attention_series attention[2];

static void build_series(void) {
  const double system_time[] = {5, 12, 30, 41}, system_surv[] = {0.9, 0.7, 0.55, 0.4};
  const double system_lo[] = {0.8, 0.55, 0.4, 0.25}, system_hi[] = {0.98, 0.85, 0.7, 0.6};
  test_curve_init(&system_curve, 4, system_time, system_surv, system_lo, system_hi);
  const double tool_time[] = {2, 3, 9}, tool_surv[] = {0.5, 0.5, 0.5};
  test_curve_init(&tool_curve, 3, tool_time, tool_surv, NULL, NULL);
  tool_curve.n_censor[1] = 1;
  survival[0] = (md_plot_survival_series){.region = "system", .km = &system_curve.km,
                                          .lambda = 0.02, .half_life = log(2) / 0.02,
                                          .pinned = true, .half_life_ci = {25.0, 48.0}};
  survival[1] = (md_plot_survival_series){.region = "tool_out", .km = &tool_curve.km,
                                          .lambda = NAN, .half_life = NAN};
  for (int t = 0; t < 50; t++) {
    attention_values[0][t] = 3.0 - t / 50.0;
    attention_values[1][t] = t % 10 == 7 ? NAN : 0.5 + 0.01 * t;
  }
  attention[0] = (md_plot_attention_series){"system", 50, attention_values[0]};
  attention[1] = (md_plot_attention_series){"scratchpad", 50, attention_values[1]};
}

static md_plot_request survival_request(void) {
  return (md_plot_request){.survival = survival, .n_survival = 2};
}

/* Writes `name`, checks it starts with `magic` and is not trivially small;
 * returns its contents (caller frees). */
static unsigned char *write_and_read(const char *name, const md_plot_request *request,
                                     const char *magic, size_t magic_len, size_t *size) {
  char path[4096];
  join_path(path, sizeof path, dir, name);
  md_error err;
  md_status status = md_plot_write(path, request, &err);
  CHECK_MSG(status == MD_OK, "%s: %s", name, err.message);
  unsigned char *data = read_all(path, size);
  CHECK_MSG(data != NULL, "%s was not written", name);
  if (!data) return NULL;
  CHECK_MSG(*size > 4000, "%s is only %zu bytes", name, *size);
  CHECK_MSG(*size >= magic_len && memcmp(data, magic, magic_len) == 0,
            "%s does not start with its format's signature", name);
  return data;
}

static void check_png_size(const char *name, int width, int height) {
  char path[4096];
  join_path(path, sizeof path, dir, name);
  cairo_surface_t *image = cairo_image_surface_create_from_png(path);
  CHECK_MSG(cairo_surface_status(image) == CAIRO_STATUS_SUCCESS, "%s: %s", name,
            cairo_status_to_string(cairo_surface_status(image)));
  CHECK_MSG(cairo_image_surface_get_width(image) == width &&
                cairo_image_surface_get_height(image) == height,
            "%s is %dx%d, expected %dx%d", name, cairo_image_surface_get_width(image),
            cairo_image_surface_get_height(image), width, height);
  cairo_surface_destroy(image);
}

static bool contains(const unsigned char *data, size_t size, const char *text) {
  size_t len = strlen(text);
  for (size_t i = 0; i + len <= size; i++)
    if (memcmp(data + i, text, len) == 0) return true;
  return false;
}

static void test_formats(void) {
  static const char png_magic[] = "\x89PNG\r\n\x1a\n";
  md_plot_request request = survival_request();
  size_t size;
  unsigned char *data = write_and_read("survival.png", &request, png_magic, 8, &size);
  free(data);
  check_png_size("survival.png", 1200, 700);

  request.attention = attention;
  request.n_attention = 2;
  data = write_and_read("both.png", &request, png_magic, 8, &size);
  free(data);
  check_png_size("both.png", 1200, 1150);

  request.width = 800;
  request.height = 520;
  request.log_time = true;
  request.censor_marks = true;
  request.title = "Custom title";
  /* The extension is matched without regard to case. */
  data = write_and_read("small.PNG", &request, png_magic, 8, &size);
  free(data);
  check_png_size("small.PNG", 800, 520);

  request.width = request.height = 0;
  data = write_and_read("both.svg", &request, "<?xml", 5, &size);
  if (data) {
    CHECK(contains(data, size, "<svg"));
    CHECK(contains(data, size, "width=\"1200px\""));
    CHECK(contains(data, size, "height=\"1150px\""));
    CHECK(size > 0 && contains(data + size - 8, 8, "</svg>"));
  }
  free(data);

  data = write_and_read("both.pdf", &request, "%PDF-", 5, &size);
  if (data) {
    /* 1200 x 1150 px at 0.75 pt a pixel. */
    CHECK(contains(data, size, "/MediaBox [ 0 0 900 862.5 ]"));
    CHECK(size > 8 && contains(data + size - 8, 8, "%%EOF"));
  }
  free(data);

  /* Attention alone draws one panel at the single-panel default size. */
  md_plot_request attention_only = {.attention = attention, .n_attention = 2};
  data = write_and_read("attention.png", &attention_only, png_magic, 8, &size);
  free(data);
  check_png_size("attention.png", 1200, 700);
}

/* The write fails with `status`, the message names the path and contains
 * `fragment`, and `dir` is left exactly as it was (n_before entries). */
static void expect_failure(const char *path, const md_plot_request *request, md_status status,
                           const char *fragment) {
  int n_before = count_entries(dir);
  md_error err;
  md_error_clear(&err);
  md_status got = md_plot_write(path, request, &err);
  CHECK_MSG(got == status, "%s: status %d (%s), expected %d", path, got, err.message, status);
  if (path) CHECK_MSG(strstr(err.message, path) != NULL, "message does not name %s: %s", path,
                      err.message);
  CHECK_MSG(strstr(err.message, fragment) != NULL, "message lacks \"%s\": %s", fragment,
            err.message);
  CHECK_MSG(count_entries(dir) == n_before, "%s: the directory changed (%d entries, was %d)",
            path, count_entries(dir), n_before);
}

static void test_bad_paths(void) {
  md_plot_request request = survival_request();
  char path[4096];
  join_path(path, sizeof path, dir, "figure.jpg");
  expect_failure(path, &request, MD_E_UNSUPPORTED, ".png, .svg, .pdf");
  expect_failure(path, &request, MD_E_UNSUPPORTED, "'.jpg'");
  join_path(path, sizeof path, dir, "figure");
  expect_failure(path, &request, MD_E_UNSUPPORTED, ".png, .svg, .pdf");
  /* A dot in a directory name is not an extension. */
  join_path(path, sizeof path, dir, "run.v2/figure");
  expect_failure(path, &request, MD_E_UNSUPPORTED, "extension");

  join_path(path, sizeof path, dir, "missing/figure.png");
  expect_failure(path, &request, MD_E_IO, "temporary file");

  /* A directory where the figure should go: the rename fails after the
   * figure was drawn, and the temporary file is removed. */
  join_path(path, sizeof path, dir, "taken.svg");
  CHECK(mkdir(path, 0755) == 0);
  expect_failure(path, &request, MD_E_IO, "rename");
  rmdir(path);

  md_error err;
  CHECK(md_plot_write(NULL, &request, &err) == MD_E_INVALID);
  CHECK(md_plot_check_path("a/b.svg", &err) == MD_OK);
  CHECK(md_plot_check_path("b.Pdf", &err) == MD_OK);
  CHECK(md_plot_check_path("b.tiff", &err) == MD_E_UNSUPPORTED);
  CHECK(strstr(err.message, "b.tiff") != NULL);
}

static void test_bad_requests(void) {
  char path[4096];
  join_path(path, sizeof path, dir, "bad.png");
  md_plot_request empty = {0};
  expect_failure(path, &empty, MD_E_INVALID, "nothing to plot");
  md_plot_request no_attention = {.attention = attention, .n_attention = 0};
  expect_failure(path, &no_attention, MD_E_INVALID, "nothing to plot");
  expect_failure(path, NULL, MD_E_INVALID, "no figure request");

  md_plot_survival_series series[2] = {survival[0], survival[1]};
  md_plot_request request = {.survival = series, .n_survival = 2};
  series[1].region = "system";
  expect_failure(path, &request, MD_E_INVALID, "repeats region 'system'");
  series[1].region = NULL;
  expect_failure(path, &request, MD_E_INVALID, "no region name");
  series[1] = survival[1];

  test_curve bad;
  const double time[] = {4, 4}, surv[] = {0.5, 0.4};
  test_curve_init(&bad, 2, time, surv, NULL, NULL);
  series[1].km = &bad.km;
  expect_failure(path, &request, MD_E_INVALID, "time[1] = 4");
  bad.time[1] = 6;
  bad.surv[0] = 1.5;
  expect_failure(path, &request, MD_E_INVALID, "surv[0] = 1.5");
  bad.surv[0] = NAN;
  expect_failure(path, &request, MD_E_INVALID, "surv[0] = nan");
  bad.surv[0] = 0.5;
  bad.time[0] = 0;
  expect_failure(path, &request, MD_E_INVALID, "time[0] = 0");
  bad.time[0] = 4;
  bad.km.lower = bad.lower;
  expect_failure(path, &request, MD_E_INVALID, "band");
  bad.km.lower = NULL;
  bad.km.time = NULL;
  expect_failure(path, &request, MD_E_INVALID, "no time or surv");
  series[1] = survival[1];

  md_plot_attention_series broken = {"user", 10, NULL};
  md_plot_request attention_request = {.attention = &broken, .n_attention = 1};
  expect_failure(path, &attention_request, MD_E_INVALID, "attention series 0 ('user')");

  request.width = 200;
  request.height = 100;
  expect_failure(path, &request, MD_E_INVALID, "below the minimum");
  request.width = 20000;
  request.height = 20000;
  expect_failure(path, &request, MD_E_INVALID, "pixels");
}

/* Cairo's own limit (32767 pixels a side for images) comes back as a
 * cairo message, after the temporary file was opened: it must be gone, and
 * the figure already at the path must be untouched. */
static void test_cairo_failure(void) {
  char path[4096];
  join_path(path, sizeof path, dir, "kept.png");
  md_plot_request request = survival_request();
  md_error err;
  CHECK(md_plot_write(path, &request, &err) == MD_OK);
  size_t size_before, size_after;
  unsigned char *before = read_all(path, &size_before);
  request.width = 40000;
  request.height = 400;
  expect_failure(path, &request, MD_E_INVALID, "cairo");
  unsigned char *after = read_all(path, &size_after);
  CHECK(before && after && size_before == size_after &&
        memcmp(before, after, size_before) == 0);
  free(before);
  free(after);
  /* A region name that is not UTF-8 stops cairo's text drawing half way
   * through a PDF already streaming into the temporary file. */
  request.width = request.height = 0;
  md_plot_survival_series bad_name[1] = {survival[1]};
  bad_name[0].region = "tool\xff";
  md_plot_request bad_request = {.survival = bad_name, .n_survival = 1};
  join_path(path, sizeof path, dir, "bad-name.pdf");
  expect_failure(path, &bad_request, MD_E_INVALID, "UTF-8");

  /* The same size is fine for a vector format. */
  request.width = 40000;
  request.height = 400;
  join_path(path, sizeof path, dir, "wide.svg");
  CHECK_MSG(md_plot_write(path, &request, &err) == MD_OK, "%s", err.message);
}

int main(void) {
  scratch_dir(dir, sizeof dir);
  build_series();
  test_formats();
  test_bad_paths();
  test_bad_requests();
  test_cairo_failure();
  remove_dir(dir);
  return md_test_finish("plot_write");
}
