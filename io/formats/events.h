/* The events CSV (memdecay-events(5)): one row per token lifetime, the input
 * of `memdecay-calibrate fit`.
 *
 * The reader streams each file through libcsv in strict mode (quoted fields,
 * CRLF line ends and a UTF-8 byte-order mark are accepted; blank lines are
 * skipped) and never holds a whole file in memory. Columns are found by name
 * in each file's header row; `region`, `time` and `event` are required,
 * `entry` and `weight` optional, anything else is ignored. Rows are grouped
 * per region into growable arrays that md_events_region_data() hands to the
 * estimators in fit/ without copying.
 *
 * Every bad value is an MD_E_FORMAT error "FILE:LINE:COLUMN: ..." (LINE counts
 * line feeds from 1, the header being line 1; COLUMN is the 1-based field
 * number); a field holding a NUL byte, in the header or a row, is one of
 * them. A file that cannot be opened or read is MD_E_IO. */
#ifndef MD_IO_FORMATS_EVENTS_H
#define MD_IO_FORMATS_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "survival/surv_data.h"
#include "base/error.h"
#include "base/regions.h"
#include "base/warnings.h"

typedef struct md_events_region {
  char *name;       /* matches [a-z][a-z0-9_]* */
  size_t name_len;  /* strlen(name): lookups compare lengths, never read past it */
  size_t n;         /* rows */
  size_t cap;       /* allocated rows */
  double *time;     /* [n] lifetime end, decode steps */
  uint8_t *event;   /* [n] 1 = observed end, 0 = right-censored */
  double *entry;    /* [n], or NULL while every entry read so far is 0 */
  double *weight;   /* [n], or NULL while every weight read so far is 1 */
} md_events_region;

typedef struct md_events {
  size_t n_regions;
  md_events_region *regions; /* [n_regions], in order of first appearance */
  size_t n_rows;             /* data rows over all files */
  size_t n_files;
  md_warnings warnings;      /* e.g. "FILE: header only, no event rows" */
  /* Region lookup by name: open addressing, slot = region index + 1. */
  size_t *slots;
  size_t n_slots;
} md_events;

/* Reads and merges `paths` in order ("-" is standard input). Every path is
 * checked before the first row is read, so a missing file fails fast. A
 * header-only file is a warning; no data rows at all is an error. On failure
 * `events` is left empty (nothing to free). */
md_status md_events_read(md_events *events, const char *const *paths, size_t n_paths,
                         md_error *err);

/* Appends one row to an events set built in memory (start from a zeroed
 * md_events): the region is added on first use. The row is checked as the
 * reader checks it (a valid region name, finite time > entry >= 0, event 0
 * or 1, weight > 0): MD_E_INVALID otherwise. */
md_status md_events_append(md_events *events, const char *region, double time, int event,
                           double entry, double weight, md_error *err);

/* A view of one region's rows for fit/ (valid while `events` lives). */
md_surv_data md_events_region_data(const md_events_region *region);

/* The region called `name`, or NULL. */
const md_events_region *md_events_find(const md_events *events, const char *name);

void md_events_free(md_events *events);

/* ---- writing (the extract stage's output) ---- */

/* The header row extract writes, columns in this order. */
#define MD_EVENTS_HEADER "region,time,event,entry,weight,episode,pos,page,token_id\n"

/* Writes one row under MD_EVENTS_HEADER: numbers in their shortest
 * round-trip form (base/numfmt.h), the episode id as a CSV field
 * (io/files/csv.h). Errors are the stream's (check ferror). */
void md_events_write_row(FILE *fp, const char *region, double time, int event, double entry,
                         double weight, const char *episode, int64_t pos, int64_t page,
                         int64_t token_id);

#endif
