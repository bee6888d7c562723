/* collector/qwen2_config: config.json files against what transformers'
 * Qwen2Config makes of them (reference.json, from make_checkpoints.py), and
 * every refusal with its message. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "collector/model/qwen2_config.h"
#include "tests/checkpoint/checkpoint_util.h"
#include "tests/test_util.h"

static char temp_dir[] = "/tmp/md-qwen2-config-XXXXXX";

static void test_reference_configs(void) {
  json_t *reference = load_reference();
  const char *label;
  json_t *want;
  size_t cases = 0;
  json_object_foreach(json_object_get(reference, "configs"), label, want) {
    char relative[256], path[4096];
    snprintf(relative, sizeof relative, "configs/%s.json", label);
    fixture_path(path, sizeof path, relative);
    md_qwen2_config config;
    md_error err = {0};
    md_status status = md_qwen2_config_load(path, &config, &err);
    CHECK_MSG(status == MD_OK, "%s: %s", label, err.message);
    if (status == MD_OK) check_config_fields(&config, want, label);
    cases++;
  }
  CHECK(cases == 3);
  json_decref(reference);
}

/* Parsing from memory; the digest is the one coreutils' sha256sum prints for
 * the same bytes (printf '%s' TEXT | sha256sum). */
static void test_sha256(void) {
  static const char text[] =
      "{\"architectures\":[\"Qwen2ForCausalLM\"],\"hidden_size\":8,\"intermediate_size\":8,"
      "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"num_key_value_heads\":1,"
      "\"vocab_size\":4}";
  md_qwen2_config config;
  md_error err = {0};
  CHECK(md_qwen2_config_parse("inline.json", text, strlen(text), &config, &err) == MD_OK);
  CHECK_MSG(!strcmp(config.config_sha256,
                    "881279d2b207632faabf395feb477ad8d39c913a9bc80c94dd0fdae99cf5f9d8"),
            "%s", config.config_sha256);
}

/* A valid config; each bad case changes it with a JSON patch whose values
 * replace the base's ("<absent>" deletes the key). */
static const char base_config[] =
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", "
    "\"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 2, "
    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 64, "
    "\"max_position_embeddings\": 128, \"rms_norm_eps\": 1e-6, \"rope_theta\": 1000000.0, "
    "\"tie_word_embeddings\": true, \"use_sliding_window\": false, \"hidden_act\": \"silu\", "
    "\"torch_dtype\": \"bfloat16\"}";

static void write_text(const char *path, const char *text) {
  FILE *fp = fopen(path, "wb");
  fputs(text, fp);
  fclose(fp);
}

/* Loads `text` from a file called config.json; expects `status` and a
 * message naming config.json that contains `fragment`. */
static void expect_text_fails(const char *text, md_status status, const char *fragment) {
  char path[512];
  snprintf(path, sizeof path, "%s/config.json", temp_dir);
  write_text(path, text);
  md_qwen2_config config;
  md_error err = {0};
  md_status got = md_qwen2_config_load(path, &config, &err);
  CHECK_MSG(got == status, "status %d (%s) for %s", got, err.message, text);
  CHECK_MSG(strstr(err.message, path) != NULL, "file not named: %s", err.message);
  CHECK_MSG(strstr(err.message, fragment) != NULL, "'%s' not in: %s", fragment, err.message);
}

static char *patched(const char *patch) {
  json_t *config = json_loads(base_config, 0, NULL);
  json_t *changes = json_loads(patch, 0, NULL);
  if (!config || !changes) {
    fprintf(stderr, "bad test patch %s\n", patch);
    exit(1);
  }
  const char *key;
  json_t *value;
  json_object_foreach(changes, key, value) {
    if (json_is_string(value) && !strcmp(json_string_value(value), "<absent>"))
      json_object_del(config, key);
    else
      json_object_set(config, key, value);
  }
  char *text = json_dumps(config, JSON_INDENT(2));
  json_decref(config);
  json_decref(changes);
  return text;
}

static void expect_fails(const char *patch, md_status status, const char *fragment) {
  char *text = patched(patch);
  expect_text_fails(text, status, fragment);
  free(text);
}

