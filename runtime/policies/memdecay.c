/* memdecay: the policy a memdecay.json states (runtime/policy.h, Scores;
 * memdecay-config(5)): a token of region r last refreshed dt steps ago
 * scores b_r exp(-lambda_r dt) + alpha e / kappa (its survival, weighted by
 * how often the region is used at all, plus its recent attention normalised
 * at the calibration's kappa quantile); a pinned region's token scores
 * +infinity and its page is never evicted; the other pages go lowest page
 * score first. The score is md_memdecay_score, which the ablations
 * (memdecay_shared.c, memdecay_nodecay.c, memdecay_noattn.c) call with one
 * part taken away. */
#include <math.h>

#include "runtime/policies/policies_internal.h"

double md_memdecay_score(const md_policy_view *v, int64_t i, md_memdecay_rate rate,
                         bool attention) {
  int r = v->region[i];
  if (v->pinned[r]) return INFINITY;
  double decay = v->base_priority[r];
  if (rate != MD_MEMDECAY_RATE_NONE) {
    double lambda = rate == MD_MEMDECAY_RATE_POOLED ? v->pooled_lambda : v->lambda[r];
    decay *= exp(-lambda * (double)(v->step - v->refresh[i]));
  }
  return attention ? decay + v->alpha * (v->e[i] / v->kappa) : decay;
}

static double memdecay_score(const void *state, const md_policy_view *v, int64_t i) {
  (void)state;
  return md_memdecay_score(v, i, MD_MEMDECAY_RATE_REGION, true);
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
