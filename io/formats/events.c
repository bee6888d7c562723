#include "io/formats/events.h"

#include "io/files/csv.h"
#include "base/numfmt.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Reads go through one buffer of this size; libcsv keeps its own state
 * across buffers, so a file of any size streams in constant memory. */
enum { READ_CHUNK = 1 << 20, FIRST_ROWS = 1024 };

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

/* ---- one file through the CSV reader (io/files/csv.h) --------------------- */

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

typedef struct events_reader {
  md_events *events;
  md_csv_reader csv;
  column_role *roles;            /* [csv.n_columns] */
  size_t role_column[COL_ROLES]; /* 1-based column of each role, 0 = absent */
  size_t rows;                   /* data rows read from this file */
  /* the row being assembled */
  size_t region_index;
  double time, entry, weight;
  uint8_t event;
} events_reader;

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

/* Parses a numeric field into *value, or records the error. */
static md_status number_field(events_reader *r, column_role role, size_t column, const char *text,
                              size_t len, double *value) {
  char what[64];
  if (len == 0) {
    snprintf(what, sizeof what, "'%s' is empty", role_names[role]);
    return md_csv_fail_at(&r->csv, MD_E_FORMAT, column, what, NULL, 0);
  }
  if (!parse_number(text, len, value)) {
    snprintf(what, sizeof what, "'%s' is not a number", role_names[role]);
    return md_csv_fail_at(&r->csv, MD_E_FORMAT, column, what, text, len);
  }
  if (!isfinite(*value)) {
    snprintf(what, sizeof what, "'%s' is not finite", role_names[role]);
    return md_csv_fail_at(&r->csv, MD_E_FORMAT, column, what, text, len);
  }
  return MD_OK;
}

static md_status region_field(events_reader *r, size_t column, const char *text, size_t len) {
  md_events *events = r->events;
  /* Rows usually come in runs of one region: try the last one first. */
  if (r->region_index < events->n_regions &&
      name_equals(&events->regions[r->region_index], text, len))
    return MD_OK;
  r->region_index = lookup_region(events, text, len);
  if (r->region_index < events->n_regions) return MD_OK;
  if (len == 0) return md_csv_fail_at(&r->csv, MD_E_FORMAT, column, "'region' is empty", NULL, 0);
  if (!md_region_name_valid(text, len)) {
    return md_csv_fail_at(&r->csv, MD_E_FORMAT, column,
                          "'region' is not a valid region name (lower-case letters, digits and "
                          "'_', starting with a letter)",
                          text, len);
  }
  return add_region(events, text, len, r->csv.err);
}

/* The fields read are compared as C strings or parsed further on (region
 * names, numbers): a NUL byte would cut them short, so a field holding one
 * is refused before any of that. Columns the reader ignores are not looked
 * at. */
static md_status on_field(void *user, md_csv_reader *csv, size_t index, const char *text,
                          size_t len) {
  events_reader *r = user;
  if (index >= csv->n_columns) return MD_OK;
  size_t column = index + 1;
  column_role role = r->roles[index];
  if (role == COL_OTHER) return MD_OK;
  if (memchr(text, '\0', len)) {
    char what[64];
    snprintf(what, sizeof what, "a NUL byte in '%s'", role_names[role]);
    return md_csv_fail_at(csv, MD_E_FORMAT, column, what, text, len);
  }
  switch (role) {
    case COL_OTHER:
    case COL_ROLES: return MD_OK;
    case COL_REGION: return region_field(r, column, text, len);
    case COL_EVENT: {
      double value = -1.0;
      if (len == 1 && (text[0] == '0' || text[0] == '1')) {
        r->event = (uint8_t)(text[0] - '0');
      } else if (parse_number(text, len, &value) && (value == 0.0 || value == 1.0)) {
        r->event = (uint8_t)value;
      } else {
        return md_csv_fail_at(csv, MD_E_FORMAT, column,
                              "'event' must be 0 (censored) or 1 (observed)", text, len);
      }
      return MD_OK;
    }
    case COL_TIME: {
      md_status status = number_field(r, role, column, text, len, &r->time);
      if (status == MD_OK && r->time < 0)
        status = md_csv_fail_at(csv, MD_E_FORMAT, column, "'time' is negative", text, len);
      return status;
    }
    case COL_ENTRY: {
      md_status status = number_field(r, role, column, text, len, &r->entry);
      if (status == MD_OK && r->entry < 0)
        status = md_csv_fail_at(csv, MD_E_FORMAT, column, "'entry' is negative", text, len);
      return status;
    }
    case COL_WEIGHT: {
      md_status status = number_field(r, role, column, text, len, &r->weight);
      if (status == MD_OK && r->weight <= 0)
        status = md_csv_fail_at(csv, MD_E_FORMAT, column, "'weight' must be greater than 0", text,
                                len);
      return status;
    }
  }
  return MD_OK;
}

