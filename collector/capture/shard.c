#include "collector/capture/shard.h"

#include <errno.h>
#include <stdlib.h>

/* A whole decimal number with nothing else around it (no sign, no spaces). */
static int whole(const char *begin, const char *end, size_t *value) {
  if (begin == end || end - begin > 9) return 0;
  size_t v = 0;
  for (const char *c = begin; c < end; c++) {
    if (*c < '0' || *c > '9') return 0;
    v = 10 * v + (size_t)(*c - '0');
  }
  *value = v;
  return 1;
}

md_status md_shard_parse(const char *text, md_shard *shard, md_error *err) {
  const char *slash = text;
  while (*slash && *slash != '/') slash++;
  const char *end = slash;
  while (*end) end++;
  size_t index = 0, count = 0;
  if (*slash != '/' || !whole(text, slash, &index) || !whole(slash + 1, end, &count))
    return md_fail(err, MD_E_INVALID, "shard '%.40s' must be K/N, two whole numbers (e.g. 0/4)",
                   text);
  if (count < 1 || count > MD_SHARD_COUNT_MAX)
    return md_fail(err, MD_E_INVALID, "shard '%.40s': the shard count must be from 1 to %d", text,
                   MD_SHARD_COUNT_MAX);
  if (index >= count)
    return md_fail(err, MD_E_INVALID, "shard '%.40s': K counts from 0 and must be below N (0 to "
                   "%zu)", text, count - 1);
  *shard = (md_shard){.index = index, .count = count};
  return MD_OK;
}

md_status md_shard_assign(const uint64_t *weights, size_t n, size_t count, uint32_t *shard,
                          md_error *err) {
  if (count < 1 || count > MD_SHARD_COUNT_MAX)
    return md_fail(err, MD_E_INVALID, "shard count %zu is not from 1 to %d", count,
                   MD_SHARD_COUNT_MAX);
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++) {
    if (weights[i] > UINT64_MAX / 2 / count - total)
      return md_fail(err, MD_E_INVALID, "%zu shards of %zu episodes: the token counts are too "
                     "large to split", count, n);
    total += weights[i];
  }
  /* The arithmetic is md_run_shard_owner's, which the merge repeats to
   * check every shard against its plan. */
  uint64_t before = 0;
  for (size_t i = 0; i < n; i++) {
    shard[i] = (uint32_t)md_run_shard_owner(before, weights[i], total, i, n, count);
    before += weights[i];
  }
  return MD_OK;
}
