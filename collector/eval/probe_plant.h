/* Probes for any trace (`memdecay-calibrate probes`, memdecay-calibrate(1),
 * PROBES): one fact planted per region into every episode, with the question
 * that asks for it, so that eval (collector/eval/eval.h) runs on a user's own
 * workload and not only on the shipped synthetic traces.
 *
 * For each region planted in an episode a value is drawn from a seeded
 * generator: a code of three letters or digits, a hyphen and four digits
 * ("QX7-4821"), or a six-digit number, as the region's phrasing says. The
 * value must occur nowhere in the episode as it stands (its rendered prompt,
 * the continuation, the questions to be asked), neither as text in any case
 * nor as eval's normalised words (md_eval_normalise), and differ from the
 * other regions' values; a value that does is drawn again. The fact goes in
 * one of the region's prompt texts:
 *
 *  - text (message segments, raw spans): one of the region's segments with
 *    text, then one of its sentence boundaries, both drawn: after ". ", "! ",
 *    "? ", a line break, the ideographic "。", "！", "？", or the end of the
 *    segment. Every boundary follows a whole character, so no UTF-8
 *    sequence is split. The region's sentence goes there ("The deployment
 *    label of this assistant is QX7-4821."), on a line of its own after a
 *    line break, followed by a space after a sentence, after a space at the
 *    end of a segment that ends in neither. In the raw form a boundary that
 *    directly follows a special token ("...|>", line breaks after it) is
 *    not used: the sentence would fall between two turns.
 *  - tool calls, when the region has no text but tool calls (tool_in, in
 *    every trace where tool calls are tool calls): one call, drawn, gets
 *    the region's argument key with the value as a string
 *    ("audit_ref": "QX7-4821"), added last; a key the arguments already have
 *    gets "_2", "_3", ... appended. This changes the call's arguments.
 *
 * The continuation is never planted in (eval asks about the prompt); a
 * region with no text and no tool call in the prompt gets no probe. The
 * probe is {"region", "question", "answer"} with the region's question
 * (md_probe_phrasing_for). Everything else of the episode stays as it was:
 * every other field, segment and text, the planted texts but for the
 * inserted bytes. The planted episode is serialised (md_trace_episode_dumps),
 * read back with the trace reader's rules and rendered, and each answer must
 * occur exactly once in it, in a span of its region: a failure there is a
 * bug, reported as one.
 *
 * Regions are planted in output order (md_region_name_compare), each drawing
 * from the generator in turn; the generator of an episode is seeded by the
 * seed and the episode's id, so an episode's plants do not depend on the
 * other episodes of the file or their order. */
#ifndef MD_COLLECTOR_EVAL_PROBE_PLANT_H
#define MD_COLLECTOR_EVAL_PROBE_PLANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "io/formats/trace.h"

/* How a region's fact is worded. Regions outside the seven known ones share
 * one phrasing with the region's name in it ("%s" in sentence and question,
 * filled by md_probe_phrasing_text). */
typedef enum md_probe_value_kind {
  MD_PROBE_VALUE_CODE,   /* "QX7-4821": [A-HJ-NP-Z2-9]{3} "-" [0-9]{4} */
  MD_PROBE_VALUE_NUMBER, /* "482193": six digits, the first not 0 */
} md_probe_value_kind;

typedef struct md_probe_phrasing {
  const char *region;          /* NULL: any region not in the table */
  const char *sentence_before; /* the sentence is sentence_before + value + sentence_after */
  const char *sentence_after;
  const char *question;
  const char *argument_key;    /* the key of a plant in tool-call arguments */
  md_probe_value_kind value;
} md_probe_phrasing;

/* The phrasing of `region`: its entry in the table, or the shared one. */
const md_probe_phrasing *md_probe_phrasing_for(const char *region);

/* `format` (a phrasing's text) with the region's name for its "%s", if it
 * has one. malloc'd; NULL when out of memory. */
