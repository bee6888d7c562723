/* md_qwen2_model_open on the checkpoints that transformers wrote
 * (make_checkpoints.py): configuration, dtypes, shapes, byte counts and
 * sample values against what transformers and safetensors/torch report in
 * reference.json. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "collector/model/qwen2_model.h"
#include "tests/checkpoint/checkpoint_util.h"
#include "tests/test_util.h"

/* Every tensor the model uses has the dtype and shape safetensors reports. */
static void check_tensors(const md_qwen2_weights *weights, int layers, json_t *tensors,
                          bool tied, const char *label) {
  const char *name;
  json_t *info;
  size_t used = 0;
  json_object_foreach(tensors, name, info) {
    const md_tensor *tensor = weight_named(weights, layers, name);
    CHECK_MSG(tensor != NULL, "%s: %s not mapped", label, name);
    if (!tensor) continue;
    if (tied && !strcmp(name, "lm_head.weight")) continue;
    used++;
    CHECK_MSG(!strcmp(md_dtype_name(tensor->dtype),
                      json_string_value(json_object_get(info, "dtype"))),
              "%s: %s dtype %s", label, name, md_dtype_name(tensor->dtype));
    json_t *shape = json_object_get(info, "shape");
    CHECK_MSG(tensor->ndim == (int)json_array_size(shape), "%s: %s ndim %d", label, name,
              tensor->ndim);
    for (int d = 0; d < tensor->ndim && d < (int)json_array_size(shape); d++)
      CHECK_MSG(tensor->shape[d] == json_integer_value(json_array_get(shape, d)),
                "%s: %s shape[%d] = %" PRId64, label, name, d, tensor->shape[d]);
    CHECK_MSG(tensor->name && !strcmp(tensor->name, name), "%s: %s named %s", label, name,
              tensor->name ? tensor->name : "(null)");
  }
  /* 2 + 12 per layer + lm_head when untied */
  CHECK_MSG(used == 2 + 12 * (size_t)layers + (tied ? 0 : 1), "%s: %zu tensors used", label,
            used);
}

static void check_samples(const md_qwen2_weights *weights, int layers, json_t *samples,
                          const char *label) {
  size_t index;
  json_t *sample;
  json_array_foreach(samples, index, sample) {
    const char *name = json_string_value(json_object_get(sample, "tensor"));
    const md_tensor *tensor = weight_named(weights, layers, name);
    size_t element = (size_t)json_integer_value(json_object_get(sample, "index"));
    float want = (float)json_number_value(json_object_get(sample, "value"));
    CHECK_MSG(tensor && element * md_dtype_size(tensor->dtype) < tensor->nbytes,
              "%s: %s[%zu] out of range", label, name, element);
    if (!tensor || element * md_dtype_size(tensor->dtype) >= tensor->nbytes) continue;
    float got = tensor_element(tensor, element);
    CHECK_MSG(same_float(got, want), "%s: %s[%zu] = %.9g, reference %.9g", label, name,
              element, got, want);
  }
}

static void check_checkpoint(const char *label, json_t *want) {
  char dir[4096], fixture[256];
  snprintf(fixture, sizeof fixture, "fixtures/%s", label);
  fixture_path(dir, sizeof dir, fixture);
  md_qwen2_model *model = NULL;
  md_error err = {0};
  md_status status = md_qwen2_model_open(dir, &model, &err);
  CHECK_MSG(status == MD_OK, "%s: %s", label, err.message);
  if (status != MD_OK) return;
  const md_qwen2_config *config = md_qwen2_model_config(model);
  const md_qwen2_weights *weights = md_qwen2_model_weights(model);
  check_config_fields(config, json_object_get(want, "config"), label);
  CHECK_MSG(!strcmp(md_dtype_name(weights->dtype),
                    json_string_value(json_object_get(want, "dtype"))),
            "%s: dtype %s", label, md_dtype_name(weights->dtype));
  CHECK_MSG(weights->weight_bytes ==
                (uint64_t)json_integer_value(json_object_get(want, "weight_bytes")),
            "%s: weight_bytes %" PRIu64, label, weights->weight_bytes);
  check_tensors(weights, config->num_hidden_layers, json_object_get(want, "tensors"),
                config->tie_word_embeddings, label);
  check_samples(weights, config->num_hidden_layers, json_object_get(want, "samples"), label);
  if (config->tie_word_embeddings)
    CHECK(weights->lm_head.data == weights->embed_tokens.data);
  else
    CHECK(weights->lm_head.data != weights->embed_tokens.data);
  CHECK_MSG(md_qwen2_model_warning_count(model) == 0, "%s: warning %s", label,
            md_qwen2_model_warning(model, 0));
  md_qwen2_model_close(model);
}

int main(void) {
  json_t *reference = load_reference();
  json_t *checkpoints = json_object_get(reference, "checkpoints");
  CHECK(json_object_size(checkpoints) == 3);
  const char *label;
  json_t *want;
  json_object_foreach(checkpoints, label, want) check_checkpoint(label, want);
  json_decref(reference);
  return md_test_finish("checkpoint_qwen2_model");
}
