#include "io/formats/eval_record.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct md_eval_record {
  int fd;
  char *path;
};

static md_status take_lock(int fd, const char *path, md_error *err) {
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) return MD_OK;
  if (errno == EWOULDBLOCK)
    return md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE,
                        "%s: another eval is writing these results now (its record is locked)",
                        path);
  return md_fail(err, MD_E_IO, "%s: cannot lock: %s", path, strerror(errno));
}

static md_status write_all(int fd, const char *path, const char *text, size_t n, md_error *err) {
  while (n > 0) {
    ssize_t w = write(fd, text, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return md_fail(err, MD_E_IO, "%s: write failed: %s", path, strerror(errno));
    text += w;
    n -= (size_t)w;
  }
  if (fsync(fd) != 0) return md_fail(err, MD_E_IO, "%s: fsync failed: %s", path, strerror(errno));
  return MD_OK;
}

static char *slurp(int fd, size_t *length) {
  struct stat st;
  if (fstat(fd, &st) != 0) return NULL;
  size_t n = (size_t)st.st_size;
  char *text = malloc(n + 1);
  if (!text) return NULL;
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, text + got, n - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  text[got] = '\0';
  *length = got;
  return text;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* One probe outcome [correct, in_region, answer_tokens, answer_kept, hex]. */
static bool read_probe(const json_t *v, md_eval_probe *p) {
  if (!json_is_array(v) || json_array_size(v) != 5) return false;
  const json_t *correct = json_array_get(v, 0), *in_region = json_array_get(v, 1);
  const json_t *tokens = json_array_get(v, 2), *kept = json_array_get(v, 3);
  const json_t *hex = json_array_get(v, 4);
  if (!json_is_boolean(correct) || !json_is_boolean(in_region) || !json_is_integer(tokens) ||
      !json_is_integer(kept) || !json_is_string(hex) || json_integer_value(tokens) < 0 ||
      json_integer_value(kept) < 0 || json_integer_value(kept) > json_integer_value(tokens))
    return false;
  const char *h = json_string_value(hex);
  size_t n = strlen(h);
  if (n % 2) return false;
  char *output = malloc(n / 2 + 1);
  if (!output) return false;
  for (size_t i = 0; i < n / 2; i++) {
    int hi = hex_value(h[2 * i]), lo = hex_value(h[2 * i + 1]);
    if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
      free(output);
      return false;
    }
    output[i] = (char)(hi * 16 + lo);
  }
  output[n / 2] = '\0';
  free(p->output);
  p->output = output;
  p->correct = json_is_true(correct);
  p->answer_in_region = json_is_true(in_region);
  p->answer_tokens = (size_t)json_integer_value(tokens);
  p->answer_kept = (size_t)json_integer_value(kept);
  return true;
}

/* One episode line into results; false when it does not fit them. */
static bool read_episode(const json_t *line, md_eval_results *r, bool *done) {
  const json_t *index = json_object_get(line, "episode"), *id = json_object_get(line, "id");
  const json_t *runs = json_object_get(line, "runs");
  if (!json_is_integer(index) || !json_is_string(id) || !json_is_array(runs)) return false;
  json_int_t e = json_integer_value(index);
  if (e < 0 || (size_t)e >= r->n_episodes || done[e]) return false;
  md_eval_episode *ep = &r->episodes[e];
  if (strcmp(ep->id, json_string_value(id)) != 0 || json_array_size(runs) != r->n_runs) return false;
  for (size_t run = 0; run < r->n_runs; run++) {
    const json_t *v = json_array_get(runs, run);
    if (!json_is_array(v) || json_array_size(v) != 6) return false;
    int64_t fields[5];
    for (size_t f = 0; f < 5; f++) {
      const json_t *x = json_array_get(v, f);
      if (!json_is_integer(x)) return false;
      fields[f] = (int64_t)json_integer_value(x);
    }
    const json_t *probes = json_array_get(v, 5);
    if (!json_is_array(probes) || json_array_size(probes) != ep->n_probes) return false;
    md_eval_run *x = &ep->runs[run];
    x->budget_pages = fields[0];
    x->max_cached = fields[1];
    x->max_cached_after_eviction = fields[2];
    x->evicted = fields[3];
    x->final_cached = fields[4];
    for (size_t k = 0; k < ep->n_probes; k++) {
      md_eval_probe *p = &x->probes[k];
      p->index = k;
      p->region = ep->probes[k].region;
      if (!read_probe(json_array_get(probes, k), p)) return false;
    }
  }
  done[e] = true;
  return true;
}

/* Reads an existing record: its identity, then its finished episodes. */
static md_status read_record(int fd, const char *path, const char *identity, md_eval_results *r,
                             bool *done, md_error *err) {
  size_t length = 0;
  char *text = slurp(fd, &length);
  if (!text) return md_fail(err, MD_E_IO, "%s: cannot read: %s", path, strerror(errno));
  md_status s = MD_OK;
  size_t line_no = 0, offset = 0, complete = 0;
  while (s == MD_OK && offset < length) {
    char *end = memchr(text + offset, '\n', length - offset);
    if (!end) break; /* cut short by a kill: dropped below */
    *end = '\0';
    line_no++;
    json_error_t jerr;
    json_t *line = json_loads(text + offset, 0, &jerr);
    if (!line || !json_is_object(line)) {
      s = md_fail(err, MD_E_FORMAT, "%s:%zu: not a record line (%s)", path, line_no,
                  line ? "not an object" : jerr.text);
    } else if (line_no == 1) {
      const json_t *format = json_object_get(line, "format"), *id = json_object_get(line, "identity");
      if (!json_is_string(format) || strcmp(json_string_value(format), MD_EVAL_RECORD_FORMAT) != 0)
        s = md_fail(err, MD_E_FORMAT, "%s:1: not an eval record (format \"%s\")", path,
                    MD_EVAL_RECORD_FORMAT);
      else if (!json_is_string(id) || strcmp(json_string_value(id), identity) != 0)
        s = md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE,
                         "%s: the interrupted eval had other inputs or settings (%s) than this one "
                         "(%s): run it with those, or remove the record to start over",
                         path, json_is_string(id) ? json_string_value(id) : "?", identity);
    } else if (!read_episode(line, r, done)) {
      s = md_fail(err, MD_E_FORMAT, "%s:%zu: an episode that does not fit this evaluation", path,
                  line_no);
    }
    json_decref(line);
    offset = (size_t)(end - text) + 1;
    if (s == MD_OK) complete = offset;
  }
  free(text);
  if (s == MD_OK && line_no == 0)
    s = md_fail(err, MD_E_FORMAT, "%s: an empty eval record: remove it to start over", path);
  if (s == MD_OK && complete < length && ftruncate(fd, (off_t)complete) != 0)
    s = md_fail(err, MD_E_IO, "%s: cannot drop its cut line: %s", path, strerror(errno));
  if (s == MD_OK && lseek(fd, 0, SEEK_END) < 0)
    s = md_fail(err, MD_E_IO, "%s: %s", path, strerror(errno));
  return s;
}

