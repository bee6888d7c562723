/* libmemdecay's API (libmemdecay/memdecay.h), through the shared library as
 * a program links it: the version, a hand-worked memdecay example (every
 * expected number derived in the comments from the inputs, independently of
 * the runtime), the golden config, and the error paths: a missing file and
 * a broken field (messages naming the file and the field), a region name
 * the config lacks, NULL handles, a negative budget, unknown policies, bad
 * values and options; a failed call changes nothing; the last error is per
 * thread. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libmemdecay/memdecay.h"
#include "tests/test_util.h"

static int contains(const char *haystack, const char *needle) {
  return haystack && strstr(haystack, needle) != NULL;
}

static char *golden_path(void) {
  static char path[1024];
  const char *root = getenv("MD_SOURCE_ROOT");
  snprintf(path, sizeof path, "%s/data/golden/qwen2-tiny-agent-450.json", root ? root : ".");
  return path;
}

static void test_version(void) {
  CHECK(memdecay_version() == MEMDECAY_VERSION_NUMBER);
  CHECK(strcmp(memdecay_version_string(), MEMDECAY_VERSION_STRING) == 0);
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", MEMDECAY_VERSION_MAJOR, MEMDECAY_VERSION_MINOR,
           MEMDECAY_VERSION_PATCH);
  CHECK(strcmp(want, MEMDECAY_VERSION_STRING) == 0);
  CHECK(strcmp(memdecay_status_name(MEMDECAY_OK), "ok") == 0);
  CHECK(strcmp(memdecay_status_name((memdecay_status)99), "unknown status") == 0);
}

/* Page size 1; "sys" pinned, "doc" with b = 0.5 and lambda = ln 2 / 10
 * (half-life 10 steps); tau 1, beta 0.5, alpha 0.5, kappa 2. */
