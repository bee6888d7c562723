/* The MemDecay reference runtime: KV-cache eviction policies, MemDecay and
 * the baselines it is compared with. This header is the reference statement
 * of their semantics (memdecay-config(5) points here).
 *
 * The policies know nothing of the model. Their inputs are the original
 * position of each token that enters the cache, its region (an index into
 * the config's region table) and, after each forward pass, the attention the
 * cached tokens received. Their output is the set of positions to drop.
 *
 * ---- Time -------------------------------------------------------------------
 *
 * One step = one decoded token, the unit the calibration measures lifetimes
 * and rates in (memdecay-config(5): dt and half-lives in decode steps;
 * memdecay-events(5): a prompt token's time origin is the decode start).
 * md_policy_append() appends a decoded token: it advances the step counter t
 * by one and the token is born at the new step. md_policy_append_prompt()
 * appends a prompt token (one of a prefilled chunk): it is born at the
 * current step and t does not move. So t = 0 after md_policy_reset(), every
 * token of a prompt prefilled before the first decode step is born at t = 0,
 * t = k after the k-th decoded token, and a prompt chunk that arrives later
 * (a tool's output after some decoding) is born at the step it arrives. A
 * token's last-refresh step starts at its birth, so dt = 0 right after its
 * append. Only the decay term reads t (memdecay and its ablations); the
 * other policies rank by position, attention or observe calls.
 *
 * ---- Attention --------------------------------------------------------------
 *
 * md_policy_observe() gets, for the chunk of the last n_q appended tokens
 * (n_q = 1 for a decode step), received[s] for each cached token s (slot
 * order = position order): the column sum over the chunk's queries of each
 * query's softmax row, averaged over heads and captured layers. Query j of
 * the chunk (j = 0 .. n_q - 1) sits at slot n - n_q + j of the n cached
 * tokens and sees v_j = n - n_q + j + 1 tokens (itself and every cached token
 * before it). From received[s] the policy derives
 *
 *   uniform-relative attention  r_s = received[s] / u_s,
 *                               u_s = sum of 1/v_j over the queries j that see s
 *   raw share                   w_s = received[s] / c_s,
 *                               c_s = number of the chunk's queries that see s
 *
 * For one decode query over n tokens r_s = a_s n and w_s = a_s: the
 * calibration's uniform-relative attention a_t n_t and the plain attention.
 * A query sees s when s <= its slot, so c_s = n - max(s, n - n_q) >= 1.
 *
 * Per observe call, for every cached token (one update per call, not per
 * query of a chunk):
 *   - refresh: if r_s >= tau, the token's last-refresh step := t;
 *   - EWMA of r (e) and of w (e_raw): e := beta e + (1 - beta) r, starting at
 *     0 at birth, as the calibration's (fit/extract/attention_norm.h; a decoded
 *     token's first update is its birth step's self-attention there too);
 *   - H2O's accumulator: acc := acc + received[s] (the sum over every past
 *     query, H2O's accumulated attention score).
 *
 * ---- Scores -----------------------------------------------------------------
 *
 * With dt_i = t - (last-refresh step of i), b_r the region's base_priority,
 * lambda_r its decay rate per step, alpha and kappa from the config:
 *
 *   memdecay      s_i(t) = b_r exp(-lambda_r dt_i) + alpha a_hat_i,
 *                 a_hat_i = e_i / kappa
 *   memdecay-raw  s_i(t) = b_r exp(-lambda_r dt_i) + alpha e_raw_i
 *
 * memdecay is the score of memdecay-config(5) (DESCRIPTION): the survival of
 * a token of region r that was last used dt steps ago, weighted by how often
 * the region's tokens are used at all, plus its recent attention normalised
 * so that a_hat = 1 at the calibration's kappa quantile. memdecay-raw is the
 * unnormalised form (plain attention shares, no kappa), kept for comparison.
 * A token of a pinned region scores +infinity (lambda is not needed there).
 *
 * The ablations of memdecay take one part away each and score with
 * memdecay's own code (runtime/policies/memdecay.c, md_memdecay_score):
 *
 *   memdecay-shared   s_i(t) = b_r exp(-lambda_pooled dt_i) + alpha a_hat_i
 *   memdecay-nodecay  s_i(t) = b_r + alpha a_hat_i          (lambda_r = 0)
 *   memdecay-noattn   s_i(t) = b_r exp(-lambda_r dt_i)      (alpha = 0)
 *
 * lambda_pooled is the config's pooled.lambda: one exponential fit of the
 * lifetimes of every unpinned region together (memdecay-config(5), POOLED),
 * so memdecay-shared keeps the regions' base priorities and pinning but not
 * their separate rates; it refuses a config without a pooled fit. In
 * memdecay-noattn attention still refreshes dt (r >= tau): the refresh is
 * the "last use" the lifetimes were measured from, part of the decay term;
 * only the a_hat term goes.
 *
 * The attention baselines, with W observe calls in the window and a pooling
 * width K (md_policy_options; defaults W = 32, K = 7):
 *
 *   snapkv   s_i(t) = max over the cached tokens j with |pos_j - pos_i| <= K/2
 *                     of v_j,  v_j = sum over the last W observe calls c of
 *                     received_c[j] (0 for a call before j was appended)
 *   tova     s_i(t) = received[i] of the last observe call (0 for a token
 *                     appended since)
 *
 * snapkv is SnapKV's score (Li et al. 2024, "SnapKV: LLM Knows What You Are
 * Looking for Before Generation": the attention of an observation
 * window of the latest queries, summed over them, then a 1-D pool over
 * neighbouring positions, max pooling of width 7 here; the released code
 * also offers average pooling). tova is TOVA's (Oren et al. 2024,
 * "Transformers are Multi-State RNNs": the attention of the
 * current query, averaged over heads). h2o scores a token by acc; full,
 * random, streaming and streaming-pinned rank by position only and score
 * every token 0.
 *
 * ---- Pages and eviction -----------------------------------------------------
 *
 * The page of a token is position / page_size (page_size 1: token-granular).
 * Eviction removes whole pages: every cached token of the page. A page score
 * is the mean of its cached tokens' scores. md_policy_evict(budget) evicts
 * nothing while at most `budget` pages hold cached tokens; otherwise it
 * evicts exactly the excess, in the order of each policy below, from the
 * evictable pages. Never evictable, for every policy: the page holding the
 * newest token (it is being written). When fewer pages are evictable than
 * the excess, all of them go and md_policy_cached_pages() stays above the
 * budget (not an error). Ties are broken by page index, oldest first, so
 * every policy is deterministic (random: for a given seed).
 *
 *   full          never evicts.
 *   memdecay,     pages holding a pinned-region token are not evictable; the
 *   memdecay-raw  others go lowest page score first.
 *   h2o           the ceil(budget / 2) most recent cached pages are kept;
 *                 the others go lowest mean accumulated attention first, so
 *                 the rest of the budget holds the heaviest pages.
 *                 H2O (Zhang et al. 2023, "H2O: Heavy-Hitter Oracle") is
 *                 token-level, per head, with heavy_ratio = recent_ratio;
 *                 here it is page-level (a page's mean accumulated
 *                 attention), one set for all heads and layers, half the
 *                 budget each. No pinning.
 *   streaming     the sink pages (those holding the sequence's first
 *                 sink_tokens tokens, default 4) are kept; the others go
 *                 oldest first, leaving the most recent pages.
 *                 StreamingLLM (Xiao et al. 2023, "Efficient Streaming
 *                 Language Models with Attention Sinks") keeps 4 sink tokens
 *                 plus a recent window of tokens; here at page granularity,
 *                 so the sink page keeps up to page_size tokens (page_size 1
 *                 gives exactly the sink tokens). The engine keeps keys at
 *                 their original positions, where StreamingLLM renumbers
 *                 positions within the cache. No pinning.
 *   random        uniformly random pages, without replacement, drawn with a
 *                 self-contained splitmix64 generator seeded by
 *                 md_policy_options.seed / md_policy_reset(). No pinning.
 *   memdecay-shared, memdecay-nodecay, memdecay-noattn
 *                 as memdecay: pinned pages kept, the others lowest page
 *                 score first.
 *   streaming-pinned
 *                 streaming's order (sink pages kept, the others oldest
 *                 first), and pages holding a pinned-region token are not
 *                 evictable: pinning alone, without rates or attention.
 *   snapkv        the pages holding the W most recently appended tokens
 *                 (the observation window's own tokens, which SnapKV keeps)
 *                 go last, oldest first, only when nothing else is left;
 *                 the others go lowest page score first. Departures from
 *                 SnapKV, which compresses the prompt once, after prefill:
 *                 the scores are recomputed at every eviction point over
 *                 what is cached, as decoding variants of it do; its window
 *                 is the last W prompt queries, here the last W observe
 *                 calls (a decode step is one query; a prefill chunk's
 *                 queries count as one call, their attention summed); it
 *                 selects per layer and head, here one selection from the
 *                 attention averaged over heads and captured layers; it
 *                 selects tokens, here pages by their tokens' mean score;
 *                 the pool runs over positions, and an evicted neighbour
 *                 is absent (max_pool1d's padding). No pinning.
 *   tova          the pages go lowest page score first: the page the latest
 *                 query attended to least. Departures from TOVA, which drops
 *                 one token per step and layer when its cache is full: whole
 *                 pages (their tokens' mean), one decision for every layer
 *                 from the attention averaged over heads and captured
 *                 layers, and after a prefill chunk the "latest query" is
 *                 the chunk's queries, their attention summed. No pinning.
 *
 * The code: the engine (state, statistics, pages, eviction) in
 * runtime/policy.c; each policy a class of runtime/policy_class.h in its own
 * file, runtime/policies/NAME.c (NAME with _ for -), listed in
 * runtime/policies/table.c (runtime/policy_table.h).
 *
 * Cost: append O(1) amortised, observe O(cached + n_q) (snapkv O(W cached)),
 * evict O(cached + pages log pages) (snapkv and tova O(K cached log cached):
 * their per-token state is looked up by position), score look-ups
 * O(log cached + page_size).
 *
 * Library code: no output, no exit; errors come back as md_status with an
 * md_error message. A policy is not thread-safe. */
