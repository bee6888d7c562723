/* The export stage (memdecay-calibrate export): a calibrated memdecay.json
 * and requests (a trace file, memdecay-traces(5), or OpenAI chat-completions
 * request bodies, export/openai_request.h) in; per request, one JSON line of
 * a serving stack's retention settings out (export/format.h), and
 * optionally a summary of the mapping. Each request is rendered and
 * tokenised with the model's own tokenizer and chat template exactly as the
 * collector renders an episode (collector/tokenizer/episode_tokens.h), then
 * mapped by md_retention_map_tokens (export/retention.h).
 *
 * Nothing is written unless every request maps: outputs are committed
 * atomically at the end, after the output guard (no output may be an input). */
#ifndef MD_EXPORT_EXPORT_H
#define MD_EXPORT_EXPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "base/warnings.h"
#include "export/format.h"

/* Blocks of more tokens than this are refused (no stack has them). */
enum { MD_EXPORT_BLOCK_SIZE_MAX = 65536 };

typedef enum md_export_input {
  MD_EXPORT_INPUT_AUTO,   /* openai when the first non-blank line is an object with "model" */
  MD_EXPORT_INPUT_TRACES,
  MD_EXPORT_INPUT_OPENAI,
} md_export_input;

const char *md_export_input_name(md_export_input input);

typedef struct md_export_options {
  const char *config_path;   /* memdecay.json */
  const char *model_path;    /* checkpoint directory or GGUF file (collector/model/model_dir.h) */
  const char *input_path;    /* the requests */
  md_export_input input;
  const char *output_path;   /* JSON Lines, one per request */
  const char *summary_path;  /* NULL: none */
  const md_export_format *format;
  size_t block_size;         /* 0: the format's default */
  double step_ms;            /* milliseconds per decode step; NaN: not given */
  bool runs;                 /* add the unaligned region runs to each line */
  const char *const *retrieval_tools; /* openai input: tools whose results are retrieval */
  size_t n_retrieval_tools;
} md_export_options;

typedef struct md_export_region_count {
  const char *region;        /* borrowed from the outcome's own copy of the config */
  size_t labelled_tokens;    /* prompt tokens labelled with it */
  size_t ranges;             /* ranges that took its setting (step 3) */
  size_t tokens;             /* tokens in those ranges */
  size_t lowered;            /* ranges or decode directives the format lowered */
} md_export_region_count;

typedef struct md_export_outcome {
  md_export_input input;     /* the one read (auto resolved) */
  size_t block_size;
  size_t requests;
  size_t prompt_tokens;
  size_t n_regions;
  md_export_region_count *regions; /* the config's regions, in its order */
  md_warnings warnings;      /* the format's adjustments and the model's notes */
  char **region_names;       /* owned */
} md_export_outcome;

/* Runs the stage. Usage errors (a block size out of range, a format that
 * needs --step-ms without it) are MD_E_INVALID of kind MD_KIND_USAGE; bad
 * input names the file, line and request (or the config's field). */
md_status md_export(const md_export_options *options, md_export_outcome *outcome, md_error *err);
void md_export_outcome_free(md_export_outcome *outcome);

#endif
