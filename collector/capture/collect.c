/* The collector's episode loop (collector/capture/collect.h). Setup (inputs, plan,
 * run directory) comes first in this file, then one episode, then the loop. */
#include "collector/capture/collect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collector/capture/collect_internal.h"
#include "base/policy_defaults.h"
#include "io/formats/npy.h"

void md_collect_options_init(md_collect_options *o) {
  memset(o, 0, sizeof *o);
  o->device = "cpu";
  o->layer_end = -1;
  o->heads = MD_CAPTURE_HEADS_MEAN;
  o->page_size = MD_POLICY_PAGE_SIZE_DEFAULT;
}

double md_collect_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void md_collect_report(collect_run *run, md_collect_event event, const char *episode_id) {
  if (!run->options->progress) return;
  run->progress.event = event;
  run->progress.episode_id = episode_id;
  run->progress.elapsed_seconds = md_collect_now() - run->started;
  run->options->progress(run->options->context, &run->progress);
}

void md_collect_warn(collect_run *run, const char *message) {
  if (run->options->on_warning) run->options->on_warning(run->options->context, message);
}

/* ---- one episode ----------------------------------------------------------------- */

char *md_collect_path(const char *dir, const char *sub, const char *name, const char *suffix) {
  size_t n = strlen(dir) + strlen(sub) + strlen(name) + strlen(suffix) + 3;
  char *path = malloc(n);
  if (path) snprintf(path, n, "%s/%s%s%s%s", dir, sub, *sub ? "/" : "", name, suffix);
  return path;
}

/* Prefill with the capture on; writes prefill/<id>.npy. */
static md_status prefill_episode(collect_run *run, const md_trace_episode *ep,
                                 md_episode_tokens *t, md_kbuf *capture, float *row,
                                 md_error *err) {
  md_kernels *k = run->kernels;
  size_t prompt = t->prompt_tokens;
  double t0 = md_collect_now();
  md_qwen2_reset(run->forward);
  k->ops->buf_zero(k, capture, 0, prompt);
  md_status s = md_collect_set_capture(run, capture, err);
  if (s == MD_OK)
    s = md_episode_generated(t) ? md_qwen2_prefill(run->forward, t->ids, (int64_t)prompt, NULL, err)
                                : md_qwen2_feed(run->forward, t->ids, (int64_t)prompt, err);
  if (s == MD_OK) s = k->ops->buf_read(k, capture, 0, prompt, row, err);
  if (s != MD_OK) return md_error_prefix(err, "%s:%zu: episode \"%s\"", ep->path, ep->line, ep->id);
  char *path = md_collect_path(run->out_dir, "prefill", ep->id, ".npy");
  if (!path) return md_fail(err, MD_E_NOMEM, "out of memory");
  int64_t shape[1] = {(int64_t)prompt};
  s = md_npy_write_f32(path, 1, shape, row, err);
  free(path);
  run->progress.prefill_seconds += md_collect_now() - t0;
  run->progress.prompt_tokens_done += prompt;
  return s;
}

/* The token fed at decode step t: the teacher-forced one, or the greedy
 * choice after the previous step (recorded in t->ids). */
static md_status next_token(collect_run *run, md_episode_tokens *t, size_t step, int32_t *token,
                            md_error *err) {
  size_t pos = t->prompt_tokens + step;
  if (!md_episode_generated(t)) {
    *token = t->ids[pos];
    return MD_OK;
  }
  md_status s = md_qwen2_greedy(run->forward, token, err);
  if (s == MD_OK) t->ids[pos] = *token;
  return s;
}

/* One decode step with the capture into buffer `slot`, whose row is read
 * back into rows[slot] through read slot `slot`. */
static md_status decode_step(collect_run *run, md_episode_tokens *t, size_t step, int slot,
                             md_error *err) {
  md_kernels *k = run->kernels;
  size_t visible = t->prompt_tokens + step + 1;
  int32_t token = 0;
  md_status s = next_token(run, t, step, &token, err);
  if (s != MD_OK) return s;
  k->ops->buf_zero(k, run->capture[slot], 0, visible);
  if ((s = md_collect_set_capture(run, run->capture[slot], err)) != MD_OK) return s;
  /* Logits only when the next token is the model's choice. */
  bool need_logits = md_episode_generated(t) && step + 1 < t->decode_steps;
  s = need_logits ? md_qwen2_decode(run->forward, token, err)
                  : md_qwen2_feed(run->forward, &token, 1, err);
  if (s != MD_OK) return s;
  return k->ops->buf_read_start(k, run->capture[slot], 0, visible, run->rows[slot], slot, err);
}

