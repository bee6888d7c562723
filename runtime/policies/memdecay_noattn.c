/* memdecay-noattn: memdecay without its attention term (runtime/policy.h,
 * Scores): alpha = 0, so a token scores b_r exp(-lambda_r dt). Attention
 * still refreshes dt (r >= tau): the refresh is the "last use" the
 * lifetimes were measured from, part of the decay term. The ablation of
 * a_hat; pinning and the order pages go are memdecay's. */
#include "runtime/policies/policies_internal.h"

static double memdecay_noattn_score(const void *state, const md_policy_view *v, int64_t i) {
  (void)state;
  return md_memdecay_score(v, i, MD_MEMDECAY_RATE_REGION, false);
}

const md_policy_class md_policy_class_memdecay_noattn = {
    .name = "memdecay-noattn",
    .description = "memdecay with alpha 0: b_r exp(-lambda_r dt)",
    .parameters = "--config",
    .color = {0.55, 0.55, 0.1},
    .uses_regions = true,
    .opt_in = true,
    .score = memdecay_noattn_score,
    .choose = md_policy_choose_by_score,
};