static void test_hand_example(void) {
  memdecay_config *c = NULL;
  CHECK(memdecay_config_new(1, 1.0, 0.5, 0.5, 2.0, &c) == MEMDECAY_OK && c);
  CHECK(memdecay_config_add_region(c, "sys", 1, 1.0, NAN) == MEMDECAY_OK);
  const double lambda = log(2.0) / 10;
  CHECK(memdecay_config_add_region(c, "doc", 0, 0.5, lambda) == MEMDECAY_OK);
  CHECK(memdecay_config_region_count(c) == 2);
  CHECK(memdecay_config_region_index(c, "doc") == 1);
  CHECK(memdecay_config_region_index(c, "nope") == -1);
  CHECK(strcmp(memdecay_config_region_name(c, 0), "sys") == 0);
  CHECK(memdecay_config_region_name(c, 2) == NULL);
  int pinned = -1;
  double b = -1, l = -1;
  CHECK(memdecay_config_region_info(c, 0, &pinned, &b, &l) == MEMDECAY_OK);
  CHECK(pinned == 1 && b == 1.0 && isnan(l));

  memdecay_policy *p = NULL;
  CHECK(memdecay_policy_new("memdecay", c, NULL, &p) == MEMDECAY_OK && p);
  memdecay_config_free(c);  /* the policy keeps its own copy, names included */
  if (!p) return;
  CHECK(memdecay_policy_page_size(p) == 1);
  CHECK(strcmp(memdecay_policy_name(p), "memdecay") == 0);
  CHECK(memdecay_policy_append_named(p, 0, "sys") == MEMDECAY_OK);  /* t = 1 */
  CHECK(memdecay_policy_append_named(p, 1, "doc") == MEMDECAY_OK);  /* t = 2 */
  CHECK(memdecay_policy_append(p, 2, 1) == MEMDECAY_OK);            /* t = 3 */
  /* One query over 3 tokens: u = 1/3, r = 3 received = 1.5, 1.125, 0.375;
   * tokens 0 and 1 refresh (r >= tau = 1) at t = 3, token 2 was born then;
   * e = (1 - 0.5) r = 0.75, 0.5625, 0.1875. */
  const float received[3] = {0.5f, 0.375f, 0.125f};
  CHECK(memdecay_policy_observe(p, received, 3, 1) == MEMDECAY_OK);
  /* t = 3, dt = 0: s = 0.5 + 0.5 e / 2. */
  CHECK(isinf(memdecay_policy_token_score(p, 0)));
  CHECK_REL(memdecay_policy_token_score(p, 1), 0.5 + 0.140625, 1e-12);
  CHECK_REL(memdecay_policy_token_score(p, 2), 0.5 + 0.046875, 1e-12);
  CHECK(memdecay_policy_append_named(p, 3, "doc") == MEMDECAY_OK);  /* t = 4 */
  /* dt = 1 for tokens 1 and 2: b exp(-lambda) = 0.5 * 2^-0.1; token 3 has
   * e = 0: 0.5. */
  const double decayed = 0.5 * pow(2.0, -0.1);
  CHECK_REL(memdecay_policy_token_score(p, 1), decayed + 0.140625, 1e-12);
  CHECK_REL(memdecay_policy_token_score(p, 2), decayed + 0.046875, 1e-12);
  CHECK_REL(memdecay_policy_page_score(p, 3), 0.5, 1e-12);
  CHECK(isnan(memdecay_policy_token_score(p, 7)));
  CHECK(memdecay_policy_step(p) == 4 && memdecay_policy_cached_pages(p) == 4);
  /* Budget 3: one page goes, the lowest of the evictable pages 1 and 2
   * (page 0 pinned, page 3 the newest): page 2. */
  const int64_t *gone = NULL;
  int64_t n = -1;
  CHECK(memdecay_policy_evict(p, 3, &gone, &n) == MEMDECAY_OK);
  CHECK(n == 1 && gone && gone[0] == 2);
  /* Budget 0: only page 1 is evictable; the cache stays above the budget. */
  CHECK(memdecay_policy_evict(p, 0, &gone, &n) == MEMDECAY_OK);
  CHECK(n == 1 && gone && gone[0] == 1);
  CHECK(memdecay_policy_cached_tokens(p) == 2 && memdecay_policy_cached_pages(p) == 2);
  /* Within budget: nothing, and NULL positions. */
  CHECK(memdecay_policy_evict(p, 2, &gone, &n) == MEMDECAY_OK && n == 0 && gone == NULL);
  CHECK(memdecay_policy_reset(p, 7) == MEMDECAY_OK);
  CHECK(memdecay_policy_step(p) == 0 && memdecay_policy_cached_tokens(p) == 0);
  CHECK(memdecay_policy_append_named(p, 0, "doc") == MEMDECAY_OK);  /* t = 1 */
  /* Prompt tokens do not move the clock: born at t = 1, dt = 0 still. */
  CHECK(memdecay_policy_append_prompt_named(p, 1, "doc") == MEMDECAY_OK);
  CHECK(memdecay_policy_append_prompt(p, 2, 1) == MEMDECAY_OK);
  CHECK(memdecay_policy_step(p) == 1 && memdecay_policy_cached_tokens(p) == 3);
  CHECK_REL(memdecay_policy_token_score(p, 0), 0.5, 1e-12);
  CHECK(memdecay_policy_append_named(p, 3, "doc") == MEMDECAY_OK);  /* t = 2 */
  CHECK_REL(memdecay_policy_token_score(p, 2), decayed, 1e-12);      /* dt = 1 */
  CHECK(memdecay_policy_append_prompt_named(p, 4, "thoughts") == MEMDECAY_E_INVALID);
  CHECK(strstr(memdecay_last_error(), "thoughts") != NULL);
  CHECK(memdecay_policy_append_prompt(NULL, 5, 1) == MEMDECAY_E_INVALID);
  memdecay_policy_free(p);
}

static void test_golden(void) {
  memdecay_config *c = NULL;
  CHECK_MSG(memdecay_config_load(golden_path(), &c) == MEMDECAY_OK, "%s", memdecay_last_error());
  if (!c) return;
  CHECK(memdecay_config_page_size(c) == 16);
  CHECK(memdecay_config_region_count(c) == 7);
  CHECK(memdecay_config_region_index(c, "scratchpad") == 6);
  int pinned = 0;
  CHECK(memdecay_config_region_info(c, 0, &pinned, NULL, NULL) == MEMDECAY_OK && pinned == 1);
  /* Every policy of the list can be made from it. */
  size_t count = 0;
  for (const char *name; (name = memdecay_policy_list(count)); count++) {
    memdecay_policy *p = NULL;
    CHECK_MSG(memdecay_policy_new(name, c, NULL, &p) == MEMDECAY_OK, "%s: %s", name,
              memdecay_last_error());
    CHECK(memdecay_policy_describe(name) != NULL);
    CHECK(memdecay_policy_uses_regions(name) == 0 || memdecay_policy_uses_regions(name) == 1);
    memdecay_policy_free(p);
  }
  CHECK(count >= 7);
  CHECK(memdecay_policy_uses_regions("memdecay") == 1);
  CHECK(memdecay_policy_uses_regions("h2o") == 0);
  CHECK(memdecay_policy_uses_regions("nope") == -1);
  CHECK(memdecay_policy_describe("nope") == NULL);
  memdecay_config_free(c);
}

