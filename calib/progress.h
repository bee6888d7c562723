/* Progress on standard error for long runs (collect, run): on a terminal a
 * one-line bar redrawn in place with \r (episodes, the current episode's
 * steps, decode tokens/s, ETA); otherwise a plain line every few seconds,
 * so logs stay readable; nothing with quiet. Warnings printed through it
 * do not tear the bar. Standard output is never touched.
 *
 * It plugs straight into the collector's callbacks:
 *
 *   md_progress *bar = md_progress_new(&(md_progress_options){.label = "collect",
 *                                                             .quiet = quiet});
 *   options.progress = md_progress_collect;
 *   options.on_warning = md_progress_warning;
 *   options.context = bar;
 *   status = md_collect(&options, &summary, &err);
 *   md_progress_end(bar);            (ends the bar's line before an error message)
 *   md_progress_free(bar);
 *
 * A caller with callbacks of its own (a pipeline that adds stages) calls
 * md_progress_collect / md_progress_warning from them with the bar as the
 * context, and md_progress_note for lines of its own. */
#ifndef MD_CALIB_PROGRESS_H
#define MD_CALIB_PROGRESS_H

#include <stdbool.h>
#include <stdio.h>

#include "collector/capture/collect.h"

typedef struct md_progress md_progress;

typedef struct md_progress_options {
  const char *label;      /* first word of every line, e.g. "collect" (NULL: none) */
  bool quiet;             /* print nothing (errors are the caller's to print) */
  int terminal;           /* -1 or 0 (zeroed options): detect whether `out` is a terminal;
                             1: draw the bar; 2: plain lines */
  double interval;        /* seconds between plain lines; 0 = 10 */
  FILE *out;              /* NULL = stderr */
} md_progress_options;

/* A printer; options may be NULL (defaults). Returns NULL only when out of
 * memory, and every function below accepts NULL (and then prints nothing). */
md_progress *md_progress_new(const md_progress_options *options);
void md_progress_free(md_progress *progress);

/* An md_collect_progress_fn: context is the md_progress. */
void md_progress_collect(void *context, const md_collect_progress *progress);

/* An md_collect_warning_fn: prints "label: warning: message" on its own line. */
void md_progress_warning(void *context, const char *message);

/* Prints "label: message" on its own line (unless quiet). */
void md_progress_note(md_progress *progress, const char *message);

/* Ends the bar's line, if one is drawn, so the next output starts on a
 * fresh line (call before printing an error). */
void md_progress_end(md_progress *progress);

/* Formats seconds as "45s", "3m07s", "2h05m" into buf (at least 16 bytes). */
const char *md_progress_duration(double seconds, char *buf, size_t size);

#endif
