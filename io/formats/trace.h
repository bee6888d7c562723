/* Agent traces: JSON Lines, one episode per line (memdecay-traces(5) is the
 * full format, with every rule this reader enforces).
 *
 * The reader streams the file one line at a time, so a trace file may hold
 * any number of episodes. Every episode is validated completely before it is
 * returned; a bad one is reported with the file, the line, the episode id
 * when known and a JSON path to the field at fault, e.g.
 *
 *   traces.jsonl:7: episode "ep-0007": messages[2].role: unknown role "bot"
 *   (known roles: system, user, assistant, tool)
 *
 * and, for JSON syntax errors, the column. Two modes: strict (the first bad
 * episode stops the read with an error) and skip-invalid (a bad episode is
 * reported through a callback and the read goes on with the next line). */
#ifndef MD_IO_FORMATS_TRACE_H
#define MD_IO_FORMATS_TRACE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "base/regions.h"

enum {
  MD_TRACE_ID_MAX = 128,          /* bytes in an episode id */
  MD_TRACE_REGION_MAX = 64,       /* bytes in a region name */
  MD_TRACE_GENERATE_MAX = 131072, /* "generate" above this is rejected (Qwen2.5's longest context) */
};

/* True for a valid region name (md_region_name_valid, base/regions.h) of
 * at most MD_TRACE_REGION_MAX bytes. */
bool md_trace_region_valid(const char *name);

typedef enum md_trace_role {
  MD_ROLE_SYSTEM,    /* default region system */
  MD_ROLE_USER,      /* default region user */
  MD_ROLE_ASSISTANT, /* default region scratchpad; tool calls tool_in */
  MD_ROLE_TOOL,      /* default region tool_out */
} md_trace_role;

const char *md_trace_role_name(md_trace_role role);

/* Every string below points into the episode's parsed JSON (`root`) and
 * lives as long as the episode. Texts are valid UTF-8 without NUL bytes
 * (jansson guarantees both). */
typedef struct md_trace_segment {
  const char *region;
  const char *text;
  size_t length; /* bytes of text */
} md_trace_segment;

typedef struct md_trace_tool_call {
  const char *region;      /* tool_in unless the call sets "region" */
  const char *name;        /* [A-Za-z0-9_.-]{1,64}, the template writes it unquoted */
  const json_t *arguments; /* a JSON object; a string form is parsed into one */
  bool arguments_string;   /* the trace wrote the arguments as a string holding the object
                              (md_trace_episode_dumps writes them back as one) */
} md_trace_tool_call;

typedef struct md_trace_message {
  md_trace_role role;
  const char *region;         /* the role's default region, or the message's "region" */
  md_trace_segment *segments; /* content: a string is one segment */
  size_t n_segments;
  md_trace_tool_call *tool_calls; /* assistant messages only */
  size_t n_tool_calls;
} md_trace_message;

typedef enum md_trace_continuation_kind {
  MD_CONTINUATION_NONE,     /* absent: the collector's default decode length, greedy */
  MD_CONTINUATION_TEXT,     /* teacher-forced text */
  MD_CONTINUATION_GENERATE, /* decode `generate` tokens greedily */
} md_trace_continuation_kind;

typedef struct md_trace_continuation {
  md_trace_continuation_kind kind;
  const char *region; /* scratchpad unless set (also for NONE) */
  const char *text;   /* TEXT: non-empty */
  size_t length;
  long generate; /* GENERATE: 1 .. MD_TRACE_GENERATE_MAX */
} md_trace_continuation;

typedef struct md_trace_probe {
  const char *region;
  const char *question;
  const char *answer;
  const json_t *object; /* the whole probe, with any extra fields */
} md_trace_probe;

typedef struct md_trace_episode {
  const char *id;   /* [A-Za-z0-9][A-Za-z0-9._-]*, safe as a file name */
  char *path;       /* the trace file, for messages about this episode */
  size_t line;      /* 1-based line in that file */
  bool raw;         /* the "spans" form: no chat template */
  md_trace_message *messages; /* messages form */
  size_t n_messages;
  md_trace_segment *spans; /* raw form */
  size_t n_spans;
  const json_t *tools; /* optional array of function signatures (messages form), or NULL */
  md_trace_continuation continuation;
  md_trace_probe *probes;
  size_t n_probes;
  json_t *root; /* the parsed line; owns every string above */
} md_trace_episode;

