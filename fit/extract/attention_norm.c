/* Base priorities, kappa and alpha: the estimators are stated in
 * fit/extract/attention_norm.h. */
#include "fit/extract/attention_norm.h"

#include <gsl/gsl_sort_double.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fit/regions/region_fits.h"

/* Histogram keys: the top 20 bits of a non-negative double (sign, 11 exponent
 * bits, 8 mantissa bits), which order such doubles as their values do. */
#define KEY_SHIFT 44
#define KEY_BUCKETS ((size_t)1 << 19)

typedef struct region_acc {
  uint64_t tokens, observed, refreshed, pairs;
  double sum;
  size_t curve_length, curve_capacity;
  double *curve_sum;      /* [curve_capacity] */
  uint64_t *curve_pairs;  /* [curve_capacity] */
} region_acc;

struct md_attn_norm {
  md_region_table regions;
  md_attn_norm_params params;
  int pass;                 /* 1, 2, or 3 once the passes are over */
  region_acc *region;       /* [regions.n] */
  double *ewma;             /* scratch for one token */
  size_t ewma_capacity;
  uint64_t *histogram;      /* [KEY_BUCKETS] first-pass counts of EWMA values */
  uint64_t samples;         /* N, from the first pass */
  uint64_t second_samples;  /* the same count, from the second pass */
  double *stored;           /* first-pass values while they fit in memory_bytes */
  size_t n_stored, stored_capacity;
  bool store_overflowed;
  uint32_t bracket_lo, bracket_hi;  /* buckets holding order statistics j, j+1 */
  uint64_t bracket_below;           /* values in buckets below bracket_lo */
  double *bracket;                  /* values inside the bracket */
  size_t n_bracket, bracket_expected;
  md_kappa_status kappa_status;
  double kappa;
};

md_status md_attn_norm_params_check(const md_attn_norm_params *params, md_error *err) {
  if (!params) return md_fail(err, MD_E_INVALID, "attention normalisation: no parameters");
  if (!(params->ewma_beta >= 0.0 && params->ewma_beta < 1.0))
    return md_fail(err, MD_E_INVALID, "ewma_beta = %g: must lie in [0, 1)", params->ewma_beta);
  if (!(params->quantile > 0.0 && params->quantile < 1.0))
    return md_fail(err, MD_E_INVALID, "kappa quantile = %g: must lie in (0, 1)",
                   params->quantile);
  return MD_OK;
}

const char *md_kappa_status_message(md_kappa_status status) {
  switch (status) {
    case MD_KAPPA_OK: return "";
    case MD_KAPPA_NO_DATA:
      return "kappa not estimable: no unpinned token was observed (every region is pinned or empty)";
    case MD_KAPPA_ZERO:
      return "kappa not estimable: the quantile of the attention EWMA over unpinned tokens is 0";
  }
  return "kappa: unknown status";
}

md_status md_attn_norm_new(const md_region_table *regions, const md_attn_norm_params *params,
                           md_attn_norm **out, md_error *err) {
  *out = NULL;
  md_status status = md_attn_norm_params_check(params, err);
  if (status != MD_OK) return status;
  if (!regions || regions->n == 0 || !regions->names || !regions->pinned)
    return md_fail(err, MD_E_INVALID, "attention normalisation: the region table is empty");
  md_attn_norm *acc = calloc(1, sizeof *acc);
  if (!acc) return md_fail(err, MD_E_NOMEM, "attention normalisation: out of memory");
  acc->regions = *regions;
  acc->params = *params;
  acc->pass = 1;
  acc->region = calloc(regions->n, sizeof *acc->region);
  acc->histogram = calloc(KEY_BUCKETS, sizeof *acc->histogram);
  if (!acc->region || !acc->histogram) {
    md_attn_norm_free(acc);
    return md_fail(err, MD_E_NOMEM, "attention normalisation: out of memory");
  }
  *out = acc;
  return MD_OK;
}

void md_attn_norm_free(md_attn_norm *acc) {
  if (!acc) return;
  for (size_t r = 0; acc->region && r < acc->regions.n; r++) {
    free(acc->region[r].curve_sum);
    free(acc->region[r].curve_pairs);
  }
  free(acc->region);
  free(acc->ewma);
  free(acc->histogram);
  free(acc->stored);
  free(acc->bracket);
  free(acc);
}

void md_ewma(const double *x, size_t n, double beta, double *e) {
  double previous = 0.0;
  for (size_t k = 0; k < n; k++) {
    previous = beta * previous + (1.0 - beta) * x[k];
    e[k] = previous;
  }
}

