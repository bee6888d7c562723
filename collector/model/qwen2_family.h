/* The Qwen2 family: Qwen2 and Qwen2.5 (transformers' Qwen2ForCausalLM,
 * models/qwen2/modeling_qwen2.py): q/k/v biases, ChatML. */
#ifndef MD_COLLECTOR_MODEL_QWEN2_FAMILY_H
#define MD_COLLECTOR_MODEL_QWEN2_FAMILY_H

#include "collector/model/family.h"

extern const md_model_family md_family_qwen2;

#endif