#ifndef MD_RUNTIME_POLICY_H
#define MD_RUNTIME_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* A policy class (runtime/policy_class.h); the program's are listed in
 * runtime/policy_table.h (md_policy_find by name). */
typedef struct md_policy_class md_policy_class;

/* ---- the config ------------------------------------------------------------- */

typedef struct md_policy_region {
  char *name;
  bool pinned;
  double base_priority;  /* b_r, in [0, 1] */
  double lambda;         /* per step, finite and >= 0; NaN allowed when pinned */
} md_policy_region;

/* What the policies need of a memdecay.json. */
typedef struct md_policy_config {
  int page_size;         /* >= 1 */
  double tau;            /* refresh threshold in uniform shares, finite and > 0 */
  double ewma_beta;      /* in [0, 1) */
  double alpha;          /* finite and >= 0 */
  double kappa;          /* finite and > 0 */
  /* The pooled fit (pooled.lambda, memdecay-config(5)): has_pooled false when
   * the config has none (written before the fit computed it); pooled_lambda
   * finite and >= 0, or NaN for null. Only memdecay-shared needs it. */
  bool has_pooled;
  double pooled_lambda;
  size_t n_regions;
  md_policy_region *regions;  /* in file order: region index = array index */
} md_policy_config;

/* Loads policy.{page_size, tau, ewma_beta, alpha, attention_norm.kappa},
 * regions.NAME.{pinned, base_priority, lambda} and, when present,
 * pooled.lambda of a memdecay.json through io/config's reader
 * (md_config_read_as, MD_CONFIG_READ_POLICY). Every error names the file and
 * the field ("PATH: policy.attention_norm.kappa: ..."). Refused: a field
 * missing or of the wrong type, a value out of the ranges above, a null
 * kappa or alpha (not estimable in the calibration: memdecay needs them), a
 * null lambda on an unpinned region (on a pinned one lambda is not needed
 * and may be null), a lambda (a region's or the pooled one) that contradicts
 * its half_life. A config without "pooled" loads (has_pooled false). On
 * failure *config is left empty. */
