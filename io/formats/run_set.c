#include "io/formats/run_set.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/digest.h"
#include "base/regions.h"

/* ---- what belongs together ----------------------------------------------------- */

static bool same_text(const char *a, const char *b) { return a && b && !strcmp(a, b); }

static md_status mismatch(const md_run_info *first, const md_run_info *other, const char *a,
                          const char *b, md_error *err) {
  return md_fail(err, MD_E_INVALID, "%s and %s do not belong together: %s %s, %s %s: extract "
                 "pools runs of one model with the same capture settings only", first->dir,
                 other->dir, first->dir, a, other->dir, b);
}

/* "has a tokenizer.json with sha256 ..." for each side of the message. */
static md_status compare_text(const md_run_info *first, const md_run_info *other,
                              const char *what, const char *a, const char *b, bool required,
                              md_error *err) {
  if (!a || !b) {
    if (!required) return MD_OK;
    a = a ? a : "(not stated)";
    b = b ? b : "(not stated)";
  } else if (!strcmp(a, b)) {
    return MD_OK;
  }
  char left[200], right[200];
  snprintf(left, sizeof left, "has %s %.120s", what, a);
  snprintf(right, sizeof right, "has %s %.120s", what, b);
  return mismatch(first, other, left, right, err);
}

static md_status compare_number(const md_run_info *first, const md_run_info *other,
                                const char *what, long a, long b, md_error *err) {
  if (a == b) return MD_OK;
  char left[120], right[120];
  snprintf(left, sizeof left, "has %s %ld", what, a);
  snprintf(right, sizeof right, "has %s %ld", what, b);
  return mismatch(first, other, left, right, err);
}

static md_status check_together(const md_run_info *a, const md_run_info *b, md_error *err) {
  md_status s = compare_text(a, b, "the model whose config.json has sha256", a->model.config_sha256,
                             b->model.config_sha256, true, err);
  if (s == MD_OK) s = compare_text(a, b, "weights in", a->model.dtype, b->model.dtype, false, err);
  if (s == MD_OK)
    s = compare_text(a, b, "a tokenizer.json with sha256", a->tokenizer.sha256, b->tokenizer.sha256,
                     false, err);
  if (s == MD_OK)
    s = compare_number(a, b, "captured layers from", a->aggregation.layers[0],
                       b->aggregation.layers[0], err);
  if (s == MD_OK)
    s = compare_number(a, b, "captured layers to", a->aggregation.layers[1],
                       b->aggregation.layers[1], err);
  if (s == MD_OK)
    s = compare_text(a, b, "heads aggregated by", a->aggregation.heads, b->aggregation.heads, false,
                     err);
  if (s == MD_OK)
    s = compare_number(a, b, "page size", a->aggregation.page_size, b->aggregation.page_size, err);
  return s;
}

/* ---- collections and their order ------------------------------------------------ */

/* A run's place in the merge: its collection (the position of the
 * collection's first directory on the command line; an unsharded run is a
 * collection of its own) and its shard index. */
typedef struct placed {
  size_t given;         /* index on the command line */
  size_t collection;    /* `given` of the collection's first directory */
  const md_run_info *info;
} placed;

static int by_plan(const void *a, const void *b) {
  const placed *x = a, *y = b;
  int c = strcmp(x->info->shard.plan_sha256, y->info->shard.plan_sha256);
  return c ? c : (x->given < y->given ? -1 : x->given > y->given);
}

static int by_merge_order(const void *a, const void *b) {
  const placed *x = a, *y = b;
  if (x->collection != y->collection) return x->collection < y->collection ? -1 : 1;
  size_t i = x->info->shard.index, j = y->info->shard.index;
  if (i != j) return i < j ? -1 : 1;
  return x->given < y->given ? -1 : x->given > y->given;
}

/* Shards with the same plan: one collection, split one way, over one file. */
static md_status group_shards(placed *shards, size_t n, md_error *err) {
  qsort(shards, n, sizeof *shards, by_plan);
  for (size_t k = 0; k < n; k++) {
    bool starts = k == 0 || strcmp(shards[k - 1].info->shard.plan_sha256,
                                   shards[k].info->shard.plan_sha256) != 0;
    shards[k].collection = starts ? shards[k].given : shards[k - 1].collection;
    if (starts) continue;
    const md_run_info *a = shards[k - 1].info, *b = shards[k].info;
    if (a->shard.count != b->shard.count)
      return md_fail(err, MD_E_INVALID, "%s and %s are shards of the same collection split in "
                     "different ways (%zu and %zu shards): use the shards of one split", a->dir,
                     b->dir, a->shard.count, b->shard.count);
    if (!same_text(a->traces.sha256, b->traces.sha256))
      return md_fail(err, MD_E_INVALID, "%s and %s are shards of one plan over different trace "
                     "files (sha256 %.12s and %.12s)", a->dir, b->dir,
                     a->traces.sha256 ? a->traces.sha256 : "?",
                     b->traces.sha256 ? b->traces.sha256 : "?");
  }
  return MD_OK;
}

