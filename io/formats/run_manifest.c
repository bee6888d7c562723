/* manifest.csv through libcsv. The file is fed a line at a time so that
 * every callback knows its line (as io/formats/events.c does); only the first
 * manifest_bytes bytes are read. Every row is checked against what run.json
 * says of its episode, whatever the order of the columns. */
#include "io/formats/run_manifest.h"

#include "io/base/csv.h"

#include <csv.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/base/regions.h"

enum { READ_CHUNK = 1 << 16, FIELD_SHOWN = 40 };

typedef enum role {
  ROLE_OTHER = 0,
  ROLE_EPISODE,
  ROLE_POS,
  ROLE_REGION,
  ROLE_PAGE,
  ROLE_BIRTH,
  ROLE_TOKEN_ID,
  ROLES,
} role;

static const char *const role_names[ROLES] = {"", "episode", "pos", "region", "page", "birth",
                                              "token_id"};

struct md_run_manifest_stream {
  const md_run_info *info;
  md_run_info *scan;             /* scan mode: region names go here */
  md_run_token_arrays *arrays;   /* load mode: the episode's columns go here */
  char *path;
  md_error *err;
  md_status status;
  /* input */
  FILE *fp;
  char *buffer;
  size_t have, used;
  uint64_t remaining;            /* bytes of manifest_bytes not yet read */
  bool first_read, finished;
  char last_byte;
  struct csv_parser csv;
  bool csv_ready;
  /* header */
  size_t line, field;
  bool in_header;
  size_t n_columns, names_cap;
  char **names;
  role *roles;
  size_t role_column[ROLES];     /* 1-based, 0 = absent */
  /* position: the row expected next */
  size_t episode, row;
  bool episode_done;
  size_t done_index;
  size_t region_cache;
};

void md_run_token_arrays_free(md_run_token_arrays *arrays) {
  free(arrays->region);
  free(arrays->birth);
  free(arrays->page);
  free(arrays->token_id);
  memset(arrays, 0, sizeof *arrays);
}

static bool reserve_tokens(md_run_token_arrays *arrays, size_t n) {
  if (n <= arrays->capacity) return true;
  uint32_t *region = realloc(arrays->region, n * sizeof *region);
  if (region) arrays->region = region;
  int32_t *birth = realloc(arrays->birth, n * sizeof *birth);
  if (birth) arrays->birth = birth;
  int64_t *page = realloc(arrays->page, n * sizeof *page);
  if (page) arrays->page = page;
  int64_t *token_id = realloc(arrays->token_id, n * sizeof *token_id);
  if (token_id) arrays->token_id = token_id;
  if (!region || !birth || !page || !token_id) return false;
  arrays->capacity = n;
  return true;
}

/* ---- messages ------------------------------------------------------------------ */

