/* manifest.csv through the CSV reader of io/files/csv.h (libcsv, a line at a
 * time, so every message names its line); only the first manifest_bytes
 * bytes are read, and the caller pulls an episode at a time. Every row is
 * checked against what run.json says of its episode, whatever the order of
 * the columns. */
#include "io/formats/run_manifest.h"

#include "io/files/csv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/regions.h"

enum { READ_CHUNK = 1 << 16 };

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
  bool finished;
  char last_byte;
  md_csv_reader csv;
  /* header */
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

static void fail_row(md_run_manifest_stream *s, size_t column, const char *what) {
  const md_run_episode_meta *meta = &s->info->episodes[s->episode];
  s->status = md_fail(s->err, MD_E_FORMAT, "%s:%zu:%zu: %s (row %zu of episode \"%s\", which "
                      "run.json gives %zu prompt tokens and %zu decode steps)",
                      s->path, s->csv.line, column, what, s->row, meta->id, meta->prompt_tokens,
                      meta->decode_steps);
  md_error_at(s->err, s->path, s->csv.line, meta->id);
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
  char what[160], field[MD_CSV_SHOWN_SIZE];
  if (!parse_integer(text, len, &value)) {
    snprintf(what, sizeof what, "'%s' is not an integer: \"%s\"", role_names[r],
             md_csv_shown(field, text, len));
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
  char what[160], field[MD_CSV_SHOWN_SIZE];
  /* md_region_name_valid refuses a NUL byte too, before any strcmp below. */
  if (!md_region_name_valid(text, len)) {
    snprintf(what, sizeof what, "'region' is not a valid region name (lower-case letters, digits "
             "and '_', starting with a letter): \"%s\"", md_csv_shown(field, text, len));
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
  char what[200], field[MD_CSV_SHOWN_SIZE];
  switch (s->roles[index]) {
    case ROLE_EPISODE:
      if (strlen(meta->id) != len || memcmp(meta->id, text, len) != 0) {
        snprintf(what, sizeof what, "'episode' is \"%s\", expected \"%s\" (rows come in the "
                 "order of run.json's episodes)", md_csv_shown(field, text, len), meta->id);
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

static md_status on_field(void *user, md_csv_reader *csv, size_t index, const char *text,
                          size_t len) {
  md_run_manifest_stream *s = user;
  if (s->episode >= s->info->n_episodes) {
    s->status = md_fail(s->err, MD_E_FORMAT, "%s:%zu: a row after the %zu episodes that run.json "
                        "lists, within its manifest_bytes (%llu)", s->path, csv->line,
                        s->info->n_episodes, (unsigned long long)s->info->manifest_bytes);
    md_error_at(s->err, s->path, csv->line, NULL);
    return s->status;
  }
  if (index == 0 && s->arrays && s->row == 0) {
    const md_run_episode_meta *meta = &s->info->episodes[s->episode];
    if (!reserve_tokens(s->arrays, meta->prompt_tokens + meta->decode_steps)) {
      return s->status = md_fail(s->err, MD_E_NOMEM, "%s: out of memory for episode \"%s\"",
                                 s->path, meta->id);
    }
  }
  if (index < csv->n_columns) data_field(s, index, text, len);
  return s->status;
}

/* ---- rows -------------------------------------------------------------------------- */

static md_status on_header(void *user, md_csv_reader *csv) {
  md_run_manifest_stream *s = user;
  s->roles = calloc(csv->n_columns + 1, sizeof *s->roles);
  if (!s->roles) return s->status = md_fail(s->err, MD_E_NOMEM, "%s: out of memory", s->path);
  for (size_t i = 0; i < csv->n_columns; i++) {
    for (int r = ROLE_EPISODE; r < ROLES; r++)
      if (!strcmp(csv->names[i], role_names[r])) s->roles[i] = (role)r;
    if (s->roles[i] != ROLE_OTHER) s->role_column[s->roles[i]] = i + 1;
  }
  for (int r = ROLE_EPISODE; r < ROLES; r++) {
    if (s->role_column[r]) continue;
    s->status = md_fail(s->err, MD_E_FORMAT, "%s:%zu: the header has no '%s' column (needed: "
                        "episode, pos, region, page, birth, token_id)", s->path, csv->line,
                        role_names[r]);
    md_error_at(s->err, s->path, csv->line, NULL);
    return s->status;
  }
  return MD_OK;
}

static md_status on_row(void *user, md_csv_reader *csv, size_t fields) {
  md_run_manifest_stream *s = user;
  if (fields != csv->n_columns) {
    size_t column = fields > csv->n_columns ? csv->n_columns + 1 : fields + 1;
    char what[96];
    snprintf(what, sizeof what, "%zu fields, but the header has %zu", fields, csv->n_columns);
    fail_row(s, column, what);
    return s->status;
  }
  if (s->arrays && s->episode_done) {
    fail_row(s, 1, "two rows on one line (rows must end with a line feed)");
    return s->status;
  }
  const md_run_episode_meta *meta = &s->info->episodes[s->episode];
  if (++s->row < meta->prompt_tokens + meta->decode_steps) return MD_OK;
  s->episode_done = true;
  s->done_index = s->episode++;
  s->row = 0;
  return MD_OK;
}

static const md_csv_handlers manifest_handlers = {on_header, on_field, on_row};

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
}

static void finish(md_run_manifest_stream *s) {
  s->finished = true;
  if (s->info->manifest_bytes > 0 && s->last_byte != '\n') {
    s->status = md_fail(s->err, MD_E_FORMAT, "%s: run.json's manifest_bytes (%llu) does not end "
                        "on a line feed: it must cover whole rows", s->path,
                        (unsigned long long)s->info->manifest_bytes);
    return;
  }
  if (md_csv_reader_finish(&s->csv) != MD_OK && s->status == MD_OK) s->status = s->csv.status;
  if (s->status != MD_OK) return;
  if (s->csv.in_header && s->info->n_episodes > 0) {
    s->status = md_fail(s->err, MD_E_FORMAT, "%s: no header row within run.json's "
                        "manifest_bytes (%llu)", s->path,
                        (unsigned long long)s->info->manifest_bytes);
  } else if (s->episode < s->info->n_episodes) {
    const md_run_episode_meta *meta = &s->info->episodes[s->episode];
    s->status = md_fail(s->err, MD_E_FORMAT, "%s:%zu: the rows end (at run.json's manifest_bytes, "
                        "%llu) with %zu of the %zu rows of episode \"%s\" (episode %zu of %zu "
                        "in run.json)", s->path, s->csv.line,
                        (unsigned long long)s->info->manifest_bytes, s->row,
                        meta->prompt_tokens + meta->decode_steps, meta->id, s->episode + 1,
                        s->info->n_episodes);
  }
}

/* Feeds the next line (or the rest of the buffer) to the CSV reader: one line
 * at a time, so that md_run_manifest_next stops right after an episode's
 * last row. */
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
  if (md_csv_reader_feed(&s->csv, start, len) != MD_OK && s->status == MD_OK)
    s->status = s->csv.status;
  s->last_byte = start[len - 1];
  s->used += len;
}

static md_status stream_open(const md_run_info *info, md_run_info *scan,
                             md_run_token_arrays *arrays, md_run_manifest_stream **out,
                             md_error *err) {
  *out = NULL;
  md_run_manifest_stream *s = calloc(1, sizeof *s);
  if (!s) return md_fail(err, MD_E_NOMEM, "out of memory");
  *s = (md_run_manifest_stream){.info = info, .scan = scan, .arrays = arrays, .err = err,
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
  if (status == MD_OK) status = md_csv_reader_init(&s->csv, s->path, &manifest_handlers, s, err);
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
  s->err = s->csv.err = err;
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
  md_csv_reader_free(&s->csv);
  if (s->fp) fclose(s->fp);
  free(s->roles);
  free(s->buffer);
  free(s->path);
  free(s);
}
