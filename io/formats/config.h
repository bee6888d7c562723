/* memdecay.json (memdecay-config(5)): the per-region decay rates, base
 * priorities and policy constants a MemDecay runtime loads.
 *
 * The writer builds the document with jansson in a fixed key order, dumps
 * it with JSON_REAL_PRECISION(17) (enough for any double to read back bit
 * for bit) and then rewrites every number in the shortest form that reads
 * back to the same double (base/numfmt.h): exact, deterministic (the same
 * md_config always gives the same bytes) and readable (0.9, not
 * 0.90000000000000002). A number that is not finite is written as
 * null, and the writer appends a line to "warnings" naming every field of
 * that section it wrote as null ("regions.NAME: written as null ...: lambda,
 * half_life, ..."); the caller's own warnings, which come first, say why
 * (by convention they start with the same "regions.NAME:", "tests.logrank:"
 * or "policy:").
 *
 * The reader serves `check` (the comparable quantities) and the reference
 * runtime (runtime/policy.h: the policy constants and each region's lambda);
 * JSON syntax errors carry line and column. */
#ifndef MD_IO_FORMATS_CONFIG_H
#define MD_IO_FORMATS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "base/warnings.h"

#define MD_CONFIG_FORMAT "memdecay-config/1"

/* Every double below may be NaN (or infinite): it is then written as null. */

typedef struct md_config_exponential {
  double lambda;               /* d / T, per decode step */
  double lambda_ci[2];         /* Wald interval on log lambda */
  const char *ci_method;       /* "wald-log" */
  double lambda_ci_profile[2]; /* profile-likelihood interval */
  double loglik;
  double aic;
} md_config_exponential;

typedef struct md_config_weibull {
  double shape;                /* 1 / sigma */
  double scale;                /* exp(mu), decode steps */
  double shape_ci[2];
  double scale_ci[2];
  double loglik;
  double aic;
  double lrt_statistic;        /* 2 (loglik_weibull - loglik_exponential) */
  double lrt_p;                /* chi-square, 1 df */
} md_config_weibull;

typedef struct md_config_km {
  double median;               /* decode steps */
  double median_ci[2];
  const char *band;            /* "log", "log-log" or "plain" */
} md_config_km;

typedef struct md_config_fit {
  size_t n;                    /* input rows */
  double weight;               /* sum of case weights (tokens) */
  double events;               /* weighted observed ends */
  double exposure;             /* sum of w (time - entry), decode steps */
  double ci_level;
  md_config_exponential exponential;
  md_config_weibull weibull;
  md_config_km km;
} md_config_fit;

/* What the collector's calibration sidecar measured for a region; emitted as
 * "measured" only when present. */
typedef struct md_config_region_measured {
  bool present;
  double refreshed_share;          /* share of tokens refreshed at least once */
  double mean_relative_attention;  /* mean uniform-relative attention */
  double tokens;
} md_config_region_measured;

/* Whether the half-life is a property of the tokens or of the observation
 * window (survival/window_check.h); emitted as "identification" only when
 * present. */
typedef struct md_config_identification {
  bool present;
  bool identified;
  const char *reason;               /* NULL when identified; "no-events", "mostly-censored", "window-bound" */
  double window;                    /* decode steps: the longest follow-up */
  double censored_share;
  double half_life_half_window;     /* the half-life with the window cut to half */
} md_config_identification;

typedef struct md_config_region {
  const char *name;
  bool pinned;
  double base_priority;
  const char *base_priority_source; /* "priors-file", "pinned", "measured", "default-prior" */
  double lambda;                    /* = fit.exponential.lambda */
  double half_life;                 /* ln 2 / lambda */
  double half_life_ci[2];           /* mapped from fit.exponential.lambda_ci */
  md_config_identification identification;
  md_config_fit fit;
  md_config_region_measured measured;
} md_config_region;

/* The pooled fit: one exponential fit of the lifetimes of every unpinned
 * region together (memdecay-config(5), POOLED), the single decay rate of a
 * policy without per-region rates (the runtime's memdecay-shared). Emitted
 * as "pooled" only when present. */
typedef struct md_config_pooled {
  bool present;
  size_t n_regions;
  const char *const *regions;       /* the regions pooled, in the config's order */
  double lambda;                    /* = exponential.lambda */
  double half_life;                 /* ln 2 / lambda */
  double half_life_ci[2];           /* mapped from exponential.lambda_ci */
  size_t n;                         /* input rows of those regions */
  double weight, events, exposure;  /* their sums, as md_config_fit's */
  double ci_level;
  md_config_exponential exponential;
} md_config_pooled;

typedef struct md_config_logrank {
  const char *regions[2];           /* pairwise only: the two regions */
  double statistic;                 /* chi-square */
  int df;
  double p;
} md_config_logrank;

