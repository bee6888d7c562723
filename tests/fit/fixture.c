#include "tests/fit/fixture.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "fixture: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(2);
}

static FILE *open_fixture(const char *relative_path) {
  const char *root = getenv("MD_SOURCE_ROOT");
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root && *root ? root : ".", relative_path);
  FILE *f = fopen(path, "r");
  if (!f) die("cannot open %s", path);
  return f;
}

static double parse_number(const char *text, const char *path, size_t line) {
  if (strcmp(text, "NA") == 0) return NAN;
  char *end;
  double value = strtod(text, &end);
  if (end == text || *end != '\0') die("%s:%zu: not a number: \"%s\"", path, line, text);
  return value;
}

static void chomp(char *s) {
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = '\0';
}

static void append_row(fixture_region *r, double entry, double time, int event, double weight) {
  size_t n = r->n + 1;
  r->entry = realloc(r->entry, n * sizeof *r->entry);
  r->time = realloc(r->time, n * sizeof *r->time);
  r->weight = realloc(r->weight, n * sizeof *r->weight);
  r->event = realloc(r->event, n * sizeof *r->event);
  if (!r->entry || !r->time || !r->weight || !r->event) die("out of memory");
  r->entry[r->n] = entry;
  r->time[r->n] = time;
  r->event[r->n] = (uint8_t)event;
  r->weight[r->n] = weight;
  r->n = n;
}

static fixture_region *region_named(fixture_dataset *d, const char *name) {
  int k = fixture_region_index(d, name);
  if (k >= 0) return &d->regions[k];
  if (d->n_regions == sizeof d->regions / sizeof d->regions[0]) die("too many regions");
  fixture_region *r = &d->regions[d->n_regions++];
  memset(r, 0, sizeof *r);
  snprintf(r->name, sizeof r->name, "%s", name);
  return r;
}

void fixture_load_dataset(const char *relative_path, fixture_dataset *dataset) {
  memset(dataset, 0, sizeof *dataset);
  FILE *f = open_fixture(relative_path);
  char line[1024];
  size_t line_no = 0;
  if (!fgets(line, sizeof line, f)) die("%s: empty", relative_path);
  chomp(line);
  if (strcmp(line, "region,entry,time,event,weight") != 0)
    die("%s:1: unexpected header \"%s\"", relative_path, line);
  line_no = 1;
  while (fgets(line, sizeof line, f)) {
    line_no++;
    chomp(line);
    char *fields[5], *save = NULL, *p = line;
    size_t n = 0;
    for (char *tok; n < 5 && (tok = strtok_r(p, ",", &save)); p = NULL) fields[n++] = tok;
    if (n != 5) die("%s:%zu: expected 5 fields", relative_path, line_no);
    double event = parse_number(fields[3], relative_path, line_no);
    append_row(region_named(dataset, fields[0]), parse_number(fields[1], relative_path, line_no),
               parse_number(fields[2], relative_path, line_no), (int)event,
               parse_number(fields[4], relative_path, line_no));
  }
  fclose(f);
}

void fixture_load_answers(const char *relative_path, fixture_answers *answers) {
  memset(answers, 0, sizeof *answers);
  FILE *f = open_fixture(relative_path);
  char line[1024];
  size_t line_no = 0, capacity = 0;
  while (fgets(line, sizeof line, f)) {
    line_no++;
    chomp(line);
    char *fields[5], *save = NULL, *p = line;
    size_t n = 0;
    for (char *tok; n < 5 && (tok = strtok_r(p, "\t", &save)); p = NULL) fields[n++] = tok;
    if (n != 5) die("%s:%zu: expected 5 tab-separated fields", relative_path, line_no);
    if (answers->n == capacity) {
      capacity = capacity ? 2 * capacity : 1024;
      answers->items = realloc(answers->items, capacity * sizeof *answers->items);
      if (!answers->items) die("out of memory");
    }
    fixture_answer *a = &answers->items[answers->n++];
    memset(a, 0, sizeof *a);
    snprintf(a->region, sizeof a->region, "%s", fields[1]);
    snprintf(a->quantity, sizeof a->quantity, "%s", fields[2]);
    a->index = (size_t)parse_number(fields[3], relative_path, line_no);
    a->value = parse_number(fields[4], relative_path, line_no);
  }
  fclose(f);
}

void fixture_free_dataset(fixture_dataset *dataset) {
  for (size_t k = 0; k < dataset->n_regions; k++) {
    fixture_region *r = &dataset->regions[k];
    free(r->entry);
    free(r->time);
    free(r->weight);
    free(r->event);
  }
  memset(dataset, 0, sizeof *dataset);
}

void fixture_free_answers(fixture_answers *answers) {
  free(answers->items);
  memset(answers, 0, sizeof *answers);
}

md_surv_data fixture_surv_data(const fixture_region *region) {
  return (md_surv_data){region->n, region->time, region->event, region->entry, region->weight};
}

int fixture_region_index(const fixture_dataset *dataset, const char *name) {
  for (size_t k = 0; k < dataset->n_regions; k++)
    if (strcmp(dataset->regions[k].name, name) == 0) return (int)k;
  return -1;
}
