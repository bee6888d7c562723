/* io/events: the values read back, merging of files with different columns,
 * lazily materialised entry/weight columns, the header-only warning, and
 * line numbers across read buffers. Expected values are the fixture files'
 * own contents (tests/events/data). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/formats/events.h"
#include "tests/test_util.h"

static char *data_path(const char *name) {
  const char *root = getenv("MD_SOURCE_ROOT");
  static char paths[8][1024];
  static int next = 0;
  char *path = paths[next++ % 8];
  snprintf(path, sizeof paths[0], "%s/tests/events/data/%s", root ? root : ".", name);
  return path;
}

static const md_events_region *region(const md_events *events, const char *name) {
  const md_events_region *found = md_events_find(events, name);
  CHECK_MSG(found != NULL, "region %s missing", name);
  return found;
}

static void check_basic_rows(const md_events *events) {
  CHECK(events->n_regions == 3);
  CHECK(events->n_rows == 6);
  CHECK(!strcmp(events->regions[0].name, "system"));
  CHECK(!strcmp(events->regions[1].name, "plan"));
  CHECK(!strcmp(events->regions[2].name, "scratchpad"));
  const md_events_region *system = region(events, "system");
  if (!system) return;
  CHECK(system->n == 3);
  CHECK(system->time[0] == 12 && system->time[1] == 30 && system->time[2] == 7.5);
  CHECK(system->event[0] == 1 && system->event[1] == 0 && system->event[2] == 1);
  CHECK(system->entry == NULL);
  CHECK(system->weight == NULL);
  const md_events_region *plan = region(events, "plan");
  if (plan) CHECK(plan->n == 2 && plan->time[0] == 4 && plan->time[1] == 9);
  CHECK(md_events_find(events, "user") == NULL);
}

static void test_basic_and_variant(void) {
  const char *names[] = {"basic.csv", "variant.csv"};
  for (int i = 0; i < 2; i++) {
    md_events events;
    md_error err = {0};
    const char *paths[] = {data_path(names[i])};
    CHECK_MSG(md_events_read(&events, paths, 1, &err) == MD_OK, "%s: %s", names[i], err.message);
    check_basic_rows(&events);
    CHECK(events.warnings.n == 0);
    md_surv_data data = md_events_region_data(&events.regions[0]);
    CHECK(data.n == 3 && data.time == events.regions[0].time && data.entry == NULL);
    md_events_free(&events);
  }
}

/* weighted.csv adds system rows with entry 2 / weight 3: the system columns
 * appear with the defaults filled in; plan keeps none. */
static void test_merge_materialises_columns(void) {
  md_events events;
  md_error err = {0};
  const char *paths[] = {data_path("basic.csv"), data_path("weighted.csv")};
  CHECK_MSG(md_events_read(&events, paths, 2, &err) == MD_OK, "%s", err.message);
  CHECK(events.n_files == 2 && events.n_rows == 9);
  const md_events_region *system = region(&events, "system");
  if (system) {
    const double entry[] = {0, 0, 0, 2, 0}, weight[] = {1, 1, 1, 3, 1}, time[] = {12, 30, 7.5, 12, 5};
    CHECK(system->n == 5 && system->entry && system->weight);
    for (size_t i = 0; system->entry && system->weight && i < 5; i++) {
      CHECK_MSG(system->entry[i] == entry[i] && system->weight[i] == weight[i] &&
                    system->time[i] == time[i],
                "row %zu", i);
    }
  }
  const md_events_region *plan = region(&events, "plan");
  if (plan) CHECK(plan->n == 3 && plan->entry == NULL && plan->weight == NULL);
  md_events_free(&events);
}

static void test_header_only(void) {
  md_events events;
  md_error err = {0};
  const char *alone[] = {data_path("header_only.csv")};
  CHECK(md_events_read(&events, alone, 1, &err) == MD_E_FORMAT);
  CHECK(strstr(err.message, "header_only.csv: no event rows") != NULL);
  CHECK(events.n_regions == 0 && events.regions == NULL);
  const char *with_rows[] = {data_path("header_only.csv"), data_path("basic.csv")};
  CHECK_MSG(md_events_read(&events, with_rows, 2, &err) == MD_OK, "%s", err.message);
  CHECK(events.warnings.n == 1);
  if (events.warnings.n == 1) CHECK(strstr(events.warnings.lines[0], "header only") != NULL);
  check_basic_rows(&events);
  md_events_free(&events);
}

