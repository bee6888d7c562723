/* io/run_dir: reading the hand-made run of tests/run_dir/README.md back
 * (run.json facts, the region table, every manifest column and both
 * matrices of each episode, twice over), and every way a run directory can
 * be refused, each with the file named in the message. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/formats/run_dir.h"
#include "tests/run_dir/run_dir_writer.h"
#include "tests/test_util.h"

static char base_dir[4096];

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* A fresh copy of the small run in its own directory. */
static const char *fresh_run(const char *name) {
  static char dir[4200];
  snprintf(dir, sizeof dir, "%s/%s", base_dir, name);
  nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  CHECK(test_run_write(dir, test_run_small()) == 0);
  return dir;
}

/* ---- reading ----------------------------------------------------------------------- */

static void check_info(const md_run_info *info) {
  CHECK(info->n_episodes == 2);
  CHECK(info->n_regions == 4);
  /* Known regions in prompt order: system, user, retrieval, scratchpad. */
  const char *order[] = {"system", "user", "retrieval", "scratchpad"};
  for (size_t i = 0; i < 4 && i < info->n_regions; i++) CHECK(!strcmp(info->regions[i], order[i]));
  CHECK(info->tokens == 10 && info->prompt_tokens == 5 && info->decode_steps == 5);
  CHECK(info->max_decode_steps == 3 && info->min_decode_steps == 2);
  CHECK(!strcmp(info->model.name, "tiny"));
  CHECK(info->model.vocab == 100000 && info->model.layers == 2);
  CHECK(info->aggregation.page_size == 2);
  CHECK(info->aggregation.layers[0] == 0 && info->aggregation.layers[1] == 2);
  CHECK(!strcmp(info->traces.path, "traces/small.jsonl"));
  CHECK(info->complete && info->n_skipped == 0 && info->threads == 1);
  CHECK(!strcmp(info->episodes[1].id, "e2") && info->episodes[1].line == 2);
  CHECK(!strcmp(info->episodes[0].continuation, "teacher-forced"));
  CHECK(md_run_region_index(info, "retrieval") == 2);
  CHECK(md_run_region_index(info, "plan") == 4);
}

static void check_episode(const md_run_episode_data *e, size_t index) {
  const test_episode *want = &test_run_small()->episodes[index];
  CHECK(e->index == index && e->meta && !strcmp(e->meta->id, want->id));
  CHECK(e->prompt_tokens == want->prompt && e->steps == want->steps);
  CHECK(e->tokens == want->prompt + want->steps);
  for (size_t i = 0; i < e->tokens; i++) {
    const char *region_names[] = {"system", "user", "retrieval", "scratchpad"};
    CHECK_MSG(!strcmp(region_names[e->region[i]], want->region[i]), "token %zu", i);
    CHECK(e->birth[i] == (i < want->prompt ? -1 : (int32_t)(i - want->prompt)));
    CHECK(e->page[i] == (int64_t)(i / 2));
    CHECK(e->token_id[i] == (int64_t)(1000 * (index + 1) + i));
  }
  CHECK(!memcmp(e->attn, want->attn, e->steps * e->tokens * sizeof *e->attn));
  for (size_t i = 0; i < e->prompt_tokens; i++) CHECK(e->prefill[i] == 1.0f / (float)(i + 1));
}

static void iterate(const md_run_info *info) {
  md_error err = {0};
  md_run_reader *reader = NULL;
  CHECK_MSG(md_run_reader_open(info, &reader, &err) == MD_OK, "%s", err.message);
  for (size_t index = 0; index < 3 && reader; index++) {
    md_run_episode_data episode;
    bool done = true;
    CHECK_MSG(md_run_reader_next(reader, &episode, &done, &err) == MD_OK, "%s", err.message);
    CHECK(done == (index == 2));
    if (!done) check_episode(&episode, index);
  }
  md_run_reader_close(reader);
}

static void test_read_small(void) {
  const char *dir = fresh_run("read");
  md_run_info info;
  md_error err = {0};
  CHECK_MSG(md_run_info_read(dir, &info, &err) == MD_OK, "%s", err.message);
  check_info(&info);
  iterate(&info);
  iterate(&info); /* a second pass reads the same */
  md_run_info_free(&info);
}

