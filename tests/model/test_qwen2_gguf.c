/* GGUF checkpoints in the engine (md_qwen2_model_open_with on a .gguf
 * file): the shipped demo checkpoint (data/models/qwen2-tiny, BF16
 * safetensors) is written as a GGUF file the way llama.cpp's converter
 * names and lays out a Qwen2 model (ggml's extents, blk.N.* names, the
 * qwen2.* keys), with its tensors in BF16 (exactly the checkpoint's bits;
 * norms and biases expanded to float32 on load are the same values), and
 * loaded back:
 *   - the configuration equals config.json's (but the identity, the file's
 *     SHA-256), the family is Qwen2's;
 *   - the prompt's logits and 24 greedy steps from the GGUF model equal the
 *     safetensors model's bit for bit (the safetensors path is checked
 *     against HF transformers in test_qwen2_tiny.c), and within 1e-4 with
 *     the matrices expanded to float32 instead;
 *   - a quantized GGUF file (tests/model/fixtures/gguf_q, written through
 *     gguf-py by tests/model/make_gguf_fixture.py: a random Qwen2 of odd
 *     shape, matrices in Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1, an untied output)
 *     gives HF transformers' logits (its GGUF loader, float32) at every
 *     prompt position within 1e-4, with the matrices expanded to float32
 *     as HF does (and within 0.1 in bfloat16, our default);
 *   - refusals name the file and the key or tensor: another architecture,
 *     a missing tensor, a tensor of the wrong shape, a type without a
 *     dequantizer; and a tensor the model does not use is noted. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/qwen2_forward.h"
#include "collector/model/qwen2_model.h"
#include "io/formats/gguf.h"
#include "kernels/device.h"
#include "tests/gguf/gguf_builder.h"
#include "tests/model/fixture.h"
#include "tests/test_util.h"

static char gguf_path[4096];

/* What to change when writing the file. */
typedef struct damage {
  const char *architecture;  /* instead of "qwen2" */
  const char *drop;          /* leave this tensor out */
  const char *reshape;       /* give this tensor one more row */
  const char *retype;        /* declare this tensor as IQ4_NL (32-element blocks, no dequantizer) */
  bool extra;                /* add a tensor the model does not use */
} damage;

typedef struct tensor_out {
  char name[64];
  const md_tensor *t;
} tensor_out;

