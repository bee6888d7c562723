/* libmemdecay (libmemdecay/memdecay.h): the public C API as thin wrappers
 * over the reference runtime (runtime/policy.h). What the wrappers add: the
 * handles' own ownership (a config copied into the policy's wrapper, so that
 * regions can be named after the config is freed), the checks of NULL
 * handles, the mapping of md_status onto the public status, and the
 * thread-local last error, so that md_error's layout never reaches the
 * caller. Every formula and range check stays in runtime/. */
#include "libmemdecay/memdecay.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "runtime/policy.h"
#include "runtime/policy_class.h"
#include "runtime/policy_table.h"

/* ---- versions and errors ------------------------------------------------------ */

int memdecay_version(void) { return MEMDECAY_VERSION_NUMBER; }

const char *memdecay_version_string(void) { return MEMDECAY_VERSION_STRING; }

static _Thread_local char last_error[MD_ERROR_MESSAGE_MAX];

const char *memdecay_last_error(void) { return last_error; }

/* The public status of an internal one: the numbers are the API's, not
 * md_status's, so that the runtime may renumber its own. */
static memdecay_status public_status(md_status status) {
  switch (status) {
    case MD_OK: return MEMDECAY_OK;
    case MD_E_IO: return MEMDECAY_E_IO;
    case MD_E_FORMAT: return MEMDECAY_E_FORMAT;
    case MD_E_INVALID: return MEMDECAY_E_INVALID;
    case MD_E_UNSUPPORTED: return MEMDECAY_E_UNSUPPORTED;
    case MD_E_NOMEM: return MEMDECAY_E_NOMEM;
    case MD_E_NUMERIC:
    case MD_E_DEVICE: break;
  }
  return MEMDECAY_E_INTERNAL;
}

/* Records err's message as the thread's last error and returns the public
 * status of `status` (MEMDECAY_OK leaves the last error alone). */
static memdecay_status report(md_status status, const md_error *err) {
  if (status != MD_OK) {
    snprintf(last_error, sizeof last_error, "%s",
             err->message[0] ? err->message : md_status_name(status));
  }
  return public_status(status);
}

