/* A collector run directory (io/formats/run_dir.h, io/formats/run_manifest.h, io/formats/npy.h):
 * md_run_info_read, then every episode through md_run_reader_next; then
 * the directory as a run set (io/formats/run_set.h) alone and given twice.
 *
 * The input holds the directory's files, separated by a line "--part--":
 * run.json, manifest.csv, then optionally the bytes of attn/<id>.npy and
 * of prefill/<id>.npy, written for every listed episode (up to 16).
 *
 * Invariants: a failure is MD_E_FORMAT, MD_E_IO or MD_E_UNSUPPORTED naming
 * the directory, with the info left empty; on success the episode ids are
 * distinct and usable as file names, the totals are the sums over the
 * episodes, the regions are valid and in md_region_name_compare order; each
 * episode the reader loads comes in order with P + S tokens whose births,
 * pages, regions and token ids follow the rules of io/formats/run_dir.h, and
 * arrays of the shapes stated; a "shard" read is within its limits. A set
 * of the directory alone has its totals and regions (a shard may be refused
 * as not its block of the plan it states); the directory given
 * twice is refused (MD_E_INVALID: a repeated shard or repeated episodes)
 * unless it has no episode. */
#include <dirent.h>
#include <sys/stat.h>

#include "fuzz_util.h"
#include "base/regions.h"
#include "io/formats/run_dir.h"
#include "io/formats/run_set.h"

#define SEPARATOR "\n--part--\n"
enum { MAX_PARTS = 4, MAX_NPY_EPISODES = 16 };

static char run_dir[4096];

static const uint8_t *find(const uint8_t *at, size_t size, const char *needle, size_t n) {
  for (size_t i = 0; i + n <= size; i++)
    if (at[i] == (uint8_t)needle[0] && memcmp(at + i, needle, n) == 0) return at + i;
  return NULL;
}

static void clear_sub(const char *sub) {
  char path[4300];
  snprintf(path, sizeof path, "%s/%s", run_dir, sub);
  DIR *d = opendir(path);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char file[4600];
    snprintf(file, sizeof file, "%s/%s", path, e->d_name);
    unlink(file);
  }
  closedir(d);
}

static void remove_run_dir(void) {
  clear_sub("attn");
  clear_sub("prefill");
  char path[4300];
  const char *names[] = {"run.json", "manifest.csv"};
  for (int i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "%s/%s", run_dir, names[i]);
    unlink(path);
  }
  snprintf(path, sizeof path, "%s/attn", run_dir);
  rmdir(path);
  snprintf(path, sizeof path, "%s/prefill", run_dir);
  rmdir(path);
  rmdir(run_dir);
}

static void make_run_dir(void) {
  if (run_dir[0]) return;
  snprintf(run_dir, sizeof run_dir, "%s/md-fuzz-run-XXXXXX", fuzz_tmpdir());
  FUZZ_CHECK(mkdtemp(run_dir) != NULL);
  char path[4300];
  snprintf(path, sizeof path, "%s/attn", run_dir);
  FUZZ_CHECK(mkdir(path, 0700) == 0);
  snprintf(path, sizeof path, "%s/prefill", run_dir);
  FUZZ_CHECK(mkdir(path, 0700) == 0);
  atexit(remove_run_dir);
}

static void write_part(const char *sub, const char *name, const uint8_t *data, size_t size) {
  char path[4600];
  if (sub) {
    snprintf(path, sizeof path, "%s/%s/%s.npy", run_dir, sub, name);
  } else {
    snprintf(path, sizeof path, "%s/%s", run_dir, name);
  }
  fuzz_write_file(path, data, size);
}

