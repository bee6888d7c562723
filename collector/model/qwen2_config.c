#include "collector/model/qwen2_config.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/digest.h"

/* A compact JSON rendering of a value for messages, cut to fit `size`. */
static const char *show(json_t *value, char *buf, size_t size) {
  char *text = json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT);
  snprintf(buf, size, "%s", text ? text : "?");
  if (text && strlen(text) >= size && size > 4) memcpy(buf + size - 4, "...", 4);
  free(text);
  return buf;
}

/* absent, or null where null means "use the default" */
static bool absent(json_t *value, bool null_is_absent) {
  return !value || (null_is_absent && json_is_null(value));
}

static md_status get_positive_int(const char *path, json_t *root, const char *field,
                                  bool required, int fallback, int *out, md_error *err) {
  json_t *value = json_object_get(root, field);
  if (absent(value, !required)) {
    if (required) return md_fail(err, MD_E_FORMAT, "%s: '%s' is missing", path, field);
    *out = fallback;
    return MD_OK;
  }
  if (!json_is_integer(value) || json_integer_value(value) <= 0 ||
      json_integer_value(value) > INT_MAX) {
    char text[64];
    return md_fail(err, MD_E_FORMAT, "%s: '%s' must be a positive integer, got %s", path, field,
                   show(value, text, sizeof text));
  }
  *out = (int)json_integer_value(value);
  return MD_OK;
}

static md_status check_positive_number(const char *path, const char *field, json_t *value,
                                       double *out, md_error *err) {
  if (!json_is_number(value) || !(json_number_value(value) > 0) ||
      !isfinite(json_number_value(value))) {
    char text[64];
    return md_fail(err, MD_E_FORMAT, "%s: '%s' must be a positive number, got %s", path, field,
                   show(value, text, sizeof text));
  }
  *out = json_number_value(value);
  return MD_OK;
}

static md_status get_positive_number(const char *path, json_t *root, const char *field,
                                     double fallback, double *out, md_error *err) {
  json_t *value = json_object_get(root, field);
  if (!value) {
    *out = fallback;
    return MD_OK;
  }
  return check_positive_number(path, field, value, out, err);
}

static md_status get_bool(const char *path, json_t *root, const char *field, bool fallback,
                          bool *out, md_error *err) {
  json_t *value = json_object_get(root, field);
  if (!value) {
    *out = fallback;
    return MD_OK;
  }
  if (!json_is_boolean(value)) {
    char text[64];
    return md_fail(err, MD_E_FORMAT, "%s: '%s' must be true or false, got %s", path, field,
                   show(value, text, sizeof text));
  }
  *out = json_is_true(value);
  return MD_OK;
}

/* The first name of "architectures" that a family of the table
 * (collector/model/family.h) lists decides the family. */
static md_status check_architecture(const char *path, json_t *root, md_qwen2_config *config,
                                    md_error *err) {
  json_t *list = json_object_get(root, "architectures");
  char text[256], supported[256];
  md_model_family_hf_names(supported, sizeof supported);
  if (!list)
    return md_fail(err, MD_E_FORMAT, "%s: 'architectures' is missing (expected one of [\"%s\"])",
                   path, supported);
  if (!json_is_array(list) || json_array_size(list) == 0)
    return md_fail(err, MD_E_FORMAT,
                   "%s: 'architectures' must be a non-empty list of names, got %s", path,
                   show(list, text, sizeof text));
  size_t index;
  json_t *name;
  json_array_foreach(list, index, name) {
    if (!json_is_string(name))
      return md_fail(err, MD_E_FORMAT,
                     "%s: 'architectures' must be a non-empty list of names, got %s", path,
                     show(list, text, sizeof text));
    config->family = md_model_family_for_hf(json_string_value(name));
    if (config->family) return MD_OK;
  }
  if (json_array_size(list) == 1)
    snprintf(text, sizeof text, "%s", json_string_value(json_array_get(list, 0)));
  else
    show(list, text, sizeof text);
  return md_fail(err, MD_E_UNSUPPORTED, "%s: architecture %s is not supported (supported: %s)",
                 path, text, supported);
}

static md_status check_string_field(const char *path, json_t *root, const char *field,
                                    const char *expected, bool required, md_error *err) {
  json_t *value = json_object_get(root, field);
  char text[64];
  if (!value) {
    if (!required) return MD_OK;
    return md_fail(err, MD_E_FORMAT, "%s: '%s' is missing", path, field);
  }
  if (!json_is_string(value))
    return md_fail(err, MD_E_FORMAT, "%s: '%s' must be a string, got %s", path, field,
                   show(value, text, sizeof text));
  if (strcmp(json_string_value(value), expected) != 0)
    return md_fail(err, MD_E_UNSUPPORTED, "%s: '%s' is \"%s\"; only \"%s\" is supported", path,
                   field, json_string_value(value), expected);
  return MD_OK;
}