static memdecay_status fail(memdecay_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static memdecay_status fail(memdecay_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return status;
}

const char *memdecay_status_name(memdecay_status status) {
  switch (status) {
    case MEMDECAY_OK: return "ok";
    case MEMDECAY_E_IO: return "I/O error";
    case MEMDECAY_E_FORMAT: return "format error";
    case MEMDECAY_E_INVALID: return "invalid argument";
    case MEMDECAY_E_UNSUPPORTED: return "unsupported";
    case MEMDECAY_E_NOMEM: return "out of memory";
    case MEMDECAY_E_INTERNAL: return "internal error";
  }
  return "unknown status";
}

/* ---- the config ----------------------------------------------------------------- */

struct memdecay_config {
  md_policy_config c;
  size_t cap;  /* regions allocated */
};

memdecay_status memdecay_config_load(const char *path, memdecay_config **config) {
  if (!config) return fail(MEMDECAY_E_INVALID, "memdecay_config_load: config is NULL");
  *config = NULL;
  if (!path) return fail(MEMDECAY_E_INVALID, "memdecay_config_load: path is NULL");
  memdecay_config *out = calloc(1, sizeof *out);
  if (!out) return fail(MEMDECAY_E_NOMEM, "%s: out of memory", path);
  md_error err = {0};
  md_status status = md_policy_config_load(path, &out->c, &err);
  if (status != MD_OK) {
    free(out);
    return report(status, &err);
  }
  out->cap = out->c.n_regions;
  *config = out;
  return MEMDECAY_OK;
}

memdecay_status memdecay_config_new(int page_size, double tau, double ewma_beta, double alpha,
                                    double kappa, memdecay_config **config) {
  if (!config) return fail(MEMDECAY_E_INVALID, "memdecay_config_new: config is NULL");
  *config = NULL;
  md_policy_config c = {.page_size = page_size, .tau = tau, .ewma_beta = ewma_beta,
                        .alpha = alpha, .kappa = kappa, .pooled_lambda = NAN};
  md_error err = {0};
  md_status status = md_policy_config_check(&c, &err);
  if (status != MD_OK) return report(status, &err);
  memdecay_config *out = calloc(1, sizeof *out);
  if (!out) return fail(MEMDECAY_E_NOMEM, "memdecay_config_new: out of memory");
  out->c = c;
  *config = out;
  return MEMDECAY_OK;
}

memdecay_status memdecay_config_add_region(memdecay_config *config, const char *name, int pinned,
                                           double base_priority, double lambda) {
  if (!config) return fail(MEMDECAY_E_INVALID, "memdecay_config_add_region: config is NULL");
  if (!name || !name[0]) {
    return fail(MEMDECAY_E_INVALID, "memdecay_config_add_region: the region has no name");
  }
  if (md_policy_config_region(&config->c, name) >= 0) {
    return fail(MEMDECAY_E_INVALID, "regions.%s: the config has that region already", name);
  }
  if (config->c.n_regions == config->cap) {
    size_t cap = config->cap ? 2 * config->cap : 8;
    md_policy_region *grown = realloc(config->c.regions, cap * sizeof *grown);
    if (!grown) return fail(MEMDECAY_E_NOMEM, "regions.%s: out of memory", name);
    config->c.regions = grown;
    config->cap = cap;
  }
  char *copy = strdup(name);
  if (!copy) return fail(MEMDECAY_E_NOMEM, "regions.%s: out of memory", name);
  config->c.regions[config->c.n_regions++] = (md_policy_region){
      .name = copy, .pinned = pinned != 0, .base_priority = base_priority, .lambda = lambda};
  /* The runtime's own range checks, on the config as it would be. */
  md_error err = {0};
  md_status status = md_policy_config_check(&config->c, &err);
  if (status != MD_OK) {
    free(copy);
    config->c.n_regions--;
    return report(status, &err);
  }
  return MEMDECAY_OK;
}

memdecay_status memdecay_config_set_pooled_lambda(memdecay_config *config, double lambda) {
  if (!config) return fail(MEMDECAY_E_INVALID, "memdecay_config_set_pooled_lambda: config is NULL");
  if (!(isfinite(lambda) && lambda >= 0)) {
    return fail(MEMDECAY_E_INVALID, "pooled.lambda: %g is not a number >= 0", lambda);
  }
  config->c.has_pooled = true;
  config->c.pooled_lambda = lambda;
  return MEMDECAY_OK;
}

void memdecay_config_free(memdecay_config *config) {
  if (!config) return;
  md_policy_config_free(&config->c);
  free(config);
}

int memdecay_config_page_size(const memdecay_config *config) {
  return config ? config->c.page_size : -1;
}

size_t memdecay_config_region_count(const memdecay_config *config) {
  return config ? config->c.n_regions : 0;
}

int memdecay_config_region_index(const memdecay_config *config, const char *name) {
  return config ? md_policy_config_region(&config->c, name) : -1;
}

const char *memdecay_config_region_name(const memdecay_config *config, size_t index) {
  return config && index < config->c.n_regions ? config->c.regions[index].name : NULL;
}

memdecay_status memdecay_config_region_info(const memdecay_config *config, size_t index,
                                            int *pinned, double *base_priority, double *lambda) {
  if (!config) return fail(MEMDECAY_E_INVALID, "memdecay_config_region_info: config is NULL");
  if (index >= config->c.n_regions) {
    return fail(MEMDECAY_E_INVALID, "memdecay_config_region_info: region %zu of %zu", index,
                config->c.n_regions);
  }
  const md_policy_region *r = &config->c.regions[index];
  if (pinned) *pinned = r->pinned ? 1 : 0;
  if (base_priority) *base_priority = r->base_priority;
  if (lambda) *lambda = r->lambda;
  return MEMDECAY_OK;
}

/* ---- the policies ----------------------------------------------------------------- */

const char *memdecay_policy_list(size_t index) {
  return index < md_policy_table_count ? md_policy_table[index]->name : NULL;
}

const char *memdecay_policy_describe(const char *name) {
  const md_policy_class *cls = md_policy_find(name);
  return cls ? cls->description : NULL;
}

int memdecay_policy_uses_regions(const char *name) {
  const md_policy_class *cls = md_policy_find(name);
  return cls ? (cls->uses_regions ? 1 : 0) : -1;
}

struct memdecay_policy {
  md_policy *p;
  /* The region names of the config it was made with (for append_named),
   * its own copy: the caller may free the config. */
  size_t n_regions;
  char **region_names;
};

void memdecay_policy_free(memdecay_policy *policy) {
  if (!policy) return;
  md_policy_free(policy->p);
  for (size_t i = 0; i < policy->n_regions; i++) free(policy->region_names[i]);
  free(policy->region_names);
  free(policy);
}

/* "a, b, c": the table's names, for an unknown name's message. */
static void known_policies(char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < md_policy_table_count && used < size; i++) {
    int w = snprintf(out + used, size - used, "%s%s", i ? ", " : "", md_policy_table[i]->name);
    if (w < 0) break;
    used += (size_t)w;
  }
}

