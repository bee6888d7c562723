#include "collector/model/qwen2_model.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/digest.h"
#include "collector/model/qwen2_config.h"
#include "io/files/json_fields.h"
#include "collector/model/qwen2_gguf.h"
#include "io/formats/gguf.h"
#include "io/formats/safetensors.h"
#include "io/files/mapped_file.h"

#define SINGLE_FILE "model.safetensors"
#define INDEX_FILE "model.safetensors.index.json"

struct md_qwen2_model {
  char *dir;
  md_qwen2_config config;
  md_qwen2_weights weights;
  md_safetensors **shards; /* one for model.safetensors, else one per index file */
  char **shard_names;      /* file names as the index gives them */
  size_t shard_count;
  json_t *weight_map;      /* tensor -> shard name; NULL without an index */
  bool matrix_dtype_known; /* weights.dtype set by the first matrix bound */
  char *index_path;
  char **warnings;
  size_t warning_count;
  /* A GGUF checkpoint: the file, and its tensors expanded (gguf_model.c). */
  md_gguf_file *gguf;
  bool gguf_f32;           /* matrices expanded to float32, not bfloat16 */
  md_gguf_expansion *expansions;
  size_t n_expansions;
  bool *gguf_bound;        /* [tensor count]: taken by the model */
};

static char *join_path(const char *dir, const char *name) {
  size_t len = strlen(dir) + 1 + strlen(name) + 1;
  char *path = malloc(len);
  if (path) snprintf(path, len, "%s/%s", dir, name);
  return path;
}

