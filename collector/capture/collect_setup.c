/* The collector's setup: device, checkpoint, tokenizer, the plan of the
 * episodes (every one validated, tokenised and checked against the model
 * before any model work), the run directory (new or resumed) and the
 * forward pass with its capture buffers. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/capture/collect_internal.h"
#include "base/policy_defaults.h"
#include "base/timestamp.h"
#include "collector/model/model_dir.h"
#include "kernels/device.h"
#include "md_build_config.h"

void md_collect_run_init(collect_run *run, const md_collect_options *options) {
  memset(run, 0, sizeof *run);
  run->options = options;
  run->out_dir = options->out_dir;
  run->lock = MD_DIR_LOCK_NONE;
  run->started = md_collect_now();
}

void md_collect_run_free(collect_run *run) {
  md_kernels *k = run->kernels;
  for (int i = 0; i < 2; i++) {
    if (k && run->capture[i]) k->ops->buf_free(k, run->capture[i]);
    free(run->rows[i]);
  }
  for (size_t i = 0; i < run->batch; i++) {
    if (run->batch_capture && run->batch_capture[i]) k->ops->buf_free(k, run->batch_capture[i]);
    if (run->batch_rows) free(run->batch_rows[i]);
    if (run->seqs && i > 0) md_qwen2_seq_free(run->forward, run->seqs[i]);
  }
  free(run->batch_capture);
  free(run->batch_rows);
  free(run->seqs);
  md_qwen2_forward_free(run->forward);
  md_manifest_close(run->manifest);
  md_run_record_free(run->record);
  md_dir_lock_release(&run->lock);
  for (size_t i = 0; i < run->n_planned; i++) free(run->planned[i].id);
  free(run->planned);
  free(run->run_json);
  free(run->manifest_path);
  free(run->tokenizer_path);
  md_tokenizer_free(run->tokenizer);
  md_qwen2_model_close(run->model);
  md_kernels_free(k);
  memset(run, 0, sizeof *run);
}

/* ---- inputs ------------------------------------------------------------------------ */

static md_status check_options(const md_collect_options *o, md_error *err) {
  if (!o->model_dir || !o->traces_path || !o->out_dir)
    return md_fail(err, MD_E_INVALID, "collect: a model directory, a trace file and a run directory "
                   "are required");
  if (o->page_size < 0) return md_fail(err, MD_E_INVALID, "page size %d must be positive", o->page_size);
  if (o->threads < 0) return md_fail(err, MD_E_INVALID, "thread count %d is negative", o->threads);
  if (o->batch > MD_COLLECT_MAX_BATCH)
    return md_fail(err, MD_E_INVALID, "--batch %zu: at most %d episodes are collected together",
                   o->batch, MD_COLLECT_MAX_BATCH);
  if (o->shard.count && (o->shard.count > MD_SHARD_COUNT_MAX || o->shard.index >= o->shard.count))
    return md_fail(err, MD_E_INVALID, "shard %zu/%zu: K must be below N, N at most %d",
                   o->shard.index, o->shard.count, MD_SHARD_COUNT_MAX);
  if (o->heads != MD_CAPTURE_HEADS_MEAN && o->heads != MD_CAPTURE_HEADS_MAX)
    return md_fail(err, MD_E_INVALID, "unknown head aggregation %d", (int)o->heads);
  return MD_OK;
}

static md_status open_device(collect_run *run, md_error *err) {
  const md_collect_options *o = run->options;
  const char *name = o->device ? o->device : "cpu";
  md_device_options device = {.device = name,
                              .threads = o->threads,
                              .exact_gemm = o->exact_gemm,
                              .bf16_gemm = o->bf16_gemm,
                              .no_cuda_graphs = o->no_cuda_graphs,
                              .bf16_matrices = md_qwen2_model_weights(run->model)->dtype ==
                                               MD_DTYPE_BF16};
  md_status s = md_device_open(&device, &run->kernels, err);
  if (s != MD_OK) return s;
  snprintf(run->device_name, sizeof run->device_name, "%s", strcmp(name, "cuda") ? name : "cuda:0");
  run->threads = md_device_threads(o->threads); /* what it computes with, not what was asked */
  return MD_OK;
}

