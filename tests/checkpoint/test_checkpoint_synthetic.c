/* md_qwen2_model_open on checkpoints written here with chosen dtypes and
 * extra or tied tensors: mixed matrix/vector dtypes, a mix of matrix dtypes,
 * lm_head beside tied embeddings, extra layers and tensors, misaligned data.
 *
 * Shapes: hidden 8, 2 query heads and 1 KV head of head_dim 4, intermediate
 * 16, 2 layers, vocab 10.  Element counts, by hand:
 *   embedding 10x8 = 80, lm_head 80, final norm 8;
 *   per layer: matrices q 8x8 = 64, k 4x8 = 32, v 32, o 64, gate 16x8 = 128,
 *   up 128, down 128 (576 in all); vectors: two norms 8 + 8, biases q 8,
 *   k 4, v 4 (32 in all).
 * Every element is ((h + 3 i) mod 17 - 8) / 8 with h a hash of the tensor's
 * name: multiples of 1/8 below 1 in magnitude, exact in F32, BF16 and F16. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/qwen2_model.h"
#include "io/formats/safetensors.h"
#include "tests/checkpoint/checkpoint_util.h"
#include "tests/test_util.h"

#define LAYERS 2

static char temp_dir[] = "/tmp/md-checkpoint-synthetic-XXXXXX";

typedef struct spec {
  char name[96];
  const char *dtype; /* "F32", "BF16" or "F16" */
  int ndim;
  int64_t shape[2];
} spec;

static float element_value(const char *name, size_t index) {
  uint32_t hash = 5381;
  for (const char *c = name; *c; c++) hash = hash * 33 + (unsigned char)*c;
  return (float)((int)((hash % 17 + 3 * index) % 17) - 8) / 8.0f;
}

/* Exact for the values above: zero or normal with a short significand. */
static void encode(float value, const char *dtype, unsigned char *out) {
  uint32_t bits;
  memcpy(&bits, &value, 4);
  if (!strcmp(dtype, "F32")) {
    memcpy(out, &bits, 4);
    return;
  }
  uint16_t half;
  if (!strcmp(dtype, "BF16")) {
    half = (uint16_t)(bits >> 16);
  } else if ((bits & 0x7fffffffu) == 0) {
    half = (uint16_t)(bits >> 16);
  } else { /* F16: rebias the exponent from 127 to 15, keep 10 fraction bits */
    uint32_t exponent = ((bits >> 23) & 0xffu) - 127u + 15u;
    half = (uint16_t)(((bits >> 16) & 0x8000u) | (exponent << 10) | ((bits >> 13) & 0x3ffu));
  }
  memcpy(out, &half, 2);
}

static size_t dtype_bytes(const char *dtype) { return strcmp(dtype, "F32") ? 2 : 4; }

static size_t element_count(const spec *s) {
  size_t count = 1;
  for (int d = 0; d < s->ndim; d++) count *= (size_t)s->shape[d];
  return count;
}

static void add(spec *specs, size_t *n, const char *name, const char *dtype, int64_t rows,
                int64_t cols) {
  spec *s = &specs[(*n)++];
  snprintf(s->name, sizeof s->name, "%s", name);
  s->dtype = dtype;
  s->ndim = cols ? 2 : 1;
  s->shape[0] = rows;
  s->shape[1] = cols;
}