static void check_info(const md_run_info *info) {
  FUZZ_CHECK(info->dir && !strcmp(info->dir, run_dir));
  FUZZ_CHECK(info->model.name && info->model.config_sha256);
  FUZZ_CHECK(info->aggregation.page_size >= 1);
  FUZZ_CHECK(info->n_episodes == 0 || info->episodes);
  uint64_t prompt = 0, decode = 0;
  size_t max_s = 0, min_s = SIZE_MAX;
  for (size_t i = 0; i < info->n_episodes; i++) {
    const md_run_episode_meta *e = &info->episodes[i];
    FUZZ_CHECK(e->id && e->id[0] && strchr(e->id, '/') == NULL);
    FUZZ_CHECK(strcmp(e->id, ".") && strcmp(e->id, ".."));
    for (const char *c = e->id; *c; c++) FUZZ_CHECK((unsigned char)*c >= 0x20 && *c != 0x7f);
    for (size_t j = 0; j < i; j++) FUZZ_CHECK(strcmp(info->episodes[j].id, e->id) != 0);
    prompt += e->prompt_tokens;
    decode += e->decode_steps;
    if (e->decode_steps > max_s) max_s = e->decode_steps;
    if (e->decode_steps < min_s) min_s = e->decode_steps;
  }
  FUZZ_CHECK(info->prompt_tokens == prompt && info->decode_steps == decode);
  FUZZ_CHECK(info->tokens == prompt + decode);
  if (info->n_episodes > 0) {
    FUZZ_CHECK(info->max_decode_steps == max_s && info->min_decode_steps == min_s);
  }
  FUZZ_CHECK(info->n_regions == 0 || info->regions);
  for (size_t r = 0; r < info->n_regions; r++) {
    FUZZ_CHECK(fuzz_region_name(info->regions[r], strlen(info->regions[r])));
    FUZZ_CHECK(md_run_region_index(info, info->regions[r]) == r);
    if (r > 0) FUZZ_CHECK(md_region_name_compare(&info->regions[r - 1], &info->regions[r]) < 0);
  }
  FUZZ_CHECK(md_run_region_index(info, "no such region") == info->n_regions);
  if (info->shard.present) {
    FUZZ_CHECK(info->shard.count >= 1 && info->shard.count <= MD_RUN_SHARD_COUNT_MAX);
    FUZZ_CHECK(info->shard.index < info->shard.count);
    FUZZ_CHECK(info->shard.episodes <= info->shard.plan_episodes);
    FUZZ_CHECK(info->shard.plan_sha256 && strlen(info->shard.plan_sha256) == 64);
    if (info->complete) FUZZ_CHECK(info->n_episodes == info->shard.episodes);
  } else {
    FUZZ_CHECK(info->shard.plan_sha256 == NULL);
  }
}

static void check_set(const md_run_info *info) {
  const char *one[] = {run_dir}, *twice[] = {run_dir, run_dir};
  md_run_set_options options = {.allow_incomplete = true, .allow_partial = true};
  md_run_set set;
  md_error err = {0};
  md_status status = md_run_set_read(one, 1, &options, &set, &err);
  if (info->n_episodes == 0) {
    FUZZ_CHECK(status == MD_E_INVALID && set.n_runs == 0);
    return;
  }
  /* A shard is checked against the plan it states (run_set.h): one that
   * is not its block of it is refused, naming its directory. */
  if (info->shard.present && status == MD_E_INVALID) {
    FUZZ_CHECK(set.n_runs == 0 && strstr(err.message, run_dir));
    return;
  }
  FUZZ_CHECK(status == MD_OK);
  if (status != MD_OK) return;
  FUZZ_CHECK(set.n_runs == 1 && set.n_episodes == info->n_episodes && set.tokens == info->tokens);
  FUZZ_CHECK(set.n_regions == info->n_regions && set.n_traces == 1);
  for (size_t r = 0; r < set.n_regions && r < info->n_regions; r++)
    FUZZ_CHECK(!strcmp(set.regions[r], info->regions[r]));
  FUZZ_CHECK(set.shards_missing == (info->shard.present ? info->shard.count - 1 : 0));
  md_run_set_free(&set);
  status = md_run_set_read(twice, 2, &options, &set, &err);
  FUZZ_CHECK(status == MD_E_INVALID && set.n_runs == 0 && strstr(err.message, run_dir));
}