static bool is_directory(const char *path) {
  struct stat info;
  return stat(path, &info) == 0 && S_ISDIR(info.st_mode);
}

static void on_model_warning(void *context, const char *message) {
  md_collect_warn(context, message);
}

static md_status open_model(collect_run *run, md_error *err) {
  md_model_dir opened;
  md_qwen2_open_options open = {.gguf_f32 = run->options->gguf_f32};
  md_status s = md_model_dir_open_with(run->options->model_dir, &open, "the collector",
                                       on_model_warning, run, &opened, err);
  if (s != MD_OK) return s;
  run->model = opened.model;
  run->tokenizer = opened.tokenizer;
  run->tokenizer_path = opened.tokenizer_path;
  run->config = md_qwen2_model_config(run->model);
  return md_sha256_file(run->tokenizer_path, run->tokenizer_sha256, err);
}

/* [begin, end) within the model's layers; end -1 = all remaining layers. */
static md_status resolve_layers(collect_run *run, md_error *err) {
  int layers = run->config->num_hidden_layers;
  int begin = run->options->layer_begin, end = run->options->layer_end < 0 ? layers : run->options->layer_end;
  if (begin < 0 || end > layers || begin >= end)
    return md_fail(err, MD_E_INVALID,
                   "layer range %d:%d is empty or outside the model's %d layers (0:%d): %s", begin,
                   end, layers, layers, run->options->model_dir);
  run->layer_begin = begin;
  run->layer_end = end;
  run->page_size = run->options->page_size > 0 ? (size_t)run->options->page_size
                                               : MD_POLICY_PAGE_SIZE_DEFAULT;
  run->tokens_options.chat = run->config->family->chat;
  run->tokens_options.max_steps = run->options->max_steps;
  run->tokens_options.vocab_size = (size_t)run->config->vocab_size;
  /* planning refuses an episode that cannot fit before tokenising all of it */
  run->tokens_options.max_positions = (size_t)run->config->max_position_embeddings;
  return MD_OK;
}

/* ---- the plan ---------------------------------------------------------------------- */

typedef struct skipped_episode {
  char *id; /* NULL when the line had no valid id */
  size_t line;
  char *reason;
} skipped_episode;

typedef struct planner {
  collect_run *run;
  md_trace_reader *reader;
  skipped_episode *skipped;
  size_t n_skipped;
  bool out_of_memory;
  bool chatml_checked;
} planner;

static void add_skip(planner *p, const char *id, size_t line, const char *reason) {
  skipped_episode *grown = realloc(p->skipped, (p->n_skipped + 1) * sizeof *grown);
  if (!grown) {
    p->out_of_memory = true;
    return;
  }
  p->skipped = grown;
  skipped_episode *s = &grown[p->n_skipped++];
  s->id = id ? strdup(id) : NULL;
  s->line = line;
  s->reason = strdup(reason);
  if (!s->reason || (id && !s->id)) p->out_of_memory = true;
  md_collect_warn(p->run, reason);
}

/* The trace reader's callback for an invalid episode (skip-invalid mode). */
static void on_trace_skip(void *context, const md_error *reason) {
  planner *p = context;
  /* The reader names the episode in `record` once its id was read. */
  add_skip(p, reason->record[0] ? reason->record : NULL, md_trace_reader_line(p->reader),
           reason->message);
}

