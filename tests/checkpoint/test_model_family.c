/* The model-family table (collector/model/family.h): every family is found
 * by its own names and by no other, its entries are complete, the list of
 * supported architectures in messages is the table's, and a parsed
 * config.json carries its family (Qwen2: attention biases, ChatML). */
#include <string.h>

#include "collector/model/family.h"
#include "collector/model/qwen2_config.h"
#include "collector/model/qwen2_family.h"
#include "tests/test_util.h"

static void test_table(void) {
  size_t n = 0;
  for (const md_model_family *const *f = md_model_families; *f; f++, n++) {
    const md_model_family *family = *f;
    CHECK_MSG(family->name && family->hf_architectures && family->hf_architectures[0] &&
                  family->hf_model_type && family->gguf_architecture && family->chat &&
                  family->chat->render && family->chat->question_head &&
                  family->chat->question_tail && family->chat->markup_tokens &&
                  family->chat->stop_tokens && family->chat->stop_tokens[0],
              "family %zu is incomplete", n);
    for (size_t a = 0; family->hf_architectures[a]; a++)
      CHECK(md_model_family_for_hf(family->hf_architectures[a]) == family);
    CHECK(md_model_family_for_gguf(family->gguf_architecture) == family);
  }
  CHECK(n >= 1);
  CHECK(md_model_family_for_hf("Qwen2ForCausalLM") == &md_family_qwen2);
  CHECK(md_model_family_for_hf("LlamaForCausalLM") == NULL);
  CHECK(md_model_family_for_gguf("qwen2") == &md_family_qwen2);
  CHECK(md_model_family_for_gguf("llama") == NULL);
  CHECK(md_family_qwen2.attention_bias && md_family_qwen2.chat == &md_chat_chatml);
  char names[256];
  CHECK(!strcmp(md_model_family_hf_names(names, sizeof names), "Qwen2ForCausalLM"));
  char tiny[4];
  md_model_family_hf_names(tiny, sizeof tiny); /* cut, still a string */
  CHECK(strlen(tiny) < sizeof tiny);
}

static void test_config_family(void) {
  static const char qwen[] =
      "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"hidden_size\": 64, "
      "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
      "\"num_key_value_heads\": 2, \"vocab_size\": 100, \"max_position_embeddings\": 64}";
  md_qwen2_config config;
  md_error err = {0};
  CHECK_MSG(md_qwen2_config_parse("q/config.json", qwen, strlen(qwen), &config, &err) == MD_OK,
            "%s", err.message);
  CHECK(config.family == &md_family_qwen2 && !config.tie_word_embeddings);
  /* An architecture no family lists: refused, the table's names given. */
  static const char llama[] = "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\"}";
  CHECK(md_qwen2_config_parse("l/config.json", llama, strlen(llama), &config, &err) == MD_E_UNSUPPORTED);
  CHECK(strstr(err.message, "l/config.json: architecture LlamaForCausalLM is not supported "
                            "(supported: Qwen2ForCausalLM)") != NULL);
}

int main(void) {
  test_table();
  test_config_family();
  return md_test_finish("model_family");
}
