#include "io/formats/events.h"

#include "io/base/csv.h"
#include "io/base/numfmt.h"

#include <csv.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Reads go through one buffer of this size; libcsv keeps its own state
 * across buffers, so a file of any size streams in constant memory. */
enum { READ_CHUNK = 1 << 20, FIELD_SHOWN = 40, FIRST_ROWS = 1024 };

/* ---- region names and the region table ---------------------------------- */

/* FNV-1a: region names are short and few; any decent hash will do. */
static size_t hash_name(const char *name, size_t len) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)name[i]) * 1099511628211ULL;
  return (size_t)h;
}

/* Compares lengths first: a field is bytes with a length, and a C-string
 * comparison would stop at a NUL inside it ("system\0" is not "system"). */
static bool name_equals(const md_events_region *region, const char *name, size_t len) {
  return region->name_len == len && memcmp(region->name, name, len) == 0;
}

/* Index of the region called name[0..len), or n_regions when absent. */
static size_t lookup_region(const md_events *events, const char *name, size_t len) {
  if (events->n_slots == 0) return events->n_regions;
  size_t mask = events->n_slots - 1;
  for (size_t slot = hash_name(name, len) & mask;; slot = (slot + 1) & mask) {
    size_t entry = events->slots[slot];
    if (entry == 0) return events->n_regions;
    if (name_equals(&events->regions[entry - 1], name, len)) return entry - 1;
  }
}

static void insert_slot(size_t *slots, size_t n_slots, const char *name, size_t index) {
  size_t mask = n_slots - 1;
  size_t slot = hash_name(name, strlen(name)) & mask;
  while (slots[slot] != 0) slot = (slot + 1) & mask;
  slots[slot] = index + 1;
}

/* Keeps the table at most half full. */
static md_status grow_slots(md_events *events, md_error *err) {
  if (2 * (events->n_regions + 1) <= events->n_slots) return MD_OK;
  size_t n_slots = events->n_slots ? 2 * events->n_slots : 16;
  size_t *slots = calloc(n_slots, sizeof *slots);
  if (!slots) return md_fail(err, MD_E_NOMEM, "out of memory for the region table");
  for (size_t i = 0; i < events->n_regions; i++) insert_slot(slots, n_slots, events->regions[i].name, i);
  free(events->slots);
  events->slots = slots;
  events->n_slots = n_slots;
  return MD_OK;
}

static md_status add_region(md_events *events, const char *name, size_t len, md_error *err) {
  if (grow_slots(events, err) != MD_OK) return err->status;
  md_events_region *regions =
      realloc(events->regions, (events->n_regions + 1) * sizeof *events->regions);
  if (!regions) return md_fail(err, MD_E_NOMEM, "out of memory for a new region");
  events->regions = regions;
  md_events_region *region = &regions[events->n_regions];
  memset(region, 0, sizeof *region);
  region->name = malloc(len + 1);
  if (!region->name) return md_fail(err, MD_E_NOMEM, "out of memory for a new region");
  memcpy(region->name, name, len);
  region->name[len] = '\0';
  region->name_len = len;
  insert_slot(events->slots, events->n_slots, region->name, events->n_regions);
  events->n_regions++;
  return MD_OK;
}

/* ---- growable per-region columns ---------------------------------------- */

static bool grow_array(void **array, size_t cap, size_t elem) {
  void *grown = realloc(*array, cap * elem);
  if (!grown) return false;
  *array = grown;
  return true;
}

static bool reserve_row(md_events_region *region) {
  if (region->n < region->cap) return true;
  size_t cap = region->cap ? 2 * region->cap : FIRST_ROWS;
  if (!grow_array((void **)&region->time, cap, sizeof *region->time)) return false;
  if (!grow_array((void **)&region->event, cap, sizeof *region->event)) return false;
  if (region->entry && !grow_array((void **)&region->entry, cap, sizeof *region->entry)) return false;
  if (region->weight && !grow_array((void **)&region->weight, cap, sizeof *region->weight)) return false;
  region->cap = cap;
  return true;
}