static md_status add_warning(md_qwen2_model *model, md_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static md_status add_warning(md_qwen2_model *model, md_error *err, const char *fmt, ...) {
  char line[MD_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  char **grown = realloc(model->warnings, (model->warning_count + 1) * sizeof *grown);
  if (!grown) return md_fail(err, MD_E_NOMEM, "%s: out of memory", model->dir);
  model->warnings = grown;
  if (!(grown[model->warning_count] = strdup(line)))
    return md_fail(err, MD_E_NOMEM, "%s: out of memory", model->dir);
  model->warning_count++;
  return MD_OK;
}

static md_status add_shard(md_qwen2_model *model, const char *name, md_error *err) {
  size_t n = model->shard_count;
  md_safetensors **shards = realloc(model->shards, (n + 1) * sizeof *shards);
  if (shards) model->shards = shards;
  char **names = realloc(model->shard_names, (n + 1) * sizeof *names);
  if (names) model->shard_names = names;
  char *path = join_path(model->dir, name);
  char *copy = strdup(name);
  if (!shards || !names || !path || !copy) {
    free(path);
    free(copy);
    return md_fail(err, MD_E_NOMEM, "%s: out of memory", model->dir);
  }
  md_status status = MD_OK;
  if (model->index_path && !md_is_regular_file(path)) {
    status = md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: shard %s named in the index does not exist",
                     model->index_path, name);
  } else {
    status = md_safetensors_open(path, &model->shards[n], err);
  }
  free(path);
  if (status != MD_OK) {
    free(copy);
    return status;
  }
  model->shard_names[n] = copy;
  model->shard_count = n + 1;
  return MD_OK;
}

static size_t shard_index(const md_qwen2_model *model, const char *name) {
  for (size_t i = 0; i < model->shard_count; i++)
    if (!strcmp(model->shard_names[i], name)) return i;
  return SIZE_MAX;
}

/* Shard names come from a file: a separator or a parent reference would let
 * the index point outside the checkpoint directory. */
static bool plain_file_name(const char *name) {
  return name[0] && !strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

static md_status check_weight_map(const md_qwen2_model *model, json_t *map, md_error *err) {
  if (!json_is_object(map))
    return md_fail(err, MD_E_FORMAT, "%s: 'weight_map' is missing or not an object",
                   model->index_path);
  const char *tensor;
  json_t *file;
  json_object_foreach(map, tensor, file) {
    if (!json_is_string(file))
      return md_fail(err, MD_E_FORMAT, "%s: weight_map entry for %s is not a file name",
                     model->index_path, tensor);
    if (!plain_file_name(json_string_value(file)))
      return md_fail(err, MD_E_FORMAT,
                     "%s: weight_map entry for %s, \"%s\", is not a plain file name in the "
                     "checkpoint directory", model->index_path, tensor, json_string_value(file));
  }
  return MD_OK;
}

static md_status open_index(md_qwen2_model *model, md_error *err) {
  json_t *index;
  md_status loaded = md_json_load(model->index_path, &index, err);
  if (loaded != MD_OK) return loaded;
  json_t *map = json_is_object(index) ? json_object_get(index, "weight_map") : NULL;
  md_status status = check_weight_map(model, map, err);
  if (status == MD_OK) model->weight_map = json_incref(map);
  json_decref(index);
  if (status != MD_OK) return status;
  const char *tensor;
  json_t *file;
  json_object_foreach(model->weight_map, tensor, file) {
    const char *name = json_string_value(file);
    if (shard_index(model, name) != SIZE_MAX) continue;
    status = add_shard(model, name, err);
    if (status != MD_OK) return status;
  }
  if (model->shard_count == 0)
    return md_fail(err, MD_E_FORMAT, "%s: 'weight_map' is empty", model->index_path);
  return MD_OK;
}

/* transformers looks for model.safetensors first, then the index. */
static md_status open_checkpoint_files(md_qwen2_model *model, md_error *err) {
  char *single = join_path(model->dir, SINGLE_FILE);
  model->index_path = join_path(model->dir, INDEX_FILE);
  if (!single || !model->index_path) {
    free(single);
    return md_fail(err, MD_E_NOMEM, "%s: out of memory", model->dir);
  }
  bool have_single = md_is_regular_file(single);
  free(single);
  if (have_single) {
    free(model->index_path);
    model->index_path = NULL;
    return add_shard(model, SINGLE_FILE, err);
  }
  if (md_is_regular_file(model->index_path)) return open_index(model, err);
  char *pickle = join_path(model->dir, "pytorch_model.bin");
  bool have_pickle = pickle && md_is_regular_file(pickle);
  free(pickle);
  return md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: no %s or %s%s", model->dir, SINGLE_FILE, INDEX_FILE,
                 have_pickle ? " (pytorch_model.bin is not read: only safetensors checkpoints "
                               "are supported)" : "");
}

/* The shard holding `name`, or NULL when the checkpoint lacks it. With an
 * index, the index decides; a tensor it lists must be in the named shard. */
static md_status locate(const md_qwen2_model *model, const char *name,
                        const md_safetensors **shard, md_error *err) {
  *shard = NULL;
  if (!model->weight_map) {
    if (md_safetensors_contains(model->shards[0], name)) *shard = model->shards[0];
    return MD_OK;
  }
  const char *file = json_string_value(json_object_get(model->weight_map, name));
  if (!file) return MD_OK;
  const md_safetensors *named = model->shards[shard_index(model, file)];
  if (!md_safetensors_contains(named, name))
    return md_fail(err, MD_E_FORMAT, "%s: tensor %s is listed in shard %s, which lacks it",
                   model->index_path, name, file);
  *shard = named;
  return MD_OK;
}

static void format_dims(const int64_t *shape, int ndim, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < ndim && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, i ? ", " : "", shape[i]);
  if (used < size) snprintf(buf + used, size - used, "]");
}

/* The GGUF side of bind: the tensor of that name in llama.cpp's naming,
 * with extents {cols, rows} (ggml's order) or {rows}, queued for expansion
 * into memory the model owns (md_qwen2_gguf_expand runs the queue once
 * every tensor is bound). */