static const char *shown(char *out, size_t size, const char *text, size_t len) {
  size_t keep = len > FIELD_SHOWN ? FIELD_SHOWN : len;
  if (keep + 4 > size) keep = size - 4;
  for (size_t i = 0; i < keep; i++) {
    unsigned char c = (unsigned char)text[i];
    out[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
  }
  strcpy(out + keep, keep < len ? "..." : "");
  return out;
}

static void fail_row(md_run_manifest_stream *s, size_t column, const char *what) {
  const md_run_episode_meta *meta = &s->info->episodes[s->episode];
  s->status = md_fail(s->err, MD_E_FORMAT, "%s:%zu:%zu: %s (row %zu of episode \"%s\", which "
                      "run.json gives %zu prompt tokens and %zu decode steps)",
                      s->path, s->line, column, what, s->row, meta->id, meta->prompt_tokens,
                      meta->decode_steps);
}

/* ---- fields ---------------------------------------------------------------------- */

static bool parse_integer(const char *text, size_t len, int64_t *value) {
  size_t i = text[0] == '-' ? 1 : 0;
  if (len == i || len - i > 18) return false;
  int64_t magnitude = 0;
  for (; i < len; i++) {
    if (text[i] < '0' || text[i] > '9') return false;
    magnitude = 10 * magnitude + (text[i] - '0');
  }
  *value = text[0] == '-' ? -magnitude : magnitude;
  return true;
}

static void integer_field(md_run_manifest_stream *s, role r, size_t column, const char *text,
                          size_t len, int64_t expected) {
  int64_t value;
  char what[160], field[FIELD_SHOWN + 4];
  if (!parse_integer(text, len, &value)) {
    snprintf(what, sizeof what, "'%s' is not an integer: \"%s\"", role_names[r],
             shown(field, sizeof field, text, len));
    fail_row(s, column, what);
    return;
  }
  if (r == ROLE_TOKEN_ID) {
    long vocab = s->info->model.vocab;
    if (value < 0 || (vocab > 0 && value >= vocab)) {
      if (value < 0) {
        snprintf(what, sizeof what, "'token_id' is negative (%lld)", (long long)value);
      } else {
        snprintf(what, sizeof what, "'token_id' %lld is not below run.json's model.vocab (%ld)",
                 (long long)value, vocab);
      }
      fail_row(s, column, what);
      return;
    }
  } else if (value != expected) {
    snprintf(what, sizeof what, "'%s' is %lld, expected %lld", role_names[r], (long long)value,
             (long long)expected);
    fail_row(s, column, what);
    return;
  }
  if (!s->arrays) return;
  if (r == ROLE_PAGE) s->arrays->page[s->row] = value;
  if (r == ROLE_BIRTH) s->arrays->birth[s->row] = (int32_t)value;
  if (r == ROLE_TOKEN_ID) s->arrays->token_id[s->row] = value;
}

static void scan_region(md_run_manifest_stream *s, const char *name) {
  md_run_info *info = s->scan;
  if (s->region_cache < info->n_regions && !strcmp(info->regions[s->region_cache], name)) return;
  for (size_t i = 0; i < info->n_regions; i++) {
    if (!strcmp(info->regions[i], name)) {
      s->region_cache = i;
      return;
    }
  }
  char **grown = realloc(info->regions, (info->n_regions + 1) * sizeof *grown);
  char *copy = strdup(name);
  if (grown) info->regions = grown;
  if (!grown || !copy) {
    free(copy);
    s->status = md_fail(s->err, MD_E_NOMEM, "%s: out of memory", s->path);
    return;
  }
  s->region_cache = info->n_regions;
  info->regions[info->n_regions++] = copy;
}

static void load_region(md_run_manifest_stream *s, size_t column, const char *name) {
  const md_run_info *info = s->info;
  if (!(s->region_cache < info->n_regions && !strcmp(info->regions[s->region_cache], name)))
    s->region_cache = md_run_region_index(info, name);
  if (s->region_cache == info->n_regions) {
    fail_row(s, column, "a region the first reading did not see (was the file changed?)");
    return;
  }
  s->arrays->region[s->row] = (uint32_t)s->region_cache;
}

static void region_field(md_run_manifest_stream *s, size_t column, const char *text, size_t len) {
  char what[160], field[FIELD_SHOWN + 4];
  /* md_region_name_valid refuses a NUL byte too, before any strcmp below. */
  if (!md_region_name_valid(text, len)) {
    snprintf(what, sizeof what, "'region' is not a valid region name (lower-case letters, digits "
             "and '_', starting with a letter): \"%s\"", shown(field, sizeof field, text, len));
    fail_row(s, column, what);
  } else if (s->scan) {
    scan_region(s, text);
  } else {
    load_region(s, column, text);
  }
}

static void data_field(md_run_manifest_stream *s, size_t index, const char *text, size_t len) {
  const md_run_episode_meta *meta = &s->info->episodes[s->episode];
  size_t column = index + 1, prompt = meta->prompt_tokens;
  char what[200], field[FIELD_SHOWN + 4];
  switch (s->roles[index]) {
    case ROLE_EPISODE:
      if (strlen(meta->id) != len || memcmp(meta->id, text, len) != 0) {
        snprintf(what, sizeof what, "'episode' is \"%s\", expected \"%s\" (rows come in the "
                 "order of run.json's episodes)", shown(field, sizeof field, text, len), meta->id);
        fail_row(s, column, what);
      }
      return;
    case ROLE_POS: integer_field(s, ROLE_POS, column, text, len, (int64_t)s->row); return;
    case ROLE_PAGE:
      integer_field(s, ROLE_PAGE, column, text, len,
                    (int64_t)(s->row / (size_t)s->info->aggregation.page_size));
      return;
    case ROLE_BIRTH:
      integer_field(s, ROLE_BIRTH, column, text, len,
                    s->row < prompt ? -1 : (int64_t)(s->row - prompt));
      return;
    case ROLE_TOKEN_ID: integer_field(s, ROLE_TOKEN_ID, column, text, len, 0); return;
    case ROLE_REGION: region_field(s, column, text, len); return;
    case ROLE_OTHER:
    case ROLES: return;
  }
}

static void header_field(md_run_manifest_stream *s, const char *text, size_t len) {
  /* Column names are matched as C strings: "region\0x" must not pass for
   * "region". */
  if (memchr(text, '\0', len)) {
    char field[FIELD_SHOWN + 4];
    s->status = md_fail(s->err, MD_E_FORMAT, "%s:%zu:%zu: a NUL byte in a column name: \"%s\"",
                        s->path, s->line, s->n_columns + 1, shown(field, sizeof field, text, len));
    return;
  }
  if (s->n_columns == s->names_cap) {
    size_t cap = s->names_cap ? 2 * s->names_cap : 16;
    char **names = realloc(s->names, cap * sizeof *names);
    if (!names) {
      s->status = md_fail(s->err, MD_E_NOMEM, "%s: out of memory", s->path);
      return;
    }
    s->names = names;
    s->names_cap = cap;
  }
  char *name = malloc(len + 1);
  if (!name) {
    s->status = md_fail(s->err, MD_E_NOMEM, "%s: out of memory", s->path);
    return;
  }
  memcpy(name, text, len);
  name[len] = '\0';
  s->names[s->n_columns++] = name;
}

static void on_field(void *text, size_t len, void *data) {
  md_run_manifest_stream *s = data;
  if (s->status != MD_OK) return;
  const char *field = text ? text : "";
  size_t index = s->field++;
  if (s->in_header) {
    header_field(s, field, len);
    return;
  }
  if (s->episode >= s->info->n_episodes) {
    s->status = md_fail(s->err, MD_E_FORMAT, "%s:%zu: a row after the %zu episodes that run.json "
                        "lists, within its manifest_bytes (%llu)", s->path, s->line,
                        s->info->n_episodes, (unsigned long long)s->info->manifest_bytes);
    return;
  }
  if (index == 0 && s->arrays && s->row == 0) {
    const md_run_episode_meta *meta = &s->info->episodes[s->episode];
    if (!reserve_tokens(s->arrays, meta->prompt_tokens + meta->decode_steps)) {
      s->status = md_fail(s->err, MD_E_NOMEM, "%s: out of memory for episode \"%s\"", s->path,
                          meta->id);
      return;
    }
  }
  if (index < s->n_columns) data_field(s, index, field, len);
}

/* ---- rows -------------------------------------------------------------------------- */

static void finish_header(md_run_manifest_stream *s) {
  s->in_header = false;
  s->roles = calloc(s->n_columns + 1, sizeof *s->roles);
  if (!s->roles) {
    s->status = md_fail(s->err, MD_E_NOMEM, "%s: out of memory", s->path);
    return;
  }
  size_t first, repeat;
  if (md_csv_header_repeat((const char *const *)s->names, s->n_columns, &first, &repeat)) {
    s->status = md_fail(s->err, MD_E_FORMAT, "%s:%zu:%zu: column '%s' repeats column %zu",
                        s->path, s->line, repeat + 1, s->names[repeat], first + 1);
    return;
  }
  for (size_t i = 0; i < s->n_columns; i++) {
    for (int r = ROLE_EPISODE; r < ROLES; r++)
      if (!strcmp(s->names[i], role_names[r])) s->roles[i] = (role)r;
    if (s->roles[i] != ROLE_OTHER) s->role_column[s->roles[i]] = i + 1;
  }
  for (int r = ROLE_EPISODE; r < ROLES; r++) {
    if (s->role_column[r]) continue;
    s->status = md_fail(s->err, MD_E_FORMAT, "%s:%zu: the header has no '%s' column (needed: "
                        "episode, pos, region, page, birth, token_id)", s->path, s->line,
                        role_names[r]);
    return;
  }
}

static void finish_row(md_run_manifest_stream *s, size_t fields) {
  if (fields != s->n_columns) {
    size_t column = fields > s->n_columns ? s->n_columns + 1 : fields + 1;
    char what[96];
    snprintf(what, sizeof what, "%zu fields, but the header has %zu", fields, s->n_columns);
    fail_row(s, column, what);
    return;
  }
  if (s->arrays && s->episode_done) {
    fail_row(s, 1, "two rows on one line (rows must end with a line feed)");
    return;
  }
  const md_run_episode_meta *meta = &s->info->episodes[s->episode];
  if (++s->row < meta->prompt_tokens + meta->decode_steps) return;
  s->episode_done = true;
  s->done_index = s->episode++;
  s->row = 0;
}

static void on_row(int terminator, void *data) {
  (void)terminator;
  md_run_manifest_stream *s = data;
  size_t fields = s->field;
  s->field = 0;
  if (s->status != MD_OK) return;
  if (s->in_header) {
    finish_header(s);
  } else {
    finish_row(s, fields);
  }
}

/* ---- the byte stream ------------------------------------------------------------------ */

static void refill(md_run_manifest_stream *s) {
  size_t want = s->remaining < READ_CHUNK ? (size_t)s->remaining : READ_CHUNK;
  size_t got = fread(s->buffer, 1, want, s->fp);
  s->have = got;
  s->used = 0;
  s->remaining -= got;
  if (got < want) {
    s->status = ferror(s->fp)
                    ? md_fail_kind(s->err, MD_E_IO, MD_KIND_INPUT, "%s: read error: %s", s->path, strerror(errno))
                    : md_fail(s->err, MD_E_FORMAT, "%s: the file ended before run.json's "
                              "manifest_bytes (%llu)", s->path,
                              (unsigned long long)s->info->manifest_bytes);
    return;
  }
  if (s->first_read && got >= 3 && !memcmp(s->buffer, "\xEF\xBB\xBF", 3)) s->used = 3;
  s->first_read = false;
}

static void finish(md_run_manifest_stream *s) {
  s->finished = true;
  if (s->info->manifest_bytes > 0 && s->last_byte != '\n') {
    s->status = md_fail(s->err, MD_E_FORMAT, "%s: run.json's manifest_bytes (%llu) does not end "
                        "on a line feed: it must cover whole rows", s->path,
                        (unsigned long long)s->info->manifest_bytes);
    return;
  }
  if (csv_fini(&s->csv, on_field, on_row, s) != 0 && s->status == MD_OK)
    s->status = md_fail(s->err, MD_E_FORMAT, "%s:%zu: unterminated quoted field", s->path,
                        s->line);
  if (s->status != MD_OK) return;
  if (s->in_header && s->info->n_episodes > 0) {
    s->status = md_fail(s->err, MD_E_FORMAT, "%s: no header row within run.json's "
                        "manifest_bytes (%llu)", s->path,
                        (unsigned long long)s->info->manifest_bytes);
  } else if (s->episode < s->info->n_episodes) {
    const md_run_episode_meta *meta = &s->info->episodes[s->episode];
    s->status = md_fail(s->err, MD_E_FORMAT, "%s:%zu: the rows end (at run.json's manifest_bytes, "
                        "%llu) with %zu of the %zu rows of episode \"%s\" (episode %zu of %zu "
                        "in run.json)", s->path, s->line,
                        (unsigned long long)s->info->manifest_bytes, s->row,
                        meta->prompt_tokens + meta->decode_steps, meta->id, s->episode + 1,
                        s->info->n_episodes);
  }
}

/* Feeds the next line (or the rest of the buffer) to libcsv. */
static void step(md_run_manifest_stream *s) {
  if (s->used == s->have) {
    if (s->remaining == 0) {
      finish(s);
      return;
    }
    refill(s);
    if (s->status != MD_OK || s->used == s->have) return;
  }
  const char *start = s->buffer + s->used;
  const char *newline = memchr(start, '\n', s->have - s->used);
  size_t len = newline ? (size_t)(newline - start) + 1 : s->have - s->used;
  if (csv_parse(&s->csv, start, len, on_field, on_row, s) != len && s->status == MD_OK)
    s->status = md_fail(s->err, MD_E_FORMAT, "%s:%zu:%zu: malformed quoting (a quote inside an "
                        "unquoted field, or text after a closing quote)", s->path, s->line,
                        s->field + 1);
  s->last_byte = start[len - 1];
  if (newline) s->line++;
  s->used += len;
}

static md_status stream_open(const md_run_info *info, md_run_info *scan,
                             md_run_token_arrays *arrays, md_run_manifest_stream **out,
                             md_error *err) {
  *out = NULL;
  md_run_manifest_stream *s = calloc(1, sizeof *s);
  if (!s) return md_fail(err, MD_E_NOMEM, "out of memory");
  *s = (md_run_manifest_stream){.info = info, .scan = scan, .arrays = arrays, .err = err,
                                .line = 1, .in_header = true, .first_read = true,
                                .remaining = info->manifest_bytes, .region_cache = SIZE_MAX};
  s->path = md_run_path(info->dir, "manifest.csv", NULL, "");
  s->buffer = malloc(READ_CHUNK);
  md_status status = MD_OK;
  if (!s->path || !s->buffer) status = md_fail(err, MD_E_NOMEM, "out of memory");
  if (status == MD_OK && !(s->fp = fopen(s->path, "rb")))
    status = md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: cannot open: %s",
                     s->path, strerror(errno));
  struct stat st;
  if (status == MD_OK && fstat(fileno(s->fp), &st) == 0 &&
      (uint64_t)st.st_size < info->manifest_bytes)
    status = md_fail(err, MD_E_FORMAT, "%s: %lld bytes, but run.json's manifest_bytes is %llu: "
                     "the manifest is truncated", s->path, (long long)st.st_size,
                     (unsigned long long)info->manifest_bytes);
  if (status == MD_OK && csv_init(&s->csv, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0)
    status = md_fail(err, MD_E_NOMEM, "%s: cannot set up the CSV parser", s->path);
  s->csv_ready = status == MD_OK;
  if (status != MD_OK) {
    md_run_manifest_close(s);
    return status;
  }
  *out = s;
  return MD_OK;
}

static int compare_names(const void *a, const void *b) { return md_region_name_compare(a, b); }

md_status md_run_manifest_scan(md_run_info *info, md_error *err) {
  md_run_manifest_stream *s;
  md_status status = stream_open(info, info, NULL, &s, err);
  if (status != MD_OK) return status;
  while (s->status == MD_OK && !s->finished) step(s);
  status = s->status;
  md_run_manifest_close(s);
  if (status == MD_OK && info->n_regions > 1)
    qsort(info->regions, info->n_regions, sizeof *info->regions, compare_names);
  return status;
}

md_status md_run_manifest_open(const md_run_info *info, md_run_token_arrays *arrays,
                               md_run_manifest_stream **stream, md_error *err) {
  return stream_open(info, NULL, arrays, stream, err);
}

md_status md_run_manifest_next(md_run_manifest_stream *s, size_t *episode, bool *done,
                               md_error *err) {
  s->err = err;
  *done = false;
  s->episode_done = false;
  while (s->status == MD_OK && !s->episode_done && !s->finished) step(s);
  if (s->status != MD_OK) return s->status;
  if (!s->episode_done) {
    *done = true;
    return MD_OK;
  }
  *episode = s->done_index;
  return MD_OK;
}

void md_run_manifest_close(md_run_manifest_stream *s) {
  if (!s) return;
  if (s->csv_ready) csv_free(&s->csv);
  if (s->fp) fclose(s->fp);
  for (size_t i = 0; i < s->n_columns; i++) free(s->names[i]);
  free(s->names);
  free(s->roles);
  free(s->buffer);
  free(s->path);
  free(s);
}