md_status md_policy_config_load(const char *path, md_policy_config *config, md_error *err);
void md_policy_config_free(md_policy_config *config);
/* Checks a config built in memory against the ranges above, as
 * md_policy_new does (errors name the field: "regions.plan.lambda: ..."). */
md_status md_policy_config_check(const md_policy_config *config, md_error *err);
/* The index of region `name`, or -1. */
int md_policy_config_region(const md_policy_config *config, const char *name);

/* ---- the policy ------------------------------------------------------------- */

typedef struct md_policy md_policy;

typedef struct md_policy_options {
  const md_policy_class *policy;  /* which policy: a class of the table or the caller's own */
  int page_size;      /* 0: the config's page_size (16 without a config); else >= 1 */
  uint64_t seed;      /* random */
  int sink_tokens;    /* streaming, streaming-pinned; 0 = 4; >= 0 */
  int observation_window; /* snapkv: W, observe calls in its window; 0 = 32; >= 0 */
  int pool_kernel;    /* snapkv: K, the pool's width in positions, odd; 0 = 7; 1: no pooling */
} md_policy_options;

/* `config` may be NULL for a class without uses_regions (it uses no region
 * data); a class with uses_regions (memdecay, its ablations,
 * streaming-pinned) needs it; a config given is checked against the ranges
 * above (errors name the field). The policy copies what it needs: `config`
 * may be freed afterwards. */