/* Bytes after manifest_bytes belong to an episode in progress: ignored. */
static void test_rows_after_manifest_bytes(void) {
  const char *dir = fresh_run("tail");
  char path[4300];
  snprintf(path, sizeof path, "%s/manifest.csv", dir);
  FILE *fp = fopen(path, "ab");
  fputs("e3,0,user,0,-1,3000,\"half a row", fp);
  fclose(fp);
  md_run_info info;
  md_error err = {0};
  CHECK_MSG(md_run_info_read(dir, &info, &err) == MD_OK, "%s", err.message);
  iterate(&info);
  md_run_info_free(&info);
}

/* ---- refusals ------------------------------------------------------------------------ */

typedef struct damage {
  const char *name;
  const char *ops[3];    /* make_run_dir operations */
  const char *message;   /* expected in the error, after the run directory */
  bool at_iteration;     /* found while reading the episodes, not up front */
  size_t line;           /* when not 0: the error's line field (its file field is manifest.csv) */
  const char *record;    /* when not NULL: the error's record field (the episode) */
} damage;

static const damage damages[] = {
    {"no run.json", {"remove:run.json"}, "/run.json: missing: not a run directory", false, 0, NULL},
    {"json syntax", {"truncate:run.json=50"}, "/run.json:", false, 0, NULL},
    {"format", {"set:format=\"memdecay-run/9\""}, "/run.json: format \"memdecay-run/9\" is not supported", false, 0, NULL},
    {"model name", {"drop:model.name"}, "/run.json: model.name: missing", false, 0, NULL},
    {"model hash", {"set:model.config_sha256=null"}, "/run.json: model.config_sha256: expected a non-empty string, found null", false, 0, NULL},
    {"manifest_bytes", {"drop:manifest_bytes"}, "/run.json: manifest_bytes: missing", false, 0, NULL},
    {"page size", {"set:aggregation.page_size=0"}, "/run.json: aggregation.page_size: expected an integer >= 1, found an integer", false, 0, NULL},
    {"traces", {"drop:traces.path"}, "/run.json: traces.path: missing", false, 0, NULL},
    {"complete", {"drop:complete"}, "/run.json: complete: missing", false, 0, NULL},
    {"episodes", {"set:episodes={}"}, "/run.json: episodes: expected an array, found an object", false, 0, NULL},
    {"decode steps", {"drop:episodes[1].decode_steps"}, "/run.json: episodes[1].decode_steps: missing", false, 0, NULL},
    {"prompt tokens", {"set:episodes[0].prompt_tokens=\"3\""}, "/run.json: episodes[0].prompt_tokens: expected an integer >= 1, found a string", false, 0, NULL},
    {"id as path", {"set:episodes[0].id=\"../e1\""}, "/run.json: episodes[0].id: \"../e1\" cannot name a file", false, 0, NULL},
    {"duplicate id", {"set:episodes[1].id=\"e1\""}, "/run.json: episodes[1].id: \"e1\" repeats episodes[0]", false, 0, NULL},
    {"layers", {"set:aggregation.layers=[2, 1]"}, "/run.json: aggregation.layers: expected [begin, end]", false, 0, NULL},
    {"no manifest", {"remove:manifest.csv"}, "/manifest.csv: cannot open", false, 0, NULL},
    {"manifest short", {"truncate:manifest.csv=100"}, "/manifest.csv: 100 bytes, but run.json's manifest_bytes is", false, 0, NULL},
    {"mid-row", {"set:manifest_bytes=60"}, "/manifest.csv: run.json's manifest_bytes (60) does not end on a line feed", false, 0, NULL},
    {"episode rows", {"set:episodes[0].decode_steps=4"}, "/manifest.csv:8:1: 'episode' is \"e2\", expected \"e1\"", false, 8, "e1"},
    {"rows end", {"set:episodes[1].decode_steps=3"}, "/manifest.csv:13: the rows end (at run.json's manifest_bytes, ", false, 0, NULL},
    {"extra episode rows", {"set:episodes[1].prompt_tokens=1"}, "/manifest.csv:", false, 0, NULL},
    {"header", {"line:1=episode,pos,region,page,token_id,piece"}, "/manifest.csv:1: the header has no 'birth' column", false, 1, NULL},
    {"repeated column", {"line:1=episode,pos,region,page,birth,token_id,pos"}, "/manifest.csv:1:7: duplicate column name (first in column 2): \"pos\"", false, 1, NULL},
    {"birth", {"line:3=e1,1,user,0,0,1001,x"}, "/manifest.csv:3:5: 'birth' is 0, expected -1 (row 1 of episode \"e1\"", false, 3, "e1"},
    {"page", {"line:4=e1,2,user,0,-1,1002,x"}, "/manifest.csv:4:4: 'page' is 0, expected 1", false, 0, NULL},
    {"pos", {"line:4=e1,3,user,1,-1,1002,x"}, "/manifest.csv:4:2: 'pos' is 3, expected 2", false, 0, NULL},
    {"region", {"line:4=e1,2,User,1,-1,1002,x"}, "/manifest.csv:4:3: 'region' is not a valid region name", false, 0, NULL},
    {"token id", {"line:4=e1,2,user,1,-1,-5,x"}, "/manifest.csv:4:6: 'token_id' is negative", false, 0, NULL},
    {"vocabulary", {"line:4=e1,2,user,1,-1,100000,x"}, "/manifest.csv:4:6: 'token_id' 100000 is not below run.json's model.vocab", false, 0, NULL},
    {"fields", {"line:4=e1,2,user,1,-1"}, "/manifest.csv:4:6: 5 fields, but the header has 7", false, 0, NULL},
    {"number", {"line:4=e1,2x,user,1,-1,1002,x"}, "/manifest.csv:4:2: 'pos' is not an integer: \"2x\"", false, 0, NULL},
    {"quoting", {"line:4=e1,2,us\"er,1,-1,1002,x"}, "/manifest.csv:4:3: malformed quoting", false, 4, NULL},
    {"attn shape", {"npy:attn/e2=2x5"}, "/attn/e2.npy: shape [2, 5], but run.json and manifest.csv give episode \"e2\" 2 prompt tokens and 2 decode steps: expected [2, 4]", true, 0, NULL},
    {"prefill shape", {"npy:prefill/e1=4"}, "/prefill/e1.npy: shape [4], but run.json and manifest.csv give episode \"e1\" 3 prompt tokens and 3 decode steps: expected [3]", true, 0, NULL},
    {"attn missing", {"remove:attn/e2.npy"}, "/attn/e2.npy: No such file or directory", true, 0, NULL},
    {"attn truncated", {"truncate:attn/e1.npy=100"}, "/attn/e1.npy: ", true, 0, NULL},
    {"prefill truncated", {"truncate:prefill/e2.npy=130"}, "/prefill/e2.npy: truncated: the shape needs 8 bytes", true, 0, NULL},
};

