/* Test-only readers for the fixtures written by tests/fit/make_fixtures.R:
 * a dataset (events CSV with header region,entry,time,event,weight) and its
 * answers (dataset, region, quantity, index, value; tab-separated, NA for
 * R's NA). Aborts the test with a message on malformed files: fixtures are
 * generated, so any defect is a bug to see at once. */
#ifndef MD_TESTS_FIT_FIXTURE_H
#define MD_TESTS_FIT_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "survival/surv_data.h"

typedef struct fixture_region {
  char name[64];
  size_t n;
  double *entry, *time, *weight;
  uint8_t *event;
} fixture_region;

typedef struct fixture_dataset {
  size_t n_regions; /* in order of first appearance, as R's factor levels */
  fixture_region regions[32];
} fixture_dataset;

typedef struct fixture_answer {
  char region[160];
  char quantity[48];
  size_t index;
  double value; /* NaN for NA */
  bool used;
} fixture_answer;

typedef struct fixture_answers {
  size_t n;
  fixture_answer *items;
} fixture_answers;

/* Paths are relative to $MD_SOURCE_ROOT (or the current directory). */
void fixture_load_dataset(const char *relative_path, fixture_dataset *dataset);
void fixture_load_answers(const char *relative_path, fixture_answers *answers);
void fixture_free_dataset(fixture_dataset *dataset);
void fixture_free_answers(fixture_answers *answers);

/* The region's rows as md_surv_data (pointers into the region). */
md_surv_data fixture_surv_data(const fixture_region *region);

/* Index of the region called `name`, or -1. */
int fixture_region_index(const fixture_dataset *dataset, const char *name);

#endif
