/* memdecay: the policy a memdecay.json states (runtime/policy.h, Scores;
 * memdecay-config(5)): a token of region r last refreshed dt steps ago
 * scores b_r exp(-lambda_r dt) + alpha e / kappa (its survival, weighted by
 * how often the region is used at all, plus its recent attention normalised
 * at the calibration's kappa quantile); a pinned region's token scores
 * +infinity and its page is never evicted; the other pages go lowest page
 * score first. */
#include <math.h>

#include "runtime/policy_class.h"

static double memdecay_score(const md_policy_view *v, int64_t i) {
  int r = v->region[i];
  if (v->pinned[r]) return INFINITY;
  double decay = v->base_priority[r] * exp(-v->lambda[r] * (double)(v->step - v->refresh[i]));
  return decay + v->alpha * (v->e[i] / v->kappa);
}

const md_policy_class md_policy_class_memdecay = {
    .name = "memdecay",
    .description = "b_r exp(-lambda_r dt) + alpha a_hat; pins kept",
    .parameters = "--config",
    .color = {0.835, 0.369, 0.0},
    .uses_regions = true,
    .score = memdecay_score,
    .choose = md_policy_choose_by_score,
};
