/* Base priorities and attention-normalisation constants (memdecay-calibrate(1),
 * EXTRACT), accumulated one token at a time over a whole calibration run.
 *
 * Input per token: the region, and the token's uniform-relative attention
 * a_hat_t = a_t * n_t from its time origin o to the end of its episode's
 * window (t = o .. steps-1: o = 0 for prompt tokens, the birth step for
 * decoded tokens), plus what the lifetime extraction decided (observed,
 * refreshed). fit/extract/lifetimes.h produces exactly this; the functions here
 * know nothing of matrices or files.
 *
 * Estimators (stated again in memdecay-calibrate(1)):
 *
 *  - Base priority b_r: the share of region r's *observed* tokens refreshed at
 *    least once (a_hat >= tau at some step that counts as use), pooled over
 *    all episodes (weights = token counts). A token is observed when at least
 *    one step could have refreshed it: every prompt token, and every decoded
 *    token born before the last step (its birth step is its own query, which
 *    never counts as use). A decoded token born at the last step carries no
 *    information and is left out of numerator and denominator. Pinned regions
 *    get base_priority = 1.0; the measured share is reported beside it.
 *
 *  - EWMA of attention: e_t = beta e_{t-1} + (1 - beta) a_hat_t for
 *    t = o .. steps-1 with e_{o-1} = 0. The birth step's self-attention of a
 *    decoded token is included: a runtime's EWMA sees it too.
 *
 *  - kappa: the q-quantile of e_t over every unpinned token and every step
 *    at which it is visible (t >= o), pooled over episodes; the sample
 *    quantile of R's quantile(type = 7) and GSL's
 *    gsl_stats_quantile_from_sorted_data: with the values sorted,
 *    h = (N - 1) q, j = floor(h), kappa = (1 - (h - j)) x[j] + (h - j) x[j+1].
 *    It is exact (not a sketch): see "Memory" below. When there is no
 *    unpinned (token, step) pair kappa is undefined, and when the quantile is
 *    0 it cannot normalise anything: kappa_status says which; kappa is then
 *    reported as 0 and must be written as null with a warning.
 *
 *  - alpha = the median (R's median: mean of the two middle values for an
 *    even count) of the measured shares of the unpinned regions that have at
 *    least one observed token. A token whose EWMA sits at the kappa quantile
 *    has a_hat = e / kappa = 1 and scores alpha * 1, which equals
 *    b_med * exp(0): the score of a fresh token of median priority. Undefined
 *    (alpha_defined false, alpha 0) when no unpinned region has an observed
 *    token. fit computes it again from the config's own priorities (user
 *    priors) with the same function, md_regions_alpha (fit/regions).
 *
 *  - Mean a_hat per region over all visible (token, step) pairs (birth steps
 *    included), and the decay curve: mean a_hat per region at each age
 *    k = t - o (steps since the token's time origin, which for prompt tokens
 *    is the decode step itself), over the pairs of that age. Ages run from 0
 *    to the longest window seen in the region; every age in between has pairs.
 *
 * Memory. The exact quantile needs the order statistics of up to tens of
 * millions of EWMA values. Every value also goes into a fixed histogram keyed
 * by the top bits of its IEEE-754 representation (monotone for values >= 0;
 * 2^19 buckets, relative width 2^-8; 4 MiB). While the values fit in
 * `memory_bytes` (8 bytes each, stored as double) they are kept and the
 * quantile is selected exactly at the end of the first pass. Past that limit
 * the store is dropped, md_attn_norm_end_pass() asks for a second pass over
 * the same tokens, during which only the values in the one or two histogram
 * buckets holding order statistics j and j+1 are kept (in practice well under
 * 1% of them). Either way the selected values are the doubles R computes.
 * Peak memory: 4 MiB + about min(8 N, memory_bytes) in the first pass (the
 * store grows by doubling up to the limit, so a reallocation briefly holds
 * up to 1.5 times it), 4 MiB + 8 bytes per value in the bracket in the
 * second, plus 16 bytes per region and age. Example: 40 episodes of 1,700
 * tokens x 256 steps (15.7 million values): one pass within 126 MiB with the
 * default limit; with memory_bytes = 0, two passes within 6 MiB. The caller
 * (the extract command) rereads every episode for the second pass. */
#ifndef MD_FIT_EXTRACT_ATTENTION_NORM_H
#define MD_FIT_EXTRACT_ATTENTION_NORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/policy_defaults.h"

/* The regions of a run, fixed before the first episode (the manifest lists
 * every token, so all names are known up front). Tokens refer to regions by
 * index. The strings must outlive every object that uses the table. */
