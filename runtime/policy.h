/* MemDecay reference runtime: model-agnostic KV-cache eviction policies
 * (work in progress: the full contract follows). */
#ifndef MD_RUNTIME_POLICY_H
#define MD_RUNTIME_POLICY_H

#include <stdbool.h>

typedef enum md_policy_kind {
  MD_POLICY_FULL,
  MD_POLICY_RANDOM,
  MD_POLICY_STREAMING,
  MD_POLICY_H2O,
  MD_POLICY_MEMDECAY,
  MD_POLICY_MEMDECAY_RAW,
} md_policy_kind;

const char *md_policy_kind_name(md_policy_kind kind);
bool md_policy_kind_parse(const char *name, md_policy_kind *kind);

#endif
