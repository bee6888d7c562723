/* h2o: H2O (Zhang et al. 2023, "H2O: Heavy-Hitter Oracle") at page
 * granularity (runtime/policy.h, Scores; Pages and eviction): a token scores
 * its accumulated attention acc; the ceil(budget / 2) most recent cached pages
 * are kept, the others go lowest mean accumulated attention first, so the
 * rest of the budget holds the heaviest pages. No pinning. */
#include "runtime/policy_class.h"

static double h2o_score(const void *state, const md_policy_view *view, int64_t i) {
  (void)state;
  return view->acc[i];
}

static md_status h2o_choose(void *state, const md_policy_view *view, const md_policy_page *pages,
                            int64_t n_pages, int64_t budget_pages, int64_t excess,
                            md_policy_candidate *order, int64_t *n_order, md_error *err) {
  (void)state, (void)view, (void)excess, (void)err;
  int64_t recent = budget_pages / 2 + budget_pages % 2;  /* ceil(budget / 2) */
  *n_order = n_pages > recent ? md_policy_order_by_score(pages, 0, n_pages - recent, order) : 0;
  return MD_OK;
}

const md_policy_class md_policy_class_h2o = {
    .name = "h2o",
    .description = "H2O: the newest half of the budget, then the most attended",
    .color = {0.337, 0.706, 0.914},
    .score = h2o_score,
    .choose = h2o_choose,
};
