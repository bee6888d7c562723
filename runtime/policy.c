/* The engine of the eviction policies of runtime/policy.h: what every policy
 * shares. Token state lives in parallel arrays in position order (= the
 * engine's slot order); an eviction compacts them in one pass. Pages are the
 * runs of equal position / page_size in that order, rebuilt per evict call
 * (O(cached)). What differs between policies (score, the order pages go,
 * state of their own) is each one's class (runtime/policy_class.h), in
 * runtime/policies/. */
#include "runtime/policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/policy_defaults.h"
#include "io/formats/config.h"
#include "runtime/policy_class.h"

/* ---- the config ------------------------------------------------------------- */

/* The half-life is lambda's summary (ln 2 / lambda): one that contradicts
 * lambda by more than 1% (more than rounding to three digits) means the file
 * was edited inconsistently. */
static bool contradicts_half_life(double lambda, double half_life) {
  return isfinite(half_life) && half_life > 0 && isfinite(lambda) && lambda >= 0 &&
         !(fabs(lambda * half_life / log(2.0) - 1.0) <= 0.01);
}

/* The ranges of md_policy_config. `where` prefixes every message: "PATH: "
 * when loading a file, "" for a config built in memory. */
static md_status check_config(const md_policy_config *c, const char *where, md_error *err) {
  if (c->page_size < 1) {
    return md_fail(err, MD_E_INVALID, "%spolicy.page_size: %d is not a positive integer", where,
                   c->page_size);
  }
  if (!(isfinite(c->tau) && c->tau > 0)) {
    return md_fail(err, MD_E_INVALID, "%spolicy.tau: %g is not a positive number", where, c->tau);
  }
  if (!(c->ewma_beta >= 0 && c->ewma_beta < 1)) {
    return md_fail(err, MD_E_INVALID, "%spolicy.ewma_beta: %g is not in [0, 1)", where,
                   c->ewma_beta);
  }
  if (isnan(c->alpha)) {
    return md_fail(err, MD_E_INVALID,
                   "%spolicy.alpha: null (not estimable in the calibration); memdecay needs it",
                   where);
  }
  if (!(isfinite(c->alpha) && c->alpha >= 0)) {
    return md_fail(err, MD_E_INVALID, "%spolicy.alpha: %g is not a number >= 0", where, c->alpha);
  }
  if (isnan(c->kappa)) {
    return md_fail(err, MD_E_INVALID,
                   "%spolicy.attention_norm.kappa: null (not estimable in the calibration); "
                   "memdecay needs it", where);
  }
  if (!(isfinite(c->kappa) && c->kappa > 0)) {
    return md_fail(err, MD_E_INVALID, "%spolicy.attention_norm.kappa: %g is not a positive number",
                   where, c->kappa);
  }
  if (c->has_pooled && !isnan(c->pooled_lambda) &&
      !(isfinite(c->pooled_lambda) && c->pooled_lambda >= 0)) {
    return md_fail(err, MD_E_INVALID, "%spooled.lambda: %g is not a number >= 0", where,
                   c->pooled_lambda);
  }
  if (c->n_regions > 0 && !c->regions) {
    return md_fail(err, MD_E_INVALID, "%sregions: %zu regions but no table", where, c->n_regions);
  }
  for (size_t i = 0; i < c->n_regions; i++) {
    const md_policy_region *r = &c->regions[i];
    const char *name = r->name ? r->name : "?";
    if (!(isfinite(r->base_priority) && r->base_priority >= 0 && r->base_priority <= 1)) {
      return md_fail(err, MD_E_INVALID, "%sregions.%s.base_priority: %g is not a number in [0, 1]",
                     where, name, r->base_priority);
    }
    if (r->pinned) continue;  /* lambda is not needed */
    if (isnan(r->lambda)) {
      return md_fail(err, MD_E_INVALID,
                     "%sregions.%s.lambda: null (not estimable) on an unpinned region; memdecay "
                     "needs a decay rate for it", where, name);
    }
    if (!(isfinite(r->lambda) && r->lambda >= 0)) {
      return md_fail(err, MD_E_INVALID, "%sregions.%s.lambda: %g is not a number >= 0", where,
                     name, r->lambda);
    }
  }
  return MD_OK;
}

