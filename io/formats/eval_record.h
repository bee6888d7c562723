/* The record of an eval in progress, for `eval --resume`: JSON Lines beside
 * the results file. Line 1 names the format and the evaluation's identity
 * (every input's digest and every setting that changes a result, as one
 * string the caller builds); then one line per finished episode, appended
 * and flushed to disk as it finishes:
 *
 *   {"episode": E, "id": ID, "runs": [[budget_pages, max_cached,
 *     max_cached_after_eviction, evicted, final_cached,
 *     [[correct, answer_in_region, answer_tokens, answer_kept, OUTPUT_HEX],
 *      ... one per probe]], ... one per run]}
 *
 * OUTPUT_HEX is the decoded answer's bytes in hex (it may end inside a
 * UTF-8 character, which JSON cannot hold). A line cut short by a kill
 * (no newline) is dropped on reading and the file truncated before it. A
 * resumed evaluation restores those episodes exactly, so its results are
 * the bytes an uninterrupted one writes. The record is locked (flock) while
 * an eval appends to it: a second one on the same results file is refused. */
#ifndef MD_IO_FORMATS_EVAL_RECORD_H
#define MD_IO_FORMATS_EVAL_RECORD_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "io/formats/eval_results.h"

#define MD_EVAL_RECORD_FORMAT "memdecay-eval-record/1"

typedef struct md_eval_record md_eval_record;

/* Opens the record at `path` for `results` (its episodes and runs laid out,
 * as md_eval prepares them). Without `resume` the file must not exist
 * (MD_E_INVALID, naming it and --resume, when it does); it is created with
 * its first line. With `resume`, an existing record must carry `identity`
 * (MD_E_INVALID naming what differs otherwise); its finished episodes are
 * restored into `results` (runs and probe outcomes) and done[e] set for
 * each; a missing record starts a new one. */
md_status md_eval_record_open(const char *path, const char *identity, bool resume,
                              md_eval_results *results, bool *done, md_eval_record **record,
                              md_error *err);

/* Appends episode `episode` of `results` and flushes it to disk. */
md_status md_eval_record_append(md_eval_record *record, const md_eval_results *results,
                                size_t episode, md_error *err);

/* Closes the record (releasing its lock); the file stays for a resume. */
void md_eval_record_close(md_eval_record *record);

/* Removes the record's file, then closes it (nothing in it to resume). */
void md_eval_record_discard(md_eval_record *record);

#endif
