/* md_qwen2_model_open on damaged copies of the reference checkpoints: each
 * is refused with a message naming the file (or directory) and the tensor. */
#include <dirent.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/model/qwen2_model.h"
#include "tests/checkpoint/checkpoint_util.h"
#include "tests/test_util.h"

static char temp_dir[] = "/tmp/md-checkpoint-errors-XXXXXX";
static char work[1024]; /* the damaged copy: <temp_dir>/model */

static void *slurp(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    perror(path);
    exit(1);
  }
  fseek(fp, 0, SEEK_END);
  *len = (size_t)ftell(fp);
  rewind(fp);
  void *bytes = malloc(*len ? *len : 1);
  if (fread(bytes, 1, *len, fp) != *len) exit(1);
  fclose(fp);
  return bytes;
}

static void spill(const char *path, const void *bytes, size_t len) {
  FILE *fp = fopen(path, "wb");
  if (!fp || fwrite(bytes, 1, len, fp) != len) {
    perror(path);
    exit(1);
  }
  fclose(fp);
}

static void work_path(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "%s/%s", work, name);
}

/* A fresh copy of fixtures/<label> in `work`. */
static void fresh_copy(const char *label) {
  char command[8192], source[4096], relative[256];
  snprintf(relative, sizeof relative, "fixtures/%s", label);
  fixture_path(source, sizeof source, relative);
  snprintf(command, sizeof command, "rm -rf '%s' && mkdir '%s' && cp '%s'/* '%s'/", work, work,
           source, work);
  if (system(command) != 0) exit(1);
}

typedef void (*header_edit)(json_t *header);

/* Rewrites the JSON header of `name` in the copy through `edit`, keeping the
 * data section, with the header padded to 8 bytes as the writer does. */
static void edit_header(const char *name, header_edit edit) {
  char path[4096];
  work_path(path, sizeof path, name);
  size_t len;
  unsigned char *bytes = slurp(path, &len);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; i--) header_len = (header_len << 8) | bytes[i];
  json_t *header = json_loadb((char *)bytes + 8, header_len, 0, NULL);
  edit(header);
  char *text = json_dumps(header, JSON_COMPACT);
  size_t text_len = strlen(text), padded = (text_len + 7) / 8 * 8;
  size_t data_len = len - 8 - header_len;
  unsigned char *out = malloc(8 + padded + data_len);
  for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)padded >> (8 * i));
  memset(out + 8, ' ', padded);
  memcpy(out + 8, text, text_len);
  memcpy(out + 8 + padded, bytes + 8 + header_len, data_len);
  spill(path, out, 8 + padded + data_len);
  free(out);
  free(text);
  free(bytes);
  json_decref(header);
}

/* Opening the copy fails with `status`, and the message holds each of the
 * fragments ("@" stands for the copy's directory). */
static void expect_fails(const char *what, md_status status, const char *fragment1,
                         const char *fragment2) {
  md_qwen2_model *model = (md_qwen2_model *)1;
  md_error err = {0};
  md_status got = md_qwen2_model_open(work, &model, &err);
  CHECK_MSG(got == status, "%s: status %d (%s)", what, got, err.message);
  CHECK(model == NULL);
  const char *fragments[2] = {fragment1, fragment2};
  for (int i = 0; i < 2; i++) {
    if (!fragments[i]) continue;
    const char *fragment = !strcmp(fragments[i], "@") ? work : fragments[i];
    CHECK_MSG(strstr(err.message, fragment) != NULL, "%s: '%s' not in: %s", what, fragment,
              err.message);
  }
  if (got == MD_OK) md_qwen2_model_close(model);
}

static void expect_loads(const char *what) {
  md_qwen2_model *model = NULL;
  md_error err = {0};
  CHECK_MSG(md_qwen2_model_open(work, &model, &err) == MD_OK, "%s: %s", what, err.message);
  md_qwen2_model_close(model);
}

static void set_offsets_overlapping(json_t *header) {
  json_t *entry = json_object_get(header, "model.layers.0.input_layernorm.weight");
  json_object_set_new(entry, "data_offsets", json_pack("[i, i]", 0, 128));
}

static void transpose_k_proj(json_t *header) {
  json_t *entry = json_object_get(header, "model.layers.1.self_attn.k_proj.weight");
  json_object_set_new(entry, "shape", json_pack("[i, i]", 32, 16));
}

static void rename_up_proj(json_t *header) {
  const char *name = "model.layers.1.mlp.up_proj.weight";
  json_object_set(header, "model.layers.1.mlp.up_proj.weight.orig",
                  json_object_get(header, name));
  json_object_del(header, name);
}

static void norm_as_i32(json_t *header) {
  json_object_set_new(json_object_get(header, "model.norm.weight"), "dtype", json_string("I32"));
}

