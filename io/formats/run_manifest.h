/* manifest.csv of a run directory, streamed through libcsv: the validating
 * scan that md_run_info_read() runs once, and the per-episode stream behind
 * md_run_reader_next(). The rules are listed in io/formats/run_dir.h; this header is
 * the run-directory reader's own and not meant for other callers. */
#ifndef MD_IO_FORMATS_RUN_MANIFEST_H
#define MD_IO_FORMATS_RUN_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "io/formats/run_dir.h"

/* One episode's columns, grown to the largest episode seen. */
typedef struct md_run_token_arrays {
  size_t capacity;
  uint32_t *region;
  int32_t *birth;
  int64_t *page;
  int64_t *token_id;
} md_run_token_arrays;

void md_run_token_arrays_free(md_run_token_arrays *arrays);

/* Validates the first info->manifest_bytes bytes against info->episodes
 * and fills info->regions (sorted as md_region_name_compare orders them). */
md_status md_run_manifest_scan(md_run_info *info, md_error *err);

typedef struct md_run_manifest_stream md_run_manifest_stream;

/* Streams the manifest again; each md_run_manifest_next() fills `arrays`
 * with the next episode's rows and returns its index in info->episodes. */
md_status md_run_manifest_open(const md_run_info *info, md_run_token_arrays *arrays,
                               md_run_manifest_stream **stream, md_error *err);
md_status md_run_manifest_next(md_run_manifest_stream *stream, size_t *episode, bool *done,
                               md_error *err);
void md_run_manifest_close(md_run_manifest_stream *stream);

#endif
