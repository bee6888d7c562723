/* The eviction-probe evaluation (collector/eval/eval.h). Setup first (device,
 * checkpoint, config, every episode read, tokenised and checked), then one
 * run of a policy and budget over an episode, then the loop. */
#include "collector/eval/eval.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "collector/tokenizer/chat_template.h"
#include "collector/tokenizer/episode_tokens.h"
#include "collector/model/model_dir.h"
#include "collector/model/qwen2_forward.h"
#include "collector/model/qwen2_model.h"
#include "collector/tokenizer/tokenizer.h"
#include "base/digest.h"
#include "io/formats/eval_record.h"
#include "io/formats/trace.h"
#include "kernels/device.h"
#include "runtime/policy_table.h"

enum { SINK_TOKENS = 4 };

void md_eval_options_init(md_eval_options *o) {
  memset(o, 0, sizeof *o);
  o->device = "cpu";
}

/* A probe as prepared before the run: its prompt tokens and where its
 * answer lies in the episode. */
typedef struct prepared_probe {
  int32_t *question;        /* the probe prompt's tokens */
  size_t question_tokens;
  int64_t *answer_positions; /* ascending prompt positions of the answer's tokens */
  size_t n_answer_positions;
} prepared_probe;

/* A chunk of the prompt: positions [begin, end). */
typedef struct chunk {
  size_t begin, end;
} chunk;

typedef struct prepared_episode {
  md_trace_episode trace;
  md_episode_tokens tokens;
  int *region_index;         /* [P + S] index into the config's regions */
  chunk *chunks;
  size_t n_chunks;
  prepared_probe *probes;
} prepared_episode;

typedef struct eval_state {
  const md_eval_options *options;
  double started;
  md_kernels *kernels;
  md_qwen2_model *model;
  const md_qwen2_config *config;
  md_tokenizer *tokenizer;
  md_policy_config policy_config;
  bool have_policy_config;
  int page_size;
  const md_chat_format *chat;  /* the model family's: how a probe is asked */
  int32_t stops[8];            /* ids that end an answer (the format's stop tokens) */
  size_t n_stops;
  const md_policy_class *policies[MD_EVAL_MAX_POLICIES];
  size_t n_policies;
  md_policy *run_policy[MD_EVAL_MAX_RUNS]; /* one per run: a group's runs step together */
  prepared_episode *episodes;
  size_t n_episodes, capacity_episodes, episodes_in_file, skipped;
  size_t max_positions;      /* cache capacity needed: longest episode + probe + answer */
  md_qwen2_forward *forward;
  size_t group;                /* runs stepped together (options.batch, resolved) */
  md_qwen2_seq **seqs;         /* [group]: seqs[0] the forward state's own */
  md_kbuf **received;          /* [group]: each sequence's capture */
  float *row;
  md_collect_progress progress;
  const md_policy_class *run_class[MD_EVAL_MAX_RUNS];
  md_eval_results *results;
} eval_state;

/* ---- small helpers ------------------------------------------------------------------- */

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void report(eval_state *st, md_collect_event event, const char *id) {
  if (!st->options->progress) return;
  st->progress.event = event;
  st->progress.episode_id = id;
  st->progress.elapsed_seconds = now_seconds() - st->started;
  st->options->progress(st->options->context, &st->progress);
}