static md_status add_planned(collect_run *run, const md_trace_episode *ep, const md_episode_tokens *t,
                             md_error *err) {
  if (run->n_planned == run->planned_capacity) {
    size_t capacity = run->planned_capacity ? 2 * run->planned_capacity : 64;
    planned_episode *grown = realloc(run->planned, capacity * sizeof *grown);
    if (!grown) return md_fail(err, MD_E_NOMEM, "out of memory");
    run->planned = grown;
    run->planned_capacity = capacity;
  }
  planned_episode *e = &run->planned[run->n_planned];
  if (!(e->id = strdup(ep->id))) return md_fail(err, MD_E_NOMEM, "out of memory");
  e->prompt_tokens = t->prompt_tokens;
  e->decode_steps = t->decode_steps;
  run->n_planned++;
  size_t positions = md_episode_positions(t);
  if (positions > run->max_positions) run->max_positions = positions;
  return MD_OK;
}

/* Messages-form episodes are rendered with ChatML, whose markers must be
 * single added tokens of the tokenizer. */
static md_status check_chatml(planner *p, const md_trace_episode *ep, md_error *err) {
  if (ep->raw || p->chatml_checked) return MD_OK;
  p->chatml_checked = true;
  static const char *const markers[] = {"<|im_start|>", "<|im_end|>"};
  for (size_t i = 0; i < 2; i++)
    if (md_tokenizer_added_id(p->run->tokenizer, markers[i]) < 0)
      return md_fail(err, MD_E_UNSUPPORTED,
                     "%s: no added token %s: episodes in the messages form (%s:%zu, \"%s\") are "
                     "rendered with the ChatML template of Qwen2/Qwen2.5, which needs it; write "
                     "the prompt yourself in the raw \"spans\" form",
                     p->run->tokenizer_path, markers[i], ep->path, ep->line, ep->id);
  return MD_OK;
}

/* Tokenises one valid episode and checks that it fits the model; a failure
 * is an error, or a skip in skip-invalid mode. */
static md_status plan_episode(planner *p, const md_trace_episode *ep, md_error *err) {
  collect_run *run = p->run;
  md_status s = check_chatml(p, ep, err);
  if (s != MD_OK) return s;
  md_episode_tokens t;
  md_error reason;
  s = md_episode_tokenize(run->tokenizer, ep, &run->tokens_options, &t, &reason);
  if (s == MD_OK)
    s = md_trace_check_positions(ep, t.prompt_tokens, t.decode_steps,
                                 (size_t)run->config->max_position_embeddings, &reason);
  if (s == MD_OK) s = add_planned(run, ep, &t, &reason);
  md_episode_tokens_free(&t);
  if (s == MD_OK) return MD_OK;
  if (s == MD_E_NOMEM || !run->options->skip_invalid) {
    *err = reason;
    return s;
  }
  add_skip(p, ep->id, ep->line, reason.message);
  return MD_OK;
}

static md_status read_plan(planner *p, md_error *err) {
  collect_run *run = p->run;
  const md_collect_options *o = run->options;
  md_trace_options reader_options = {.skip_invalid = o->skip_invalid, .on_skip = on_trace_skip,
                                     .on_skip_context = p};
  md_status s = md_trace_open(o->traces_path, &reader_options, &p->reader, err);
  while (s == MD_OK) {
    md_trace_episode ep;
    bool have = false;
    if ((s = md_trace_next(p->reader, &ep, &have, err)) != MD_OK || !have) break;
    run->episodes_in_file++;
    if (!o->max_episodes || run->n_planned < o->max_episodes) s = plan_episode(p, &ep, err);
    md_trace_episode_free(&ep);
    if (s == MD_OK && p->out_of_memory) s = md_fail(err, MD_E_NOMEM, "out of memory");
  }
  md_trace_close(p->reader);
  p->reader = NULL;
  return s;
}

/* The digest of the whole plan (id, P and S of every episode, in order):
 * the shards of one calibration share it, whatever options made the plan. */
static md_status digest_plan(collect_run *run, md_error *err) {
  size_t size = 1;
  for (size_t i = 0; i < run->n_planned; i++) size += strlen(run->planned[i].id) + 48;
  char *text = malloc(size), *at = text;
  if (!text) return md_fail(err, MD_E_NOMEM, "out of memory");
  run->plan_tokens = 0;
  for (size_t i = 0; i < run->n_planned; i++) {
    const planned_episode *e = &run->planned[i];
    at += snprintf(at, size - (size_t)(at - text), "%s\t%zu\t%zu\n", e->id, e->prompt_tokens,
                   e->decode_steps);
    run->plan_tokens += e->prompt_tokens + e->decode_steps;
  }
  md_sha256_bytes(text, (size_t)(at - text), run->plan_sha256);
  free(text);
  run->plan_episodes = run->n_planned;
  return MD_OK;
}

