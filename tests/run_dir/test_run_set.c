/* io/run_set: several run directories read as one collection. The small
 * hand-made run (tests/run_dir/README.md) is split into its two episodes,
 * written as shards 0/2 and 1/2 of one plan (or as two unsharded runs);
 * read together, in any order given, they must give the whole run's
 * episodes in the whole run's order, region by region and value by value.
 * Then every refusal: runs that do not belong together, a repeated or
 * missing shard, a repeated episode, the shard fields of run.json, and
 * shards that are not the plan they state (swapped indices, an emptied
 * shard, an episode in another shard's block). */
#define _XOPEN_SOURCE 700 /* nftw */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/digest.h"
#include "io/formats/run_dir.h"
#include "io/formats/run_set.h"
#include "tests/run_dir/run_dir_writer.h"
#include "tests/test_util.h"

static char base_dir[4096];
static long page_size_override; /* 0: the small run's page size */
/* The small run's plan as collect digests it: "ID\tP\tS\n" per episode. */
static char plan_a[MD_SHA256_HEX + 2];
static const char plan_b[] = "\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\"";

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* Episode `first` .. first+n-1 of the small run in directory NAME; with
 * `count` > 0 as shard `index`/`count` of the plan `plan`. Returns the
 * path (one of four static buffers). */
static const char *part(const char *name, size_t first, size_t n, size_t index, size_t count,
                        const char *plan) {
  static char dirs[4][4200];
  static int next;
  char *dir = dirs[next++ % 4];
  snprintf(dir, sizeof dirs[0], "%s/%s", base_dir, name);
  nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  test_run run = *test_run_small();
  run.episodes += first;
  run.n_episodes = n;
  if (page_size_override) run.page_size = page_size_override;
  CHECK(test_run_write(dir, &run) == 0);
  if (count) {
    char shard[400];
    snprintf(shard, sizeof shard, "{\"index\": %zu, \"count\": %zu, \"episodes\": %zu, \"plan\": "
             "{\"episodes\": 2, \"tokens\": 10, \"sha256\": %s}}", index, count, n, plan);
    CHECK(test_run_json_edit(dir, "shard", shard) == 0);
  }
  /* The episodes' lines in the trace file, as in the whole run. */
  for (size_t e = 0; e < n; e++) {
    char key[64], line[32];
    snprintf(key, sizeof key, "episodes[%zu].line", e);
    snprintf(line, sizeof line, "%zu", first + e + 1);
    CHECK(test_run_json_edit(dir, key, line) == 0);
  }
  return dir;
}

static md_status read_set(const char *const *dirs, size_t n, md_run_set_options options,
                          md_run_set *set, md_error *err) {
  return md_run_set_read(dirs, n, &options, set, err);
}

