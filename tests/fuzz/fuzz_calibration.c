/* The calibration sidecar (io/formats/calibration.h): md_calibration_read.
 *
 * Invariants: a failed read is MD_E_FORMAT, MD_E_IO or MD_E_UNSUPPORTED
 * naming the file, with the struct left empty; a successful one has valid,
 * distinct region names that md_calibration_find returns, shares in [0, 1]
 * or NaN, curves with both arrays; and it round-trips: the dump of what was
 * read reads back and dumps to the same bytes. */
#include <math.h>

#include "fuzz_util.h"
#include "io/formats/calibration.h"

static void check_calibration(const md_calibration *c) {
  FUZZ_CHECK(c->n_regions == 0 || c->regions != NULL);
  for (size_t i = 0; i < c->n_regions; i++) {
    const md_calibration_region *r = &c->regions[i];
    FUZZ_CHECK(r->name && fuzz_region_name(r->name, strlen(r->name)));
    FUZZ_CHECK(md_calibration_find(c, r->name) == r);
    FUZZ_CHECK(isnan(r->refreshed_share) || (r->refreshed_share >= 0 && r->refreshed_share <= 1));
    FUZZ_CHECK(r->curve_length == 0 || (r->curve_mean && r->curve_pairs));
  }
  FUZZ_CHECK(c->workload.n_sources == 0 || (c->workload.sources && c->workload.sources_sha256));
  for (size_t i = 0; i < c->workload.n_sources; i++)
    FUZZ_CHECK(c->workload.sources[i] && c->workload.sources[i][0]);
  FUZZ_CHECK(c->warnings.n == 0 || c->warnings.lines);
  FUZZ_CHECK(md_calibration_find(c, "no such region") == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_input_file(data, size, ".calibration.json");
  md_calibration calibration;
  md_error err = {0};
  md_status status = md_calibration_read(path, &calibration, &err);
  if (status != MD_OK) {
    fuzz_check_failure(status, &err,
                       FUZZ_ST(MD_E_FORMAT) | FUZZ_ST(MD_E_IO) | FUZZ_ST(MD_E_UNSUPPORTED), path);
    FUZZ_CHECK(calibration.n_regions == 0 && calibration.regions == NULL);
    FUZZ_CHECK(calibration.workload.sources == NULL && calibration.warnings.n == 0);
    return 0;
  }
  check_calibration(&calibration);

  char *text = NULL;
  status = md_calibration_dump(&calibration, &text, &err);
  FUZZ_CHECK_MSG(status == MD_OK, "what was read does not dump: %s", err.message);
  size_t len = strlen(text);
  FUZZ_CHECK(len > 0 && text[len - 1] == '\n');
  const char *again_path = fuzz_temp_slot(1, ".calibration.json");
  fuzz_write_file(again_path, (const uint8_t *)text, len);
  md_calibration again;
  status = md_calibration_read(again_path, &again, &err);
  FUZZ_CHECK_MSG(status == MD_OK, "the dump does not read back: %s", err.message);
  FUZZ_CHECK(again.n_regions == calibration.n_regions);
  char *text2 = NULL;
  status = md_calibration_dump(&again, &text2, &err);
  FUZZ_CHECK(status == MD_OK);
  FUZZ_CHECK_MSG(strcmp(text, text2) == 0, "dump, read, dump changed the bytes:\n%s---\n%s",
                 text, text2);
  free(text);
  free(text2);
  md_calibration_free(&again);
  md_calibration_free(&calibration);
  FUZZ_CHECK(calibration.regions == NULL && calibration.n_regions == 0);
  return 0;
}
