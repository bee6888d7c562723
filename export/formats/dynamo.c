/* Dynamo: nvext.agent_hints.priority, one per request, higher is more
 * important at Dynamo's API (the router forwards it to the engine, where
 * SGLang's priority eviction keeps higher values longer). The request's
 * value is SGLang's (md_retention_request_priority).
 *
 * nvext.cache_control ({"type": "ephemeral", "ttl"}) is not written: it
 * pins the whole token sequence of the request, every region alike, after
 * the response, for a TTL clamped to 300 to 3600 seconds, and only with
 * HiCache and the router's --enable-cache-control. A region's retention
 * cannot be said with it. */
#include "export/format.h"

static md_status settings(const md_export_request *request, json_t **value,
                          md_export_adjustments *adjust, md_error *err) {
  (void)adjust;
  *value = json_pack("{s{si}}", "agent_hints", "priority",
                     md_retention_request_priority(request->map));
  return *value ? MD_OK : md_fail(err, MD_E_NOMEM, "out of memory");
}

static const char *const approximations[] = {
    "one priority for the whole request: the regions' priorities are averaged over its "
    "prompt tokens",
    "no durations, and no nvext.cache_control: Dynamo's cache_control pins the whole "
    "request's prefix for 5 to 60 minutes, every region alike, which says nothing per region",
    "the priority reaches the engine's eviction only where the backend supports it (SGLang "
    "with --radix-eviction-policy priority); it orders cached prefixes kept for reuse "
    "across requests, not the running sequence's tokens",
    NULL,
};

const md_export_format md_export_format_dynamo = {
    .name = "dynamo",
    .stack = "Dynamo",
    .field = "nvext",
    .summary = "Dynamo nvext.agent_hints.priority: one per request, higher kept longer",
    .default_block_size = 1,
    .uses_blocks = false,
    .durations = false,
    .settings = settings,
    .approximations = approximations,
};
