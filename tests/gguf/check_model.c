/* A real Qwen2.5 GGUF checkpoint, as data/models/fetch_qwen25.py stores it:
 * the reader opens it; its configuration, tokenizer keys and every tensor a
 * Qwen2 model needs are there with the shapes the configuration implies
 * (gguf.h lists the names); its tensor types are the expected ones; and
 * every tensor dequantizes, to float32 and to bf16, to values whose SHA-256
 * (all tensors in file order, little-endian) equals gguf-py's
 * (tests/gguf/model_digest.py, recorded below); and the tokenizer of its
 * metadata (md_tokenizer_load_gguf) encodes exactly as Qwen2.5's
 * tokenizer.json (the shipped demo's, data/models/qwen2-tiny): the same ids
 * and byte spans for every string of the tokenizer corpus
 * (tests/tokenizer/fixtures) and for the text of every vocabulary entry.
 *
 *   check_model MODEL [FILE]     MODEL: 0.5b or 1.5b
 *
 * FILE defaults to where fetch_qwen25.py puts the model; a missing file
 * fails, naming the command that fetches it. The suite (gguf-model) runs
 * only when asked for: meson test --setup realmodels --suite gguf-model
 * (the root meson.build keeps it out of the default setup, so that the
 * tests run without the model). Prints what it checked and how long opening
 * and dequantizing took. */
#include <inttypes.h>
#include <math.h>
#include <nettle/sha2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "collector/tokenizer/tokenizer.h"
#include "io/formats/gguf.h"
#include "tests/test_util.h"

typedef struct model_facts {
  const char *name, *file;
  uint64_t size;
  uint32_t layers, hidden, ffn, heads, kv_heads, context;
  size_t tensors;
  uint32_t types[8]; /* the ggml types present: n_types of them, and no other */
  size_t n_types;
  /* tests/gguf/model_digest.py with gguf 0.19.0, numpy 2.4.6. */
  const char *f32_digest, *bf16_digest;
} model_facts;

static const model_facts models[] = {
    {"0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", 491400064, 24, 896, 4864, 14, 2, 32768,
     291, {MD_GGML_F32, MD_GGML_Q5_0, MD_GGML_Q8_0, MD_GGML_Q4_K, MD_GGML_Q6_K}, 5,
     "4b296b8a58ae18904185de1f2a0f7b3de1758c702dab0f67d497be90db57f979",
     "ef0a637983620e91eb14ed050065de28def06827be649a01daf21e1564934fe6"},
    {"1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", 1117320768, 28, 1536, 8960, 12, 2, 32768,
     339, {MD_GGML_F32, MD_GGML_Q4_K, MD_GGML_Q6_K}, 3,
     "97a507b58856c3de80606f4a3d31f9ad9dd1a907f717ee605fe803e559dacf04",
     "38bd2a01c8334dce6eca6fff5dd387350206a44f111c12404e61545b9581865e"},
};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void default_path(const model_facts *m, char *buf, size_t size) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (xdg && *xdg)
    snprintf(buf, size, "%s/memdecay-calibrate/models/%s", xdg, m->file);
  else
    snprintf(buf, size, "%s/.cache/memdecay-calibrate/models/%s", home ? home : ".", m->file);
}

static void check_u32(const md_gguf_file *f, const char *key, uint32_t want) {
  md_error err = {0};
  uint32_t v = 0;
  md_status status = md_gguf_get_u32(f, key, &v, &err);
  CHECK_MSG(status == MD_OK && v == want, "%s = %" PRIu32 ", expected %" PRIu32 " (%s)", key, v,
            want, err.message);
}

/* The tensor exists, with these extents (fastest first) and at most dims. */
static void check_shape(const md_gguf_file *f, const char *name, int64_t ne0, int64_t ne1) {
  const md_gguf_tensor *t = md_gguf_find_tensor(f, name);
  CHECK_MSG(t != NULL, "no tensor %s", name);
  if (!t) return;
  int want_dims = ne1 ? 2 : 1;
  CHECK_MSG(t->n_dims == want_dims && t->ne[0] == ne0 && t->ne[1] == (ne1 ? ne1 : 1),
            "%s: %d dims, ne = {%" PRId64 ", %" PRId64 "}, expected {%" PRId64 ", %" PRId64 "}",
            name, t->n_dims, t->ne[0], t->ne[1], ne0, ne1);
}