md_status md_policy_config_check(const md_policy_config *config, md_error *err) {
  if (!config) return md_fail(err, MD_E_INVALID, "no config");
  return check_config(config, "", err);
}

void md_policy_config_free(md_policy_config *config) {
  if (!config) return;
  for (size_t i = 0; i < config->n_regions; i++) free(config->regions[i].name);
  free(config->regions);
  memset(config, 0, sizeof *config);
}

md_status md_policy_config_load(const char *path, md_policy_config *config, md_error *err) {
  memset(config, 0, sizeof *config);
  md_config_summary summary;
  md_status status = md_config_read_as(path, MD_CONFIG_READ_POLICY, &summary, err);
  if (status != MD_OK) return status;
  md_policy_config c = {
      .page_size = summary.page_size,
      .tau = summary.tau,
      .ewma_beta = summary.ewma_beta,
      .alpha = summary.alpha,
      .kappa = summary.kappa,
      .has_pooled = summary.has_pooled,
      .pooled_lambda = summary.pooled_lambda,
  };
  if (summary.has_pooled &&
      contradicts_half_life(summary.pooled_lambda, summary.pooled_half_life)) {
    md_fail(err, MD_E_INVALID,
            "%s: pooled.lambda: %g contradicts its half_life %g (lambda = ln 2 / half_life = %g)",
            path, summary.pooled_lambda, summary.pooled_half_life,
            log(2.0) / summary.pooled_half_life);
    md_config_summary_free(&summary);
    return MD_E_INVALID;
  }
  c.regions = calloc(summary.n_regions + 1, sizeof *c.regions);
  if (!c.regions) {
    md_config_summary_free(&summary);
    return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  }
  for (size_t i = 0; i < summary.n_regions; i++) {
    md_config_read_region *from = &summary.regions[i];
    const double hl = from->half_life, lambda = from->lambda;
    if (contradicts_half_life(lambda, hl)) {
      md_fail(err, MD_E_INVALID,
              "%s: regions.%s.lambda: %g contradicts its half_life %g (lambda = ln 2 / half_life "
              "= %g)",
              path, from->name, lambda, hl, log(2.0) / hl);
      md_config_summary_free(&summary);
      c.n_regions = i; /* the names moved so far */
      md_policy_config_free(&c);
      return MD_E_INVALID;
    }
    c.regions[i] = (md_policy_region){.name = from->name, .pinned = from->pinned,
                                      .base_priority = from->base_priority,
                                      .lambda = from->lambda};
    from->name = NULL;  /* moved */
  }
  c.n_regions = summary.n_regions;
  md_config_summary_free(&summary);
  char where[1100];
  snprintf(where, sizeof where, "%s: ", path);
  status = check_config(&c, where, err);
  if (status != MD_OK) {
    md_policy_config_free(&c);
    return status;
  }
  *config = c;
  return MD_OK;
}

int md_policy_config_region(const md_policy_config *config, const char *name) {
  for (size_t i = 0; config && name && i < config->n_regions; i++) {
    if (config->regions[i].name && strcmp(config->regions[i].name, name) == 0) return (int)i;
  }
  return -1;
}

/* ---- the policy ------------------------------------------------------------- */