static const char *const layer_names[][2] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},   {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.weight", "attn_k.weight"},   {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.weight", "attn_v.weight"},   {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

static const md_tensor *layer_tensor(const md_qwen2_layer *l, size_t i) {
  const md_tensor *all[] = {&l->input_layernorm, &l->q_proj, &l->q_bias, &l->k_proj, &l->k_bias,
                            &l->v_proj, &l->v_bias, &l->o_proj, &l->post_attention_layernorm,
                            &l->gate_proj, &l->up_proj, &l->down_proj};
  return all[i];
}

/* The model's tensors as BF16 GGUF tensors. */
static size_t list_tensors(const md_qwen2_model *model, tensor_out *out) {
  const md_qwen2_config *c = md_qwen2_model_config(model);
  const md_qwen2_weights *w = md_qwen2_model_weights(model);
  size_t n = 0;
  snprintf(out[n].name, sizeof out[n].name, "token_embd.weight");
  out[n++].t = &w->embed_tokens;
  for (int l = 0; l < c->num_hidden_layers; l++)
    for (size_t i = 0; i < sizeof layer_names / sizeof layer_names[0]; i++) {
      snprintf(out[n].name, sizeof out[n].name, "blk.%d.%s", l, layer_names[i][1]);
      out[n++].t = layer_tensor(&w->layers[l], i);
    }
  snprintf(out[n].name, sizeof out[n].name, "output_norm.weight");
  out[n++].t = &w->norm;
  return n;
}

static void write_model(const md_qwen2_model *model, const damage *d) {
  const md_qwen2_config *c = md_qwen2_model_config(model);
  tensor_out tensors[256];
  size_t n = list_tensors(model, tensors);
  size_t kept = 0;
  for (size_t i = 0; i < n; i++)
    if (!d->drop || strcmp(tensors[i].name, d->drop)) tensors[kept++] = tensors[i];
  n = kept;
  if (d->extra) {
    snprintf(tensors[n].name, sizeof tensors[n].name, "rope_freqs.weight");
    tensors[n++].t = &md_qwen2_model_weights(model)->norm;
  }
  gguf_bytes b = {0};
  gb_header(&b, 3, n, 9);
  gb_kv_str(&b, "general.architecture", d->architecture ? d->architecture : "qwen2");
  const char *arch = d->architecture ? d->architecture : "qwen2";
  char key[96];
#define KV_U32(name, value) snprintf(key, sizeof key, "%s." name, arch), gb_kv_u32(&b, key, (uint32_t)(value))
  KV_U32("block_count", c->num_hidden_layers);
  KV_U32("context_length", c->max_position_embeddings);
  KV_U32("embedding_length", c->hidden_size);
  KV_U32("feed_forward_length", c->intermediate_size);
  KV_U32("attention.head_count", c->num_attention_heads);
  KV_U32("attention.head_count_kv", c->num_key_value_heads);
#undef KV_U32
  snprintf(key, sizeof key, "%s.rope.freq_base", arch);
  gb_str(&b, key);
  gb_u32(&b, GB_F32);
  gb_f32(&b, (float)c->rope_theta);
  snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
  gb_str(&b, key);
  gb_u32(&b, GB_F32);
  gb_f32(&b, (float)c->rms_norm_eps);
  uint64_t offset = 0;
  for (size_t i = 0; i < n; i++) {
    const md_tensor *t = tensors[i].t;
    uint64_t ne[2] = {(uint64_t)(t->ndim == 2 ? t->shape[1] : t->shape[0]),
                      (uint64_t)(t->ndim == 2 ? t->shape[0] : 1)};
    if (d->reshape && !strcmp(tensors[i].name, d->reshape)) ne[t->ndim == 2 ? 1 : 0]++;
    uint32_t type = d->retype && !strcmp(tensors[i].name, d->retype) ? MD_GGML_IQ4_NL : MD_GGML_BF16;
    gb_tensor(&b, tensors[i].name, (uint32_t)t->ndim, ne, type, offset);
    offset += (ne[0] * ne[1] * 2 + 31) / 32 * 32 + 4096; /* room for any type's blocks */
  }
  gb_pad(&b, 32);
  size_t data = b.len;
  for (size_t i = 0; i < n; i++) {
    const md_tensor *t = tensors[i].t;
    while (b.len < data) gb_u8(&b, 0);
    size_t elements = (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
    CHECK(t->dtype == MD_DTYPE_BF16);
    gb_put(&b, t->data, elements * 2);
    size_t reserved = (elements * 2 + 31) / 32 * 32 + 4096;
    for (size_t k = elements * 2; k < reserved; k++) gb_u8(&b, 0);
    data += reserved;
  }
  gb_write(&b, b.len, gguf_path);
  gb_free(&b);
}

/* The logits after the prompt and at each of `steps` greedy steps. */
static float *run(const md_qwen2_model *model, const int32_t *prompt, int64_t n, int steps,
                  int32_t *greedy) {
  const md_qwen2_config *c = md_qwen2_model_config(model);
  md_error err = {0};
  md_kernels *k = NULL;
  md_device_options device = {.device = "cpu", .threads = 1};
  md_qwen2_forward *fw = NULL;
  md_qwen2_forward_options options = {.capacity = n + steps + 1};
  float *logits = malloc((size_t)(steps + 1) * (size_t)c->vocab_size * sizeof *logits);
  bool ok = logits && md_device_open(&device, &k, &err) == MD_OK &&
            md_qwen2_forward_new(c, md_qwen2_model_weights(model), k, &options, &fw, &err) == MD_OK &&
            md_qwen2_prefill(fw, prompt, n, NULL, &err) == MD_OK;
  for (int s = 0; ok && s <= steps; s++) {
    ok = md_qwen2_logits(fw, logits + (size_t)s * (size_t)c->vocab_size, &err) == MD_OK &&
         md_qwen2_greedy(fw, &greedy[s], &err) == MD_OK &&
         (s == steps || md_qwen2_decode(fw, greedy[s], &err) == MD_OK);
  }
  CHECK_MSG(ok, "forward pass: %s", err.message);
  md_qwen2_forward_free(fw);
  md_kernels_free(k);
  if (!ok) {
    free(logits);
    return NULL;
  }
  return logits;
}

static void test_same_model(const md_qwen2_model *hf) {
  write_model(hf, &(damage){0});
  md_qwen2_model *gguf = NULL, *gguf32 = NULL;
  md_error err = {0};
  CHECK_MSG(md_qwen2_model_open_with(gguf_path, NULL, &gguf, &err) == MD_OK, "%s", err.message);
  md_qwen2_open_options f32 = {.gguf_f32 = true};
  CHECK_MSG(md_qwen2_model_open_with(gguf_path, &f32, &gguf32, &err) == MD_OK, "%s", err.message);
  if (!gguf || !gguf32) goto done;
  const md_qwen2_config *a = md_qwen2_model_config(hf), *b = md_qwen2_model_config(gguf);
  CHECK(a->hidden_size == b->hidden_size && a->intermediate_size == b->intermediate_size &&
        a->num_hidden_layers == b->num_hidden_layers &&
        a->num_attention_heads == b->num_attention_heads &&
        a->num_key_value_heads == b->num_key_value_heads && a->head_dim == b->head_dim &&
        a->vocab_size == b->vocab_size && a->max_position_embeddings == b->max_position_embeddings &&
        (float)a->rope_theta == (float)b->rope_theta && (float)a->rms_norm_eps == (float)b->rms_norm_eps &&
        a->tie_word_embeddings == b->tie_word_embeddings && b->family == a->family);
  CHECK(strlen(b->config_sha256) == 64 && strcmp(a->config_sha256, b->config_sha256));
  CHECK(md_qwen2_model_weights(gguf)->dtype == MD_DTYPE_BF16 &&
        md_qwen2_model_weights(gguf32)->dtype == MD_DTYPE_F32);
  CHECK(md_qwen2_model_gguf(gguf) != NULL && md_qwen2_model_gguf(hf) == NULL);
  CHECK(md_qwen2_model_warning_count(gguf) == 0);
  /* (float)a->rms_norm_eps: GGUF stores float32, as llama.cpp's converter
   * does; the forward pass uses it as a float. */
  int32_t prompt[40];
  for (int i = 0; i < 40; i++) prompt[i] = 100 + 37 * i;
  enum { STEPS = 24 };
  int32_t greedy_hf[STEPS + 1], greedy_gguf[STEPS + 1], greedy_f32[STEPS + 1];
  float *want = run(hf, prompt, 40, STEPS, greedy_hf);
  float *got = run(gguf, prompt, 40, STEPS, greedy_gguf);
  float *got32 = run(gguf32, prompt, 40, STEPS, greedy_f32);
  size_t count = (size_t)(STEPS + 1) * (size_t)a->vocab_size;
  if (want && got && got32) {
    CHECK_MSG(!memcmp(want, got, count * sizeof *want), "GGUF logits differ from safetensors'");
    CHECK(!memcmp(greedy_hf, greedy_gguf, sizeof greedy_hf));
    double worst = 0;
    for (size_t i = 0; i < count; i++) worst = fmax(worst, fabs((double)want[i] - got32[i]));
    CHECK_MSG(worst <= 1e-4, "float32-expanded GGUF logits differ by %g", worst);
    printf("GGUF: %zu logits equal bit for bit; float32 expansion within %.2g\n", count, worst);
  }
  free(want);
  free(got);
  free(got32);
done:
  md_qwen2_model_close(gguf);
  md_qwen2_model_close(gguf32);
}

static void expect_refusal(const md_qwen2_model *hf, const damage *d, md_status status,
                           const char *want) {
  write_model(hf, d);
  md_qwen2_model *m = NULL;
  md_error err = {0};
  md_status got = md_qwen2_model_open_with(gguf_path, NULL, &m, &err);
  CHECK_MSG(got == status && strstr(err.message, want) && strstr(err.message, gguf_path),
            "want %d \"%s\", got %d: %s", (int)status, want, (int)got, err.message);
  md_qwen2_model_close(m);
}

static void test_refusals(const md_qwen2_model *hf) {
  expect_refusal(hf, &(damage){.architecture = "llama"}, MD_E_UNSUPPORTED,
                 "general.architecture \"llama\" is not supported (supported: qwen2)");
  expect_refusal(hf, &(damage){.drop = "blk.1.attn_k.bias"}, MD_E_FORMAT,
                 "missing tensor blk.1.attn_k.bias (model.layers.1.self_attn.k_proj.bias)");
  expect_refusal(hf, &(damage){.reshape = "blk.0.ffn_up.weight"}, MD_E_FORMAT,
                 "tensor blk.0.ffn_up.weight has extents");
  expect_refusal(hf, &(damage){.retype = "blk.2.attn_q.weight"}, MD_E_UNSUPPORTED,
                 "tensor blk.2.attn_q.weight is of type IQ4_NL, which is not supported");
  write_model(hf, &(damage){.extra = true});
  md_qwen2_model *m = NULL;
  md_error err = {0};
  CHECK_MSG(md_qwen2_model_open_with(gguf_path, NULL, &m, &err) == MD_OK, "%s", err.message);
  CHECK(m && md_qwen2_model_warning_count(m) == 1 &&
        strstr(md_qwen2_model_warning(m, 0), "1 tensors are not part of qwen2 and are ignored "
                                             "(first: rope_freqs.weight)"));
  md_qwen2_model_close(m);
}

/* Our logits at every prompt position of the fixture; NULL on failure. */
static float *prompt_logits(const char *path, bool f32, const fixture_array *prompt, int *vocab) {
  md_qwen2_open_options options = {.gguf_f32 = f32};
  md_qwen2_model *model = NULL;
  md_kernels *k = NULL;
  md_qwen2_forward *fw = NULL;
  md_error err = {0};
  md_device_options device = {.device = "cpu", .threads = 1};
  int64_t n = (int64_t)prompt->count;
  md_qwen2_forward_options fo = {.capacity = n};
  float *logits = NULL;
  bool ok = md_qwen2_model_open_with(path, &options, &model, &err) == MD_OK &&
            md_device_open(&device, &k, &err) == MD_OK &&
            md_qwen2_forward_new(md_qwen2_model_config(model), md_qwen2_model_weights(model), k,
                                 &fo, &fw, &err) == MD_OK;
  if (ok) {
    *vocab = md_qwen2_model_config(model)->vocab_size;
    logits = malloc((size_t)n * (size_t)*vocab * sizeof *logits);
    ok = logits && md_qwen2_prefill(fw, prompt->i32, n, logits, &err) == MD_OK;
  }
  CHECK_MSG(ok, "%s: %s", path, err.message);
  md_qwen2_forward_free(fw);
  md_kernels_free(k);
  md_qwen2_model_close(model);
  if (!ok) {
    free(logits);
    return NULL;
  }
  return logits;
}

static void test_against_hf(void) {
  char dir[4096], path[4200];
  fixture_dir(dir, sizeof dir, "gguf_q");
  snprintf(path, sizeof path, "%s/model.gguf", dir);
  fixture_array prompt = fixture_load(dir, "prompt.npy", 1), want = fixture_load(dir, "logits.npy", 0);
  for (int f32 = 1; f32 >= 0; f32--) {
    int vocab = 0;
    float *got = prompt_logits(path, f32, &prompt, &vocab);
    if (!got) continue;
    CHECK(want.ndim == 2 && want.shape[0] == (int64_t)prompt.count && want.shape[1] == vocab);
    double worst = 0;
    for (size_t i = 0; i < want.count; i++) worst = fmax(worst, fabs((double)got[i] - want.f32[i]));
    /* bfloat16 keeps 8 bits of each weight (relative 2^-9 at most); with
     * logits up to 12 they move by a few hundredths. */
    double tolerance = f32 ? 1e-4 : 1e-1;
    CHECK_MSG(worst <= tolerance, "quantized GGUF, %s: logits differ from HF's by %g (> %g)",
              f32 ? "float32" : "bfloat16", worst, tolerance);
    printf("quantized GGUF against HF transformers, %s expansion: %zu logits within %.2g\n",
           f32 ? "float32" : "bfloat16", want.count, worst);
    free(got);
  }
  fixture_free(&prompt);
  fixture_free(&want);
}

int main(void) {
  const char *root = getenv("MD_SOURCE_ROOT"), *build = getenv("MD_BUILD_ROOT");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/data/models/qwen2-tiny", root ? root : ".");
  snprintf(gguf_path, sizeof gguf_path, "%s/tests/model/qwen2-tiny.gguf", build ? build : ".");
  md_qwen2_model *hf = NULL;
  md_error err = {0};
  CHECK_MSG(md_qwen2_model_open(dir, &hf, &err) == MD_OK, "%s", err.message);
  if (hf) {
    test_same_model(hf);
    test_refusals(hf);
  }
  test_against_hf();
  md_qwen2_model_close(hf);
  remove(gguf_path);
  return md_test_finish("qwen2_gguf");
}