md_status md_policy_new(const md_policy_config *config, const md_policy_options *options,
                        md_policy **policy, md_error *err);
void md_policy_free(md_policy *policy);
/* The class the policy was made with. */
const md_policy_class *md_policy_get_class(const md_policy *policy);

/* Forgets every token (a new sequence: t = 0, no sink seen yet, no
 * attention observed) and reseeds random with `seed` (the class's reset). */
void md_policy_reset(md_policy *policy, uint64_t seed);

/* A token enters the cache at original position `position` (>= 0, strictly
 * increasing across calls since the last reset), in region `region` of the
 * config. Every class with uses_regions needs a region index of the config;
 * the others ignore it: -1 or, with a config, an index of it. A decoded
 * token: one step (see Time). */
md_status md_policy_append(md_policy *policy, int64_t position, int region, md_error *err);
/* The same for a prompt token: no step (see Time); the same checks. */
md_status md_policy_append_prompt(md_policy *policy, int64_t position, int region,
                                  md_error *err);

/* After the forward pass of the last n_queries appended tokens (1 <=
 * n_queries <= the tokens appended and still cached since the previous
 * observe): received[0 .. n_cached-1] as described under Attention, each
 * finite and >= 0; n_cached must equal md_policy_cached_tokens(). Refuses
 * bad arguments, changing nothing. */
md_status md_policy_observe(md_policy *policy, const float *received, int64_t n_cached,
                            int64_t n_queries, md_error *err);

/* Evicts whole pages until at most budget_pages (>= 0) pages hold cached
 * tokens, as far as the policy allows (see Pages and eviction), removes
 * their tokens from the policy's state and returns their positions
 * ascending in *positions (owned by the policy, valid until its next call)
 * with their count in *n (0: nothing evicted; *positions may then be NULL). */
md_status md_policy_evict(md_policy *policy, int64_t budget_pages, const int64_t **positions,
                          int64_t *n, md_error *err);

int64_t md_policy_cached_tokens(const md_policy *policy);
/* Pages holding at least one cached token. */
int64_t md_policy_cached_pages(const md_policy *policy);
/* The step counter t. */
int64_t md_policy_step(const md_policy *policy);
/* The page size in tokens (the option's, else the config's, else 16). */
int md_policy_page_size(const md_policy *policy);

/* For tests and diagnostics, at the current step: the score of the cached
 * token at `position` (NaN when not cached), and the score of page `page`,
 * the mean of its cached tokens' scores (NaN when none is cached). */
double md_policy_token_score(const md_policy *policy, int64_t position);
double md_policy_page_score(const md_policy *policy, int64_t page);

#endif
