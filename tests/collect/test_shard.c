/* collector/capture/shard.h: the K/N parser and the split rule. The expected
 * assignments are worked out by hand from the rule in the header
 * (shard = floor(N (2 C_i + w_i) / (2 W))), and the properties every split
 * must have are checked over many random plans: contiguous blocks in
 * order, every episode assigned once, each shard's tokens within one
 * episode of W / N. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/capture/shard.h"
#include "tests/test_util.h"

static void test_parse(void) {
  md_shard shard;
  md_error err = {0};
  CHECK(md_shard_parse("0/4", &shard, &err) == MD_OK && shard.index == 0 && shard.count == 4);
  CHECK(md_shard_parse("3/4", &shard, &err) == MD_OK && shard.index == 3 && shard.count == 4);
  CHECK(md_shard_parse("0/1", &shard, &err) == MD_OK && shard.count == 1);
  CHECK(md_shard_parse("65535/65536", &shard, &err) == MD_OK && shard.index == 65535);
  const struct {
    const char *text, *message;
  } bad[] = {
      {"4/4", "K counts from 0 and must be below N (0 to 3)"},
      {"0/0", "the shard count must be from 1 to 65536"},
      {"0/65537", "the shard count must be from 1 to 65536"},
      {"1", "must be K/N"},
      {"-1/4", "must be K/N"},
      {"1/4/2", "must be K/N"},
      {" 1/4", "must be K/N"},
      {"1/+4", "must be K/N"},
      {"/4", "must be K/N"},
      {"1/", "must be K/N"},
      {"", "must be K/N"},
      {"99999999999999999999/4", "must be K/N"},
      {"1/4x", "must be K/N"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memset(&shard, 0x5a, sizeof shard);
    md_status s = md_shard_parse(bad[i].text, &shard, &err);
    CHECK_MSG(s == MD_E_INVALID, "'%s' accepted", bad[i].text);
    CHECK_MSG(strstr(err.message, bad[i].message) != NULL, "'%s': %s", bad[i].text, err.message);
  }
}

static void check_assign(const uint64_t *w, size_t n, size_t count, const uint32_t *want) {
  uint32_t got[64];
  md_error err = {0};
  CHECK(md_shard_assign(w, n, count, got, &err) == MD_OK);
  for (size_t i = 0; i < n; i++)
    CHECK_MSG(got[i] == want[i], "N=%zu episode %zu: shard %u, expected %u", count, i, got[i],
              want[i]);
}

static void test_by_hand(void) {
  /* Weights 10 30 20 40, W = 100; middles 2C+w = 10, 50, 100, 160 of 200.
   * N=2: floor(2*m/200) = 0, 0, 1, 1.  N=3: floor(3m/200) = 0, 0, 1, 2.
   * N=4: 0, 1, 2, 3.  N=5: 0, 1, 2, 4 (shard 3 is empty). */
  const uint64_t w[] = {10, 30, 20, 40};
  check_assign(w, 4, 1, (const uint32_t[]){0, 0, 0, 0});
  check_assign(w, 4, 2, (const uint32_t[]){0, 0, 1, 1});
  check_assign(w, 4, 3, (const uint32_t[]){0, 0, 1, 2});
  check_assign(w, 4, 4, (const uint32_t[]){0, 1, 2, 3});
  check_assign(w, 4, 5, (const uint32_t[]){0, 1, 2, 4});
  /* One episode larger than a share: 1 1 98 -> middles 1, 3, 102 of 200;
   * N=4: 0, 0, 2: shards 1 and 3 are empty. */
  check_assign((const uint64_t[]){1, 1, 98}, 3, 4, (const uint32_t[]){0, 0, 2});
  /* More shards than episodes: 2 equal episodes, N=5: middles 1, 3 of 4:
   * floor(5/4) = 1, floor(15/4) = 3. */
  check_assign((const uint64_t[]){7, 7}, 2, 5, (const uint32_t[]){1, 3});
  /* A zero-weight episode at the end stays in the last shard. */
  check_assign((const uint64_t[]){5, 5, 0}, 3, 2, (const uint32_t[]){0, 1, 1});
  /* All zero: split by index, middles 2i+1 of 2n. */
  check_assign((const uint64_t[]){0, 0, 0, 0}, 4, 2, (const uint32_t[]){0, 0, 1, 1});
}

static uint64_t next_random(uint64_t *state) {
  *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
  return *state >> 33;
}

static void test_properties(void) {
  uint64_t state = 42;
  uint64_t w[512];
  uint32_t shard[512];
  for (int trial = 0; trial < 2000; trial++) {
    size_t n = 1 + next_random(&state) % 300;
    size_t count = 1 + next_random(&state) % 40;
    uint64_t total = 0, largest = 0;
    for (size_t i = 0; i < n; i++) {
      w[i] = 1 + next_random(&state) % (trial % 3 ? 5000 : 50);
      total += w[i];
      if (w[i] > largest) largest = w[i];
    }
    md_error err = {0};
    CHECK(md_shard_assign(w, n, count, shard, &err) == MD_OK);
    uint64_t tokens[64] = {0};
    bool ordered = true;
    for (size_t i = 0; i < n; i++) {
      if (shard[i] >= count) ordered = false;
      if (i && shard[i] < shard[i - 1]) ordered = false;
      if (shard[i] < count) tokens[shard[i]] += w[i];
    }
    CHECK_MSG(ordered, "trial %d: shards not contiguous and in order", trial);
    /* A shard's share is W/N; an episode belongs where its middle lies, so
     * a shard gains or loses at most half an episode at each end. */
    for (size_t k = 0; k < count; k++) {
      double share = (double)total / (double)count;
      CHECK_MSG((double)tokens[k] <= share + (double)largest + 1e-9 &&
                    (double)tokens[k] >= share - (double)largest - 1e-9,
                "trial %d: shard %zu has %llu tokens, share %.1f, largest episode %llu", trial, k,
                (unsigned long long)tokens[k], share, (unsigned long long)largest);
    }
  }
}

static void test_limits(void) {
  md_error err = {0};
  uint32_t shard[2];
  CHECK(md_shard_assign((const uint64_t[]){1}, 1, 0, shard, &err) == MD_E_INVALID);
  CHECK(md_shard_assign((const uint64_t[]){1}, 1, 65537, shard, &err) == MD_E_INVALID);
  /* 2 W N must fit in 64 bits. */
  CHECK(md_shard_assign((const uint64_t[]){UINT64_MAX / 8, UINT64_MAX / 8}, 2, 4, shard, &err) ==
        MD_E_INVALID);
  CHECK_MSG(strstr(err.message, "too large to split") != NULL, "%s", err.message);
  CHECK(md_shard_assign((const uint64_t[]){1ULL << 40, 1ULL << 40}, 2, 65536, shard, &err) == MD_OK);
  CHECK(shard[0] == 16384 && shard[1] == 49152);
  CHECK(md_shard_assign(NULL, 0, 3, shard, &err) == MD_OK); /* nothing to split */
}

int main(void) {
  test_parse();
  test_by_hand();
  test_properties();
  test_limits();
  return md_test_finish("shard");
}
