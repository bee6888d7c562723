/* Region names: the naming rule shared by the events CSV, the priors file
 * and the command line, the seven regions MemDecay knows in prompt order,
 * and their default base priorities. */
#ifndef MD_BASE_REGIONS_H
#define MD_BASE_REGIONS_H

#include <stdbool.h>
#include <stddef.h>

/* The seven regions MemDecay knows, in prompt order (memdecay-trace(5)). Any
 * name matching [a-z][a-z0-9_]* is a region; these have default priors, a
 * fixed colour in the figures and a place in the output order. */
#define MD_REGION_SYSTEM "system"
#define MD_REGION_PLAN "plan"
#define MD_REGION_USER "user"
#define MD_REGION_TOOL_IN "tool_in"
#define MD_REGION_TOOL_OUT "tool_out"
#define MD_REGION_RETRIEVAL "retrieval"
#define MD_REGION_SCRATCHPAD "scratchpad"
enum { MD_REGION_KNOWN_COUNT = 7 };

/* True when name[0..len) matches [a-z][a-z0-9_]*. */
bool md_region_name_valid(const char *name, size_t len);

/* Position of a known region in prompt order (system 0, plan 1, user 2,
 * tool_in 3, tool_out 4, retrieval 5, scratchpad 6); -1 for other names. */
int md_region_known_rank(const char *name);

/* The known region of rank 0 .. MD_REGION_KNOWN_COUNT-1; NULL otherwise. */
const char *md_region_known_name(int rank);

/* Orders regions for output: known regions in prompt order, then the others
 * by name (strcmp). A qsort comparator over `const char *` elements. */
int md_region_name_compare(const void *a, const void *b);

/* The base priority b_r used when neither a priors file nor a measurement
 * supplies one: a prior guess of P(a token of the region is used at all).
 * See memdecay-config(5) for the values and the reasoning; 0.5 for a region
 * that is not one of the seven. */
double md_region_default_base_priority(const char *name);

/* True for the regions pinned unless the user says otherwise (system). */
bool md_region_pinned_by_default(const char *name);

#endif
