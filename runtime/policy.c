#include "runtime/policy.h"

#include <string.h>

static const char *const kind_names[] = {"full", "random", "streaming", "h2o", "memdecay",
                                         "memdecay-raw"};

const char *md_policy_kind_name(md_policy_kind kind) {
  if ((int)kind < 0 || (size_t)kind >= sizeof kind_names / sizeof kind_names[0]) return "?";
  return kind_names[kind];
}

bool md_policy_kind_parse(const char *name, md_policy_kind *kind) {
  for (size_t i = 0; i < sizeof kind_names / sizeof kind_names[0]; i++)
    if (name && strcmp(name, kind_names[i]) == 0) {
      *kind = (md_policy_kind)i;
      return true;
    }
  return false;
}
