/* md_plot_write: checks the request, picks the cairo surface from the file
 * name, draws (io/plot/plot_draw.c) and writes the result atomically. */
#include "io/plot/plot.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "io/files/atomic_file.h"
#include "io/plot/plot_internal.h"

#define MIN_WIDTH 480
#define MIN_HEIGHT 320
/* An RGB24 image takes 4 bytes a pixel: 256 MiB at most. */
#define MAX_PIXELS (64.0 * 1024 * 1024)
/* CSS and SVG: 96 px to the inch; PDF: 72 pt. */
#define POINTS_PER_PIXEL 0.75

typedef enum plot_format { FORMAT_NONE, FORMAT_PNG, FORMAT_SVG, FORMAT_PDF } plot_format;

static plot_format format_of(const char *path) {
  const char *slash = strrchr(path, '/');
  const char *dot = strrchr(slash ? slash + 1 : path, '.');
  if (!dot) return FORMAT_NONE;
  if (strcasecmp(dot, ".png") == 0) return FORMAT_PNG;
  if (strcasecmp(dot, ".svg") == 0) return FORMAT_SVG;
  if (strcasecmp(dot, ".pdf") == 0) return FORMAT_PDF;
  return FORMAT_NONE;
}

md_status md_plot_check_path(const char *path, md_error *err) {
  if (!path || !*path) return md_fail(err, MD_E_INVALID, "figure: no output path");
  if (format_of(path) != FORMAT_NONE) return MD_OK;
  const char *slash = strrchr(path, '/');
  const char *dot = strrchr(slash ? slash + 1 : path, '.');
  if (!dot)
    return md_fail(err, MD_E_UNSUPPORTED,
                   "%s: the figure's format comes from its extension; "
                   "supported: .png, .svg, .pdf", path);
  return md_fail(err, MD_E_UNSUPPORTED,
                 "%s: unsupported figure format '%s'; supported: .png, .svg, .pdf", path, dot);
}

/* ---- request checks ----------------------------------------------------------- */

static md_status check_km(const char *path, size_t index, const char *region,
                          const md_km_curve *km, md_error *err) {
  if (km->n_times > 0 && (!km->time || !km->surv))
    return md_fail(err, MD_E_INVALID, "%s: survival series %zu ('%s'): curve has %zu times "
                   "but no time or surv array", path, index, region, km->n_times);
  if (!km->lower != !km->upper)
    return md_fail(err, MD_E_INVALID, "%s: survival series %zu ('%s'): band has only one "
                   "of its lower and upper curves", path, index, region);
  for (size_t j = 0; j < km->n_times; j++) {
    double t = km->time[j], s = km->surv[j];
    if (!isfinite(t) || t <= 0 || (j > 0 && !(t > km->time[j - 1])))
      return md_fail(err, MD_E_INVALID, "%s: survival series %zu ('%s'): time[%zu] = %g is "
                     "not a positive time after the one before", path, index, region, j, t);
    if (!(s >= 0.0 && s <= 1.0))
      return md_fail(err, MD_E_INVALID, "%s: survival series %zu ('%s'): surv[%zu] = %g is "
                     "not a probability", path, index, region, j, s);
  }
  return MD_OK;
}

static md_status check_survival(const char *path, const md_plot_request *request,
                                md_error *err) {
  if (request->n_survival > 0 && !request->survival)
    return md_fail(err, MD_E_INVALID, "%s: %zu survival series but no array", path,
                   request->n_survival);
  for (size_t i = 0; i < request->n_survival; i++) {
    const md_plot_survival_series *series = &request->survival[i];
    if (!series->region || !*series->region)
      return md_fail(err, MD_E_INVALID, "%s: survival series %zu has no region name", path, i);
    for (size_t j = 0; j < i; j++)
      if (strcmp(request->survival[j].region, series->region) == 0)
        return md_fail(err, MD_E_INVALID, "%s: survival series %zu repeats region '%s'", path,
                       i, series->region);
    if (series->km) {
      md_status status = check_km(path, i, series->region, series->km, err);
      if (status != MD_OK) return status;
    }
  }
  return MD_OK;
}

