/* vLLM: the retention API of RFC #37003 as its pull request #38514 defines
 * it (open, not in a release): request fields "retention_directives",
 * [{"start", "end" (null: to the end), "priority" 0-100, "duration" seconds
 * or null}], and "retention_scope" (an ownership scope: left out, the
 * request then owns its directives alone). Its request validator sorts the
 * directives by start and refuses a priority above an earlier one (a block
 * of a shared prefix must not outrank the blocks it extends), so the
 * directives are clamped: walking them in order, each priority is lowered to
 * the one before it, with a warning naming the request, the region, its
 * tokens and both priorities. The last directive covers the decoded tokens,
 * [N, null). Blocks are 16 tokens unless the engine says otherwise. */
#include <stdio.h>

#include "export/format.h"

static json_t *seconds(int64_t ms) {
  return ms == MD_RETENTION_NO_EXPIRY ? json_null() : json_real((double)ms / 1000.0);
}

static md_status directive(json_t *list, size_t start, const size_t *end, int priority,
                           int64_t duration_ms) {
  json_t *d = json_pack("{sIsosiso}", "start", (json_int_t)start, "end",
                        end ? json_integer((json_int_t)*end) : json_null(), "priority", priority,
                        "duration", seconds(duration_ms));
  return d && json_array_append_new(list, d) == 0 ? MD_OK : MD_E_NOMEM;
}

static md_status settings(const md_export_request *request, json_t **value,
                          md_export_adjustments *adjust, md_error *err) {
  const md_retention_map *map = request->map;
  json_t *list = json_array();
  md_status s = list ? MD_OK : md_fail(err, MD_E_NOMEM, "out of memory");
  int previous = MD_RETENTION_PINNED;
  for (size_t j = 0; s == MD_OK && j <= map->n_ranges; j++) {
    bool decode = j == map->n_ranges;
    md_retention_setting setting = decode ? map->decode : map->ranges[j].setting;
    size_t region = decode ? map->decode_region : map->ranges[j].region;
    size_t start = decode ? map->prompt_tokens : map->ranges[j].start;
    int priority = setting.priority;
    if (j > 0 && priority > previous) {
      priority = previous;
      adjust->lowered[region]++;
      char where[64];
      if (decode)
        snprintf(where, sizeof where, "decoded tokens from %zu", start);
      else
        snprintf(where, sizeof where, "tokens [%zu, %zu)", start, map->ranges[j].end);
      s = md_warnings_add(adjust->warnings, err, "request \"%s\": region %s, %s: priority %d "
                          "lowered to %d (vLLM requires priorities non-increasing with position)",
                          request->id, request->regions[region].name, where, setting.priority,
                          priority);
    }
    if (s == MD_OK &&
        directive(list, start, decode ? NULL : &map->ranges[j].end, priority, setting.duration_ms) != MD_OK)
      s = md_fail(err, MD_E_NOMEM, "out of memory");
    previous = priority;
  }
  if (s != MD_OK) {
    json_decref(list);
    return s;
  }
  *value = list;
  return MD_OK;
}

static const char *const approximations[] = {
    "priorities must not increase with position: a later region with a higher priority "
    "than an earlier one is lowered to it (each such clamp is warned about)",
    "priority 100 is the highest, not a pin: a pinned region's blocks can still be evicted",
    "durations are wall-clock seconds, a half-life in decode steps times --step-ms",
    "the priority of a block is a step: it holds for one half-life, then the stack's default "
    "applies, where MemDecay decays continuously",
    "the retention API orders the eviction of cached blocks kept for prefix reuse across "
    "requests, not of the running sequence's tokens",
    "it follows an open pull request (vllm-project/vllm#38514), not a released vLLM",
    NULL,
};

const md_export_format md_export_format_vllm = {
    .name = "vllm",
    .stack = "vLLM",
    .field = "retention_directives",
    .summary = "vLLM retention_directives (RFC #37003, PR #38514): priority 0-100, duration in "
               "seconds, non-increasing",
    .default_block_size = 16,
    .uses_blocks = true,
    .durations = true,
    .settings = settings,
    .approximations = approximations,
};
