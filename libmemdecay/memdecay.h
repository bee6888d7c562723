/* libmemdecay: the MemDecay KV-cache eviction policies as a C library.
 *
 * A serving engine that keeps a KV cache in pages tells a policy which
 * tokens entered the cache (their original position and their region: the
 * system prompt, the plan, a tool's output, ...), gives it after each
 * forward pass the attention the cached tokens received, and asks it which
 * pages to drop to stay within a budget. The calibrated constants of
 * MemDecay (per region a decay rate and a base priority, pinning, the
 * attention normalisation) come from a memdecay.json written by
 * memdecay-calibrate (memdecay-config(5)), or from values the caller gives.
 *
 * The policies and their formulas are the ones memdecay-runtime(3) states
 * (and which memdecay-calibrate's own eval runs); in short:
 *
 *   - One step = one decoded token; t counts them since the last reset (the
 *     unit of the calibration's rates). A decoded token (append) advances t
 *     and is born at the new step; a prompt token (append_prompt, one of a
 *     prefilled chunk) is born at the current step and t stays.
 *   - After a forward pass over the last n_q appended tokens, received[s]
 *     is, for each cached token s in position order, the column sum over
 *     those queries of each query's softmax row (averaged over heads and
 *     layers). Query j sees v_j = n - n_q + j + 1 tokens. Per observe call:
 *       r_s = received[s] / u_s,  u_s = sum of 1/v_j over the queries that see s
 *       w_s = received[s] / c_s,  c_s = number of the queries that see s
 *       refresh when r_s >= tau (last-refresh step := t),
 *       e := beta e + (1 - beta) r,  e_raw := beta e_raw + (1 - beta) w,
 *       acc := acc + received[s].
 *   - memdecay scores token i of region r
 *       s_i(t) = b_r exp(-lambda_r (t - last refresh of i)) + alpha e_i / kappa,
 *     +infinity in a pinned region; the other policies' scores are in
 *     memdecay-runtime(3).
 *   - Eviction removes whole pages (page = position / page_size); a page's
 *     score is the mean of its cached tokens' scores. Evicting at a budget
 *     of B pages removes exactly the excess over B pages from the evictable
 *     pages, in the policy's order (memdecay: lowest page score first; the
 *     newest token's page and, for the region-aware policies, pages holding
 *     a pinned token are never evictable); when too few are evictable, all
 *     of them go and the cache stays above the budget (not an error). Ties
 *     go oldest page first: every policy is deterministic (random: for a
 *     given seed).
 *
 * ---- Errors ------------------------------------------------------------------
 *
 * Every function that can fail returns a memdecay_status (MEMDECAY_OK = 0)
 * and leaves a one-line message for the calling thread, read with
 * memdecay_last_error(): a file's errors name the file and the field
 * ("memdecay.json: regions.plan.lambda: ..."). A failed call changes
 * nothing (a handle it would have made is set to NULL). Functions that
 * return a value instead of a status say what they return on NULL.
 *
 * ---- Threads -----------------------------------------------------------------
 *
 * A handle is not thread-safe: use each config and each policy from one
 * thread at a time. Different handles may be used on different threads; a
 * config may be shared read-only by policies on several threads once it is
 * no longer changed. The last error is per thread.
 *
 * ---- Versions and ABI ----------------------------------------------------------
 *
 * The library follows semantic versioning; its file is libmemdecay.so.MAJOR.
 * Within one MAJOR version:
 *   - no function is removed and no signature, no enumerator value and no
 *     documented semantics change; every symbol is exported as memdecay_*
 *     only (nothing else of the implementation is visible);
 *   - a MINOR version may add functions, enumerators (a new
 *     memdecay_status value: treat unknown values as errors), policies
 *     (memdecay_policy_list grows) and fields at the end of
 *     memdecay_policy_options (older callers keep working: the struct
 *     carries its size, and an unset field keeps its default);
 *   - a PATCH version changes no interface; scores may differ in the last
 *     bits only where a fix demands it (it says so in its notes).
 * The handles are opaque: their layout may change in any version. A program
 * built against MAJOR.MINOR runs with any MAJOR.MINOR' >= MINOR.
 *
 * Link with `pkg-config --cflags --libs memdecay`. */