static uint32_t histogram_key(double value) {
  uint64_t bits;
  memcpy(&bits, &value, sizeof bits);
  return (uint32_t)(bits >> KEY_SHIFT);
}

static md_status grow_curve(region_acc *region, size_t length, md_error *err) {
  if (length <= region->curve_capacity) return MD_OK;
  size_t capacity = region->curve_capacity ? region->curve_capacity : 64;
  while (capacity < length) capacity *= 2;
  double *sum = realloc(region->curve_sum, capacity * sizeof *sum);
  if (sum) region->curve_sum = sum;
  uint64_t *pairs = realloc(region->curve_pairs, capacity * sizeof *pairs);
  if (pairs) region->curve_pairs = pairs;
  if (!sum || !pairs) return md_fail(err, MD_E_NOMEM, "attention normalisation: out of memory");
  size_t old = region->curve_capacity;
  memset(sum + old, 0, (capacity - old) * sizeof *sum);
  memset(pairs + old, 0, (capacity - old) * sizeof *pairs);
  region->curve_capacity = capacity;
  return MD_OK;
}

static md_status add_region_stats(region_acc *region, const double *relative_attention,
                                  size_t n_ages, bool observed, bool refreshed, md_error *err) {
  md_status status = grow_curve(region, n_ages, err);
  if (status != MD_OK) return status;
  region->tokens++;
  region->observed += observed;
  region->refreshed += observed && refreshed;
  region->pairs += n_ages;
  for (size_t k = 0; k < n_ages; k++) {
    region->sum += relative_attention[k];
    region->curve_sum[k] += relative_attention[k];
    region->curve_pairs[k]++;
  }
  if (n_ages > region->curve_length) region->curve_length = n_ages;
  return MD_OK;
}

/* Keeps the first-pass values while they fit; drops them all at the limit. */
static md_status store_values(md_attn_norm *acc, const double *values, size_t n, md_error *err) {
  if (acc->store_overflowed) return MD_OK;
  size_t limit = acc->params.memory_bytes / sizeof(double);
  if (n > limit - acc->n_stored) {
    free(acc->stored);
    acc->stored = NULL;
    acc->n_stored = acc->stored_capacity = 0;
    acc->store_overflowed = true;
    return MD_OK;
  }
  if (acc->n_stored + n > acc->stored_capacity) {
    size_t capacity = acc->stored_capacity ? acc->stored_capacity : 4096;
    while (capacity < acc->n_stored + n) capacity *= 2;
    if (capacity > limit) capacity = limit;
    double *grown = realloc(acc->stored, capacity * sizeof *grown);
    if (!grown) return md_fail(err, MD_E_NOMEM, "attention normalisation: out of memory");
    acc->stored = grown;
    acc->stored_capacity = capacity;
  }
  memcpy(acc->stored + acc->n_stored, values, n * sizeof *values);
  acc->n_stored += n;
  return MD_OK;
}

static md_status collect_bracket(md_attn_norm *acc, const double *values, size_t n,
                                 md_error *err) {
  for (size_t k = 0; k < n; k++) {
    uint32_t key = histogram_key(values[k]);
    if (key < acc->bracket_lo || key > acc->bracket_hi) continue;
    if (acc->n_bracket == acc->bracket_expected)
      return md_fail(err, MD_E_INVALID,
                     "attention normalisation: the second pass holds more values near the "
                     "kappa quantile than the first: feed the same tokens in both passes");
    acc->bracket[acc->n_bracket++] = values[k];
  }
  return MD_OK;
}

static md_status check_token(const md_attn_norm *acc, size_t region,
                             const double *relative_attention, size_t n_ages, md_error *err) {
  if (acc->pass > 2)
    return md_fail(err, MD_E_INVALID, "attention normalisation: token added after the last pass");
  if (region >= acc->regions.n)
    return md_fail(err, MD_E_INVALID, "attention normalisation: region index %zu of %zu",
                   region, acc->regions.n);
  if (n_ages == 0)
    return md_fail(err, MD_E_INVALID, "attention normalisation: a token with no visible step");
  for (size_t k = 0; k < n_ages; k++)
    if (!(relative_attention[k] >= 0.0 && isfinite(relative_attention[k])))
      return md_fail(err, MD_E_INVALID,
                     "attention normalisation: relative attention %g at age %zu: must be a "
                     "finite number >= 0", relative_attention[k], k);
  return MD_OK;
}

