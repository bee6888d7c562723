/* Bad input to the forward pass: each is refused with a status and a message
 * that says what is wrong, and leaves the state usable (the next valid call
 * gives the same result as if the bad one had never been made). Uses the
 * theta1e4_f32 fixture checkpoint (max_position_embeddings = 400). */
#include <stdlib.h>
#include <string.h>

#include "collector/model/qwen2_forward.h"
#include "kernels/cpu/cpu.h"
#include "tests/model/fixture.h"
#include "tests/test_util.h"

static md_qwen2_model *model;
static md_kernels *kernels;

static md_qwen2_forward *new_forward(int64_t capacity) {
  md_qwen2_forward_options options = {.capacity = capacity};
  md_qwen2_forward *fw = NULL;
  md_error err;
  if (md_qwen2_forward_new(md_qwen2_model_config(model), md_qwen2_model_weights(model), kernels,
                           &options, &fw, &err) != MD_OK) {
    fprintf(stderr, "forward_new: %s\n", err.message);
    exit(1);
  }
  return fw;
}

#define CHECK_REFUSED(call, want_status, want_text)                                       \
  do {                                                                                    \
    md_error err_;                                                                        \
    md_error_clear(&err_);                                                                \
    md_status got_ = (call);                                                              \
    CHECK_MSG(got_ == (want_status), "status %d, message \"%s\"", (int)got_, err_.message); \
    CHECK_MSG(strstr(err_.message, want_text) != NULL, "message \"%s\" lacks \"%s\"",     \
              err_.message, want_text);                                                   \
  } while (0)

static void test_too_long(const int32_t *tokens) {
  md_qwen2_forward *fw = new_forward(0); /* capacity = max_position_embeddings = 400 */
  md_error err;
  CHECK_REFUSED(md_qwen2_prefill(fw, tokens, 401, NULL, &err_), MD_E_INVALID,
                "beyond the model's max_position_embeddings (400 positions)");
  CHECK(md_qwen2_position(fw) == 0);
  /* Exactly 400 positions are fine; one more decode step is not. */
  CHECK(md_qwen2_prefill(fw, tokens, 399, NULL, &err) == MD_OK);
  CHECK(md_qwen2_decode(fw, 5, &err) == MD_OK);
  CHECK(md_qwen2_position(fw) == 400);
  CHECK_REFUSED(md_qwen2_decode(fw, 5, &err_), MD_E_INVALID, "reach position 400");
  CHECK(md_qwen2_position(fw) == 400);
  md_qwen2_forward_free(fw);
}

static void test_capacity(const int32_t *tokens) {
  md_qwen2_forward *fw = new_forward(10);
  md_error err;
  CHECK_REFUSED(md_qwen2_prefill(fw, tokens, 11, NULL, &err_), MD_E_INVALID,
                "exceed the KV cache's capacity of 10");
  CHECK(md_qwen2_prefill(fw, tokens, 10, NULL, &err) == MD_OK);
  md_qwen2_forward_free(fw);
  md_qwen2_forward_options options = {.capacity = 401};
  CHECK_REFUSED(md_qwen2_forward_new(md_qwen2_model_config(model), md_qwen2_model_weights(model),
                                     kernels, &options, &fw, &err_),
                MD_E_INVALID, "capacity 401 must be in [1, max_position_embeddings = 400]");
  CHECK(fw == NULL);
}

/* Bad tokens are refused before anything runs: the logits after a refused
 * call and a good one equal those of the good one alone. */
static void test_bad_tokens(const int32_t *prompt) {
  md_qwen2_forward *fw = new_forward(64), *clean = new_forward(64);
  md_error err;
  int32_t bad[3] = {prompt[0], 600, prompt[2]};
  int32_t negative[2] = {prompt[0], -1};
  CHECK_REFUSED(md_qwen2_greedy(fw, &bad[0], &err_), MD_E_INVALID, "no token has been run yet");
  CHECK_REFUSED(md_qwen2_prefill(fw, prompt, 0, NULL, &err_), MD_E_INVALID, "empty token sequence");
  CHECK_REFUSED(md_qwen2_prefill(fw, bad, 3, NULL, &err_), MD_E_INVALID,
                "token 1 has id 600, outside the vocabulary [0, 600)");
  CHECK_REFUSED(md_qwen2_prefill(fw, negative, 2, NULL, &err_), MD_E_INVALID,
                "token 1 has id -1, outside the vocabulary [0, 600)");
  CHECK(md_qwen2_position(fw) == 0);
  CHECK(md_qwen2_prefill(fw, prompt, 20, NULL, &err) == MD_OK);
  CHECK_REFUSED(md_qwen2_decode(fw, 600, &err_), MD_E_INVALID, "outside the vocabulary");
  CHECK(md_qwen2_decode(fw, prompt[20], &err) == MD_OK);
  CHECK(md_qwen2_prefill(clean, prompt, 21, NULL, &err) == MD_OK);
  float a[600], b[600];
  CHECK(md_qwen2_logits(fw, a, &err) == MD_OK);
  CHECK(md_qwen2_logits(clean, b, &err) == MD_OK);
  double worst = 0.0;
  for (int i = 0; i < 600; i++) worst = fmax(worst, fabs(a[i] - b[i]));
  CHECK_MSG(worst < 2e-5, "logits after refused calls differ by %g", worst);
  /* reset starts a new sequence */
  md_qwen2_reset(fw);
  CHECK(md_qwen2_position(fw) == 0);
  CHECK_REFUSED(md_qwen2_logits(fw, a, &err_), MD_E_INVALID, "no token has been run yet");
  md_qwen2_forward_free(fw);
  md_qwen2_forward_free(clean);
}

