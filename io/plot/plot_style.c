/* Colours per region and text helpers for the figures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/regions.h"
#include "io/plot/plot_internal.h"

/* Okabe & Ito (2008), "Color Universal Design": distinguishable under the
 * common colour-vision deficiencies. Yellow (240, 228, 66) is left out: too
 * faint as a line on white. Black goes to scratchpad, the shortest-lived
 * region, whose curve hugs the axes. */
static const unsigned char known_colors[MD_REGION_KNOWN_COUNT][3] = {
    /* by md_region_known_rank (base/regions.h): */
    {0, 114, 178},   /* system: blue */
    {204, 121, 167}, /* plan: reddish purple */
    {213, 94, 0},    /* user: vermillion */
    {0, 158, 115},   /* tool_in: bluish green */
    {86, 180, 233},  /* tool_out: sky blue */
    {230, 159, 0},   /* retrieval: orange */
    {0, 0, 0},       /* scratchpad: black */
};

/* Further regions: the darker colours of Paul Tol's colour-blind-safe
 * "muted" scheme (wine, green, indigo, olive, teal, rose), then grey. */
static const unsigned char extra_colors[][3] = {
    {136, 34, 85}, {17, 119, 51}, {51, 34, 136}, {153, 153, 51},
    {68, 170, 153}, {204, 102, 119}, {119, 119, 119},
};

static md_plot_rgb rgb_from_bytes(unsigned char r, unsigned char g, unsigned char b) {
  return (md_plot_rgb){r / 255.0, g / 255.0, b / 255.0};
}

bool md_plot_known_region_color(const char *region, md_plot_rgb *color) {
  int rank = md_region_known_rank(region);
  if (rank >= 0) {
    *color = rgb_from_bytes(known_colors[rank][0], known_colors[rank][1], known_colors[rank][2]);
    return true;
  }
  return false;
}

md_plot_rgb md_plot_extra_region_color(size_t rank) {
  size_t n = sizeof extra_colors / sizeof extra_colors[0];
  const unsigned char *c = extra_colors[rank % n];
  return rgb_from_bytes(c[0], c[1], c[2]);
}

static bool regions_add(md_plot_regions *regions, const char *name,
                        const md_plot_survival_series *survival) {
  for (size_t i = 0; i < regions->n; i++) {
    if (strcmp(regions->names[i], name) == 0) {
      if (survival) regions->survival[i] = survival;
      return false;
    }
  }
  regions->names[regions->n] = name;
  regions->survival[regions->n] = survival;
  regions->n++;
  return true;
}

/* Other regions take extra colours in name order, so a region keeps its
 * colour across figures drawn from the same set of regions. */
static void regions_assign_colors(md_plot_regions *regions) {
  for (size_t i = 0; i < regions->n; i++) {
    if (md_plot_known_region_color(regions->names[i], &regions->colors[i])) continue;
    size_t rank = 0;
    for (size_t j = 0; j < regions->n; j++) {
      md_plot_rgb unused;
      if (!md_plot_known_region_color(regions->names[j], &unused) &&
          strcmp(regions->names[j], regions->names[i]) < 0)
        rank++;
    }
    regions->colors[i] = md_plot_extra_region_color(rank);
  }
}

md_status md_plot_regions_build(const md_plot_request *request, md_plot_regions *regions,
                                md_error *err) {
  memset(regions, 0, sizeof *regions);
  size_t n_attention = request->attention ? request->n_attention : 0;
  size_t capacity = request->n_survival + n_attention;
  if (capacity == 0) capacity = 1;
  regions->names = calloc(capacity, sizeof *regions->names);
  regions->colors = calloc(capacity, sizeof *regions->colors);
  regions->survival = calloc(capacity, sizeof *regions->survival);
  if (!regions->names || !regions->colors || !regions->survival) {
    md_plot_regions_free(regions);
    return md_fail(err, MD_E_NOMEM, "out of memory");
  }
  for (size_t i = 0; i < request->n_survival; i++)
    regions_add(regions, request->survival[i].region, &request->survival[i]);
  for (size_t i = 0; i < n_attention; i++)
    regions_add(regions, request->attention[i].region, NULL);
  regions_assign_colors(regions);
  return MD_OK;
}

void md_plot_regions_free(md_plot_regions *regions) {
  free(regions->names);
  free(regions->colors);
  free(regions->survival);
  memset(regions, 0, sizeof *regions);
}

md_plot_rgb md_plot_regions_color(const md_plot_regions *regions, const char *region) {
  for (size_t i = 0; i < regions->n; i++)
    if (strcmp(regions->names[i], region) == 0) return regions->colors[i];
  return md_plot_extra_region_color(0);
}

/* ---- text ------------------------------------------------------------------ */

void md_plot_font(cairo_t *cr, double size, bool bold) {
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

double md_plot_text_width(cairo_t *cr, const char *text) {
  cairo_text_extents_t extents;
  cairo_text_extents(cr, text, &extents);
  return extents.x_advance;
}

void md_plot_text(cairo_t *cr, double x, double y, const char *text, double halign,
                  double valign) {
  /* Aligning on the height of a capital (rather than the font's ascent)
   * centres digits and capitals on tick marks and swatches. */
  cairo_text_extents_t capital;
  cairo_text_extents(cr, "H", &capital);
  double baseline = y + capital.height * (1.0 - valign);
  cairo_move_to(cr, x - halign * md_plot_text_width(cr, text), baseline);
  cairo_show_text(cr, text);
}

void md_plot_fit_text(cairo_t *cr, const char *text, double max_width, char *buf, size_t size) {
  snprintf(buf, size, "%s", text);
  size_t len = strlen(buf);
  if (md_plot_text_width(cr, buf) <= max_width) return;
  while (len > 0) {
    len--;
    /* Do not cut inside a UTF-8 sequence. */
    while (len > 0 && ((unsigned char)buf[len] & 0xC0) == 0x80) len--;
    if (len + 4 > size) continue;
    memcpy(buf + len, "...", 4);
    if (md_plot_text_width(cr, buf) <= max_width) return;
  }
  snprintf(buf, size, "...");
}

void md_plot_set_color(cairo_t *cr, md_plot_rgb color, double alpha) {
  cairo_set_source_rgba(cr, color.r, color.g, color.b, alpha);
}

void md_plot_format_steps(double value, char *buf, size_t size) {
  if (!isfinite(value)) {
    snprintf(buf, size, "n/a");
  } else if (fabs(value) >= 99.95) {
    snprintf(buf, size, "%.0f", value);
  } else if (fabs(value) >= 9.995) {
    snprintf(buf, size, "%.1f", value);
  } else {
    snprintf(buf, size, "%.2f", value);
  }
}