/* The golden config with the value of the first field `key` after the
   text `after` (NULL: from the start) replaced by `value`: located by name,
   not by the golden's numbers, which change whenever it is regenerated. */
static char *broken_golden(const char *after, const char *key, const char *value) {
  FILE *f = fopen(golden_path(), "rb");
  if (!f) return NULL;
  static char text[1 << 16], out[1 << 16];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  const char *from = after ? strstr(text, after) : text;
  char field[64];
  snprintf(field, sizeof field, "\"%s\": ", key);
  const char *at = from ? strstr(from, field) : NULL;
  if (!at) return NULL;
  const char *begin = at + strlen(field), *end = begin + strcspn(begin, ",}\n");
  snprintf(out, sizeof out, "%.*s%s%s", (int)(begin - text), text, value, end);
  static char path[256];
  snprintf(path, sizeof path, "test_api_broken_%ld.json", (long)getpid());
  f = fopen(path, "wb");
  if (!f) return NULL;
  fputs(out, f);
  fclose(f);
  return path;
}

static void test_config_errors(void) {
  memdecay_config *c = (memdecay_config *)1;
  CHECK(memdecay_config_load("no/such/memdecay.json", &c) == MEMDECAY_E_IO && c == NULL);
  CHECK_MSG(contains(memdecay_last_error(), "no/such/memdecay.json"), "%s", memdecay_last_error());

  char *path = broken_golden(NULL, "kappa", "\"high\"");
  CHECK(path != NULL);
  if (path) {
    c = (memdecay_config *)1;
    CHECK(memdecay_config_load(path, &c) == MEMDECAY_E_FORMAT && c == NULL);
    CHECK_MSG(contains(memdecay_last_error(), path) &&
              contains(memdecay_last_error(), "policy.attention_norm.kappa"), "%s",
              memdecay_last_error());
    remove(path);
  }
  path = broken_golden("\"plan\": {", "lambda", "-1");
  CHECK(path != NULL);
  if (path) {
    CHECK(memdecay_config_load(path, &c) == MEMDECAY_E_INVALID && c == NULL);
    CHECK_MSG(contains(memdecay_last_error(), "regions.plan.lambda"), "%s",
              memdecay_last_error());
    remove(path);
  }

  CHECK(memdecay_config_load(NULL, &c) == MEMDECAY_E_INVALID);
  CHECK(memdecay_config_load(golden_path(), NULL) == MEMDECAY_E_INVALID);
  CHECK(memdecay_config_new(0, 1, 0.9, 0.5, 1, &c) == MEMDECAY_E_INVALID && c == NULL);
  CHECK_MSG(contains(memdecay_last_error(), "policy.page_size"), "%s", memdecay_last_error());
  CHECK(memdecay_config_new(16, 1, 1.0, 0.5, 1, &c) == MEMDECAY_E_INVALID);
  CHECK_MSG(contains(memdecay_last_error(), "policy.ewma_beta"), "%s", memdecay_last_error());
  CHECK(memdecay_config_new(16, 1, 0.9, 0.5, 1, NULL) == MEMDECAY_E_INVALID);

  CHECK(memdecay_config_new(16, 1, 0.9, 0.5, 1, &c) == MEMDECAY_OK);
  CHECK(memdecay_config_add_region(c, "doc", 0, 0.5, -1) == MEMDECAY_E_INVALID);
  CHECK_MSG(contains(memdecay_last_error(), "regions.doc.lambda"), "%s", memdecay_last_error());
  CHECK(memdecay_config_add_region(c, "doc", 0, 1.5, 0.1) == MEMDECAY_E_INVALID);
  CHECK_MSG(contains(memdecay_last_error(), "regions.doc.base_priority"), "%s",
            memdecay_last_error());
  CHECK(memdecay_config_add_region(c, "doc", 0, 0.5, NAN) == MEMDECAY_E_INVALID);
  CHECK(memdecay_config_region_count(c) == 0);  /* refused: unchanged */
  CHECK(memdecay_config_add_region(c, "doc", 0, 0.5, 0.1) == MEMDECAY_OK);
  CHECK(memdecay_config_add_region(c, "doc", 0, 0.5, 0.1) == MEMDECAY_E_INVALID);
  CHECK(memdecay_config_add_region(c, "", 0, 0.5, 0.1) == MEMDECAY_E_INVALID);
  CHECK(memdecay_config_add_region(c, NULL, 0, 0.5, 0.1) == MEMDECAY_E_INVALID);
  CHECK(memdecay_config_region_count(c) == 1);
  CHECK(memdecay_config_set_pooled_lambda(c, -0.5) == MEMDECAY_E_INVALID);
  CHECK_MSG(contains(memdecay_last_error(), "pooled.lambda"), "%s", memdecay_last_error());
  /* memdecay-shared needs the pooled rate. */
  memdecay_policy *p = (memdecay_policy *)1;
  CHECK(memdecay_policy_new("memdecay-shared", c, NULL, &p) == MEMDECAY_E_INVALID && p == NULL);
  CHECK(memdecay_config_set_pooled_lambda(c, 0.05) == MEMDECAY_OK);
  CHECK(memdecay_policy_new("memdecay-shared", c, NULL, &p) == MEMDECAY_OK && p);
  memdecay_policy_free(p);
  CHECK(memdecay_config_region_info(c, 1, NULL, NULL, NULL) == MEMDECAY_E_INVALID);
  memdecay_config_free(c);
}

