/* Writes a random BF16 Qwen2 checkpoint (config.json, model.safetensors,
 * tied embeddings) and a prompt of random token ids (prompt.i32, raw
 * little-endian int32) for the GPU checks, without Python. The default
 * shapes are Qwen2.5-1.5B's: hidden 1536, intermediate 8960, 28 layers,
 * 12 query / 2 KV heads, vocab 151936 (3.1 GB).
 *
 *   make_checkpoint OUTDIR [--prompt N] [--hidden H] [--intermediate I]
 *                   [--layers L] [--heads Q] [--kv-heads K] [--vocab V]
 *
 * Weights are normal with the scales of bench/make_bench_checkpoint.py (so
 * that attention is peaked, not uniform, as in a trained model): a
 * counter-based generator (splitmix64 of the tensor and element index)
 * makes every value independent of the order of computation, so the file
 * is the same on every run and machine. A normal variate is approximated
 * by the sum of four uniforms, rescaled to unit variance. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct shape {
  int64_t hidden, intermediate, layers, heads, kv_heads, vocab, prompt;
} shape;

typedef struct tensor {
  char name[96];
  int64_t rows, cols; /* cols = 0: 1-D [rows] */
  double mean, std;
} tensor;

static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* float -> bf16 bits, round to nearest even (no NaNs arise here). */
static uint16_t to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

static uint16_t value(uint64_t tensor_index, uint64_t i, double mean, double std) {
  uint64_t r = splitmix64((tensor_index << 40) ^ i);
  double sum = 0.0;
  for (int k = 0; k < 4; k++) sum += (double)((r >> (16 * k)) & 0xffffu) / 65536.0;
  double normal = (sum - 2.0) * sqrt(3.0); /* variance of 4 uniforms is 1/3 */
  return to_bf16((float)(mean + std * normal));
}

static int64_t count_of(const tensor *t) { return t->rows * (t->cols ? t->cols : 1); }

static int list_tensors(const shape *s, tensor *out) {
  int64_t h = s->hidden, hd = s->hidden / s->heads, q = s->heads * hd, kv = s->kv_heads * hd;
  int64_t i = s->intermediate;
  int n = 0;
  out[n++] = (tensor){"model.embed_tokens.weight", s->vocab, h, 0.0, 0.03};
  out[n++] = (tensor){"model.norm.weight", h, 0, 1.0, 0.1};
  for (int64_t l = 0; l < s->layers; l++) {
    const struct {
      const char *suffix;
      int64_t rows, cols;
      double mean, std;
    } parts[] = {
        {"input_layernorm.weight", h, 0, 1.0, 0.1},
        {"post_attention_layernorm.weight", h, 0, 1.0, 0.1},
        {"self_attn.q_proj.weight", q, h, 0.0, 1.2 / sqrt((double)h)},
        {"self_attn.q_proj.bias", q, 0, 0.0, 0.5},
        {"self_attn.k_proj.weight", kv, h, 0.0, 1.2 / sqrt((double)h)},
        {"self_attn.k_proj.bias", kv, 0, 0.0, 0.5},
        {"self_attn.v_proj.weight", kv, h, 0.0, 1.0 / sqrt((double)h)},
        {"self_attn.v_proj.bias", kv, 0, 0.0, 0.1},
        {"self_attn.o_proj.weight", h, q, 0.0, 1.0 / sqrt((double)q)},
        {"mlp.gate_proj.weight", i, h, 0.0, 1.0 / sqrt((double)h)},
        {"mlp.up_proj.weight", i, h, 0.0, 1.0 / sqrt((double)h)},
        {"mlp.down_proj.weight", h, i, 0.0, 1.0 / sqrt((double)i)},
    };
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++) {
      tensor *t = &out[n++];
      snprintf(t->name, sizeof t->name, "model.layers.%lld.%s", (long long)l, parts[p].suffix);
      t->rows = parts[p].rows;
      t->cols = parts[p].cols;
      t->mean = parts[p].mean;
      t->std = parts[p].std;
    }
  }
  return n;
}

/* The safetensors header: JSON, padded with spaces to a multiple of 8. */
static char *header_json(const tensor *t, int n, size_t *length) {
  size_t cap = (size_t)n * 160 + 64, used = 0;
  char *json = malloc(cap);
  if (!json) return NULL;
  used += (size_t)snprintf(json + used, cap - used, "{\"__metadata__\":{\"format\":\"pt\"}");
  uint64_t offset = 0;
  for (int k = 0; k < n; k++) {
    uint64_t bytes = (uint64_t)count_of(&t[k]) * 2;
    if (t[k].cols)
      used += (size_t)snprintf(json + used, cap - used,
                               ",\"%s\":{\"dtype\":\"BF16\",\"shape\":[%lld,%lld],\"data_offsets\":[%llu,%llu]}",
                               t[k].name, (long long)t[k].rows, (long long)t[k].cols,
                               (unsigned long long)offset, (unsigned long long)(offset + bytes));
    else
      used += (size_t)snprintf(json + used, cap - used,
                               ",\"%s\":{\"dtype\":\"BF16\",\"shape\":[%lld],\"data_offsets\":[%llu,%llu]}",
                               t[k].name, (long long)t[k].rows, (unsigned long long)offset,
                               (unsigned long long)(offset + bytes));
    offset += bytes;
  }
  used += (size_t)snprintf(json + used, cap - used, "}");
  while (used % 8) json[used++] = ' ';
  *length = used;
  return json;
}

