#include "io/formats/priors.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/files/json_fields.h"
#include "base/regions.h"

static md_status read_entry(const char *path, const char *name, json_t *value, md_prior *prior,
                            md_error *err) {
  if (!md_region_name_valid(name, strlen(name))) {
    return md_fail(err, MD_E_FORMAT,
                   "%s: regions: \"%s\" is not a valid region name (lower-case letters, digits "
                   "and '_', starting with a letter)",
                   path, name);
  }
  if (!json_is_object(value) || json_object_size(value) == 0) {
    return md_fail(err, MD_E_FORMAT,
                   "%s: regions.%s: expected an object with \"base_priority\" and/or \"pinned\"",
                   path, name);
  }
  prior->region = strdup(name);
  if (!prior->region) return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  const char *key;
  json_t *field;
  json_object_foreach(value, key, field) {
    if (!strcmp(key, "base_priority")) {
      double priority = json_is_number(field) ? json_number_value(field) : NAN;
      if (!(priority >= 0.0 && priority <= 1.0)) {
        return md_fail(err, MD_E_FORMAT,
                       "%s: regions.%s.base_priority: expected a number in [0, 1]", path, name);
      }
      prior->has_base_priority = true;
      prior->base_priority = priority;
    } else if (!strcmp(key, "pinned")) {
      if (!json_is_boolean(field)) {
        return md_fail(err, MD_E_FORMAT, "%s: regions.%s.pinned: expected true or false", path,
                       name);
      }
      prior->has_pinned = true;
      prior->pinned = json_is_true(field);
    } else {
      return md_fail(err, MD_E_FORMAT,
                     "%s: regions.%s: unknown key \"%s\" (allowed: base_priority, pinned)", path,
                     name, key);
    }
  }
  return MD_OK;
}

static md_status read_top(const char *path, json_t *root, md_priors *priors, md_error *err) {
  if (!json_is_object(root)) {
    return md_fail(err, MD_E_FORMAT, "%s: expected a JSON object with \"regions\"", path);
  }
  const char *key;
  json_t *value;
  json_object_foreach(root, key, value) {
    if (!strcmp(key, "format")) {
      if (!json_is_string(value) || strcmp(json_string_value(value), MD_PRIORS_FORMAT) != 0) {
        return md_fail(err, MD_E_FORMAT, "%s: format: expected \"" MD_PRIORS_FORMAT "\"", path);
      }
    } else if (!strcmp(key, "description")) {
      if (!json_is_string(value)) {
        return md_fail(err, MD_E_FORMAT, "%s: description: expected a string", path);
      }
    } else if (strcmp(key, "regions") != 0) {
      return md_fail(err, MD_E_FORMAT,
                     "%s: unknown key \"%s\" (allowed: format, description, regions)", path, key);
    }
  }
  json_t *regions = json_object_get(root, "regions");
  if (!json_is_object(regions)) {
    return md_fail(err, MD_E_FORMAT, "%s: regions: expected an object of region entries", path);
  }
  priors->regions = calloc(json_object_size(regions) + 1, sizeof *priors->regions);
  if (!priors->regions) return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  json_object_foreach(regions, key, value) {
    md_status status = read_entry(path, key, value, &priors->regions[priors->n++], err);
    if (status != MD_OK) return status;
  }
  return MD_OK;
}

md_status md_priors_read(const char *path, md_priors *priors, md_error *err) {
  memset(priors, 0, sizeof *priors);
  json_t *root;
  md_status status = md_json_load(path, &root, err);
  if (status != MD_OK) return status;
  status = read_top(path, root, priors, err);
  json_decref(root);
  if (status != MD_OK) md_priors_free(priors);
  return status;
}

const md_prior *md_priors_find(const md_priors *priors, const char *region) {
  for (size_t i = 0; i < priors->n; i++) {
    if (!strcmp(priors->regions[i].region, region)) return &priors->regions[i];
  }
  return NULL;
}

void md_priors_free(md_priors *priors) {
  for (size_t i = 0; i < priors->n; i++) free(priors->regions[i].region);
  free(priors->regions);
  memset(priors, 0, sizeof *priors);
}