md_status md_eval_record_open(const char *path, const char *identity, bool resume,
                              md_eval_results *results, bool *done, md_eval_record **record,
                              md_error *err) {
  *record = NULL;
  int fd = open(path, O_RDWR | O_CLOEXEC);
  bool exists = fd >= 0;
  if (!exists && errno != ENOENT) return md_fail(err, MD_E_IO, "%s: %s", path, strerror(errno));
  if (exists && !resume) {
    close(fd);
    return md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE,
                        "%s holds the record of an interrupted eval of these results: add --resume "
                        "to continue it, or remove it to start over",
                        path);
  }
  if (!exists) fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return md_fail(err, MD_E_IO, "%s: cannot create the eval record: %s", path, strerror(errno));
  md_status s = take_lock(fd, path, err);
  if (s == MD_OK && exists) s = read_record(fd, path, identity, results, done, err);
  if (s == MD_OK && !exists) {
    json_t *head = json_pack("{s:s, s:s}", "format", MD_EVAL_RECORD_FORMAT, "identity", identity);
    char *text = head ? json_dumps(head, JSON_COMPACT) : NULL;
    json_decref(head);
    if (!text) s = md_fail(err, MD_E_NOMEM, "out of memory");
    size_t n = text ? strlen(text) : 0;
    if (s == MD_OK) {
      s = write_all(fd, path, text, n, err);
      if (s == MD_OK) s = write_all(fd, path, "\n", 1, err);
    }
    free(text);
  }
  md_eval_record *rec = s == MD_OK ? calloc(1, sizeof *rec) : NULL;
  if (s == MD_OK && (!rec || !(rec->path = strdup(path)))) s = md_fail(err, MD_E_NOMEM, "out of memory");
  if (s != MD_OK) {
    if (rec) free(rec);
    if (!exists) unlink(path); /* created here: nothing to resume */
    close(fd);
    return s;
  }
  rec->fd = fd;
  *record = rec;
  return MD_OK;
}

