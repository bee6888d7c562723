/* memdecay.json (io/formats/config.h, runtime/policy.h): md_config_read in both
 * modes and md_policy_config_load, then a memdecay policy built from it.
 *
 * Invariants: failures are MD_E_FORMAT, MD_E_IO, MD_E_UNSUPPORTED or
 * MD_E_INVALID naming the file, leaving the struct empty; every input the
 * policy loader takes is also taken by both reader modes, with the same
 * regions; a loaded policy config satisfies runtime/policy.h's ranges and
 * md_policy_new accepts it for memdecay and memdecay-raw, and for
 * memdecay-shared when it holds a pooled lambda (a number, not null). */
#include <math.h>

#include "fuzz_util.h"
#include "io/formats/config.h"
#include "runtime/policy.h"
#include "runtime/policy_table.h"

static const unsigned config_failures =
    FUZZ_ST(MD_E_FORMAT) | FUZZ_ST(MD_E_IO) | FUZZ_ST(MD_E_UNSUPPORTED) | FUZZ_ST(MD_E_INVALID);

static void check_summary(const md_config_summary *s) {
  FUZZ_CHECK(s->n_regions == 0 || s->regions);
  for (size_t i = 0; i < s->n_regions; i++) {
    FUZZ_CHECK(s->regions[i].name != NULL);
    for (size_t j = 0; j < i; j++) FUZZ_CHECK(strcmp(s->regions[j].name, s->regions[i].name));
  }
}

static void check_policy(const md_policy_config *p, const md_config_summary *summary) {
  FUZZ_CHECK(p->page_size >= 1);
  FUZZ_CHECK(isfinite(p->tau) && p->tau > 0);
  FUZZ_CHECK(p->ewma_beta >= 0 && p->ewma_beta < 1);
  FUZZ_CHECK(isfinite(p->alpha) && p->alpha >= 0);
  FUZZ_CHECK(isfinite(p->kappa) && p->kappa > 0);
  FUZZ_CHECK(p->n_regions == summary->n_regions);
  for (size_t i = 0; i < p->n_regions; i++) {
    const md_policy_region *r = &p->regions[i];
    FUZZ_CHECK(r->name && !strcmp(r->name, summary->regions[i].name));
    FUZZ_CHECK(md_policy_config_region(p, r->name) == (int)i);
    FUZZ_CHECK(isfinite(r->base_priority) && r->base_priority >= 0);
    FUZZ_CHECK((isfinite(r->lambda) && r->lambda >= 0) || (r->pinned && isnan(r->lambda)));
  }
  FUZZ_CHECK(md_policy_config_region(p, "no such region") == -1);
  FUZZ_CHECK(!p->has_pooled || isnan(p->pooled_lambda) ||
             (isfinite(p->pooled_lambda) && p->pooled_lambda >= 0));
  FUZZ_CHECK(p->has_pooled == summary->has_pooled);
  bool shared = p->has_pooled && !isnan(p->pooled_lambda);
  const char *kinds[] = {"memdecay", "memdecay-raw", "memdecay-shared"};
  for (size_t k = 0; k < (shared ? 3u : 2u); k++) {
    md_policy_options options = {.policy = md_policy_find(kinds[k])};
    FUZZ_CHECK(options.policy != NULL);
    md_policy *policy = NULL;
    md_error err = {0};
    md_status status = md_policy_new(p, &options, &policy, &err);
    FUZZ_CHECK_MSG(status == MD_OK || status == MD_E_NOMEM,
                   "a loaded config is refused by md_policy_new: %s", err.message);
    if (status != MD_OK) continue;
    /* A few steps over region 0 (if any): scores are finite or +inf. */
    if (p->n_regions > 0) {
      for (int64_t pos = 0; pos < 3; pos++)
        FUZZ_CHECK(md_policy_append(policy, pos, 0, &err) == MD_OK);
      float received[3] = {1.0f, 0.5f, 0.25f};
      FUZZ_CHECK(md_policy_observe(policy, received, 3, 1, &err) == MD_OK);
      double score = md_policy_token_score(policy, 0);
      FUZZ_CHECK(!isnan(score));
      const int64_t *positions = NULL;
      int64_t n = 0;
      FUZZ_CHECK(md_policy_evict(policy, 0, &positions, &n, &err) == MD_OK);
      FUZZ_CHECK(n >= 0 && n <= 3);
    }
    md_policy_free(policy);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_input_file(data, size, ".json");
  md_config_summary check, strict;
  md_error err = {0};
  md_status check_status = md_config_read(path, &check, &err);
  if (check_status != MD_OK) {
    fuzz_check_failure(check_status, &err, config_failures, path);
    FUZZ_CHECK(check.n_regions == 0 && check.regions == NULL);
  } else {
    check_summary(&check);
  }
  md_status strict_status = md_config_read_as(path, MD_CONFIG_READ_POLICY, &strict, &err);
  if (strict_status != MD_OK) {
    fuzz_check_failure(strict_status, &err, config_failures, path);
    FUZZ_CHECK(strict.n_regions == 0 && strict.regions == NULL);
  } else {
    check_summary(&strict);
    FUZZ_CHECK_MSG(check_status == MD_OK, "the policy mode takes what the check mode refuses");
    FUZZ_CHECK(strict.n_regions == check.n_regions);
    FUZZ_CHECK(strict.page_size >= 0);
  }
  md_policy_config policy;
  md_status status = md_policy_config_load(path, &policy, &err);
  if (status != MD_OK) {
    fuzz_check_failure(status, &err, config_failures, path);
    FUZZ_CHECK(policy.n_regions == 0 && policy.regions == NULL);
  } else {
    FUZZ_CHECK_MSG(strict_status == MD_OK, "the policy loader takes what its reader refuses");
    check_policy(&policy, &strict);
    md_policy_config_free(&policy);
  }
  if (strict_status == MD_OK) md_config_summary_free(&strict);
  if (check_status == MD_OK) md_config_summary_free(&check);
  return 0;
}