static int apply(const char *dir, const char *op_text) {
  char op[256];
  snprintf(op, sizeof op, "%s", op_text);
  char *arg = strchr(op, ':') + 1, *eq = strchr(arg, '=');
  arg[-1] = '\0';
  if (!strcmp(op, "remove")) return test_truncate(dir, arg, -1);
  if (!strcmp(op, "drop")) return test_run_json_edit(dir, arg, NULL);
  *eq = '\0';
  if (!strcmp(op, "set")) return test_run_json_edit(dir, arg, eq + 1);
  if (!strcmp(op, "line")) return test_manifest_replace_line(dir, strtoul(arg, NULL, 10), eq + 1);
  if (!strcmp(op, "truncate")) return test_truncate(dir, arg, strtol(eq + 1, NULL, 10));
  if (!strcmp(op, "npy")) {
    char *slash = strchr(arg, '/');
    *slash = '\0';
    long shape[2] = {strtol(eq + 1, NULL, 10), 0};
    char *x = strchr(eq + 1, 'x');
    if (x) shape[1] = strtol(x + 1, NULL, 10);
    return test_write_npy(dir, arg, slash + 1, x ? 2 : 1, shape, 0.0f, 0);
  }
  return -1;
}

/* Reads the run up front and then every episode; returns the first error. */
static md_status read_all(const char *dir, md_error *err, bool *at_iteration) {
  md_run_info info;
  *at_iteration = false;
  md_status status = md_run_info_read(dir, &info, err);
  if (status != MD_OK) return status;
  *at_iteration = true;
  md_run_reader *reader = NULL;
  status = md_run_reader_open(&info, &reader, err);
  bool done = false;
  while (status == MD_OK && !done) {
    md_run_episode_data episode;
    status = md_run_reader_next(reader, &episode, &done, err);
  }
  md_run_reader_close(reader);
  md_run_info_free(&info);
  return status;
}

