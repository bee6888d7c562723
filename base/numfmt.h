/* Number formatting for the files we write: the shortest decimal that reads
 * back (strtod) to the very same double, so output is exact, deterministic
 * and as short as the value allows (0.9, not 0.90000000000000002). */
#ifndef MD_BASE_NUMFMT_H
#define MD_BASE_NUMFMT_H

#include <stdbool.h>

enum { MD_NUMBER_TEXT_MAX = 32 };

/* Formats `value` with the fewest significant digits (1 to 17, %g style)
 * that round-trip; "" when not finite. Returns `out`. */
const char *md_format_shortest(char out[MD_NUMBER_TEXT_MAX], double value);

/* Rewrites, in place, every number of a JSON text (outside strings) in its
 * shortest round-trip form; reals keep a '.' or an exponent so that they
 * stay reals. The text can only get shorter. */
void md_json_shorten_numbers(char *json);

/* The text of a JSON document as the project's writers emit it: jansson's
 * dump with a 2-space indent and 17 significant digits (enough for every
 * double to read back bit for bit), every number then shortened as above,
 * and a final '\n'. malloc'd; NULL when out of memory. */
struct json_t;
char *md_json_dumps_shortest(const struct json_t *root);

/* A JSON value as one line (JSON Lines records, a trace's tool arguments):
 * members separated by ", " and ": " (or "," and ":" when `compact`), 17
 * significant digits, every number then shortened as above; no final '\n'.
 * Any value, not only an object or array. malloc'd; NULL when out of
 * memory. */
char *md_json_dumps_line(const struct json_t *value, bool compact);

#endif