/* The optional columns are materialised only once a row departs from the
 * default (entry 0, weight 1), so the common file without them costs 9 bytes
 * a row. */
static bool materialise(double **column, size_t n, size_t cap, double fill) {
  *column = malloc(cap * sizeof **column);
  if (!*column) return false;
  for (size_t i = 0; i < n; i++) (*column)[i] = fill;
  return true;
}

static bool append_row(md_events_region *region, double time, uint8_t event, double entry,
                       double weight) {
  if (!reserve_row(region)) return false;
  if (entry != 0.0 && !region->entry && !materialise(&region->entry, region->n, region->cap, 0.0))
    return false;
  if (weight != 1.0 && !region->weight &&
      !materialise(&region->weight, region->n, region->cap, 1.0))
    return false;
  size_t i = region->n++;
  region->time[i] = time;
  region->event[i] = event;
  if (region->entry) region->entry[i] = entry;
  if (region->weight) region->weight[i] = weight;
  return true;
}

/* ---- one file through libcsv -------------------------------------------- */

typedef enum column_role {
  COL_OTHER = 0,
  COL_REGION,
  COL_TIME,
  COL_EVENT,
  COL_ENTRY,
  COL_WEIGHT,
  COL_ROLES,
} column_role;

static const char *const role_names[COL_ROLES] = {"", "region", "time", "event", "entry", "weight"};

typedef struct csv_reader {
  md_events *events;
  md_error *err;
  md_status status;        /* first error; later callbacks do nothing */
  const char *path;        /* as named in messages */
  size_t line;             /* line being parsed, 1-based */
  size_t last_row_line;    /* line on which the last record ended */
  size_t field;            /* index of the next field in the current record */
  bool in_header;
  size_t n_columns;
  char **names;            /* header names, [n_columns] */
  size_t names_cap;
  column_role *roles;      /* [n_columns] */
  size_t role_column[COL_ROLES]; /* 1-based column of each role, 0 = absent */
  size_t rows;             /* data rows read from this file */
  /* the row being assembled */
  size_t region_index;
  double time, entry, weight;
  uint8_t event;
} csv_reader;

/* Copies a field for a message: at most FIELD_SHOWN bytes, control bytes
 * shown as '?', "..." when cut. */
