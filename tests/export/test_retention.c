/* The retention mapping (export/retention.h) on examples worked by hand,
 * and step 4 of vLLM (the clamp), TensorRT-LLM and SGLang on them. Every
 * expected value below is computed in the comment next to it from the rule,
 * not taken from the program's output. */
#include <math.h>
#include <string.h>

#include "export/format.h"
#include "export/retention.h"
#include "tests/test_util.h"

enum { SYS, USER, TOOL, SCRATCH };

/* system pinned; user b = 0.25, h = 100; tool b = 0.5, no half-life;
 * scratchpad b = 0.9, h = 50. */
static const md_retention_region regions[] = {
    {"system", true, 1.0, 80.0},
    {"user", false, 0.25, 100.0},
    {"tool", false, 0.5, NAN},
    {"scratchpad", false, 0.9, 50.0},
};

static void test_step1(void) {
  md_error err = {0};
  md_retention_setting s;
  /* pinned: P 100, no expiry whatever the half-life */
  CHECK(md_retention_setting_of(&regions[SYS], 10.0, &s, &err) == MD_OK);
  CHECK(s.priority == 100 && s.duration_ms == MD_RETENTION_NO_EXPIRY);
  /* 1 + floor(98 * 0.25 + 0.5) = 1 + floor(25.0) = 26; floor(100 * 10 + 0.5) = 1000 ms */
  CHECK(md_retention_setting_of(&regions[USER], 10.0, &s, &err) == MD_OK);
  CHECK(s.priority == 26 && s.duration_ms == 1000);
  /* 1 + floor(49.5) = 50; no half-life: no expiry */
  CHECK(md_retention_setting_of(&regions[TOOL], 10.0, &s, &err) == MD_OK);
  CHECK(s.priority == 50 && s.duration_ms == MD_RETENTION_NO_EXPIRY);
  /* 1 + floor(88.2 + 0.5) = 89; floor(50 * 10 + 0.5) = 500 */
  CHECK(md_retention_setting_of(&regions[SCRATCH], 10.0, &s, &err) == MD_OK);
  CHECK(s.priority == 89 && s.duration_ms == 500);
  /* without --step-ms: no durations */
  CHECK(md_retention_setting_of(&regions[USER], NAN, &s, &err) == MD_OK);
  CHECK(s.priority == 26 && s.duration_ms == MD_RETENTION_NO_EXPIRY);
  /* the ends of the scale: b = 0 gives 1, an unpinned b = 1 gives 99 */
  md_retention_region low = {"low", false, 0.0, 1.0}, high = {"high", false, 1.0, 1.0};
  CHECK(md_retention_setting_of(&low, 1.0, &s, &err) == MD_OK && s.priority == 1);
  CHECK(md_retention_setting_of(&high, 1.0, &s, &err) == MD_OK && s.priority == 99);
  /* a duration under half a millisecond is 1 ms: floor(0.01 * 1 + 0.5) = 0 -> 1 */
  md_retention_region tiny = {"tiny", false, 0.5, 0.01};
  CHECK(md_retention_setting_of(&tiny, 1.0, &s, &err) == MD_OK && s.duration_ms == 1);
  /* 98 * 0.505 = 49.49 -> floor(49.99) = 49 -> 50; 98 * 0.5052 = 49.5096 -> 50 -> 51 */
  md_retention_region r1 = {"r1", false, 0.505, NAN}, r2 = {"r2", false, 0.5052, NAN};
  CHECK(md_retention_setting_of(&r1, 1.0, &s, &err) == MD_OK && s.priority == 50);
  CHECK(md_retention_setting_of(&r2, 1.0, &s, &err) == MD_OK && s.priority == 51);
  /* refusals */
  md_retention_region bad_b = {"bad", false, 1.5, 10.0}, bad_h = {"bad", false, 0.5, 0.0};
  CHECK(md_retention_setting_of(&bad_b, 1.0, &s, &err) == MD_E_INVALID);
  CHECK_MSG(strstr(err.message, "regions.bad.base_priority"), "%s", err.message);
  CHECK(md_retention_setting_of(&bad_h, 1.0, &s, &err) == MD_E_INVALID);
  CHECK(md_retention_setting_of(&regions[USER], 0.0, &s, &err) == MD_E_INVALID);
  CHECK(md_retention_setting_of(&regions[USER], -1.0, &s, &err) == MD_E_INVALID);
  md_retention_region huge = {"huge", false, 0.5, 1e300};
  CHECK(md_retention_setting_of(&huge, 1.0, &s, &err) == MD_E_INVALID);
}

static void test_order(void) {
  md_retention_setting a = {50, 100}, b = {50, 200}, none = {50, MD_RETENTION_NO_EXPIRY},
                       higher = {51, 1};
  CHECK(md_retention_setting_compare(a, b) < 0);
  CHECK(md_retention_setting_compare(b, none) < 0); /* no expiry is the largest duration */
  CHECK(md_retention_setting_compare(none, higher) < 0); /* P first */
  CHECK(md_retention_setting_compare(a, a) == 0);
}