struct md_policy {
  const md_policy_class *cls;
  void *state;             /* the class's, cls->state_size bytes */
  int page_size;
  /* from the config */
  bool has_config;
  size_t n_regions;
  double *b, *lambda;
  bool *pinned;
  double tau, beta, alpha, kappa;
  double pooled_lambda;    /* NaN: none */
  /* tokens, position order */
  int64_t n, cap;
  int64_t *pos;
  int *region;
  int64_t *refresh;
  double *e, *e_raw, *acc;
  /* sequence state */
  int64_t step;
  int64_t last_position;   /* -1: nothing appended since reset */
  int64_t pages;           /* pages holding cached tokens */
  int64_t pending;         /* appended since the last observe and still cached */
  int64_t first_pending;   /* position of the first of them */
  /* scratch */
  md_policy_page *runs;
  int64_t runs_cap;
  bool *chosen;            /* [runs] to be evicted by this call */
  int64_t chosen_cap;
  md_policy_candidate *order;
  int64_t order_cap;
  int64_t *removed;
  int64_t removed_cap;
  double *suffix;
  int64_t suffix_cap;
};

static const char *name_of(const md_policy *p) { return p->cls->name; }

/* What the class sees; valid until the token arrays move (an append or an
 * eviction). */
static md_policy_view view_of(const md_policy *p) {
  return (md_policy_view){
      .n = p->n, .position = p->pos, .region = p->region, .refresh = p->refresh, .e = p->e,
      .e_raw = p->e_raw, .acc = p->acc, .step = p->step, .page_size = p->page_size,
      .n_regions = p->n_regions, .base_priority = p->b, .lambda = p->lambda,
      .pinned = p->pinned, .tau = p->tau, .ewma_beta = p->beta, .alpha = p->alpha,
      .kappa = p->kappa, .pooled_lambda = p->pooled_lambda};
}

static md_status grow(void **array, int64_t *cap, int64_t need, size_t size, md_error *err) {
  if (need <= *cap) return MD_OK;
  int64_t new_cap = *cap ? *cap : 64;
  while (new_cap < need) new_cap *= 2;
  void *p = realloc(*array, (size_t)new_cap * size);
  if (!p) return md_fail(err, MD_E_NOMEM, "policy: out of memory");
  *array = p;
  *cap = new_cap;
  return MD_OK;
}

/* The token arrays share one capacity. */
static md_status grow_tokens(md_policy *p, int64_t need, md_error *err) {
  if (need <= p->cap) return MD_OK;
  int64_t new_cap = p->cap ? p->cap * 2 : 256;
  while (new_cap < need) new_cap *= 2;
  size_t n = (size_t)new_cap;
  int64_t *pos = realloc(p->pos, n * sizeof *pos);
  if (pos) p->pos = pos;
  int *region = realloc(p->region, n * sizeof *region);
  if (region) p->region = region;
  int64_t *refresh = realloc(p->refresh, n * sizeof *refresh);
  if (refresh) p->refresh = refresh;
  double *e = realloc(p->e, n * sizeof *e);
  if (e) p->e = e;
  double *e_raw = realloc(p->e_raw, n * sizeof *e_raw);
  if (e_raw) p->e_raw = e_raw;
  double *acc = realloc(p->acc, n * sizeof *acc);
  if (acc) p->acc = acc;
  if (!pos || !region || !refresh || !e || !e_raw || !acc) {
    return md_fail(err, MD_E_NOMEM, "policy: out of memory");
  }
  p->cap = new_cap;
  return MD_OK;
}

void md_policy_reset(md_policy *policy, uint64_t seed) {
  policy->n = 0;
  policy->step = 0;
  policy->last_position = -1;
  policy->pages = 0;
  policy->pending = 0;
  policy->first_pending = 0;
  if (policy->cls->reset) policy->cls->reset(policy->state, seed);
}

void md_policy_free(md_policy *policy) {
  if (!policy) return;
  if (policy->cls->free && policy->state) policy->cls->free(policy->state);
  free(policy->state);
  free(policy->b);
  free(policy->lambda);
  free(policy->pinned);
  free(policy->pos);
  free(policy->region);
  free(policy->refresh);
  free(policy->e);
  free(policy->e_raw);
  free(policy->acc);
  free(policy->runs);
  free(policy->chosen);
  free(policy->order);
  free(policy->removed);
  free(policy->suffix);
  free(policy);
}

