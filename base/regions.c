#include "base/regions.h"

#include <string.h>

bool md_region_name_valid(const char *name, size_t len) {
  if (len == 0 || name[0] < 'a' || name[0] > 'z') return false;
  for (size_t i = 1; i < len; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

/* The default priors. The reasoning (memdecay-config(5)): system is pinned
 * and scores 1 anyway; the plan is consulted throughout a task; user turns
 * hold the facts asked about later; retrieved documents are partly used but
 * used long (the longest-lived movable region); tool outputs are read, then
 * superseded; tool-call arguments echo earlier text and are rarely re-read;
 * scratchpad reasoning is mostly consumed within a few steps. */
static const struct {
  const char *name;
  double base_priority;
} known_regions[MD_REGION_KNOWN_COUNT] = {
    {MD_REGION_SYSTEM, 1.0},   {MD_REGION_PLAN, 0.9},      {MD_REGION_USER, 0.8},
    {MD_REGION_TOOL_IN, 0.4},  {MD_REGION_TOOL_OUT, 0.6},  {MD_REGION_RETRIEVAL, 0.7},
    {MD_REGION_SCRATCHPAD, 0.3},
};
enum { n_known = MD_REGION_KNOWN_COUNT };

const char *md_region_known_name(int rank) {
  return rank >= 0 && rank < n_known ? known_regions[rank].name : NULL;
}

int md_region_known_rank(const char *name) {
  for (int i = 0; i < n_known; i++) {
    if (!strcmp(name, known_regions[i].name)) return i;
  }
  return -1;
}

int md_region_name_compare(const void *a, const void *b) {
  const char *name_a = *(const char *const *)a;
  const char *name_b = *(const char *const *)b;
  int rank_a = md_region_known_rank(name_a);
  int rank_b = md_region_known_rank(name_b);
  if (rank_a >= 0 && rank_b >= 0) return rank_a - rank_b;
  if (rank_a >= 0) return -1;
  if (rank_b >= 0) return 1;
  return strcmp(name_a, name_b);
}

double md_region_default_base_priority(const char *name) {
  int rank = md_region_known_rank(name);
  return rank >= 0 ? known_regions[rank].base_priority : 0.5;
}

bool md_region_pinned_by_default(const char *name) { return !strcmp(name, MD_REGION_SYSTEM); }
