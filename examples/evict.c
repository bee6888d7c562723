/* A KV cache under a budget, driven by libmemdecay: loads a memdecay.json,
 * feeds a synthetic agent episode (region-labelled tokens, and after each
 * token the attention the cached tokens received), evicts down to a budget
 * of pages after every step, as a serving engine would, and prints what it
 * kept.
 *
 *   cc evict.c $(pkg-config --cflags --libs memdecay) -o evict
 *   ./evict memdecay.json [POLICY [BUDGET_PAGES]]      (memdecay, 8 pages)
 *
 * The attention is made up, not a model's: every token receives a share of
 * the newest token's attention, system tokens three times a plain token's,
 * every 23rd position forty times (a "heavy hitter"), the last 8 tokens six
 * times. Integer weights divided once by their sum, so the shares are the
 * same bits on every compiler. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memdecay/memdecay.h>

/* The episode: region and length of each segment, in order. */
static const struct {
  const char *region;
  int tokens;
} episode[] = {
    {"system", 40},     {"user", 24},     {"plan", 36},       {"tool_in", 20},
    {"tool_out", 60},   {"scratchpad", 48}, {"retrieval", 64}, {"user", 16},
    {"scratchpad", 40}, {"tool_in", 12},  {"tool_out", 40},   {"scratchpad", 56},
};
#define SEGMENTS (sizeof episode / sizeof episode[0])

static int fail(const char *what) {
  fprintf(stderr, "evict: %s: %s\n", what, memdecay_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 4) {
    fprintf(stderr, "usage: evict MEMDECAY.JSON [POLICY [BUDGET_PAGES]]\n");
    return 2;
  }
  const char *name = argc > 2 ? argv[2] : "memdecay";
  const int64_t budget = argc > 3 ? strtoll(argv[3], NULL, 10) : 8;
  if (memdecay_version() / 10000 != MEMDECAY_VERSION_MAJOR) {
    fprintf(stderr, "evict: built for libmemdecay %s, running with %s\n", MEMDECAY_VERSION_STRING,
            memdecay_version_string());
    return 1;
  }

  memdecay_config *config = NULL;
  if (memdecay_config_load(argv[1], &config) != MEMDECAY_OK) return fail("config");
  memdecay_policy_options options = MEMDECAY_POLICY_OPTIONS_INIT;
  options.seed = 1;
  memdecay_policy *policy = NULL;
  if (memdecay_policy_new(name, config, &options, &policy) != MEMDECAY_OK) {
    memdecay_config_free(config);
    return fail("policy");
  }

  int total = 0;
  for (size_t k = 0; k < SEGMENTS; k++) total += episode[k].tokens;
  const char **region_of = calloc((size_t)total, sizeof *region_of); /* by position */
  char *cached = calloc((size_t)total, 1);
  int64_t *slot_position = calloc((size_t)total, sizeof *slot_position);
  float *received = calloc((size_t)total, sizeof *received);
  if (!region_of || !cached || !slot_position || !received) return 1;

  int64_t position = 0, evicted = 0;
  int status = 0;
  for (size_t k = 0; k < SEGMENTS && !status; k++) {
    for (int i = 0; i < episode[k].tokens; i++, position++) {
      /* One decode step: the token enters the cache, the model attends over
       * the cache (itself included), then the cache is cut to the budget. */
      if (memdecay_policy_append_named(policy, position, episode[k].region) != MEMDECAY_OK) {
        status = fail("append");
        break;
      }
      region_of[position] = episode[k].region;
      cached[position] = 1;
      int64_t n = 0;
      double sum = 0;
      for (int64_t p = 0; p <= position; p++) {
        if (!cached[p]) continue;
        slot_position[n++] = p;
      }
      double *weight = malloc((size_t)n * sizeof *weight);
      if (!weight) return 1;
      for (int64_t s = 0; s < n; s++) {
        int64_t p = slot_position[s];
        double w = strcmp(region_of[p], "system") == 0 ? 3 : 1;
        if (p % 23 == 0) w = 40;
        if (position - p < 8) w = 6;
        weight[s] = w;
        sum += w;
      }
      for (int64_t s = 0; s < n; s++) received[s] = (float)(weight[s] / sum);
      free(weight);
      if (memdecay_policy_observe(policy, received, n, 1) != MEMDECAY_OK) {
        status = fail("observe");
        break;
      }
      const int64_t *gone = NULL;
      int64_t n_gone = 0;
      if (memdecay_policy_evict(policy, budget, &gone, &n_gone) != MEMDECAY_OK) {
        status = fail("evict");
        break;
      }
      for (int64_t j = 0; j < n_gone; j++) cached[gone[j]] = 0;
      evicted += n_gone;
    }
  }

  if (!status) {
    const int page_size = memdecay_policy_page_size(policy);
    printf("policy %s, page size %d, budget %" PRId64 " pages: %d tokens appended, %" PRId64
           " evicted, %" PRId64 " kept in %" PRId64 " pages\n",
           memdecay_policy_name(policy), page_size, budget, total, evicted,
           memdecay_policy_cached_tokens(policy), memdecay_policy_cached_pages(policy));
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
             first, last, regions, memdecay_policy_page_score(policy, page));
    }
    for (size_t r = 0; r < memdecay_config_region_count(config); r++) {
      const char *region = memdecay_config_region_name(config, r);
      int in = 0, kept = 0;
      for (int64_t p = 0; p < total; p++) {
        if (strcmp(region_of[p], region) != 0) continue;
        in++;
        kept += cached[p];
      }
      printf("region %s: kept %d of %d\n", region, kept, in);
    }
  }
  free(region_of);
  free(cached);
  free(slot_position);
  free(received);
  memdecay_policy_free(policy);
  memdecay_config_free(config);
  return status;
}
