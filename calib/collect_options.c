#include "calib/collect_options.h"

#include <stdbool.h>
#include <string.h>

#include "calib/cli.h"

/* "A:B", "A:", ":B" or ":" into [begin, end) (end -1: to the last layer). */
static bool parse_layers(const char *text, int *begin, int *end) {
  const char *colon = strchr(text, ':');
  if (!colon) return false;
  char first[32];
  size_t n = (size_t)(colon - text);
  if (n >= sizeof first) return false;
  memcpy(first, text, n);
  first[n] = '\0';
  long a = 0, b = -1;
  if (n && !md_cli_parse_long(first, 0, 1 << 20, &a)) return false;
  if (colon[1] && !md_cli_parse_long(colon + 1, 0, 1 << 20, &b)) return false;
  *begin = (int)a;
  *end = (int)b;
  return true;
}

static int parse_count(const char *command, const char *option, const char *text, long min,
                       long max, long *out) {
  if (md_cli_parse_long(text, min, max, out)) return -1;
  return md_cli_usage_error(command, "%s must be a whole number from %ld to %ld, not '%s'", option,
                            min, max, text);
}

const md_opt md_collect_option_table[] = {
    {"device", 0, MD_COLLECT_OPT_DEVICE, "NAME"},
    {"threads", 0, MD_COLLECT_OPT_THREADS, "N"},
    {"exact-gemm", 0, MD_COLLECT_OPT_EXACT_GEMM, NULL},
    {"bf16-gemm", 0, MD_COLLECT_OPT_BF16_GEMM, NULL},
    {"gguf-f32", 0, MD_COLLECT_OPT_GGUF_F32, NULL},
    {"cuda-graphs", 0, MD_COLLECT_OPT_CUDA_GRAPHS, NULL},
    {"no-cuda-graphs", 0, MD_COLLECT_OPT_NO_CUDA_GRAPHS, NULL},
    {"layers", 0, MD_COLLECT_OPT_LAYERS, "A:B"},
    {"heads", 0, MD_COLLECT_OPT_HEADS, "mean|max"},
    {"page-size", 0, MD_COLLECT_OPT_PAGE_SIZE, "N"},
    {"max-steps", 0, MD_COLLECT_OPT_MAX_STEPS, "N"},
    {"max-episodes", 0, MD_COLLECT_OPT_MAX_EPISODES, "N"},
    {"shard", 0, MD_COLLECT_OPT_SHARD, "K/N"},
    {"batch", 0, MD_COLLECT_OPT_BATCH, "N"},
    {NULL, 0, 0, NULL},
};

int md_collect_option(const char *command, const md_opt *opt, const char *value,
                      md_collect_options *c) {
  long n = 0;
  int code = -1;
  switch (opt->id) {
    case MD_COLLECT_OPT_DEVICE: c->device = value; break;
    case MD_COLLECT_OPT_THREADS:
      if ((code = parse_count(command, "--threads", value, 1, 4096, &n)) < 0) c->threads = (int)n;
      break;
    case MD_COLLECT_OPT_PAGE_SIZE:
      if ((code = parse_count(command, "--page-size", value, 1, 1 << 20, &n)) < 0)
        c->page_size = (int)n;
      break;
    case MD_COLLECT_OPT_MAX_STEPS:
      if ((code = parse_count(command, "--max-steps", value, 1, 1L << 30, &n)) < 0)
        c->max_steps = (size_t)n;
      break;
    case MD_COLLECT_OPT_MAX_EPISODES:
      if ((code = parse_count(command, "--max-episodes", value, 1, 1L << 40, &n)) < 0)
        c->max_episodes = (size_t)n;
      break;
    case MD_COLLECT_OPT_BATCH:
      if ((code = parse_count(command, "--batch", value, 1, MD_COLLECT_MAX_BATCH, &n)) < 0)
        c->batch = (size_t)n;
      break;
    case MD_COLLECT_OPT_SHARD: {
      md_error err = {0};
      if (md_shard_parse(value, &c->shard, &err) != MD_OK)
        code = md_cli_usage_error(command, "--shard: %s", err.message);
      break;
    }
    case MD_COLLECT_OPT_HEADS:
      if (!strcmp(value, "mean")) c->heads = MD_CAPTURE_HEADS_MEAN;
      else if (!strcmp(value, "max")) c->heads = MD_CAPTURE_HEADS_MAX;
      else code = md_cli_usage_error(command, "--heads must be mean or max, not '%s'", value);
      break;
    case MD_COLLECT_OPT_LAYERS:
      if (!parse_layers(value, &c->layer_begin, &c->layer_end))
        code = md_cli_usage_error(command, "--layers must be A:B (layers A to B-1, counted from "
                                  "0), A: or :B, not '%s'", value);
      break;
    case MD_COLLECT_OPT_EXACT_GEMM: c->exact_gemm = true; break;
    case MD_COLLECT_OPT_BF16_GEMM: c->bf16_gemm = true; break;
    case MD_COLLECT_OPT_GGUF_F32: c->gguf_f32 = true; break;
    case MD_COLLECT_OPT_CUDA_GRAPHS: c->no_cuda_graphs = false; break; /* the default */
    case MD_COLLECT_OPT_NO_CUDA_GRAPHS: c->no_cuda_graphs = true; break;
  }
  return code;
}
