/* Error kinds and fields (base/error.h): the kind each status has unless
 * its maker says otherwise, the fields, blame_input, the trace reader naming
 * a skipped episode in `record` (what the collector's skip list reads
 * instead of parsing the message), and the events reader and the JSON
 * loader filling the file and line fields. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "io/files/json_fields.h"
#include "io/formats/events.h"
#include "io/formats/trace.h"
#include "tests/test_util.h"

static void kinds_follow_status(void) {
  md_error err;
  CHECK(md_fail(&err, MD_E_FORMAT, "f") == MD_E_FORMAT && err.kind == MD_KIND_INPUT);
  CHECK(md_fail(&err, MD_E_INVALID, "i") == MD_E_INVALID && err.kind == MD_KIND_INPUT);
  CHECK(md_fail(&err, MD_E_UNSUPPORTED, "u") == MD_E_UNSUPPORTED && err.kind == MD_KIND_INPUT);
  CHECK(md_fail(&err, MD_E_IO, "o") == MD_E_IO && err.kind == MD_KIND_IO);
  CHECK(md_fail(&err, MD_E_NOMEM, "m") == MD_E_NOMEM && err.kind == MD_KIND_RESOURCE);
  CHECK(md_fail(&err, MD_E_NUMERIC, "n") == MD_E_NUMERIC && err.kind == MD_KIND_COMPUTE);
  CHECK(md_fail(&err, MD_E_DEVICE, "d") == MD_E_DEVICE && err.kind == MD_KIND_DEVICE);
  CHECK(md_fail_kind(&err, MD_E_IO, MD_KIND_INPUT, "%s: cannot open", "x.json") == MD_E_IO);
  CHECK(err.kind == MD_KIND_INPUT && !strcmp(err.message, "x.json: cannot open"));
  CHECK(md_fail(NULL, MD_E_IO, "nothing recorded") == MD_E_IO);
  CHECK(!strcmp(md_error_kind_name(MD_KIND_RESOURCE), "resource"));
}

static void fields(void) {
  md_error err;
  md_fail(&err, MD_E_FORMAT, "bad");
  CHECK(err.file[0] == '\0' && err.line == 0 && err.record[0] == '\0');
  CHECK(md_error_at(&err, "traces.jsonl", 7, "ep-3") == MD_E_FORMAT);
  CHECK(!strcmp(err.file, "traces.jsonl") && err.line == 7 && !strcmp(err.record, "ep-3"));
  md_error_prefix(&err, "context");
  CHECK(err.kind == MD_KIND_INPUT && err.line == 7 && !strcmp(err.message, "context: bad"));
  char long_id[2 * MD_ERROR_FIELD_MAX];
  memset(long_id, 'a', sizeof long_id - 1);
  long_id[sizeof long_id - 1] = '\0';
  md_error_at(&err, NULL, 0, long_id);
  CHECK(strlen(err.record) == MD_ERROR_FIELD_MAX - 1 && !strcmp(err.file, "traces.jsonl"));
  md_fail(&err, MD_E_IO, "again");  /* a new error clears the fields */
  CHECK(err.file[0] == '\0' && err.line == 0 && err.record[0] == '\0');
  md_error_clear(&err);
  CHECK(err.status == MD_OK && err.kind == MD_KIND_NONE && err.message[0] == '\0');
}

static void blame_input(void) {
  md_error err;
  md_fail(&err, MD_E_IO, "cannot create the directory");
  CHECK(md_error_blame_input(&err) == MD_E_IO && err.kind == MD_KIND_INPUT);
  md_fail(&err, MD_E_DEVICE, "no GPU");
  md_error_blame_input(&err);
  CHECK(err.kind == MD_KIND_INPUT);
  md_fail(&err, MD_E_NOMEM, "out of memory");
  md_error_blame_input(&err);
  CHECK(err.kind == MD_KIND_RESOURCE);
}