static void expect_loads(const char *patch, md_qwen2_config *config) {
  char *text = patched(patch);
  char path[512];
  snprintf(path, sizeof path, "%s/config.json", temp_dir);
  write_text(path, text);
  free(text);
  md_error err = {0};
  CHECK_MSG(md_qwen2_config_load(path, config, &err) == MD_OK, "%s: %s", patch, err.message);
}

static void test_accepted_variants(void) {
  md_qwen2_config config;
  expect_loads("{}", &config);
  CHECK(config.head_dim == 8 && config.rope_theta == 1e6 && config.tie_word_embeddings);
  CHECK(!strcmp(config.torch_dtype, "bfloat16"));
  /* transformers 5 form: rope_parameters, layer_types, "dtype". */
  expect_loads("{\"rope_theta\": \"<absent>\", \"torch_dtype\": \"<absent>\", \"dtype\": "
               "\"float16\", \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": "
               "250000}, \"layer_types\": [\"full_attention\", \"full_attention\"], "
               "\"sliding_window\": null}", &config);
  CHECK(config.rope_theta == 250000 && !strcmp(config.torch_dtype, "float16"));
  expect_loads("{\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1000000}}",
               &config);
  CHECK(config.rope_theta == 1e6);
  expect_loads("{\"head_dim\": 8, \"rope_scaling\": null, \"model_type\": \"<absent>\", "
               "\"architectures\": [\"Other\", \"Qwen2ForCausalLM\"]}", &config);
  CHECK(config.head_dim == 8);
  expect_loads("{\"num_key_value_heads\": null, \"head_dim\": null}", &config);
  CHECK(config.num_key_value_heads == 4 && config.head_dim == 8);
  expect_loads("{\"use_sliding_window\": \"<absent>\", \"hidden_act\": \"<absent>\"}", &config);
  CHECK(config.max_position_embeddings == 128);
}

static void test_refused_model(void) {
  expect_fails("{\"architectures\": [\"LlamaForCausalLM\"]}", MD_E_UNSUPPORTED,
               "architecture LlamaForCausalLM is not supported (supported: Qwen2ForCausalLM)");
  expect_fails("{\"architectures\": [\"A\", \"B\"]}", MD_E_UNSUPPORTED,
               "architecture [\"A\",\"B\"] is not supported (supported: Qwen2ForCausalLM)");
  expect_fails("{\"architectures\": \"<absent>\"}", MD_E_FORMAT, "'architectures' is missing");
  expect_fails("{\"architectures\": []}", MD_E_FORMAT, "'architectures' must be a non-empty list");
  expect_fails("{\"architectures\": [7]}", MD_E_FORMAT, "'architectures' must be a non-empty list");
  expect_fails("{\"model_type\": \"llama\"}", MD_E_UNSUPPORTED,
               "'model_type' is \"llama\"; only \"qwen2\" is supported");
  expect_fails("{\"hidden_act\": \"gelu\"}", MD_E_UNSUPPORTED,
               "'hidden_act' is \"gelu\"; only \"silu\" is supported");
  expect_fails("{\"use_sliding_window\": true}", MD_E_UNSUPPORTED,
               "'use_sliding_window' is true: sliding-window attention is not supported");
  expect_fails("{\"use_sliding_window\": 1}", MD_E_FORMAT,
               "'use_sliding_window' must be true or false, got 1");
  expect_fails("{\"layer_types\": [\"full_attention\", \"sliding_attention\"]}", MD_E_UNSUPPORTED,
               "'layer_types'[1] is \"sliding_attention\"; only \"full_attention\"");
  expect_fails("{\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0}}", MD_E_UNSUPPORTED,
               "'rope_scaling' is {\"type\":\"yarn\",\"factor\":4.0}; RoPE scaling is not supported");
  expect_fails("{\"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 2.0}}",
               MD_E_UNSUPPORTED, "'rope_parameters' has rope_type \"linear\"; only \"default\"");
  expect_fails("{\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000}}",
               MD_E_FORMAT,
               "'rope_theta' (1000000) and 'rope_parameters.rope_theta' (10000) disagree");
  expect_fails("{\"rope_parameters\": [1]}", MD_E_FORMAT, "'rope_parameters' must be an object");
  expect_fails("{\"head_dim\": 16}", MD_E_UNSUPPORTED,
               "'head_dim' 16 differs from hidden_size / num_attention_heads = 8");
}