static void note_missing(md_run_set *set, const md_run_info *shard, size_t index) {
  set->shards_missing++;
  size_t used = strlen(set->missing_list);
  if (used + 1 >= sizeof set->missing_list) return;
  snprintf(set->missing_list + used, sizeof set->missing_list - used, "%sshard %zu/%zu", used ? ", " : "",
           index, shard->shard.count);
}

/* "DIR1/run.json (shard 0/2: 3 episodes), DIR2/run.json (...)" cut to fit. */
static void list_shards(const placed *order, size_t n, char *text, size_t size) {
  text[0] = '\0';
  for (size_t k = 0; k < n; k++) {
    const md_run_info *info = order[k].info;
    size_t used = strlen(text);
    if (used + 1 >= size) return;
    snprintf(text + used, size - used, "%s%s/run.json (shard %zu/%zu: %zu episodes)",
             k ? ", " : "", info->dir, info->shard.index, info->shard.count, info->n_episodes);
  }
}

/* The shards of one collection against the plan they state: the plan is the
 * unsharded run's list of episodes (id, P, S) in trace order, which collect
 * computed from the traces and committed to in plan.sha256, and the split
 * is shard.h's rule over it. A shard's word is taken for nothing: its
 * episodes must be in trace order after those of the shards before it
 * (trace lines), each must be of its block by the rule wherever the
 * shards before it are all given and complete (the tokens before it are
 * then known), and when every shard is given and complete their episodes,
 * concatenated in shard order, must be the plan itself: the same count and
 * tokens, and the same digest. So swapped indices, an emptied shard, an
 * episode moved into another shard or left out, and one listed twice are
 * refused. `order` holds the collection in index order, each index once. */