static json_t *episode_line(const md_eval_results *r, size_t e) {
  const md_eval_episode *ep = &r->episodes[e];
  json_t *runs = json_array();
  for (size_t run = 0; runs && run < r->n_runs; run++) {
    const md_eval_run *x = &ep->runs[run];
    json_t *probes = json_array();
    for (size_t k = 0; probes && k < ep->n_probes; k++) {
      const md_eval_probe *p = &x->probes[k];
      const char *out = p->output ? p->output : "";
      size_t n = strlen(out);
      char *hex = malloc(2 * n + 1);
      if (!hex) {
        json_decref(probes);
        probes = NULL;
        break;
      }
      for (size_t i = 0; i < n; i++) snprintf(hex + 2 * i, 3, "%02x", (unsigned char)out[i]);
      hex[2 * n] = '\0';
      json_t *v = json_pack("[bbIIs]", p->correct, p->answer_in_region, (json_int_t)p->answer_tokens,
                            (json_int_t)p->answer_kept, hex);
      free(hex);
      if (!v || json_array_append_new(probes, v)) {
        json_decref(probes);
        probes = NULL;
      }
    }
    json_t *v = probes ? json_pack("[IIIIIo]", (json_int_t)x->budget_pages, (json_int_t)x->max_cached,
                                   (json_int_t)x->max_cached_after_eviction, (json_int_t)x->evicted,
                                   (json_int_t)x->final_cached, probes)
                       : NULL;
    if (!v || json_array_append_new(runs, v)) {
      json_decref(runs);
      runs = NULL;
    }
  }
  return runs ? json_pack("{s:I, s:s, s:o}", "episode", (json_int_t)e, "id", ep->id, "runs", runs) : NULL;
}

md_status md_eval_record_append(md_eval_record *rec, const md_eval_results *results, size_t episode,
                                md_error *err) {
  json_t *line = episode_line(results, episode);
  char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
  json_decref(line);
  if (!text) return md_fail(err, MD_E_NOMEM, "out of memory writing %s", rec->path);
  size_t n = strlen(text);
  char *with_newline = realloc(text, n + 2);
  if (!with_newline) {
    free(text);
    return md_fail(err, MD_E_NOMEM, "out of memory writing %s", rec->path);
  }
  with_newline[n] = '\n';
  with_newline[n + 1] = '\0';
  md_status s = write_all(rec->fd, rec->path, with_newline, n + 1, err);
  free(with_newline);
  return s;
}

void md_eval_record_discard(md_eval_record *rec) {
  if (rec) unlink(rec->path); /* still locked: no one takes it over meanwhile */
  md_eval_record_close(rec);
}

void md_eval_record_close(md_eval_record *rec) {
  if (!rec) return;
  close(rec->fd);
  free(rec->path);
  free(rec);
}
