/* Tokenizer benchmark: load time of a tokenizer.json against the 1 s target, and encode
 * throughput on the strings of a JSON Lines file (the "text" field of each line).
 *
 *   tokenizer_bench TOKENIZER_JSON CORPUS_JSONL [SECONDS]
 *
 * Prints the best of several loads (wall and CPU time), then MB/s for encoding the strings one call each (the
 * collector's per-segment use) and for the whole corpus as one text. Not a test: timings
 * depend on the machine and its load. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collector/tokenizer/tokenizer.h"

static double clock_s(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now(void) { return clock_s(CLOCK_MONOTONIC); }

/* CPU time of this process: on a shared machine the wall time also counts other work. */
static double cpu_now(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

typedef struct corpus {
  char **texts;
  size_t *lens;
  size_t count, bytes;
} corpus;

static int read_corpus(const char *path, corpus *c) {
  FILE *f = fopen(path, "r");
  if (!f) {
    perror(path);
    return -1;
  }
  char *line = NULL;
  size_t cap = 0, alloc = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) > 0) {
    json_t *row = json_loadb(line, (size_t)len, JSON_ALLOW_NUL, NULL);
    json_t *text = json_object_get(row, "text");
    if (json_is_string(text)) {
      if (c->count == alloc) {
        alloc = alloc ? 2 * alloc : 1024;
        c->texts = realloc(c->texts, alloc * sizeof *c->texts);
        c->lens = realloc(c->lens, alloc * sizeof *c->lens);
        if (!c->texts || !c->lens) return -1;
      }
      size_t n = json_string_length(text);
      c->texts[c->count] = malloc(n + 1);
      memcpy(c->texts[c->count], json_string_value(text), n + 1);
      c->lens[c->count++] = n;
      c->bytes += n;
    }
    json_decref(row);
  }
  free(line);
  fclose(f);
  return 0;
}

/* The best wall and CPU times of `runs` loads; keeps the last tokenizer. */
static void best_load(const char *path, int runs, md_tokenizer **keep, double *wall, double *cpu) {
  *wall = *cpu = 1e30;
  for (int i = 0; i < runs; i++) {
    md_tokenizer *tok = NULL;
    md_error err = {0};
    double t0 = now(), c0 = cpu_now();
    if (md_tokenizer_load(path, &tok, &err) != MD_OK) {
      fprintf(stderr, "tokenizer_bench: %s\n", err.message);
      exit(1);
    }
    double t = now() - t0, c = cpu_now() - c0;
    if (t < *wall) *wall = t;
    if (c < *cpu) *cpu = c;
    if (i + 1 < runs) md_tokenizer_free(tok);
    else *keep = tok;
  }
}

/* Encodes every string once per round until `seconds` have passed; returns MB/s. */
static double per_segment(const md_tokenizer *tok, const corpus *c, double seconds,
                          size_t *tokens) {
  md_tokens out = {0};
  md_error err = {0};
  size_t rounds = 0;
  double t0 = now(), t;
  do {
    for (size_t i = 0; i < c->count; i++) {
      md_tokens_clear(&out);
      if (md_tokenizer_encode(tok, c->texts[i], c->lens[i], &out, &err) != MD_OK) {
        fprintf(stderr, "tokenizer_bench: %s\n", err.message);
        exit(1);
      }
      if (rounds == 0) *tokens += out.count;
    }
    rounds++;
    t = now() - t0;
  } while (t < seconds);
  md_tokens_free(&out);
  return (double)c->bytes * (double)rounds / t / 1e6;
}

static double whole_text(const md_tokenizer *tok, const corpus *c, double seconds) {
  char *all = malloc(c->bytes + c->count + 1);
  size_t len = 0;
  for (size_t i = 0; i < c->count; i++) {
    memcpy(all + len, c->texts[i], c->lens[i]);
    len += c->lens[i];
    all[len++] = '\n';
  }
  md_tokens out = {0};
  md_error err = {0};
  size_t rounds = 0;
  double t0 = now(), t;
  do {
    md_tokens_clear(&out);
    if (md_tokenizer_encode(tok, all, len, &out, &err) != MD_OK) {
      fprintf(stderr, "tokenizer_bench: %s\n", err.message);
      exit(1);
    }
    rounds++;
    t = now() - t0;
  } while (t < seconds);
  md_tokens_free(&out);
  free(all);
  return (double)len * (double)rounds / t / 1e6;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s TOKENIZER_JSON CORPUS_JSONL [SECONDS]\n", argv[0]);
    return 2;
  }
  double seconds = argc > 3 ? atof(argv[3]) : 2.0;
  corpus c = {0};
  if (read_corpus(argv[2], &c) != 0) return 1;
  md_tokenizer *tok = NULL;
  double wall, cpu;
  best_load(argv[1], 5, &tok, &wall, &cpu);
  printf("load: %.3f s wall, %.3f s CPU (best of 5) = %.2f of the 1 s target (%s)\n", wall, cpu, wall,
         wall < 1.0 ? "met" : "MISSED");
  size_t tokens = 0;
  double seg = per_segment(tok, &c, seconds, &tokens);
  printf(
      "encode, one call per string: %.2f MB/s (%zu strings, %zu bytes, %zu tokens, %.2f "
      "bytes/token)\n",
      seg, c.count, c.bytes, tokens, (double)c.bytes / (double)tokens);
  printf("encode, the corpus as one text: %.2f MB/s\n", whole_text(tok, &c, seconds));
  md_tokenizer_free(tok);
  for (size_t i = 0; i < c.count; i++) free(c.texts[i]);
  free(c.texts);
  free(c.lens);
  return 0;
}