static void warn(eval_state *st, const char *message) {
  if (st->options->on_warning) st->options->on_warning(st->options->context, message);
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static void on_model_warning(void *context, const char *message) { warn(context, message); }

/* ---- options ------------------------------------------------------------------------- */

static md_status check_options(eval_state *st, md_error *err) {
  const md_eval_options *o = st->options;
  if (!o->model_dir || !o->traces_path || !o->config_path)
    return md_fail(err, MD_E_INVALID, "eval needs a model directory, a traces file and a config");
  if (o->threads < 0) return md_fail(err, MD_E_INVALID, "thread count %d is negative", o->threads);
  if (o->n_budgets > MD_EVAL_MAX_BUDGETS || o->n_policies > MD_EVAL_MAX_POLICIES)
    return md_fail(err, MD_E_INVALID, "at most %d budgets and %d policies", MD_EVAL_MAX_BUDGETS,
                   MD_EVAL_MAX_POLICIES);
  for (size_t i = 0; i < o->n_budgets; i++)
    if (!(o->budgets[i] > 0.0 && o->budgets[i] <= 1.0))
      return md_fail(err, MD_E_INVALID, "budget %g is outside (0, 1]: a budget is a fraction of "
                     "the episode's length", o->budgets[i]);
  if (o->page_size < 0) return md_fail(err, MD_E_INVALID, "page size %d is negative", o->page_size);
  /* full first, then the others in the order given (default: the table's
   * but its opt-in classes), each once */
  st->policies[st->n_policies++] = &md_policy_class_full;
  const md_policy_class *const *list = o->n_policies ? o->policies : md_policy_table;
  size_t n = o->n_policies ? o->n_policies : md_policy_table_count;
  for (size_t i = 0; i < n; i++) {
    const md_policy_class *c = list[i];
    if (!o->n_policies && c->opt_in) continue;
    if (!c || !c->name || !c->name[0])
      return md_fail(err, MD_E_INVALID, "policy %zu of %zu: no class, or one without a name",
                     i + 1, n);
    size_t length = strlen(c->name);
    if (length >= MD_EVAL_POLICY_NAME_MAX ||
        strspn(c->name, "abcdefghijklmnopqrstuvwxyz0123456789_-") != length)
      return md_fail(err, MD_E_INVALID, "policy name \"%s\": want at most %d of a-z, 0-9, _ and -",
                     c->name, MD_EVAL_POLICY_NAME_MAX - 1);
    if (c == &md_policy_class_full) continue;
    for (size_t j = 0; j < st->n_policies; j++)
      if (!strcmp(st->policies[j]->name, c->name))
        return md_fail(err, MD_E_INVALID, "policy %s is listed twice", c->name);
    if (st->n_policies == MD_EVAL_MAX_POLICIES)
      return md_fail(err, MD_E_INVALID, "at most %d policies, the full cache included",
                     MD_EVAL_MAX_POLICIES);
    st->policies[st->n_policies++] = c;
  }
  return MD_OK;
}

/* ---- setup --------------------------------------------------------------------------- */

static md_status open_inputs(eval_state *st, md_error *err) {
  const md_eval_options *o = st->options;
  md_status s = md_policy_config_load(o->config_path, &st->policy_config, err);
  if (s != MD_OK) return s;
  st->have_policy_config = true;
  st->page_size = o->page_size > 0 ? o->page_size : st->policy_config.page_size;
  if (st->page_size < 1)
    return md_fail(err, MD_E_INVALID, "%s: policy.page_size %d is not positive", o->config_path,
                   st->page_size);
  /* Every policy made once with this config before any model work, so that
   * one the config cannot serve (memdecay-shared without a pooled fit) is
   * refused now, naming the file and the field. */
  for (size_t i = 0; i < st->n_policies; i++) {
    md_policy_options po = {.policy = st->policies[i], .page_size = st->page_size,
                            .seed = o->seed, .sink_tokens = SINK_TOKENS};
    md_policy *trial = NULL;
    if ((s = md_policy_new(&st->policy_config, &po, &trial, err)) != MD_OK)
      return md_error_prefix(err, "%s", o->config_path);
    md_policy_free(trial);
  }
  md_model_dir opened;
  md_qwen2_open_options open = {.gguf_f32 = o->gguf_f32};
  if ((s = md_model_dir_open_with(o->model_dir, &open, "eval", on_model_warning, st, &opened, err)) != MD_OK)
    return s;
  st->model = opened.model;
  st->tokenizer = opened.tokenizer;
  free(opened.tokenizer_path);
  st->config = md_qwen2_model_config(st->model);
  md_device_options device = {
      .device = o->device ? o->device : "cpu", .threads = o->threads,
      .exact_gemm = o->exact_gemm, .bf16_gemm = o->bf16_gemm,
      .bf16_matrices = md_qwen2_model_weights(st->model)->dtype == MD_DTYPE_BF16};
  if ((s = md_device_open(&device, &st->kernels, err)) != MD_OK) return s;
  /* Probes are asked as turns of the family's chat format: its markup must
   * be in the tokenizer, and its first stop token. */
  st->chat = st->config->family->chat;
  for (size_t i = 0; st->chat->markup_tokens[i]; i++)
    if (md_tokenizer_added_id(st->tokenizer, st->chat->markup_tokens[i]) < 0)
      return md_fail(err, MD_E_UNSUPPORTED,
                     "%s/tokenizer.json: no added token %s: eval asks its probes as %s turns (the "
                     "%s family's format)", o->model_dir, st->chat->markup_tokens[i],
                     st->chat->name, st->config->family->name);
  for (size_t i = 0; st->chat->stop_tokens[i] && st->n_stops < sizeof st->stops / sizeof st->stops[0]; i++) {
    int32_t id = md_tokenizer_added_id(st->tokenizer, st->chat->stop_tokens[i]);
    if (id >= 0) st->stops[st->n_stops++] = id;
    else if (i == 0)
      return md_fail(err, MD_E_UNSUPPORTED, "%s/tokenizer.json: no added token %s, which ends "
                     "an answer in the %s format", o->model_dir, st->chat->stop_tokens[i],
                     st->chat->name);
  }
  return MD_OK;
}


/* The prompt's chunks: maximal runs of tokens from one message (span source). */
static md_status make_chunks(prepared_episode *e, const md_trace_episode *ep, md_error *err) {
  const md_episode_tokens *t = &e->tokens;
  e->chunks = calloc(t->prompt_tokens, sizeof *e->chunks);
  if (!e->chunks) return md_trace_episode_fail(err, MD_E_NOMEM, ep, "out of memory");
  size_t begin = 0;
  for (size_t i = 1; i <= t->prompt_tokens; i++) {
    bool boundary = i == t->prompt_tokens ||
                    t->prompt.spans[t->spans[i]].source != t->prompt.spans[t->spans[i - 1]].source;
    if (!boundary) continue;
    e->chunks[e->n_chunks++] = (chunk){begin, i};
    begin = i;
  }
  return MD_OK;
}

/* The prompt positions of the answer's tokens, found as scoring finds an
 * answer (md_eval_answer_positions, eval_probe.c). */
static md_status locate_answer(const md_episode_tokens *t, const char *region, const char *answer,
                               prepared_probe *p) {
  return md_eval_answer_positions(t, region, answer, &p->answer_positions,
                                  &p->n_answer_positions);
}

static md_status prepare_probes(eval_state *st, prepared_episode *e, const md_trace_episode *ep,
                                md_error *err) {
  e->probes = calloc(ep->n_probes, sizeof *e->probes);
  if (!e->probes) return md_trace_episode_fail(err, MD_E_NOMEM, ep, "out of memory");
  md_tokens tokens = {0};
  md_status s = MD_OK;
  for (size_t i = 0; s == MD_OK && i < ep->n_probes; i++) {
    const md_trace_probe *probe = &ep->probes[i];
    bool in_prompt = false;
    for (size_t k = 0; k < e->tokens.prompt_tokens && !in_prompt; k++)
      in_prompt = !strcmp(e->tokens.regions[k], probe->region);
    if (!in_prompt) {
      s = md_trace_episode_fail(err, MD_E_INVALID, ep,
                       "probes[%zu].region: region \"%s\" does not occur in the episode's prompt, "
                       "so its fact cannot be recalled", i, probe->region);
      break;
    }
    const char *head = st->chat->question_head, *tail = st->chat->question_tail;
    size_t size = strlen(head) + strlen(probe->question) + strlen(tail) + 1;
    char *text = malloc(size);
    if (!text) {
      s = md_trace_episode_fail(err, MD_E_NOMEM, ep, "out of memory");
      break;
    }
    snprintf(text, size, "%s%s%s", head, probe->question, tail);
    md_tokens_clear(&tokens);
    md_error inner;
    s = md_tokenizer_encode(st->tokenizer, text, strlen(text), &tokens, &inner);
    free(text);
    if (s != MD_OK) {
      s = md_trace_episode_fail(err, s, ep, "probes[%zu].question: %.400s", i, inner.message);
      break;
    }
    prepared_probe *p = &e->probes[i];
    p->question = malloc(tokens.count * sizeof *p->question);
    if (!p->question) {
      s = md_trace_episode_fail(err, MD_E_NOMEM, ep, "out of memory");
      break;
    }
    memcpy(p->question, tokens.ids, tokens.count * sizeof *p->question);
    p->question_tokens = tokens.count;
    for (size_t k = 0; k < tokens.count; k++)
      if (tokens.ids[k] >= st->config->vocab_size)
        s = md_trace_episode_fail(err, MD_E_INVALID, ep, "probes[%zu].question has a token outside the "
                         "model's vocabulary", i);
    if (s == MD_OK && locate_answer(&e->tokens, probe->region, probe->answer, p) != MD_OK)
      s = md_trace_episode_fail(err, MD_E_NOMEM, ep, "out of memory");
    size_t needed = md_episode_positions(&e->tokens) + p->question_tokens +
                    (st->options->max_answer_tokens ? st->options->max_answer_tokens
                                                    : MD_EVAL_DEFAULT_ANSWER_TOKENS);
    if (s == MD_OK && needed > (size_t)st->config->max_position_embeddings)
      s = md_trace_episode_fail(err, MD_E_INVALID, ep, "with probes[%zu] and its answer the episode needs "
                       "%zu positions, more than the model's max_position_embeddings (%d)", i,
                       needed, st->config->max_position_embeddings);
    if (s == MD_OK && needed > st->max_positions) st->max_positions = needed;
  }
  md_tokens_free(&tokens);
  return s;
}

/* Labels every position with its region's index in the config. */
static md_status map_regions(eval_state *st, prepared_episode *e, const md_trace_episode *ep,
                             md_error *err) {
  size_t n = md_episode_positions(&e->tokens);
  e->region_index = calloc(n, sizeof *e->region_index);
  if (!e->region_index) return md_trace_episode_fail(err, MD_E_NOMEM, ep, "out of memory");
  for (size_t i = 0; i < n; i++) {
    int r = md_policy_config_region(&st->policy_config, e->tokens.regions[i]);
    if (r < 0)
      return md_trace_episode_fail(err, MD_E_INVALID, ep,
                          "region \"%s\" is not in %s: the config has no decay rate for it "
                          "(calibrate on traces that use it, or relabel it)",
                          e->tokens.regions[i], st->options->config_path);
    e->region_index[i] = r;
  }
  return MD_OK;
}

static void free_prepared(prepared_episode *e) {
  if (e->probes)
    for (size_t i = 0; i < e->trace.n_probes; i++) {
      free(e->probes[i].question);
      free(e->probes[i].answer_positions);
    }
  free(e->probes);
  free(e->chunks);
  free(e->region_index);
  md_episode_tokens_free(&e->tokens);
  md_trace_episode_free(&e->trace);
  memset(e, 0, sizeof *e);
}

static md_status prepare_episode(eval_state *st, prepared_episode *e, md_error *err) {
  const md_trace_episode *ep = &e->trace;
  if (ep->n_probes == 0)
    return md_trace_episode_fail(err, MD_E_INVALID, ep,
                        "no probes: eval asks each episode's \"probes\" (memdecay-traces(5))");
  /* max_positions: a prompt that cannot fit is refused without tokenising it all. */
  md_episode_tokens_options topt = {.chat = st->chat,
                                    .vocab_size = (size_t)st->config->vocab_size,
                                    .max_positions = (size_t)st->config->max_position_embeddings};
  md_status s = md_episode_tokenize(st->tokenizer, ep, &topt, &e->tokens, err);
  if (s != MD_OK) return s;
  if (md_episode_generated(&e->tokens))
    return md_trace_episode_fail(err, MD_E_INVALID, ep,
                        "no continuation text: eval feeds the episode's teacher-forced "
                        "continuation before it asks the probes");
  if ((s = md_trace_check_positions(ep, e->tokens.prompt_tokens, e->tokens.decode_steps,
                                    (size_t)st->config->max_position_embeddings, err)) != MD_OK)
    return s;
  if ((s = map_regions(st, e, ep, err)) != MD_OK) return s;
  if ((s = make_chunks(e, ep, err)) != MD_OK) return s;
  return prepare_probes(st, e, ep, err);
}

static void on_trace_skip(void *context, const md_error *reason) {
  eval_state *st = context;
  st->skipped++;
  warn(st, reason->message);
}

static md_status read_episodes(eval_state *st, md_error *err) {
  const md_eval_options *o = st->options;
  md_trace_options ro = {.skip_invalid = o->skip_invalid, .on_skip = on_trace_skip,
                         .on_skip_context = st};
  md_trace_reader *reader = NULL;
  md_status s = md_trace_open(o->traces_path, &ro, &reader, err);
  while (s == MD_OK && (!o->max_episodes || st->n_episodes < o->max_episodes)) {
    if (st->n_episodes == st->capacity_episodes) {
      size_t cap = st->capacity_episodes ? 2 * st->capacity_episodes : 16;
      prepared_episode *grown = realloc(st->episodes, cap * sizeof *grown);
      if (!grown) {
        s = md_fail(err, MD_E_NOMEM, "out of memory");
        break;
      }
      st->episodes = grown;
      st->capacity_episodes = cap;
    }
    prepared_episode *e = &st->episodes[st->n_episodes];
    memset(e, 0, sizeof *e);
    bool have = false;
    if ((s = md_trace_next(reader, &e->trace, &have, err)) != MD_OK || !have) break;
    st->episodes_in_file++;
    md_error reason;
    s = prepare_episode(st, e, &reason);
    if (s == MD_OK) {
      st->n_episodes++;
      continue;
    }
    if (s == MD_E_NOMEM || !o->skip_invalid) {
      *err = reason;
      free_prepared(e);
      break;
    }
    st->skipped++;
    warn(st, reason.message);
    free_prepared(e);
    s = MD_OK;
  }
  md_trace_close(reader);
  if (s == MD_OK && st->n_episodes == 0)
    s = md_fail(err, MD_E_INVALID, "%s: no episode to evaluate (%zu skipped)", o->traces_path,
                st->skipped);
  return s;
}

static md_status make_engine(eval_state *st, md_error *err) {
  md_qwen2_forward_options fo = {.capacity = (int64_t)st->max_positions};
  md_status s = md_qwen2_forward_new(st->config, md_qwen2_model_weights(st->model), st->kernels,
                                     &fo, &st->forward, err);
  if (s != MD_OK) return s;
  st->row = malloc(st->max_positions * sizeof *st->row);
  if (!st->row) return md_fail(err, MD_E_NOMEM, "out of memory");
  return MD_OK;
}

/* A policy per run, and a KV cache and capture buffer per run of a group
 * (after init_results: the runs are known). */
static md_status make_runs(eval_state *st, md_error *err) {
  const md_eval_results *r = st->results;
  md_status s = MD_OK;
  for (size_t run = 0; run < r->n_runs; run++) {
    md_policy_options po = {.policy = st->run_class[run], .page_size = st->page_size,
                            .seed = st->options->seed, .sink_tokens = SINK_TOKENS};
    if ((s = md_policy_new(&st->policy_config, &po, &st->run_policy[run], err)) != MD_OK)
      return md_error_prefix(err, "%s: policy %s", st->options->config_path,
                             st->run_class[run]->name);
  }
  size_t batch = st->options->batch;
  st->group = batch == 0 || batch > r->n_runs ? r->n_runs : batch;
  st->seqs = calloc(st->group, sizeof *st->seqs);
  st->received = calloc(st->group, sizeof *st->received);
  if (!st->seqs || !st->received) return md_fail(err, MD_E_NOMEM, "out of memory");
  md_kernels *k = st->kernels;
  st->seqs[0] = md_qwen2_seq_own(st->forward);
  for (size_t i = 0; i < st->group && s == MD_OK; i++) {
    if (i > 0) s = md_qwen2_seq_new(st->forward, &st->seqs[i], err);
    if (s == MD_OK) s = k->ops->buf_new(k, st->max_positions, &st->received[i], err);
  }
  if (s != MD_OK) {
    const md_qwen2_config *c = st->config;
    double mib = (double)st->group * (double)st->max_positions * (double)c->num_hidden_layers * 2.0 *
                 (double)c->num_key_value_heads * (double)c->head_dim * 4.0 / 1048576.0;
    return md_error_prefix(err, "eval: %zu runs stepped together (--batch %zu) need %zu KV "
                           "caches of %zu positions, %.0f MiB in all; a smaller --batch needs "
                           "less", st->group, st->group, st->group, st->max_positions, mib);
  }
  return MD_OK;
}

/* ---- results skeleton ------------------------------------------------------------------ */

static md_status init_results(eval_state *st, md_error *err) {
  md_eval_results *r = st->results;
  const md_eval_options *o = st->options;
  char buf[256];
  md_model_dir_name(o->model_dir, buf, sizeof buf);
  char traces_sha[MD_SHA256_HEX], config_sha[MD_SHA256_HEX];
  md_status s = md_sha256_file(o->traces_path, traces_sha, err);
  if (s == MD_OK) s = md_sha256_file(o->config_path, config_sha, err);
  if (s != MD_OK) return s;
  r->model_path = strdup(o->model_dir);
  r->model_name = strdup(buf);
  r->model_config_sha256 = strdup(st->config->config_sha256);
  r->traces_path = strdup(o->traces_path);
  r->traces_sha256 = strdup(traces_sha);
  r->config_path = strdup(o->config_path);
  r->config_sha256 = strdup(config_sha);
  const char *device = o->device ? o->device : "cpu";
  snprintf(r->device, sizeof r->device, "%s", strcmp(device, "cuda") ? device : "cuda:0");
  r->threads = md_device_threads(o->threads);
  /* The prompt products as computed: the CPU's default depends on the CPU
   * (BF16 on AMD Zen 4 and 5) and moves results a little. */
  md_kernel_facts facts = {0};
  if (st->kernels->ops->facts) st->kernels->ops->facts(st->kernels, &facts);
  snprintf(r->prompt_products, sizeof r->prompt_products, "%s",
           facts.prompt_products ? facts.prompt_products
           : o->exact_gemm       ? "fp32"
                                 : "tensor cores");
  r->page_size = st->page_size;
  r->max_answer_tokens = o->max_answer_tokens ? o->max_answer_tokens : MD_EVAL_DEFAULT_ANSWER_TOKENS;
  r->seed = o->seed;
  r->sink_tokens = SINK_TOKENS;
  static const double default_budgets[] = {MD_EVAL_DEFAULT_BUDGET_SMALL,
                                           MD_EVAL_DEFAULT_BUDGET_LARGE};
  const double *budgets = o->n_budgets ? o->budgets : default_budgets;
  size_t n_budgets = o->n_budgets ? o->n_budgets : sizeof default_budgets / sizeof default_budgets[0];
  st->run_class[r->n_runs] = &md_policy_class_full;
  r->run_budget[r->n_runs++] = 1.0;
  for (size_t p = 1; p < st->n_policies; p++)
    for (size_t b = 0; b < n_budgets; b++) {
      st->run_class[r->n_runs] = st->policies[p];
      r->run_budget[r->n_runs++] = budgets[b];
    }
  for (size_t run = 0; run < r->n_runs; run++)
    snprintf(r->run_policy[run], sizeof r->run_policy[run], "%s",
             st->run_class[run]->name);
  const md_policy_config *pc = &st->policy_config;
  r->n_regions = pc->n_regions;
  r->regions = calloc(pc->n_regions ? pc->n_regions : 1, sizeof *r->regions);
  r->pinned = calloc(pc->n_regions ? pc->n_regions : 1, sizeof *r->pinned);
  r->cells = calloc(r->n_runs * (pc->n_regions ? pc->n_regions : 1), sizeof *r->cells);
  r->episodes = calloc(st->n_episodes, sizeof *r->episodes);
  if (!r->model_path || !r->model_name || !r->model_config_sha256 || !r->traces_path ||
      !r->traces_sha256 || !r->config_path || !r->config_sha256 || !r->regions || !r->pinned ||
      !r->cells || !r->episodes)
    return md_fail(err, MD_E_NOMEM, "out of memory");
  for (size_t g = 0; g < pc->n_regions; g++) {
    if (!(r->regions[g] = strdup(pc->regions[g].name))) return md_fail(err, MD_E_NOMEM, "out of memory");
    r->pinned[g] = pc->regions[g].pinned;
  }
  r->episodes_skipped = st->skipped;
  for (size_t i = 0; i < st->n_episodes; i++) {
    const prepared_episode *e = &st->episodes[i];
    md_eval_episode *out = &r->episodes[r->n_episodes++];
    out->id = strdup(e->trace.id);
    out->line = e->trace.line;
    out->prompt_tokens = e->tokens.prompt_tokens;
    out->continuation_tokens = e->tokens.decode_steps;
    out->chunks = e->n_chunks;
    size_t total = md_episode_positions(&e->tokens);
    out->pages = (int64_t)((total + (size_t)st->page_size - 1) / (size_t)st->page_size);
    out->n_probes = e->trace.n_probes;
    out->probes = calloc(out->n_probes, sizeof *out->probes);
    out->runs = calloc(r->n_runs, sizeof *out->runs);
    if (!out->id || !out->probes || !out->runs) return md_fail(err, MD_E_NOMEM, "out of memory");
    for (size_t k = 0; k < out->n_probes; k++) {
      const md_trace_probe *p = &e->trace.probes[k];
      out->probes[k].region = dup_or_null(p->region);
      out->probes[k].question = dup_or_null(p->question);
      out->probes[k].answer = dup_or_null(p->answer);
      if (!out->probes[k].region || !out->probes[k].question || !out->probes[k].answer)
        return md_fail(err, MD_E_NOMEM, "out of memory");
    }
    for (size_t run = 0; run < r->n_runs; run++) {
      out->runs[run].probes = calloc(out->n_probes, sizeof *out->runs[run].probes);
      if (!out->runs[run].probes) return md_fail(err, MD_E_NOMEM, "out of memory");
    }
    st->progress.prompt_tokens_total += (uint64_t)(e->tokens.prompt_tokens * r->n_runs);
    st->progress.decode_steps_total += (uint64_t)(e->tokens.decode_steps * r->n_runs);
  }
  st->progress.episodes_total = st->n_episodes;
  return MD_OK;
}

/* ---- a group of runs -------------------------------------------------------------------
 * The runs of a group (every run of the episode unless --batch says fewer)
 * advance together. Until a run's policy first evicts, its cache is the
 * full cache's, so the runs that have not evicted share one sequence (the
 * leader, seqs[0]): one prefill, one capture row that each of their
 * policies observes. The first eviction forks the run onto a sequence of
 * its own (a copy of the leader's cache; the last run to leave takes the
 * leader itself), which it then runs alone for prompt chunks and in the
 * batched decode steps with the others. Each run's policy sees the calls
 * it sees when the run is done by itself, in the same order, and each
 * sequence computes the same bits (qwen2_forward.h, md_qwen2_step), so the
 * results do not depend on the grouping. */

typedef struct lane {
  size_t run;          /* index of the run */
  md_policy *policy;
  md_eval_run *out;
  size_t slot;         /* its sequence: st->seqs[slot] (0: the leader) */
  bool shared;         /* still on the leader's cache */
} lane;

typedef struct group_state {
  lane lanes[MD_EVAL_MAX_RUNS];
  size_t n_lanes, n_shared;
  bool slot_used[MD_EVAL_MAX_RUNS];
} group_state;

static int compare_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static bool is_cached(const int64_t *sorted, int64_t n, int64_t position) {
  return bsearch(&position, sorted, (size_t)n, sizeof *sorted, compare_i64) != NULL;
}

/* Whether `id` ends an answer (one of the chat format's stop tokens). */
static bool is_stop(const eval_state *st, int32_t id) {
  for (size_t i = 0; i < st->n_stops; i++)
    if (st->stops[i] == id) return true;
  return false;
}

/* Moves a shared lane onto a sequence of its own: a copy of the leader's,
 * or the leader itself when no other lane shares it. */
static md_status fork_lane(eval_state *st, group_state *g, lane *ln, md_error *err) {
  ln->shared = false;
  g->n_shared--;
  if (g->n_shared == 0) return MD_OK; /* the leader is its own now (slot 0) */
  size_t slot = 1;
  while (g->slot_used[slot]) slot++;
  g->slot_used[slot] = true;
  ln->slot = slot;
  return md_qwen2_seq_copy(st->forward, st->seqs[slot], st->seqs[0], err);
}

/* What a lane's policy does with the attention of the tokens [begin, end)
 * just run on its sequence (the row of `cached` floats): append, observe,
 * evict down to its budget (forking it off the leader first if it shares
 * it). */
static md_status lane_update(eval_state *st, group_state *g, lane *ln, const prepared_episode *e,
                             size_t begin, size_t end, const float *row, int64_t cached,
                             md_error *err) {
  md_status s = MD_OK;
  /* Prompt tokens are born at the current step, a decoded token advances the
   * policy's clock (runtime/policy.h, Time: dt counts decode steps). */
  for (size_t i = begin; s == MD_OK && i < end; i++)
    s = i < e->tokens.prompt_tokens ? md_policy_append_prompt(ln->policy, (int64_t)i, e->region_index[i], err)
                             : md_policy_append(ln->policy, (int64_t)i, e->region_index[i], err);
  if (s != MD_OK) return s;
  if (cached > ln->out->max_cached) ln->out->max_cached = cached;
  if ((s = md_policy_observe(ln->policy, row, cached, (int64_t)(end - begin), err)) != MD_OK) return s;
  const int64_t *evict = NULL;
  int64_t n_evict = 0;
  if ((s = md_policy_evict(ln->policy, ln->out->budget_pages, &evict, &n_evict, err)) != MD_OK) return s;
  if (n_evict > 0 && ln->shared && (s = fork_lane(st, g, ln, err)) != MD_OK) return s;
  md_qwen2_select(st->forward, st->seqs[ln->slot]);
  if (n_evict > 0 && (s = md_qwen2_evict(st->forward, evict, n_evict, err)) != MD_OK) return s;
  ln->out->evicted += n_evict;
  int64_t after = md_qwen2_cached(st->forward);
  if (after > ln->out->max_cached_after_eviction) ln->out->max_cached_after_eviction = after;
  return MD_OK;
}

/* Runs a prompt chunk [begin, end) on sequence `slot` with the capture on
 * and reads what its tokens paid into st->row; *cached: the slots after. */
static md_status run_chunk(eval_state *st, size_t slot, const prepared_episode *e, size_t begin,
                           size_t end, int64_t *cached, md_error *err) {
  md_kernels *k = st->kernels;
  md_qwen2_select(st->forward, st->seqs[slot]);
  int64_t after = md_qwen2_cached(st->forward) + (int64_t)(end - begin);
  k->ops->buf_zero(k, st->received[slot], 0, (size_t)after);
  md_status s = md_qwen2_feed(st->forward, e->tokens.ids + begin, (int64_t)(end - begin), err);
  if (s == MD_OK) s = k->ops->buf_read(k, st->received[slot], 0, (size_t)after, st->row, err);
  *cached = after;
  return s;
}

/* One prompt chunk for every lane: the lanes on their own sequences run it
 * there, the shared ones once on the leader. */
static md_status group_chunk(eval_state *st, group_state *g, const prepared_episode *e,
                             size_t begin, size_t end, md_error *err) {
  md_status s = MD_OK;
  int64_t cached = 0;
  for (size_t i = 0; s == MD_OK && i < g->n_lanes; i++) {
    lane *ln = &g->lanes[i];
    if (ln->shared) continue;
    s = run_chunk(st, ln->slot, e, begin, end, &cached, err);
    if (s == MD_OK) s = lane_update(st, g, ln, e, begin, end, st->row, cached, err);
  }
  if (s != MD_OK || g->n_shared == 0) return s;
  lane *shared[MD_EVAL_MAX_RUNS];
  size_t n = 0;
  for (size_t i = 0; i < g->n_lanes; i++)
    if (g->lanes[i].shared) shared[n++] = &g->lanes[i];
  s = run_chunk(st, 0, e, begin, end, &cached, err);
  for (size_t i = 0; s == MD_OK && i < n; i++)
    s = lane_update(st, g, shared[i], e, begin, end, st->row, cached, err);
  return s;
}

/* One continuation token (position i) for every lane, as one batched step
 * of the leader (if shared) and every lane's own sequence. */
static md_status group_decode(eval_state *st, group_state *g, const prepared_episode *e, size_t i,
                              md_error *err) {
  md_kernels *k = st->kernels;
  md_qwen2_seq *seqs[MD_EVAL_MAX_RUNS];
  int32_t tokens[MD_EVAL_MAX_RUNS];
  size_t slots[MD_EVAL_MAX_RUNS], n = 0;
  lane *own[MD_EVAL_MAX_RUNS], *shared[MD_EVAL_MAX_RUNS];
  size_t n_own = 0, n_shared = 0;
  for (size_t j = 0; j < g->n_lanes; j++) {
    lane *ln = &g->lanes[j];
    if (ln->shared) shared[n_shared++] = ln;
    else own[n_own++] = ln, slots[n++] = ln->slot;
  }
  if (n_shared > 0) slots[n++] = 0;
  for (size_t b = 0; b < n; b++) {
    seqs[b] = st->seqs[slots[b]];
    tokens[b] = e->tokens.ids[i];
    md_qwen2_select(st->forward, seqs[b]);
    k->ops->buf_zero(k, st->received[slots[b]], 0, (size_t)md_qwen2_cached(st->forward) + 1);
  }
  md_status s = md_qwen2_step(st->forward, seqs, tokens, (int64_t)n, NULL, err);
  for (size_t j = 0; s == MD_OK && j < n_own; j++) {
    lane *ln = own[j];
    md_qwen2_select(st->forward, st->seqs[ln->slot]);
    int64_t cached = md_qwen2_cached(st->forward);
    s = k->ops->buf_read(k, st->received[ln->slot], 0, (size_t)cached, st->row, err);
    if (s == MD_OK) s = lane_update(st, g, ln, e, i, i + 1, st->row, cached, err);
  }
  if (s != MD_OK || n_shared == 0) return s;
  md_qwen2_select(st->forward, st->seqs[0]);
  int64_t cached = md_qwen2_cached(st->forward);
  s = k->ops->buf_read(k, st->received[0], 0, (size_t)cached, st->row, err);
  for (size_t j = 0; s == MD_OK && j < n_shared; j++)
    s = lane_update(st, g, shared[j], e, i, i + 1, st->row, cached, err);
  return s;
}

/* A probe's outcome into its region's cell of its run. */
static void tally(eval_state *st, size_t run_index, const md_eval_probe *out) {
  int g = md_policy_config_region(&st->policy_config, out->region);
  if (g < 0) return; /* cannot happen: checked in prepare_probes via the prompt's regions */
  md_eval_cell *cell = md_eval_cell_at(st->results, run_index, (size_t)g);
  cell->total++;
  cell->recalled += out->correct;
  cell->flagged += !out->answer_in_region;
  cell->answer_tokens += out->answer_tokens;
  cell->answer_kept += out->answer_kept;
  if (out->answer_tokens > 0 && out->answer_kept == 0) {
    cell->evicted_total++;
    cell->evicted_recalled += out->correct;
  }
}

/* An answer being decoded from one sequence's state. */
typedef struct answer {
  size_t slot;
  md_qwen2_mark mark;
  int32_t *tokens;
  size_t n;
  int32_t next;
  bool going;
  char *text;
  size_t length;
} answer;

/* Asks probe `index` from the state of every sequence in use (answers[j]
 * for slot answers[j].slot), the answers' tokens decoded as batched steps,
 * and rolls each sequence back. */
static md_status ask_probe(eval_state *st, const prepared_episode *e, size_t index,
                           answer *answers, size_t n_answers, md_error *err) {
  const prepared_probe *p = &e->probes[index];
  size_t max = st->results->max_answer_tokens;
  md_qwen2_forward *fw = st->forward;
  md_status s = MD_OK;
  md_qwen2_seq *all[MD_EVAL_MAX_RUNS];
  const int32_t *questions[MD_EVAL_MAX_RUNS];
  int64_t lengths[MD_EVAL_MAX_RUNS];
  int32_t first[MD_EVAL_MAX_RUNS];
  for (size_t j = 0; j < n_answers; j++) {
    answer *a = &answers[j];
    a->n = 0;
    a->going = true;
    md_qwen2_select(fw, st->seqs[a->slot]);
    a->mark = md_qwen2_mark_get(fw);
    all[j] = st->seqs[a->slot];
    questions[j] = p->question;
    lengths[j] = (int64_t)p->question_tokens;
  }
  s = md_qwen2_prefill_greedy(fw, all, questions, lengths, (int64_t)n_answers, first, err);
  for (size_t j = 0; s == MD_OK && j < n_answers; j++) answers[j].next = first[j];
  /* As one sequence alone: take the greedy token unless it ends the
   * answer; run it unless the answer is full. */
  while (s == MD_OK) {
    md_qwen2_seq *seqs[MD_EVAL_MAX_RUNS];
    int32_t tokens[MD_EVAL_MAX_RUNS], next[MD_EVAL_MAX_RUNS];
    answer *stepping[MD_EVAL_MAX_RUNS];
    size_t n = 0;
    for (size_t j = 0; j < n_answers; j++) {
      answer *a = &answers[j];
      if (!a->going) continue;
      if (a->n >= max || is_stop(st, a->next)) {
        a->going = false;
        continue;
      }
      a->tokens[a->n++] = a->next;
      if (a->n >= max) {
        a->going = false;
        continue;
      }
      seqs[n] = st->seqs[a->slot];
      tokens[n] = a->next;
      stepping[n++] = a;
    }
    if (n == 0) break;
    s = md_qwen2_step(fw, seqs, tokens, (int64_t)n, next, err);
    for (size_t b = 0; s == MD_OK && b < n; b++) stepping[b]->next = next[b];
  }
  for (size_t j = 0; s == MD_OK && j < n_answers; j++)
    s = md_tokenizer_decode(st->tokenizer, answers[j].tokens, answers[j].n, true, &answers[j].text,
                            &answers[j].length, err);
  for (size_t j = 0; j < n_answers; j++) {
    md_qwen2_select(fw, st->seqs[answers[j].slot]);
    md_error inner;
    md_status rs = md_qwen2_rollback(fw, &answers[j].mark, &inner);
    if (s == MD_OK && rs != MD_OK) {
      *err = inner;
      s = rs;
    }
  }
  return s;
}

/* The probes of the episode from each lane's final state: one answer per
 * sequence in use (the lanes that share the leader share its answers). */
static md_status group_probes(eval_state *st, group_state *g, const prepared_episode *e,
                              size_t episode, md_error *err) {
  md_eval_episode *re = &st->results->episodes[episode];
  answer answers[MD_EVAL_MAX_RUNS];
  size_t n_answers = 0, of_lane[MD_EVAL_MAX_RUNS];
  md_status s = MD_OK;
  for (size_t i = 0; i < g->n_lanes; i++) {
    size_t slot = g->lanes[i].slot, j = 0;
    while (j < n_answers && answers[j].slot != slot) j++;
    if (j == n_answers) {
      answers[n_answers] = (answer){.slot = slot};
      answers[n_answers].tokens = malloc((st->results->max_answer_tokens + 1) * sizeof(int32_t));
      if (!answers[n_answers++].tokens) s = md_fail(err, MD_E_NOMEM, "out of memory");
    }
    of_lane[i] = j;
  }
  for (size_t k = 0; s == MD_OK && k < e->trace.n_probes; k++) {
    const prepared_probe *p = &e->probes[k];
    const md_trace_probe *tp = &e->trace.probes[k];
    s = ask_probe(st, e, k, answers, n_answers, err);
    for (size_t i = 0; s == MD_OK && i < g->n_lanes; i++) {
      lane *ln = &g->lanes[i];
      const answer *a = &answers[of_lane[i]];
      md_eval_probe *out = &ln->out->probes[k];
      md_qwen2_select(st->forward, st->seqs[ln->slot]);
      int64_t cached = md_qwen2_cached(st->forward);
      const int64_t *positions = md_qwen2_slot_positions(st->forward);
      out->index = k;
      out->answer_in_region = p->n_answer_positions > 0;
      out->answer_tokens = p->n_answer_positions;
      for (size_t t = 0; t < p->n_answer_positions; t++)
        out->answer_kept += is_cached(positions, cached, p->answer_positions[t]);
      out->output = malloc(a->length + 1);
      if (!out->output) {
        s = md_fail(err, MD_E_NOMEM, "out of memory");
        break;
      }
      memcpy(out->output, a->text, a->length + 1);
      out->correct = md_eval_answer_matches(tp->answer, a->text, a->length);
      out->region = re->probes[k].region;
      tally(st, ln->run, out);
    }
    for (size_t j = 0; j < n_answers; j++) {
      free(answers[j].text);
      answers[j].text = NULL;
    }
  }
  for (size_t j = 0; j < n_answers; j++) free(answers[j].tokens);
  return s;
}

/* The runs first .. first + count - 1 of an episode, as one group. */
static md_status run_group(eval_state *st, size_t episode, size_t first, size_t count,
                           md_error *err) {
  const prepared_episode *e = &st->episodes[episode];
  md_eval_results *r = st->results;
  md_eval_episode *re = &r->episodes[episode];
  group_state g = {.n_lanes = count, .n_shared = count};
  for (size_t i = 0; i < count; i++) {
    size_t run = first + i;
    const md_policy_class *cls = st->run_class[run];
    md_eval_run *out = &re->runs[run];
    int64_t budget = (int64_t)ceil(r->run_budget[run] * (double)re->pages - 1e-9);
    if (budget < 1) budget = 1;
    out->budget_pages = cls == &md_policy_class_full ? re->pages : budget;
    g.lanes[i] = (lane){.run = run, .policy = st->run_policy[run], .out = out, .slot = 0,
                        .shared = true};
    md_policy_reset(st->run_policy[run], st->options->seed + (uint64_t)episode);
  }
  g.slot_used[0] = true;
  md_qwen2_capture capture = {.layer_begin = 0, .layer_end = st->config->num_hidden_layers,
                              .heads = MD_CAPTURE_HEADS_MEAN};
  md_status s = MD_OK;
  for (size_t i = 0; s == MD_OK && i < st->group; i++) {
    md_qwen2_select(st->forward, st->seqs[i]);
    md_qwen2_reset(st->forward);
    capture.received = st->received[i];
    s = md_qwen2_set_capture(st->forward, &capture, err);
  }
  /* Progress after every chunk and step (the consumer throttles). */
  for (size_t c = 0; s == MD_OK && c < e->n_chunks; c++) {
    double t0 = now_seconds();
    s = group_chunk(st, &g, e, e->chunks[c].begin, e->chunks[c].end, err);
    st->progress.prefill_seconds += now_seconds() - t0;
    st->progress.prompt_tokens_done += (e->chunks[c].end - e->chunks[c].begin) * count;
    if (s == MD_OK) report(st, MD_COLLECT_PREFILL, e->trace.id);
  }
  size_t P = e->tokens.prompt_tokens, total = md_episode_positions(&e->tokens);
  for (size_t i = P; s == MD_OK && i < total; i++) {
    double t0 = now_seconds();
    s = group_decode(st, &g, e, i, err);
    st->progress.decode_seconds += now_seconds() - t0;
    st->progress.decode_steps_done += count;
    if (s == MD_OK) report(st, MD_COLLECT_STEP, e->trace.id);
  }
  for (size_t i = 0; i < st->group; i++) {
    md_qwen2_select(st->forward, st->seqs[i]);
    md_qwen2_set_capture(st->forward, NULL, NULL);
  }
  for (size_t i = 0; s == MD_OK && i < count; i++) {
    md_qwen2_select(st->forward, st->seqs[g.lanes[i].slot]);
    g.lanes[i].out->final_cached = md_qwen2_cached(st->forward);
  }
  if (s == MD_OK) s = group_probes(st, &g, e, episode, err);
  md_qwen2_select(st->forward, NULL);
  if (s != MD_OK) {
    if (count == 1)
      return md_error_prefix(err, "%s:%zu: episode \"%s\", policy %s", e->trace.path,
                             e->trace.line, e->trace.id, st->run_class[first]->name);
    return md_error_prefix(err, "%s:%zu: episode \"%s\", runs %zu to %zu", e->trace.path,
                           e->trace.line, e->trace.id, first + 1, first + count);
  }
  return MD_OK;
}

/* ---- the loop ---------------------------------------------------------------------------- */

static void free_state(eval_state *st) {
  for (size_t i = 0; i < st->n_episodes; i++) free_prepared(&st->episodes[i]);
  free(st->episodes);
  for (size_t run = 0; run < MD_EVAL_MAX_RUNS; run++) md_policy_free(st->run_policy[run]);
  for (size_t i = 0; i < st->group; i++) {
    if (st->received && st->received[i]) st->kernels->ops->buf_free(st->kernels, st->received[i]);
    if (st->seqs && i > 0) md_qwen2_seq_free(st->forward, st->seqs[i]);
  }
  free(st->seqs);
  free(st->received);
  md_qwen2_forward_free(st->forward);
  free(st->row);
  if (st->have_policy_config) md_policy_config_free(&st->policy_config);
  md_tokenizer_free(st->tokenizer);
  md_qwen2_model_close(st->model);
  md_kernels_free(st->kernels);
}

/* Everything a result depends on, for the record of a resumable eval: a
 * resumed run must be the same evaluation. */
static char *identity(const eval_state *st) {
  const md_eval_results *r = st->results;
  const md_eval_options *o = st->options;
  size_t ids_len = 1;
  for (size_t e = 0; e < r->n_episodes; e++) ids_len += strlen(r->episodes[e].id) + 1;
  char *ids = malloc(ids_len);
  if (!ids) return NULL;
  size_t at = 0;
  for (size_t e = 0; e < r->n_episodes; e++)
    at += (size_t)sprintf(ids + at, "%s\n", r->episodes[e].id);
  ids[at] = '\0';
  char ids_sha[MD_SHA256_HEX];
  md_sha256_bytes(ids, at, ids_sha);
  free(ids);
  char runs[MD_EVAL_MAX_RUNS * (MD_EVAL_POLICY_NAME_MAX + 24)] = "";
  size_t used = 0;
  for (size_t run = 0; run < r->n_runs && used < sizeof runs; run++)
    used += (size_t)snprintf(runs + used, sizeof runs - used, "%s%s@%.17g", run ? "," : "",
                             r->run_policy[run], r->run_budget[run]);
  /* The prompt products as computed (init_results; the CPU back end's
   * default depends on the CPU), not as asked: a resume elsewhere must
   * compute the same. */
  bool bf16 = strcmp(r->prompt_products, "bf16") == 0;
  size_t n = 1024 + strlen(runs);
  char *text = malloc(n);
  if (text)
    snprintf(text, n,
             "traces %.16s, config %.16s, model %.16s, episodes %.16s, device %s, threads %d%s%s, "
             "page size %d, answer tokens %zu, seed %llu, runs %s",
             r->traces_sha256, r->config_sha256, r->model_config_sha256, ids_sha, r->device,
             r->threads, o->exact_gemm ? ", exact gemm" : "", bf16 ? ", bf16 gemm" : "",
             r->page_size, r->max_answer_tokens, (unsigned long long)r->seed, runs);
  return text;
}

/* Opens the record and restores its finished episodes (done[e]). */
static md_status open_record(eval_state *st, bool *done, md_eval_record **record, md_error *err) {
  const md_eval_options *o = st->options;
  if (!o->record_path) return MD_OK;
  char *id = identity(st);
  if (!id) return md_fail(err, MD_E_NOMEM, "out of memory");
  md_status s = md_eval_record_open(o->record_path, id, o->resume, st->results, done, record, err);
  free(id);
  md_eval_results *r = st->results;
  for (size_t e = 0; s == MD_OK && e < r->n_episodes; e++) {
    if (!done[e]) continue;
    for (size_t run = 0; run < r->n_runs; run++)
      for (size_t k = 0; k < r->episodes[e].n_probes; k++) tally(st, run, &r->episodes[e].runs[run].probes[k]);
    st->progress.episodes_done++;
  }
  return s;
}

md_status md_eval(const md_eval_options *options, md_eval_results *results, md_error *err) {
  memset(results, 0, sizeof *results);
  eval_state st = {.options = options, .started = now_seconds(), .results = results};
  md_status s = check_options(&st, err);
  if (s == MD_OK) s = open_inputs(&st, err);
  if (s == MD_OK) s = read_episodes(&st, err);
  if (s == MD_OK) s = make_engine(&st, err);
  if (s == MD_OK) s = init_results(&st, err);
  if (s == MD_OK) s = make_runs(&st, err);
  bool *done = s == MD_OK ? calloc(st.n_episodes + 1, sizeof *done) : NULL;
  if (s == MD_OK && !done) s = md_fail(err, MD_E_NOMEM, "out of memory");
  md_eval_record *record = NULL;
  if (s == MD_OK) s = open_record(&st, done, &record, err);
  /* Refused before any work: the inputs or settings are at fault. */
  if (s != MD_OK) md_error_blame_input(err);
  else report(&st, MD_COLLECT_START, NULL);
  for (size_t e = 0; s == MD_OK && e < st.n_episodes; e++) {
    if (done[e]) continue; /* restored from the record */
    report(&st, MD_COLLECT_EPISODE_BEGIN, st.episodes[e].trace.id);
    for (size_t run = 0; s == MD_OK && run < results->n_runs; run += st.group) {
      size_t count = results->n_runs - run < st.group ? results->n_runs - run : st.group;
      s = run_group(&st, e, run, count, err);
    }
    if (s == MD_OK && record) s = md_eval_record_append(record, results, e, err);
    if (s == MD_OK) {
      st.progress.episodes_done++;
      report(&st, MD_COLLECT_EPISODE_DONE, st.episodes[e].trace.id);
    }
  }
  /* A record with no finished episode is nothing to resume: gone. */
  if (record && st.progress.episodes_done == 0) md_eval_record_discard(record);
  else md_eval_record_close(record);
  free(done);
  if (s == MD_OK) {
    results->seconds = now_seconds() - st.started;
    report(&st, MD_COLLECT_FINISH, NULL);
  }
  free_state(&st);
  if (s != MD_OK) md_eval_results_free(results);
  return s;
}
