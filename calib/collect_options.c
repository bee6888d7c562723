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

int md_collect_option(const char *command, const char *name, const char *value,
                      md_collect_options *c) {
  long n = 0;
  int code = -1;
  if (!strcmp(name, "--device")) c->device = value;
  else if (!strcmp(name, "--threads")) {
    if ((code = parse_count(command, name, value, 1, 4096, &n)) < 0) c->threads = (int)n;
  } else if (!strcmp(name, "--page-size")) {
    if ((code = parse_count(command, name, value, 1, 1 << 20, &n)) < 0) c->page_size = (int)n;
  } else if (!strcmp(name, "--max-steps")) {
    if ((code = parse_count(command, name, value, 1, 1L << 30, &n)) < 0) c->max_steps = (size_t)n;
  } else if (!strcmp(name, "--max-episodes")) {
    if ((code = parse_count(command, name, value, 1, 1L << 40, &n)) < 0)
      c->max_episodes = (size_t)n;
  } else if (!strcmp(name, "--shard")) {
    md_error err = {0};
    if (md_shard_parse(value, &c->shard, &err) != MD_OK)
      code = md_cli_usage_error(command, "--shard: %s", err.message);
  } else if (!strcmp(name, "--heads")) {
    if (!strcmp(value, "mean")) c->heads = MD_CAPTURE_HEADS_MEAN;
    else if (!strcmp(value, "max")) c->heads = MD_CAPTURE_HEADS_MAX;
    else code = md_cli_usage_error(command, "--heads must be mean or max, not '%s'", value);
  } else if (!strcmp(name, "--layers")) {
    if (!parse_layers(value, &c->layer_begin, &c->layer_end))
      code = md_cli_usage_error(command, "--layers must be A:B (layers A to B-1, counted from 0), "
                                "A: or :B, not '%s'", value);
  } else {
    code = -2;
  }
  return code;
}

bool md_collect_flag(const char *name, md_collect_options *c) {
  if (!strcmp(name, "--exact-gemm")) c->exact_gemm = true;
  else if (!strcmp(name, "--cuda-graphs")) c->cuda_graphs = true;
  else return false;
  return true;
}