/* Sliding-window attention changes which keys a query sees; refuse it. */
static md_status check_full_attention(const char *path, json_t *root, md_error *err) {
  bool sliding;
  md_status status = get_bool(path, root, "use_sliding_window", false, &sliding, err);
  if (status != MD_OK) return status;
  if (sliding)
    return md_fail(err, MD_E_UNSUPPORTED,
                   "%s: 'use_sliding_window' is true: sliding-window attention is not supported "
                   "(set it to false to use full attention in every layer)", path);
  json_t *types = json_object_get(root, "layer_types");
  if (absent(types, true)) return MD_OK;
  char text[64];
  if (!json_is_array(types))
    return md_fail(err, MD_E_FORMAT, "%s: 'layer_types' must be a list, got %s", path,
                   show(types, text, sizeof text));
  size_t index;
  json_t *type;
  json_array_foreach(types, index, type) {
    if (!json_is_string(type) || strcmp(json_string_value(type), "full_attention") != 0)
      return md_fail(err, MD_E_UNSUPPORTED,
                     "%s: 'layer_types'[%zu] is %s; only \"full_attention\" is supported", path,
                     index, show(type, text, sizeof text));
  }
  return MD_OK;
}

/* rope_parameters (transformers 5) carries rope_type and rope_theta. */
static md_status read_rope_parameters(const char *path, json_t *params, double *theta,
                                      bool *have_theta, md_error *err) {
  char text[128];
  if (!json_is_object(params))
    return md_fail(err, MD_E_FORMAT, "%s: 'rope_parameters' must be an object, got %s", path,
                   show(params, text, sizeof text));
  json_t *type = json_object_get(params, "rope_type");
  if (!type) type = json_object_get(params, "type");
  if (type && (!json_is_string(type) || strcmp(json_string_value(type), "default") != 0))
    return md_fail(err, MD_E_UNSUPPORTED,
                   "%s: 'rope_parameters' has rope_type %s; only \"default\" (no RoPE scaling) "
                   "is supported", path, show(type, text, sizeof text));
  json_t *value = json_object_get(params, "rope_theta");
  if (!value) return MD_OK;
  *have_theta = true;
  return check_positive_number(path, "rope_parameters.rope_theta", value, theta, err);
}

static md_status read_rope(const char *path, json_t *root, md_qwen2_config *config,
                           md_error *err) {
  char text[128];
  json_t *scaling = json_object_get(root, "rope_scaling");
  if (!absent(scaling, true))
    return md_fail(err, MD_E_UNSUPPORTED,
                   "%s: 'rope_scaling' is %s; RoPE scaling is not supported (only null)", path,
                   show(scaling, text, sizeof text));
  md_status status = get_positive_number(path, root, "rope_theta", MD_QWEN2_DEFAULT_ROPE_THETA,
                                         &config->rope_theta, err);
  if (status != MD_OK) return status;
  json_t *params = json_object_get(root, "rope_parameters");
  if (absent(params, true)) return MD_OK;
  double theta = 0;
  bool have_theta = false;
  status = read_rope_parameters(path, params, &theta, &have_theta, err);
  if (status != MD_OK || !have_theta) return status;
  if (json_object_get(root, "rope_theta") && theta != config->rope_theta)
    return md_fail(err, MD_E_FORMAT,
                   "%s: 'rope_theta' (%.17g) and 'rope_parameters.rope_theta' (%.17g) disagree",
                   path, config->rope_theta, theta);
  config->rope_theta = theta;
  return MD_OK;
}

static md_status read_sizes(const char *path, json_t *root, md_qwen2_config *config,
                            md_error *err) {
  const struct {
    const char *field;
    int *out;
  } required[] = {
      {"hidden_size", &config->hidden_size},
      {"intermediate_size", &config->intermediate_size},
      {"num_hidden_layers", &config->num_hidden_layers},
      {"num_attention_heads", &config->num_attention_heads},
      {"vocab_size", &config->vocab_size},
  };
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
    md_status status = get_positive_int(path, root, required[i].field, true, 0, required[i].out,
                                        err);
    if (status != MD_OK) return status;
  }
  /* transformers: an absent field takes the class default (32), an explicit
   * null means "as many as the query heads". */
  json_t *kv_heads = json_object_get(root, "num_key_value_heads");
  int kv_default = kv_heads ? config->num_attention_heads : MD_QWEN2_DEFAULT_KV_HEADS;
  md_status status = get_positive_int(path, root, "num_key_value_heads", false, kv_default,
                                      &config->num_key_value_heads, err);
  if (status == MD_OK)
    status = get_positive_int(path, root, "max_position_embeddings", false,
                              MD_QWEN2_DEFAULT_MAX_POSITIONS, &config->max_position_embeddings,
                              err);
  return status;
}