static md_status ewma_scratch(md_attn_norm *acc, size_t n, md_error *err) {
  if (n <= acc->ewma_capacity) return MD_OK;
  double *grown = realloc(acc->ewma, n * sizeof *grown);
  if (!grown) return md_fail(err, MD_E_NOMEM, "attention normalisation: out of memory");
  acc->ewma = grown;
  acc->ewma_capacity = n;
  return MD_OK;
}

md_status md_attn_norm_add_token(md_attn_norm *acc, size_t region,
                                 const double *relative_attention, size_t n_ages,
                                 bool observed, bool refreshed, md_error *err) {
  md_status status = check_token(acc, region, relative_attention, n_ages, err);
  if (status != MD_OK) return status;
  if (acc->pass == 1) {
    status = add_region_stats(&acc->region[region], relative_attention, n_ages, observed,
                              refreshed, err);
    if (status != MD_OK) return status;
  }
  if (acc->regions.pinned[region]) return MD_OK;
  status = ewma_scratch(acc, n_ages, err);
  if (status != MD_OK) return status;
  md_ewma(relative_attention, n_ages, acc->params.ewma_beta, acc->ewma);
  if (acc->pass == 2) {
    acc->second_samples += n_ages;
    return collect_bracket(acc, acc->ewma, n_ages, err);
  }
  acc->samples += n_ages;
  for (size_t k = 0; k < n_ages; k++) acc->histogram[histogram_key(acc->ewma[k])]++;
  return store_values(acc, acc->ewma, n_ages, err);
}

/* The buckets holding the 0-based order statistics `lo_rank` and `hi_rank`. */
static void find_bracket(md_attn_norm *acc, uint64_t lo_rank, uint64_t hi_rank) {
  uint64_t below = 0;
  size_t bucket = 0;
  while (below + acc->histogram[bucket] <= lo_rank) below += acc->histogram[bucket++];
  acc->bracket_lo = (uint32_t)bucket;
  acc->bracket_below = below;
  uint64_t through = below + acc->histogram[bucket];
  while (through <= hi_rank) through += acc->histogram[++bucket];
  acc->bracket_hi = (uint32_t)bucket;
  acc->bracket_expected = (size_t)(through - below);
}

/* h = (N - 1) q, j = floor(h): the order statistics j and j+1 are needed. */
static void quantile_ranks(uint64_t n, double q, uint64_t *lo_rank, uint64_t *hi_rank,
                           double *fraction) {
  double h = (double)(n - 1) * q;
  *lo_rank = (uint64_t)h;
  *fraction = h - (double)*lo_rank;
  *hi_rank = *lo_rank + 1 < n ? *lo_rank + 1 : *lo_rank;
}

/* The type-7 interpolation, as R's quantile.default and GSL write it. */
static void select_kappa(md_attn_norm *acc) {
  uint64_t lo_rank, hi_rank;
  double fraction;
  quantile_ranks(acc->samples, acc->params.quantile, &lo_rank, &hi_rank, &fraction);
  gsl_sort(acc->bracket, 1, acc->n_bracket);
  double x_lo = acc->bracket[lo_rank - acc->bracket_below];
  double x_hi = acc->bracket[hi_rank - acc->bracket_below];
  acc->kappa = x_hi == x_lo ? x_lo : (1.0 - fraction) * x_lo + fraction * x_hi;
  acc->kappa_status = acc->kappa > 0.0 ? MD_KAPPA_OK : MD_KAPPA_ZERO;
  if (acc->kappa_status != MD_KAPPA_OK) acc->kappa = 0.0;
}

static md_status end_first_pass(md_attn_norm *acc, bool *need_second_pass, md_error *err) {
  *need_second_pass = false;
  if (acc->samples == 0) {
    acc->kappa_status = MD_KAPPA_NO_DATA;
    acc->pass = 3;
    return MD_OK;
  }
  uint64_t lo_rank, hi_rank;
  double fraction;
  quantile_ranks(acc->samples, acc->params.quantile, &lo_rank, &hi_rank, &fraction);
  find_bracket(acc, lo_rank, hi_rank);
  acc->bracket = malloc(acc->bracket_expected * sizeof *acc->bracket);
  if (!acc->bracket) return md_fail(err, MD_E_NOMEM, "attention normalisation: out of memory");
  if (acc->store_overflowed) {
    *need_second_pass = true;
    acc->pass = 2;
    return MD_OK;
  }
  md_status status = collect_bracket(acc, acc->stored, acc->n_stored, err);
  if (status != MD_OK) return status;
  free(acc->stored);
  acc->stored = NULL;
  select_kappa(acc);
  acc->pass = 3;
  return MD_OK;
}

