/* Helpers shared by the checkpoint tests: paths under the source tree, the
 * reference values written by make_checkpoints.py, and element access. */
#ifndef MD_TESTS_CHECKPOINT_UTIL_H
#define MD_TESTS_CHECKPOINT_UTIL_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/qwen2_model.h"
#include "base/tensor.h"
#include "tests/test_util.h"

/* "<MD_SOURCE_ROOT>/tests/checkpoint/<relative>" */
static inline void fixture_path(char *buf, size_t size, const char *relative) {
  const char *root = getenv("MD_SOURCE_ROOT");
  snprintf(buf, size, "%s/tests/checkpoint/%s", root ? root : ".", relative);
}

static inline json_t *load_reference(void) {
  char path[4096];
  fixture_path(path, sizeof path, "reference.json");
  json_error_t jerr;
  json_t *reference = json_load_file(path, 0, &jerr);
  if (!reference) {
    fprintf(stderr, "%s:%d:%d: %s\n", path, jerr.line, jerr.column, jerr.text);
    exit(1);
  }
  return reference;
}

/* Element `index` of a tensor, widened to float. */
static inline float tensor_element(const md_tensor *tensor, size_t index) {
  uint16_t half;
  float value;
  switch (tensor->dtype) {
    case MD_DTYPE_F32:
      memcpy(&value, (const char *)tensor->data + 4 * index, 4);
      return value;
    case MD_DTYPE_F16:
      memcpy(&half, (const char *)tensor->data + 2 * index, 2);
      return md_f16_to_f32(half);
    case MD_DTYPE_BF16:
      memcpy(&half, (const char *)tensor->data + 2 * index, 2);
      return md_bf16_to_f32(half);
  }
  return 0;
}

/* Same float, bit for bit (so -0.0 differs from 0.0). */
static inline int same_float(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* The md_tensor the model holds for a safetensors name, or NULL. */
static inline const md_tensor *weight_named(const md_qwen2_weights *weights, int layers,
                                     const char *name) {
  if (!strcmp(name, "model.embed_tokens.weight")) return &weights->embed_tokens;
  if (!strcmp(name, "model.norm.weight")) return &weights->norm;
  if (!strcmp(name, "lm_head.weight")) return &weights->lm_head;
  int layer, used = 0;
  if (sscanf(name, "model.layers.%d.%n", &layer, &used) != 1 || !used || layer >= layers)
    return NULL;
  const md_qwen2_layer *l = &weights->layers[layer];
  const char *rest = name + used;
  const struct {
    const char *suffix;
    const md_tensor *tensor;
  } table[] = {
      {"input_layernorm.weight", &l->input_layernorm},
      {"self_attn.q_proj.weight", &l->q_proj},
      {"self_attn.q_proj.bias", &l->q_bias},
      {"self_attn.k_proj.weight", &l->k_proj},
      {"self_attn.k_proj.bias", &l->k_bias},
      {"self_attn.v_proj.weight", &l->v_proj},
      {"self_attn.v_proj.bias", &l->v_bias},
      {"self_attn.o_proj.weight", &l->o_proj},
      {"post_attention_layernorm.weight", &l->post_attention_layernorm},
      {"mlp.gate_proj.weight", &l->gate_proj},
      {"mlp.up_proj.weight", &l->up_proj},
      {"mlp.down_proj.weight", &l->down_proj},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (!strcmp(rest, table[i].suffix)) return table[i].tensor;
  return NULL;
}

/* Every field of `config` against the reference's values (reference.json).
 * Used by the config and model tests. */
static inline void check_config_fields(const md_qwen2_config *config, json_t *want,
                                       const char *label) {
  const struct {
    const char *field;
    int got;
  } ints[] = {
      {"hidden_size", config->hidden_size},
      {"intermediate_size", config->intermediate_size},
      {"num_hidden_layers", config->num_hidden_layers},
      {"num_attention_heads", config->num_attention_heads},
      {"num_key_value_heads", config->num_key_value_heads},
      {"head_dim", config->head_dim},
      {"vocab_size", config->vocab_size},
      {"max_position_embeddings", config->max_position_embeddings},
  };
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
    CHECK_MSG(ints[i].got == json_integer_value(json_object_get(want, ints[i].field)),
              "%s: %s = %d", label, ints[i].field, ints[i].got);
  CHECK_MSG(config->rms_norm_eps == json_number_value(json_object_get(want, "rms_norm_eps")),
            "%s: rms_norm_eps %.17g", label, config->rms_norm_eps);
  CHECK_MSG(config->rope_theta == json_number_value(json_object_get(want, "rope_theta")),
            "%s: rope_theta %.17g", label, config->rope_theta);
  CHECK_MSG(config->tie_word_embeddings ==
                json_is_true(json_object_get(want, "tie_word_embeddings")),
            "%s: tie_word_embeddings", label);
  CHECK_MSG(!strcmp(config->torch_dtype, json_string_value(json_object_get(want, "torch_dtype"))),
            "%s: torch_dtype '%s'", label, config->torch_dtype);
  CHECK_MSG(!strcmp(config->config_sha256,
                    json_string_value(json_object_get(want, "config_sha256"))),
            "%s: sha256 %s", label, config->config_sha256);
}

#endif