static md_status check_attention(const char *path, const md_plot_request *request,
                                 md_error *err) {
  if (!request->attention) return MD_OK;
  for (size_t i = 0; i < request->n_attention; i++) {
    const md_plot_attention_series *series = &request->attention[i];
    if (!series->region || !*series->region)
      return md_fail(err, MD_E_INVALID, "%s: attention series %zu has no region name", path, i);
    if (series->n_steps > 0 && !series->mean_relative_attention)
      return md_fail(err, MD_E_INVALID, "%s: attention series %zu ('%s') has %zu steps but "
                     "no values", path, i, series->region, series->n_steps);
    for (size_t j = 0; j < i; j++)
      if (strcmp(request->attention[j].region, series->region) == 0)
        return md_fail(err, MD_E_INVALID, "%s: attention series %zu repeats region '%s'", path,
                       i, series->region);
  }
  return MD_OK;
}

static md_status figure_size(const char *path, const md_plot_request *request, int *width,
                             int *height, md_error *err) {
  *width = request->width ? request->width : MD_PLOT_DEFAULT_WIDTH;
  *height = request->height ? request->height
                            : (md_plot_two_panels(request) ? MD_PLOT_DEFAULT_HEIGHT_TWO_PANELS
                                                           : MD_PLOT_DEFAULT_HEIGHT);
  if (*width < MIN_WIDTH || *height < MIN_HEIGHT)
    return md_fail(err, MD_E_INVALID, "%s: figure size %dx%d is below the minimum %dx%d", path,
                   *width, *height, MIN_WIDTH, MIN_HEIGHT);
  if ((double)*width * *height > MAX_PIXELS)
    return md_fail(err, MD_E_INVALID, "%s: figure size %dx%d is over %.0f pixels", path, *width,
                   *height, MAX_PIXELS);
  return MD_OK;
}

static md_status check_request(const char *path, const md_plot_request *request,
                               md_error *err) {
  if (!request) return md_fail(err, MD_E_INVALID, "%s: no figure request", path);
  size_t n_attention = request->attention ? request->n_attention : 0;
  if (request->n_survival == 0 && n_attention == 0)
    return md_fail(err, MD_E_INVALID, "%s: nothing to plot: no survival or attention series",
                   path);
  md_status status = check_survival(path, request, err);
  if (status == MD_OK) status = check_attention(path, request, err);
  return status;
}

/* ---- output --------------------------------------------------------------------- */

typedef struct stream_sink {
  FILE *fp;
  int write_errno; /* errno of the first failed write; 0 when none failed */
} stream_sink;

static cairo_status_t sink_write(void *closure, const unsigned char *data, unsigned int length) {
  stream_sink *sink = closure;
  if (length > 0 && fwrite(data, 1, length, sink->fp) != length) {
    if (!sink->write_errno) sink->write_errno = errno ? errno : EIO;
    return CAIRO_STATUS_WRITE_ERROR;
  }
  return CAIRO_STATUS_SUCCESS;
}

static md_status cairo_failure(const char *path, cairo_status_t status, const stream_sink *sink,
                               md_error *err) {
  if (status == CAIRO_STATUS_WRITE_ERROR && sink->write_errno)
    return md_fail(err, MD_E_IO, "%s: write failed: %s", path, strerror(sink->write_errno));
  md_status code = MD_E_IO;
  if (status == CAIRO_STATUS_NO_MEMORY) code = MD_E_NOMEM;
  /* Inputs cairo rejects: a side over 32767 px, a label not in UTF-8. */
  if (status == CAIRO_STATUS_INVALID_SIZE || status == CAIRO_STATUS_INVALID_STRING)
    code = MD_E_INVALID;
  return md_fail(err, code, "%s: cairo cannot draw the figure: %s", path,
                 cairo_status_to_string(status));
}

