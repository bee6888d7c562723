/* The eviction-probe evaluation (`memdecay-calibrate eval`, memdecay-eval(5)):
 * how many facts planted in each region of an agent episode a model still
 * recalls when its KV cache is held to a budget by an eviction policy
 * (runtime/policy.h), against the full cache.
 *
 * The protocol, for every episode of the traces and every (policy, budget)
 * pair, each from an empty cache:
 *
 *  1. Feeding. The prompt is fed as an agent feeds it: message by message,
 *     each message (the tokens whose text comes from one trace message, with
 *     the template text around it; the default system prompt, the tools block
 *     and the generation prompt are chunks of their own) prefilled as one
 *     chunk, matrix-matrix; then the continuation, teacher-forced, one token
 *     per decode step. The attention capture (every layer, heads averaged)
 *     is on for every chunk and step, and its column sums update the policy
 *     (md_policy_observe). After every chunk and every decode step the policy
 *     evicts whole pages down to the budget and the engine drops their keys
 *     and values (md_qwen2_evict). While a chunk is being prefilled the cache
 *     holds the budget plus that chunk: a chunk may overshoot the budget by
 *     its own length until it is done.
 *
 *  2. Budget. A fraction f of the episode's full length (prompt plus
 *     continuation) in pages: budget_pages = ceil(f * ceil(L / page_size)).
 *     f = 1 is the full cache. The full cache (policy "full") is always run,
 *     once per episode, as the ceiling.
 *
 *  3. Probes. Each probe is asked from the same cache state (a mark before,
 *     a rollback after: md_qwen2_rollback): the tokens of
 *     "<|im_end|>\n<|im_start|>user\n" QUESTION "<|im_end|>\n<|im_start|>assistant\n"
 *     are prefilled (closing the assistant turn that the continuation was
 *     part of), then up to max_answer_tokens tokens are decoded greedily,
 *     stopping at <|im_end|>. Nothing is evicted while a probe is asked.
 *     The probe is correct when its normalised answer occurs in the
 *     normalised output as a whole word sequence (md_eval_normalise).
 *
 *  4. Retention. The answer's tokens in its source region (the prompt tokens
 *     overlapping any case-insensitive, whole-word occurrence of the answer
 *     in text of the probe's region) and the share of them still cached when
 *     the question is asked. A probe whose answer occurs nowhere in its
 *     region is flagged (answer_in_region false) and still scored.
 *
 * Validation happens before any model work: the traces, the config (every
 * region an episode uses must be listed in it; eval has no fallback, since
 * an unlisted region has no decay rate to evict by; every policy must accept
 * it, e.g. memdecay-shared needs its pooled fit), every episode has at
 * least one probe, every probe's region occurs in its episode's prompt,
 * budgets lie in (0, 1]. The library never prints: progress and warnings go
 * to callbacks. */
#ifndef MD_COLLECTOR_EVAL_EVAL_H
#define MD_COLLECTOR_EVAL_EVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/capture/collect.h"
#include "collector/tokenizer/episode_tokens.h"
#include "base/error.h"
#include "io/formats/eval_results.h"
#include "runtime/policy.h"
#include "runtime/policy_class.h"

#define MD_EVAL_DEFAULT_ANSWER_TOKENS 32 /* eval --max-answer-tokens */
/* eval --budgets: the two cache budgets, as shares of each prompt */
#define MD_EVAL_DEFAULT_BUDGET_SMALL 0.25
#define MD_EVAL_DEFAULT_BUDGET_LARGE 0.5