static void check_layout(const md_gguf_file *f, const model_facts *m) {
  md_error err = {0};
  const char *s = NULL;
  CHECK(md_gguf_get_string(f, "general.architecture", &s, NULL, &err) == MD_OK &&
        !strcmp(s, "qwen2"));
  check_u32(f, "qwen2.block_count", m->layers);
  check_u32(f, "qwen2.embedding_length", m->hidden);
  check_u32(f, "qwen2.feed_forward_length", m->ffn);
  check_u32(f, "qwen2.attention.head_count", m->heads);
  check_u32(f, "qwen2.attention.head_count_kv", m->kv_heads);
  check_u32(f, "qwen2.context_length", m->context);
  float theta = 0, eps = 0;
  CHECK(md_gguf_get_f32(f, "qwen2.rope.freq_base", &theta, &err) == MD_OK && theta == 1e6f);
  CHECK(md_gguf_get_f32(f, "qwen2.attention.layer_norm_rms_epsilon", &eps, &err) == MD_OK &&
        eps == 1e-6f);

  const md_gguf_tensor *embd = md_gguf_find_tensor(f, "token_embd.weight");
  CHECK(embd != NULL && md_gguf_find_tensor(f, "output.weight") != NULL);
  if (!embd) return;
  int64_t vocab = embd->ne[1];
  int64_t kv_dim = (int64_t)(m->hidden / m->heads * m->kv_heads);
  check_shape(f, "token_embd.weight", m->hidden, vocab);
  check_shape(f, "output.weight", m->hidden, vocab);
  check_shape(f, "output_norm.weight", m->hidden, 0);
  for (uint32_t l = 0; l < m->layers; l++) {
    char name[96];
#define LAYER(suffix, ne0, ne1)                                   \
  do {                                                            \
    snprintf(name, sizeof name, "blk.%" PRIu32 "." suffix, l);    \
    check_shape(f, name, (ne0), (ne1));                           \
  } while (0)
    LAYER("attn_norm.weight", m->hidden, 0);
    LAYER("attn_q.weight", m->hidden, m->hidden);
    LAYER("attn_q.bias", m->hidden, 0);
    LAYER("attn_k.weight", m->hidden, kv_dim);
    LAYER("attn_k.bias", kv_dim, 0);
    LAYER("attn_v.weight", m->hidden, kv_dim);
    LAYER("attn_v.bias", kv_dim, 0);
    LAYER("attn_output.weight", m->hidden, m->hidden);
    LAYER("ffn_norm.weight", m->hidden, 0);
    LAYER("ffn_gate.weight", m->hidden, m->ffn);
    LAYER("ffn_up.weight", m->hidden, m->ffn);
    LAYER("ffn_down.weight", m->ffn, m->hidden);
#undef LAYER
  }
  CHECK(md_gguf_tensor_count(f) == m->tensors);

  /* The tokenizer: one token per embedding row. */
  CHECK(md_gguf_get_string(f, "tokenizer.ggml.model", &s, NULL, &err) == MD_OK &&
        !strcmp(s, "gpt2"));
  CHECK(md_gguf_get_string(f, "tokenizer.ggml.pre", &s, NULL, &err) == MD_OK &&
        !strcmp(s, "qwen2"));
  const md_gguf_string *tokens = NULL, *merges = NULL;
  uint64_t n_tokens = 0, n_merges = 0;
  CHECK(md_gguf_get_string_array(f, "tokenizer.ggml.tokens", &tokens, &n_tokens, &err) == MD_OK);
  CHECK(md_gguf_get_string_array(f, "tokenizer.ggml.merges", &merges, &n_merges, &err) == MD_OK);
  CHECK_MSG(n_tokens == (uint64_t)vocab, "%" PRIu64 " tokens, %" PRId64 " embedding rows",
            n_tokens, vocab);
  CHECK(n_merges > 0);
  md_gguf_array types;
  CHECK(md_gguf_get_array(f, "tokenizer.ggml.token_type", &types, &err) == MD_OK &&
        types.count == n_tokens);
  uint32_t eos = 0, pad = 0;
  CHECK(md_gguf_get_u32(f, "tokenizer.ggml.eos_token_id", &eos, &err) == MD_OK);
  CHECK(md_gguf_get_u32(f, "tokenizer.ggml.padding_token_id", &pad, &err) == MD_OK);
  if (eos < n_tokens && pad < n_tokens && tokens) {
    CHECK(tokens[eos].len == 10 && !memcmp(tokens[eos].data, "<|im_end|>", 10));
    CHECK(tokens[pad].len == 13 && !memcmp(tokens[pad].data, "<|endoftext|>", 13));
  }
  printf("%s: qwen2, %" PRIu32 " layers, hidden %" PRIu32 ", FFN %" PRIu32 ", heads %" PRIu32
         "/%" PRIu32 ", vocabulary %" PRId64 ", %" PRIu64 " merges, %zu tensors\n",
         md_gguf_path(f), m->layers, m->hidden, m->ffn, m->heads, m->kv_heads, vocab, n_merges,
         md_gguf_tensor_count(f));
}