char *md_probe_phrasing_text(const char *format, const char *region);

typedef struct md_probe_plant_settings {
  uint64_t seed;
  const char *const *regions; /* the regions to plant; NULL: every region with text or
                                 tool calls in the episode's prompt */
  size_t n_regions;
  bool replace;               /* an episode's existing probes are dropped; false: an
                                 episode with probes is refused */
} md_probe_plant_settings;

typedef enum md_probe_site_kind {
  MD_PROBE_SITE_NONE,      /* not planted: the region has no text or tool call */
  MD_PROBE_SITE_SEGMENT,   /* a message's content segment */
  MD_PROBE_SITE_SPAN,      /* a span of the raw form */
  MD_PROBE_SITE_ARGUMENTS, /* a tool call's arguments */
} md_probe_site_kind;

/* Where one region's fact went, in the parsed episode (md_trace_episode). */
typedef struct md_probe_site {
  const char *region;      /* borrowed from the settings or the input episode */
  md_probe_site_kind kind;
  size_t message;          /* SEGMENT, ARGUMENTS: the message's index */
  size_t item;             /* the segment's, span's or tool call's index */
  size_t offset;           /* SEGMENT, SPAN: the byte where the inserted text starts */
  size_t inserted_length;  /* SEGMENT, SPAN: the bytes inserted there */
  char answer[16];         /* the value drawn ("" when not planted) */
  char *argument_key;      /* ARGUMENTS: the key added (malloc'd) */
} md_probe_site;

typedef struct md_probe_planted {
  char *line;               /* the planted episode, one line of a trace file with its '\n' */
  md_trace_episode episode; /* the same, as the trace reader reads it */
  md_probe_site *sites;     /* one per region considered, in output order */
  size_t n_sites;
  size_t n_planted;         /* sites that got a fact */
} md_probe_planted;

/* Plants the episode's probes. `input` is left as it was. Errors:
 * MD_E_INVALID naming the file, line and episode for an episode that has
 * probes without settings->replace, or for the (never expected) failure of
 * the check of the planted episode; MD_E_NOMEM. On failure `out` is empty. */
md_status md_probe_plant_episode(const md_trace_episode *input, const md_probe_plant_settings *settings,
                                 md_probe_planted *out, md_error *err);

void md_probe_planted_free(md_probe_planted *planted);

/* ---- the stage: a trace file in, a planted trace file out ------------------------------ */

typedef struct md_probe_plant_options {
  const char *traces_path; /* memdecay-traces(5) */
  const char *output_path; /* the planted traces; never one of the inputs */
  md_probe_plant_settings settings;
} md_probe_plant_options;

/* A region's tally over the file. */
typedef struct md_probe_region_count {
  char *region;
  size_t planted;       /* episodes that got its probe */
  size_t in_arguments;  /* of them, planted in tool-call arguments */
  size_t without;       /* episodes that did not (no text or tool call of it) */
} md_probe_region_count;

typedef struct md_probe_plant_outcome {
  size_t episodes;
  size_t probes;
  size_t episodes_without_probes; /* eval refuses them (its --skip-invalid passes over them) */
  size_t replaced;                /* probes dropped by settings.replace */
  md_probe_region_count *regions; /* every region asked for or planted, in output order */
  size_t n_regions;
} md_probe_plant_outcome;

/* Reads every episode of options->traces_path (strict: the first invalid
 * one stops the run with the reader's message naming file, line, episode
 * and field), plants it, and writes the planted traces to
 * options->output_path atomically (io/files/atomic_file.h) after the
 * output guard (io/files/output_guard.h) has checked that the output is
 * not the input: nothing is written on any failure. settings.regions must
 * be valid region names without repeats (MD_E_INVALID, usage). */
md_status md_probe_plant(const md_probe_plant_options *options, md_probe_plant_outcome *outcome,
                         md_error *err);

void md_probe_plant_outcome_free(md_probe_plant_outcome *outcome);

#endif
