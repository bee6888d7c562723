/* A Qwen2-family checkpoint in a GGUF file (io/formats/gguf.h), for the
 * loader (qwen2_model.c): the configuration from the metadata, the tensor
 * names, and the expansion of the quantized tensors into the dtypes the
 * engine multiplies (matrices bfloat16, or float32 on request; norms and
 * biases float32). */
#ifndef MD_COLLECTOR_MODEL_QWEN2_GGUF_H
#define MD_COLLECTOR_MODEL_QWEN2_GGUF_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "collector/model/qwen2_model.h"
#include "io/formats/gguf.h"

/* The configuration its metadata gives (ARCH.block_count, context_length,
 * embedding_length, feed_forward_length, attention.head_count,
 * head_count_kv, rope.freq_base, attention.layer_norm_rms_epsilon; ARCH =
 * general.architecture, which must name a family of family.h), the vocabulary
 * size from token_embd.weight, tie_word_embeddings when output.weight is
 * absent, torch_dtype the matrices' dtype in memory, and config_sha256 the
 * SHA-256 of the whole file (the model's identity). Errors name the file
 * and the key. */
md_status md_qwen2_gguf_config(const md_gguf_file *file, bool f32, md_qwen2_config *config,
                               md_error *err);

/* The GGUF name of a tensor the loader asks for by its Hugging Face name
 * ("model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight"); false
 * for a name with no counterpart. */
bool md_qwen2_gguf_name(const char *hf_name, char *gguf_name, size_t size);

/* One tensor to expand into `data` (n_elements of bfloat16 or float32). */
typedef struct md_gguf_expansion {
  const md_gguf_tensor *tensor;
  void *data;
  bool bf16;
} md_gguf_expansion;

/* Expands every job, several tensors at a time (OpenMP threads); the first
 * failure in job order is returned. */
md_status md_qwen2_gguf_expand(const md_gguf_file *file, md_gguf_expansion *jobs, size_t n,
                               md_error *err);

#endif
