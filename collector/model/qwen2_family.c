#include "collector/model/qwen2_family.h"

static const char *const qwen2_architectures[] = {"Qwen2ForCausalLM", NULL};

const md_model_family md_family_qwen2 = {
    .name = "qwen2",
    .hf_architectures = qwen2_architectures,
    .hf_model_type = "qwen2",
    .gguf_architecture = "qwen2",
    .attention_bias = true,
    /* Qwen2Config's default (configuration_qwen2.py). */
    .tied_embeddings_default = false,
    .chat = &md_chat_chatml,
};