/* md_qwen2_feed runs tokens without logits: the cache advances as with
 * prefill, the logits are refused until a token is run with them, and the
 * logits after feed + decode equal those of one prefill of all tokens. */
static void test_feed(const int32_t *prompt) {
  md_qwen2_forward *fw = new_forward(64), *clean = new_forward(64);
  md_error err;
  float a[600], b[600];
  CHECK(md_qwen2_feed(fw, prompt, 20, &err) == MD_OK);
  CHECK(md_qwen2_position(fw) == 20);
  CHECK_REFUSED(md_qwen2_logits(fw, a, &err_), MD_E_INVALID, "fed without logits");
  CHECK_REFUSED(md_qwen2_feed(fw, prompt, 0, &err_), MD_E_INVALID, "empty token sequence");
  CHECK(md_qwen2_feed(fw, &prompt[20], 1, &err) == MD_OK);
  CHECK(md_qwen2_decode(fw, prompt[21], &err) == MD_OK);
  CHECK(md_qwen2_prefill(clean, prompt, 22, NULL, &err) == MD_OK);
  CHECK(md_qwen2_logits(fw, a, &err) == MD_OK);
  CHECK(md_qwen2_logits(clean, b, &err) == MD_OK);
  double worst = 0.0;
  for (int i = 0; i < 600; i++) worst = fmax(worst, fabs(a[i] - b[i]));
  CHECK_MSG(worst < 2e-5, "logits after feed + decode differ by %g", worst);
  md_qwen2_forward_free(fw);
  md_qwen2_forward_free(clean);
}

/* Weights that disagree with the config are refused, naming the tensor. */
static void test_bad_weights(void) {
  const md_qwen2_config *c = md_qwen2_model_config(model);
  md_qwen2_weights w = *md_qwen2_model_weights(model);
  md_qwen2_layer *layers = malloc((size_t)c->num_hidden_layers * sizeof *layers);
  memcpy(layers, w.layers, (size_t)c->num_hidden_layers * sizeof *layers);
  w.layers = layers;
  layers[1].k_proj.shape[0] = 32;
  md_qwen2_forward *fw = NULL;
  CHECK_REFUSED(md_qwen2_forward_new(c, &w, kernels, NULL, &fw, &err_), MD_E_INVALID,
                "tensor 'model.layers.1.self_attn.k_proj.weight': expected shape [64, 192]");
  CHECK(fw == NULL);
  layers[1].k_proj.shape[0] = 64;
  md_qwen2_config odd = *c;
  odd.num_key_value_heads = 4;
  CHECK_REFUSED(md_qwen2_forward_new(&odd, &w, kernels, NULL, &fw, &err_), MD_E_INVALID,
                "num_attention_heads 6 is not a multiple of num_key_value_heads 4");
  odd = *c;
  odd.head_dim = 31;
  CHECK_REFUSED(md_qwen2_forward_new(&odd, &w, kernels, NULL, &fw, &err_), MD_E_UNSUPPORTED,
                "head_dim 31 must be even");
  free(layers);
}

int main(void) {
  char dir[4096];
  fixture_dir(dir, sizeof dir, "theta1e4_f32");
  md_error err;
  if (md_qwen2_model_open(dir, &model, &err) != MD_OK ||
      md_kernels_cpu_new(NULL, &kernels, &err) != MD_OK) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  int32_t *tokens = malloc(401 * sizeof(int32_t));
  for (int i = 0; i < 401; i++) tokens[i] = (i * 37 + 11) % 600;
  test_too_long(tokens);
  test_capacity(tokens);
  test_bad_tokens(tokens);
  test_feed(tokens);
  test_bad_weights();
  free(tokens);
  md_kernels_free(kernels);
  md_qwen2_model_close(model);
  return md_test_finish("test_qwen2_forward_errors");
}
