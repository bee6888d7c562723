/* The priors file given to `fit --priors` (memdecay-config(5), PRIORS FILE):
 *
 *   {"format": "memdecay-priors/1",
 *    "regions": {"plan": {"base_priority": 0.9, "pinned": true},
 *                "scratchpad": {"base_priority": 0.2}}}
 *
 * "format" is optional (when present it must be "memdecay-priors/1"), so is
 * a free-text "description"; every region entry sets "base_priority" (a
 * number in [0, 1]), "pinned" (true or false) or both. Unknown keys are
 * errors, so that a misspelt key is not silently ignored. */
#ifndef MD_IO_FORMATS_PRIORS_H
#define MD_IO_FORMATS_PRIORS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

#define MD_PRIORS_FORMAT "memdecay-priors/1"

typedef struct md_prior {
  char *region;
  bool has_base_priority;
  double base_priority;
  bool has_pinned;
  bool pinned;
} md_prior;

typedef struct md_priors {
  size_t n;
  md_prior *regions; /* in file order */
} md_priors;

/* Syntax errors: "PATH:LINE:COLUMN: ..."; content errors name the key:
 * "PATH: regions.plan.base_priority: ...". */
md_status md_priors_read(const char *path, md_priors *priors, md_error *err);
const md_prior *md_priors_find(const md_priors *priors, const char *region);
void md_priors_free(md_priors *priors);

#endif