static const char *shown(char *out, size_t out_size, const char *text, size_t len) {
  size_t keep = len > FIELD_SHOWN ? FIELD_SHOWN : len;
  if (keep + 4 > out_size) keep = out_size - 4;
  for (size_t i = 0; i < keep; i++) {
    unsigned char c = (unsigned char)text[i];
    out[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
  }
  strcpy(out + keep, keep < len ? "..." : "");
  return out;
}

/* Records "FILE:LINE:COLUMN: what" (plus the field's text when given). */
static void fail_at(csv_reader *r, md_status status, size_t column, const char *what,
                    const char *text, size_t len) {
  char field[FIELD_SHOWN + 4];
  if (text) {
    r->status = md_fail(r->err, status, "%s:%zu:%zu: %s: \"%s\"", r->path, r->line, column, what,
                        shown(field, sizeof field, text, len));
  } else {
    r->status = md_fail(r->err, status, "%s:%zu:%zu: %s", r->path, r->line, column, what);
  }
}

/* Integer decode steps are the common case and are exact as doubles below
 * 2^53, so plain digit strings skip strtod. */
static bool parse_number(const char *text, size_t len, double *value) {
  if (len == 0) return false;
  if (len <= 15) {
    double digits = 0.0;
    size_t i = 0;
    while (i < len && text[i] >= '0' && text[i] <= '9') digits = 10.0 * digits + (text[i++] - '0');
    if (i == len) {
      *value = digits;
      return true;
    }
  }
  char *end = NULL;
  *value = strtod(text, &end);
  return end == text + len;
}

/* Parses a numeric field; on failure records the error and returns false. */
static bool number_field(csv_reader *r, column_role role, size_t column, const char *text,
                         size_t len, double *value) {
  char what[64];
  if (len == 0) {
    snprintf(what, sizeof what, "'%s' is empty", role_names[role]);
    fail_at(r, MD_E_FORMAT, column, what, NULL, 0);
    return false;
  }
  if (!parse_number(text, len, value)) {
    snprintf(what, sizeof what, "'%s' is not a number", role_names[role]);
    fail_at(r, MD_E_FORMAT, column, what, text, len);
    return false;
  }
  if (!isfinite(*value)) {
    snprintf(what, sizeof what, "'%s' is not finite", role_names[role]);
    fail_at(r, MD_E_FORMAT, column, what, text, len);
    return false;
  }
  return true;
}

static void region_field(csv_reader *r, size_t column, const char *text, size_t len) {
  md_events *events = r->events;
  /* Rows usually come in runs of one region: try the last one first. */
  if (r->region_index < events->n_regions &&
      name_equals(&events->regions[r->region_index], text, len))
    return;
  r->region_index = lookup_region(events, text, len);
  if (r->region_index < events->n_regions) return;
  if (len == 0) {
    fail_at(r, MD_E_FORMAT, column, "'region' is empty", NULL, 0);
    return;
  }
  if (!md_region_name_valid(text, len)) {
    fail_at(r, MD_E_FORMAT, column,
            "'region' is not a valid region name (lower-case letters, digits and '_', "
            "starting with a letter)",
            text, len);
    return;
  }
  if (add_region(events, text, len, r->err) != MD_OK) r->status = r->err->status;
}

static void data_field(csv_reader *r, size_t index, const char *text, size_t len) {
  size_t column = index + 1;
  column_role role = r->roles[index];
  switch (role) {
    case COL_OTHER:
    case COL_ROLES: return;
    case COL_REGION: region_field(r, column, text, len); return;
    case COL_EVENT: {
      double value = -1.0;
      if (len == 1 && (text[0] == '0' || text[0] == '1')) {
        r->event = (uint8_t)(text[0] - '0');
      } else if (parse_number(text, len, &value) && (value == 0.0 || value == 1.0)) {
        r->event = (uint8_t)value;
      } else {
        fail_at(r, MD_E_FORMAT, column, "'event' must be 0 (censored) or 1 (observed)", text, len);
      }
      return;
    }
    case COL_TIME:
      if (!number_field(r, role, column, text, len, &r->time)) return;
      if (r->time < 0) fail_at(r, MD_E_FORMAT, column, "'time' is negative", text, len);
      return;
    case COL_ENTRY:
      if (!number_field(r, role, column, text, len, &r->entry)) return;
      if (r->entry < 0) fail_at(r, MD_E_FORMAT, column, "'entry' is negative", text, len);
      return;
    case COL_WEIGHT:
      if (!number_field(r, role, column, text, len, &r->weight)) return;
      if (r->weight <= 0) {
        fail_at(r, MD_E_FORMAT, column, "'weight' must be greater than 0", text, len);
      }
      return;
  }
}

static void header_field(csv_reader *r, const char *text, size_t len) {
  if (r->n_columns == r->names_cap) {
    size_t cap = r->names_cap ? 2 * r->names_cap : 16;
    char **names = realloc(r->names, cap * sizeof *names);
    if (!names) {
      r->status = md_fail(r->err, MD_E_NOMEM, "%s: out of memory reading the header", r->path);
      return;
    }
    r->names = names;
    r->names_cap = cap;
  }
  char *name = malloc(len + 1);
  if (!name) {
    r->status = md_fail(r->err, MD_E_NOMEM, "%s: out of memory reading the header", r->path);
    return;
  }
  memcpy(name, text, len);
  name[len] = '\0';
  r->names[r->n_columns++] = name;
}

/* Header names and the fields read are compared as C strings or parsed
 * further on (column roles, region names, numbers): a NUL byte would cut
 * them short, so a field holding one is refused here, before any of that.
 * Columns the reader ignores are not looked at. */
static bool has_nul(csv_reader *r, size_t index, const char *text, size_t len) {
  column_role role = COL_OTHER;
  if (!r->in_header) {
    role = index < r->n_columns ? r->roles[index] : COL_OTHER;
    if (role == COL_OTHER || role == COL_ROLES) return false;
  }
  if (!memchr(text, '\0', len)) return false;
  char what[64];
  if (r->in_header) {
    snprintf(what, sizeof what, "a NUL byte in a column name");
  } else {
    snprintf(what, sizeof what, "a NUL byte in '%s'", role_names[role]);
  }
  fail_at(r, MD_E_FORMAT, index + 1, what, text, len);
  return true;
}

static void on_field(void *text, size_t len, void *data) {
  csv_reader *r = data;
  if (r->status != MD_OK) return;
  const char *field = text ? text : "";
  size_t index = r->field++;
  if (has_nul(r, index, field, len)) return;
  if (r->in_header) {
    header_field(r, field, len);
  } else if (index < r->n_columns) {
    data_field(r, index, field, len);
  }
}

static column_role role_of(const char *name) {
  for (int role = COL_REGION; role < COL_ROLES; role++) {
    if (!strcmp(name, role_names[role])) return (column_role)role;
  }
  return COL_OTHER;
}

static void finish_header(csv_reader *r) {
  r->in_header = false;
  r->roles = calloc(r->n_columns, sizeof *r->roles);
  if (!r->roles) {
    r->status = md_fail(r->err, MD_E_NOMEM, "%s: out of memory reading the header", r->path);
    return;
  }
  size_t first, repeat;
  if (md_csv_header_repeat((const char *const *)r->names, r->n_columns, &first, &repeat)) {
    char what[80];
    snprintf(what, sizeof what, "duplicate column name (first in column %zu)", first + 1);
    fail_at(r, MD_E_FORMAT, repeat + 1, what, r->names[repeat], strlen(r->names[repeat]));
    return;
  }
  for (size_t i = 0; i < r->n_columns; i++) {
    r->roles[i] = role_of(r->names[i]);
    if (r->roles[i] != COL_OTHER) r->role_column[r->roles[i]] = i + 1;
  }
  bool any_known = false;
  for (int role = COL_REGION; role < COL_ROLES; role++) any_known |= r->role_column[role] != 0;
  for (int role = COL_REGION; role <= COL_EVENT; role++) {
    if (r->role_column[role]) continue;
    r->status = md_fail(r->err, MD_E_FORMAT,
                        any_known ? "%s:%zu: the header has no '%s' column (required: region, "
                                    "time, event)"
                                  : "%s:%zu: no header row: the first line must name the "
                                    "columns (region, time, event; '%s' is missing)",
                        r->path, r->line, role_names[role]);
    return;
  }
}

static void finish_row(csv_reader *r, size_t fields) {
  if (fields != r->n_columns) {
    size_t column = fields > r->n_columns ? r->n_columns + 1 : fields + 1;
    r->status = md_fail(r->err, MD_E_FORMAT, "%s:%zu:%zu: %zu fields, but the header has %zu",
                        r->path, r->line, column, fields, r->n_columns);
    return;
  }
  if (!(r->time > r->entry)) {
    char values[96];
    snprintf(values, sizeof values, "'time' (%.17g) must be greater than 'entry' (%.17g)",
             r->time, r->entry);
    fail_at(r, MD_E_FORMAT, r->role_column[COL_TIME], values, NULL, 0);
    return;
  }
  md_events_region *region = &r->events->regions[r->region_index];
  if (!append_row(region, r->time, r->event, r->entry, r->weight)) {
    r->status = md_fail(r->err, MD_E_NOMEM, "%s:%zu: out of memory storing region '%s'", r->path,
                        r->line, region->name);
    return;
  }
  r->rows++;
}

static void on_row(int terminator, void *data) {
  (void)terminator;
  csv_reader *r = data;
  size_t fields = r->field;
  r->field = 0;
  if (r->status != MD_OK) return;
  r->last_row_line = r->line;
  if (r->in_header) {
    finish_header(r);
  } else {
    finish_row(r, fields);
  }
  r->entry = 0.0;
  r->weight = 1.0;
}

/* Feeds one buffer to libcsv a line at a time, so that every callback knows
 * the line it is on. Returns false when parsing must stop. */
static bool feed(csv_reader *r, struct csv_parser *parser, const char *data, size_t size) {
  const char *end = data + size;
  while (data < end) {
    const char *newline = memchr(data, '\n', (size_t)(end - data));
    size_t len = newline ? (size_t)(newline - data) + 1 : (size_t)(end - data);
    if (csv_parse(parser, data, len, on_field, on_row, r) != len && r->status == MD_OK) {
      r->status = md_fail(r->err, MD_E_FORMAT,
                          "%s:%zu:%zu: malformed quoting (a quote inside an unquoted field, or "
                          "text after a closing quote)",
                          r->path, r->line, r->field + 1);
    }
    if (r->status != MD_OK) return false;
    if (newline) r->line++;
    data += len;
  }
  return true;
}

static void reader_release(csv_reader *r) {
  for (size_t i = 0; i < r->n_columns; i++) free(r->names[i]);
  free(r->names);
  free(r->roles);
}

static md_status parse_stream(csv_reader *r, FILE *fp, char *buffer) {
  struct csv_parser parser;
  if (csv_init(&parser, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0) {
    return md_fail(r->err, MD_E_NOMEM, "%s: cannot set up the CSV parser", r->path);
  }
  bool first = true;
  size_t got;
  while (r->status == MD_OK && (got = fread(buffer, 1, READ_CHUNK, fp)) > 0) {
    const char *data = buffer;
    if (first && got >= 3 && !memcmp(data, "\xEF\xBB\xBF", 3)) {
      data += 3;
      got -= 3;
    }
    first = false;
    feed(r, &parser, data, got);
  }
  if (r->status == MD_OK && ferror(fp)) {
    r->status = md_fail_kind(r->err, MD_E_IO, MD_KIND_INPUT, "%s:%zu: read error: %s", r->path, r->line,
                        strerror(errno));
  }
  if (r->status == MD_OK && csv_fini(&parser, on_field, on_row, r) != 0 && r->status == MD_OK) {
    r->status = md_fail(r->err, MD_E_FORMAT,
                        "%s:%zu: unterminated quoted field (the file ends inside quotes)",
                        r->path, r->last_row_line + 1);
  }
  csv_free(&parser);
  return r->status;
}

static md_status read_file(md_events *events, const char *path, char *buffer, md_error *err) {
  bool is_stdin = !strcmp(path, "-");
  csv_reader r = {.events = events,
                  .err = err,
                  .path = is_stdin ? "<stdin>" : path,
                  .line = 1,
                  .in_header = true,
                  .region_index = SIZE_MAX,
                  .weight = 1.0};
  FILE *fp = is_stdin ? stdin : fopen(path, "rb");
  if (!fp) return md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: cannot open: %s", path, strerror(errno));
  md_status status = parse_stream(&r, fp, buffer);
  if (!is_stdin) fclose(fp);
  if (status == MD_OK && r.in_header) {
    status = md_fail(err, MD_E_FORMAT, "%s:1: the file is empty (no header row)", r.path);
  }
  if (status == MD_OK && r.rows == 0) {
    status = md_warnings_add(&events->warnings, err,
                             "%s: header only, no event rows (the file adds nothing)", r.path);
  }
  reader_release(&r);
  return status;
}

/* Fails fast on a missing file or a directory before reading anything. */
static md_status check_paths(const char *const *paths, size_t n_paths, md_error *err) {
  if (n_paths == 0) return md_fail(err, MD_E_INVALID, "no events file given");
  for (size_t i = 0; i < n_paths; i++) {
    if (!strcmp(paths[i], "-")) continue;
    struct stat info;
    if (stat(paths[i], &info) != 0) {
      return md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: cannot open: %s", paths[i], strerror(errno));
    }
    if (S_ISDIR(info.st_mode)) {
      return md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: is a directory, not an events file", paths[i]);
    }
  }
  return MD_OK;
}

md_status md_events_read(md_events *events, const char *const *paths, size_t n_paths,
                         md_error *err) {
  memset(events, 0, sizeof *events);
  md_status status = check_paths(paths, n_paths, err);
  if (status != MD_OK) return status;
  char *buffer = malloc(READ_CHUNK);
  if (!buffer) return md_fail(err, MD_E_NOMEM, "out of memory for the read buffer");
  for (size_t i = 0; i < n_paths && status == MD_OK; i++) {
    status = read_file(events, paths[i], buffer, err);
    events->n_files++;
  }
  free(buffer);
  for (size_t i = 0; i < events->n_regions; i++) events->n_rows += events->regions[i].n;
  if (status == MD_OK && events->n_rows == 0) {
    status = md_fail(err, MD_E_FORMAT,
                     n_paths == 1 ? "%s: no event rows (the file has only a header)"
                                  : "%s and the other inputs: no event rows in any file",
                     paths[0]);
  }
  if (status != MD_OK) md_events_free(events);
  return status;
}

md_status md_events_append(md_events *events, const char *region, double time, int event,
                           double entry, double weight, md_error *err) {
  size_t len = strlen(region);
  if (!md_region_name_valid(region, len))
    return md_fail(err, MD_E_INVALID, "events: \"%s\" is not a valid region name", region);
  if (!(isfinite(time) && entry >= 0 && time > entry && (event == 0 || event == 1) &&
        weight > 0 && isfinite(weight)))
    return md_fail(err, MD_E_INVALID, "events: region %s: invalid row (time %g, event %d, "
                   "entry %g, weight %g)", region, time, event, entry, weight);
  size_t index = lookup_region(events, region, len);
  if (index == events->n_regions) {
    md_status status = add_region(events, region, len, err);
    if (status != MD_OK) return status;
  }
  if (!append_row(&events->regions[index], time, (uint8_t)event, entry, weight))
    return md_fail(err, MD_E_NOMEM, "events: out of memory storing region '%s'", region);
  events->n_rows++;
  return MD_OK;
}

md_surv_data md_events_region_data(const md_events_region *region) {
  md_surv_data data = {.n = region->n,
                       .time = region->time,
                       .event = region->event,
                       .entry = region->entry,
                       .weight = region->weight};
  return data;
}

const md_events_region *md_events_find(const md_events *events, const char *name) {
  size_t index = lookup_region(events, name, strlen(name));
  return index < events->n_regions ? &events->regions[index] : NULL;
}

void md_events_free(md_events *events) {
  for (size_t i = 0; i < events->n_regions; i++) {
    md_events_region *region = &events->regions[i];
    free(region->name);
    free(region->time);
    free(region->event);
    free(region->entry);
    free(region->weight);
  }
  free(events->regions);
  free(events->slots);
  md_warnings_free(&events->warnings);
  memset(events, 0, sizeof *events);
}

/* ---- writing ---------------------------------------------------------------- */

void md_events_write_row(FILE *fp, const char *region, double time, int event, double entry,
                         double weight, const char *episode, int64_t pos, int64_t page,
                         int64_t token_id) {
  char time_text[MD_NUMBER_TEXT_MAX], entry_text[MD_NUMBER_TEXT_MAX], weight_text[MD_NUMBER_TEXT_MAX];
  fprintf(fp, "%s,%s,%d,%s,%s,", region, md_format_shortest(time_text, time), event,
          md_format_shortest(entry_text, entry), md_format_shortest(weight_text, weight));
  md_csv_write_field(fp, episode, strlen(episode));
  fprintf(fp, ",%" PRId64 ",%" PRId64 ",%" PRId64 "\n", pos, page, token_id);
}