typedef struct md_config_tests {
  bool present;                     /* false: "tests" is left out */
  size_t n_regions;                 /* regions in the overall test */
  const char *const *regions;
  md_config_logrank overall;
  size_t n_pairwise;
  const md_config_logrank *pairwise;
} md_config_tests;

typedef struct md_config_attention_norm {
  const char *kind;                 /* "uniform": a_hat = EWMA(a * n_visible) / kappa */
  double kappa;
  double quantile;
} md_config_attention_norm;

typedef struct md_config_policy {
  const char *source;               /* "defaults" or "measured" */
  int page_size;
  double tau;
  double ewma_beta;
  double alpha;
  md_config_attention_norm attention_norm;
} md_config_policy;

/* A traces file the run read (from the calibration sidecar). */
typedef struct md_config_trace {
  const char *path;
  const char *sha256;               /* NULL: null */
} md_config_trace;

typedef struct md_config_workload {
  size_t n_sources;
  const char *const *sources;       /* events files as named on the command line */
  size_t n_traces;                  /* 0: "traces" is left out */
  const md_config_trace *traces;
  size_t rows;
  double weight;
  const char *estimand;             /* NULL: not known, left out */
  double episodes, tokens, decode_steps, tau, guard; /* NaN: not known, left out;
                                     * counts are written as integers */
} md_config_workload;

typedef struct md_config {
  const char *generator_version;
  const char *created;              /* ISO 8601 UTC; NULL leaves it out */
  const char *model_name;           /* NULL: "model": null */
  const char *model_config_sha256;
  md_config_workload workload;
  md_config_policy policy;
  size_t n_regions;
  const md_config_region *regions;
  md_config_pooled pooled;
  md_config_tests tests;
  const md_warnings *warnings;      /* may be NULL */
} md_config;

/* The policy constants used until the collector measures them: page 16,
 * tau 1, EWMA beta 0.9, alpha 0.6, attention_norm uniform with kappa 1
 * (a_hat is plain uniform-relative attention) at quantile 0.95. */
void md_config_policy_defaults(md_config_policy *policy);

/* Serialises `config`; *text is malloc'd, NUL-terminated, ends in '\n'. */
md_status md_config_dump(const md_config *config, char **text, md_error *err);

/* ---- reading (for `check` and the runtime) ---------------------------------- */

typedef struct md_config_read_region {
  char *name;
  bool pinned;
  double base_priority;
  double half_life;        /* NaN for null */
  double half_life_ci[2];  /* NaN for null */
  double lambda;           /* NaN for null (and, read for `check`, when absent or not a number) */
} md_config_read_region;

typedef struct md_config_summary {
  size_t n_regions;
  md_config_read_region *regions; /* in file order */
  double alpha;            /* policy.alpha; NaN when null or absent */
  double kappa;            /* policy.attention_norm.kappa; NaN when null or absent */
  /* Read for the runtime; for `check` they are filled only where they hold
   * the right type (else page_size 0, NaN). */
  int page_size;           /* policy.page_size */
  double tau;              /* policy.tau */
  double ewma_beta;        /* policy.ewma_beta */
  /* "pooled" (absent from configs written before the fit computed it):
   * has_pooled when it is there (for `check`: when it is an object);
   * pooled.lambda and pooled.half_life, NaN for null (for `check`: also
   * when not a number). */
  bool has_pooled;
  double pooled_lambda;
  double pooled_half_life;
} md_config_summary;

/* What the reader insists on. MD_CONFIG_READ_CHECK is exactly what `check`
 * has always validated: a field check does not compare may be absent or of
 * any type. MD_CONFIG_READ_POLICY also requires, with an error naming the
 * field, policy.page_size (an integer), policy.tau and policy.ewma_beta
 * (numbers), policy.alpha, policy.attention_norm.kappa and every
 * regions.NAME.lambda (numbers or null), and of "pooled", which may be
 * absent, that it is an object with lambda and half_life (numbers or null).
 * Ranges and what a null means are the runtime's to judge
 * (runtime/policy.h). */
typedef enum md_config_read_mode {
  MD_CONFIG_READ_CHECK = 0,
  MD_CONFIG_READ_POLICY,
} md_config_read_mode;

/* Reads and validates `path`. Syntax errors: "PATH:LINE:COLUMN: ...";
 * structure errors name the field: "PATH: regions.plan.half_life: ...".
 * md_config_read() is md_config_read_as(..., MD_CONFIG_READ_CHECK, ...). */
md_status md_config_read_as(const char *path, md_config_read_mode mode,
                            md_config_summary *summary, md_error *err);
md_status md_config_read(const char *path, md_config_summary *summary, md_error *err);
void md_config_summary_free(md_config_summary *summary);

#endif