static md_status check_plan(const placed *order, size_t n, md_error *err) {
  const md_run_info *first = order[0].info;
  size_t count = first->shard.count;
  uint64_t total = first->shard.plan_tokens;
  for (size_t k = 1; k < n; k++) {
    const md_run_info *b = order[k].info;
    if (b->shard.plan_episodes != first->shard.plan_episodes || b->shard.plan_tokens != total)
      return md_fail(err, MD_E_INVALID, "%s/run.json and %s/run.json state the plan %.8s with "
                     "different sizes (%zu episodes of %llu tokens, %zu of %llu): one of them "
                     "was edited", first->dir, b->dir, first->shard.plan_sha256,
                     first->shard.plan_episodes, (unsigned long long)total,
                     b->shard.plan_episodes, (unsigned long long)b->shard.plan_tokens);
  }
  if (total > UINT64_MAX / 2 / count)
    return md_fail(err, MD_E_INVALID, "%s/run.json: shard.plan.tokens %llu is too large to split "
                   "into %zu shards", first->dir, (unsigned long long)total, count);
  /* Trace order across the shards (lines are 0 where run.json lacks them). */
  const md_run_info *last_run = NULL;
  const md_run_episode_meta *last = NULL;
  for (size_t k = 0; k < n; k++) {
    const md_run_info *info = order[k].info;
    for (size_t e = 0; e < info->n_episodes; e++) {
      const md_run_episode_meta *m = &info->episodes[e];
      if (m->line <= 0) continue;
      if (last && m->line <= last->line)
        return md_fail(err, MD_E_INVALID, "%s/run.json: shard %zu/%zu lists episode \"%s\" (trace "
                       "line %ld) after episode \"%s\" (line %ld) of %s: the shards of a plan hold "
                       "its episodes in trace order, shard 0 first (were the shards' indices "
                       "changed?)", info->dir, info->shard.index, count, m->id, m->line, last->id,
                       last->line, last_run == info ? "the same shard" : last_run->dir);
      last = m;
      last_run = info;
    }
  }
  /* The rule, over the tokens before each episode while they are known. */
  bool known = true, whole = n == count;
  uint64_t before = 0;
  size_t position = 0, expected = 0;
  for (size_t k = 0; k < n; k++) {
    const md_run_info *info = order[k].info;
    if (info->shard.index != expected) known = false; /* a shard before it is missing */
    for (size_t e = 0; e < info->n_episodes; e++) {
      const md_run_episode_meta *m = &info->episodes[e];
      uint64_t weight = (uint64_t)m->prompt_tokens + m->decode_steps;
      if (weight > total - before)
        return md_fail(err, MD_E_INVALID, "%s/run.json: with episode \"%s\" the shards of plan %.8s "
                       "list more tokens than the plan's %llu: an episode is listed twice or "
                       "belongs to another plan", info->dir, m->id, first->shard.plan_sha256,
                       (unsigned long long)total);
      size_t owner = md_run_shard_owner(before, weight, total, position,
                                        first->shard.plan_episodes, count);
      if (known && owner != info->shard.index)
        return md_fail(err, MD_E_INVALID, "%s/run.json: episode \"%s\" belongs to shard %zu/%zu by "
                       "the plan's split (tokens %llu to %llu of %llu, after the episodes the "
                       "shards before it list), not to this shard %zu/%zu: a shard holds exactly "
                       "its block of the plan", info->dir, m->id, owner, count,
                       (unsigned long long)before, (unsigned long long)(before + weight),
                       (unsigned long long)total, info->shard.index, count);
      before += weight;
      position++;
    }
    if (!info->complete) known = whole = false;
    expected = info->shard.index + 1;
  }
  if (!whole) return MD_OK;
  char shards[1024];
  list_shards(order, n, shards, sizeof shards);
  if (position != first->shard.plan_episodes || before != total)
    return md_fail(err, MD_E_INVALID, "the shards of plan %.8s list %zu episodes of %llu tokens, "
                   "the plan has %zu of %llu: a shard lacks episodes of its block (%s)",
                   first->shard.plan_sha256, position, (unsigned long long)before,
                   first->shard.plan_episodes, (unsigned long long)total, shards);
  size_t size = 1;
  for (size_t k = 0; k < n; k++)
    for (size_t e = 0; e < order[k].info->n_episodes; e++)
      size += strlen(order[k].info->episodes[e].id) + 48;
  char *text = malloc(size), *at = text;
  if (!text) return md_fail(err, MD_E_NOMEM, "out of memory");
  /* The plan's lines as collect digests them (memdecay-run(5), shard.plan). */
  for (size_t k = 0; k < n; k++)
    for (size_t e = 0; e < order[k].info->n_episodes; e++) {
      const md_run_episode_meta *m = &order[k].info->episodes[e];
      at += snprintf(at, size - (size_t)(at - text), "%s\t%zu\t%zu\n", m->id, m->prompt_tokens,
                     m->decode_steps);
    }
  char digest[MD_SHA256_HEX];
  md_sha256_bytes(text, (size_t)(at - text), digest);
  free(text);
  if (strcmp(digest, first->shard.plan_sha256) != 0)
    return md_fail(err, MD_E_INVALID, "the shards of plan %.8s, read in shard order, are not the "
                   "plan they state: their episodes' SHA-256 is %.8s, the plan's %.8s (an "
                   "episode's place, id or size differs from what collect planned from the "
                   "traces): %s", first->shard.plan_sha256, digest, first->shard.plan_sha256,
                   shards);
  return MD_OK;
}

/* One sharded collection, in index order at order[0 .. n): refuses a
 * repeated index and notes (or refuses) the missing ones. */
static md_status check_shards(md_run_set *set, const placed *order, size_t n,
                              const md_run_set_options *options, md_error *err) {
  const md_run_info *first = order[0].info;
  for (size_t k = 1; k < n; k++) {
    const md_run_info *a = order[k - 1].info, *b = order[k].info;
    if (a->shard.index == b->shard.index)
      return md_fail(err, MD_E_INVALID, "%s and %s are both shard %zu/%zu of the same "
                     "collection: give each shard once", a->dir, b->dir, a->shard.index,
                     a->shard.count);
  }
  size_t before = set->shards_missing, k = 0;
  for (size_t index = 0; index < first->shard.count; index++) {
    if (k < n && order[k].info->shard.index == index) k++;
    else note_missing(set, first, index);
  }
  size_t missing = set->shards_missing - before;
  if (missing && !options->allow_partial)
    return md_fail(err, MD_E_INVALID, "%s: %zu of the %zu shards of its collection (the plan "
                   "%.8s) %s missing (%s): add their run directories, or pass --allow-partial to "
                   "use the shards given", first->dir, missing, first->shard.count,
                   first->shard.plan_sha256, missing == 1 ? "is" : "are", set->missing_list);
  return check_plan(order, n, err);
}

