/* A checkpoint's config.json (collector/model/qwen2_config.h): md_qwen2_config_load
 * on the file and md_qwen2_config_parse on the same bytes.
 *
 * Invariants: both agree (status and, on success, every field); a failure
 * is MD_E_FORMAT, MD_E_UNSUPPORTED or MD_E_IO naming the file; on success
 * the required sizes are positive, head_dim x num_attention_heads =
 * hidden_size, the KV heads divide the query heads, eps and theta are
 * positive and finite, and config_sha256 is 64 lower-case hex digits. */
#include <math.h>

#include "collector/model/qwen2_config.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_input_file(data, size, ".config.json");
  md_qwen2_config loaded, parsed;
  memset(&loaded, 0, sizeof loaded);
  memset(&parsed, 0, sizeof parsed);
  md_error err = {0}, err2 = {0};
  md_status status = md_qwen2_config_load(path, &loaded, &err);
  md_status status2 = md_qwen2_config_parse(path, data, size, &parsed, &err2);
  FUZZ_CHECK_MSG(status == status2, "load %d (%s), parse %d (%s)", (int)status, err.message,
                 (int)status2, err2.message);
  const unsigned failures = FUZZ_ST(MD_E_FORMAT) | FUZZ_ST(MD_E_UNSUPPORTED) | FUZZ_ST(MD_E_IO);
  if (status != MD_OK) {
    fuzz_check_failure(status, &err, failures, path);
    fuzz_check_failure(status2, &err2, failures, path);
    return 0;
  }
  const md_qwen2_config *c = &loaded;
  FUZZ_CHECK(c->hidden_size > 0 && c->intermediate_size > 0 && c->num_hidden_layers > 0);
  FUZZ_CHECK(c->num_attention_heads > 0 && c->num_key_value_heads > 0 && c->vocab_size > 0);
  FUZZ_CHECK(c->head_dim > 0 && (long long)c->head_dim * c->num_attention_heads == c->hidden_size);
  FUZZ_CHECK(c->num_attention_heads % c->num_key_value_heads == 0);
  FUZZ_CHECK(c->max_position_embeddings > 0);
  FUZZ_CHECK(isfinite(c->rms_norm_eps) && c->rms_norm_eps > 0);
  FUZZ_CHECK(isfinite(c->rope_theta) && c->rope_theta > 0);
  FUZZ_CHECK(memchr(c->torch_dtype, '\0', sizeof c->torch_dtype) != NULL);
  FUZZ_CHECK(strlen(c->config_sha256) == 64);
  for (int i = 0; i < 64; i++) {
    char h = c->config_sha256[i];
    FUZZ_CHECK((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f'));
  }
  FUZZ_CHECK(parsed.hidden_size == c->hidden_size && parsed.vocab_size == c->vocab_size);
  FUZZ_CHECK(parsed.num_key_value_heads == c->num_key_value_heads);
  FUZZ_CHECK(parsed.rope_theta == c->rope_theta && parsed.rms_norm_eps == c->rms_norm_eps);
  FUZZ_CHECK(parsed.tie_word_embeddings == c->tie_word_embeddings);
  FUZZ_CHECK(!strcmp(parsed.config_sha256, c->config_sha256));
  FUZZ_CHECK(!strcmp(parsed.torch_dtype, c->torch_dtype));
  return 0;
}