/* The set's episodes, token by token, against the small run read whole. */
static void check_same_as_whole(const md_run_set *set) {
  char whole_dir[4200];
  snprintf(whole_dir, sizeof whole_dir, "%s/whole", base_dir);
  nftw(whole_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  CHECK(test_run_write(whole_dir, test_run_small()) == 0);
  md_run_info whole;
  md_error err = {0};
  CHECK_MSG(md_run_info_read(whole_dir, &whole, &err) == MD_OK, "%s", err.message);
  CHECK(set->n_regions == whole.n_regions);
  for (size_t i = 0; i < set->n_regions && i < whole.n_regions; i++)
    CHECK(!strcmp(set->regions[i], whole.regions[i]));
  CHECK(set->n_episodes == whole.n_episodes && set->tokens == whole.tokens);
  CHECK(set->prompt_tokens == whole.prompt_tokens && set->decode_steps == whole.decode_steps);
  CHECK(set->max_decode_steps == whole.max_decode_steps);
  CHECK(set->min_decode_steps == whole.min_decode_steps);

  md_run_reader *reader = NULL;
  md_run_set_reader *set_reader = NULL;
  CHECK(md_run_reader_open(&whole, &reader, &err) == MD_OK);
  CHECK(md_run_set_reader_open(set, &set_reader, &err) == MD_OK);
  size_t episodes = 0;
  for (;;) {
    md_run_episode_data a, b;
    const md_run_info *run = NULL;
    bool done_a = false, done_b = false;
    CHECK(md_run_reader_next(reader, &a, &done_a, &err) == MD_OK);
    CHECK_MSG(md_run_set_reader_next(set_reader, &b, &run, &done_b, &err) == MD_OK, "%s",
              err.message);
    CHECK(done_a == done_b);
    if (done_a || done_b) break;
    episodes++;
    CHECK(run != NULL && !strcmp(a.meta->id, b.meta->id));
    CHECK(a.tokens == b.tokens && a.steps == b.steps && a.prompt_tokens == b.prompt_tokens);
    if (a.tokens != b.tokens || a.steps != b.steps) break;
    for (size_t t = 0; t < a.tokens; t++) {
      CHECK(!strcmp(whole.regions[a.region[t]], set->regions[b.region[t]]));
      /* the writer's token ids are 1000 * (index in its run + 1) + pos */
      CHECK(a.birth[t] == b.birth[t] && a.page[t] == b.page[t]);
      CHECK(a.token_id[t] % 1000 == b.token_id[t] % 1000);
    }
    CHECK(!memcmp(a.attn, b.attn, a.steps * a.tokens * sizeof *a.attn));
    CHECK(!memcmp(a.prefill, b.prefill, a.prompt_tokens * sizeof *a.prefill));
  }
  CHECK(episodes == 2);
  md_run_set_reader_close(set_reader);
  md_run_reader_close(reader);
  md_run_info_free(&whole);
}

static void test_shards_in_any_order(void) {
  const char *second = part("s1", 1, 1, 1, 2, plan_a);
  const char *first = part("s0", 0, 1, 0, 2, plan_a);
  const char *dirs[] = {second, first}; /* given backwards */
  md_run_set set;
  md_error err = {0};
  CHECK_MSG(read_set(dirs, 2, (md_run_set_options){0}, &set, &err) == MD_OK, "%s", err.message);
  CHECK(set.n_runs == 2 && !strcmp(set.runs[0].dir, first) && !strcmp(set.runs[1].dir, second));
  CHECK(set.complete && set.shards_missing == 0 && !set.devices_differ);
  CHECK(set.n_traces == 1); /* both shards read the same file */
  check_same_as_whole(&set);
  md_run_set_free(&set);
}

static void test_pooled_runs(void) {
  /* Unsharded runs keep the order given; their trace files are listed. */
  const char *a = part("p0", 0, 1, 0, 0, NULL);
  const char *b = part("p1", 1, 1, 0, 0, NULL);
  CHECK(test_run_json_edit(b, "traces", "{\"path\": \"traces/other.jsonl\", \"sha256\": \"cafe\"}") == 0);
  const char *dirs[] = {a, b};
  md_run_set set;
  md_error err = {0};
  CHECK_MSG(read_set(dirs, 2, (md_run_set_options){0}, &set, &err) == MD_OK, "%s", err.message);
  CHECK(set.n_traces == 2);
  if (set.n_traces == 2) CHECK(!strcmp(set.traces_path[1], "traces/other.jsonl"));
  CHECK(!set.devices_differ);
  check_same_as_whole(&set);
  md_run_set_free(&set);
  /* Another thread count (or device) is read, and noted. */
  CHECK(test_run_json_edit(b, "threads", "4") == 0);
  CHECK(read_set(dirs, 2, (md_run_set_options){0}, &set, &err) == MD_OK);
  CHECK(set.devices_differ);
  md_run_set_free(&set);
  CHECK(test_run_json_edit(b, "threads", "1") == 0);
  CHECK(test_run_json_edit(b, "device", "\"cuda:0\"") == 0);
  CHECK(read_set(dirs, 2, (md_run_set_options){0}, &set, &err) == MD_OK);
  CHECK(set.devices_differ);
  md_run_set_free(&set);
  /* The same run twice counts its episodes twice: refused. */
  const char *twice[] = {a, a};
  CHECK(read_set(twice, 2, (md_run_set_options){0}, &set, &err) == MD_E_INVALID);
  CHECK_MSG(strstr(err.message, "episode \"e1\" is in") != NULL, "%s", err.message);
}

static void expect_refusal(const char *const *dirs, size_t n, md_run_set_options options,
                           const char *text) {
  md_run_set set;
  md_error err = {0};
  md_status s = read_set(dirs, n, options, &set, &err);
  CHECK_MSG(s == MD_E_INVALID, "status %d, expected a refusal with \"%s\"", (int)s, text);
  CHECK_MSG(strstr(err.message, text) != NULL, "\"%s\" not in: %s", text, err.message);
  if (s == MD_OK) md_run_set_free(&set);
  CHECK(set.n_runs == 0 && set.runs == NULL);
}

static void test_shard_refusals(void) {
  const char *s0 = part("r0", 0, 1, 0, 2, plan_a);
  const char *s1 = part("r1", 1, 1, 1, 2, plan_a);
  const char *only[] = {s1};
  expect_refusal(only, 1, (md_run_set_options){0}, "1 of the 2 shards of its collection");
  expect_refusal(only, 1, (md_run_set_options){0}, "(shard 0/2)");
  /* --allow-partial: the shard given, and a note of what is missing. */
  md_run_set set;
  md_error err = {0};
  CHECK(read_set(only, 1, (md_run_set_options){.allow_partial = true}, &set, &err) == MD_OK);
  CHECK(set.shards_missing == 1 && !set.complete && set.n_episodes == 1);
  CHECK(strstr(set.missing_list, "shard 0/2") != NULL);
  md_run_set_free(&set);

  const char *repeated[] = {s0, s1, s0};
  expect_refusal(repeated, 3, (md_run_set_options){0}, "are both shard 0/2");

  const char *s1_of_3 = part("r2", 1, 1, 1, 3, plan_a);
  const char *split[] = {s0, s1_of_3};
  expect_refusal(split, 2, (md_run_set_options){0}, "split in different ways (2 and 3 shards)");

  /* Another plan is another collection: here with its own shard missing. */
  const char *other = part("r3", 1, 1, 1, 2, plan_b);
  const char *two_plans[] = {s0, s1, other};
  expect_refusal(two_plans, 3, (md_run_set_options){0}, "(the plan bbbbbbbb)");

  CHECK(test_run_json_edit(s1, "traces.sha256", "\"f00d\"") == 0);
  const char *traces[] = {s0, s1};
  expect_refusal(traces, 2, (md_run_set_options){0}, "shards of one plan over different trace files");
}

static void test_not_together(void) {
  const struct {
    const char *key, *value, *text;
  } cases[] = {
      {"model.config_sha256", "\"ffff\"", "has the model whose config.json has sha256 ffff"},
      {"model.dtype", "\"F32\"", "has weights in F32"},
      {"tokenizer.sha256", "\"d00d\"", "has a tokenizer.json with sha256 d00d"},
      {"aggregation.layers", "[1, 2]", "has captured layers from 1"},
      {"aggregation.heads", "\"max\"", "has heads aggregated by max"},
      {NULL, NULL, "has page size 4"}, /* written with pages of 4 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *a = part("t0", 0, 1, 0, 0, NULL);
    page_size_override = cases[i].key ? 0 : 4;
    const char *b = part("t1", 1, 1, 0, 0, NULL);
    page_size_override = 0;
    if (cases[i].key) CHECK(test_run_json_edit(b, cases[i].key, cases[i].value) == 0);
    const char *dirs[] = {a, b};
    expect_refusal(dirs, 2, (md_run_set_options){0}, "do not belong together");
    expect_refusal(dirs, 2, (md_run_set_options){0}, cases[i].text);
  }
  /* The identity the caller names. */
  const char *a = part("t2", 0, 2, 0, 0, NULL);
  const char *dirs[] = {a};
  expect_refusal(dirs, 1, (md_run_set_options){.traces_sha256 = "beef00"},
                 "not the given traces' beef00");
  expect_refusal(dirs, 1, (md_run_set_options){.config_sha256 = "abcd"},
                 "not the given model's abcd");
  md_run_set set;
  md_error err = {0};
  CHECK(read_set(dirs, 1, (md_run_set_options){.traces_sha256 = "beef"}, &set, &err) == MD_OK);
  md_run_set_free(&set);
}

static void test_incomplete(void) {
  const char *a = part("i0", 0, 1, 0, 0, NULL);
  const char *b = part("i1", 1, 1, 0, 0, NULL);
  CHECK(test_run_json_edit(b, "complete", "false") == 0);
  const char *dirs[] = {a, b};
  expect_refusal(dirs, 2, (md_run_set_options){0}, "i1/run.json: the collection is not complete");
  md_run_set set;
  md_error err = {0};
  CHECK(read_set(dirs, 2, (md_run_set_options){.allow_incomplete = true}, &set, &err) == MD_OK);
  CHECK(!set.complete && set.n_episodes == 2);
  md_run_set_free(&set);
  /* An empty shard is a complete run; a set of nothing but empty ones is
   * not the plan of two episodes it states. */
  const char *empty = part("i2", 0, 0, 0, 1, plan_a);
  const char *none[] = {empty};
  expect_refusal(none, 1, (md_run_set_options){0}, "a shard lacks episodes of its block");
}

/* A shard whose run.json was edited to list none of its episodes. */
static void empty_out(const char *dir) {
  CHECK(test_run_json_edit(dir, "episodes", "[]") == 0);
  CHECK(test_run_json_edit(dir, "shard.episodes", "0") == 0);
  CHECK(test_run_json_edit(dir, "manifest_bytes", "45") == 0); /* the header alone */
}

/* Shards that each read well alone but are not the plan they state
 * (memdecay-calibrate(1), SHARDS). */
static void test_shards_against_plan(void) {
  /* Indices swapped: e2 as shard 0, e1 as shard 1. */
  const char *w0 = part("w0", 0, 1, 1, 2, plan_a);
  const char *w1 = part("w1", 1, 1, 0, 2, plan_a);
  const char *swapped[] = {w0, w1};
  expect_refusal(swapped, 2, (md_run_set_options){0},
                 "w0/run.json: shard 1/2 lists episode \"e1\" (trace line 1) after episode "
                 "\"e2\" (line 2)");
  /* Without the trace lines the split happens to hold (e2 is the lighter
   * episode), but the plan's digest does not. */
  CHECK(test_run_json_edit(w0, "episodes[0].line", NULL) == 0);
  CHECK(test_run_json_edit(w1, "episodes[0].line", NULL) == 0);
  expect_refusal(swapped, 2, (md_run_set_options){0}, "read in shard order, are not the plan");
  expect_refusal(swapped, 2, (md_run_set_options){0}, "w1/run.json (shard 0/2: 1 episodes)");

  /* Shard 1 edited to list nothing. */
  const char *e0 = part("e0", 0, 1, 0, 2, plan_a);
  const char *e1 = part("e1", 1, 1, 1, 2, plan_a);
  empty_out(e1);
  const char *emptied[] = {e0, e1};
  expect_refusal(emptied, 2, (md_run_set_options){0},
                 "the shards of plan ");
  expect_refusal(emptied, 2, (md_run_set_options){0},
                 "list 1 episodes of 6 tokens, the plan has 2 of 10: a shard lacks episodes of "
                 "its block");
  expect_refusal(emptied, 2, (md_run_set_options){0}, "e1/run.json (shard 1/2: 0 episodes)");
  /* Shard 0 edited to list nothing: shard 1's episode is then shard 0's. */
  part("e1", 1, 1, 1, 2, plan_a);
  empty_out(e0);
  expect_refusal(emptied, 2, (md_run_set_options){0},
                 "e1/run.json: episode \"e2\" belongs to shard 0/2 by the plan's split");

  /* e2 listed by shard 0, whose block is e1 alone. */
  const char *x0 = part("x0", 0, 2, 0, 2, plan_a);
  const char *x1 = part("x1", 0, 0, 1, 2, plan_a);
  const char *moved[] = {x0, x1};
  expect_refusal(moved, 2, (md_run_set_options){0},
                 "x0/run.json: episode \"e2\" belongs to shard 1/2 by the plan's split");
  /* ... and so it is with shard 1 missing and --allow-partial: the
   * tokens before it are known. */
  const char *x0_only[] = {x0};
  expect_refusal(x0_only, 1, (md_run_set_options){.allow_partial = true},
                 "episode \"e2\" belongs to shard 1/2");
}

/* run.json's "shard" as the reader validates it. */
static void test_shard_fields(void) {
  const struct {
    const char *key, *value, *text;
  } cases[] = {
      {"shard.index", "2", "shard.index: expected an index below shard.count"},
      {"shard.count", "0", "shard.count"},
      {"shard.count", "70000", "a shard count from 1 to 65536"},
      {"shard.episodes", "3", "shard.episodes: expected at most shard.plan.episodes"},
      {"shard.plan.sha256", "\"ABC\"", "64 lower-case hex digits"},
      {"shard.plan", "7", "shard.plan"},
      {"shard", "[]", "shard"},
      {"shard.episodes", "2", "the shard is complete with 1 episodes listed, not the 2"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *dir = part("f0", 0, 1, 0, 2, plan_a);
    CHECK(test_run_json_edit(dir, cases[i].key, cases[i].value) == 0);
    md_run_info info;
    md_error err = {0};
    md_status s = md_run_info_read(dir, &info, &err);
    CHECK_MSG(s == MD_E_FORMAT, "%s=%s: status %d", cases[i].key, cases[i].value, (int)s);
    CHECK_MSG(strstr(err.message, cases[i].text) != NULL, "\"%s\" not in: %s", cases[i].text,
              err.message);
    CHECK_MSG(strstr(err.message, "run.json") != NULL, "%s", err.message);
    if (s == MD_OK) md_run_info_free(&info);
  }
  const char *dir = part("f1", 0, 1, 1, 2, plan_a);
  md_run_info info;
  md_error err = {0};
  CHECK(md_run_info_read(dir, &info, &err) == MD_OK);
  CHECK(info.shard.present && info.shard.index == 1 && info.shard.count == 2);
  CHECK(info.shard.episodes == 1 && info.shard.plan_episodes == 2 && info.shard.plan_tokens == 10);
  md_run_info_free(&info);
}

int main(void) {
  const char *root = getenv("MD_BUILD_ROOT");
  snprintf(base_dir, sizeof base_dir, "%s/tests/run_dir/sets", root ? root : ".");
  static const char plan_text[] = "e1\t3\t3\ne2\t2\t2\n";
  char digest[MD_SHA256_HEX];
  md_sha256_bytes(plan_text, strlen(plan_text), digest);
  snprintf(plan_a, sizeof plan_a, "\"%s\"", digest);
  test_run_write(base_dir, &(test_run){0, NULL, 1, true, NULL, NULL}); /* makes the parent */
  test_shards_in_any_order();
  test_pooled_runs();
  test_shard_refusals();
  test_not_together();
  test_incomplete();
  test_shard_fields();
  test_shards_against_plan();
  return md_test_finish("run_set");
}