/* Keeps shard K's block of the plan (collector/capture/shard.h). */
static md_status keep_shard(collect_run *run, md_error *err) {
  const md_shard *shard = &run->options->shard;
  size_t n = run->n_planned;
  uint64_t *weights = malloc(n * sizeof *weights);
  uint32_t *owner = malloc(n * sizeof *owner);
  md_status s = !weights || !owner ? md_fail(err, MD_E_NOMEM, "out of memory") : MD_OK;
  for (size_t i = 0; s == MD_OK && i < n; i++)
    weights[i] = run->planned[i].prompt_tokens + run->planned[i].decode_steps;
  if (s == MD_OK) s = md_shard_assign(weights, n, shard->count, owner, err);
  if (s == MD_OK) {
    size_t kept = 0;
    run->max_positions = 0;
    for (size_t i = 0; i < n; i++) {
      planned_episode e = run->planned[i];
      if (owner[i] != shard->index) {
        free(e.id);
        continue;
      }
      run->planned[kept++] = e;
      if (e.prompt_tokens + e.decode_steps > run->max_positions)
        run->max_positions = e.prompt_tokens + e.decode_steps;
    }
    run->n_planned = kept;
  }
  free(weights);
  free(owner);
  return s;
}

static md_status plan(collect_run *run, planner *p, md_error *err) {
  md_status s = read_plan(p, err);
  if (s != MD_OK) return s;
  if (run->n_planned == 0)
    return md_fail(err, MD_E_INVALID, "%s: no episode to collect (%zu valid, %zu skipped)",
                   run->options->traces_path, run->episodes_in_file, p->n_skipped);
  run->n_skipped = p->n_skipped;
  s = digest_plan(run, err);
  if (s == MD_OK && run->options->shard.count) s = keep_shard(run, err);
  if (s != MD_OK) return s;
  return md_sha256_file(run->options->traces_path, run->traces_sha256, err);
}

static void free_planner(planner *p) {
  for (size_t i = 0; i < p->n_skipped; i++) {
    free(p->skipped[i].id);
    free(p->skipped[i].reason);
  }
  free(p->skipped);
}

/* ---- the run directory ---------------------------------------------------------------- */