static void test_damages(void) {
  for (size_t i = 0; i < sizeof damages / sizeof damages[0]; i++) {
    const damage *d = &damages[i];
    const char *dir = fresh_run("damaged");
    for (size_t k = 0; k < 3 && d->ops[k]; k++)
      CHECK_MSG(apply(dir, d->ops[k]) == 0, "%s: cannot apply %s", d->name, d->ops[k]);
    md_error err = {0};
    bool at_iteration;
    md_status status = read_all(dir, &err, &at_iteration);
    CHECK_MSG(status != MD_OK, "%s: accepted", d->name);
    CHECK_MSG(at_iteration == d->at_iteration, "%s: found %s", d->name,
              at_iteration ? "while iterating" : "up front");
    CHECK_MSG(!strncmp(err.message, dir, strlen(dir)), "%s: message does not name the run: %s",
              d->name, err.message);
    if (d->message)
      CHECK_MSG(strstr(err.message, d->message) != NULL, "%s: message \"%s\" lacks \"%s\"",
                d->name, err.message, d->message);
    size_t file_len = strlen(err.file), tail = strlen("/manifest.csv");
    if (d->line)
      CHECK_MSG(err.line == d->line && file_len > tail &&
                    !strcmp(err.file + file_len - tail, "/manifest.csv"),
                "%s: error fields file \"%s\" line %zu", d->name, err.file, err.line);
    if (d->record)
      CHECK_MSG(!strcmp(err.record, d->record), "%s: error record \"%s\"", d->name, err.record);
  }
}

static void test_not_a_directory(void) {
  md_run_info info;
  md_error err = {0};
  char path[4300];
  snprintf(path, sizeof path, "%s/no-such-run", base_dir);
  CHECK(md_run_info_read(path, &info, &err) == MD_E_FORMAT);
  CHECK_MSG(strstr(err.message, "no-such-run: cannot open the run directory") != NULL, "%s",
            err.message);
  const char *dir = fresh_run("file");
  snprintf(path, sizeof path, "%s/run.json", dir);
  CHECK(md_run_info_read(path, &info, &err) == MD_E_FORMAT);
  CHECK_MSG(strstr(err.message, "run.json: not a directory") != NULL, "%s", err.message);
}

static void test_incomplete_and_empty(void) {
  const char *dir = fresh_run("incomplete");
  CHECK(test_run_json_edit(dir, "complete", "false") == 0);
  md_run_info info;
  md_error err = {0};
  CHECK_MSG(md_run_info_read(dir, &info, &err) == MD_OK, "%s", err.message);
  CHECK(!info.complete);
  md_run_info_free(&info);
  /* No episode finished yet: only the header. */
  CHECK(test_run_json_edit(dir, "episodes", "[]") == 0);
  CHECK(test_run_json_edit(dir, "manifest_bytes", "45") == 0);  /* the header line */
  CHECK_MSG(md_run_info_read(dir, &info, &err) == MD_OK, "%s", err.message);
  CHECK(info.n_episodes == 0 && info.n_regions == 0 && info.tokens == 0);
  md_run_info_free(&info);
}

int main(void) {
  const char *root = getenv("MD_BUILD_ROOT");
  snprintf(base_dir, sizeof base_dir, "%s/tests/run_dir/runs", root ? root : ".");
  test_run_write(base_dir, &(test_run){0, NULL, 1, true, NULL, NULL}); /* makes the parent */
  test_read_small();
  test_rows_after_manifest_bytes();
  test_damages();
  test_not_a_directory();
  test_incomplete_and_empty();
  return md_test_finish("run_dir");
}
