/* The retention mapping, steps 1 to 3 (export/retention.h). */
#include "export/retention.h"

#include <math.h>
#include <stdlib.h>

md_status md_retention_setting_of(const md_retention_region *region, double step_ms,
                                  md_retention_setting *out, md_error *err) {
  double b = region->base_priority, h = region->half_life;
  if (!(b >= 0.0 && b <= 1.0))
    return md_fail(err, MD_E_INVALID, "regions.%s.base_priority: %g is outside [0, 1]",
                   region->name, b);
  if (!isnan(step_ms) && !(step_ms > 0.0 && isfinite(step_ms)))
    return md_fail(err, MD_E_INVALID, "milliseconds per decode step must be > 0, got %g", step_ms);
  if (isfinite(h) && !(h > 0.0))
    return md_fail(err, MD_E_INVALID, "regions.%s.half_life: %g is not > 0", region->name, h);
  out->priority = region->pinned ? MD_RETENTION_PINNED : 1 + (int)floor(98.0 * b + 0.5);
  out->duration_ms = MD_RETENTION_NO_EXPIRY;
  if (region->pinned || !isfinite(h) || isnan(step_ms)) return MD_OK;
  double d = floor(h * step_ms + 0.5);
  if (!(d <= MD_RETENTION_DURATION_MAX_MS))
    return md_fail(err, MD_E_INVALID, "regions.%s: half-life %g steps at %g ms a step is %g ms, "
                   "more than %.0f", region->name, h, step_ms, d, MD_RETENTION_DURATION_MAX_MS);
  out->duration_ms = d < 1.0 ? 1 : (int64_t)d;
  return MD_OK;
}

int md_retention_setting_compare(md_retention_setting a, md_retention_setting b) {
  if (a.priority != b.priority) return a.priority < b.priority ? -1 : 1;
  if (a.duration_ms == b.duration_ms) return 0;
  if (a.duration_ms == MD_RETENTION_NO_EXPIRY) return 1;
  if (b.duration_ms == MD_RETENTION_NO_EXPIRY) return -1;
  return a.duration_ms < b.duration_ms ? -1 : 1;
}

static bool same(md_retention_setting a, md_retention_setting b) {
  return md_retention_setting_compare(a, b) == 0;
}

md_status md_retention_map_tokens(const md_retention_region *regions, size_t n_regions,
                                  const size_t *token_region, size_t n_tokens,
                                  size_t decode_region, size_t block_size, double step_ms,
                                  md_retention_map *out, md_error *err) {
  *out = (md_retention_map){0};
  if (n_tokens == 0) return md_fail(err, MD_E_INVALID, "the prompt has no tokens");
  if (block_size == 0) return md_fail(err, MD_E_INVALID, "the block size must be >= 1");
  if (decode_region >= n_regions) return md_fail(err, MD_E_INVALID, "decode region out of range");
  md_retention_setting *settings = malloc(n_regions * sizeof *settings);
  if (!settings) return md_fail(err, MD_E_NOMEM, "out of memory");
  md_status s = MD_OK;
  for (size_t r = 0; r < n_regions && s == MD_OK; r++)
    s = md_retention_setting_of(&regions[r], step_ms, &settings[r], err);
  size_t n_blocks = (n_tokens - 1) / block_size + 1;
  /* At most one range per block. */
  md_retention_range *ranges = s == MD_OK ? malloc(n_blocks * sizeof *ranges) : NULL;
  if (s == MD_OK && !ranges) s = md_fail(err, MD_E_NOMEM, "out of memory");
  size_t n_ranges = 0;
  for (size_t k = 0; k < n_blocks && s == MD_OK; k++) {
    size_t start = k * block_size, end = start + block_size < n_tokens ? start + block_size : n_tokens;
    md_retention_setting best = {0, 0};
    for (size_t i = start; i < end; i++) {
      if (token_region[i] >= n_regions) {
        s = md_fail(err, MD_E_INVALID, "token %zu: region index out of range", i);
        break;
      }
      md_retention_setting t = settings[token_region[i]];
      if (i == start || md_retention_setting_compare(t, best) > 0) best = t;
    }
    if (s != MD_OK) break;
    if (n_ranges > 0 && same(ranges[n_ranges - 1].setting, best)) {
      ranges[n_ranges - 1].end = end;
    } else {
      ranges[n_ranges++] = (md_retention_range){.start = start, .end = end, .setting = best};
    }
  }
  /* A range's region: the first in the config's order with a token in the
   * range and the range's setting. */
  for (size_t j = 0; j < n_ranges && s == MD_OK; j++) {
    md_retention_range *g = &ranges[j];
    g->region = n_regions;
    for (size_t i = g->start; i < g->end; i++) {
      size_t r = token_region[i];
      if (r < g->region && same(settings[r], g->setting)) g->region = r;
    }
  }
  if (s == MD_OK) {
    *out = (md_retention_map){.prompt_tokens = n_tokens, .block_size = block_size,
                              .ranges = ranges, .n_ranges = n_ranges,
                              .decode_region = decode_region,
                              .decode = settings[decode_region]};
  } else {
    free(ranges);
  }
  free(settings);
  return s;
}

void md_retention_map_free(md_retention_map *map) {
  free(map->ranges);
  *map = (md_retention_map){0};
}

int md_retention_request_priority(const md_retention_map *map) {
  uint64_t sum = 0, n = map->prompt_tokens;
  for (size_t j = 0; j < map->n_ranges; j++)
    sum += (uint64_t)(map->ranges[j].end - map->ranges[j].start) * (uint64_t)map->ranges[j].setting.priority;
  return n ? (int)((2 * sum + n) / (2 * n)) : 0;
}
