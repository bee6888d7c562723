/* The engine's next-token choice at every position of an episode, for a
 * side-by-side comparison with another implementation on the same model
 * (bench/gguf_agreement.py: HF transformers' GGUF loader). Not a test.
 *
 *   next_token MODEL TRACES.jsonl [--episodes N] [--threads N]
 *
 * MODEL is what --model takes (a Hugging Face directory or a GGUF file).
 * Each of the first N episodes (default 4) is rendered and tokenised as the
 * collector does (its prompt, then its teacher-forced continuation), run
 * through the model in one teacher-forced pass, and printed as one JSON
 * line: {"id", "tokens": [...], "top1": [...], "seconds"} where top1[i] is
 * the argmax of the logits after tokens[0..i]. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collector/model/model_dir.h"
#include "collector/model/qwen2_forward.h"
#include "collector/tokenizer/episode_tokens.h"
#include "io/formats/trace.h"
#include "kernels/device.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int fail(const md_error *err) {
  fprintf(stderr, "next_token: %s\n", err->message);
  return 1;
}

/* Prefill `n` tokens in chunks of CHUNK (the logits of a chunk, CHUNK x the
 * vocabulary, are 155 MB for Qwen2.5's at 256), the argmax after each into
 * top1. */
static int top1_of(md_qwen2_forward *fw, const int32_t *tokens, int64_t n, int vocab, int32_t *top1) {
  enum { CHUNK = 256 };
  float *logits = malloc((size_t)CHUNK * (size_t)vocab * sizeof *logits);
  md_error err = {0};
  if (!logits) return 1;
  for (int64_t at = 0; at < n; at += CHUNK) {
    int64_t m = n - at < CHUNK ? n - at : CHUNK;
    if (md_qwen2_prefill(fw, tokens + at, m, logits, &err) != MD_OK) {
      free(logits);
      return fail(&err);
    }
    for (int64_t i = 0; i < m; i++) {
      const float *row = logits + (size_t)i * (size_t)vocab;
      int best = 0;
      for (int v = 1; v < vocab; v++)
        if (row[v] > row[best]) best = v;
      top1[at + i] = best;
    }
  }
  free(logits);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: next_token MODEL TRACES.jsonl [--episodes N] [--threads N]\n");
    return 2;
  }
  long episodes = 4, threads = 0;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--episodes")) episodes = strtol(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--threads")) threads = strtol(argv[i + 1], NULL, 10);
  }
  md_error err = {0};
  md_model_dir model;
  if (md_model_dir_open(argv[1], "next_token", NULL, NULL, &model, &err) != MD_OK) return fail(&err);
  const md_qwen2_config *c = md_qwen2_model_config(model.model);
  md_kernels *k = NULL;
  md_device_options device = {.device = "cpu", .threads = (int)threads};
  if (md_device_open(&device, &k, &err) != MD_OK) return fail(&err);
  md_trace_reader *reader = NULL;
  if (md_trace_open(argv[2], NULL, &reader, &err) != MD_OK) return fail(&err);
  int status = 0;
  for (long e = 0; e < episodes && status == 0; e++) {
    md_trace_episode ep;
    bool have = false;
    if (md_trace_next(reader, &ep, &have, &err) != MD_OK) return fail(&err);
    if (!have) break;
    md_episode_tokens t;
    md_episode_tokens_options topt = {.chat = c->family->chat, .vocab_size = (size_t)c->vocab_size};
    if (md_episode_tokenize(model.tokenizer, &ep, &topt, &t, &err) != MD_OK) return fail(&err);
    int64_t n = (int64_t)(t.prompt_tokens + t.forced_tokens);
    md_qwen2_forward *fw = NULL;
    md_qwen2_forward_options options = {.capacity = n + 1};
    if (md_qwen2_forward_new(c, md_qwen2_model_weights(model.model), k, &options, &fw, &err) != MD_OK)
      return fail(&err);
    int32_t *top1 = malloc((size_t)n * sizeof *top1);
    double start = now();
    status = top1 ? top1_of(fw, t.ids, n, c->vocab_size, top1) : 1;
    double seconds = now() - start;
    if (status == 0) {
      json_t *line = json_pack("{s:s, s:[], s:[], s:f}", "id", ep.id, "tokens", "top1", "seconds", seconds);
      for (int64_t i = 0; i < n; i++) {
        json_array_append_new(json_object_get(line, "tokens"), json_integer(t.ids[i]));
        json_array_append_new(json_object_get(line, "top1"), json_integer(top1[i]));
      }
      char *text = json_dumps(line, JSON_COMPACT);
      printf("%s\n", text);
      fflush(stdout);
      free(text);
      json_decref(line);
    }
    free(top1);
    md_qwen2_forward_free(fw);
    md_episode_tokens_free(&t);
    md_trace_episode_free(&ep);
  }
  md_trace_close(reader);
  md_kernels_free(k);
  md_model_dir_close(&model);
  return status;
}