static md_status bind_gguf(md_qwen2_model *model, const char *name, int64_t rows, int64_t cols,
                           md_tensor *out, md_error *err) {
  char gguf_name[MD_GGUF_MAX_NAME + 1];
  if (!md_qwen2_gguf_name(name, gguf_name, sizeof gguf_name))
    return md_fail(err, MD_E_INVALID, "%s: no GGUF name for tensor %s", model->dir, name);
  const md_gguf_tensor *t = md_gguf_find_tensor(model->gguf, gguf_name);
  if (!t) return md_fail(err, MD_E_FORMAT, "missing tensor %s (%s) in %s", gguf_name, name, model->dir);
  int ndim = cols ? 2 : 1;
  if (t->n_dims != ndim || t->ne[0] != (cols ? cols : rows) || (cols && t->ne[1] != rows))
    return md_fail(err, MD_E_FORMAT, "%s: tensor %s has extents {%lld, %lld}, expected {%lld, %lld} "
                   "(ggml's order: the row length first)", model->dir, gguf_name,
                   (long long)t->ne[0], (long long)(t->n_dims > 1 ? t->ne[1] : 1),
                   (long long)(cols ? cols : rows), (long long)(cols ? rows : 1));
  if (!md_ggml_type_dequantizable(t->type))
    return md_fail(err, MD_E_UNSUPPORTED, "%s: tensor %s is of type %s, which is not supported "
                   "(supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, "
                   "Q5_K, Q6_K)", model->dir, gguf_name, md_ggml_type_name(t->type));
  model->gguf_bound[t->index] = true;
  bool bf16 = ndim == 2 && !model->gguf_f32;
  size_t nbytes = (size_t)t->n_elements * (bf16 ? 2 : 4);
  md_gguf_expansion *grown = realloc(model->expansions, (model->n_expansions + 1) * sizeof *grown);
  void *data = grown ? malloc(nbytes) : NULL;
  if (grown) model->expansions = grown;
  if (!data) return md_fail(err, MD_E_NOMEM, "%s: out of memory expanding %s", model->dir, gguf_name);
  model->expansions[model->n_expansions++] = (md_gguf_expansion){.tensor = t, .data = data, .bf16 = bf16};
  *out = (md_tensor){.name = t->name, .dtype = bf16 ? MD_DTYPE_BF16 : MD_DTYPE_F32, .ndim = ndim,
                     .shape = {rows, cols}, .data = data, .nbytes = nbytes};
  if (ndim == 2) {
    model->weights.dtype = out->dtype;
    model->matrix_dtype_known = true;
  }
  model->weights.weight_bytes += nbytes;
  return MD_OK;
}

/* Binds tensor `name` into *out after checking it is there with shape
 * [rows] (cols == 0) or [rows, cols]. */
static md_status bind(md_qwen2_model *model, const char *name, int64_t rows, int64_t cols,
                      md_tensor *out, md_error *err) {
  if (model->gguf) return bind_gguf(model, name, rows, cols, out, err);
  const md_safetensors *shard;
  md_status status = locate(model, name, &shard, err);
  if (status != MD_OK) return status;
  if (!shard)
    return md_fail(err, MD_E_FORMAT, "missing tensor %s in %s%s", name, model->dir,
                   model->weight_map ? " (" INDEX_FILE " does not list it)" : "");
  const md_tensor *tensor;
  status = md_safetensors_get(shard, name, &tensor, err);
  if (status != MD_OK) return status;
  int64_t expected[2] = {rows, cols};
  int ndim = cols ? 2 : 1;
  if (tensor->ndim != ndim || tensor->shape[0] != rows || (cols && tensor->shape[1] != cols)) {
    char got[96], want[96];
    format_dims(tensor->shape, tensor->ndim, got, sizeof got);
    format_dims(expected, ndim, want, sizeof want);
    return md_fail(err, MD_E_FORMAT, "%s: tensor %s has shape %s, expected %s",
                   md_safetensors_path(shard), name, got, want);
  }
  if (ndim == 2 && model->matrix_dtype_known && tensor->dtype != model->weights.dtype)
    return md_fail(err, MD_E_UNSUPPORTED,
                   "%s: tensor %s is %s but the other weight matrices are %s (all weight "
                   "matrices must share one dtype)", md_safetensors_path(shard), name,
                   md_dtype_name(tensor->dtype), md_dtype_name(model->weights.dtype));
  if (ndim == 2) {
    model->weights.dtype = tensor->dtype;
    model->matrix_dtype_known = true;
  }
  *out = *tensor;
  model->weights.weight_bytes += tensor->nbytes;
  return MD_OK;
}

/* The tensors of one decoder layer: name suffix, field, shape. */
typedef enum { DIM_NONE, DIM_HIDDEN, DIM_Q, DIM_KV, DIM_INTER } layer_dim;