memdecay_status memdecay_policy_new(const char *name, const memdecay_config *config,
                                    const memdecay_policy_options *options,
                                    memdecay_policy **policy) {
  if (!policy) return fail(MEMDECAY_E_INVALID, "memdecay_policy_new: policy is NULL");
  *policy = NULL;
  const md_policy_class *cls = md_policy_find(name);
  if (!cls) {
    char known[512];
    known_policies(known, sizeof known);
    return fail(MEMDECAY_E_INVALID, "no policy %s%s%s (known: %s)", name ? "\"" : "(NULL)",
                name ? name : "", name ? "\"" : "", known);
  }
  md_policy_options o = {.policy = cls};
  if (options) {
    /* A caller built against this header has size == sizeof; an older one
     * could not exist (1.0 is the first layout); a newer one's extra fields
     * are features this library lacks: refused unless left at 0. */
    if (options->size < sizeof *options) {
      return fail(MEMDECAY_E_INVALID, "memdecay_policy_new: options.size %zu (want %zu: "
                  "initialise with MEMDECAY_POLICY_OPTIONS_INIT)", options->size, sizeof *options);
    }
    for (size_t i = sizeof *options; i < options->size; i++) {
      if (((const unsigned char *)options)[i] != 0) {
        return fail(MEMDECAY_E_UNSUPPORTED, "memdecay_policy_new: options set fields this "
                    "library (%s) does not know: it is older than the program's header",
                    MEMDECAY_VERSION_STRING);
      }
    }
    o.page_size = options->page_size;
    o.seed = options->seed;
    o.sink_tokens = options->sink_tokens;
    o.observation_window = options->observation_window;
    o.pool_kernel = options->pool_kernel;
  }
  memdecay_policy *out = calloc(1, sizeof *out);
  if (!out) return fail(MEMDECAY_E_NOMEM, "memdecay_policy_new: out of memory");
  if (config && config->c.n_regions > 0) {
    out->region_names = calloc(config->c.n_regions, sizeof *out->region_names);
    if (!out->region_names) {
      free(out);
      return fail(MEMDECAY_E_NOMEM, "memdecay_policy_new: out of memory");
    }
    for (size_t i = 0; i < config->c.n_regions; i++) {
      out->region_names[out->n_regions] = strdup(config->c.regions[i].name);
      if (!out->region_names[out->n_regions]) {
        memdecay_policy_free(out);
        return fail(MEMDECAY_E_NOMEM, "memdecay_policy_new: out of memory");
      }
      out->n_regions++;
    }
  }
  md_error err = {0};
  md_status status = md_policy_new(config ? &config->c : NULL, &o, &out->p, &err);
  if (status != MD_OK) {
    memdecay_policy_free(out);
    return report(status, &err);
  }
  *policy = out;
  return MEMDECAY_OK;
}

const char *memdecay_policy_name(const memdecay_policy *policy) {
  return policy ? md_policy_get_class(policy->p)->name : NULL;
}

int memdecay_policy_page_size(const memdecay_policy *policy) {
  return policy ? md_policy_page_size(policy->p) : -1;
}

memdecay_status memdecay_policy_reset(memdecay_policy *policy, uint64_t seed) {
  if (!policy) return fail(MEMDECAY_E_INVALID, "memdecay_policy_reset: policy is NULL");
  md_policy_reset(policy->p, seed);
  return MEMDECAY_OK;
}

/* The index of region `region` (NULL: -1) of the policy's config, or a
 * refusal that lists the config's regions. */
