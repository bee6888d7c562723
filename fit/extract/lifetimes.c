/* Events per token from one episode's attention; the semantics are stated in
 * fit/extract/lifetimes.h. */
#include "fit/extract/lifetimes.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* float32 rounding of an average of softmax weights can pass 1 by a few ulps. */
#define ATTENTION_MAX (1.0 + 1e-5)

const char *md_estimand_name(md_estimand estimand) {
  return estimand == MD_ESTIMAND_GAP ? "gap" : "last-use";
}

bool md_estimand_parse(const char *name, md_estimand *estimand) {
  if (!strcmp(name, "last-use")) *estimand = MD_ESTIMAND_LAST_USE;
  else if (!strcmp(name, "gap")) *estimand = MD_ESTIMAND_GAP;
  else return false;
  return true;
}

md_status md_lifetime_params_check(const md_lifetime_params *params, md_error *err) {
  if (!params) return md_fail(err, MD_E_INVALID, "lifetimes: no parameters");
  if (params->estimand != MD_ESTIMAND_LAST_USE && params->estimand != MD_ESTIMAND_GAP)
    return md_fail(err, MD_E_INVALID, "estimand %d: must be last-use or gap",
                   (int)params->estimand);
  if (!(params->tau > 0.0 && isfinite(params->tau)))
    return md_fail(err, MD_E_INVALID, "tau = %g: must be a finite number > 0", params->tau);
  if (params->guard < 0)
    return md_fail(err, MD_E_INVALID, "guard = %ld: must be >= 0", params->guard);
  return MD_OK;
}

md_status md_event_buffer_sink(void *user, const md_event_row *row, md_error *err) {
  md_event_buffer *buffer = user;
  if (buffer->n == buffer->capacity) {
    size_t capacity = buffer->capacity ? 2 * buffer->capacity : 256;
    md_event_row *grown = realloc(buffer->rows, capacity * sizeof *grown);
    if (!grown) return md_fail(err, MD_E_NOMEM, "events: out of memory");
    buffer->rows = grown;
    buffer->capacity = capacity;
  }
  buffer->rows[buffer->n++] = *row;
  return MD_OK;
}

void md_event_buffer_free(md_event_buffer *buffer) {
  if (!buffer) return;
  free(buffer->rows);
  memset(buffer, 0, sizeof *buffer);
}

static const char *episode_name(const md_attn_episode *episode) {
  return episode->id ? episode->id : "(unnamed)";
}

static md_status check_shape(const md_attn_episode *episode, md_error *err) {
  const char *id = episode_name(episode);
  if (episode->steps == 0 || episode->tokens == 0)
    return md_fail(err, MD_E_FORMAT, "episode %s: attention matrix is %zu x %zu: needs at least "
                   "one decode step and one token", id, episode->steps, episode->tokens);
  if (episode->tokens > UINT32_MAX || episode->steps > SIZE_MAX / episode->tokens)
    return md_fail(err, MD_E_UNSUPPORTED, "episode %s: attention matrix %zu x %zu is too large",
                   id, episode->steps, episode->tokens);
  if (!episode->attn || !episode->region || !episode->birth)
    return md_fail(err, MD_E_INVALID, "episode %s: attention, regions or births missing", id);
  return MD_OK;
}

static md_status check_tokens(const md_attn_episode *episode, size_t n_regions, md_error *err) {
  const char *id = episode_name(episode);
  for (size_t i = 0; i < episode->tokens; i++) {
    if (episode->region[i] >= n_regions)
      return md_fail(err, MD_E_FORMAT, "episode %s: token %zu: region index %u, but the run has "
                     "%zu regions", id, i, (unsigned)episode->region[i], n_regions);
    int32_t birth = episode->birth[i];
    if (birth < -1 || (birth >= 0 && (size_t)birth >= episode->steps))
      return md_fail(err, MD_E_FORMAT, "episode %s: token %zu: birth %d outside -1 .. %zu "
                     "(the decode steps)", id, i, (int)birth, episode->steps - 1);
  }
  return MD_OK;
}

/* n_t from the births; each step must see exactly one new token (its query). */
static md_status visible_counts(const md_attn_episode *episode, uint32_t *visible,
                                md_error *err) {
  memset(visible, 0, episode->steps * sizeof *visible);
  uint32_t prompt = 0;
  for (size_t i = 0; i < episode->tokens; i++) {
    if (episode->birth[i] < 0) prompt++;
    else visible[episode->birth[i]]++;
  }
  for (size_t t = 0; t < episode->steps; t++) {
    if (visible[t] != 1)
      return md_fail(err, MD_E_FORMAT, "episode %s: %u tokens born at decode step %zu: each "
                     "step feeds exactly one query token (n_t = prompt + t + 1)",
                     episode_name(episode), (unsigned)visible[t], t);
    visible[t] = prompt + (uint32_t)t + 1;
  }
  return MD_OK;
}

static md_status check_attention(const md_attn_episode *episode, md_error *err) {
  for (size_t t = 0; t < episode->steps; t++) {
    const float *row = episode->attn + t * episode->tokens;
    for (size_t i = 0; i < episode->tokens; i++) {
      double a = row[i];
      if (!(a >= 0.0 && a <= ATTENTION_MAX))
        return md_fail(err, MD_E_FORMAT, "episode %s: attn[%zu][%zu] = %g: attention must be a "
                       "finite number in [0, 1]", episode_name(episode), t, i, a);
      if (a != 0.0 && episode->birth[i] > (int32_t)t)
        return md_fail(err, MD_E_FORMAT, "episode %s: attn[%zu][%zu] = %g on a token born at "
                       "step %d: must be 0 before birth", episode_name(episode), t, i, a,
                       (int)episode->birth[i]);
    }
  }
  return MD_OK;
}