static const struct {
  const char *suffix;
  size_t offset;
  layer_dim rows, cols;
  bool bias;  /* present only in families with attention biases */
} layer_tensors[] = {
    {"input_layernorm.weight", offsetof(md_qwen2_layer, input_layernorm), DIM_HIDDEN, DIM_NONE, false},
    {"self_attn.q_proj.weight", offsetof(md_qwen2_layer, q_proj), DIM_Q, DIM_HIDDEN, false},
    {"self_attn.q_proj.bias", offsetof(md_qwen2_layer, q_bias), DIM_Q, DIM_NONE, true},
    {"self_attn.k_proj.weight", offsetof(md_qwen2_layer, k_proj), DIM_KV, DIM_HIDDEN, false},
    {"self_attn.k_proj.bias", offsetof(md_qwen2_layer, k_bias), DIM_KV, DIM_NONE, true},
    {"self_attn.v_proj.weight", offsetof(md_qwen2_layer, v_proj), DIM_KV, DIM_HIDDEN, false},
    {"self_attn.v_proj.bias", offsetof(md_qwen2_layer, v_bias), DIM_KV, DIM_NONE, true},
    {"self_attn.o_proj.weight", offsetof(md_qwen2_layer, o_proj), DIM_HIDDEN, DIM_Q, false},
    {"post_attention_layernorm.weight", offsetof(md_qwen2_layer, post_attention_layernorm),
     DIM_HIDDEN, DIM_NONE, false},
    {"mlp.gate_proj.weight", offsetof(md_qwen2_layer, gate_proj), DIM_INTER, DIM_HIDDEN, false},
    {"mlp.up_proj.weight", offsetof(md_qwen2_layer, up_proj), DIM_INTER, DIM_HIDDEN, false},
    {"mlp.down_proj.weight", offsetof(md_qwen2_layer, down_proj), DIM_HIDDEN, DIM_INTER, false},
};

#define LAYER_TENSOR_COUNT (sizeof layer_tensors / sizeof layer_tensors[0])

static int64_t dim_size(const md_qwen2_config *config, layer_dim dim) {
  switch (dim) {
    case DIM_NONE: return 0;
    case DIM_HIDDEN: return config->hidden_size;
    case DIM_Q: return (int64_t)config->num_attention_heads * config->head_dim;
    case DIM_KV: return (int64_t)config->num_key_value_heads * config->head_dim;
    case DIM_INTER: return config->intermediate_size;
  }
  return 0;
}

static md_status bind_layer(md_qwen2_model *model, int index, md_error *err) {
  md_qwen2_layer *layer = &model->weights.layers[index];
  for (size_t i = 0; i < LAYER_TENSOR_COUNT; i++) {
    if (layer_tensors[i].bias && !model->config.family->attention_bias) continue;
    char name[128];
    snprintf(name, sizeof name, "model.layers.%d.%s", index, layer_tensors[i].suffix);
    md_tensor *out = (md_tensor *)((char *)layer + layer_tensors[i].offset);
    md_status status = bind(model, name, dim_size(&model->config, layer_tensors[i].rows),
                            dim_size(&model->config, layer_tensors[i].cols), out, err);
    if (status != MD_OK) return status;
  }
  return MD_OK;
}

/* transformers ties lm_head to the embedding when tie_word_embeddings is
 * true and then ignores any lm_head.weight in the file; so do we. */