/* [32, 32] F32 and [32, 16] F64 hold the same bytes. */
static void q_proj_as_f64(json_t *header) {
  json_t *entry = json_object_get(header, "model.layers.0.self_attn.q_proj.weight");
  json_object_set_new(entry, "dtype", json_string("F64"));
  json_object_set_new(entry, "shape", json_pack("[i, i]", 32, 16));
}

static void test_damaged_file(void) {
  char path[4096];
  work_path(path, sizeof path, "model.safetensors");
  fresh_copy("f32-untied");
  expect_loads("intact copy");
  /* Truncated: the last tensor runs past the end. */
  struct stat info;
  stat(path, &info);
  CHECK(truncate(path, info.st_size - 100) == 0);
  expect_fails("truncated", MD_E_FORMAT, path, "run past the end of the file");
  /* A header length that lies (the whole file's size). */
  fresh_copy("f32-untied");
  size_t len;
  unsigned char *bytes = slurp(path, &len);
  for (int i = 0; i < 8; i++) bytes[i] = (unsigned char)((uint64_t)len >> (8 * i));
  spill(path, bytes, len);
  free(bytes);
  expect_fails("lying header length", MD_E_FORMAT, path, "runs past the end of the file");
  fresh_copy("f32-untied");
  edit_header("model.safetensors", set_offsets_overlapping);
  expect_fails("overlap", MD_E_FORMAT, "model.layers.0.input_layernorm.weight [0, 128) and "
                                       "lm_head.weight [0, 8192) overlap", path);
}

static void test_wrong_tensors(void) {
  char path[4096];
  work_path(path, sizeof path, "model.safetensors");
  fresh_copy("f32-untied");
  edit_header("model.safetensors", transpose_k_proj);
  expect_fails("wrong shape", MD_E_FORMAT,
               "tensor model.layers.1.self_attn.k_proj.weight has shape [32, 16], expected "
               "[16, 32]", path);
  fresh_copy("f32-untied");
  edit_header("model.safetensors", rename_up_proj);
  expect_fails("missing tensor", MD_E_FORMAT, "missing tensor model.layers.1.mlp.up_proj.weight in",
               "@");
  fresh_copy("f32-untied");
  edit_header("model.safetensors", norm_as_i32);
  expect_fails("I32 norm", MD_E_UNSUPPORTED,
               "dtype I32 of tensor model.norm.weight is not supported (supported: F32, F16, BF16)",
               path);
  fresh_copy("f32-untied");
  edit_header("model.safetensors", q_proj_as_f64);
  expect_fails("F64 matrix", MD_E_UNSUPPORTED,
               "dtype F64 of tensor model.layers.0.self_attn.q_proj.weight is not supported", path);
}

static void edit_config(const char *key, json_t *value) {
  char path[4096];
  work_path(path, sizeof path, "config.json");
  json_t *config = json_load_file(path, 0, NULL);
  json_object_set_new(config, key, value);
  json_dump_file(config, path, JSON_INDENT(2));
  json_decref(config);
}

static void test_bad_config(void) {
  char path[4096];
  work_path(path, sizeof path, "config.json");
  fresh_copy("bf16-tied");
  edit_config("use_sliding_window", json_true());
  expect_fails("sliding window", MD_E_UNSUPPORTED, path,
               "'use_sliding_window' is true: sliding-window attention is not supported");
  fresh_copy("bf16-tied");
  edit_config("architectures", json_pack("[s]", "MistralForCausalLM"));
  expect_fails("architecture", MD_E_UNSUPPORTED, path,
               "architecture MistralForCausalLM is not supported (supported: Qwen2ForCausalLM)");
  fresh_copy("bf16-tied");
  edit_config("num_hidden_layers", json_integer(3));
  expect_fails("config with more layers", MD_E_FORMAT,
               "missing tensor model.layers.2.input_layernorm.weight in", "@");
  fresh_copy("bf16-tied");
  edit_config("tie_word_embeddings", json_false());
  expect_fails("untied without lm_head", MD_E_FORMAT,
               "missing tensor lm_head.weight in", "(tie_word_embeddings is false");
  fresh_copy("bf16-tied");
  edit_config("intermediate_size", json_integer(48));
  expect_fails("config that does not match", MD_E_FORMAT,
               "model.layers.0.mlp.gate_proj.weight has shape [64, 32], expected [48, 32]", NULL);
  fresh_copy("bf16-tied");
  unlink(path);
  expect_fails("no config.json", MD_E_IO, path, "No such file");
  /* The directory given with a trailing slash: file names stay clean. */
  char slashed[2048];
  snprintf(slashed, sizeof slashed, "%s//", work);
  md_qwen2_model *model = NULL;
  md_error err = {0};
  CHECK(md_qwen2_model_open(slashed, &model, &err) == MD_E_IO && model == NULL);
  CHECK_MSG(strstr(err.message, path) == err.message, "%s", err.message);
}