#ifndef MEMDECAY_MEMDECAY_H
#define MEMDECAY_MEMDECAY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header. memdecay_version() gives the library's at
 * run time (MAJOR the same; MINOR at least the header's for a program
 * built against it). */
#define MEMDECAY_VERSION_MAJOR 1
#define MEMDECAY_VERSION_MINOR 0
#define MEMDECAY_VERSION_PATCH 0
#define MEMDECAY_VERSION_STRING "1.0.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH, for comparisons in #if. */
#define MEMDECAY_VERSION_NUMBER \
  (MEMDECAY_VERSION_MAJOR * 10000 + MEMDECAY_VERSION_MINOR * 100 + MEMDECAY_VERSION_PATCH)

/* The library's version at run time, as MEMDECAY_VERSION_NUMBER. */
int memdecay_version(void);
/* The library's version at run time, as MEMDECAY_VERSION_STRING. */
const char *memdecay_version_string(void);

/* ---- errors ----------------------------------------------------------------- */

typedef enum memdecay_status {
  MEMDECAY_OK = 0,
  MEMDECAY_E_IO = 1,          /* a file could not be opened or read */
  MEMDECAY_E_FORMAT = 2,      /* a file is malformed (syntax, a missing field, a wrong type) */
  MEMDECAY_E_INVALID = 3,     /* an argument or value is out of range (a NULL handle too) */
  MEMDECAY_E_UNSUPPORTED = 4, /* well-formed input this version does not handle */
  MEMDECAY_E_NOMEM = 5,       /* an allocation failed */
  MEMDECAY_E_INTERNAL = 6,    /* anything else (a fault of the library) */
} memdecay_status;

/* The message of the last call that failed on the calling thread ("" when
 * none has): one line, naming the file and field where a file was at
 * fault. Valid until the next failing call on this thread; successful calls
 * leave it as it is. Never NULL. */
const char *memdecay_last_error(void);
/* A short name of a status ("ok", "I/O error", "format error", ...); never
 * NULL ("unknown status" for a value this version does not know). */
const char *memdecay_status_name(memdecay_status status);

/* ---- the config --------------------------------------------------------------- */

/* The constants of memdecay.json the policies use: page_size, tau,
 * ewma_beta, alpha, kappa, the pooled decay rate (optional) and the regions
 * in file order (a region's index is its place in that order). */
typedef struct memdecay_config memdecay_config;

/* Loads policy.{page_size, tau, ewma_beta, alpha, attention_norm.kappa},
 * regions.NAME.{pinned, base_priority, lambda} and, when present,
 * pooled.lambda of the memdecay.json at `path` into a new config.
 * Refused (the message names the file and the field, "PATH:LINE:COLUMN"
 * for a syntax error): a missing file (MEMDECAY_E_IO), a field missing or
 * of the wrong type (MEMDECAY_E_FORMAT), a value out of the ranges of
 * memdecay_config_new and memdecay_config_add_region, a null alpha or
 * kappa, a null lambda on an unpinned region, a lambda that contradicts
 * its half_life (MEMDECAY_E_INVALID). On failure *config is NULL. */
memdecay_status memdecay_config_load(const char *path, memdecay_config **config);

/* A new config with no regions, from values: page_size >= 1 (tokens per
 * page), tau finite and > 0 (the refresh threshold, in uniform-relative
 * attention), ewma_beta in [0, 1), alpha finite and >= 0 (the weight of the
 * attention term), kappa finite and > 0 (the attention normalisation).
 * Values out of range are refused, naming the field ("policy.tau: ..."). */
memdecay_status memdecay_config_new(int page_size, double tau, double ewma_beta, double alpha,
                                    double kappa, memdecay_config **config);