/* Ten tokens, blocks of 4:
 *   token   0   1   2   3 | 4    5    6    7 | 8       9
 *   region  sys sys sys usr| usr  usr  tool tool| scratch usr
 * block 0: max(sys (100, none), user (26, 1000 ms)) = system (100, none)
 * block 1: max(user (26, 1000), tool (50, none)) = tool (50, none)
 * block 2: max(scratchpad (89, 500), user (26, 1000)) = scratchpad (89, 500)
 * three ranges [0,4) [4,8) [8,10); decoded tokens scratchpad (89, 500). */
static const size_t example[] = {SYS, SYS, SYS, USER, USER, USER, TOOL, TOOL, SCRATCH, USER};

static void test_blocks(md_retention_map *map) {
  md_error err = {0};
  CHECK(md_retention_map_tokens(regions, 4, example, 10, SCRATCH, 4, 10.0, map, &err) == MD_OK);
  CHECK(map->n_ranges == 3);
  if (map->n_ranges != 3) return;
  const md_retention_range *g = map->ranges;
  CHECK(g[0].start == 0 && g[0].end == 4 && g[0].setting.priority == 100 &&
        g[0].setting.duration_ms == MD_RETENTION_NO_EXPIRY && g[0].region == SYS);
  CHECK(g[1].start == 4 && g[1].end == 8 && g[1].setting.priority == 50 &&
        g[1].setting.duration_ms == MD_RETENTION_NO_EXPIRY && g[1].region == TOOL);
  CHECK(g[2].start == 8 && g[2].end == 10 && g[2].setting.priority == 89 &&
        g[2].setting.duration_ms == 500 && g[2].region == SCRATCH);
  CHECK(map->decode.priority == 89 && map->decode.duration_ms == 500 && map->decode_region == SCRATCH);
  /* (4 x 100 + 4 x 50 + 2 x 89) / 10 = 77.8 -> 78; in integers (2 x 778 + 10) / 20 = 78 */
  CHECK(md_retention_request_priority(map) == 78);

  /* Block size 1 keeps every token's own setting: runs of equal settings
   * [0,3) system, [3,6) user, [6,8) tool, [8,9) scratchpad, [9,10) user. */
  md_retention_map one;
  CHECK(md_retention_map_tokens(regions, 4, example, 10, SCRATCH, 1, 10.0, &one, &err) == MD_OK);
  CHECK(one.n_ranges == 5);
  if (one.n_ranges == 5) {
    CHECK(one.ranges[1].start == 3 && one.ranges[1].end == 6 && one.ranges[1].setting.priority == 26);
    CHECK(one.ranges[4].start == 9 && one.ranges[4].end == 10 && one.ranges[4].region == USER);
  }
  /* (3 x 100 + 3 x 26 + 2 x 50 + 89 + 26) / 10 = 593 / 10 = 59.3 -> 59 */
  CHECK(md_retention_request_priority(&one) == 59);
  md_retention_map_free(&one);

  /* One block larger than the prompt: the whole prompt is system's. */
  md_retention_map all;
  CHECK(md_retention_map_tokens(regions, 4, example, 10, SCRATCH, 64, 10.0, &all, &err) == MD_OK);
  CHECK(all.n_ranges == 1 && all.ranges[0].end == 10 && all.ranges[0].setting.priority == 100);
  md_retention_map_free(&all);

  /* Equal neighbouring blocks merge, and a range's region at a tie is the
   * first in the config's order: a and b have the same setting (50, none);
   * tokens b b a a in blocks of 2 make one range [0, 4) of region a. */
  md_retention_region tie[] = {{"a", false, 0.5, NAN}, {"b", false, 0.5, NAN}};
  size_t tokens[] = {1, 1, 0, 0};
  md_retention_map merged;
  CHECK(md_retention_map_tokens(tie, 2, tokens, 4, 0, 2, 1.0, &merged, &err) == MD_OK);
  CHECK(merged.n_ranges == 1 && merged.ranges[0].start == 0 && merged.ranges[0].end == 4 &&
        merged.ranges[0].region == 0);
  md_retention_map_free(&merged);

  /* Equal P: the longer duration wins, and no expiry is the longest:
   * x (50, 100 ms), y (50, 200 ms), z (50, none); blocks of 2 over x y | x z. */
  md_retention_region d[] = {{"x", false, 0.5, 100.0}, {"y", false, 0.5, 200.0}, {"z", false, 0.5, NAN}};
  size_t dt[] = {0, 1, 0, 2};
  md_retention_map dm;
  CHECK(md_retention_map_tokens(d, 3, dt, 4, 0, 2, 1.0, &dm, &err) == MD_OK);
  CHECK(dm.n_ranges == 2);
  if (dm.n_ranges == 2) {
    CHECK(dm.ranges[0].setting.duration_ms == 200 && dm.ranges[0].region == 1);
    CHECK(dm.ranges[1].setting.duration_ms == MD_RETENTION_NO_EXPIRY && dm.ranges[1].region == 2);
  }
  md_retention_map_free(&dm);

  /* refusals: block size 0, no tokens */
  md_retention_map bad;
  CHECK(md_retention_map_tokens(regions, 4, example, 10, SCRATCH, 0, 10.0, &bad, &err) == MD_E_INVALID);
  CHECK(md_retention_map_tokens(regions, 4, example, 0, SCRATCH, 4, 10.0, &bad, &err) == MD_E_INVALID);
}