static md_status bind_output(md_qwen2_model *model, md_error *err) {
  const md_qwen2_config *config = &model->config;
  md_qwen2_weights *weights = &model->weights;
  md_status status = bind(model, "model.norm.weight", config->hidden_size, 0, &weights->norm, err);
  if (status != MD_OK) return status;
  if (model->gguf) { /* tied exactly when output.weight is absent */
    if (config->tie_word_embeddings) weights->lm_head = weights->embed_tokens;
    else status = bind(model, "lm_head.weight", config->vocab_size, config->hidden_size,
                       &weights->lm_head, err);
    return status;
  }
  if (!config->tie_word_embeddings) {
    const md_safetensors *shard;
    status = locate(model, "lm_head.weight", &shard, err);
    if (status != MD_OK) return status;
    if (!shard)
      return md_fail(err, MD_E_FORMAT,
                     "missing tensor lm_head.weight in %s (tie_word_embeddings is false, so "
                     "the output projection must be stored)", model->dir);
    return bind(model, "lm_head.weight", config->vocab_size, config->hidden_size,
                &weights->lm_head, err);
  }
  weights->lm_head = weights->embed_tokens;
  const md_safetensors *shard;
  status = locate(model, "lm_head.weight", &shard, err);
  if (status != MD_OK || !shard) return status;
  return add_warning(model, err,
                     "%s: lm_head.weight is present but tie_word_embeddings is true: it is "
                     "ignored and model.embed_tokens.weight is the output projection, as in "
                     "transformers", md_safetensors_path(shard));
}

static md_status bind_weights(md_qwen2_model *model, md_error *err) {
  const md_qwen2_config *config = &model->config;
  model->weights.layers = calloc((size_t)config->num_hidden_layers, sizeof *model->weights.layers);
  if (!model->weights.layers) return md_fail(err, MD_E_NOMEM, "%s: out of memory", model->dir);
  md_status status = bind(model, "model.embed_tokens.weight", config->vocab_size,
                          config->hidden_size, &model->weights.embed_tokens, err);
  for (int i = 0; i < config->num_hidden_layers && status == MD_OK; i++)
    status = bind_layer(model, i, err);
  if (status == MD_OK) status = bind_output(model, err);
  return status;
}

/* The layer index of a "model.layers.N.<known suffix>" name, or -1. */
static long layer_of(const char *name) {
  static const char prefix[] = "model.layers.";
  if (strncmp(name, prefix, sizeof prefix - 1) != 0) return -1;
  const char *digits = name + sizeof prefix - 1;
  char *end;
  long index = strtol(digits, &end, 10);
  if (end == digits || *digits < '0' || *digits > '9' || *end != '.') return -1;
  for (size_t i = 0; i < LAYER_TENSOR_COUNT; i++)
    if (!strcmp(end + 1, layer_tensors[i].suffix)) return index;
  return -1;
}

static bool is_used_outside_layers(const char *name) {
  return !strcmp(name, "model.embed_tokens.weight") || !strcmp(name, "model.norm.weight") ||
         !strcmp(name, "lm_head.weight");
}

/* Extra tensors are ignored, as transformers ignores unexpected keys, but
 * reported: layers beyond num_hidden_layers usually mean a config.json that
 * does not belong to these weights (or a deliberately truncated model). */
static md_status note_unused(md_qwen2_model *model, md_error *err) {
  if (model->gguf) {
    size_t unused = 0;
    const char *first = NULL;
    for (size_t i = 0; i < md_gguf_tensor_count(model->gguf); i++)
      if (!model->gguf_bound[i] && !unused++) first = md_gguf_tensor_at(model->gguf, i)->name;
    if (!unused) return MD_OK;
    return add_warning(model, err, "%s: %zu tensors are not part of %s and are ignored (first: %s)",
                       model->dir, unused, model->config.family->gguf_architecture, first);
  }
  size_t beyond = 0, other = 0;
  const char *first_beyond = NULL, *first_other = NULL;
  for (size_t s = 0; s < model->shard_count; s++) {
    const md_safetensors *shard = model->shards[s];
    for (size_t i = 0; i < md_safetensors_count(shard); i++) {
      const char *name = md_safetensors_name(shard, i);
      long layer = layer_of(name);
      if (layer >= model->config.num_hidden_layers) {
        if (!beyond++) first_beyond = name;
      } else if (layer < 0 && !is_used_outside_layers(name)) {
        if (!other++) first_other = name;
      }
    }
  }
  md_status status = MD_OK;
  if (beyond)
    status = add_warning(model, err,
                         "%s: %zu tensors belong to layers beyond num_hidden_layers = %d (first: "
                         "%s): config.json may not match these weights; they are ignored",
                         model->dir, beyond, model->config.num_hidden_layers, first_beyond);
  if (other && status == MD_OK)
    status = add_warning(model, err,
                         "%s: %zu tensors are not part of %s and are ignored (first: %s)",
                         model->dir, other, model->config.family->hf_architectures[0],
                         first_other);
  return status;
}

