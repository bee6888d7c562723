/* TensorRT-LLM: a KvCacheRetentionConfig per request (tensorrt_llm.llmapi,
 * the executor's KvCacheRetentionConfig and TokenRangeRetentionConfig):
 *
 *   {"token_range_retention_configs": [{"token_start", "token_end",
 *     "priority", "duration_ms"}, ...], "decode_retention_priority",
 *    "decode_duration_ms"}
 *
 * Priorities 0 to 100, 100 kept longest, 35 for blocks no range covers;
 * ranges must not overlap; a duration (milliseconds, null for none) is how
 * long the priority holds before the block drops to the default. The
 * Python classes take the durations as datetime.timedelta. Blocks are
 * tokens_per_block tokens (32 unless the engine says otherwise), a power of
 * two. */
#include "export/format.h"

static json_t *duration(int64_t ms) {
  return ms == MD_RETENTION_NO_EXPIRY ? json_null() : json_integer((json_int_t)ms);
}

static md_status settings(const md_export_request *request, json_t **value,
                          md_export_adjustments *adjust, md_error *err) {
  (void)adjust;
  const md_retention_map *map = request->map;
  json_t *ranges = json_array();
  for (size_t j = 0; ranges && j < map->n_ranges; j++) {
    const md_retention_range *g = &map->ranges[j];
    if (json_array_append_new(ranges, json_pack("{sIsIsiso}", "token_start", (json_int_t)g->start,
                                                "token_end", (json_int_t)g->end, "priority",
                                                g->setting.priority, "duration_ms",
                                                duration(g->setting.duration_ms))) != 0) {
      json_decref(ranges);
      ranges = NULL;
    }
  }
  *value = ranges ? json_pack("{sosiso}", "token_range_retention_configs", ranges,
                              "decode_retention_priority", map->decode.priority,
                              "decode_duration_ms", duration(map->decode.duration_ms))
                  : NULL;
  return *value ? MD_OK : md_fail(err, MD_E_NOMEM, "out of memory");
}

static const char *const approximations[] = {
    "priority 100 is TensorRT-LLM's highest, not a pin: under enough pressure a pinned "
    "region's blocks are still evicted, after every lower priority",
    "durations are wall-clock milliseconds, a half-life in decode steps times --step-ms: a "
    "slower or faster step than stated moves the end of a priority",
    "the priority of a block is a step: it holds for one half-life, then drops to the "
    "default 35, where MemDecay decays continuously",
    "TensorRT-LLM evicts blocks of finished requests kept for reuse across requests (its "
    "radix tree of reusable blocks), not tokens of the running sequence: MemDecay's "
    "in-sequence eviction under a budget has no counterpart",
    NULL,
};

const md_export_format md_export_format_trtllm = {
    .name = "trtllm",
    .stack = "TensorRT-LLM",
    .field = "kv_cache_retention_config",
    .summary = "TensorRT-LLM KvCacheRetentionConfig: token ranges with priority 0-100 and "
               "duration_ms",
    .default_block_size = 32,
    .uses_blocks = true,
    .power_of_two_blocks = true,
    .durations = true,
    .settings = settings,
    .approximations = approximations,
};
