#include "collector/model/qwen2_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/digest.h"
#include "collector/model/family.h"
#include "collector/model/qwen2_config.h"

/* HF's tensor names and llama.cpp's (its convert_hf_to_gguf.py tensor map,
 * gguf-py's TensorNameMap for MODEL_ARCH.QWEN2). */
static const struct {
  const char *hf, *gguf;
} layer_names[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

bool md_qwen2_gguf_name(const char *hf_name, char *gguf_name, size_t size) {
  static const struct {
    const char *hf, *gguf;
  } whole[] = {{"model.embed_tokens.weight", "token_embd.weight"},
               {"model.norm.weight", "output_norm.weight"},
               {"lm_head.weight", "output.weight"}};
  for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
    if (!strcmp(hf_name, whole[i].hf)) return snprintf(gguf_name, size, "%s", whole[i].gguf) < (int)size;
  static const char prefix[] = "model.layers.";
  if (strncmp(hf_name, prefix, sizeof prefix - 1) != 0) return false;
  const char *digits = hf_name + sizeof prefix - 1;
  char *end;
  long layer = strtol(digits, &end, 10);
  if (end == digits || *end != '.' || layer < 0) return false;
  for (size_t i = 0; i < sizeof layer_names / sizeof layer_names[0]; i++)
    if (!strcmp(end + 1, layer_names[i].hf))
      return snprintf(gguf_name, size, "blk.%ld.%s", layer, layer_names[i].gguf) < (int)size;
  return false;
}

/* ARCH.name as a positive int. */
static md_status positive(const md_gguf_file *file, const char *arch, const char *name, int *out,
                          md_error *err) {
  char key[160];
  snprintf(key, sizeof key, "%s.%s", arch, name);
  uint32_t value = 0;
  md_status s = md_gguf_get_u32(file, key, &value, err);
  if (s != MD_OK) return s;
  if (value == 0 || value > (1u << 30))
    return md_fail(err, MD_E_FORMAT, "%s: %s is %u, not a size in [1, 2^30]", md_gguf_path(file),
                   key, value);
  *out = (int)value;
  return MD_OK;
}

/* ARCH.name as a positive finite float, or `fallback` when absent. */
static md_status positive_float(const md_gguf_file *file, const char *arch, const char *name,
                                double fallback, bool required, double *out, md_error *err) {
  char key[160];
  snprintf(key, sizeof key, "%s.%s", arch, name);
  if (!md_gguf_has_key(file, key)) {
    if (required) return md_fail(err, MD_E_FORMAT, "%s: %s is missing", md_gguf_path(file), key);
    *out = fallback;
    return MD_OK;
  }
  double value = 0;
  md_status s = md_gguf_get_f64(file, key, &value, err);
  if (s != MD_OK) return s;
  if (!(value > 0) || value > 1e30)
    return md_fail(err, MD_E_FORMAT, "%s: %s is %g, not a positive number", md_gguf_path(file),
                   key, value);
  *out = value;
  return MD_OK;
}

/* Features of other models the engine does not run. */
static md_status refuse_unsupported(const md_gguf_file *file, const char *arch, md_error *err) {
  char key[160];
  snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
  const char *scaling = NULL;
  if (md_gguf_has_key(file, key) && md_gguf_get_string(file, key, &scaling, NULL, err) == MD_OK &&
      strcmp(scaling, "none") != 0)
    return md_fail(err, MD_E_UNSUPPORTED, "%s: %s is \"%.40s\": RoPE scaling is not supported",
                   md_gguf_path(file), key, scaling);
  snprintf(key, sizeof key, "%s.attention.sliding_window", arch);
  if (md_gguf_has_key(file, key))
    return md_fail(err, MD_E_UNSUPPORTED, "%s: %s: sliding-window attention is not supported",
                   md_gguf_path(file), key);
  return MD_OK;
}

md_status md_qwen2_gguf_config(const md_gguf_file *file, bool f32, md_qwen2_config *config,
                               md_error *err) {
  memset(config, 0, sizeof *config);
  const char *path = md_gguf_path(file), *arch = NULL;
  md_status s = md_gguf_get_string(file, "general.architecture", &arch, NULL, err);
  if (s != MD_OK) return s;
  config->family = md_model_family_for_gguf(arch);
  if (!config->family) {
    char supported[256];
    md_model_family_gguf_names(supported, sizeof supported);
    return md_fail(err, MD_E_UNSUPPORTED, "%s: general.architecture \"%.60s\" is not supported "
                   "(supported: %s)", path, arch, supported);
  }
  if ((s = positive(file, arch, "block_count", &config->num_hidden_layers, err)) ||
      (s = positive(file, arch, "context_length", &config->max_position_embeddings, err)) ||
      (s = positive(file, arch, "embedding_length", &config->hidden_size, err)) ||
      (s = positive(file, arch, "feed_forward_length", &config->intermediate_size, err)) ||
      (s = positive(file, arch, "attention.head_count", &config->num_attention_heads, err)))
    return s;
  char key[160];
  snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
  config->num_key_value_heads = config->num_attention_heads; /* llama.cpp's default */
  if (md_gguf_has_key(file, key) &&
      (s = positive(file, arch, "attention.head_count_kv", &config->num_key_value_heads, err)))
    return s;
  if ((s = positive_float(file, arch, "rope.freq_base", MD_QWEN2_DEFAULT_ROPE_THETA, false,
                          &config->rope_theta, err)) ||
      (s = positive_float(file, arch, "attention.layer_norm_rms_epsilon", 0, true,
                          &config->rms_norm_eps, err)) ||
      (s = refuse_unsupported(file, arch, err)))
    return s;
  if (config->hidden_size % config->num_attention_heads != 0)
    return md_fail(err, MD_E_FORMAT, "%s: %s.embedding_length %d is not a multiple of "
                   "%s.attention.head_count %d", path, arch, config->hidden_size, arch,
                   config->num_attention_heads);
  config->head_dim = config->hidden_size / config->num_attention_heads;
  snprintf(key, sizeof key, "%s.attention.key_length", arch);
  int key_length = 0;
  if (md_gguf_has_key(file, key) &&
      ((s = positive(file, arch, "attention.key_length", &key_length, err)) ||
       key_length != config->head_dim))
    return s ? s : md_fail(err, MD_E_UNSUPPORTED, "%s: %s is %d, not embedding_length / "
                           "head_count = %d", path, key, key_length, config->head_dim);
  const md_gguf_tensor *embedding;
  if ((s = md_gguf_get_tensor(file, "token_embd.weight", &embedding, err))) return s;
  if (embedding->n_dims != 2 || embedding->ne[1] > (1 << 30))
    return md_fail(err, MD_E_FORMAT, "%s: tensor token_embd.weight is not a [vocabulary, "
                   "embedding_length] matrix", path);
  config->vocab_size = (int)embedding->ne[1];
  config->tie_word_embeddings = md_gguf_find_tensor(file, "output.weight") == NULL;
  snprintf(config->torch_dtype, sizeof config->torch_dtype, "%s", f32 ? "float32" : "bfloat16");
  return md_sha256_file(path, config->config_sha256, err);
}

md_status md_qwen2_gguf_expand(const md_gguf_file *file, md_gguf_expansion *jobs, size_t n,
                               md_error *err) {
  md_status *status = calloc(n + 1, sizeof *status);
  md_error *errors = calloc(n + 1, sizeof *errors);
  if (!status || !errors) {
    free(status);
    free(errors);
    return md_fail(err, MD_E_NOMEM, "%s: out of memory", md_gguf_path(file));
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t i = 0; i < n; i++) {
    const md_gguf_expansion *job = &jobs[i];
    status[i] = job->bf16 ? md_gguf_tensor_dequantize_bf16(file, job->tensor, job->data, &errors[i])
                          : md_gguf_tensor_dequantize(file, job->tensor, job->data, &errors[i]);
  }
  md_status first = MD_OK;
  for (size_t i = 0; i < n && first == MD_OK; i++)
    if (status[i] != MD_OK) {
      first = status[i];
      if (err) *err = errors[i];
    }
  free(status);
  free(errors);
  return first;
}
