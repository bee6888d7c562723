/* memdecay-nodecay: memdecay without decay (runtime/policy.h, Scores):
 * lambda = 0 for every region, so a token scores b_r + alpha e / kappa. The
 * ablation of the fitted rates: what the base priorities, pinning and
 * attention achieve alone. The order pages go is memdecay's. */
#include "runtime/policies/policies_internal.h"

static double memdecay_nodecay_score(const void *state, const md_policy_view *v, int64_t i) {
  (void)state;
  return md_memdecay_score(v, i, MD_MEMDECAY_RATE_NONE, true);
}

const md_policy_class md_policy_class_memdecay_nodecay = {
    .name = "memdecay-nodecay",
    .description = "memdecay with lambda 0: b_r + alpha a_hat",
    .parameters = "--config",
    .color = {0.545, 0.212, 0.0},
    .uses_regions = true,
    .opt_in = true,
    .score = memdecay_nodecay_score,
    .choose = md_policy_choose_by_score,
};
