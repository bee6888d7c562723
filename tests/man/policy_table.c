/* Prints the names of the policy table (runtime/policy_table.h), one a line,
 * in order: what tests/man/policies_sync.py checks the man pages and the
 * code against. */
#include <stdio.h>

#include "runtime/policy_table.h"

int main(void) {
  for (size_t i = 0; i < md_policy_table_count; i++) printf("%s\n", md_policy_table[i]->name);
  return 0;
}