md_status md_attn_episode_check(const md_attn_episode *episode, size_t n_regions,
                                uint32_t *visible, md_error *err) {
  if (!episode) return md_fail(err, MD_E_INVALID, "lifetimes: no episode");
  md_status status = check_shape(episode, err);
  if (status == MD_OK) status = check_tokens(episode, n_regions, err);
  if (status == MD_OK) status = visible_counts(episode, visible, err);
  if (status == MD_OK) status = check_attention(episode, err);
  return status;
}

void md_token_relative_attention(const md_attn_episode *episode, const uint32_t *visible,
                                 size_t token, double *relative_attention) {
  size_t origin = md_token_origin(episode, token);
  for (size_t t = origin; t < episode->steps; t++)
    relative_attention[t - origin] =
        (double)episode->attn[t * episode->tokens + token] * (double)visible[t];
}

/* What one token's rows need besides time and event. */
typedef struct token_rows {
  md_event_sink sink;
  void *user;
  md_event_row row;
} token_rows;

static md_status emit(token_rows *rows, double time, int event, md_error *err) {
  if (!rows->sink) return MD_OK;
  rows->row.time = time;
  rows->row.event = event;
  return rows->sink(rows->user, &rows->row, err);
}

/* Scans the token's series for refreshes and emits its rows. */
static md_status token_events(const md_attn_episode *episode, size_t token,
                              const double *relative_attention, const md_lifetime_params *params,
                              token_rows *rows, bool *refreshed, md_error *err) {
  size_t steps = episode->steps, origin = md_token_origin(episode, token);
  size_t first_use = episode->birth[token] < 0 ? 0 : 1;  /* the birth step is self-attention */
  bool any = false;
  size_t last = 0;
  for (size_t k = first_use; k < steps - origin; k++) {
    if (!(relative_attention[k] >= params->tau)) continue;
    size_t step = origin + k;
    if (any && params->estimand == MD_ESTIMAND_GAP) {
      md_status status = emit(rows, (double)(step - last), 1, err);
      if (status != MD_OK) return status;
    }
    any = true;
    last = step;
  }
  *refreshed = any;
  if (!any) return MD_OK;
  if (params->estimand == MD_ESTIMAND_GAP) return emit(rows, (double)(steps - last), 0, err);
  bool censored = last + (size_t)params->guard >= steps;  /* last >= steps - guard */
  if (censored) return emit(rows, (double)(steps - origin), 0, err);
  return emit(rows, (double)(last - origin + 1), 1, err);
}

static void row_template(const md_attn_episode *episode, const md_region_table *regions,
                         size_t token, md_event_row *row) {
  memset(row, 0, sizeof *row);
  row->region = episode->region[token];
  row->region_name = regions->names[row->region];
  row->entry = 0.0;
  row->weight = 1.0;
  row->episode = episode_name(episode);
  row->pos = (int64_t)token;
  row->page = episode->page ? episode->page[token] : -1;
  row->token_id = episode->token_id ? episode->token_id[token] : -1;
}

static md_status episode_tokens(const md_attn_episode *episode, const md_region_table *regions,
                                const uint32_t *visible, const md_lifetime_params *params,
                                token_rows *rows, md_attn_norm *stats, double *series,
                                md_error *err) {
  for (size_t i = 0; i < episode->tokens; i++) {
    md_token_relative_attention(episode, visible, i, series);
    row_template(episode, regions, i, &rows->row);
    bool refreshed;
    md_status status = token_events(episode, i, series, params, rows, &refreshed, err);
    if (status != MD_OK) return status;
    if (!stats) continue;
    size_t n_ages = episode->steps - md_token_origin(episode, i);
    bool observed = episode->birth[i] < 0 || n_ages > 1;
    status = md_attn_norm_add_token(stats, episode->region[i], series, n_ages, observed,
                                    refreshed, err);
    if (status != MD_OK) return status;
  }
  return MD_OK;
}

md_status md_lifetimes_episode(const md_attn_episode *episode, const md_region_table *regions,
                               const md_lifetime_params *params, md_event_sink sink,
                               void *sink_user, md_attn_norm *stats, md_error *err) {
  md_status status = md_lifetime_params_check(params, err);
  if (status != MD_OK) return status;
  if (!regions || !regions->names)
    return md_fail(err, MD_E_INVALID, "lifetimes: no region table");
  if (!episode) return md_fail(err, MD_E_INVALID, "lifetimes: no episode");
  status = check_shape(episode, err);
  if (status != MD_OK) return status;
  uint32_t *visible = malloc(episode->steps * sizeof *visible);
  double *series = malloc(episode->steps * sizeof *series);
  if (!visible || !series) {
    status = md_fail(err, MD_E_NOMEM, "episode %s: out of memory", episode_name(episode));
  } else {
    status = md_attn_episode_check(episode, regions->n, visible, err);
    token_rows rows = {.sink = sink, .user = sink_user};
    if (status == MD_OK)
      status = episode_tokens(episode, regions, visible, params, &rows, stats, series, err);
  }
  free(visible);
  free(series);
  return status;
}
