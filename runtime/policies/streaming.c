/* streaming: StreamingLLM (Xiao et al. 2023, "Efficient Streaming Language
 * Models with Attention Sinks") at page granularity (runtime/policy.h, Pages
 * and eviction): the sink pages (those holding the sequence's first
 * sink_tokens tokens, md_policy_options.sink_tokens, default 4) are kept, the
 * others go oldest first, leaving the most recent pages. No pinning; the
 * same callbacks with pinning are streaming-pinned (streaming_pinned.c). */
#include <stdint.h>

#include "runtime/policies/policies_internal.h"

enum { DEFAULT_SINK_TOKENS = 4 };

md_status md_streaming_init(void *state, const md_policy_options *options,
                            const md_policy_config *config, md_error *err) {
  (void)config, (void)err;
  md_streaming_state *s = state;
  s->sink_tokens = options->sink_tokens ? options->sink_tokens : DEFAULT_SINK_TOKENS;
  return MD_OK;
}

void md_streaming_reset(void *state, uint64_t seed) {
  (void)seed;
  md_streaming_state *s = state;
  s->sinks_seen = 0;
  s->sink_last = -1;
}

md_status md_streaming_append(void *state, const md_policy_view *view, md_error *err) {
  (void)err;
  md_streaming_state *s = state;
  if (s->sinks_seen < s->sink_tokens) {
    s->sinks_seen++;
    s->sink_last = view->position[view->n - 1];
  }
  return MD_OK;
}

md_status md_streaming_choose(void *state, const md_policy_view *view, const md_policy_page *pages,
                              int64_t n_pages, int64_t budget_pages, int64_t excess,
                              md_policy_candidate *order, int64_t *n_order, md_error *err) {
  (void)budget_pages, (void)excess, (void)err;
  const md_streaming_state *s = state;
  int64_t n_cand = 0;
  for (int64_t j = 0; j < n_pages; j++) {
    bool sink = s->sink_last >= 0 && pages[j].page <= s->sink_last / view->page_size;
    if (pages[j].evictable && !sink) order[n_cand++].index = j;  /* oldest first */
  }
  *n_order = n_cand;
  return MD_OK;
}

const md_policy_class md_policy_class_streaming = {
    .name = "streaming",
    .description = "StreamingLLM: the sink pages and the newest",
    .parameters = "4 sink tokens",
    .color = {0.902, 0.624, 0.0},
    .state_size = sizeof(md_streaming_state),
    .init = md_streaming_init,
    .reset = md_streaming_reset,
    .append = md_streaming_append,
    .choose = md_streaming_choose,
};