/* Moves the given runs into set->runs in merge order. */
static md_status order_runs(md_run_set *set, md_run_info *given, size_t n,
                            const md_run_set_options *options, md_error *err) {
  placed *order = calloc(n, sizeof *order), *shards = calloc(n, sizeof *shards);
  set->runs = calloc(n, sizeof *set->runs);
  md_status s = !order || !shards || !set->runs ? md_fail(err, MD_E_NOMEM, "out of memory") : MD_OK;
  size_t n_shards = 0;
  for (size_t i = 0; s == MD_OK && i < n; i++) {
    order[i] = (placed){.given = i, .collection = i, .info = &given[i]};
    if (given[i].shard.present) shards[n_shards++] = order[i];
  }
  if (s == MD_OK) s = group_shards(shards, n_shards, err);
  for (size_t k = 0; s == MD_OK && k < n_shards; k++) order[shards[k].given] = shards[k];
  if (s == MD_OK) qsort(order, n, sizeof *order, by_merge_order);
  for (size_t k = 0; s == MD_OK && k < n;) {
    size_t end = k + 1;
    while (end < n && order[end].collection == order[k].collection) end++;
    if (order[k].info->shard.present) s = check_shards(set, order + k, end - k, options, err);
    /* Skips are the plan's: every shard of a collection lists the same. */
    set->n_skipped += order[k].info->n_skipped;
    k = end;
  }
  for (size_t k = 0; s == MD_OK && k < n; k++) {
    set->runs[set->n_runs++] = given[order[k].given];
    memset(&given[order[k].given], 0, sizeof given[0]);
  }
  free(order);
  free(shards);
  return s;
}

/* ---- episodes, regions, totals --------------------------------------------------- */

typedef struct episode_ref {
  const char *id;
  size_t run;
} episode_ref;

static int by_id(const void *a, const void *b) {
  const episode_ref *x = a, *y = b;
  int c = strcmp(x->id, y->id);
  return c ? c : (x->run < y->run ? -1 : x->run > y->run);
}

static md_status check_episode_ids(const md_run_set *set, md_error *err) {
  size_t n = 0;
  for (size_t r = 0; r < set->n_runs; r++) n += set->runs[r].n_episodes;
  episode_ref *refs = malloc((n + 1) * sizeof *refs);
  if (!refs) return md_fail(err, MD_E_NOMEM, "out of memory");
  size_t k = 0;
  for (size_t r = 0; r < set->n_runs; r++)
    for (size_t e = 0; e < set->runs[r].n_episodes; e++)
      refs[k++] = (episode_ref){.id = set->runs[r].episodes[e].id, .run = r};
  qsort(refs, n, sizeof *refs, by_id);
  md_status s = MD_OK;
  for (size_t i = 1; i < n && s == MD_OK; i++)
    if (!strcmp(refs[i - 1].id, refs[i].id))
      s = md_fail(err, MD_E_INVALID, "episode \"%s\" is in %s and in %s: a collection would count "
                  "it twice (were the same traces collected twice?)", refs[i].id,
                  set->runs[refs[i - 1].run].dir, set->runs[refs[i].run].dir);
  free(refs);
  return s;
}

static int by_region(const void *a, const void *b) { return md_region_name_compare(a, b); }

static md_status merge_regions(md_run_set *set, md_error *err) {
  size_t n = 0;
  for (size_t r = 0; r < set->n_runs; r++) n += set->runs[r].n_regions;
  const char **names = malloc((n + 1) * sizeof *names);
  set->regions = calloc(n + 1, sizeof *set->regions);
  set->region_map = calloc(set->n_runs, sizeof *set->region_map);
  md_status s = !names || !set->regions || !set->region_map
                    ? md_fail(err, MD_E_NOMEM, "out of memory")
                    : MD_OK;
  size_t k = 0;
  for (size_t r = 0; s == MD_OK && r < set->n_runs; r++)
    for (size_t i = 0; i < set->runs[r].n_regions; i++) names[k++] = set->runs[r].regions[i];
  if (s == MD_OK) qsort(names, n, sizeof *names, by_region);
  for (size_t i = 0; s == MD_OK && i < n; i++) {
    if (set->n_regions && !strcmp(set->regions[set->n_regions - 1], names[i])) continue;
    if (!(set->regions[set->n_regions] = strdup(names[i]))) s = md_fail(err, MD_E_NOMEM, "out of memory");
    else set->n_regions++;
  }
  for (size_t r = 0; s == MD_OK && r < set->n_runs; r++) {
    const md_run_info *run = &set->runs[r];
    set->region_map[r] = malloc((run->n_regions + 1) * sizeof **set->region_map);
    if (!set->region_map[r]) {
      s = md_fail(err, MD_E_NOMEM, "out of memory");
      break;
    }
    for (size_t i = 0; i < run->n_regions; i++)
      for (size_t j = 0; j < set->n_regions; j++)
        if (!strcmp(run->regions[i], set->regions[j])) set->region_map[r][i] = (uint32_t)j;
  }
  free(names);
  return s;
}

