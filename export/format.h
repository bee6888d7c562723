/* Step 4 of the retention mapping (export/retention.h): what a serving
 * stack reads, one format per stack. A format is one file in
 * export/formats/ defining its md_export_format, and one entry in
 * md_export_formats (export/formats/table.c); `export --format`, its
 * --help and its error list come from the table.
 *
 * Each format writes the settings of one request as the value of one key,
 * named after the stack's own request field, of the request's output line
 * (memdecay-calibrate(1), EXPORT). */
#ifndef MD_EXPORT_FORMAT_H
#define MD_EXPORT_FORMAT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "base/warnings.h"
#include "export/retention.h"

/* One request, mapped (steps 1 to 3). */
typedef struct md_export_request {
  const char *id;
  const md_retention_map *map;
  const md_retention_region *regions; /* the config's, in its order */
  size_t n_regions;
} md_export_request;

/* What a format did to a request's settings beyond steps 1 to 3, per region
 * (index into the config's regions): the ranges whose priority it lowered. */
typedef struct md_export_adjustments {
  size_t *lowered;      /* [n_regions] */
  md_warnings *warnings; /* one line per lowered range: request, region, tokens, priorities */
} md_export_adjustments;

typedef struct md_export_format {
  const char *name;        /* --format NAME */
  const char *stack;       /* "TensorRT-LLM" */
  const char *field;       /* the key of the output line that holds the settings */
  const char *summary;     /* one line for --help */
  size_t default_block_size; /* the stack's own; 1 where blocks do not matter */
  bool uses_blocks;        /* false: one value per request, the block size is 1 */
  bool power_of_two_blocks; /* the stack takes only powers of two of at least 2 */
  bool durations;          /* emits durations: --step-ms is required */
  /* The settings of one request, a new reference in *value. Fails only when
   * out of memory. */
  md_status (*settings)(const md_export_request *request, json_t **value,
                        md_export_adjustments *adjust, md_error *err);
  /* What the stack cannot express of MemDecay, one sentence each,
   * NULL-terminated (the summary and the man page say them). */
  const char *const *approximations;
} md_export_format;

/* Every format, NULL-terminated, in --help's order. */
extern const md_export_format *const md_export_formats[];

/* The format named `name`, or NULL. */
const md_export_format *md_export_format_find(const char *name);

/* "trtllm, vllm, sglang, dynamo" into buffer. Returns buffer. */
const char *md_export_format_names(char *buffer, size_t size);

#endif
