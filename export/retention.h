/* The retention mapping: a calibrated memdecay.json plus a request's
 * region-labelled prompt tokens in, the retention settings a serving stack
 * reads out (memdecay-calibrate(1), EXPORT, is the rule for users; this is
 * its one implementation in C, and memdecay.retention in python/ its other:
 * both must give the same settings from the same inputs).
 *
 * Step 1, the setting (P, D) of a region r with base priority b in [0, 1]
 * and half-life h in decode steps (or none), at s milliseconds per step:
 *
 *   P = 100 when r is pinned, else 1 + floor(98 b + 0.5)        (1 .. 99)
 *   D = none when r is pinned, h is none or s is not given,
 *       else max(1, floor(h s + 0.5)) milliseconds
 *
 *   A region keeps its priority for one half-life of its MemDecay prior
 *   (the time over which b exp(-lambda dt) halves), then the stack's
 *   default applies: a step in place of the continuous decay.
 *
 * Step 2, blocks: block k (k = 0 .. ceil(N / B) - 1) holds the tokens
 * [k B, min((k + 1) B, N)) and takes the largest setting among its tokens'
 * regions, settings ordered by P, then by D with none the largest. A block
 * that mixes regions takes the most retained one: alignment never lowers a
 * token's retention.
 *
 * Step 3, ranges: consecutive blocks with equal settings are one range
 * [start, end); starts are multiples of B, ends multiples of B or N, and the
 * ranges cover [0, N) in order without overlap. A range's region (for
 * messages and summaries) is the first region in the config's order that
 * has a token in the range and the range's setting.
 *
 * Step 4, what each stack reads, is the format's (export/format.h). */
#ifndef MD_EXPORT_RETENTION_H
#define MD_EXPORT_RETENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

enum {
  MD_RETENTION_PINNED = 100,   /* P of a pinned region */
  MD_RETENTION_MIN = 1,        /* the lowest P of an unpinned region (b = 0) */
  MD_RETENTION_MAX_UNPINNED = 99, /* the highest (b = 1) */
};

/* D of a setting without expiry. */
#define MD_RETENTION_NO_EXPIRY INT64_C(-1)

/* Durations above this many milliseconds (about 285 years) are refused:
 * every stack's duration type holds them, and nothing larger is meant. */
#define MD_RETENTION_DURATION_MAX_MS 9007199254740992.0 /* 2^53 */

/* What the rule reads of a region of memdecay.json. */
typedef struct md_retention_region {
  const char *name;
  bool pinned;
  double base_priority; /* in [0, 1] */
  double half_life;     /* decode steps > 0; NaN or infinite: none */
} md_retention_region;

typedef struct md_retention_setting {
  int priority;        /* P: 1 .. 100 */
  int64_t duration_ms; /* D: >= 1, or MD_RETENTION_NO_EXPIRY */
} md_retention_setting;

typedef struct md_retention_range {
  size_t start, end;            /* tokens [start, end) */
  md_retention_setting setting;
  size_t region;                /* index of its region (step 3) */
} md_retention_range;

typedef struct md_retention_map {
  size_t prompt_tokens;         /* N */
  size_t block_size;            /* B */
  md_retention_range *ranges;   /* step 3 */
  size_t n_ranges;
  size_t decode_region;         /* index of the region decoded tokens take */
  md_retention_setting decode;  /* its setting */
} md_retention_map;

/* Step 1 for one region. step_ms: milliseconds per decode step, > 0, or NaN
 * when not given (then D is none for every region). Fails (MD_E_INVALID,
 * naming the region) for a base priority outside [0, 1], a half-life <= 0,
 * a step_ms <= 0, or a duration above MD_RETENTION_DURATION_MAX_MS. */
md_status md_retention_setting_of(const md_retention_region *region, double step_ms,
                                  md_retention_setting *out, md_error *err);

/* < 0, 0, > 0 as a is less retained than, as retained as, or more retained
 * than b: by P, then by D with none the largest. */
int md_retention_setting_compare(md_retention_setting a, md_retention_setting b);

/* Steps 1 to 3: token i of the prompt (n_tokens >= 1) is in region
 * regions[token_region[i]]; decoded tokens are in regions[decode_region];
 * blocks hold block_size >= 1 tokens. On failure *out is empty. */
md_status md_retention_map_tokens(const md_retention_region *regions, size_t n_regions,
                                  const size_t *token_region, size_t n_tokens,
                                  size_t decode_region, size_t block_size, double step_ms,
                                  md_retention_map *out, md_error *err);

void md_retention_map_free(md_retention_map *map);

/* The request's one priority for stacks that take one per request (SGLang,
 * Dynamo): the mean over the N prompt tokens of their block's P, rounded
 * half up: floor(sum / N + 0.5), computed in integers as
 * (2 sum + N) / (2 N). */
int md_retention_request_priority(const md_retention_map *map);

#endif