static md_status list_traces(md_run_set *set, md_error *err) {
  set->traces_path = calloc(set->n_runs, sizeof *set->traces_path);
  set->traces_sha256 = calloc(set->n_runs, sizeof *set->traces_sha256);
  if (!set->traces_path || !set->traces_sha256) return md_fail(err, MD_E_NOMEM, "out of memory");
  for (size_t r = 0; r < set->n_runs; r++) {
    const md_run_info *run = &set->runs[r];
    bool seen = false;
    for (size_t t = 0; t < set->n_traces && !seen; t++)
      seen = run->traces.sha256 ? same_text(set->traces_sha256[t], run->traces.sha256)
                                : same_text(set->traces_path[t], run->traces.path);
    if (seen) continue;
    set->traces_path[set->n_traces] = run->traces.path;
    set->traces_sha256[set->n_traces] = run->traces.sha256;
    set->n_traces++;
  }
  return MD_OK;
}

static void totals(md_run_set *set) {
  set->complete = set->shards_missing == 0;
  set->min_decode_steps = SIZE_MAX;
  for (size_t r = 0; r < set->n_runs; r++) {
    const md_run_info *run = &set->runs[r];
    set->complete = set->complete && run->complete;
    /* The CPU's sums depend on how they are split over threads. */
    if (r && (!same_text(run->device, set->runs[0].device) || run->threads != set->runs[0].threads))
      set->devices_differ = true;
    set->n_episodes += run->n_episodes;
    set->tokens += run->tokens;
    set->prompt_tokens += run->prompt_tokens;
    set->decode_steps += run->decode_steps;
    if (run->n_episodes && run->max_decode_steps > set->max_decode_steps)
      set->max_decode_steps = run->max_decode_steps;
    if (run->n_episodes && run->min_decode_steps < set->min_decode_steps)
      set->min_decode_steps = run->min_decode_steps;
  }
  if (set->n_episodes == 0) set->min_decode_steps = 0;
}

static md_status check_complete(const md_run_set *set, const md_run_set_options *options,
                                md_error *err) {
  for (size_t r = 0; r < set->n_runs && !options->allow_incomplete; r++) {
    const md_run_info *info = &set->runs[r];
    if (!info->complete && info->shard.present)
      return md_fail(err, MD_E_INVALID, "%s/run.json: shard %zu/%zu is not complete (%zu of its "
                     "%zu episodes done): finish it with 'memdecay-calibrate run --shard %zu/%zu "
                     "--resume' (or 'collect --shard %zu/%zu --resume'), or pass "
                     "--allow-incomplete to use the episodes done so far", info->dir,
                     info->shard.index, info->shard.count, info->n_episodes, info->shard.episodes,
                     info->shard.index, info->shard.count, info->shard.index, info->shard.count);
    if (!info->complete)
      return md_fail(err, MD_E_INVALID, "%s/run.json: the collection is not complete (%zu "
                     "episodes done): finish it with 'memdecay-calibrate collect --resume', or "
                     "pass --allow-incomplete to use the episodes done so far", info->dir,
                     info->n_episodes);
  }
  if (set->n_episodes > 0) return MD_OK;
  if (set->n_runs == 1)
    return md_fail(err, MD_E_INVALID, "%s/run.json: no complete episode to extract",
                   set->runs[0].dir);
  return md_fail(err, MD_E_INVALID, "no complete episode to extract in the %zu run directories "
                 "(%s, ...)", set->n_runs, set->runs[0].dir);
}