static int write_weights(const char *path, const tensor *t, int n) {
  size_t length;
  char *json = header_json(t, n, &length);
  FILE *fp = fopen(path, "wb");
  if (!json || !fp) {
    fprintf(stderr, "make_checkpoint: cannot write %s: %s\n", path, strerror(errno));
    free(json);
    if (fp) fclose(fp);
    return 1;
  }
  uint64_t header_length = length; /* little-endian on the x86-64 and ARM machines we run on */
  int ok = fwrite(&header_length, 8, 1, fp) == 1 && fwrite(json, 1, length, fp) == length;
  free(json);
  const int64_t chunk = (int64_t)1 << 24;
  uint16_t *buffer = malloc((size_t)chunk * sizeof(uint16_t));
  for (int k = 0; ok && buffer && k < n; k++)
    for (int64_t start = 0; ok && start < count_of(&t[k]); start += chunk) {
      int64_t len = count_of(&t[k]) - start < chunk ? count_of(&t[k]) - start : chunk;
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < len; i++)
        buffer[i] = value((uint64_t)k + 1, (uint64_t)(start + i), t[k].mean, t[k].std);
      ok = fwrite(buffer, sizeof(uint16_t), (size_t)len, fp) == (size_t)len;
    }
  free(buffer);
  if (fclose(fp) != 0) ok = 0;
  if (!ok) fprintf(stderr, "make_checkpoint: cannot write %s\n", path);
  return ok ? 0 : 1;
}

static int write_config(const char *path, const shape *s) {
  FILE *fp = fopen(path, "w");
  if (!fp) return 1;
  fprintf(fp,
          "{\n  \"architectures\": [\"Qwen2ForCausalLM\"],\n  \"attention_dropout\": 0.0,\n"
          "  \"bos_token_id\": 151643,\n  \"eos_token_id\": 151643,\n  \"hidden_act\": \"silu\",\n"
          "  \"hidden_size\": %lld,\n  \"initializer_range\": 0.02,\n  \"intermediate_size\": %lld,\n"
          "  \"max_position_embeddings\": 32768,\n  \"max_window_layers\": %lld,\n"
          "  \"model_type\": \"qwen2\",\n  \"num_attention_heads\": %lld,\n"
          "  \"num_hidden_layers\": %lld,\n  \"num_key_value_heads\": %lld,\n"
          "  \"rms_norm_eps\": 1e-06,\n  \"rope_theta\": 1000000.0,\n  \"sliding_window\": 32768,\n"
          "  \"tie_word_embeddings\": true,\n  \"torch_dtype\": \"bfloat16\",\n  \"use_cache\": true,\n"
          "  \"use_sliding_window\": false,\n  \"vocab_size\": %lld\n}\n",
          (long long)s->hidden, (long long)s->intermediate, (long long)s->layers, (long long)s->heads,
          (long long)s->layers, (long long)s->kv_heads, (long long)s->vocab);
  return fclose(fp) == 0 ? 0 : 1;
}

static int write_prompt(const char *path, const shape *s) {
  FILE *fp = fopen(path, "wb");
  if (!fp) return 1;
  int ok = 1;
  for (int64_t i = 0; i < s->prompt && ok; i++) {
    int32_t token = (int32_t)(splitmix64(0xabcdefull + (uint64_t)i) % (uint64_t)s->vocab);
    ok = fwrite(&token, sizeof token, 1, fp) == 1;
  }
  return fclose(fp) == 0 && ok ? 0 : 1;
}

int main(int argc, char **argv) {
  shape s = {1536, 8960, 28, 12, 2, 151936, 2048};
  const char *dir = NULL;
  for (int i = 1; i < argc; i++) {
    int64_t *field = !strcmp(argv[i], "--prompt") ? &s.prompt
                     : !strcmp(argv[i], "--hidden") ? &s.hidden
                     : !strcmp(argv[i], "--intermediate") ? &s.intermediate
                     : !strcmp(argv[i], "--layers") ? &s.layers
                     : !strcmp(argv[i], "--heads") ? &s.heads
                     : !strcmp(argv[i], "--kv-heads") ? &s.kv_heads
                     : !strcmp(argv[i], "--vocab") ? &s.vocab : NULL;
    if (field && i + 1 < argc) *field = atoll(argv[++i]);
    else if (!dir && argv[i][0] != '-') dir = argv[i];
    else dir = NULL, i = argc;
  }
  if (!dir || s.heads < 1 || s.kv_heads < 1 || s.hidden % s.heads || s.heads % s.kv_heads || s.layers < 1 ||
      s.vocab < 2 || s.prompt < 1) {
    fprintf(stderr, "usage: make_checkpoint OUTDIR [--prompt N] [--hidden H] [--intermediate I] "
                    "[--layers L] [--heads Q] [--kv-heads K] [--vocab V]\n");
    return 2;
  }
  mkdir(dir, 0777);
  int n_max = 2 + 12 * (int)s.layers;
  tensor *t = calloc((size_t)n_max, sizeof *t);
  int n = list_tensors(&s, t);
  char path[4096];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  int status = write_weights(path, t, n);
  snprintf(path, sizeof path, "%s/config.json", dir);
  if (!status) status = write_config(path, &s);
  snprintf(path, sizeof path, "%s/prompt.i32", dir);
  if (!status) status = write_prompt(path, &s);
  free(t);
  if (status) fprintf(stderr, "make_checkpoint: writing %s failed\n", dir);
  return status;
}