/* The tensors of the model, matrices in one dtype, vectors in another. */
static size_t standard_specs(spec *specs, int layers, const char *matrix, const char *vector,
                             bool lm_head) {
  static const struct {
    const char *suffix;
    int rows, cols;
    bool is_matrix;
  } layer[] = {{"input_layernorm.weight", 8, 0, false},  {"self_attn.q_proj.weight", 8, 8, true},
               {"self_attn.q_proj.bias", 8, 0, false},   {"self_attn.k_proj.weight", 4, 8, true},
               {"self_attn.k_proj.bias", 4, 0, false},   {"self_attn.v_proj.weight", 4, 8, true},
               {"self_attn.v_proj.bias", 4, 0, false},   {"self_attn.o_proj.weight", 8, 8, true},
               {"post_attention_layernorm.weight", 8, 0, false},
               {"mlp.gate_proj.weight", 16, 8, true},    {"mlp.up_proj.weight", 16, 8, true},
               {"mlp.down_proj.weight", 8, 16, true}};
  size_t n = 0;
  add(specs, &n, "model.embed_tokens.weight", matrix, 10, 8);
  for (int i = 0; i < layers; i++)
    for (size_t t = 0; t < sizeof layer / sizeof layer[0]; t++) {
      char name[96];
      snprintf(name, sizeof name, "model.layers.%d.%s", i, layer[t].suffix);
      add(specs, &n, name, layer[t].is_matrix ? matrix : vector, layer[t].rows, layer[t].cols);
    }
  add(specs, &n, "model.norm.weight", vector, 8, 0);
  if (lm_head) add(specs, &n, "lm_head.weight", matrix, 10, 8);
  return n;
}

static spec *find_spec(spec *specs, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(specs[i].name, name)) return &specs[i];
  return NULL;
}

static void write_config(const char *dir, bool tie) {
  char path[1024];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *fp = fopen(path, "w");
  fprintf(fp,
          "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", "
          "\"hidden_size\": 8, \"intermediate_size\": 16, \"num_hidden_layers\": %d, "
          "\"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"vocab_size\": 10, "
          "\"tie_word_embeddings\": %s}\n", LAYERS, tie ? "true" : "false");
  fclose(fp);
}

/* Writes model.safetensors: 4-byte tensors first, then 2-byte ones (the
 * reference writer's order, which keeps every tensor aligned when the header
 * is padded to 8); `pad` false leaves the header at an odd length. */
static void write_weights(const char *dir, const spec *specs, size_t n, bool pad) {
  json_t *header = json_object();
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += element_count(&specs[i]) * dtype_bytes(specs[i].dtype);
  unsigned char *data = malloc(total);
  size_t offset = 0;
  for (size_t pass = 4; pass >= 2; pass -= 2)
    for (size_t i = 0; i < n; i++) {
      const spec *s = &specs[i];
      if (dtype_bytes(s->dtype) != pass) continue;
      size_t count = element_count(s), begin = offset;
      for (size_t e = 0; e < count; e++, offset += pass)
        encode(element_value(s->name, e), s->dtype, data + offset);
      json_t *shape = s->ndim == 2 ? json_pack("[I, I]", (json_int_t)s->shape[0],
                                               (json_int_t)s->shape[1])
                                   : json_pack("[I]", (json_int_t)s->shape[0]);
      json_object_set_new(header, s->name,
                          json_pack("{s:s, s:o, s:[I, I]}", "dtype", s->dtype, "shape", shape,
                                    "data_offsets", (json_int_t)begin, (json_int_t)offset));
    }
  char *text = json_dumps(header, JSON_COMPACT);
  size_t len = strlen(text);
  char padded[16384];
  memcpy(padded, text, len);
  while (pad ? len % 8 : len % 2 == 0) padded[len++] = ' ';
  char path[1024];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  FILE *fp = fopen(path, "wb");
  for (int i = 0; i < 8; i++) fputc((int)(((uint64_t)len >> (8 * i)) & 0xff), fp);
  fwrite(padded, 1, len, fp);
  fwrite(data, 1, total, fp);
  fclose(fp);
  free(text);
  free(data);
  json_decref(header);
}

static void write_model(const char *name, const spec *specs, size_t n, bool tie, bool pad,
                        char *dir, size_t dir_size) {
  snprintf(dir, dir_size, "%s/%s", temp_dir, name);
  char command[2048];
  snprintf(command, sizeof command, "mkdir -p '%s'", dir);
  if (system(command) != 0) exit(1);
  write_config(dir, tie);
  write_weights(dir, specs, n, pad);
}