static cairo_surface_t *create_surface(plot_format format, int width, int height,
                                       stream_sink *sink) {
  switch (format) {
    case FORMAT_PNG:
      /* RGB24: an opaque figure, no alpha channel in the PNG. */
      return cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
    case FORMAT_SVG: {
      cairo_surface_t *surface =
          cairo_svg_surface_create_for_stream(sink_write, sink, width, height);
      cairo_svg_surface_set_document_unit(surface, CAIRO_SVG_UNIT_PX);
      return surface;
    }
    default:
      return cairo_pdf_surface_create_for_stream(sink_write, sink, width * POINTS_PER_PIXEL,
                                                 height * POINTS_PER_PIXEL);
  }
}

static void set_pdf_metadata(cairo_surface_t *surface, const char *title) {
  cairo_pdf_surface_set_metadata(surface, CAIRO_PDF_METADATA_TITLE, title);
  cairo_pdf_surface_set_metadata(surface, CAIRO_PDF_METADATA_CREATOR, "memdecay-calibrate");
}

/* Draws onto a fresh surface with `draw` and finishes it into sink->fp. */
static cairo_status_t render(plot_format format, const char *title, md_plot_draw_fn draw,
                             void *context, double layout_scale, int width, int height,
                             stream_sink *sink) {
  cairo_surface_t *surface = create_surface(format, width, height, sink);
  cairo_status_t status = cairo_surface_status(surface);
  if (status == CAIRO_STATUS_SUCCESS) {
    if (format == FORMAT_PDF) set_pdf_metadata(surface, title);
    cairo_t *cr = cairo_create(surface);
    double device_scale = layout_scale * (format == FORMAT_PDF ? POINTS_PER_PIXEL : 1.0);
    cairo_scale(cr, device_scale, device_scale);
    cairo_font_options_t *options = cairo_font_options_create();
    /* Unhinted metrics: text measures the same in every format. */
    cairo_font_options_set_hint_metrics(options, CAIRO_HINT_METRICS_OFF);
    cairo_set_font_options(cr, options);
    cairo_font_options_destroy(options);
    status = draw(cr, context, width / layout_scale, height / layout_scale);
    cairo_destroy(cr);
  }
  if (status == CAIRO_STATUS_SUCCESS && format == FORMAT_PNG)
    status = cairo_surface_write_to_png_stream(surface, sink_write, sink);
  cairo_surface_finish(surface);
  if (status == CAIRO_STATUS_SUCCESS) status = cairo_surface_status(surface);
  cairo_surface_destroy(surface);
  return status;
}

md_status md_plot_render_file(const char *path, const char *title, md_plot_draw_fn draw,
                              void *context, double layout_scale, int width, int height,
                              md_error *err) {
  md_status status = md_plot_check_path(path, err);
  if (status != MD_OK) return status;
  md_atomic_file file;
  status = md_atomic_open(&file, path, err);
  if (status != MD_OK) return status;
  stream_sink sink = {file.fp, 0};
  cairo_status_t drawn = render(format_of(path), title, draw, context, layout_scale, width,
                                height, &sink);
  if (drawn != CAIRO_STATUS_SUCCESS) {
    md_atomic_abort(&file);
    return cairo_failure(path, drawn, &sink, err);
  }
  return md_atomic_commit(&file, err);
}

typedef struct survival_figure {
  const md_plot_request *request;
  const md_plot_regions *regions;
} survival_figure;

static cairo_status_t draw_survival_figure(cairo_t *cr, void *context, double width,
                                           double height) {
  const survival_figure *f = context;
  return md_plot_draw(cr, f->request, f->regions, width, height);
}

md_status md_plot_write(const char *path, const md_plot_request *request, md_error *err) {
  md_status status = md_plot_check_path(path, err);
  if (status == MD_OK) status = check_request(path, request, err);
  int width = 0, height = 0;
  if (status == MD_OK) status = figure_size(path, request, &width, &height, err);
  if (status != MD_OK) return status;

  md_plot_regions regions;
  if (md_plot_regions_build(request, &regions, err) != MD_OK)
    return md_error_prefix(err, "%s", path);
  survival_figure figure = {request, &regions};
  status = md_plot_render_file(path, md_plot_title(request), draw_survival_figure, &figure,
                               md_plot_drawing_scale(request, width, height), width, height, err);
  md_plot_regions_free(&regions);
  return status;
}