const md_policy_class *md_policy_get_class(const md_policy *policy) { return policy->cls; }

md_status md_policy_new(const md_policy_config *config, const md_policy_options *options,
                        md_policy **out, md_error *err) {
  *out = NULL;
  if (!options) return md_fail(err, MD_E_INVALID, "policy: no options");
  const md_policy_class *cls = options->policy;
  if (!cls || !cls->name || !cls->name[0]) {
    return md_fail(err, MD_E_INVALID, "policy: no policy class (or one without a name)");
  }
  const char *name = cls->name;
  if (cls->uses_regions && !config) {
    return md_fail(err, MD_E_INVALID, "policy %s: needs a memdecay.json config", name);
  }
  if (options->page_size < 0) {
    return md_fail(err, MD_E_INVALID, "policy %s: page_size %d is negative", name,
                   options->page_size);
  }
  if (options->sink_tokens < 0) {
    return md_fail(err, MD_E_INVALID, "policy %s: sink_tokens %d is negative", name,
                   options->sink_tokens);
  }
  if (options->observation_window < 0 || options->pool_kernel < 0) {
    return md_fail(err, MD_E_INVALID, "policy %s: observation_window %d or pool_kernel %d is "
                   "negative", name, options->observation_window, options->pool_kernel);
  }
  if (config) {
    md_status status = check_config(config, "", err);
    if (status != MD_OK) return md_error_prefix(err, "policy %s", name);
  }
  md_policy *p = calloc(1, sizeof *p);
  if (!p) return md_fail(err, MD_E_NOMEM, "policy: out of memory");
  p->cls = cls;
  p->page_size = options->page_size ? options->page_size : config ? config->page_size : 16;
  if (config) {
    p->has_config = true;
    p->n_regions = config->n_regions;
    size_t n = config->n_regions + 1;
    p->b = calloc(n, sizeof *p->b);
    p->lambda = calloc(n, sizeof *p->lambda);
    p->pinned = calloc(n, sizeof *p->pinned);
    if (!p->b || !p->lambda || !p->pinned) {
      md_policy_free(p);
      return md_fail(err, MD_E_NOMEM, "policy: out of memory");
    }
    for (size_t i = 0; i < config->n_regions; i++) {
      p->b[i] = config->regions[i].base_priority;
      p->lambda[i] = config->regions[i].lambda;
      p->pinned[i] = config->regions[i].pinned;
    }
    p->tau = config->tau;
    p->beta = config->ewma_beta;
    p->alpha = config->alpha;
    p->kappa = config->kappa;
    p->pooled_lambda = config->has_pooled ? config->pooled_lambda : NAN;
  } else {
    /* h2o and the others need no constants; tau and beta still drive the
     * (unused) refresh and EWMA bookkeeping: the config defaults. */
    p->tau = MD_POLICY_TAU_DEFAULT;
    p->beta = MD_POLICY_EWMA_BETA_DEFAULT;
    p->alpha = 0.0;
    p->kappa = MD_POLICY_KAPPA_DEFAULT;
    p->pooled_lambda = NAN;
  }
  if (cls->state_size > 0 && !(p->state = calloc(1, cls->state_size))) {
    md_policy_free(p);
    return md_fail(err, MD_E_NOMEM, "policy %s: out of memory", name);
  }
  if (cls->init) {
    md_status status = cls->init(p->state, options, config, err);
    if (status != MD_OK) {
      md_policy_free(p);  /* the class's free sees the state init left */
      return md_error_prefix(err, "policy %s", name);
    }
  }
  md_policy_reset(p, options->seed);
  *out = p;
  return MD_OK;
}

/* Both appends: a decoded token advances the clock (`decoded`), a prompt
 * token enters at the current step. */
