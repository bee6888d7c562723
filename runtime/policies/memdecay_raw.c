/* memdecay-raw: memdecay's unnormalised form, kept for comparison
 * (runtime/policy.h, Scores): b_r exp(-lambda_r dt) + alpha e_raw, the EWMA
 * of the plain attention share, no kappa. Pinned regions and the order pages
 * go as memdecay's. */
#include "runtime/policies/policies_internal.h"

/* memdecay's decay term (+infinity when pinned), then the raw attention
 * term in place of the normalised one. */
static double memdecay_raw_score(const void *state, const md_policy_view *v, int64_t i) {
  (void)state;
  return md_memdecay_score(v, i, MD_MEMDECAY_RATE_REGION, false) + v->alpha * v->e_raw[i];
}

const md_policy_class md_policy_class_memdecay_raw = {
    .name = "memdecay-raw",
    .description = "memdecay with the raw attention share, no kappa",
    .parameters = "--config",
    .color = {0.8, 0.475, 0.655},
    .uses_regions = true,
    .score = memdecay_raw_score,
    .choose = md_policy_choose_by_score,
};
