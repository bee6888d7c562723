/* Evaluation results (io/formats/eval_results.h): md_eval_results_read.
 *
 * Invariants: a failure is MD_E_FORMAT or MD_E_IO naming the file, with
 * nothing left to free; on success 1 .. MD_EVAL_MAX_RUNS runs, each a
 * distinct (policy, budget) with budget in (0, 1] that md_eval_run_index
 * finds, page_size >= 1, episodes left out, and every cell with
 * recalled <= total and a retention of k out of 10^6 (or 0 out of 0). */
#include <math.h>

#include "fuzz_util.h"
#include "io/formats/eval_results.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_input_file(data, size, ".eval.json");
  md_eval_results results;
  md_error err = {0};
  md_status status = md_eval_results_read(path, &results, &err);
  if (status != MD_OK) {
    fuzz_check_failure(status, &err, FUZZ_ST(MD_E_FORMAT) | FUZZ_ST(MD_E_IO), path);
    FUZZ_CHECK(results.n_runs == 0 && results.cells == NULL && results.regions == NULL);
    FUZZ_CHECK(results.model_name == NULL && results.episodes == NULL);
    return 0;
  }
  FUZZ_CHECK(results.n_runs >= 1 && results.n_runs <= MD_EVAL_MAX_RUNS);
  FUZZ_CHECK(results.page_size >= 1);
  FUZZ_CHECK(results.episodes == NULL);
  FUZZ_CHECK(results.cells != NULL);
  FUZZ_CHECK(results.n_regions == 0 || results.regions);
  for (size_t g = 0; g < results.n_regions; g++) FUZZ_CHECK(results.regions[g] != NULL);
  for (size_t run = 0; run < results.n_runs; run++) {
    const char *policy = results.run_policy[run];
    FUZZ_CHECK(memchr(policy, '\0', MD_EVAL_POLICY_NAME_MAX) != NULL);
    double budget = results.run_budget[run];
    FUZZ_CHECK(budget > 0 && budget <= 1);
    FUZZ_CHECK(md_eval_run_index(&results, policy, budget) == (int)run);
    for (size_t g = 0; g < results.n_regions; g++) {
      const md_eval_cell *c = md_eval_cell_at(&results, run, g);
      FUZZ_CHECK(c->recalled <= c->total);
      FUZZ_CHECK((c->answer_tokens == 0 && c->answer_kept == 0) ||
                 (c->answer_tokens == 1000000 && c->answer_kept <= c->answer_tokens));
    }
  }
  FUZZ_CHECK(md_eval_run_index(&results, "no such policy", 0.5) == -1);
  md_eval_results_free(&results);
  return 0;
}