static json_t *settings_of(const char *format, const md_retention_map *map, size_t *lowered,
                           md_warnings *warnings) {
  md_error err = {0};
  md_export_request request = {"req-1", map, regions, 4};
  md_export_adjustments adjust = {lowered, warnings};
  json_t *value = NULL;
  CHECK(md_export_format_find(format)->settings(&request, &value, &adjust, &err) == MD_OK);
  return value;
}

/* vLLM on the example: priorities 100, 50, 89, decode 89. Walking them in
 * order, 89 > 50 is lowered to 50 for [8, 10) and for the decoded tokens
 * [10, null): two clamps, both of scratchpad. Durations in seconds: none,
 * none, 0.5, 0.5. */
static void test_vllm(const md_retention_map *map) {
  size_t lowered[4] = {0};
  md_warnings warnings = {0};
  json_t *v = settings_of("vllm", map, lowered, &warnings);
  CHECK(json_array_size(v) == 4);
  const int want_p[] = {100, 50, 50, 50};
  const long want_start[] = {0, 4, 8, 10};
  for (size_t i = 0; i < json_array_size(v) && i < 4; i++) {
    json_t *d = json_array_get(v, i);
    CHECK(json_integer_value(json_object_get(d, "priority")) == want_p[i]);
    CHECK(json_integer_value(json_object_get(d, "start")) == want_start[i]);
  }
  CHECK(json_is_null(json_object_get(json_array_get(v, 3), "end")));
  CHECK(json_integer_value(json_object_get(json_array_get(v, 2), "end")) == 10);
  CHECK(json_is_null(json_object_get(json_array_get(v, 0), "duration")));
  CHECK(json_real_value(json_object_get(json_array_get(v, 2), "duration")) == 0.5);
  CHECK(lowered[SCRATCH] == 2 && lowered[SYS] == 0 && lowered[TOOL] == 0);
  CHECK(warnings.n == 2);
  if (warnings.n == 2) {
    CHECK_MSG(strstr(warnings.lines[0], "\"req-1\"") && strstr(warnings.lines[0], "scratchpad") &&
              strstr(warnings.lines[0], "[8, 10)") && strstr(warnings.lines[0], "89 lowered to 50"),
              "%s", warnings.lines[0]);
    CHECK_MSG(strstr(warnings.lines[1], "decoded tokens from 10"), "%s", warnings.lines[1]);
  }
  md_warnings_free(&warnings);
  json_decref(v);
}

static void test_trtllm_sglang(const md_retention_map *map) {
  size_t lowered[4] = {0};
  md_warnings warnings = {0};
  json_t *t = settings_of("trtllm", map, lowered, &warnings);
  json_t *ranges = json_object_get(t, "token_range_retention_configs");
  CHECK(json_array_size(ranges) == 3);
  json_t *last = json_array_get(ranges, 2);
  CHECK(json_integer_value(json_object_get(last, "token_start")) == 8);
  CHECK(json_integer_value(json_object_get(last, "token_end")) == 10);
  CHECK(json_integer_value(json_object_get(last, "priority")) == 89); /* no clamp */
  CHECK(json_integer_value(json_object_get(last, "duration_ms")) == 500);
  CHECK(json_integer_value(json_object_get(t, "decode_retention_priority")) == 89);
  CHECK(json_integer_value(json_object_get(t, "decode_duration_ms")) == 500);
  CHECK(warnings.n == 0);
  json_decref(t);
  json_t *s = settings_of("sglang", map, lowered, &warnings);
  CHECK(json_integer_value(s) == 78);
  json_decref(s);
  json_t *d = settings_of("dynamo", map, lowered, &warnings);
  CHECK(json_integer_value(json_object_get(json_object_get(d, "agent_hints"), "priority")) == 78);
  CHECK(!json_object_get(d, "cache_control"));
  json_decref(d);
}

int main(void) {
  test_step1();
  test_order();
  md_retention_map map = {0};
  test_blocks(&map);
  if (map.n_ranges == 3) {
    test_vllm(&map);
    test_trtllm_sglang(&map);
  }
  md_retention_map_free(&map);
  char names[64];
  CHECK(!strcmp(md_export_format_names(names, sizeof names), "trtllm, vllm, sglang, dynamo"));
  CHECK(md_export_format_find("tensorrt") == NULL);
  return md_test_finish("export_retention");
}