static void check_types(const md_gguf_file *f, const model_facts *m) {
  size_t count[64] = {0};
  for (size_t i = 0; i < md_gguf_tensor_count(f); i++) {
    uint32_t type = md_gguf_tensor_at(f, i)->type;
    if (type < 64) count[type]++;
  }
  printf("tensor types:");
  for (uint32_t type = 0; type < 64; type++)
    if (count[type]) printf(" %s %zu", md_ggml_type_name(type), count[type]);
  printf("\n");
  size_t expected = 0;
  for (size_t k = 0; k < m->n_types; k++) {
    CHECK_MSG(count[m->types[k]] > 0, "no %s tensor", md_ggml_type_name(m->types[k]));
    expected += count[m->types[k]];
  }
  CHECK_MSG(expected == md_gguf_tensor_count(f), "tensors of unexpected types");
}

static void hex(const uint8_t digest[SHA256_DIGEST_SIZE], char out[2 * SHA256_DIGEST_SIZE + 1]) {
  for (int i = 0; i < SHA256_DIGEST_SIZE; i++) snprintf(out + 2 * i, 3, "%02x", digest[i]);
}

static void check_dequantize(const md_gguf_file *f, const model_facts *m) {
  struct sha256_ctx f32_ctx, bf16_ctx;
  sha256_init(&f32_ctx);
  sha256_init(&bf16_ctx);
  uint64_t elements = 0, non_finite = 0;
  double f32_seconds = 0, bf16_seconds = 0;
  for (size_t i = 0; i < md_gguf_tensor_count(f); i++) {
    const md_gguf_tensor *t = md_gguf_tensor_at(f, i);
    float *out = malloc(t->n_elements * sizeof *out);
    uint16_t *out16 = malloc(t->n_elements * sizeof *out16);
    if (!out || !out16) {
      CHECK_MSG(0, "out of memory for %s", t->name);
      free(out);
      free(out16);
      return;
    }
    md_error err = {0};
    double start = now();
    md_status status = md_gguf_tensor_dequantize(f, t, out, &err);
    f32_seconds += now() - start;
    CHECK_MSG(status == MD_OK, "%s", err.message);
    start = now();
    status = md_gguf_tensor_dequantize_bf16(f, t, out16, &err);
    bf16_seconds += now() - start;
    CHECK_MSG(status == MD_OK, "%s", err.message);
    for (uint64_t k = 0; k < t->n_elements; k++) non_finite += !isfinite(out[k]);
    sha256_update(&f32_ctx, t->n_elements * sizeof *out, (const uint8_t *)out);
    sha256_update(&bf16_ctx, t->n_elements * sizeof *out16, (const uint8_t *)out16);
    elements += t->n_elements;
    free(out);
    free(out16);
  }
  uint8_t digest[SHA256_DIGEST_SIZE];
  char f32_hex[2 * SHA256_DIGEST_SIZE + 1], bf16_hex[2 * SHA256_DIGEST_SIZE + 1];
  sha256_digest(&f32_ctx, sizeof digest, digest);
  hex(digest, f32_hex);
  sha256_digest(&bf16_ctx, sizeof digest, digest);
  hex(digest, bf16_hex);
  printf("dequantized %" PRIu64 " elements: float32 in %.2f s, bf16 in %.2f s\n", elements,
         f32_seconds, bf16_seconds);
  printf("float32 SHA-256 %s\nbf16 SHA-256    %s\n", f32_hex, bf16_hex);
  CHECK_MSG(non_finite == 0, "%" PRIu64 " values are not finite", non_finite);
  CHECK_MSG(!strcmp(f32_hex, m->f32_digest), "float32 digest differs from gguf-py's %s",
            m->f32_digest);
  CHECK_MSG(!strcmp(bf16_hex, m->bf16_digest), "bf16 digest differs from gguf-py's %s",
            m->bf16_digest);
}

/* Both tokenizers encode `text` alike (ids and spans); false (reported)
 * when not. */