typedef struct skips {
  int n;
  char record[2][MD_ERROR_FIELD_MAX];
  size_t line[2];
} skips;

static void on_skip(void *context, const md_error *reason) {
  skips *s = context;
  if (s->n < 2) {
    snprintf(s->record[s->n], sizeof s->record[0], "%s", reason->record);
    s->line[s->n] = reason->line;
  }
  s->n++;
}

static void trace_names_the_episode(void) {
  char path[] = "/tmp/md-test-error-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) return;
  const char *text =
      "{\"id\": \"good\", \"spans\": [{\"region\": \"user\", \"text\": \"hi\"}]}\n"
      "{\"id\": \"ep-2.b\", \"spans\": [{\"region\": \"Bad\", \"text\": \"x\"}]}\n"
      "{\"spans\": []}\n";
  CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
  close(fd);
  skips s = {0};
  md_trace_options options = {.skip_invalid = true, .on_skip = on_skip, .on_skip_context = &s};
  md_trace_summary summary;
  md_error err;
  CHECK(md_trace_scan(path, &options, &summary, &err) == MD_OK);
  CHECK(summary.episodes == 1 && s.n == 2);
  CHECK_MSG(!strcmp(s.record[0], "ep-2.b") && s.line[0] == 2, "record '%s' line %zu",
            s.record[0], s.line[0]);
  CHECK_MSG(s.record[1][0] == '\0' && s.line[1] == 3, "record '%s' line %zu", s.record[1],
            s.line[1]);  /* no id: no record */
  md_trace_reader *reader;
  CHECK(md_trace_open(path, NULL, &reader, &err) == MD_OK);
  md_trace_episode episode;
  bool have;
  CHECK(md_trace_next(reader, &episode, &have, &err) == MD_OK && have);
  md_trace_episode_free(&episode);
  CHECK(md_trace_next(reader, &episode, &have, &err) == MD_E_FORMAT);
  CHECK(err.kind == MD_KIND_INPUT && !strcmp(err.file, path) && err.line == 2 &&
        !strcmp(err.record, "ep-2.b"));
  md_trace_close(reader);
  unlink(path);
  CHECK(md_trace_open(path, NULL, &reader, &err) == MD_E_IO && err.kind == MD_KIND_INPUT);
}

/* Writes text to a new temporary file; returns 0 and its name in path. */
static int temp_file(char *path, const char *text) {
  int fd = mkstemp(path);
  if (fd < 0) return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

static void events_and_json_name_file_and_line(void) {
  char csv[] = "/tmp/md-test-error-XXXXXX";
  CHECK(temp_file(csv, "region,time,event\nuser,1,1\nuser,-2,0\n") == 0);
  md_events events;
  md_error err;
  const char *paths[] = {csv};
  CHECK(md_events_read(&events, paths, 1, &err) == MD_E_FORMAT);
  CHECK_MSG(err.kind == MD_KIND_INPUT && !strcmp(err.file, csv) && err.line == 3,
            "kind %d file \"%s\" line %zu", (int)err.kind, err.file, err.line);
  unlink(csv);
  char json[] = "/tmp/md-test-error-XXXXXX";
  CHECK(temp_file(json, "{\"a\": 1,\n \"a\": 2}\n") == 0);
  json_t *root;
  CHECK(md_json_load(json, &root, &err) == MD_E_FORMAT && root == NULL);
  CHECK_MSG(!strcmp(err.file, json) && err.line == 2, "file \"%s\" line %zu: %s", err.file,
            err.line, err.message);
  unlink(json);
  CHECK(md_json_load(json, &root, &err) == MD_E_IO && err.kind == MD_KIND_INPUT &&
        !strcmp(err.file, json));
}

int main(void) {
  kinds_follow_status();
  fields();
  blame_input();
  trace_names_the_episode();
  events_and_json_name_file_and_line();
  return md_test_finish("io_error");
}
