/* What a sequence costs (md_qwen2_seq_bytes) against the process's
 * resident memory: on the demo checkpoint, after one sequence has warmed
 * every scratch buffer, four more sequences filled to a capacity of 2,048
 * tokens add what the formula says, within 10% and 256 KiB (pages,
 * malloc's bookkeeping). (A batched step's scratch, md_qwen2_step_bytes,
 * is a few buffers freed and made again, too small against the resident
 * figure's noise to be measured this way.) */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "collector/model/qwen2_forward.h"
#include "collector/model/qwen2_model.h"
#include "kernels/cpu/cpu.h"
#include "tests/test_util.h"

enum { CAPACITY = 2048, SEQS = 4 };

static double resident_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  fclose(f);
  return (double)resident * (double)sysconf(_SC_PAGESIZE);
}

static void fill(md_qwen2_forward *fw, md_qwen2_seq *q, const int32_t *tokens) {
  md_error err;
  md_qwen2_select(fw, q);
  CHECK_MSG(md_qwen2_feed(fw, tokens, CAPACITY, &err) == MD_OK, "%s", err.message);
  md_qwen2_select(fw, NULL);
}

int main(void) {
  const char *root = getenv("MD_SOURCE_ROOT");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/data/models/qwen2-tiny", root ? root : ".");
  md_error err;
  md_qwen2_model *model = NULL;
  md_kernels *k = NULL;
  md_cpu_options o = {.threads = 1};
  if (md_qwen2_model_open(dir, &model, &err) != MD_OK || md_kernels_cpu_new(&o, &k, &err) != MD_OK) {
    fprintf(stderr, "%s: %s\n", dir, err.message);
    return 1;
  }
  const md_qwen2_config *c = md_qwen2_model_config(model);
  md_qwen2_forward_options fo = {.capacity = CAPACITY};
  md_qwen2_forward *fw = NULL;
  CHECK(md_qwen2_forward_new(c, md_qwen2_model_weights(model), k, &fo, &fw, &err) == MD_OK);
  int32_t *tokens = malloc(CAPACITY * sizeof *tokens);
  for (int i = 0; i < CAPACITY; i++) tokens[i] = (int32_t)((i * 7919) % 151000);
  fill(fw, md_qwen2_seq_own(fw), tokens); /* every scratch buffer touched */
  md_qwen2_seq *seqs[SEQS + 1] = {md_qwen2_seq_own(fw)};
  double before = resident_bytes();
  for (int i = 1; i <= SEQS; i++) {
    CHECK(md_qwen2_seq_new(fw, &seqs[i], &err) == MD_OK);
    fill(fw, seqs[i], tokens);
  }
  double grown = resident_bytes() - before;
  double want = (double)SEQS * (double)md_qwen2_seq_bytes(c, CAPACITY);
  printf("%d sequences of %d tokens: %.0f KiB resident, md_qwen2_seq_bytes says %.0f KiB\n",
         SEQS, CAPACITY, grown / 1024, want / 1024);
  CHECK_MSG(grown > 0.9 * want - 262144 && grown < 1.1 * want + 262144,
            "%.0f bytes for %d sequences, the formula %.0f", grown, SEQS, want);
  for (int i = 1; i <= SEQS; i++) md_qwen2_seq_free(fw, seqs[i]);
  free(tokens);
  md_qwen2_forward_free(fw);
  md_kernels_free(k);
  md_qwen2_model_close(model);
  return md_test_finish("qwen2 sequence memory");
}