static bool same_encoding(const md_tokenizer *a, const md_tokenizer *b, const char *text,
                          size_t len, const char *where) {
  md_tokens ta = {0}, tb = {0};
  md_error ea = {0}, eb = {0};
  md_status sa = md_tokenizer_encode(a, text, len, &ta, &ea);
  md_status sb = md_tokenizer_encode(b, text, len, &tb, &eb);
  bool same = sa == sb && ta.count == tb.count;
  for (size_t i = 0; same && i < ta.count; i++)
    same = ta.ids[i] == tb.ids[i] && ta.spans[i].start == tb.spans[i].start &&
           ta.spans[i].end == tb.spans[i].end;
  CHECK_MSG(same, "%s: the GGUF tokenizer encodes %zu tokens (status %d), tokenizer.json %zu "
            "(status %d)", where, ta.count, (int)sa, tb.count, (int)sb);
  md_tokens_free(&ta);
  md_tokens_free(&tb);
  return same;
}

static void check_tokenizer(const md_gguf_file *f) {
  const char *root = getenv("MD_SOURCE_ROOT");
  char json_path[4096], corpus_path[4096];
  snprintf(json_path, sizeof json_path, "%s/data/models/qwen2-tiny/tokenizer.json", root ? root : ".");
  md_tokenizer *from_gguf = NULL, *from_json = NULL;
  md_error err = {0};
  double start = now();
  CHECK_MSG(md_tokenizer_load_gguf(f, &from_gguf, &err) == MD_OK, "%s", err.message);
  double loaded = now() - start;
  CHECK_MSG(md_tokenizer_load(json_path, &from_json, &err) == MD_OK, "%s", err.message);
  if (!from_gguf || !from_json) goto done;
  size_t strings = 0, differ = 0;
  static const char *const corpora[] = {"qwen_corpus.jsonl", "cases.jsonl", "small_corpus.jsonl"};
  for (size_t c = 0; c < sizeof corpora / sizeof corpora[0]; c++) {
    snprintf(corpus_path, sizeof corpus_path, "%s/tests/tokenizer/fixtures/%s", root ? root : ".",
             corpora[c]);
    FILE *in = fopen(corpus_path, "r");
    CHECK_MSG(in != NULL, "cannot open %s", corpus_path);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while (in && (len = getline(&line, &cap, in)) > 0) {
      json_t *row = json_loadb(line, (size_t)len, JSON_ALLOW_NUL, NULL);
      json_t *text = json_object_get(row, "text");
      if (json_is_string(text)) {
        strings++;
        differ += !same_encoding(from_gguf, from_json, json_string_value(text),
                                 json_string_length(text), corpora[c]);
      }
      json_decref(row);
    }
    free(line);
    if (in) fclose(in);
  }
  /* Every vocabulary entry's text (the decoded bytes of one id). */
  size_t pieces = 0;
  for (int32_t id = 0; id < 151643; id++) {
    char *text = NULL;
    size_t len = 0;
    if (md_tokenizer_decode(from_json, &id, 1, false, &text, &len, &err) != MD_OK) continue;
    pieces++;
    char where[64];
    snprintf(where, sizeof where, "vocabulary id %d", (int)id);
    differ += !same_encoding(from_gguf, from_json, text, len, where);
    free(text);
  }
  printf("tokenizer from the metadata in %.2f s: %zu corpus strings and %zu vocabulary entries "
         "encoded as tokenizer.json does, %zu differ\n", loaded, strings, pieces, differ);
done:
  md_tokenizer_free(from_gguf);
  md_tokenizer_free(from_json);
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: check_model 0.5b|1.5b [FILE]\n");
    return 2;
  }
  const model_facts *m = NULL;
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
    if (!strcmp(argv[1], models[i].name)) m = &models[i];
  if (!m) {
    fprintf(stderr, "check_model: unknown model %s (0.5b or 1.5b)\n", argv[1]);
    return 2;
  }
  char path[4096];
  if (argc == 3)
    snprintf(path, sizeof path, "%s", argv[2]);
  else
    default_path(m, path, sizeof path);
  struct stat info;
  if (stat(path, &info) != 0) {
    printf("%s is not there: fetch it first (data/models/fetch_qwen25.py %s)\n", path,
           m->name);
    return 1;
  }
  double start = now();
  md_gguf_file *f = NULL;
  md_error err = {0};
  md_status status = md_gguf_open(path, &f, &err);
  CHECK_MSG(status == MD_OK, "%s", err.message);
  if (!f) return md_test_finish("check_model");
  printf("opened and validated in %.3f s\n", now() - start);
  CHECK(md_gguf_file_size(f) == m->size && md_gguf_version(f) == 3);
  check_layout(f, m);
  check_types(f, m);
  check_dequantize(f, m);
  check_tokenizer(f);
  md_gguf_close(f);
  return md_test_finish("check_model");
}
