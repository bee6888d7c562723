/* The table of policies (runtime/policy_table.h): every policy the program
 * knows, each a class (runtime/policy_class.h) md_policy_class_NAME in its
 * own file NAME.c of this folder. The order below is eval's default order
 * (results, tables, figure), full first: the ceiling; the opt-in classes
 * (the further baselines and memdecay's ablations) are left out of the
 * default set and run in this order when --policies names them.
 * A new policy: its file here, its entry below, its file in
 * runtime/meson.build, and its description in the man pages
 * (tests/man/policies_sync.py fails until they name it). */
#include <string.h>

#include "runtime/policy_table.h"

#define MD_POLICIES(X) \
  X(full)              \
  X(random)            \
  X(streaming)         \
  X(h2o)               \
  X(snapkv)            \
  X(tova)              \
  X(memdecay)          \
  X(memdecay_raw)      \
  X(memdecay_shared)   \
  X(memdecay_nodecay)  \
  X(memdecay_noattn)   \
  X(streaming_pinned)

#define DECLARE(name) extern const md_policy_class md_policy_class_##name;
MD_POLICIES(DECLARE)
#undef DECLARE

#define ENTRY(name) &md_policy_class_##name,
const md_policy_class *const md_policy_table[] = {MD_POLICIES(ENTRY)};
#undef ENTRY
const size_t md_policy_table_count = sizeof md_policy_table / sizeof md_policy_table[0];

const md_policy_class *md_policy_find(const char *name) {
  for (size_t i = 0; name && i < md_policy_table_count; i++) {
    if (strcmp(md_policy_table[i]->name, name) == 0) return md_policy_table[i];
  }
  return NULL;
}