/* Waits for the row of the step read through `slot` and appends it. */
static md_status append_row(collect_run *run, md_npy_stream *stream, int slot, md_error *err) {
  md_status s = run->kernels->ops->buf_read_finish(run->kernels, slot, err);
  return s == MD_OK ? md_npy_stream_append(stream, run->rows[slot], err) : s;
}

/* The decode window: attn/<id>.npy, one row per step, written while the
 * next step runs. Rows are [P + S] floats; a slot's floats beyond the
 * visible tokens are never written and stay zero (the tokens not yet born). */
static md_status decode_episode(collect_run *run, const md_trace_episode *ep, md_episode_tokens *t,
                                md_error *err) {
  size_t width = md_episode_positions(t);
  double t0 = md_collect_now();
  memset(run->rows[0], 0, width * sizeof(float));
  memset(run->rows[1], 0, width * sizeof(float));
  char *path = md_collect_path(run->out_dir, "attn", ep->id, ".npy");
  if (!path) return md_fail(err, MD_E_NOMEM, "out of memory");
  md_npy_stream *stream = NULL;
  md_status s = md_npy_stream_open(path, (int64_t)width, &stream, err);
  free(path);
  run->progress.steps = (int64_t)t->decode_steps;
  for (size_t step = 0; s == MD_OK && step < t->decode_steps; step++) {
    int slot = (int)(step & 1);
    s = decode_step(run, t, step, slot, err);
    if (s == MD_OK && step > 0) s = append_row(run, stream, slot ^ 1, err);
    if (s != MD_OK) break;
    run->progress.step = (int64_t)step + 1;
    run->progress.decode_steps_done++;
    run->progress.decode_seconds += md_collect_now() - t0;
    t0 = md_collect_now();
    md_collect_report(run, MD_COLLECT_STEP, ep->id);
  }
  if (s == MD_OK) s = append_row(run, stream, (int)((t->decode_steps - 1) & 1), err);
  if (s == MD_OK) return md_npy_stream_close(stream, err);
  md_npy_stream_abort(stream);
  return md_error_prefix(err, "%s:%zu: episode \"%s\"", ep->path, ep->line, ep->id);
}

/* The episode's rows of manifest.csv, fsynced; *bytes = the file's length. */
static md_status write_manifest_rows(collect_run *run, const md_trace_episode *ep,
                                     const md_episode_tokens *t, uint64_t *bytes, md_error *err) {
  size_t positions = md_episode_positions(t);
  for (size_t pos = 0; pos < positions; pos++) {
    size_t piece_length = 0;
    const char *piece = md_tokenizer_piece_bytes(run->tokenizer, t->ids[pos], &piece_length);
    int64_t birth = pos < t->prompt_tokens ? -1 : (int64_t)(pos - t->prompt_tokens);
    md_status s = md_manifest_append(run->manifest, ep->id, pos, t->regions[pos],
                                     md_chat_page(pos, run->page_size), birth, t->ids[pos], piece,
                                     piece_length, err);
    if (s != MD_OK) return s;
  }
  return md_manifest_sync(run->manifest, bytes, err);
}

/* An episode whose files are on disk: its manifest rows, then its entry in
 * run.json (what makes it collected). */
static md_status finish_episode(collect_run *run, const md_trace_episode *ep,
                                const md_episode_tokens *t, md_error *err) {
  uint64_t manifest_bytes = 0;
  md_collect_report(run, MD_COLLECT_EPISODE_FILES, ep->id);
  md_status s = write_manifest_rows(run, ep, t, &manifest_bytes, err);
  if (s == MD_OK) {
    md_collect_report(run, MD_COLLECT_EPISODE_ROWS, ep->id);
    md_run_episode listed = {
        .id = ep->id, .line = ep->line, .prompt_tokens = t->prompt_tokens,
        .decode_steps = t->decode_steps,
        .continuation = md_episode_generated(t) ? "generated" : "teacher-forced",
        .region = t->continuation_region};
    s = md_run_record_add_episode(run->record, &listed, manifest_bytes, err);
  }
  if (s == MD_OK) s = md_run_record_write(run->record, run->run_json, err);
  if (s == MD_OK) {
    run->progress.episodes_done++;
    run->collected++;
    md_collect_report(run, MD_COLLECT_EPISODE_DONE, ep->id);
  }
  return s;
}

static md_status run_episode(collect_run *run, const md_trace_episode *ep, md_error *err) {
  md_episode_tokens t;
  md_status s = md_episode_tokenize(run->tokenizer, ep, &run->tokens_options, &t, err);
  if (s != MD_OK) return s;
  run->progress.step = 0;
  run->progress.steps = (int64_t)t.decode_steps;
  md_collect_report(run, MD_COLLECT_EPISODE_BEGIN, ep->id);
  if ((s = prefill_episode(run, ep, &t, run->capture[0], run->rows[0], err)) == MD_OK) {
    md_collect_report(run, MD_COLLECT_PREFILL, ep->id);
    s = decode_episode(run, ep, &t, err);
  }
  if (s == MD_OK) s = md_collect_sync_dirs(run, err);
  if (s == MD_OK) s = finish_episode(run, ep, &t, err);
  md_episode_tokens_free(&t);
  return s;
}