typedef struct md_region_table {
  size_t n;
  const char *const *names;  /* [n] */
  const bool *pinned;        /* [n] */
} md_region_table;

typedef struct md_attn_norm_params {
  double ewma_beta;     /* in [0, 1) */
  double quantile;      /* q in (0, 1) */
  size_t memory_bytes;  /* EWMA values kept in the first pass; past it, a second pass */
} md_attn_norm_params;

#define MD_ATTN_NORM_DEFAULT_MEMORY_MIB 256 /* extract --kappa-memory */
#define MD_ATTN_NORM_DEFAULT_MEMORY ((size_t)MD_ATTN_NORM_DEFAULT_MEMORY_MIB << 20)
#define MD_ATTN_NORM_PARAMS_DEFAULT \
  ((md_attn_norm_params){.ewma_beta = MD_POLICY_EWMA_BETA_DEFAULT,              \
                          .quantile = MD_POLICY_NORM_QUANTILE_DEFAULT,          \
                          .memory_bytes = MD_ATTN_NORM_DEFAULT_MEMORY})

md_status md_attn_norm_params_check(const md_attn_norm_params *params, md_error *err);

typedef enum md_kappa_status {
  MD_KAPPA_OK = 0,
  MD_KAPPA_NO_DATA,  /* no unpinned token was visible at any step */
  MD_KAPPA_ZERO,     /* the quantile is 0: a_hat = e / kappa is undefined */
} md_kappa_status;

/* A one-line explanation for the config's warnings ("" for MD_KAPPA_OK). */
const char *md_kappa_status_message(md_kappa_status status);

typedef struct md_region_attn_stats {
  const char *name;            /* the region table's string */
  bool pinned;
  uint64_t tokens;             /* all tokens seen */
  uint64_t observed_tokens;    /* tokens that could have been refreshed */
  uint64_t refreshed_tokens;   /* observed tokens refreshed at least once */
  bool share_defined;          /* observed_tokens > 0 */
  double refreshed_share;      /* refreshed / observed; 0 when !share_defined */
  double base_priority;        /* 1.0 when pinned, else refreshed_share (null if !share_defined) */
  uint64_t visible_pairs;      /* (token, step) pairs with the token visible */
  double mean_relative_attention; /* mean a_hat over them; 0 when none */
  size_t curve_length;         /* ages 0 .. curve_length-1 have pairs */
  double *curve_mean;          /* [curve_length] mean a_hat at each age */
  uint64_t *curve_pairs;       /* [curve_length] pairs at each age */
} md_region_attn_stats;

typedef struct md_attn_norm_result {
  size_t n_regions;
  md_region_attn_stats *regions;  /* [n_regions], in region-table order */
  double ewma_beta;
  double quantile;
  uint64_t kappa_samples;         /* N: unpinned visible (token, step) pairs */
  md_kappa_status kappa_status;
  double kappa;                   /* 0 unless kappa_status == MD_KAPPA_OK */
  bool alpha_defined;
  double alpha;                   /* 0 unless alpha_defined */
  size_t alpha_regions;           /* how many shares the median was taken over */
  int passes;                     /* 1 or 2 */
} md_attn_norm_result;

typedef struct md_attn_norm md_attn_norm;  /* the accumulator; opaque */

/* Copies neither names nor flags: `regions` must outlive the accumulator. */
md_status md_attn_norm_new(const md_region_table *regions, const md_attn_norm_params *params,
                           md_attn_norm **out, md_error *err);
void md_attn_norm_free(md_attn_norm *acc);

/* Adds one token. `relative_attention` holds a_hat at ages 0 .. n_ages-1
 * (n_ages = steps - origin >= 1). In the second pass only the EWMA values
 * are used, and the same tokens must come again (in any order). */
md_status md_attn_norm_add_token(md_attn_norm *acc, size_t region,
                                 const double *relative_attention, size_t n_ages,
                                 bool observed, bool refreshed, md_error *err);

/* Ends a pass over the data. After the first pass, *need_second_pass tells
 * whether the EWMA values outgrew memory_bytes: if so, feed every token again
 * and call this once more (it then sets it false). */
md_status md_attn_norm_end_pass(md_attn_norm *acc, bool *need_second_pass, md_error *err);

/* The estimates, once the passes are done. `result` owns its arrays. */
md_status md_attn_norm_finish(const md_attn_norm *acc, md_attn_norm_result *result,
                              md_error *err);
void md_attn_norm_result_free(md_attn_norm_result *result);

/* e[k] = beta e[k-1] + (1 - beta) x[k], e[-1] = 0, for k < n. */
void md_ewma(const double *x, size_t n, double beta, double *e);

#endif
