/* A Qwen2-family checkpoint (Qwen2ForCausalLM: Qwen2 and Qwen2.5) as loaded
 * from a Hugging Face directory: its configuration and its weights, kept in
 * their file dtype and memory-mapped. ARCHITECTURE.md, "The model", lists the tensor
 * names and what differs from Llama. */
#ifndef MD_COLLECTOR_MODEL_QWEN2_MODEL_H
#define MD_COLLECTOR_MODEL_QWEN2_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/model/family.h"
#include "base/error.h"
#include "base/tensor.h"

typedef struct md_qwen2_config {
  int hidden_size;              /* d_model, e.g. 896 for 0.5B */
  int intermediate_size;        /* SwiGLU width, e.g. 4864 */
  int num_hidden_layers;
  int num_attention_heads;      /* query heads */
  int num_key_value_heads;      /* GQA: query head h uses KV head h / (n_heads / n_kv_heads) */
  int head_dim;                 /* hidden_size / num_attention_heads */
  int vocab_size;
  int max_position_embeddings;
  double rms_norm_eps;
  double rope_theta;
  bool tie_word_embeddings;     /* lm_head is the embedding when true */
  char torch_dtype[16];         /* as declared in config.json, informational */
  char config_sha256[65];       /* hex SHA-256 of config.json's bytes (model identity) */
  const md_model_family *family; /* the family its "architectures" names (family.h) */
} md_qwen2_config;

typedef struct md_qwen2_layer {
  md_tensor input_layernorm;          /* [hidden] */
  md_tensor q_proj, q_bias;           /* [n_heads*head_dim, hidden], [n_heads*head_dim] */
  md_tensor k_proj, k_bias;           /* [n_kv*head_dim, hidden], [n_kv*head_dim] */
  md_tensor v_proj, v_bias;           /* [n_kv*head_dim, hidden], [n_kv*head_dim] */
  md_tensor o_proj;                   /* [hidden, n_heads*head_dim], no bias */
  md_tensor post_attention_layernorm; /* [hidden] */
  md_tensor gate_proj, up_proj;       /* [intermediate, hidden] */
  md_tensor down_proj;                /* [hidden, intermediate] */
} md_qwen2_layer;

typedef struct md_qwen2_weights {
  md_tensor embed_tokens;  /* [vocab, hidden] */
  md_qwen2_layer *layers;  /* [num_hidden_layers] */
  md_tensor norm;          /* [hidden] final RMSNorm */
  md_tensor lm_head;       /* [vocab, hidden]; a copy of embed_tokens' view when tied */
  md_dtype dtype;          /* the dtype of every weight matrix (embedding, lm_head and
                              projections: the loader refuses a mix); norms and biases
                              may differ and carry their own md_tensor.dtype */
  uint64_t weight_bytes;   /* bytes of all tensors used (tied counted once) */
} md_qwen2_weights;

typedef struct md_qwen2_model md_qwen2_model; /* owns the mmaps */

/* Opens a checkpoint directory: config.json, model.safetensors or a sharded
 * set with model.safetensors.index.json. Validates everything before use
 * (see memdecay-calibrate(1), section CHECKPOINTS) and fails with a message
 * naming the file and tensor at fault. */
md_status md_qwen2_model_open(const char *dir, md_qwen2_model **model, md_error *err);

/* How a GGUF checkpoint is expanded in memory. */
typedef struct md_qwen2_open_options {
  bool gguf_f32; /* weight matrices as float32 (default: bfloat16); norms and biases are float32 */
} md_qwen2_open_options;

/* md_qwen2_model_open, or, when `path` is a .gguf file, a GGUF checkpoint
 * (io/formats/gguf.h) as llama.cpp writes one: the configuration from its
 * metadata (collector/model/qwen2_gguf.h; the identity config_sha256 is the
 * file's SHA-256), every tensor the model uses dequantized into memory the
 * model owns (bfloat16 matrices unless options->gguf_f32), a separate
 * output.weight as the output projection. options may be NULL. */
md_status md_qwen2_model_open_with(const char *path, const md_qwen2_open_options *options,
                                   md_qwen2_model **model, md_error *err);

/* The GGUF file a model was read from (its tokenizer's metadata), or NULL
 * for a Hugging Face directory. */
const struct md_gguf_file *md_qwen2_model_gguf(const md_qwen2_model *model);
const md_qwen2_config *md_qwen2_model_config(const md_qwen2_model *model);
const md_qwen2_weights *md_qwen2_model_weights(const md_qwen2_model *model);
void md_qwen2_model_close(md_qwen2_model *model);

/* Notes on a checkpoint that loaded but deserves a look, one line each, for
 * calib/ to print or record (the library never prints): lm_head.weight
 * present although tie_word_embeddings is true (transformers ignores it and
 * so do we), tensors the model does not use (for instance layers beyond
 * num_hidden_layers, a sign that config.json and the weights disagree). */
size_t md_qwen2_model_warning_count(const md_qwen2_model *model);
const char *md_qwen2_model_warning(const md_qwen2_model *model, size_t index);

#endif