/* ---- episodes together ---------------------------------------------------------------
 * With --batch N, up to N consecutive episodes of the plan run at once: each
 * prefilled alone on a sequence of its own (its prompt is one matrix
 * product, as alone), then their decode steps as one batched step
 * (md_qwen2_step: each weight read once for all, every sequence's capture
 * and tokens bit for bit those of the episode alone), the batch shrinking
 * as the shorter ones finish. Their files are then finished in plan
 * order, so the run directory holds the bytes a collection one episode at a
 * time writes, and a kill leaves what a kill there leaves: the episodes
 * run.json lists are complete, the others are collected again. */

typedef struct window_episode {
  md_trace_episode ep;
  md_episode_tokens t;
  bool tokenized;
  md_npy_stream *stream;
  int32_t next;                /* a generated continuation's next token */
} window_episode;

static md_status decode_window(collect_run *run, window_episode *w, size_t n, md_error *err) {
  md_kernels *k = run->kernels;
  size_t steps = 0;
  md_status s = MD_OK;
  for (size_t b = 0; s == MD_OK && b < n; b++) {
    size_t width = md_episode_positions(&w[b].t);
    memset(run->batch_rows[b], 0, width * sizeof(float));
    char *path = md_collect_path(run->out_dir, "attn", w[b].ep.id, ".npy");
    if (!path) return md_fail(err, MD_E_NOMEM, "out of memory");
    s = md_npy_stream_open(path, (int64_t)width, &w[b].stream, err);
    free(path);
    if (w[b].t.decode_steps > steps) steps = w[b].t.decode_steps;
  }
  run->progress.steps = (int64_t)steps;
  double t0 = md_collect_now();
  for (size_t step = 0; s == MD_OK && step < steps; step++) {
    md_qwen2_seq *seqs[MD_COLLECT_MAX_BATCH];
    int32_t tokens[MD_COLLECT_MAX_BATCH], greedy[MD_COLLECT_MAX_BATCH];
    size_t who[MD_COLLECT_MAX_BATCH], active = 0;
    bool logits = false;
    for (size_t b = 0; b < n; b++) {
      md_episode_tokens *t = &w[b].t;
      if (step >= t->decode_steps) continue;
      size_t pos = t->prompt_tokens + step;
      if (md_episode_generated(t)) {
        t->ids[pos] = w[b].next;
        logits = logits || step + 1 < t->decode_steps;
      }
      k->ops->buf_zero(k, run->batch_capture[b], 0, pos + 1);
      seqs[active] = run->seqs[b];
      tokens[active] = t->ids[pos];
      who[active++] = b;
    }
    s = md_qwen2_step(run->forward, seqs, tokens, (int64_t)active, logits ? greedy : NULL, err);
    for (size_t j = 0; s == MD_OK && j < active; j++) {
      window_episode *e = &w[who[j]];
      size_t visible = e->t.prompt_tokens + step + 1;
      if (logits) e->next = greedy[j];
      s = k->ops->buf_read(k, run->batch_capture[who[j]], 0, visible, run->batch_rows[who[j]], err);
      if (s == MD_OK) s = md_npy_stream_append(e->stream, run->batch_rows[who[j]], err);
      if (s != MD_OK)
        md_error_prefix(err, "%s:%zu: episode \"%s\"", e->ep.path, e->ep.line, e->ep.id);
    }
    if (s != MD_OK) break;
    run->progress.step = (int64_t)step + 1;
    run->progress.decode_steps_done += active;
    run->progress.decode_seconds += md_collect_now() - t0;
    t0 = md_collect_now();
    md_collect_report(run, MD_COLLECT_STEP, w[who[0]].ep.id);
  }
  for (size_t b = 0; b < n; b++) {
    if (!w[b].stream) continue;
    if (s == MD_OK) s = md_npy_stream_close(w[b].stream, err);
    else md_npy_stream_abort(w[b].stream);
    w[b].stream = NULL;
  }
  return s;
}