static md_status new_record(collect_run *run, md_error *err) {
  const md_collect_options *o = run->options;
  const md_qwen2_config *c = run->config;
  char name[256], created[32];
  md_timestamp_now(created);
  md_run_settings settings = {
      .version = MD_VERSION,
      .created = o->reproducible ? NULL : created,
      .model = {.path = o->model_dir, .name = md_model_dir_name(o->model_dir, name, sizeof name),
                .architecture = c->family->hf_architectures[0], .config_sha256 = c->config_sha256,
                .dtype = md_dtype_name(md_qwen2_model_weights(run->model)->dtype),
                .layers = c->num_hidden_layers, .heads = c->num_attention_heads,
                .kv_heads = c->num_key_value_heads, .hidden = c->hidden_size,
                .vocab = c->vocab_size, .max_position_embeddings = c->max_position_embeddings},
      .tokenizer_path = run->tokenizer_path, .tokenizer_sha256 = run->tokenizer_sha256,
      .traces_path = o->traces_path, .traces_sha256 = run->traces_sha256,
      .traces_episodes = run->episodes_in_file,
      .layer_begin = run->layer_begin, .layer_end = run->layer_end,
      .heads = o->heads == MD_CAPTURE_HEADS_MAX ? "max" : "mean",
      .page_size = (int)run->page_size, .max_steps = o->max_steps,
      .default_steps = MD_EPISODE_DEFAULT_STEPS, .device = run->device_name,
      .threads = run->threads};
  md_run_shard shard = {.index = o->shard.index, .count = o->shard.count,
                        .episodes = run->n_planned, .plan_episodes = run->plan_episodes,
                        .plan_tokens = run->plan_tokens, .plan_sha256 = run->plan_sha256};
  if (o->shard.count) settings.shard = &shard;
  /* What the back end computes with (the CPU back end's BLAS and kernel
   * path), for whoever compares speeds or results between machines; a back
   * end with nothing to record (CUDA) has no facts op. */
  md_kernel_facts facts = {0};
  if (run->kernels->ops->facts) run->kernels->ops->facts(run->kernels, &facts);
  if (facts.blas_library && facts.blas_core) {
    settings.blas_library = facts.blas_library;
    settings.blas_core = facts.blas_core;
    settings.cpu_kernels = facts.cpu_kernels;
    settings.prompt_products = facts.prompt_products;
    settings.prompt_gemm = facts.prompt_gemm;
  }
  md_run_record *fresh = NULL;
  md_status s = md_run_record_new(&settings, &fresh, err);
  if (s != MD_OK) return s;
  if (!run->record) {
    run->record = fresh;
    return MD_OK;
  }
  /* Resuming: the loaded record must match; it keeps its own "created". */
  s = md_run_record_resume(run->record, &settings, run->run_json, err);
  md_run_record_free(fresh);
  return s;
}

/* ".<name>.XXXXXX": a temporary file of io/files/atomic_file.h that a killed run
 * left behind. */
static bool is_temp_name(const char *name, const char *target_prefix) {
  size_t n = strlen(name);
  if (name[0] != '.' || n < 9 || name[n - 7] != '.') return false;
  if (target_prefix && strncmp(name + 1, target_prefix, strlen(target_prefix)) != 0) return false;
  for (size_t i = n - 6; i < n; i++)
    if (!isalnum((unsigned char)name[i])) return false;
  return true;
}

static void remove_temp_files(const char *dir_path, const char *target_prefix) {
  DIR *dir = opendir(dir_path);
  if (!dir) return;
  struct dirent *entry;
  while ((entry = readdir(dir))) {
    if (!is_temp_name(entry->d_name, target_prefix)) continue;
    char *path = md_collect_path(dir_path, "", entry->d_name, "");
    if (path) unlink(path);
    free(path);
  }
  closedir(dir);
}

static md_status make_dir(const char *path, md_error *err) {
  if (mkdir(path, 0777) == 0 || (errno == EEXIST && is_directory(path))) return MD_OK;
  return md_fail(err, MD_E_IO, "%s: cannot create the directory: %s", path, strerror(errno));
}

static md_status make_subdirs(collect_run *run, md_error *err) {
  char *attn = md_collect_path(run->out_dir, "", "attn", "");
  char *prefill = md_collect_path(run->out_dir, "", "prefill", "");
  md_status s = !attn || !prefill ? md_fail(err, MD_E_NOMEM, "out of memory") : MD_OK;
  if (s == MD_OK) s = make_dir(attn, err);
  if (s == MD_OK) s = make_dir(prefill, err);
  if (s == MD_OK && run->record) {
    remove_temp_files(attn, NULL);
    remove_temp_files(prefill, NULL);
    remove_temp_files(run->out_dir, "run.json.");
  }
  free(attn);
  free(prefill);
  return s;
}

/* The cheap refusal first, before any input is read. */
static md_status refuse_existing_run(const md_collect_options *o, md_error *err) {
  char *run_json = md_collect_path(o->out_dir, "", "run.json", "");
  if (!run_json) return md_fail(err, MD_E_NOMEM, "out of memory");
  bool exists = access(run_json, F_OK) == 0;
  free(run_json);
  if (exists && !o->resume)
    return md_fail(err, MD_E_INVALID,
                   "%s already holds a collection run (run.json): add --resume to continue it, or "
                   "choose another directory",
                   o->out_dir);
  return MD_OK;
}