static md_status check_heads(const char *path, json_t *root, md_qwen2_config *config,
                             md_error *err) {
  if (config->hidden_size % config->num_attention_heads != 0)
    return md_fail(err, MD_E_FORMAT,
                   "%s: 'hidden_size' %d is not divisible by 'num_attention_heads' %d", path,
                   config->hidden_size, config->num_attention_heads);
  if (config->num_attention_heads % config->num_key_value_heads != 0)
    return md_fail(err, MD_E_FORMAT,
                   "%s: 'num_attention_heads' %d is not divisible by 'num_key_value_heads' %d%s",
                   path, config->num_attention_heads, config->num_key_value_heads,
                   json_object_get(root, "num_key_value_heads")
                       ? ""
                       : " (transformers' default when the field is absent; give it explicitly)");
  config->head_dim = config->hidden_size / config->num_attention_heads;
  int declared;
  md_status status = get_positive_int(path, root, "head_dim", false, config->head_dim,
                                      &declared, err);
  if (status != MD_OK) return status;
  if (declared != config->head_dim)
    return md_fail(err, MD_E_UNSUPPORTED,
                   "%s: 'head_dim' %d differs from hidden_size / num_attention_heads = %d "
                   "(not supported)", path, declared, config->head_dim);
  if (config->head_dim % 2 != 0)
    return md_fail(err, MD_E_FORMAT,
                   "%s: head_dim %d (hidden_size / num_attention_heads) is odd; RoPE pairs "
                   "element j with j + head_dim/2", path, config->head_dim);
  return MD_OK;
}

static md_status read_torch_dtype(const char *path, json_t *root, md_qwen2_config *config,
                                  md_error *err) {
  json_t *value = json_object_get(root, "torch_dtype");
  const char *field = "torch_dtype";
  if (absent(value, true)) {
    value = json_object_get(root, "dtype"); /* transformers 5's name */
    field = "dtype";
  }
  config->torch_dtype[0] = '\0';
  if (absent(value, true)) return MD_OK;
  if (!json_is_string(value)) {
    char text[64];
    return md_fail(err, MD_E_FORMAT, "%s: '%s' must be a string, got %s", path, field,
                   show(value, text, sizeof text));
  }
  snprintf(config->torch_dtype, sizeof config->torch_dtype, "%s", json_string_value(value));
  return MD_OK;
}

static md_status read_config(const char *path, json_t *root, md_qwen2_config *config,
                             md_error *err) {
  if (!json_is_object(root))
    return md_fail(err, MD_E_FORMAT, "%s: the top level is not a JSON object", path);
  md_status status = check_architecture(path, root, config, err);
  if (status == MD_OK)
    status = check_string_field(path, root, "model_type", config->family->hf_model_type, false, err);
  if (status == MD_OK) status = check_string_field(path, root, "hidden_act", "silu", false, err);
  if (status == MD_OK) status = check_full_attention(path, root, err);
  if (status == MD_OK) status = read_sizes(path, root, config, err);
  if (status == MD_OK) status = check_heads(path, root, config, err);
  if (status == MD_OK)
    status = get_positive_number(path, root, "rms_norm_eps", MD_QWEN2_DEFAULT_RMS_NORM_EPS,
                                 &config->rms_norm_eps, err);
  if (status == MD_OK) status = read_rope(path, root, config, err);
  if (status == MD_OK)
    status = get_bool(path, root, "tie_word_embeddings", config->family->tied_embeddings_default,
                      &config->tie_word_embeddings, err);
  if (status == MD_OK) status = read_torch_dtype(path, root, config, err);
  return status;
}

md_status md_qwen2_config_parse(const char *path, const void *bytes, size_t len,
                                md_qwen2_config *config, md_error *err) {
  memset(config, 0, sizeof *config);
  json_error_t jerr;
  json_t *root = json_loadb(bytes, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!root)
    return md_fail(err, MD_E_FORMAT, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
  md_status status = read_config(path, root, config, err);
  json_decref(root);
  if (status == MD_OK) md_sha256_bytes(bytes, len, config->config_sha256);
  return status;
}

md_status md_qwen2_config_load(const char *path, md_qwen2_config *config, md_error *err) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: %s", path, strerror(errno));
  char *bytes = malloc(MD_QWEN2_CONFIG_MAX_BYTES + 1);
  if (!bytes) {
    fclose(fp);
    return md_fail(err, MD_E_NOMEM, "%s: out of memory", path);
  }
  size_t len = fread(bytes, 1, MD_QWEN2_CONFIG_MAX_BYTES + 1, fp);
  md_status status = MD_OK;
  if (ferror(fp))
    status = md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: read failed: %s", path, strerror(errno));
  else if (len > MD_QWEN2_CONFIG_MAX_BYTES)
    status = md_fail(err, MD_E_FORMAT, "%s: larger than %u bytes; not a model config.json",
                     path, MD_QWEN2_CONFIG_MAX_BYTES);
  fclose(fp);
  if (status == MD_OK) status = md_qwen2_config_parse(path, bytes, len, config, err);
  free(bytes);
  return status;
}