static memdecay_status region_index(const memdecay_policy *policy, const char *region, int *index) {
  *index = -1;
  if (!region) return MEMDECAY_OK;
  for (size_t i = 0; i < policy->n_regions; i++) {
    if (strcmp(policy->region_names[i], region) == 0) {
      *index = (int)i;
      return MEMDECAY_OK;
    }
  }
  char known[512] = "";
  size_t used = 0;
  for (size_t i = 0; i < policy->n_regions && used < sizeof known; i++) {
    int w = snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
                     policy->region_names[i]);
    if (w < 0) break;
    used += (size_t)w;
  }
  return fail(MEMDECAY_E_INVALID, "policy %s: region \"%s\" is not in the config (%s%s)",
              memdecay_policy_name(policy), region,
              policy->n_regions ? "its regions: " : "it has no regions", known);
}

memdecay_status memdecay_policy_append(memdecay_policy *policy, int64_t position, int region) {
  if (!policy) return fail(MEMDECAY_E_INVALID, "memdecay_policy_append: policy is NULL");
  md_error err = {0};
  return report(md_policy_append(policy->p, position, region, &err), &err);
}

memdecay_status memdecay_policy_append_prompt(memdecay_policy *policy, int64_t position,
                                              int region) {
  if (!policy) return fail(MEMDECAY_E_INVALID, "memdecay_policy_append_prompt: policy is NULL");
  md_error err = {0};
  return report(md_policy_append_prompt(policy->p, position, region, &err), &err);
}

memdecay_status memdecay_policy_append_named(memdecay_policy *policy, int64_t position,
                                             const char *region) {
  if (!policy) return fail(MEMDECAY_E_INVALID, "memdecay_policy_append_named: policy is NULL");
  int index;
  memdecay_status s = region_index(policy, region, &index);
  return s == MEMDECAY_OK ? memdecay_policy_append(policy, position, index) : s;
}

memdecay_status memdecay_policy_append_prompt_named(memdecay_policy *policy, int64_t position,
                                                    const char *region) {
  if (!policy)
    return fail(MEMDECAY_E_INVALID, "memdecay_policy_append_prompt_named: policy is NULL");
  int index;
  memdecay_status s = region_index(policy, region, &index);
  return s == MEMDECAY_OK ? memdecay_policy_append_prompt(policy, position, index) : s;
}

memdecay_status memdecay_policy_observe(memdecay_policy *policy, const float *received,
                                        int64_t n_cached, int64_t n_queries) {
  if (!policy) return fail(MEMDECAY_E_INVALID, "memdecay_policy_observe: policy is NULL");
  md_error err = {0};
  return report(md_policy_observe(policy->p, received, n_cached, n_queries, &err), &err);
}

memdecay_status memdecay_policy_evict(memdecay_policy *policy, int64_t budget_pages,
                                      const int64_t **positions, int64_t *n) {
  if (positions) *positions = NULL;
  if (n) *n = 0;
  if (!policy) return fail(MEMDECAY_E_INVALID, "memdecay_policy_evict: policy is NULL");
  if (!positions || !n) {
    return fail(MEMDECAY_E_INVALID, "memdecay_policy_evict: positions or n is NULL");
  }
  md_error err = {0};
  const int64_t *evicted = NULL;
  int64_t count = 0;
  md_status status = md_policy_evict(policy->p, budget_pages, &evicted, &count, &err);
  if (status != MD_OK) return report(status, &err);
  *positions = count > 0 ? evicted : NULL;
  *n = count;
  return MEMDECAY_OK;
}

int64_t memdecay_policy_cached_tokens(const memdecay_policy *policy) {
  return policy ? md_policy_cached_tokens(policy->p) : -1;
}

int64_t memdecay_policy_cached_pages(const memdecay_policy *policy) {
  return policy ? md_policy_cached_pages(policy->p) : -1;
}

int64_t memdecay_policy_step(const memdecay_policy *policy) {
  return policy ? md_policy_step(policy->p) : -1;
}

double memdecay_policy_token_score(const memdecay_policy *policy, int64_t position) {
  return policy ? md_policy_token_score(policy->p, position) : NAN;
}

double memdecay_policy_page_score(const memdecay_policy *policy, int64_t page) {
  return policy ? md_policy_page_score(policy->p, page) : NAN;
}