static md_status run_window(collect_run *run, window_episode *w, size_t n, md_error *err) {
  md_status s = MD_OK;
  for (size_t b = 0; s == MD_OK && b < n; b++) {
    s = md_episode_tokenize(run->tokenizer, &w[b].ep, &run->tokens_options, &w[b].t, err);
    w[b].tokenized = s == MD_OK;
  }
  for (size_t b = 0; s == MD_OK && b < n; b++) {
    window_episode *e = &w[b];
    run->progress.step = 0;
    run->progress.steps = (int64_t)e->t.decode_steps;
    md_collect_report(run, MD_COLLECT_EPISODE_BEGIN, e->ep.id);
    md_qwen2_select(run->forward, run->seqs[b]);
    s = prefill_episode(run, &e->ep, &e->t, run->batch_capture[b], run->batch_rows[b], err);
    /* a generated continuation's first token: the greedy one after the
     * prompt, read before the next prompt overwrites the logits */
    if (s == MD_OK && md_episode_generated(&e->t) && e->t.decode_steps > 0)
      s = md_qwen2_greedy(run->forward, &e->next, err);
    if (s == MD_OK) md_collect_report(run, MD_COLLECT_PREFILL, e->ep.id);
  }
  md_qwen2_select(run->forward, NULL);
  if (s == MD_OK) s = decode_window(run, w, n, err);
  if (s == MD_OK) s = md_collect_sync_dirs(run, err);
  for (size_t b = 0; s == MD_OK && b < n; b++) s = finish_episode(run, &w[b].ep, &w[b].t, err);
  for (size_t b = 0; b < n; b++)
    if (w[b].tokenized) md_episode_tokens_free(&w[b].t);
  return s;
}

/* ---- the loop ---------------------------------------------------------------------- */

/* Reads the traces again, in order, and runs every planned episode that
 * run.json does not list yet. */
static md_status run_episodes(collect_run *run, md_error *err) {
  md_trace_options reader_options = {.skip_invalid = true};
  md_trace_reader *reader = NULL;
  md_status s = md_trace_open(run->options->traces_path, &reader_options, &reader, err);
  size_t next = 0; /* index into the plan */
  window_episode window[MD_COLLECT_MAX_BATCH];
  size_t in_window = 0;
  while (s == MD_OK && next < run->n_planned) {
    md_trace_episode ep;
    bool have = false;
    if ((s = md_trace_next(reader, &ep, &have, err)) != MD_OK || !have) break;
    bool keep = false;
    if (!strcmp(ep.id, run->planned[next].id)) {
      next++;
      if (!md_run_record_has_episode(run->record, ep.id)) {
        if (run->batch > 1) {
          window[in_window++] = (window_episode){.ep = ep};
          keep = true;
        } else {
          s = run_episode(run, &ep, err);
        }
      }
    }
    if (!keep) md_trace_episode_free(&ep);
    if (s == MD_OK && in_window > 0 && (in_window == run->batch || next == run->n_planned)) {
      s = run_window(run, window, in_window, err);
      for (size_t b = 0; b < in_window; b++) md_trace_episode_free(&window[b].ep);
      in_window = 0;
    }
  }
  for (size_t b = 0; b < in_window; b++) md_trace_episode_free(&window[b].ep);
  md_trace_close(reader);
  if (s == MD_OK && next < run->n_planned)
    s = md_fail(err, MD_E_IO, "%s: the file changed while it was being collected (episode \"%s\" "
                "is gone)", run->options->traces_path, run->planned[next].id);
  return s;
}

static void fill_summary(const collect_run *run, md_collect_summary *summary) {
  if (!summary) return;
  memset(summary, 0, sizeof *summary);
  summary->episodes_in_file = run->episodes_in_file;
  summary->episodes_total = run->n_planned;
  summary->plan_episodes = run->plan_episodes;
  summary->episodes_resumed = run->progress.episodes_resumed;
  summary->episodes_collected = run->collected;
  summary->episodes_skipped = run->n_skipped;
  summary->prompt_tokens = run->progress.prompt_tokens_done;
  summary->decode_steps = run->progress.decode_steps_done;
  summary->prefill_seconds = run->progress.prefill_seconds;
  summary->decode_seconds = run->progress.decode_seconds;
  summary->seconds = md_collect_now() - run->started;
  snprintf(summary->device, sizeof summary->device, "%s", run->device_name);
  summary->threads = run->threads;
}

md_status md_collect(const md_collect_options *options, md_collect_summary *summary, md_error *err) {
  collect_run run;
  md_collect_run_init(&run, options);
  md_status s = md_collect_setup(&run, err);
  /* Refused before any work: the inputs or settings are at fault (a file
   * that cannot be read here is one the user named). */
  if (s != MD_OK) md_error_blame_input(err);
  bool started = s == MD_OK;
  if (s == MD_OK) {
    md_collect_report(&run, MD_COLLECT_START, NULL);
    s = run_episodes(&run, err);
  }
  if (s == MD_OK) {
    md_run_record_set_complete(run.record, true);
    s = md_run_record_write(run.record, run.run_json, err);
  }
  if (s == MD_OK) md_collect_report(&run, MD_COLLECT_FINISH, NULL);
  fill_summary(&run, summary);
  if (summary) summary->started = started;
  md_collect_run_free(&run);
  return s;
}