md_status md_attn_norm_end_pass(md_attn_norm *acc, bool *need_second_pass, md_error *err) {
  *need_second_pass = false;
  if (acc->pass == 1) return end_first_pass(acc, need_second_pass, err);
  if (acc->pass != 2)
    return md_fail(err, MD_E_INVALID, "attention normalisation: the passes are already over");
  if (acc->second_samples != acc->samples || acc->n_bracket != acc->bracket_expected)
    return md_fail(err, MD_E_INVALID,
                   "attention normalisation: the second pass saw %llu EWMA values (%zu near "
                   "the quantile), the first %llu (%zu): feed the same tokens in both passes",
                   (unsigned long long)acc->second_samples, acc->n_bracket,
                   (unsigned long long)acc->samples, acc->bracket_expected);
  select_kappa(acc);
  acc->pass = 3;
  return MD_OK;
}

static md_status region_result(const md_attn_norm *acc, size_t r, md_region_attn_stats *out,
                               md_error *err) {
  const region_acc *region = &acc->region[r];
  out->name = acc->regions.names[r];
  out->pinned = acc->regions.pinned[r];
  out->tokens = region->tokens;
  out->observed_tokens = region->observed;
  out->refreshed_tokens = region->refreshed;
  out->share_defined = region->observed > 0;
  out->refreshed_share =
      out->share_defined ? (double)region->refreshed / (double)region->observed : 0.0;
  out->base_priority = out->pinned ? 1.0 : out->refreshed_share;
  out->visible_pairs = region->pairs;
  out->mean_relative_attention = region->pairs ? region->sum / (double)region->pairs : 0.0;
  out->curve_length = region->curve_length;
  if (region->curve_length == 0) return MD_OK;
  out->curve_mean = malloc(region->curve_length * sizeof *out->curve_mean);
  out->curve_pairs = malloc(region->curve_length * sizeof *out->curve_pairs);
  if (!out->curve_mean || !out->curve_pairs)
    return md_fail(err, MD_E_NOMEM, "attention normalisation: out of memory");
  for (size_t k = 0; k < region->curve_length; k++) {
    out->curve_pairs[k] = region->curve_pairs[k];
    out->curve_mean[k] = region->curve_sum[k] / (double)region->curve_pairs[k];
  }
  return MD_OK;
}

static md_status alpha_result(md_attn_norm_result *result, md_error *err) {
  double *shares = malloc(result->n_regions * sizeof *shares);
  if (!shares) return md_fail(err, MD_E_NOMEM, "attention normalisation: out of memory");
  size_t n = 0;
  for (size_t r = 0; r < result->n_regions; r++)
    if (!result->regions[r].pinned && result->regions[r].share_defined)
      shares[n++] = result->regions[r].refreshed_share;
  result->alpha_regions = n;
  result->alpha_defined = n > 0;
  md_status status = n > 0 ? md_regions_alpha(shares, n, &result->alpha, err) : MD_OK;
  free(shares);
  return status;
}

md_status md_attn_norm_finish(const md_attn_norm *acc, md_attn_norm_result *result,
                              md_error *err) {
  memset(result, 0, sizeof *result);
  if (acc->pass != 3)
    return md_fail(err, MD_E_INVALID, "attention normalisation: %s",
                   acc->pass == 1 ? "the first pass is not ended"
                                  : "kappa needs the second pass over the tokens");
  result->regions = calloc(acc->regions.n, sizeof *result->regions);
  if (!result->regions) return md_fail(err, MD_E_NOMEM, "attention normalisation: out of memory");
  result->n_regions = acc->regions.n;
  result->ewma_beta = acc->params.ewma_beta;
  result->quantile = acc->params.quantile;
  result->kappa_samples = acc->samples;
  result->kappa_status = acc->kappa_status;
  result->kappa = acc->kappa;
  result->passes = acc->store_overflowed ? 2 : 1;
  md_status status = MD_OK;
  for (size_t r = 0; r < acc->regions.n && status == MD_OK; r++)
    status = region_result(acc, r, &result->regions[r], err);
  if (status == MD_OK) status = alpha_result(result, err);
  if (status != MD_OK) md_attn_norm_result_free(result);
  return status;
}

void md_attn_norm_result_free(md_attn_norm_result *result) {
  if (!result) return;
  for (size_t r = 0; result->regions && r < result->n_regions; r++) {
    free(result->regions[r].curve_mean);
    free(result->regions[r].curve_pairs);
  }
  free(result->regions);
  memset(result, 0, sizeof *result);
}
