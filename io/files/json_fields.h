/* Reading fields of a JSON document (jansson) with messages that name the
 * file and the key: "PATH: model.name: expected a non-empty string, found
 * null", or "PATH:LINE:COLUMN: ..." for syntax errors. Every function sets
 * its output (NULL, -1, NaN, false) before it looks at the value, so a
 * caller that stops at the first error never reads an unset one. Shared by the readers
 * of run.json (io/formats/run_dir.h) and of the calibration sidecar
 * (io/formats/calibration.h). A field is named by its parent ("model",
 * "episodes[3]"; "" at the top) and its key. */
#ifndef MD_IO_FILES_JSON_FIELDS_H
#define MD_IO_FILES_JSON_FIELDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

typedef struct md_json_fields {
  const char *path;  /* the file, for messages */
  md_error *err;
} md_json_fields;

/* Parses `path` (duplicate keys rejected): the one JSON loader of every
 * reader of a JSON file. MD_E_IO of kind input when it cannot be opened
 * (missing included) or read; MD_E_FORMAT on bad JSON, "FILE:LINE:COLUMN:
 * what jansson says". The error's file field names `path`, its line field
 * the line of bad JSON. */
md_status md_json_load(const char *path, json_t **root, md_error *err);

/* "an object", "a string", ..., "nothing" for NULL. */
const char *md_json_kind(const json_t *value);

/* MD_E_FORMAT "PATH: PARENT.KEY: expected EXPECTED, found KIND" (or
 * "...: missing"). */
md_status md_json_bad(const md_json_fields *f, const char *parent, const char *key,
                      const char *expected, const json_t *found);

/* object[key] as an object; absent is allowed when !required (*out NULL). */
md_status md_json_object(const md_json_fields *f, const json_t *object, const char *parent,
                         const char *key, bool required, const json_t **out);

/* A non-empty string, copied (free it); absent or null gives NULL when
 * !required. */
md_status md_json_string(const md_json_fields *f, const json_t *object, const char *parent,
                         const char *key, bool required, char **out);

/* An integer in [min, 2^53]; absent or null gives -1 when !required. */
md_status md_json_integer(const md_json_fields *f, const json_t *object, const char *parent,
                          const char *key, bool required, int64_t min, int64_t *out);

/* A number; null gives NaN when null_ok. Always required. */
md_status md_json_number(const md_json_fields *f, const json_t *object, const char *parent,
                         const char *key, bool null_ok, double *out);

/* true or false (false on error). Always required. */
md_status md_json_boolean(const md_json_fields *f, const json_t *object, const char *parent,
                          const char *key, bool *out);

#endif
