/* streaming-pinned: streaming (StreamingLLM's sink pages kept, the others
 * oldest first) with memdecay's pinning: pages holding a token of a pinned
 * region of the config are never evicted (runtime/policy.h, Pages and
 * eviction). The ablation that keeps pinning alone, without rates or
 * attention: how much of memdecay's gain over recency pinning explains.
 * The same callbacks as streaming (streaming.c); uses_regions makes the
 * engine keep the pinned pages. */
#include "runtime/policies/policies_internal.h"

const md_policy_class md_policy_class_streaming_pinned = {
    .name = "streaming-pinned",
    .description = "streaming, and pinned regions never evicted",
    .parameters = "4 sink tokens, --config's pinning",
    .color = {0.941, 0.894, 0.259},
    .uses_regions = true,
    .opt_in = true,
    .state_size = sizeof(md_streaming_state),
    .init = md_streaming_init,
    .reset = md_streaming_reset,
    .append = md_streaming_append,
    .choose = md_streaming_choose,
};