static md_status append_token(md_policy *p, int64_t position, int region, bool decoded,
                              md_error *err) {
  const char *name = name_of(p);
  if (position < 0 || position <= p->last_position) {
    return md_fail(err, MD_E_INVALID,
                   "policy %s: position %lld after %lld (positions must increase strictly from 0)",
                   name, (long long)position, (long long)p->last_position);
  }
  if (p->cls->uses_regions) {
    if (region < 0 || (size_t)region >= p->n_regions) {
      return md_fail(err, MD_E_INVALID, "policy %s: region %d is not an index of the config's %zu "
                     "regions", name, region, p->n_regions);
    }
  } else if (region < -1 || (p->has_config && region >= 0 && (size_t)region >= p->n_regions)) {
    return md_fail(err, MD_E_INVALID, "policy %s: region %d is neither -1 nor an index of the "
                   "config's %zu regions", name, region, p->n_regions);
  }
  md_status status = grow_tokens(p, p->n + 1, err);
  if (status != MD_OK) return status;
  int64_t page = position / p->page_size;
  if (p->n == 0 || p->pos[p->n - 1] / p->page_size != page) p->pages++;
  if (decoded) p->step++;
  int64_t i = p->n++;
  p->pos[i] = position;
  p->region[i] = region;
  p->refresh[i] = p->step;
  p->e[i] = p->e_raw[i] = p->acc[i] = 0;
  if (p->pending == 0) p->first_pending = position;
  p->pending++;
  p->last_position = position;
  if (p->cls->append) {
    md_policy_view view = view_of(p);
    if ((status = p->cls->append(p->state, &view, err)) != MD_OK)
      return md_error_prefix(err, "policy %s", name);
  }
  return MD_OK;
}

md_status md_policy_append(md_policy *p, int64_t position, int region, md_error *err) {
  return append_token(p, position, region, true, err);
}

md_status md_policy_append_prompt(md_policy *p, int64_t position, int region, md_error *err) {
  return append_token(p, position, region, false, err);
}

md_status md_policy_observe(md_policy *p, const float *received, int64_t n_cached,
                            int64_t n_queries, md_error *err) {
  const char *name = name_of(p);
  if (n_cached != p->n) {
    return md_fail(err, MD_E_INVALID, "policy %s: attention on %lld tokens, but %lld are cached",
                   name, (long long)n_cached, (long long)p->n);
  }
  if (n_queries < 1 || n_queries > p->pending) {
    return md_fail(err, MD_E_INVALID, "policy %s: %lld queries, but %lld tokens were appended "
                   "(and are still cached) since the last observe", name, (long long)n_queries,
                   (long long)p->pending);
  }
  if (n_cached > 0 && !received) return md_fail(err, MD_E_INVALID, "policy %s: no attention", name);
  for (int64_t s = 0; s < n_cached; s++) {
    if (!(isfinite(received[s]) && received[s] >= 0)) {
      return md_fail(err, MD_E_INVALID, "policy %s: received[%lld] = %g is not a number >= 0",
                     name, (long long)s, (double)received[s]);
    }
  }
  md_status status = grow((void **)&p->suffix, &p->suffix_cap, n_queries + 1, sizeof *p->suffix,
                          err);
  if (status != MD_OK) return status;
  /* suffix[k] = sum over the chunk's queries j >= k of 1/v_j, v_j = n - n_q + j + 1:
   * u_s for the token at slot s is suffix[max(s - (n - n_q), 0)]. */
  int64_t first_query = n_cached - n_queries;
  p->suffix[n_queries] = 0;
  for (int64_t k = n_queries - 1; k >= 0; k--) {
    p->suffix[k] = p->suffix[k + 1] + 1.0 / (double)(first_query + k + 1);
  }
  double beta = p->beta;
  for (int64_t s = 0; s < n_cached; s++) {
    int64_t k = s > first_query ? s - first_query : 0;
    double a = received[s];
    double r = a / p->suffix[k];
    double w = a / (double)(n_queries - k);
    if (r >= p->tau) p->refresh[s] = p->step;
    p->e[s] = beta * p->e[s] + (1 - beta) * r;
    p->e_raw[s] = beta * p->e_raw[s] + (1 - beta) * w;
    p->acc[s] += a;
  }
  p->pending = 0;
  if (p->cls->observe) {
    md_policy_view view = view_of(p);
    if ((status = p->cls->observe(p->state, &view, received, n_queries, err)) != MD_OK)
      return md_error_prefix(err, "policy %s", name);
  }
  return MD_OK;
}