void md_trace_episode_free(md_trace_episode *episode);

/* Fails with status and "FILE:LINE: episode \"ID\": " before the formatted
 * reason, the episode's file, line and id in err's fields too: the form of
 * every error about one episode of a traces file. */
md_status md_trace_episode_fail(md_error *err, md_status status, const md_trace_episode *episode,
                                const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Called once for each invalid episode in skip-invalid mode; `reason` names
 * the file, line and field as in strict mode. */
typedef void (*md_trace_skip_fn)(void *context, const md_error *reason);

typedef struct md_trace_options {
  bool skip_invalid;       /* false: the first invalid episode is an error */
  md_trace_skip_fn on_skip; /* may be NULL */
  void *on_skip_context;
} md_trace_options;

typedef struct md_trace_reader md_trace_reader;

/* Opens a trace file for reading; `options` may be NULL (strict). A UTF-8
 * byte-order mark at the start of the file is skipped. */
md_status md_trace_open(const char *path, const md_trace_options *options, md_trace_reader **reader,
                        md_error *err);

/* Reads the next valid episode into `episode` (free it with
 * md_trace_episode_free) and sets *have = true, or sets *have = false at the
 * end of the file. Blank lines (only spaces, tabs, CR) are skipped. An
 * episode whose id was already seen in this file is invalid, and the message
 * names both lines. In skip-invalid mode invalid episodes go to on_skip and
 * are passed over; I/O errors and running out of memory always fail. After
 * a failure the reader stays usable: another call reads the next line. */
md_status md_trace_next(md_trace_reader *reader, md_trace_episode *episode, bool *have,
                        md_error *err);

/* Parses one line of a trace file, `text[0..length)` without its line
 * break, with every rule of md_trace_next but the one that needs the rest
 * of the file (ids unique within it); `path` and `line` go into the
 * episode and into any message. For a line this program made (a trace
 * written by md_trace_episode_dumps, read back to check it). */
md_status md_trace_parse_line(const char *path, size_t line, const char *text, size_t length,
                              md_trace_episode *episode, md_error *err);

/* The episode as one line of a trace file: its JSON (`root`) on one line,
 * ", " and ": " between members as the shipped traces have them, keys in
 * their order, UTF-8 as it is, reals with digits that read back to the
 * same double (md_json_shorten_numbers), and a final '\n'. Tool-call
 * arguments the trace wrote as a string (arguments_string) are written
 * back as a string (compact JSON) holding the object. `root` may have
 * been changed since the episode was read as long as its messages and
 * tool calls are still the ones the parsed fields describe, one for one
 * (the tool calls' arguments_string are read by index). Sets *line to a
 * malloc'd NUL-terminated string; MD_E_NOMEM is the only failure. */
md_status md_trace_episode_dumps(const md_trace_episode *episode, char **line, md_error *err);

/* Lines read so far (blank ones included). */
size_t md_trace_reader_line(const md_trace_reader *reader);

void md_trace_close(md_trace_reader *reader);

typedef struct md_trace_summary {
  size_t episodes;      /* valid episodes */
  size_t skipped;       /* invalid episodes passed over (skip-invalid mode) */
  size_t lines;         /* lines in the file */
  size_t text_bytes;    /* bytes of trace text in valid episodes (segments, spans,
                           continuation text): a rough size for progress */
} md_trace_summary;

/* The validate-all pass: reads the whole file with the same rules as the
 * reader (duplicate ids included) and counts its episodes, so that a run
 * knows its length and fails on bad input before any model work. A file
 * without any valid episode is an error. */
md_status md_trace_scan(const char *path, const md_trace_options *options, md_trace_summary *summary,
                        md_error *err);

/* The collect-time check that an episode fits the model: prompt_tokens +
 * decode_steps positions must not exceed max_positions
 * (max_position_embeddings). Fails with MD_E_INVALID and a message naming
 * the file, line and episode and the three numbers. */
md_status md_trace_check_positions(const md_trace_episode *episode, size_t prompt_tokens,
                                   size_t decode_steps, size_t max_positions, md_error *err);

#endif
