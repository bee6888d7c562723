/* The reference for tests/library/install_test.py: the episode of
 * examples/evict.c run through the runtime directly (runtime/policy.h,
 * md_policy_*, not the library's wrappers), printed in the example's
 * format. The episode, the attention and the output must stay those of
 * examples/evict.c: the test compares the two outputs line for line, so a
 * change to one without the other fails it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "runtime/policy.h"
#include "runtime/policy_class.h"
#include "runtime/policy_table.h"

static const struct {
  const char *region;
  int tokens;
} episode[] = {
    {"system", 40},     {"user", 24},     {"plan", 36},       {"tool_in", 20},
    {"tool_out", 60},   {"scratchpad", 48}, {"retrieval", 64}, {"user", 16},
    {"scratchpad", 40}, {"tool_in", 12},  {"tool_out", 40},   {"scratchpad", 56},
};
#define SEGMENTS (sizeof episode / sizeof episode[0])

static int fail(const char *what, const md_error *err) {
  fprintf(stderr, "reference_evict: %s: %s\n", what, err->message);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: reference_evict MEMDECAY.JSON POLICY BUDGET_PAGES\n");
    return 2;
  }
  const int64_t budget = strtoll(argv[3], NULL, 10);
  md_error err = {0};
  md_policy_config config;
  if (md_policy_config_load(argv[1], &config, &err) != MD_OK) return fail("config", &err);
  md_policy_options options = {.policy = md_policy_find(argv[2]), .seed = 1};
  md_policy *policy = NULL;
  if (md_policy_new(&config, &options, &policy, &err) != MD_OK) return fail("policy", &err);

  int total = 0;
  for (size_t k = 0; k < SEGMENTS; k++) total += episode[k].tokens;
  const char **region_of = calloc((size_t)total, sizeof *region_of);
  char *cached = calloc((size_t)total, 1);
  float *received = calloc((size_t)total, sizeof *received);
  double *weight = calloc((size_t)total, sizeof *weight);
  if (!region_of || !cached || !received || !weight) return 1;
  int64_t position = 0, evicted = 0;
  for (size_t k = 0; k < SEGMENTS; k++) {
    int region = md_policy_config_region(&config, episode[k].region);
    for (int i = 0; i < episode[k].tokens; i++, position++) {
      if (md_policy_append(policy, position, region, &err) != MD_OK) return fail("append", &err);
      region_of[position] = episode[k].region;
      cached[position] = 1;
      int64_t n = 0;
      double sum = 0;
      for (int64_t p = 0; p <= position; p++) {
        if (!cached[p]) continue;
        double w = strcmp(region_of[p], "system") == 0 ? 3 : 1;
        if (p % 23 == 0) w = 40;
        if (position - p < 8) w = 6;
        weight[n++] = w;
        sum += w;
      }
      for (int64_t s = 0; s < n; s++) received[s] = (float)(weight[s] / sum);
      if (md_policy_observe(policy, received, n, 1, &err) != MD_OK) return fail("observe", &err);
      const int64_t *gone = NULL;
      int64_t n_gone = 0;
      if (md_policy_evict(policy, budget, &gone, &n_gone, &err) != MD_OK)
        return fail("evict", &err);
      for (int64_t j = 0; j < n_gone; j++) cached[gone[j]] = 0;
      evicted += n_gone;
    }
  }
  const int page_size = md_policy_page_size(policy);
  printf("policy %s, page size %d, budget %" PRId64 " pages: %d tokens appended, %" PRId64
         " evicted, %" PRId64 " kept in %" PRId64 " pages\n",
         md_policy_get_class(policy)->name, page_size, budget, total, evicted,
         md_policy_cached_tokens(policy), md_policy_cached_pages(policy));
  for (int64_t page = 0; page * page_size < total; page++) {
    int64_t first = -1, last = -1;
    char regions[256] = "";
    for (int64_t p = page * page_size; p < (page + 1) * page_size && p < total; p++) {
      if (!cached[p]) continue;
      if (first < 0) first = p;
      last = p;
      if (!strstr(regions, region_of[p])) {
        if (regions[0]) strcat(regions, ",");
        strcat(regions, region_of[p]);
      }
    }
    if (first < 0) continue;
    printf("kept page %" PRId64 " (positions %" PRId64 "-%" PRId64 ", %s): score %.9g\n", page,
           first, last, regions, md_policy_page_score(policy, page));
  }
  for (size_t r = 0; r < config.n_regions; r++) {
    int in = 0, kept = 0;
    for (int64_t p = 0; p < total; p++) {
      if (strcmp(region_of[p], config.regions[r].name) != 0) continue;
      in++;
      kept += cached[p];
    }
    printf("region %s: kept %d of %d\n", config.regions[r].name, in ? kept : 0, in);
  }
  free(region_of);
  free(cached);
  free(received);
  free(weight);
  md_policy_free(policy);
  md_policy_config_free(&config);
  return 0;
}
