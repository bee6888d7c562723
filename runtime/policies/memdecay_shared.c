/* memdecay-shared: memdecay with one decay rate for every unpinned region
 * (runtime/policy.h, Scores): b_r exp(-lambda_pooled dt) + alpha e / kappa,
 * where lambda_pooled is the config's pooled.lambda, the exponential fit of
 * the lifetimes of every unpinned region together (memdecay-config(5),
 * POOLED). The ablation of the per-region rates: base priorities, pinning,
 * attention and the order pages go are memdecay's. A config without a
 * pooled fit, or with a null one, is refused. */
#include <math.h>

#include "runtime/policies/policies_internal.h"

static md_status memdecay_shared_init(void *state, const md_policy_options *options,
                                      const md_policy_config *config, md_error *err) {
  (void)state, (void)options;
  if (!config->has_pooled) {
    return md_fail(err, MD_E_INVALID,
                   "pooled.lambda: the config has no pooled fit (a config written before fit "
                   "computed one): fit the events again; memdecay-shared needs it");
  }
  if (isnan(config->pooled_lambda)) {
    return md_fail(err, MD_E_INVALID,
                   "pooled.lambda: null (not estimable: no observed event among the unpinned "
                   "regions); memdecay-shared needs it");
  }
  return MD_OK;
}

static double memdecay_shared_score(const void *state, const md_policy_view *v, int64_t i) {
  (void)state;
  return md_memdecay_score(v, i, MD_MEMDECAY_RATE_POOLED, true);
}

const md_policy_class md_policy_class_memdecay_shared = {
    .name = "memdecay-shared",
    .description = "memdecay, one pooled lambda for all unpinned regions",
    .parameters = "--config with pooled.lambda",
    .color = {0.949, 0.647, 0.502},
    .uses_regions = true,
    .opt_in = true,
    .init = memdecay_shared_init,
    .score = memdecay_shared_score,
    .choose = md_policy_choose_by_score,
};
