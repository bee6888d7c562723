/* Replays a recorded script through the C runtime (runtime/policy.h) and
 * prints what it chose, for tests/python/test_replay.py, which replays the
 * same script through the Python implementation (python/memdecay/policy.py)
 * and compares. Public API only: md_policy_config_load, md_policy_new,
 * append, observe, evict, token scores.
 *
 *   replay_driver CONFIG SCRIPT POLICY PAGE_SIZE BUDGET_PAGES [TAU]
 *
 * PAGE_SIZE 0: the config's. TAU, when given, replaces the config's tau
 * (the test's mutation check, from the C side).
 *
 * The script (memdecay-replay/1, one record a line):
 *   A POSITION REGION      a decoded token enters the cache (REGION a config
 *                          region name): md_policy_append
 *   P POSITION REGION      a prompt token enters it: md_policy_append_prompt
 *   O N_Q V_0 ... V_L      the attention of the forward pass of the last N_Q
 *                          appended tokens on every position born so far
 *                          (0 .. L, L the last appended position); the
 *                          replay keeps the cached positions and rescales
 *                          them to sum to N_Q (each query's softmax row sums
 *                          to 1), as a softmax over the cached keys alone
 *                          would, so that any policy's cache can be fed from
 *                          one recording
 *   E                      an eviction point: evict down to BUDGET_PAGES
 * Lines starting with # are comments.
 *
 * Output, per eviction point k (from 0): "E k CACHED EVICTED_COUNT" then
 * "T POSITION SCORE" for every cached token before the eviction (the scores
 * the choice was made on, %.17g), then "X POSITION" per evicted position;
 * at the end "F POSITION" per position still cached. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/policy.h"
#include "runtime/policy_table.h"

static int fail(const char *what, const md_error *err) {
  fprintf(stderr, "replay_driver: %s: %s\n", what, err ? err->message : "");
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 6 && argc != 7) {
    fprintf(stderr, "usage: replay_driver CONFIG SCRIPT POLICY PAGE_SIZE BUDGET_PAGES [TAU]\n");
    return 2;
  }
  md_error err = {0};
  md_policy_config config;
  if (md_policy_config_load(argv[1], &config, &err) != MD_OK) return fail("config", &err);
  if (argc == 7) config.tau = strtod(argv[6], NULL);
  const md_policy_class *cls = md_policy_find(argv[3]);
  if (!cls) {
    fprintf(stderr, "replay_driver: no policy %s\n", argv[3]);
    return 2;
  }
  md_policy_options options = {.policy = cls, .page_size = atoi(argv[4])};
  md_policy *policy;
  if (md_policy_new(&config, &options, &policy, &err) != MD_OK) return fail("policy", &err);
  long long budget = atoll(argv[5]);
  FILE *in = fopen(argv[2], "r");
  if (!in) {
    perror(argv[2]);
    return 1;
  }
  size_t cap = 1 << 16, line_cap = 0;
  char *line = NULL;
  /* every position born so far: cached? */
  unsigned char *cached = calloc(cap, 1);
  float *row = malloc(cap * sizeof *row), *received = malloc(cap * sizeof *received);
  long long last = -1, eviction = 0;
  int status = 0;
  while (getline(&line, &line_cap, in) > 0) {
    if (line[0] == '#' || line[0] == '\n') continue;
    if (line[0] == 'A' || line[0] == 'P') {
      long long pos;
      char region[128];
      if (sscanf(line + 1, "%lld %127s", &pos, region) != 2 || pos < 0 || (size_t)pos >= cap) {
        fprintf(stderr, "replay_driver: bad line: %s", line);
        return 1;
      }
      int r = md_policy_config_region(&config, region);
      if (r < 0) {
        fprintf(stderr, "replay_driver: region %s not in the config\n", region);
        return 1;
      }
      md_status appended = line[0] == 'A' ? md_policy_append(policy, pos, r, &err)
                                          : md_policy_append_prompt(policy, pos, r, &err);
      if (appended != MD_OK) return fail("append", &err);
      cached[pos] = 1;
      last = pos;
    } else if (line[0] == 'O') {
      char *p = line + 1, *end;
      long long n_q = strtoll(p, &end, 10);
      p = end;
      for (long long j = 0; j <= last; j++) {
        row[j] = strtof(p, &end);
        if (end == p) {
          fprintf(stderr, "replay_driver: short attention row\n");
          return 1;
        }
        p = end;
      }
      /* Keep the cached positions, rescaled to sum to n_q (in double, then
       * float as the runtime takes it; the Python replay does the same). */
      double sum = 0;
      long long n = 0;
      for (long long j = 0; j <= last; j++) {
        if (cached[j]) sum += (double)row[j];
      }
      for (long long j = 0; j <= last; j++) {
        if (cached[j]) received[n++] = sum > 0 ? (float)((double)row[j] * (double)n_q / sum) : 0.0f;
      }
      if (md_policy_observe(policy, received, n, n_q, &err) != MD_OK) return fail("observe", &err);
    } else if (line[0] == 'E') {
      int64_t n_cached = md_policy_cached_tokens(policy);
      /* the scores at the eviction point, before it */
      char *scores = NULL;
      size_t scores_len = 0;
      FILE *s = open_memstream(&scores, &scores_len);
      for (long long j = 0; j <= last; j++) {
        if (cached[j]) fprintf(s, "T %lld %.17g\n", j, md_policy_token_score(policy, j));
      }
      fclose(s);
      const int64_t *positions;
      int64_t n_out;
      if (md_policy_evict(policy, budget, &positions, &n_out, &err) != MD_OK) {
        return fail("evict", &err);
      }
      printf("E %lld %lld %lld\n%s", eviction++, (long long)n_cached, (long long)n_out, scores);
      free(scores);
      for (int64_t k = 0; k < n_out; k++) {
        printf("X %lld\n", (long long)positions[k]);
        cached[positions[k]] = 0;
      }
    } else {
      fprintf(stderr, "replay_driver: bad line: %s", line);
      status = 1;
      break;
    }
  }
  for (long long j = 0; j <= last; j++) {
    if (cached[j]) printf("F %lld\n", j);
  }
  fclose(in);
  free(line);
  free(cached);
  free(row);
  free(received);
  md_policy_free(policy);
  md_policy_config_free(&config);
  return status;
}