typedef struct md_eval_options {
  const char *model_dir;      /* Hugging Face checkpoint directory */
  const char *traces_path;    /* memdecay-traces(5), episodes with probes */
  const char *config_path;    /* memdecay.json (memdecay-config(5)) */
  const char *device;         /* "cpu" (NULL), "cuda", "cuda:N" */
  int threads;                /* CPU threads; 0 = all cores */
  bool exact_gemm;            /* CUDA: prompt products in fp32 */
  bool bf16_gemm;             /* CPU: BF16 products by AVX-512 BF16 */
  bool gguf_f32;              /* a GGUF model's matrices expanded to float32, not bfloat16 */
  /* The policies, in the order to run them: classes of the table
     (runtime/policy_table.h, md_policy_find) or the caller's own
     (runtime/policy_class.h: a policy outside the table runs the same way;
     its name, unique among them, goes into the results). */
  const md_policy_class *policies[MD_EVAL_MAX_POLICIES];
  size_t n_policies;          /* 0: every policy of the table but the opt-in ones
                                 (md_policy_class.opt_in), in its order; full (the
                                 ceiling) is run first whether listed or not */
  double budgets[MD_EVAL_MAX_BUDGETS];
  size_t n_budgets;           /* 0: MD_EVAL_DEFAULT_BUDGET_SMALL and _LARGE */
  int page_size;              /* 0: the config's policy.page_size */
  size_t max_answer_tokens;   /* 0: MD_EVAL_DEFAULT_ANSWER_TOKENS */
  size_t max_episodes;        /* 0: all */
  uint64_t seed;              /* policy random: episode e uses seed + e */
  size_t batch;               /* runs of one episode stepped together (one KV cache
                                 each, shared until a run first evicts); 0: all of
                                 them. Results do not depend on it. */
  bool skip_invalid;          /* skip (and report) invalid episodes instead of stopping */
  const char *record_path;    /* NULL, or the record of finished episodes to keep
                                 (io/formats/eval_record.h; eval's RESULTS.record) */
  bool resume;                /* restore the record's episodes and run only the others */
  /* progress: event START / EPISODE_BEGIN / PREFILL (a prompt chunk of the runs stepped
     together, prompt_tokens_done counting each run's tokens) / STEP (a decode step of
     them, decode_steps_done counting each run's) / EPISODE_DONE / FINISH */
  md_collect_progress_fn progress;
  md_collect_warning_fn on_warning;
  void *context;
} md_eval_options;

void md_eval_options_init(md_eval_options *options);

/* Runs the evaluation. Errors: MD_E_INVALID / MD_E_FORMAT / MD_E_UNSUPPORTED
 * for bad input or settings (they name the file, line, episode and field),
 * MD_E_IO, MD_E_NOMEM, MD_E_DEVICE when the run failed. On failure `results`
 * is empty. */
md_status md_eval(const md_eval_options *options, md_eval_results *results, md_error *err);

/* The text normalisation of answer scoring: NFKC, case folding, every run of
 * characters that are neither letters nor digits (Unicode categories L* and
 * N*) replaced by one space, then a space added at both ends, so that
 * "whole-word" containment is a plain substring test. Invalid UTF-8 bytes
 * count as separators. Returns a malloc'd string, NULL when out of memory. */
char *md_eval_normalise(const char *text, size_t length);

/* True when the normalised answer occurs in the normalised output (both
 * raw texts); an answer that normalises to nothing is never found. */
bool md_eval_answer_matches(const char *answer, const char *output, size_t output_length);

/* Retention matching: where a probe's answer is held in the prompt, found
 * exactly as scoring finds an answer in an output (md_eval_normalise on
 * both sides, whole words), so a fact is looked for in the cache under the
 * same rule it is scored by: "New York" is in "New-York" and "NEW  YORK",
 * "Straße" in "STRASSE", "42" in full-width "４２".
 *
 * md_eval_answer_spans: every occurrence of `answer` in text[0, length),
 * as byte ranges [begin, end) of `text`, from the first byte of the
 * character whose normalisation starts the match to the last byte of the
 * one that ends it (a character that normalises to several, such as "ß",
 * is taken whole). In text order; *spans malloc'd (NULL when none).
 * MD_E_NOMEM only. */
typedef struct md_eval_span {
  size_t begin, end;
} md_eval_span;

md_status md_eval_answer_spans(const char *text, size_t length, const char *answer,
                               md_eval_span **spans, size_t *n_spans);

/* The prompt positions that hold a probe's answer: every token overlapping
 * an occurrence of `answer` (md_eval_answer_spans) inside a run of spans of
 * `region` (adjacent spans of one region are searched as one text; a run's
 * ends are word boundaries). In increasing order, each once; *positions
 * malloc'd ([prompt_tokens + 1]). MD_E_NOMEM only. */
md_status md_eval_answer_positions(const md_episode_tokens *t, const char *region,
                                   const char *answer, int64_t **positions, size_t *n_positions);

#endif
