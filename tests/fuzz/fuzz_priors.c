/* The priors file (io/formats/priors.h): md_priors_read.
 *
 * Invariants: a failure is MD_E_FORMAT, MD_E_IO or MD_E_UNSUPPORTED naming
 * the file, leaving the set empty; on success every entry has a valid,
 * distinct region name that md_priors_find returns, sets base_priority
 * (in [0, 1]) or pinned or both. */
#include <math.h>

#include "fuzz_util.h"
#include "io/formats/priors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_input_file(data, size, ".priors.json");
  md_priors priors;
  md_error err = {0};
  md_status status = md_priors_read(path, &priors, &err);
  if (status != MD_OK) {
    fuzz_check_failure(status, &err,
                       FUZZ_ST(MD_E_FORMAT) | FUZZ_ST(MD_E_IO) | FUZZ_ST(MD_E_UNSUPPORTED), path);
    FUZZ_CHECK(priors.n == 0 && priors.regions == NULL);
    return 0;
  }
  FUZZ_CHECK(priors.n == 0 || priors.regions);
  for (size_t i = 0; i < priors.n; i++) {
    const md_prior *p = &priors.regions[i];
    FUZZ_CHECK(p->region && fuzz_region_name(p->region, strlen(p->region)));
    FUZZ_CHECK(md_priors_find(&priors, p->region) == p);
    FUZZ_CHECK(p->has_base_priority || p->has_pinned);
    if (p->has_base_priority) FUZZ_CHECK(p->base_priority >= 0 && p->base_priority <= 1);
  }
  FUZZ_CHECK(md_priors_find(&priors, "no such region") == NULL);
  md_priors_free(&priors);
  return 0;
}
