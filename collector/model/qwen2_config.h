/* Hugging Face config.json -> md_qwen2_config (collector/model/qwen2_model.h).
 *
 * Accepts exactly what Qwen2ForCausalLM computes with here: architectures
 * must list "Qwen2ForCausalLM"; model_type, when present, must be "qwen2";
 * hidden_act "silu"; no sliding-window attention (use_sliding_window false or
 * absent, every layer_types entry "full_attention"); no RoPE scaling
 * (rope_scaling null or absent; rope_parameters, as transformers 5 writes
 * them, only of rope_type "default"); head_dim, when given, equal to
 * hidden_size / num_attention_heads.
 *
 * hidden_size, intermediate_size, num_hidden_layers, num_attention_heads and
 * vocab_size are required: they fix the tensor shapes, and a default would be
 * a silent guess.  The other fields take transformers' Qwen2Config defaults
 * when absent:
 *   num_key_value_heads = 32 (the class default: transformers uses
 *     num_attention_heads only for an explicit null, and so do we),
 *   head_dim = hidden_size / num_attention_heads (also for null), rope_theta = 10000,
 *   rms_norm_eps = 1e-6, max_position_embeddings = 32768,
 *   tie_word_embeddings = false, hidden_act = "silu".
 * rope_theta is read from the top level (transformers 4 files, the published
 * Qwen2/2.5 checkpoints) or from rope_parameters (transformers 5); when both
 * are present they must agree.
 *
 * Every message names the file and the field at fault; syntax errors give the
 * line and column. */
#ifndef MD_COLLECTOR_MODEL_QWEN2_CONFIG_H
#define MD_COLLECTOR_MODEL_QWEN2_CONFIG_H

#include <stddef.h>

#include "collector/model/qwen2_model.h"
#include "base/error.h"

/* Qwen2Config defaults (transformers, models/qwen2/configuration_qwen2.py). */
#define MD_QWEN2_DEFAULT_ROPE_THETA 10000.0
#define MD_QWEN2_DEFAULT_RMS_NORM_EPS 1e-6
#define MD_QWEN2_DEFAULT_MAX_POSITIONS 32768
#define MD_QWEN2_DEFAULT_KV_HEADS 32

/* config.json larger than this is refused: real ones are a few KB. */
#define MD_QWEN2_CONFIG_MAX_BYTES (16u << 20)

/* Reads and validates `path` (a config.json). */
md_status md_qwen2_config_load(const char *path, md_qwen2_config *config, md_error *err);

/* The same from bytes already in memory; `path` names them in messages.
 * config_sha256 is the SHA-256 of exactly these bytes. */
md_status md_qwen2_config_parse(const char *path, const void *bytes, size_t len,
                                md_qwen2_config *config, md_error *err);

#endif