static void test_policy_errors(void) {
  memdecay_config *c = NULL;
  CHECK(memdecay_config_load(golden_path(), &c) == MEMDECAY_OK);
  memdecay_policy *p = (memdecay_policy *)1;
  CHECK(memdecay_policy_new("lru", c, NULL, &p) == MEMDECAY_E_INVALID && p == NULL);
  CHECK_MSG(contains(memdecay_last_error(), "\"lru\"") &&
            contains(memdecay_last_error(), "memdecay"), "%s", memdecay_last_error());
  CHECK(memdecay_policy_new(NULL, c, NULL, &p) == MEMDECAY_E_INVALID);
  CHECK(memdecay_policy_new("memdecay", NULL, NULL, &p) == MEMDECAY_E_INVALID && p == NULL);
  CHECK_MSG(contains(memdecay_last_error(), "config"), "%s", memdecay_last_error());
  CHECK(memdecay_policy_new("memdecay", c, NULL, NULL) == MEMDECAY_E_INVALID);

  memdecay_policy_options o = MEMDECAY_POLICY_OPTIONS_INIT;
  o.page_size = -1;
  CHECK(memdecay_policy_new("memdecay", c, &o, &p) == MEMDECAY_E_INVALID);
  o = (memdecay_policy_options)MEMDECAY_POLICY_OPTIONS_INIT;
  o.pool_kernel = 4;
  CHECK(memdecay_policy_new("snapkv", NULL, &o, &p) == MEMDECAY_E_INVALID);
  CHECK_MSG(contains(memdecay_last_error(), "pool_kernel"), "%s", memdecay_last_error());
  o = (memdecay_policy_options)MEMDECAY_POLICY_OPTIONS_INIT;
  o.size = 8;
  CHECK(memdecay_policy_new("memdecay", c, &o, &p) == MEMDECAY_E_INVALID);
  /* A newer program's options with a field this library lacks set. */
  struct {
    memdecay_policy_options o;
    int later;
  } newer = {MEMDECAY_POLICY_OPTIONS_INIT, 3};
  newer.o.size = sizeof newer;
  CHECK(memdecay_policy_new("memdecay", c, &newer.o, &p) == MEMDECAY_E_UNSUPPORTED);
  newer.later = 0;
  CHECK(memdecay_policy_new("memdecay", c, &newer.o, &p) == MEMDECAY_OK);
  memdecay_policy_free(p);

  o = (memdecay_policy_options)MEMDECAY_POLICY_OPTIONS_INIT;
  o.page_size = 4;
  CHECK(memdecay_policy_new("memdecay", c, &o, &p) == MEMDECAY_OK && p);
  memdecay_config_free(c);
  if (!p) return;
  CHECK(memdecay_policy_page_size(p) == 4);
  /* A region the config lacks: refused, naming it and the config's. */
  CHECK(memdecay_policy_append_named(p, 0, "thoughts") == MEMDECAY_E_INVALID);
  CHECK_MSG(contains(memdecay_last_error(), "\"thoughts\"") &&
            contains(memdecay_last_error(), "scratchpad"), "%s", memdecay_last_error());
  CHECK(memdecay_policy_step(p) == 0 && memdecay_policy_cached_tokens(p) == 0);
  CHECK(memdecay_policy_append(p, 0, 7) == MEMDECAY_E_INVALID);
  CHECK(memdecay_policy_append_named(p, 0, NULL) == MEMDECAY_E_INVALID);  /* memdecay needs one */
  CHECK(memdecay_policy_append_named(p, 0, "system") == MEMDECAY_OK);
  CHECK(memdecay_policy_append_named(p, 0, "system") == MEMDECAY_E_INVALID);  /* not increasing */
  const float received[2] = {1.0f, 0.0f};
  CHECK(memdecay_policy_observe(p, received, 2, 1) == MEMDECAY_E_INVALID);  /* 1 cached */
  CHECK(memdecay_policy_observe(p, NULL, 1, 1) == MEMDECAY_E_INVALID);
  const float bad[1] = {-1.0f};
  CHECK(memdecay_policy_observe(p, bad, 1, 1) == MEMDECAY_E_INVALID);
  CHECK(memdecay_policy_observe(p, received, 1, 1) == MEMDECAY_OK);
  /* budget < 0 */
  const int64_t *gone = (const int64_t *)1;
  int64_t n = -1;
  CHECK(memdecay_policy_evict(p, -1, &gone, &n) == MEMDECAY_E_INVALID && gone == NULL && n == 0);
  CHECK_MSG(contains(memdecay_last_error(), "budget"), "%s", memdecay_last_error());
  CHECK(memdecay_policy_evict(p, 1, NULL, &n) == MEMDECAY_E_INVALID);
  CHECK(memdecay_policy_evict(p, 1, &gone, NULL) == MEMDECAY_E_INVALID);
  CHECK(memdecay_policy_cached_tokens(p) == 1);
  memdecay_policy_free(p);
}

