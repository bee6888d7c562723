/* A policy class: what one eviction policy is to the runtime (runtime/policy.h).
 *
 * The engine of runtime/policy.c keeps, for every policy alike, the cached
 * tokens (position, region), the step counter, and per token the statistics
 * of runtime/policy.h (last-refresh step, the EWMAs e and e_raw, H2O's
 * accumulator acc); it cuts the cached tokens into pages, decides which pages
 * may go at all (never the newest token's; never a pinned region's for a
 * class with `uses_regions`), and evicts. A class adds what differs: a name,
 * a line of help, the score of a token, and the order in which the evictable
 * pages go, with optional state of its own.
 *
 * Each class of the program is defined in its own file under
 * runtime/policies/ and listed once in runtime/policies/table.c
 * (runtime/policy_table.h): the table is every list of policy names there is
 * (eval's --policies, --help and default set, the figure's colours); a class
 * marked opt_in is in the table but not in eval's default set. A class
 * outside the table (a test's, an experiment's) runs just as well: give it to
 * md_policy_new (md_policy_options.policy) or to md_eval
 * (md_eval_options.policies); it then has no name on the command line.
 *
 * Calls, all on one thread, for one md_policy:
 *   init    once, from md_policy_new, after the engine checked the options
 *           and the config; *state is state_size zeroed bytes (NULL when
 *           state_size is 0).
 *   reset   from md_policy_new (after init) and every md_policy_reset:
 *           a new sequence with this seed.
 *   append  after the engine appended a token: view->n - 1 is its index.
 *   observe after the engine updated its statistics with an observe call's
 *           attention (received[0 .. view->n - 1], n_queries as there).
 *   score   the score of cached token i (index into the view) at the
 *           current step, from the view and the class's state (NULL for a
 *           class without state); NULL: the class scores nothing (every
 *           token 0). Called per token when pages are built and by
 *           md_policy_token_score / md_policy_page_score; it must not
 *           change the state.
 *   choose  when pages must go (more than budget_pages pages cached): fills
 *           order[0 .. *n_order - 1] with the indices of evictable pages in
 *           the order they go (each at most once); the engine evicts the
 *           first min(excess, *n_order). NULL: never evicts (md_policy_evict
 *           returns nothing, and no pages are built).
 *   free    from md_policy_free (also after an init that failed, with the
 *           state init left), when the class allocated more than state.
 * Every pointer but name and description may be NULL. A callback that
 * fails returns an md_status with err filled (md_fail), never prints, never
 * exits; the engine prefixes "policy NAME: ". What a class reads in the view
 * is valid during the call only. A class that keeps state per token keys it
 * by position: after an eviction the view's positions say what is left. */
#ifndef MD_RUNTIME_POLICY_CLASS_H
#define MD_RUNTIME_POLICY_CLASS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "runtime/policy.h"

/* The cache as a class sees it (read-only). Tokens in slot order =
 * position order; index i = 0 .. n - 1. */
typedef struct md_policy_view {
  int64_t n;                   /* cached tokens */
  const int64_t *position;     /* [n] ascending */
  const int *region;           /* [n] region index of the config, or -1 */
  const int64_t *refresh;      /* [n] last-refresh step */
  const double *e;             /* [n] EWMA of uniform-relative attention r */
  const double *e_raw;         /* [n] EWMA of the raw share w */
  const double *acc;           /* [n] accumulated attention (sum of received) */
  int64_t step;                /* t */
  int page_size;               /* the page of a token is position / page_size */
  /* The config (the defaults of base/policy_defaults.h without one, and
   * no regions). Per region r < n_regions: */
  size_t n_regions;
  const double *base_priority; /* b_r */
  const double *lambda;        /* lambda_r (NaN allowed when pinned) */
  const bool *pinned;
  double tau, ewma_beta, alpha, kappa;
  /* The config's pooled decay rate (pooled.lambda: one exponential fit of
   * every unpinned region's lifetimes together); NaN when the config has no
   * pooled fit or its lambda is null. */
  double pooled_lambda;
} md_policy_view;

/* The index of the first of positions[0 .. n-1] (ascending, as a view's
 * are) that is >= position; n when none. */
static inline int64_t md_policy_position_lower_bound(const int64_t *positions, int64_t n,
                                                     int64_t position) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (positions[mid] < position) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* A page with cached tokens: a run of tokens with one position / page_size. */
typedef struct md_policy_page {
  int64_t page;       /* position / page_size */
  int64_t first;      /* index of its first cached token in the view */
  int64_t count;      /* its cached tokens */
  bool evictable;     /* not the newest token's page, and (uses_regions) no pinned token */
  double score;       /* the mean of its tokens' scores when evictable and the
                         class scores; else 0 */
} md_policy_page;

/* One entry of choose's order. Only `index` (into the pages) counts to the
 * engine; score and page are there for md_policy_order_by_score. */
typedef struct md_policy_candidate {
  double score;
  int64_t page;
  int64_t index;
} md_policy_candidate;

typedef struct md_policy_class {
  const char *name;         /* eval --policies, results' "policy": [a-z0-9_-], at most
                               MD_EVAL_POLICY_NAME_MAX - 1 bytes (io/formats/eval_results.h) */
  const char *description;  /* one line for eval --help (at most 60 characters) */
  const char *parameters;   /* what it reads besides the cache, for --help ("--seed",
                               "--config"); NULL: nothing */
  double color[3];          /* its bars in eval's figure: sRGB, each in [0, 1] */
  /* The class reads the config's regions: md_policy_new needs a config,
   * every appended token needs a region index of it, and pages holding a
   * pinned region's token are not evictable. */
  bool uses_regions;
  /* Not in eval's default set (the baselines and ablations a reader asks
   * for, beyond the default comparison): eval runs it only when --policies
   * (md_eval_options.policies) names it. */
  bool opt_in;
  size_t state_size;        /* bytes of state the engine allocates (zeroed); 0: none */
  md_status (*init)(void *state, const md_policy_options *options,
                    const md_policy_config *config, md_error *err);
  void (*reset)(void *state, uint64_t seed);
  md_status (*append)(void *state, const md_policy_view *view, md_error *err);
  md_status (*observe)(void *state, const md_policy_view *view, const float *received,
                       int64_t n_queries, md_error *err);
  double (*score)(const void *state, const md_policy_view *view, int64_t i);
  md_status (*choose)(void *state, const md_policy_view *view, const md_policy_page *pages,
                      int64_t n_pages, int64_t budget_pages, int64_t excess,
                      md_policy_candidate *order, int64_t *n_order, md_error *err);
  void (*free)(void *state);
} md_policy_class;

/* A choose helper: the evictable pages among pages[begin .. end - 1] into
 * order, lowest score first, ties oldest page first (a total order: the
 * same on every platform); returns how many. */
int64_t md_policy_order_by_score(const md_policy_page *pages, int64_t begin, int64_t end,
                                 md_policy_candidate *order);

/* A ready-made choose: every evictable page, lowest score first, ties oldest
 * first (memdecay's order). */
md_status md_policy_choose_by_score(void *state, const md_policy_view *view,
                                    const md_policy_page *pages, int64_t n_pages,
                                    int64_t budget_pages, int64_t excess,
                                    md_policy_candidate *order, int64_t *n_order, md_error *err);

#endif