static void check_episodes(const md_run_info *info) {
  md_run_reader *reader = NULL;
  md_error err = {0};
  md_status status = md_run_reader_open(info, &reader, &err);
  if (status != MD_OK) {
    fuzz_check_failure(status, &err, FUZZ_ST(MD_E_FORMAT) | FUZZ_ST(MD_E_IO), run_dir);
    return;
  }
  size_t next = 0;
  for (;;) {
    md_run_episode_data ep;
    bool done = false;
    status = md_run_reader_next(reader, &ep, &done, &err);
    if (status != MD_OK) {
      /* An NPY dtype the NPY reader does not handle stays MD_E_UNSUPPORTED. */
      fuzz_check_failure(status, &err,
                         FUZZ_ST(MD_E_FORMAT) | FUZZ_ST(MD_E_IO) | FUZZ_ST(MD_E_UNSUPPORTED), run_dir);
      break;
    }
    if (done) {
      FUZZ_CHECK(next == info->n_episodes);
      break;
    }
    FUZZ_CHECK(ep.index == next && ep.meta == &info->episodes[next]);
    next++;
    size_t p = ep.meta->prompt_tokens, s = ep.meta->decode_steps;
    FUZZ_CHECK(ep.prompt_tokens == p && ep.steps == s && ep.tokens == p + s);
    FUZZ_CHECK(ep.tokens == 0 || (ep.region && ep.birth && ep.page && ep.token_id));
    for (size_t i = 0; i < ep.tokens; i++) {
      FUZZ_CHECK(ep.region[i] < info->n_regions);
      FUZZ_CHECK(ep.birth[i] == (i < p ? -1 : (int32_t)(i - p)));
      FUZZ_CHECK(ep.page[i] == (int64_t)i / info->aggregation.page_size);
      FUZZ_CHECK(ep.token_id[i] >= 0);
      if (info->model.vocab > 0) FUZZ_CHECK(ep.token_id[i] < info->model.vocab);
    }
    volatile float sink = 0;
    if (ep.steps * ep.tokens > 0) sink += ep.attn[0] + ep.attn[ep.steps * ep.tokens - 1];
    if (p > 0) sink += ep.prefill[0] + ep.prefill[p - 1];
    (void)sink;
  }
  md_run_reader_close(reader);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  make_run_dir();
  clear_sub("attn");
  clear_sub("prefill");
  const uint8_t *part[MAX_PARTS] = {0};
  size_t part_size[MAX_PARTS] = {0};
  size_t n_parts = 0;
  const uint8_t *at = data, *end = data + size;
  const size_t sep = strlen(SEPARATOR);
  while (n_parts < MAX_PARTS) {
    const uint8_t *cut = n_parts + 1 < MAX_PARTS && (size_t)(end - at) >= sep
                             ? find(at, (size_t)(end - at), SEPARATOR, sep)
                             : NULL;
    part[n_parts] = at;
    part_size[n_parts] = cut ? (size_t)(cut - at) : (size_t)(end - at);
    n_parts++;
    if (!cut) break;
    at = cut + sep;
  }
  write_part(NULL, "run.json", part[0], part_size[0]);
  write_part(NULL, "manifest.csv", n_parts > 1 ? part[1] : NULL, n_parts > 1 ? part_size[1] : 0);

  md_run_info info;
  md_error err = {0};
  md_status status = md_run_info_read(run_dir, &info, &err);
  if (status != MD_OK) {
    fuzz_check_failure(status, &err,
                       FUZZ_ST(MD_E_FORMAT) | FUZZ_ST(MD_E_IO) | FUZZ_ST(MD_E_UNSUPPORTED), run_dir);
    FUZZ_CHECK(info.n_episodes == 0 && info.episodes == NULL && info.regions == NULL);
    return 0;
  }
  check_info(&info);
  if (n_parts > 2 && info.n_episodes <= MAX_NPY_EPISODES) {
    for (size_t i = 0; i < info.n_episodes; i++) {
      write_part("attn", info.episodes[i].id, part[2], part_size[2]);
      write_part("prefill", info.episodes[i].id, n_parts > 3 ? part[3] : part[2],
                 n_parts > 3 ? part_size[3] : part_size[2]);
    }
  }
  check_episodes(&info);
  check_set(&info);
  md_run_info_free(&info);
  return 0;
}