static void test_refused_values(void) {
  expect_fails("{\"hidden_size\": \"<absent>\"}", MD_E_FORMAT, "'hidden_size' is missing");
  expect_fails("{\"vocab_size\": null}", MD_E_FORMAT,
               "'vocab_size' must be a positive integer, got null");
  expect_fails("{\"hidden_size\": 0}", MD_E_FORMAT, "'hidden_size' must be a positive integer, got 0");
  expect_fails("{\"intermediate_size\": -64}", MD_E_FORMAT,
               "'intermediate_size' must be a positive integer, got -64");
  expect_fails("{\"num_hidden_layers\": 2.5}", MD_E_FORMAT,
               "'num_hidden_layers' must be a positive integer, got 2.5");
  expect_fails("{\"num_attention_heads\": \"4\"}", MD_E_FORMAT,
               "'num_attention_heads' must be a positive integer, got \"4\"");
  expect_fails("{\"vocab_size\": 4294967296}", MD_E_FORMAT,
               "'vocab_size' must be a positive integer, got 4294967296");
  expect_fails("{\"max_position_embeddings\": 0}", MD_E_FORMAT,
               "'max_position_embeddings' must be a positive integer");
  expect_fails("{\"num_key_value_heads\": \"<absent>\"}", MD_E_FORMAT,
               "'num_attention_heads' 4 is not divisible by 'num_key_value_heads' 32 "
               "(transformers' default when the field is absent");
  expect_fails("{\"num_key_value_heads\": 3}", MD_E_FORMAT,
               "'num_attention_heads' 4 is not divisible by 'num_key_value_heads' 3");
  expect_fails("{\"hidden_size\": 30}", MD_E_FORMAT,
               "'hidden_size' 30 is not divisible by 'num_attention_heads' 4");
  expect_fails("{\"hidden_size\": 36}", MD_E_FORMAT, "head_dim 9 (hidden_size / "
                                                      "num_attention_heads) is odd");
  expect_fails("{\"rms_norm_eps\": 0}", MD_E_FORMAT, "'rms_norm_eps' must be a positive number, got 0");
  expect_fails("{\"rope_theta\": -1}", MD_E_FORMAT, "'rope_theta' must be a positive number, got -1");
  expect_fails("{\"rope_theta\": \"1e6\"}", MD_E_FORMAT, "'rope_theta' must be a positive number");
  expect_fails("{\"tie_word_embeddings\": \"yes\"}", MD_E_FORMAT,
               "'tie_word_embeddings' must be true or false, got \"yes\"");
  expect_fails("{\"torch_dtype\": 16}", MD_E_FORMAT, "'torch_dtype' must be a string, got 16");
}

static void test_refused_files(void) {
  expect_text_fails("{\"architectures\": [\"Qwen2ForCausalLM\"],\n  \"hidden_size\": 32,,\n}",
                    MD_E_FORMAT, "config.json:2:");
  expect_text_fails("{\"hidden_size\": 32, \"hidden_size\": 64}", MD_E_FORMAT,
                    "duplicate object key");
  expect_text_fails("[1, 2]", MD_E_FORMAT, "the top level is not a JSON object");
  expect_text_fails("", MD_E_FORMAT, "config.json:");
  char path[512];
  snprintf(path, sizeof path, "%s/absent.json", temp_dir);
  md_qwen2_config config;
  md_error err = {0};
  CHECK(md_qwen2_config_load(path, &config, &err) == MD_E_IO);
  CHECK(strstr(err.message, path) && strstr(err.message, "No such file"));
  /* A 17 MB file (sparse) is not a config.json. */
  snprintf(path, sizeof path, "%s/huge.json", temp_dir);
  FILE *fp = fopen(path, "wb");
  CHECK(fp && ftruncate(fileno(fp), 17 << 20) == 0);
  fclose(fp);
  CHECK(md_qwen2_config_load(path, &config, &err) == MD_E_FORMAT);
  CHECK_MSG(strstr(err.message, "larger than 16777216 bytes"), "%s", err.message);
  unlink(path);
  snprintf(path, sizeof path, "%s/config.json", temp_dir);
  unlink(path);
}

int main(void) {
  if (!mkdtemp(temp_dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_reference_configs();
  test_sha256();
  test_accepted_variants();
  test_refused_model();
  test_refused_values();
  test_refused_files();
  rmdir(temp_dir);
  return md_test_finish("checkpoint_qwen2_config");
}