/* Appends region `name` (non-empty, not yet in the config) with its index
 * the number of regions before it: pinned (nonzero: its tokens are never
 * evicted by the region-aware policies), base_priority in [0, 1] and
 * lambda, its decay rate per step, finite and >= 0 (NAN allowed on a
 * pinned region, which needs none). Refused values name the field
 * ("regions.NAME.lambda: ..."), and leave the config as it was. */
memdecay_status memdecay_config_add_region(memdecay_config *config, const char *name, int pinned,
                                           double base_priority, double lambda);

/* Sets the pooled decay rate (pooled.lambda of memdecay.json: one fit of
 * every unpinned region's lifetimes together), finite and >= 0; only the
 * policy memdecay-shared needs it. */
memdecay_status memdecay_config_set_pooled_lambda(memdecay_config *config, double lambda);

/* Frees a config (NULL: nothing). Policies made from it keep their own
 * copy: it may be freed while they live. */
void memdecay_config_free(memdecay_config *config);

/* The config's page size in tokens; -1 for a NULL config. */
int memdecay_config_page_size(const memdecay_config *config);
/* How many regions the config has; 0 for a NULL config. */
size_t memdecay_config_region_count(const memdecay_config *config);
/* The index of region `name` (exact, case-sensitive), or -1 when the
 * config has none of that name (or an argument is NULL). */
int memdecay_config_region_index(const memdecay_config *config, const char *name);
/* The name of region `index`, owned by the config; NULL when out of range. */
const char *memdecay_config_region_name(const memdecay_config *config, size_t index);
/* Region `index`'s pinning (0 or 1), base priority and decay rate (NAN
 * when null) into the pointers that are not NULL. */
memdecay_status memdecay_config_region_info(const memdecay_config *config, size_t index,
                                            int *pinned, double *base_priority, double *lambda);

/* ---- the policies --------------------------------------------------------------- */

/* The name of policy `index` of the library's table (0, 1, ... in the order
 * memdecay-calibrate's eval runs them), NULL past the end: full, random,
 * streaming, h2o, snapkv, tova, memdecay, memdecay's ablations and
 * streaming-pinned (memdecay-runtime(3) describes each). Owned by the
 * library. */
const char *memdecay_policy_list(size_t index);
/* A one-line description of policy `name`; NULL when there is none. */
const char *memdecay_policy_describe(const char *name);
/* 1 when policy `name` reads the config's regions (memdecay, its
 * ablations, streaming-pinned: they need a config, and every token a
 * region of it), 0 when not, -1 when there is no such policy. */
int memdecay_policy_uses_regions(const char *name);

/* Options of memdecay_policy_new. Initialise with
 * MEMDECAY_POLICY_OPTIONS_INIT (sets `size`; every other field 0: the
 * default), then set what differs. `size` lets a later minor version add
 * fields at the end without breaking a program built against this one. */
typedef struct memdecay_policy_options {
  size_t size;            /* sizeof(memdecay_policy_options), set by the INIT macro */
  int page_size;          /* 0: the config's page_size (16 without a config); else >= 1 */
  uint64_t seed;          /* random's generator seed */
  int sink_tokens;        /* streaming, streaming-pinned: tokens kept as sinks; 0 = 4 */
  int observation_window; /* snapkv: W, observe calls in its window; 0 = 32 */
  int pool_kernel;        /* snapkv: K, the pool's width in positions, odd; 0 = 7; 1: none */
} memdecay_policy_options;

#define MEMDECAY_POLICY_OPTIONS_INIT {sizeof(memdecay_policy_options), 0, 0, 0, 0, 0}

typedef struct memdecay_policy memdecay_policy;

/* A new policy `name` (memdecay_policy_list) for one sequence: no tokens,
 * t = 0. `config` may be NULL for a policy that does not read regions
 * (memdecay_policy_uses_regions); the others need it. `options` may be NULL
 * (every default). The policy copies what it needs of the config. Refused:
 * an unknown name (the message lists the known ones), a region-aware policy
 * without a config, negative options, an even pool_kernel, memdecay-shared
 * with a config without a pooled decay rate. */
memdecay_status memdecay_policy_new(const char *name, const memdecay_config *config,
                                    const memdecay_policy_options *options,
                                    memdecay_policy **policy);
