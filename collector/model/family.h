/* Model families: what differs between decoder-only families that the
 * engine (collector/model/qwen2_model.h, qwen2_forward.h: RMSNorm, GQA
 * attention with NeoX RoPE, SwiGLU) can run. A family says which
 * checkpoints are its own (config.json's "architectures", a GGUF file's
 * general.architecture), whether its q/k/v projections carry biases, and
 * how its instruct models are prompted (collector/tokenizer/chat_template.h).
 *
 * Adding a family is one file defining its md_model_family and one entry in
 * md_model_families (family.c); a family whose block differs from the
 * engine's (another normalisation, RoPE scaling, a sliding window) needs
 * the engine taught that difference first (ARCHITECTURE.md, "A model
 * family"). */
#ifndef MD_COLLECTOR_MODEL_FAMILY_H
#define MD_COLLECTOR_MODEL_FAMILY_H

#include <stdbool.h>
#include <stddef.h>

#include "collector/tokenizer/chat_template.h"

typedef struct md_model_family {
  const char *name;                     /* "qwen2" */
  const char *const *hf_architectures;  /* config.json "architectures" names; NULL-terminated */
  const char *hf_model_type;            /* config.json "model_type" */
  const char *gguf_architecture;        /* GGUF general.architecture */
  bool attention_bias;                  /* q/k/v projections have biases (o has none) */
  bool tied_embeddings_default;         /* tie_word_embeddings when config.json omits it */
  const md_chat_format *chat;           /* how its instruct models are prompted */
} md_model_family;

/* Every family the engine runs, NULL-terminated. */
extern const md_model_family *const md_model_families[];

/* The family whose hf_architectures holds `architecture`, or NULL. */
const md_model_family *md_model_family_for_hf(const char *architecture);

/* The family whose gguf_architecture is `architecture`, or NULL. */
const md_model_family *md_model_family_for_gguf(const char *architecture);

/* Every supported config.json architecture, ", "-separated, into buffer
 * (for messages). Returns buffer. */
const char *md_model_family_hf_names(char *buffer, size_t size);

/* Every supported GGUF general.architecture, the same way. */
const char *md_model_family_gguf_names(char *buffer, size_t size);

#endif