/* An existing run directory: refused without resume; else its run.json. */
static md_status open_existing(collect_run *run, md_error *err) {
  const char *dir = run->out_dir;
  bool has_run = access(run->run_json, F_OK) == 0;
  if (has_run && !run->options->resume) return refuse_existing_run(run->options, err);
  if (!has_run) {
    if (md_dir_lock_empty(dir) != 1)
      return md_fail(err, MD_E_INVALID,
                     "%s exists, is not empty and holds no run.json: choose a new or an empty "
                     "directory for the run",
                     dir);
    return MD_OK;
  }
  return md_run_record_load(run->run_json, &run->record, err);
}

static md_status prepare_dir(collect_run *run, md_error *err) {
  const char *dir = run->out_dir;
  run->run_json = md_collect_path(dir, "", "run.json", "");
  run->manifest_path = md_collect_path(dir, "", "manifest.csv", "");
  if (!run->run_json || !run->manifest_path) return md_fail(err, MD_E_NOMEM, "out of memory");
  md_status s;
  /* One writer at a time (io/files/dir_lock.h): a second --resume of the
   * same run (a resubmitted array task while the first still runs) is
   * refused before it reads or cleans anything. */
  if (access(dir, F_OK) == 0) {
    if (!is_directory(dir)) return md_fail(err, MD_E_INVALID, "%s exists and is not a directory", dir);
    if ((s = md_dir_lock_take(dir, &run->lock, err)) != MD_OK) return s;
    if ((s = open_existing(run, err)) != MD_OK) return s;
  } else if ((s = make_dir(dir, err)) != MD_OK || (s = md_dir_lock_take(dir, &run->lock, err)) != MD_OK) {
    return s;
  }
  if ((s = make_subdirs(run, err)) != MD_OK) return s;
  bool resumed = run->record != NULL;
  if ((s = new_record(run, err)) != MD_OK) return s;
  uint64_t keep = resumed ? md_run_record_manifest_bytes(run->record) : 0;
  return md_manifest_open(run->manifest_path, keep == 0, keep, &run->manifest, err);
}

/* Lists the skipped episodes, sets the progress totals and writes run.json
 * before any model work, so the directory is a run from now on. */
static md_status start_record(collect_run *run, const planner *p, md_error *err) {
  md_status s = md_run_record_clear_skipped(run->record, err);
  for (size_t i = 0; s == MD_OK && i < p->n_skipped; i++)
    s = md_run_record_add_skipped(run->record, p->skipped[i].id, p->skipped[i].line,
                                  p->skipped[i].reason, err);
  if (s != MD_OK) return s;
  md_collect_progress *g = &run->progress;
  g->episodes_total = run->n_planned;
  g->shard_index = run->options->shard.index;
  g->shard_count = run->options->shard.count;
  g->plan_episodes = run->plan_episodes;
  for (size_t i = 0; i < run->n_planned; i++) {
    const planned_episode *e = &run->planned[i];
    if (md_run_record_has_episode(run->record, e->id)) {
      g->episodes_resumed++;
      continue;
    }
    g->prompt_tokens_total += e->prompt_tokens;
    g->decode_steps_total += e->decode_steps;
  }
  g->episodes_done = g->episodes_resumed;
  md_run_record_set_complete(run->record, false);
  return md_run_record_write(run->record, run->run_json, err);
}

/* ---- the forward pass ------------------------------------------------------------------ */