static md_qwen2_model *open_ok(const char *dir) {
  md_qwen2_model *model = NULL;
  md_error err = {0};
  CHECK_MSG(md_qwen2_model_open(dir, &model, &err) == MD_OK, "%s: %s", dir, err.message);
  return model;
}

/* Every element of every tensor the model maps equals what was written,
 * in the dtype it was written in, at an address aligned for it. */
static void check_values(const md_qwen2_model *model, spec *specs, size_t n) {
  const md_qwen2_weights *weights = md_qwen2_model_weights(model);
  for (size_t i = 0; i < n; i++) {
    const md_tensor *tensor = weight_named(weights, LAYERS, specs[i].name);
    if (!tensor) continue; /* extra tensors */
    if (!strcmp(specs[i].name, "lm_head.weight") && md_qwen2_model_config(model)->tie_word_embeddings)
      continue;
    CHECK_MSG(!strcmp(md_dtype_name(tensor->dtype), specs[i].dtype), "%s is %s", specs[i].name,
              md_dtype_name(tensor->dtype));
    CHECK((uintptr_t)tensor->data % md_dtype_size(tensor->dtype) == 0);
    size_t mismatches = 0;
    for (size_t e = 0; e < element_count(&specs[i]); e++)
      mismatches += !same_float(tensor_element(tensor, e), element_value(specs[i].name, e));
    CHECK_MSG(mismatches == 0, "%s: %zu elements differ", specs[i].name, mismatches);
  }
}

/* BF16 matrices with F32 norms and biases; the same with an unpadded header
 * (every tensor misaligned in the mapping); F16 matrices with BF16 vectors. */
static void test_mixed_dtypes(void) {
  spec specs[64];
  size_t n = standard_specs(specs, LAYERS, "BF16", "F32", true);
  char dir[1024];
  const struct {
    const char *name;
    bool pad;
  } layouts[] = {{"mixed", true}, {"mixed-misaligned", false}};
  for (int l = 0; l < 2; l++) {
    write_model(layouts[l].name, specs, n, false, layouts[l].pad, dir, sizeof dir);
    char path[1100];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    md_safetensors *file = NULL;
    md_error err = {0};
    CHECK(md_safetensors_open(path, &file, &err) == MD_OK);
    /* unpadded: all 2912 bytes sit at odd offsets and are copied */
    CHECK(file && md_safetensors_realigned_bytes(file) == (layouts[l].pad ? 0 : 2912));
    md_safetensors_close(file);
    md_qwen2_model *model = open_ok(dir);
    if (!model) continue;
    const md_qwen2_weights *weights = md_qwen2_model_weights(model);
    CHECK(weights->dtype == MD_DTYPE_BF16);
    CHECK(weights->norm.dtype == MD_DTYPE_F32 && weights->layers[1].k_bias.dtype == MD_DTYPE_F32);
    /* matrices (80 + 80 + 2 x 576) x 2 bytes + vectors (8 + 2 x 32) x 4 bytes */
    CHECK(weights->weight_bytes == 2624 + 288);
    CHECK(md_qwen2_model_warning_count(model) == 0);
    check_values(model, specs, n);
    md_qwen2_model_close(model);
  }
  n = standard_specs(specs, LAYERS, "F16", "BF16", true);
  write_model("f16-bf16", specs, n, false, true, dir, sizeof dir);
  md_qwen2_model *model = open_ok(dir);
  if (model) {
    CHECK(md_qwen2_model_weights(model)->dtype == MD_DTYPE_F16);
    CHECK(md_qwen2_model_weights(model)->weight_bytes == 2624 + 144);
    check_values(model, specs, n);
    md_qwen2_model_close(model);
  }
}

