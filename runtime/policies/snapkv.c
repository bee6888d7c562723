/* snapkv: SnapKV (Li et al. 2024, "SnapKV: LLM Knows What You Are Looking
 * for Before Generation") made a decode-time eviction policy at page
 * granularity (runtime/policy.h, Scores; Pages and eviction).
 *
 * SnapKV scores each prompt token by the attention the last W prompt queries
 * (the observation window) pay it, summed over them, pools the scores with a
 * 1-D pool of width K over neighbouring positions (so that a token next to
 * an important one stays with it), keeps the top-scoring tokens per head,
 * and keeps the window's own tokens. Here, at every eviction point:
 *
 *   v_j = sum over the last W observe calls c of received_c[j]
 *   s_i = max of v_j over the cached tokens j with |pos_j - pos_i| <= K/2
 *
 * and pages go lowest mean s first, except the pages holding the last W
 * appended tokens (the window's own), which go last, oldest first, only
 * when nothing else is left. W = 32 observe calls and max pooling of width
 * K = 7 (the paper's kernel size; its released code also offers average
 * pooling); md_policy_options.observation_window and .pool_kernel change
 * them. Departures: the scores are recomputed at every eviction point over
 * what is cached (SnapKV compresses once, after prefill); the window counts
 * observe calls (a prefill chunk's queries are one call, their attention
 * summed); one selection for every layer and head from the attention
 * averaged over them; pages, not tokens; an evicted neighbour is absent
 * from the pool (max_pool1d's padding). No pinning. */
#include <stdlib.h>

#include "base/policy_defaults.h"
#include "runtime/policies/policies_internal.h"

#define SNAPKV_WINDOW_DEFAULT 32    /* observe calls */
#define SNAPKV_POOL_KERNEL_DEFAULT 7 /* positions, max pooling */

typedef struct snapkv_state {
  int window;          /* W */
  int half_width;      /* K / 2 */
  /* [W]: a ring of the last n_calls observe calls, each the attention the
   * tokens cached then received */
  md_policy_keyed *calls;
  int n_calls, next_call;  /* calls held; the slot the next one takes */
  md_policy_keyed votes;  /* v of the tokens cached at the last observe call */
  int64_t *recent;     /* [W]: a ring of the positions of the last W appended tokens */
  int n_recent, next_recent;
} snapkv_state;

static md_status snapkv_init(void *state, const md_policy_options *options,
                             const md_policy_config *config, md_error *err) {
  (void)config;
  snapkv_state *s = state;
  s->window = options->observation_window ? options->observation_window : SNAPKV_WINDOW_DEFAULT;
  int kernel = options->pool_kernel ? options->pool_kernel : SNAPKV_POOL_KERNEL_DEFAULT;
  if (kernel % 2 == 0) {
    return md_fail(err, MD_E_INVALID, "pool_kernel %d is not odd (the pool is centred on the "
                   "token)", kernel);
  }
  s->half_width = kernel / 2;
  s->calls = calloc((size_t)s->window, sizeof *s->calls);
  s->recent = calloc((size_t)s->window, sizeof *s->recent);
  if (!s->calls || !s->recent) return md_fail(err, MD_E_NOMEM, "out of memory");
  return MD_OK;
}

static void snapkv_reset(void *state, uint64_t seed) {
  (void)seed;
  snapkv_state *s = state;
  s->n_calls = s->next_call = 0;
  s->votes.n = 0;
  s->n_recent = s->next_recent = 0;
}

static md_status snapkv_append(void *state, const md_policy_view *view, md_error *err) {
  (void)err;
  snapkv_state *s = state;
  s->recent[s->next_recent] = view->position[view->n - 1];
  s->next_recent = (s->next_recent + 1) % s->window;
  if (s->n_recent < s->window) s->n_recent++;
  return MD_OK;
}

