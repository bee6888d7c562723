#include "io/files/json_fields.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INTEGER ((int64_t)1 << 53)

md_status md_json_load(const char *path, json_t **root, md_error *err) {
  *root = NULL;
  FILE *fp = fopen(path, "rb");
  md_status status;
  if (!fp) {
    status = md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: cannot open: %s", path, strerror(errno));
    md_error_at(err, path, 0, NULL);
    return status;
  }
  json_error_t json_err;
  *root = json_loadf(fp, JSON_REJECT_DUPLICATES, &json_err);
  bool read_failed = ferror(fp) != 0;
  fclose(fp);
  if (*root) return MD_OK;
  if (read_failed) {
    status = md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: read error", path);
    md_error_at(err, path, 0, NULL);
    return status;
  }
  status = md_fail(err, MD_E_FORMAT, "%s:%d:%d: %s", path, json_err.line, json_err.column,
                   json_err.text);
  md_error_at(err, path, json_err.line > 0 ? (size_t)json_err.line : 0, NULL);
  return status;
}

const char *md_json_kind(const json_t *value) {
  if (!value) return "nothing";
  switch (json_typeof(value)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
  }
  return "something else";
}

md_status md_json_bad(const md_json_fields *f, const char *parent, const char *key,
                      const char *expected, const json_t *found) {
  const char *dot = parent[0] ? "." : "";
  if (!found) return md_fail(f->err, MD_E_FORMAT, "%s: %s%s%s: missing", f->path, parent, dot, key);
  return md_fail(f->err, MD_E_FORMAT, "%s: %s%s%s: expected %s, found %s", f->path, parent, dot,
                 key, expected, md_json_kind(found));
}

md_status md_json_object(const md_json_fields *f, const json_t *object, const char *parent,
                         const char *key, bool required, const json_t **out) {
  *out = object ? json_object_get(object, key) : NULL;
  if (!*out && !required) return MD_OK;
  if (!json_is_object(*out)) return md_json_bad(f, parent, key, "an object", *out);
  return MD_OK;
}

md_status md_json_string(const md_json_fields *f, const json_t *object, const char *parent,
                         const char *key, bool required, char **out) {
  const json_t *value = object ? json_object_get(object, key) : NULL;
  *out = NULL;
  if (!required && (!value || json_is_null(value))) return MD_OK;
  if (!json_is_string(value) || json_string_length(value) == 0)
    return md_json_bad(f, parent, key, "a non-empty string", value);
  *out = strdup(json_string_value(value));
  if (!*out) return md_fail(f->err, MD_E_NOMEM, "%s: out of memory", f->path);
  return MD_OK;
}

md_status md_json_integer(const md_json_fields *f, const json_t *object, const char *parent,
                          const char *key, bool required, int64_t min, int64_t *out) {
  const json_t *value = object ? json_object_get(object, key) : NULL;
  *out = -1;
  if (!required && (!value || json_is_null(value))) return MD_OK;
  /* Integral reals too: "24.0" is what some JSON writers make of a count. */
  double number = json_is_number(value) ? json_number_value(value) : NAN;
  if (!(number >= (double)min && number <= (double)MAX_INTEGER && number == floor(number))) {
    char expected[64];
    snprintf(expected, sizeof expected, "an integer >= %lld", (long long)min);
    return md_json_bad(f, parent, key, expected, value);
  }
  *out = (int64_t)number;
  return MD_OK;
}

md_status md_json_number(const md_json_fields *f, const json_t *object, const char *parent,
                         const char *key, bool null_ok, double *out) {
  const json_t *value = object ? json_object_get(object, key) : NULL;
  *out = NAN;
  if (null_ok && value && json_is_null(value)) return MD_OK;
  if (!json_is_number(value))
    return md_json_bad(f, parent, key, null_ok ? "a number or null" : "a number", value);
  *out = json_number_value(value);
  return MD_OK;
}

md_status md_json_boolean(const md_json_fields *f, const json_t *object, const char *parent,
                          const char *key, bool *out) {
  const json_t *value = object ? json_object_get(object, key) : NULL;
  *out = false;
  if (!json_is_boolean(value)) return md_json_bad(f, parent, key, "true or false", value);
  *out = json_is_true(value);
  return MD_OK;
}
