/* Lifetimes of cached tokens from captured attention (memdecay-calibrate(1), EXTRACT):
 * the rows of the events CSV (memdecay-events(5)), one episode at a time,
 * and the per-token series that fit/extract/attention_norm.h accumulates.
 *
 * Input: one episode's attention matrix attn[steps][tokens] (float32, as in
 * attn/<episode>.npy): a_t(i), the aggregated softmax attention that the
 * query of decode step t puts on token i, 0 where i is not yet born; and per
 * token its region (index into the run's md_region_table) and birth step
 * (-1 for prompt tokens, else the decode step t at which the token was fed
 * as the query and entered the cache).
 *
 * Definitions and the team's decisions on corner cases:
 *
 *  - Visible tokens at step t: those born at or before t, counted from the
 *    births: n_t = P + (decoded tokens born at or before t). Every decode
 *    step feeds exactly one query token, so n_t = P + t + 1 (P prompt tokens,
 *    the t decoded tokens before, the query itself) and tokens = P + steps;
 *    an episode whose births break this is rejected, as is any non-zero
 *    attention on a token before its birth step.
 *  - Attention must be finite, >= 0 and <= 1 (+1e-5 for float32 rounding of
 *    an average of softmax weights): anything else is not an aggregated
 *    softmax weight.
 *  - Uniform-relative attention a_hat_t(i) = a_t(i) n_t, in double.
 *  - Time origin o: 0 (decode start) for prompt tokens, the birth step for
 *    decoded tokens. The token's series is a_hat at steps o .. steps-1.
 *  - Refresh: a_hat_t(i) >= tau. A decoded token's birth step (its own query
 *    attending to itself) never counts: that is not use by later context.
 *    Refresh steps are thus t >= 0 for prompt tokens, t >= birth + 1 for
 *    decoded tokens. A token with no such step (born at the last step) is
 *    unobserved: no events, and left out of the base priority.
 *  - Estimand last-use: with r the last refresh step, if r >= steps - guard
 *    the lifetime is right-censored at the window end: time = steps - o,
 *    event 0; else time = r - o + 1, event 1. guard = 0 never censors (a
 *    refresh at the last step is then an event at steps - o); guard >= steps
 *    censors every refreshed token. Never-refreshed tokens give no row.
 *  - Estimand gap: with refreshes r_1 < ... < r_k, rows r_{j+1} - r_j with
 *    event 1, then steps - r_k with event 0 (the gap still open at the window
 *    end). The wait from the origin to r_1 is not a gap between uses and
 *    gives no row; a token refreshed once gives only the censored row; guard
 *    plays no part.
 *  - Every row has entry 0 and weight 1; rows come out in token order, and
 *    for gap in time order within a token.
 *
 * Memory per episode, beyond the caller's matrix (4 steps tokens bytes, 1.7
 * MiB for 1,700 tokens x 256 steps): 4 bytes per step for n_t and 8 for one
 * token's series, i.e. 3 KiB at 256 steps, independent of the token count.
 * Rows go to the caller's sink as they are made; nothing is buffered. */
#ifndef MD_FIT_EXTRACT_LIFETIMES_H
#define MD_FIT_EXTRACT_LIFETIMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fit/extract/attention_norm.h"
#include "base/error.h"

typedef struct md_attn_episode {
  const char *id;           /* episode id, for messages and the rows' `episode` */
  size_t steps;             /* decode steps: rows of attn */
  size_t tokens;            /* columns of attn: prompt + decoded tokens */
  const float *attn;        /* [steps][tokens] row-major, a_t(i) */
  const uint32_t *region;   /* [tokens] index into the run's region table */
  const int32_t *birth;     /* [tokens] -1 (prompt) or 0 .. steps-1 */
  const int64_t *page;      /* [tokens] KV page, or NULL (rows then carry -1) */
  const int64_t *token_id;  /* [tokens] vocabulary id, or NULL (rows then carry -1) */
} md_attn_episode;

typedef enum md_estimand {
  MD_ESTIMAND_LAST_USE = 0,
  MD_ESTIMAND_GAP,
} md_estimand;

/* "last-use" / "gap"; md_estimand_parse returns false for anything else. */
const char *md_estimand_name(md_estimand estimand);
bool md_estimand_parse(const char *name, md_estimand *estimand);

typedef struct md_lifetime_params {
  md_estimand estimand;
  double tau;   /* refresh threshold in uniform-relative units, > 0; default 3.0 */
  long guard;   /* steps at the window end whose refreshes censor (last-use), >= 0 */
} md_lifetime_params;

#define MD_LIFETIME_GUARD_DEFAULT 16 /* extract --guard */
#define MD_LIFETIME_PARAMS_DEFAULT                                                   \
  ((md_lifetime_params){.estimand = MD_ESTIMAND_GAP, .tau = MD_POLICY_TAU_DEFAULT, \
                        .guard = MD_LIFETIME_GUARD_DEFAULT})

md_status md_lifetime_params_check(const md_lifetime_params *params, md_error *err);

/* One row of the events CSV. Strings point to the region table and the
 * episode id: they live as long as those do. */
typedef struct md_event_row {
  size_t region;            /* index into the region table */
  const char *region_name;  /* `region` */
  double time;              /* `time`, decode steps from the origin (integer valued) */
  int event;                /* `event`: 1 observed end, 0 right-censored */
  double entry;             /* `entry`: always 0 */
  double weight;            /* `weight`: always 1 */
  const char *episode;      /* diagnostics: `episode`, `pos`, `page`, `token_id` */
  int64_t pos;              /* column of the token in the matrix = position in the episode */
  int64_t page;
  int64_t token_id;
} md_event_row;

/* Receives each row; a non-OK status (with `err` filled) stops the episode. */
typedef md_status (*md_event_sink)(void *user, const md_event_row *row, md_error *err);

/* A growable array of rows, usable as a sink (user = the buffer). */
typedef struct md_event_buffer {
  md_event_row *rows;
  size_t n, capacity;
} md_event_buffer;

md_status md_event_buffer_sink(void *buffer, const md_event_row *row, md_error *err);
void md_event_buffer_free(md_event_buffer *buffer);

/* Validates the episode against a table of n_regions regions and fills
 * visible[t] = n_t for t < steps. */
md_status md_attn_episode_check(const md_attn_episode *episode, size_t n_regions,
                                uint32_t *visible, md_error *err);

/* Token i's time origin: 0 for a prompt token, its birth step otherwise. */
static inline size_t md_token_origin(const md_attn_episode *episode, size_t token) {
  return episode->birth[token] < 0 ? 0 : (size_t)episode->birth[token];
}

/* relative_attention[k] = a_{o+k}(token) n_{o+k} for k < steps - o. */
void md_token_relative_attention(const md_attn_episode *episode, const uint32_t *visible,
                                 size_t token, double *relative_attention);

/* One episode: validates it, sends its event rows to `sink` (NULL: none) and
 * every token's series to `stats` (NULL: none). For a second pass of `stats`
 * call it again with sink = NULL. The region table is the one `stats` was
 * made with (names for the rows). */
md_status md_lifetimes_episode(const md_attn_episode *episode, const md_region_table *regions,
                               const md_lifetime_params *params, md_event_sink sink,
                               void *sink_user, md_attn_norm *stats, md_error *err);

#endif