static md_status snapkv_observe(void *state, const md_policy_view *view, const float *received,
                                int64_t n_queries, md_error *err) {
  (void)n_queries;
  snapkv_state *s = state;
  md_status status = md_policy_keyed_take(&s->calls[s->next_call], view, received, err);
  if (status != MD_OK) return status;
  s->next_call = (s->next_call + 1) % s->window;
  if (s->n_calls < s->window) s->n_calls++;

  status = md_policy_keyed_take(&s->votes, view, NULL, err);
  if (status != MD_OK) return status;
  /* The window's calls, oldest first, each merged by position into the
   * cached tokens (both ascending): a token appended after a call got
   * nothing from it, a token evicted since is gone. */
  int oldest = s->n_calls == s->window ? s->next_call : 0;
  for (int c = 0; c < s->n_calls; c++) {
    const md_policy_keyed *past = &s->calls[(oldest + c) % s->window];
    int64_t k = 0;
    for (int64_t i = 0; i < s->votes.n; i++) {
      while (k < past->n && past->position[k] < s->votes.position[i]) k++;
      if (k < past->n && past->position[k] == s->votes.position[i]) s->votes.value[i] += past->value[k];
    }
  }
  return MD_OK;
}

/* The pool: the largest vote among the cached tokens within K/2 positions.
 * The neighbours' positions and the votes' both ascend, so one search finds
 * the token's vote and a cursor walks outwards from it to each neighbour's. */
static double snapkv_score(const void *state, const md_policy_view *view, int64_t i) {
  const snapkv_state *s = state;
  const md_policy_keyed *votes = &s->votes;
  int64_t at = view->position[i];
  int64_t origin = md_policy_keyed_lower_bound(votes, at);
  double best = md_policy_keyed_value(votes, origin, at);
  int64_t k = origin;  /* kept at the first vote at or after each neighbour's position */
  for (int64_t j = i - 1; j >= 0 && at - view->position[j] <= s->half_width; j--) {
    while (k > 0 && votes->position[k - 1] >= view->position[j]) k--;
    double v = md_policy_keyed_value(votes, k, view->position[j]);
    if (v > best) best = v;
  }
  k = origin;
  for (int64_t j = i + 1; j < view->n && view->position[j] - at <= s->half_width; j++) {
    while (k < votes->n && votes->position[k] < view->position[j]) k++;
    double v = md_policy_keyed_value(votes, k, view->position[j]);
    if (v > best) best = v;
  }
  return best;
}

static md_status snapkv_choose(void *state, const md_policy_view *view,
                               const md_policy_page *pages, int64_t n_pages, int64_t budget_pages,
                               int64_t excess, md_policy_candidate *order, int64_t *n_order,
                               md_error *err) {
  (void)budget_pages, (void)excess, (void)err;
  const snapkv_state *s = state;
  /* The window's pages: those holding a position at or after the oldest of
   * the last W appended, a suffix of the pages (positions ascend). */
  int64_t window_first = s->recent[s->n_recent == s->window ? s->next_recent : 0];
  int64_t first_window_page = n_pages;
  while (first_window_page > 0) {
    const md_policy_page *page = &pages[first_window_page - 1];
    if (view->position[page->first + page->count - 1] < window_first) break;
    first_window_page--;
  }
  int64_t n = md_policy_order_by_score(pages, 0, first_window_page, order);
  for (int64_t j = first_window_page; j < n_pages; j++) {
    if (pages[j].evictable) order[n++] = (md_policy_candidate){pages[j].score, pages[j].page, j};
  }
  *n_order = n;
  return MD_OK;
}

static void snapkv_free(void *state) {
  snapkv_state *s = state;
  for (int c = 0; s->calls && c < s->window; c++) md_policy_keyed_free(&s->calls[c]);
  free(s->calls);
  free(s->recent);
  md_policy_keyed_free(&s->votes);
}

const md_policy_class md_policy_class_snapkv = {
    .name = "snapkv",
    .description = "SnapKV: least pooled window attention first",
    .parameters = "window " MD_DEFAULT_TEXT(SNAPKV_WINDOW_DEFAULT) " steps, max-pool "
                  MD_DEFAULT_TEXT(SNAPKV_POOL_KERNEL_DEFAULT),
    .color = {0.0, 0.447, 0.698},
    .state_size = sizeof(snapkv_state),
    .init = snapkv_init,
    .reset = snapkv_reset,
    .append = snapkv_append,
    .observe = snapkv_observe,
    .score = snapkv_score,
    .choose = snapkv_choose,
    .free = snapkv_free,
};
