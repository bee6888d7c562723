/* full: the whole cache, never evicts (runtime/policy.h, Pages and
 * eviction). eval runs it always, first, as the ceiling
 * (runtime/policy_table.h). No choose: md_policy_evict returns nothing. */
#include "runtime/policy_table.h"

const md_policy_class md_policy_class_full = {
    .name = "full",
    .description = "the whole cache, never evicts: the ceiling, always run",
    .color = {0.0, 0.0, 0.0},
};