/* A GGUF checkpoint: the configuration from its metadata, every tensor
 * bound and then expanded (several at a time). */
static md_status open_gguf(md_qwen2_model *model, md_error *err) {
  md_status status = md_gguf_open(model->dir, &model->gguf, err);
  if (status == MD_OK) {
    model->gguf_bound = calloc(md_gguf_tensor_count(model->gguf) + 1, sizeof *model->gguf_bound);
    if (!model->gguf_bound) status = md_fail(err, MD_E_NOMEM, "%s: out of memory", model->dir);
  }
  if (status == MD_OK) status = md_qwen2_gguf_config(model->gguf, model->gguf_f32, &model->config, err);
  if (status == MD_OK) status = bind_weights(model, err);
  if (status == MD_OK) status = md_qwen2_gguf_expand(model->gguf, model->expansions, model->n_expansions, err);
  if (status == MD_OK) status = note_unused(model, err);
  return status;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !strcmp(s + n - k, suffix);
}

static md_status open_model(md_qwen2_model *model, md_error *err) {
  if (ends_with(model->dir, ".gguf") && md_is_regular_file(model->dir)) return open_gguf(model, err);
  char *config_path = join_path(model->dir, "config.json");
  if (!config_path) return md_fail(err, MD_E_NOMEM, "%s: out of memory", model->dir);
  md_status status = md_qwen2_config_load(config_path, &model->config, err);
  free(config_path);
  if (status == MD_OK) status = open_checkpoint_files(model, err);
  if (status == MD_OK) status = bind_weights(model, err);
  if (status == MD_OK) status = note_unused(model, err);
  return status;
}

md_status md_qwen2_model_open(const char *dir, md_qwen2_model **out, md_error *err) {
  return md_qwen2_model_open_with(dir, NULL, out, err);
}

md_status md_qwen2_model_open_with(const char *dir, const md_qwen2_open_options *options,
                                   md_qwen2_model **out, md_error *err) {
  *out = NULL;
  md_qwen2_model *model = calloc(1, sizeof *model);
  if (!model || !(model->dir = strdup(dir))) {
    free(model);
    return md_fail(err, MD_E_NOMEM, "%s: out of memory", dir);
  }
  /* "dir/" names files as "dir/config.json", not "dir//config.json". */
  for (size_t len = strlen(model->dir); len > 1 && model->dir[len - 1] == '/'; len--)
    model->dir[len - 1] = '\0';
  model->gguf_f32 = options && options->gguf_f32;
  md_status status = open_model(model, err);
  if (status != MD_OK) {
    md_qwen2_model_close(model);
    return status;
  }
  *out = model;
  return MD_OK;
}

const md_qwen2_config *md_qwen2_model_config(const md_qwen2_model *model) {
  return &model->config;
}

const md_gguf_file *md_qwen2_model_gguf(const md_qwen2_model *model) { return model->gguf; }

const md_qwen2_weights *md_qwen2_model_weights(const md_qwen2_model *model) {
  return &model->weights;
}

size_t md_qwen2_model_warning_count(const md_qwen2_model *model) {
  return model->warning_count;
}

const char *md_qwen2_model_warning(const md_qwen2_model *model, size_t index) {
  return index < model->warning_count ? model->warnings[index] : NULL;
}

void md_qwen2_model_close(md_qwen2_model *model) {
  if (!model) return;
  for (size_t i = 0; i < model->shard_count; i++) {
    md_safetensors_close(model->shards[i]);
    free(model->shard_names[i]);
  }
  for (size_t i = 0; i < model->warning_count; i++) free(model->warnings[i]);
  free(model->warnings);
  free(model->shards);
  free(model->shard_names);
  json_decref(model->weight_map);
  free(model->weights.layers);
  free(model->index_path);
  for (size_t i = 0; i < model->n_expansions; i++) free(model->expansions[i].data);
  free(model->expansions);
  free(model->gguf_bound);
  md_gguf_close(model->gguf);
  free(model->dir);
  free(model);
}