static md_status prepare_forward(collect_run *run, md_error *err) {
  md_kernels *k = run->kernels;
  if (run->n_planned == 0) return MD_OK; /* an empty shard: no model work */
  md_qwen2_forward_options forward_options = {.capacity = (int64_t)run->max_positions};
  md_status s = md_qwen2_forward_new(run->config, md_qwen2_model_weights(run->model), k,
                                     &forward_options, &run->forward, err);
  for (int i = 0; s == MD_OK && i < 2; i++) {
    s = k->ops->buf_new(k, run->max_positions, &run->capture[i], err);
    if (s == MD_OK && !(run->rows[i] = calloc(run->max_positions, sizeof(float))))
      s = md_fail(err, MD_E_NOMEM, "out of memory");
  }
  if (s != MD_OK) return s;
  size_t batch = run->options->batch;
  if (batch == 0) batch = k->ops->matmul_rows && k->ops->buf_view ? MD_COLLECT_DEFAULT_BATCH : 1;
  if (batch > run->n_planned) batch = run->n_planned;
  if (batch <= 1) return MD_OK;
  run->seqs = calloc(batch, sizeof *run->seqs);
  run->batch_capture = calloc(batch, sizeof *run->batch_capture);
  run->batch_rows = calloc(batch, sizeof *run->batch_rows);
  if (!run->seqs || !run->batch_capture || !run->batch_rows)
    return md_fail(err, MD_E_NOMEM, "out of memory");
  run->batch = batch;
  run->seqs[0] = md_qwen2_seq_own(run->forward);
  for (size_t i = 0; s == MD_OK && i < batch; i++) {
    if (i > 0) s = md_qwen2_seq_new(run->forward, &run->seqs[i], err);
    if (s == MD_OK) s = k->ops->buf_new(k, run->max_positions, &run->batch_capture[i], err);
    if (s == MD_OK && !(run->batch_rows[i] = calloc(run->max_positions, sizeof(float))))
      s = md_fail(err, MD_E_NOMEM, "out of memory");
  }
  if (s != MD_OK) {
    const md_qwen2_config *c = run->config;
    double mib = (double)batch * (double)run->max_positions * (double)c->num_hidden_layers * 2.0 *
                 (double)c->num_key_value_heads * (double)c->head_dim * 4.0 / 1048576.0;
    return md_error_prefix(err, "collect --batch %zu: %zu KV caches of %zu positions need %.0f "
                           "MiB; a smaller --batch needs less", batch, batch, run->max_positions,
                           mib);
  }
  return MD_OK;
}

md_status md_collect_set_capture(collect_run *run, md_kbuf *received, md_error *err) {
  md_qwen2_capture capture = {.received = received, .layer_begin = run->layer_begin,
                              .layer_end = run->layer_end, .heads = run->options->heads};
  return md_qwen2_set_capture(run->forward, &capture, err);
}

static md_status sync_dir(const char *path, md_error *err) {
  int fd = open(path, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return md_fail(err, MD_E_IO, "%s: cannot open: %s", path, strerror(errno));
  int failed = fsync(fd) != 0 && errno != EINVAL;
  int saved = errno;
  close(fd);
  return failed ? md_fail(err, MD_E_IO, "%s: fsync failed: %s", path, strerror(saved)) : MD_OK;
}

md_status md_collect_sync_dirs(collect_run *run, md_error *err) {
  char *attn = md_collect_path(run->out_dir, "", "attn", "");
  char *prefill = md_collect_path(run->out_dir, "", "prefill", "");
  md_status s = !attn || !prefill ? md_fail(err, MD_E_NOMEM, "out of memory") : MD_OK;
  if (s == MD_OK) s = sync_dir(attn, err);
  if (s == MD_OK) s = sync_dir(prefill, err);
  free(attn);
  free(prefill);
  return s;
}

md_status md_collect_setup(collect_run *run, md_error *err) {
  planner p = {.run = run};
  md_status s = check_options(run->options, err);
  if (s == MD_OK) s = refuse_existing_run(run->options, err);
  if (s == MD_OK) s = open_model(run, err); /* its dtype decides the device's default */
  if (s == MD_OK) s = open_device(run, err);
  if (s == MD_OK) s = resolve_layers(run, err);
  if (s == MD_OK) s = plan(run, &p, err);
  if (s == MD_OK) s = prepare_dir(run, err);
  if (s == MD_OK) s = start_record(run, &p, err);
  if (s == MD_OK) s = prepare_forward(run, err);
  free_planner(&p);
  return s;
}
