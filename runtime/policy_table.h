/* The table of policies (runtime/policies/table.c): every eviction policy the
 * program knows, in the order eval runs them by default and lists them in
 * --help, the results and the figure. Each is a class of
 * runtime/policy_class.h in its own file under runtime/policies/.
 *
 * Every list of policy names derives from this table: eval's --policies
 * (parsing, the error naming the known ones, --help's list with each
 * description), md_eval's default set and order, and the figure's colours;
 * the man pages are checked against it (tests/man/policies_sync.py). */
#ifndef MD_RUNTIME_POLICY_TABLE_H
#define MD_RUNTIME_POLICY_TABLE_H

#include <stddef.h>

#include "runtime/policy_class.h"

/* The table, md_policy_table_count entries, in order. */
extern const md_policy_class *const md_policy_table[];
extern const size_t md_policy_table_count;

/* The class named `name` (exact, case-sensitive), NULL when the table has
 * none. */
const md_policy_class *md_policy_find(const char *name);

/* The full cache: never evicts. eval runs it always, first, as the ceiling. */
extern const md_policy_class md_policy_class_full;

#endif