static void test_missing_files(void) {
  char path[4096];
  fresh_copy("bf16-tied");
  work_path(path, sizeof path, "model.safetensors");
  unlink(path);
  expect_fails("no weights", MD_E_IO, "no model.safetensors or model.safetensors.index.json",
               "@");
  work_path(path, sizeof path, "pytorch_model.bin");
  spill(path, "x", 1);
  expect_fails("pickle only", MD_E_IO, "pytorch_model.bin is not read", NULL);
  /* A model.safetensors that is a directory is no weights file either. */
  unlink(path);
  work_path(path, sizeof path, "model.safetensors");
  mkdir(path, 0700);
  expect_fails("directory", MD_E_IO, "no model.safetensors", NULL);
  rmdir(path);
}

static void edit_index(const char *tensor, json_t *file) {
  char path[4096];
  work_path(path, sizeof path, "model.safetensors.index.json");
  json_t *index = json_load_file(path, 0, NULL);
  json_t *map = json_object_get(index, "weight_map");
  if (file)
    json_object_set_new(map, tensor, file);
  else
    json_object_del(map, tensor);
  json_dump_file(index, path, JSON_INDENT(2));
  json_decref(index);
}

static void test_sharded(void) {
  char index[4096], path[4096];
  work_path(index, sizeof index, "model.safetensors.index.json");
  fresh_copy("f16-sharded");
  expect_loads("intact sharded copy");
  work_path(path, sizeof path, "model-00002-of-00003.safetensors");
  unlink(path);
  expect_fails("missing shard", MD_E_IO, index,
               "shard model-00002-of-00003.safetensors named in the index does not exist");
  /* The index names a shard that does not hold the tensor. */
  fresh_copy("f16-sharded");
  edit_index("model.norm.weight", json_string("model-00001-of-00003.safetensors"));
  expect_fails("wrong shard", MD_E_FORMAT, index,
               "tensor model.norm.weight is listed in shard model-00001-of-00003.safetensors, "
               "which lacks it");
  /* A tensor the index does not list is missing, even if a shard has it. */
  fresh_copy("f16-sharded");
  edit_index("model.layers.0.self_attn.v_proj.bias", NULL);
  expect_fails("unlisted tensor", MD_E_FORMAT,
               "missing tensor model.layers.0.self_attn.v_proj.bias in", "@");
  expect_fails("unlisted tensor", MD_E_FORMAT, "(model.safetensors.index.json does not list it)",
               NULL);
  fresh_copy("f16-sharded");
  edit_index("model.norm.weight", json_string("../model-00003-of-00003.safetensors"));
  expect_fails("path in index", MD_E_FORMAT, index, "is not a plain file name");
  fresh_copy("f16-sharded");
  edit_index("model.norm.weight", json_integer(3));
  expect_fails("number in index", MD_E_FORMAT, index,
               "weight_map entry for model.norm.weight is not a file name");
  spill(index, "{\"metadata\": {}}", 16);
  expect_fails("index without weight_map", MD_E_FORMAT, index, "'weight_map' is missing");
  spill(index, "{\"weight_map\": {}}", 18);
  expect_fails("empty weight_map", MD_E_FORMAT, index, "'weight_map' is empty");
  spill(index, "{\"weight_map\": {\n\"a\": }", 23);
  expect_fails("malformed index", MD_E_FORMAT, index, ":2:");
  /* A damaged shard is reported with its own name. */
  fresh_copy("f16-sharded");
  work_path(path, sizeof path, "model-00003-of-00003.safetensors");
  CHECK(truncate(path, 4) == 0);
  expect_fails("truncated shard", MD_E_FORMAT, path, "too short");
}

/* transformers reads model.safetensors when present and never looks at an
 * index beside it; so do we. */
static void test_single_file_wins(void) {
  char index[4096];
  fresh_copy("f32-untied");
  work_path(index, sizeof index, "model.safetensors.index.json");
  spill(index, "not json", 8);
  expect_loads("model.safetensors beside a broken index");
}

int main(void) {
  if (!mkdtemp(temp_dir)) {
    perror("mkdtemp");
    return 1;
  }
  snprintf(work, sizeof work, "%s/model", temp_dir);
  test_damaged_file();
  test_wrong_tensors();
  test_bad_config();
  test_missing_files();
  test_sharded();
  test_single_file_wins();
  char command[8192];
  snprintf(command, sizeof command, "rm -rf '%s'", temp_dir);
  CHECK(system(command) == 0);
  return md_test_finish("checkpoint_errors");
}