/* The identity the caller expects (the model and traces it names). */
static md_status check_expected(const md_run_info *run, const md_run_set_options *o,
                                md_error *err) {
  if (o->config_sha256 && !same_text(o->config_sha256, run->model.config_sha256))
    return md_fail(err, MD_E_INVALID, "%s was collected with a model whose config.json has sha256 "
                   "%.12s..., not the given model's %.12s...", run->dir,
                   run->model.config_sha256, o->config_sha256);
  if (o->traces_sha256 && !same_text(o->traces_sha256, run->traces.sha256))
    return md_fail(err, MD_E_INVALID, "%s was collected over a trace file with sha256 %.12s..., "
                   "not the given traces' %.12s...", run->dir,
                   run->traces.sha256 ? run->traces.sha256 : "(not stated)", o->traces_sha256);
  return MD_OK;
}

md_status md_run_set_read(const char *const *dirs, size_t n, const md_run_set_options *options,
                          md_run_set *set, md_error *err) {
  memset(set, 0, sizeof *set);
  if (n == 0) return md_fail(err, MD_E_INVALID, "no run directory given");
  md_run_info *given = calloc(n, sizeof *given);
  if (!given) return md_fail(err, MD_E_NOMEM, "out of memory");
  md_status s = MD_OK;
  size_t read = 0;
  for (; read < n && s == MD_OK; read++) s = md_run_info_read(dirs[read], &given[read], err);
  for (size_t i = 1; i < read && s == MD_OK; i++) s = check_together(&given[0], &given[i], err);
  for (size_t i = 0; i < read && s == MD_OK; i++) s = check_expected(&given[i], options, err);
  if (s == MD_OK) s = order_runs(set, given, n, options, err);
  for (size_t i = 0; i < read; i++) md_run_info_free(&given[i]); /* moved ones are empty */
  free(given);
  if (s == MD_OK) s = check_episode_ids(set, err);
  if (s == MD_OK) s = merge_regions(set, err);
  if (s == MD_OK) s = list_traces(set, err);
  if (s == MD_OK) totals(set);
  if (s == MD_OK) s = check_complete(set, options, err);
  if (s != MD_OK) md_run_set_free(set);
  return s;
}

void md_run_set_free(md_run_set *set) {
  for (size_t r = 0; r < set->n_runs; r++) {
    if (set->region_map) free(set->region_map[r]);
    md_run_info_free(&set->runs[r]);
  }
  free(set->runs);
  free(set->region_map);
  for (size_t i = 0; i < set->n_regions; i++) free(set->regions[i]);
  free(set->regions);
  free(set->traces_path);
  free(set->traces_sha256);
  memset(set, 0, sizeof *set);
}

/* ---- reading ------------------------------------------------------------------------ */

struct md_run_set_reader {
  const md_run_set *set;
  size_t run;                 /* the run being read */
  md_run_reader *reader;      /* its reader; NULL before the first or after the last */
  uint32_t *region;           /* the current episode's regions, remapped */
  size_t capacity;
};

md_status md_run_set_reader_open(const md_run_set *set, md_run_set_reader **out, md_error *err) {
  *out = calloc(1, sizeof **out);
  if (!*out) return md_fail(err, MD_E_NOMEM, "out of memory");
  (*out)->set = set;
  return MD_OK;
}

static md_status remap(md_run_set_reader *r, md_run_episode_data *episode, md_error *err) {
  if (episode->tokens > r->capacity) {
    uint32_t *grown = realloc(r->region, episode->tokens * sizeof *grown);
    if (!grown) return md_fail(err, MD_E_NOMEM, "out of memory");
    r->region = grown;
    r->capacity = episode->tokens;
  }
  const uint32_t *map = r->set->region_map[r->run];
  for (size_t i = 0; i < episode->tokens; i++) r->region[i] = map[episode->region[i]];
  episode->region = r->region;
  return MD_OK;
}

md_status md_run_set_reader_next(md_run_set_reader *r, md_run_episode_data *episode,
                                 const md_run_info **run, bool *done, md_error *err) {
  memset(episode, 0, sizeof *episode);
  *done = false;
  while (r->run < r->set->n_runs) {
    const md_run_info *info = &r->set->runs[r->run];
    md_status s = MD_OK;
    if (!r->reader) s = md_run_reader_open(info, &r->reader, err);
    bool finished = false;
    if (s == MD_OK) s = md_run_reader_next(r->reader, episode, &finished, err);
    if (s != MD_OK) return s;
    if (!finished) {
      *run = info;
      return remap(r, episode, err);
    }
    md_run_reader_close(r->reader);
    r->reader = NULL;
    r->run++;
  }
  *done = true;
  return MD_OK;
}

void md_run_set_reader_close(md_run_set_reader *r) {
  if (!r) return;
  md_run_reader_close(r->reader);
  free(r->region);
  free(r);
}