/* The score of token i at the current step (the class's; 0 without one). */
static double token_score(const md_policy *p, const md_policy_view *view, int64_t i) {
  return p->cls->score ? p->cls->score(p->state, view, i) : 0;
}

double md_policy_token_score(const md_policy *p, int64_t position) {
  int64_t i = md_policy_position_lower_bound(p->pos, p->n, position);
  if (i >= p->n || p->pos[i] != position) return NAN;
  md_policy_view view = view_of(p);
  return token_score(p, &view, i);
}

double md_policy_page_score(const md_policy *p, int64_t page) {
  if (page < 0 || page > INT64_MAX / p->page_size) return NAN;
  int64_t end = page * p->page_size + p->page_size;
  md_policy_view view = view_of(p);
  double sum = 0;
  int64_t count = 0;
  int64_t first = md_policy_position_lower_bound(p->pos, p->n, page * p->page_size);
  for (int64_t i = first; i < p->n && p->pos[i] < end; i++) {
    sum += token_score(p, &view, i);
    count++;
  }
  return count ? sum / (double)count : NAN;
}

int64_t md_policy_cached_tokens(const md_policy *p) { return p->n; }
int64_t md_policy_cached_pages(const md_policy *p) { return p->pages; }
int64_t md_policy_step(const md_policy *p) { return p->step; }
int md_policy_page_size(const md_policy *p) { return p->page_size; }

/* Builds the pages with their scores; the last one (the newest token's
 * page) is never evictable. */
static md_status build_runs(md_policy *p, const md_policy_view *view, md_error *err) {
  md_status status = grow((void **)&p->runs, &p->runs_cap, p->pages, sizeof *p->runs, err);
  if (status != MD_OK) return status;
  int64_t n_runs = 0;
  bool scored = p->cls->score != NULL, pins = p->cls->uses_regions;
  for (int64_t i = 0; i < p->n;) {
    int64_t page = p->pos[i] / p->page_size;
    md_policy_page *run = &p->runs[n_runs++];
    *run = (md_policy_page){.page = page, .first = i, .evictable = true};
    double sum = 0;
    for (; i < p->n && p->pos[i] / p->page_size == page; i++) {
      run->count++;
      if (pins && p->pinned[p->region[i]]) run->evictable = false;
      if (scored) sum += token_score(p, view, i);
    }
    run->score = run->evictable && scored ? sum / (double)run->count : 0;
  }
  if (n_runs != p->pages) return md_fail(err, MD_E_INVALID, "policy: page count out of step");
  if (n_runs > 0) p->runs[n_runs - 1].evictable = false;
  return MD_OK;
}

static int compare_candidates(const void *a, const void *b) {
  const md_policy_candidate *x = a, *y = b;
  if (x->score < y->score) return -1;
  if (x->score > y->score) return 1;
  return (x->page > y->page) - (x->page < y->page);
}

int64_t md_policy_order_by_score(const md_policy_page *pages, int64_t begin, int64_t end,
                                 md_policy_candidate *order) {
  int64_t n = 0;
  for (int64_t j = begin; j < end; j++) {
    if (pages[j].evictable) order[n++] = (md_policy_candidate){pages[j].score, pages[j].page, j};
  }
  qsort(order, (size_t)n, sizeof *order, compare_candidates);
  return n;
}