static void test_matrix_dtype_mix(void) {
  spec specs[64];
  size_t n = standard_specs(specs, LAYERS, "BF16", "BF16", true);
  find_spec(specs, n, "model.layers.1.self_attn.o_proj.weight")->dtype = "F32";
  char dir[1024];
  write_model("matrix-mix", specs, n, false, true, dir, sizeof dir);
  md_qwen2_model *model = (md_qwen2_model *)1;
  md_error err = {0};
  CHECK(md_qwen2_model_open(dir, &model, &err) == MD_E_UNSUPPORTED && model == NULL);
  CHECK_MSG(strstr(err.message, "model.safetensors: tensor model.layers.1.self_attn.o_proj.weight "
                                "is F32 but the other weight matrices are BF16 (all weight "
                                "matrices must share one dtype)"), "%s", err.message);
}

/* transformers ties lm_head to the embedding and ignores the stored one. */
static void test_tied_with_lm_head(void) {
  spec specs[64];
  size_t n = standard_specs(specs, LAYERS, "F32", "F32", true);
  char dir[1024];
  write_model("tied-with-lm-head", specs, n, true, true, dir, sizeof dir);
  md_qwen2_model *model = open_ok(dir);
  if (!model) return;
  const md_qwen2_weights *weights = md_qwen2_model_weights(model);
  CHECK(weights->lm_head.data == weights->embed_tokens.data);
  CHECK(weights->lm_head.shape[0] == 10 && weights->lm_head.shape[1] == 8);
  /* (1384 elements - the stored lm_head's 80) x 4 bytes */
  CHECK(weights->weight_bytes == (1384 - 80) * 4);
  CHECK(md_qwen2_model_warning_count(model) == 1);
  const char *warning = md_qwen2_model_warning(model, 0);
  CHECK_MSG(warning && strstr(warning, "lm_head.weight is present but tie_word_embeddings is "
                                       "true: it is ignored"), "%s", warning);
  CHECK(md_qwen2_model_warning(model, 1) == NULL);
  check_values(model, specs, n);
  md_qwen2_model_close(model);
}

/* Tensors the model does not use load with warnings, as transformers loads
 * them with its "weights not used" warning. */
static void test_extra_tensors(void) {
  spec specs[96];
  size_t n = standard_specs(specs, LAYERS + 1, "F32", "F32", true);
  add(specs, &n, "model.rotary_emb.inv_freq", "F32", 2, 0);
  add(specs, &n, "model.layers.0.self_attn.rotary_emb.inv_freq", "F32", 2, 0);
  char dir[1024];
  write_model("extra", specs, n, false, true, dir, sizeof dir);
  md_qwen2_model *model = open_ok(dir);
  if (!model) return;
  CHECK(md_qwen2_model_weights(model)->weight_bytes == 1384 * 4);
  CHECK(md_qwen2_model_warning_count(model) == 2);
  const char *beyond = md_qwen2_model_warning(model, 0), *other = md_qwen2_model_warning(model, 1);
  CHECK_MSG(beyond && strstr(beyond, "12 tensors belong to layers beyond num_hidden_layers = 2 "
                                     "(first: model.layers.2.") &&
                strstr(beyond, "config.json may not match these weights"), "%s", beyond);
  CHECK_MSG(other && strstr(other, "2 tensors are not part of Qwen2ForCausalLM and are ignored "
                                   "(first: model.layers.0.self_attn.rotary_emb.inv_freq)"),
            "%s", other);
  check_values(model, specs, n);
  md_qwen2_model_close(model);
}

int main(void) {
  if (!mkdtemp(temp_dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_mixed_dtypes();
  test_matrix_dtype_mix();
  test_tied_with_lm_head();
  test_extra_tensors();
  char command[1024];
  snprintf(command, sizeof command, "rm -rf '%s'", temp_dir);
  CHECK(system(command) == 0);
  return md_test_finish("checkpoint_synthetic");
}
