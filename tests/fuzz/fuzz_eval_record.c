/* The record of an eval in progress (io/formats/eval_record.h):
 * md_eval_record_open with --resume on a fuzzed record, against a fixed
 * evaluation of 3 episodes (ids e0 e1 e2), 2 runs and 2 probes each.
 *
 * Invariants: a failure is MD_E_FORMAT, MD_E_INVALID or MD_E_IO naming the
 * file, no record open (what was restored before it the caller discards);
 * on success every episode marked done
 * has every run's probes restored (an output string, answer_kept <=
 * answer_tokens), and the record's file holds only complete lines. */
#include "fuzz_util.h"
#include "io/formats/eval_record.h"

#define EPISODES 3
#define RUNS 2
#define PROBES 2

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_input_file(data, size, ".record");
  md_eval_results r;
  memset(&r, 0, sizeof r);
  md_eval_episode episodes[EPISODES];
  md_eval_run runs[EPISODES][RUNS];
  md_eval_probe probes[EPISODES][RUNS][PROBES];
  md_eval_episode_probe asked[PROBES] = {{"user", "q1", "a1"}, {"plan", "q2", "a2"}};
  char ids[EPISODES][4];
  memset(episodes, 0, sizeof episodes);
  memset(runs, 0, sizeof runs);
  memset(probes, 0, sizeof probes);
  for (size_t e = 0; e < EPISODES; e++) {
    snprintf(ids[e], sizeof ids[e], "e%zu", e);
    episodes[e].id = ids[e];
    episodes[e].n_probes = PROBES;
    episodes[e].probes = asked;
    episodes[e].runs = runs[e];
    for (size_t run = 0; run < RUNS; run++) runs[e][run].probes = probes[e][run];
  }
  r.episodes = episodes;
  r.n_episodes = EPISODES;
  r.n_runs = RUNS;
  bool done[EPISODES] = {false};
  md_eval_record *record = NULL;
  md_error err = {0};
  md_status status = md_eval_record_open(path, "the identity", true, &r, done, &record, &err);
  if (status != MD_OK) {
    fuzz_check_failure(status, &err, FUZZ_ST(MD_E_FORMAT) | FUZZ_ST(MD_E_INVALID) | FUZZ_ST(MD_E_IO),
                       path);
    FUZZ_CHECK(record == NULL);
  } else {
    FUZZ_CHECK(record != NULL);
    for (size_t e = 0; e < EPISODES; e++) {
      if (!done[e]) continue;
      for (size_t run = 0; run < RUNS; run++)
        for (size_t k = 0; k < PROBES; k++) {
          const md_eval_probe *p = &probes[e][run][k];
          FUZZ_CHECK(p->output != NULL && p->index == k && p->region == asked[k].region);
          FUZZ_CHECK(p->answer_kept <= p->answer_tokens);
        }
    }
    md_eval_record_close(record);
    /* What a resume leaves is whole lines only. */
    FILE *fp = fopen(path, "rb");
    FUZZ_CHECK(fp != NULL);
    int c, last = '\n';
    while ((c = fgetc(fp)) != EOF) last = c;
    fclose(fp);
    FUZZ_CHECK(last == '\n');
  }
  for (size_t e = 0; e < EPISODES; e++)
    for (size_t run = 0; run < RUNS; run++)
      for (size_t k = 0; k < PROBES; k++) free(probes[e][run][k].output);
  return 0;
}