md_status md_policy_choose_by_score(void *state, const md_policy_view *view,
                                    const md_policy_page *pages, int64_t n_pages,
                                    int64_t budget_pages, int64_t excess,
                                    md_policy_candidate *order, int64_t *n_order, md_error *err) {
  (void)state, (void)view, (void)budget_pages, (void)excess, (void)err;
  *n_order = md_policy_order_by_score(pages, 0, n_pages, order);
  return MD_OK;
}

md_status md_policy_evict(md_policy *p, int64_t budget_pages, const int64_t **positions,
                          int64_t *n_out, md_error *err) {
  *positions = NULL;
  *n_out = 0;
  const char *name = name_of(p);
  if (budget_pages < 0) {
    return md_fail(err, MD_E_INVALID, "policy %s: budget of %lld pages", name,
                   (long long)budget_pages);
  }
  int64_t excess = p->pages - budget_pages;
  if (excess <= 0 || !p->cls->choose) return MD_OK;
  md_policy_view view = view_of(p);
  md_status status = build_runs(p, &view, err);
  if (status == MD_OK) {
    status = grow((void **)&p->order, &p->order_cap, p->pages, sizeof *p->order, err);
  }
  if (status == MD_OK) {
    status = grow((void **)&p->chosen, &p->chosen_cap, p->pages, sizeof *p->chosen, err);
  }
  if (status != MD_OK) return status;
  const md_policy_page *runs = p->runs;
  int64_t n_runs = p->pages;

  /* Which pages are candidates, in the order they go: the class's choice. */
  int64_t n_cand = 0;
  status = p->cls->choose(p->state, &view, runs, n_runs, budget_pages, excess, p->order, &n_cand,
                          err);
  if (status != MD_OK) return md_error_prefix(err, "policy %s", name);
  if (n_cand < 0 || n_cand > n_runs) {
    return md_fail(err, MD_E_INVALID, "policy %s: chose %lld of %lld pages", name,
                   (long long)n_cand, (long long)n_runs);
  }
  int64_t take = excess < n_cand ? excess : n_cand;
  if (take == 0) return MD_OK;

  /* Mark the chosen pages, then compact the token arrays in one pass. */
  memset(p->chosen, 0, (size_t)n_runs * sizeof *p->chosen);
  int64_t n_removed = 0;
  for (int64_t k = 0; k < take; k++) {
    int64_t j = p->order[k].index;
    if (j < 0 || j >= n_runs || !runs[j].evictable || p->chosen[j]) {
      return md_fail(err, MD_E_INVALID, "policy %s: chose page index %lld of %lld, which is %s",
                     name, (long long)j, (long long)n_runs,
                     j < 0 || j >= n_runs ? "out of range"
                     : p->chosen[j]       ? "chosen twice"
                                          : "not evictable");
    }
    p->chosen[j] = true;
    n_removed += runs[j].count;
  }
  status = grow((void **)&p->removed, &p->removed_cap, n_removed, sizeof *p->removed, err);
  if (status != MD_OK) return status;
  int64_t kept = 0, out = 0;
  for (int64_t j = 0; j < n_runs; j++) {
    const md_policy_page *run = &runs[j];
    bool evict = p->chosen[j];
    for (int64_t i = run->first; i < run->first + run->count; i++) {
      if (evict) {
        p->removed[out++] = p->pos[i];
        if (p->pending > 0 && p->pos[i] >= p->first_pending) p->pending--;
        continue;
      }
      if (kept != i) {
        p->pos[kept] = p->pos[i];
        p->region[kept] = p->region[i];
        p->refresh[kept] = p->refresh[i];
        p->e[kept] = p->e[i];
        p->e_raw[kept] = p->e_raw[i];
        p->acc[kept] = p->acc[i];
      }
      kept++;
    }
  }
  p->n = kept;
  p->pages -= take;
  *positions = p->removed;
  *n_out = out;
  return MD_OK;
}