static void test_null_handles(void) {
  const int64_t *gone = NULL;
  int64_t n = 0;
  const float received[1] = {1.0f};
  CHECK(memdecay_config_add_region(NULL, "a", 0, 0.5, 0.1) == MEMDECAY_E_INVALID);
  CHECK_MSG(contains(memdecay_last_error(), "NULL"), "%s", memdecay_last_error());
  CHECK(memdecay_config_set_pooled_lambda(NULL, 0.1) == MEMDECAY_E_INVALID);
  CHECK(memdecay_config_page_size(NULL) == -1);
  CHECK(memdecay_config_region_count(NULL) == 0);
  CHECK(memdecay_config_region_index(NULL, "a") == -1);
  CHECK(memdecay_config_region_name(NULL, 0) == NULL);
  CHECK(memdecay_config_region_info(NULL, 0, NULL, NULL, NULL) == MEMDECAY_E_INVALID);
  memdecay_config_free(NULL);
  CHECK(memdecay_policy_reset(NULL, 0) == MEMDECAY_E_INVALID);
  CHECK(memdecay_policy_append(NULL, 0, 0) == MEMDECAY_E_INVALID);
  CHECK(memdecay_policy_append_named(NULL, 0, "a") == MEMDECAY_E_INVALID);
  CHECK(memdecay_policy_observe(NULL, received, 1, 1) == MEMDECAY_E_INVALID);
  CHECK(memdecay_policy_evict(NULL, 1, &gone, &n) == MEMDECAY_E_INVALID);
  CHECK(memdecay_policy_name(NULL) == NULL);
  CHECK(memdecay_policy_page_size(NULL) == -1);
  CHECK(memdecay_policy_cached_tokens(NULL) == -1);
  CHECK(memdecay_policy_cached_pages(NULL) == -1);
  CHECK(memdecay_policy_step(NULL) == -1);
  CHECK(isnan(memdecay_policy_token_score(NULL, 0)));
  CHECK(isnan(memdecay_policy_page_score(NULL, 0)));
  memdecay_policy_free(NULL);
  CHECK(memdecay_policy_list(1000) == NULL);
  CHECK(memdecay_policy_describe(NULL) == NULL);
}

static void *fail_on_thread(void *arg) {
  (void)arg;
  memdecay_config *c = NULL;
  memdecay_config_load("thread/memdecay.json", &c);
  return contains(memdecay_last_error(), "thread/memdecay.json") ? arg : NULL;
}

static void test_thread_local_error(void) {
  memdecay_config *c = NULL;
  CHECK(memdecay_config_load("main/memdecay.json", &c) == MEMDECAY_E_IO);
  pthread_t t;
  void *result = NULL;
  static int token;
  CHECK(pthread_create(&t, NULL, fail_on_thread, &token) == 0);
  CHECK(pthread_join(t, &result) == 0);
  CHECK(result == &token);  /* the thread saw its own error */
  CHECK_MSG(contains(memdecay_last_error(), "main/memdecay.json"), "%s", memdecay_last_error());
  /* Successful calls leave it. */
  CHECK(memdecay_policy_list(0) != NULL);
  CHECK(contains(memdecay_last_error(), "main/memdecay.json"));
}

int main(void) {
  test_version();
  test_hand_example();
  test_golden();
  test_config_errors();
  test_policy_errors();
  test_null_handles();
  test_thread_local_error();
  return md_test_finish("library_api");
}