static column_role role_of(const char *name) {
  for (int role = COL_REGION; role < COL_ROLES; role++) {
    if (!strcmp(name, role_names[role])) return (column_role)role;
  }
  return COL_OTHER;
}

static md_status on_header(void *user, md_csv_reader *csv) {
  events_reader *r = user;
  r->roles = calloc(csv->n_columns + 1, sizeof *r->roles);
  if (!r->roles)
    return md_fail(csv->err, MD_E_NOMEM, "%s: out of memory reading the header", csv->path);
  for (size_t i = 0; i < csv->n_columns; i++) {
    r->roles[i] = role_of(csv->names[i]);
    if (r->roles[i] != COL_OTHER) r->role_column[r->roles[i]] = i + 1;
  }
  bool any_known = false;
  for (int role = COL_REGION; role < COL_ROLES; role++) any_known |= r->role_column[role] != 0;
  for (int role = COL_REGION; role <= COL_EVENT; role++) {
    if (r->role_column[role]) continue;
    md_status status = md_fail(
        csv->err, MD_E_FORMAT,
        any_known ? "%s:%zu: the header has no '%s' column (required: region, time, event)"
                  : "%s:%zu: no header row: the first line must name the columns (region, time, "
                    "event; '%s' is missing)",
        csv->path, csv->line, role_names[role]);
    md_error_at(csv->err, csv->path, csv->line, NULL);
    return status;
  }
  return MD_OK;
}

static md_status on_row(void *user, md_csv_reader *csv, size_t fields) {
  events_reader *r = user;
  double time = r->time, entry = r->entry, weight = r->weight;
  r->entry = 0.0;
  r->weight = 1.0;
  if (fields != csv->n_columns) {
    size_t column = fields > csv->n_columns ? csv->n_columns + 1 : fields + 1;
    char what[96];
    snprintf(what, sizeof what, "%zu fields, but the header has %zu", fields, csv->n_columns);
    return md_csv_fail_at(csv, MD_E_FORMAT, column, what, NULL, 0);
  }
  if (!(time > entry)) {
    char what[96];
    snprintf(what, sizeof what, "'time' (%.17g) must be greater than 'entry' (%.17g)", time, entry);
    return md_csv_fail_at(csv, MD_E_FORMAT, r->role_column[COL_TIME], what, NULL, 0);
  }
  md_events_region *region = &r->events->regions[r->region_index];
  if (!append_row(region, time, r->event, entry, weight)) {
    return md_fail(csv->err, MD_E_NOMEM, "%s:%zu: out of memory storing region '%s'", csv->path,
                   csv->line, region->name);
  }
  r->rows++;
  return MD_OK;
}

static const md_csv_handlers events_handlers = {on_header, on_field, on_row};

static md_status parse_stream(events_reader *r, FILE *fp, char *buffer) {
  size_t got;
  while (r->csv.status == MD_OK && (got = fread(buffer, 1, READ_CHUNK, fp)) > 0)
    md_csv_reader_feed(&r->csv, buffer, got);
  if (r->csv.status == MD_OK && ferror(fp)) {
    r->csv.status = md_fail_kind(r->csv.err, MD_E_IO, MD_KIND_INPUT, "%s:%zu: read error: %s",
                                 r->csv.path, r->csv.line, strerror(errno));
  }
  return md_csv_reader_finish(&r->csv);
}

static md_status read_file(md_events *events, const char *path, char *buffer, md_error *err) {
  bool is_stdin = !strcmp(path, "-");
  const char *shown_path = is_stdin ? "<stdin>" : path;
  events_reader r = {.events = events, .region_index = SIZE_MAX, .weight = 1.0};
  md_status status = md_csv_reader_init(&r.csv, shown_path, &events_handlers, &r, err);
  FILE *fp = NULL;
  if (status == MD_OK && !(fp = is_stdin ? stdin : fopen(path, "rb")))
    status = md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: cannot open: %s", path, strerror(errno));
  if (status == MD_OK) status = parse_stream(&r, fp, buffer);
  if (fp && !is_stdin) fclose(fp);
  if (status == MD_OK && r.csv.in_header) {
    status = md_fail(err, MD_E_FORMAT, "%s:1: the file is empty (no header row)", shown_path);
  }
  if (status == MD_OK && r.rows == 0) {
    status = md_warnings_add(&events->warnings, err,
                             "%s: header only, no event rows (the file adds nothing)", shown_path);
  }
  md_csv_reader_free(&r.csv);
  free(r.roles);
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