/* Frees a policy (NULL: nothing) and the positions it returned. */
void memdecay_policy_free(memdecay_policy *policy);
/* The policy's name; NULL for a NULL policy. */
const char *memdecay_policy_name(const memdecay_policy *policy);
/* The page size in tokens the policy works with; -1 for a NULL policy. */
int memdecay_policy_page_size(const memdecay_policy *policy);

/* Forgets every token and every statistic (a new sequence: t = 0, no sink
 * seen, no attention observed) and reseeds random with `seed`. */
memdecay_status memdecay_policy_reset(memdecay_policy *policy, uint64_t seed);

/* Token at original position `position` enters the cache, in region
 * `region` (an index of the config). Positions start at 0 or later and
 * increase strictly since the last reset. A policy that reads regions
 * needs a region index of its config; the others accept -1 (no region)
 * or, with a config, an index of it. A decoded token: one step (t := t + 1). */
memdecay_status memdecay_policy_append(memdecay_policy *policy, int64_t position, int region);
/* The same for a prompt token (prefilled as part of a chunk): born at the
 * current step, t unchanged. Feed a prompt through this and what the model
 * decodes through memdecay_policy_append: the decay counts decode steps. */
memdecay_status memdecay_policy_append_prompt(memdecay_policy *policy, int64_t position,
                                              int region);
/* As memdecay_policy_append with the region given by its name in the
 * policy's config; a name the config lacks is refused (the message lists
 * the config's regions). NULL `region` is -1 (no region). */
memdecay_status memdecay_policy_append_named(memdecay_policy *policy, int64_t position,
                                             const char *region);
/* memdecay_policy_append_prompt with the region given by its name. */
memdecay_status memdecay_policy_append_prompt_named(memdecay_policy *policy, int64_t position,
                                                    const char *region);

/* After the forward pass of the last n_queries appended tokens (1 for a
 * decode step; 1 <= n_queries <= the tokens appended and still cached since
 * the previous observe): received[0 .. n_cached - 1], the attention each
 * cached token received in position order as described at the top of this
 * header, each finite and >= 0; n_cached must equal
 * memdecay_policy_cached_tokens(). Updates refresh, the EWMAs and the
 * accumulated attention. Refused arguments change nothing. */
memdecay_status memdecay_policy_observe(memdecay_policy *policy, const float *received,
                                        int64_t n_cached, int64_t n_queries);

/* Evicts whole pages until at most budget_pages (>= 0) pages hold cached
 * tokens, as far as the policy allows, and returns the positions of every
 * token evicted, ascending, in *positions with their count in *n (0:
 * nothing evicted; *positions is then NULL). The array is owned by the
 * policy and valid until its next call; the caller drops those tokens from
 * its KV cache. positions and n must not be NULL. */
memdecay_status memdecay_policy_evict(memdecay_policy *policy, int64_t budget_pages,
                                      const int64_t **positions, int64_t *n);

/* Tokens in the cache; -1 for a NULL policy. */
int64_t memdecay_policy_cached_tokens(const memdecay_policy *policy);
/* Pages holding at least one cached token; -1 for a NULL policy. */
int64_t memdecay_policy_cached_pages(const memdecay_policy *policy);
/* The step counter t (decoded tokens appended since the last reset); -1
 * for NULL. */
int64_t memdecay_policy_step(const memdecay_policy *policy);

/* For diagnostics, at the current step: the score of the cached token at
 * `position` (+infinity for memdecay's pinned tokens; 0 for every token of
 * a policy that ranks by position only: full, random, streaming,
 * streaming-pinned), NAN when the token is not cached or the policy NULL. */
double memdecay_policy_token_score(const memdecay_policy *policy, int64_t position);
/* The score of page `page` (positions page * page_size ... + page_size -
 * 1): the mean of its cached tokens' scores; NAN when none is cached. */
double memdecay_policy_page_score(const memdecay_policy *policy, int64_t page);

#ifdef __cplusplus
}
#endif

#endif