/* A file several read buffers long, with a bad value on a known line past
 * the first buffer: the line number must still be exact, and the many
 * regions exercise the region table's growth. */
static void test_long_file_line_numbers(void) {
  char path[] = "/tmp/md-events-long-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  FILE *fp = fdopen(fd, "w");
  fputs("region,time,event\n", fp);
  const size_t rows = 150000, bad_line = 140001;
  for (size_t line = 2; line <= rows + 1; line++) {
    if (line == bad_line) {
      fputs("r7,oops,1\n", fp);
    } else {
      fprintf(fp, "r%zu,%zu.25,%zu\n", line % 40, line % 300 + 1, line % 2);
    }
  }
  fclose(fp);
  md_events events;
  md_error err = {0};
  const char *paths[] = {path};
  CHECK(md_events_read(&events, paths, 1, &err) == MD_E_FORMAT);
  char want[64];
  snprintf(want, sizeof want, ":%zu:2: 'time' is not a number: \"oops\"", bad_line);
  CHECK_MSG(strstr(err.message, want) != NULL, "%s", err.message);

  fp = fopen(path, "w");
  fputs("region,time,event\n", fp);
  for (size_t line = 2; line <= rows + 1; line++) {
    fprintf(fp, "r%zu,%zu.25,%zu\n", line % 40, line % 300 + 1, line % 2);
  }
  fclose(fp);
  CHECK_MSG(md_events_read(&events, paths, 1, &err) == MD_OK, "%s", err.message);
  CHECK(events.n_regions == 40 && events.n_rows == rows);
  const md_events_region *r3 = region(&events, "r3");
  /* r3 holds lines 3, 43, 83, ...: line 3 -> time 4.25, event 1; line 43
   * -> time 44.25, event 1; 3750 lines in all. */
  if (r3) {
    CHECK(r3->n == 3750);
    CHECK(r3->time[0] == 4.25 && r3->event[0] == 1 && r3->time[1] == 44.25);
  }
  md_events_free(&events);
  unlink(path);
}

/* A quoted field spanning lines (CRLF inside) still leaves later line
 * numbers physical: the bad value is on line 5. */
static void test_line_numbers_after_quoted_newlines(void) {
  char path[] = "/tmp/md-events-quoted-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  FILE *fp = fdopen(fd, "w");
  fputs("region,note,time,event\r\nsystem,\"two\r\nlines\",1,1\r\n\r\nplan,\"x\",oops,1\r\n", fp);
  fclose(fp);
  md_events events;
  md_error err = {0};
  const char *paths[] = {path};
  CHECK(md_events_read(&events, paths, 1, &err) == MD_E_FORMAT);
  CHECK_MSG(strstr(err.message, ":5:3: 'time' is not a number: \"oops\"") != NULL, "%s", err.message);
  unlink(path);
}

static void test_region_names(void) {
  CHECK(md_region_name_valid("tool_out", 8));
  CHECK(md_region_name_valid("r2d2", 4));
  CHECK(!md_region_name_valid("", 0));
  CHECK(!md_region_name_valid("_x", 2));
  CHECK(!md_region_name_valid("2x", 2));
  CHECK(!md_region_name_valid("Plan", 4));
  CHECK(!md_region_name_valid("tool-out", 8));
  const char *names[] = {"zeta", "scratchpad", "alpha", "system", "retrieval", "user"};
  qsort(names, 6, sizeof names[0], md_region_name_compare);
  const char *want[] = {"system", "user", "retrieval", "scratchpad", "alpha", "zeta"};
  for (int i = 0; i < 6; i++) CHECK_MSG(!strcmp(names[i], want[i]), "position %d: %s", i, names[i]);
  CHECK(md_region_default_base_priority("system") == 1.0);
  CHECK(md_region_default_base_priority("my_region") == 0.5);
  CHECK(md_region_pinned_by_default("system") && !md_region_pinned_by_default("plan"));
}

int main(void) {
  test_basic_and_variant();
  test_merge_materialises_columns();
  test_header_only();
  test_long_file_line_numbers();
  test_line_numbers_after_quoted_newlines();
  test_region_names();
  return md_test_finish("events_reader");
}
