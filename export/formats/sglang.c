/* SGLang: one "priority" per request. Under --radix-eviction-policy
 * priority the radix cache evicts the node of lowest priority first (LRU
 * among equals), and a node shared by several requests keeps the highest
 * priority any of them gave it; a request without one counts as 0. So a
 * higher value is kept longer, and the request's value is the mean of its
 * prompt tokens' block priorities (export/retention.h,
 * md_retention_request_priority), on the same 1 to 100 scale. No blocks,
 * no durations. */
#include "export/format.h"

static md_status settings(const md_export_request *request, json_t **value,
                          md_export_adjustments *adjust, md_error *err) {
  (void)adjust;
  *value = json_integer(md_retention_request_priority(request->map));
  return *value ? MD_OK : md_fail(err, MD_E_NOMEM, "out of memory");
}

static const char *const approximations[] = {
    "one priority for the whole request: the regions' priorities are averaged over its "
    "prompt tokens, so a pinned system prompt and a short-lived tool output get the same one",
    "no durations: the priority holds as long as the cached nodes live",
    "the priority orders the eviction of cached prefixes kept for reuse across requests "
    "(the radix cache), not of the running sequence's tokens",
    "with --schedule-low-priority-values-first SGLang also schedules by this value, lower "
    "first: check that the server's scheduling direction is the one wanted",
    NULL,
};

const md_export_format md_export_format_sglang = {
    .name = "sglang",
    .stack = "SGLang",
    .field = "priority",
    .summary = "SGLang request priority (--radix-eviction-policy priority): one per request, "
               "higher kept longer",
    .default_block_size = 1,
    .uses_blocks = false,
    .durations = false,
    .settings = settings,
    .approximations = approximations,
};
