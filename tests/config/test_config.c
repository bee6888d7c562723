/* io/config, io/numfmt and io/priors: the writer's key order, null handling
 * and warnings, exact round trip of every number, shortest formatting, the
 * reader's validation, and the priors file. The expected values are the
 * inputs themselves (a round trip) or written out by hand below. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/formats/config.h"
#include "base/numfmt.h"
#include "io/formats/priors.h"
#include "tests/test_util.h"

static char *data_path(const char *name) {
  const char *root = getenv("MD_SOURCE_ROOT");
  static char paths[4][1024];
  static int next = 0;
  char *path = paths[next++ % 4];
  snprintf(path, sizeof paths[0], "%s/tests/config/data/%s", root ? root : ".", name);
  return path;
}

static void test_shortest(void) {
  char text[MD_NUMBER_TEXT_MAX];
  CHECK(!strcmp(md_format_shortest(text, 0.9), "0.9"));
  CHECK(!strcmp(md_format_shortest(text, 0.1 + 0.2), "0.30000000000000004"));
  CHECK(!strcmp(md_format_shortest(text, 165.0), "165"));
  CHECK(!strcmp(md_format_shortest(text, 30.0), "30"));
  CHECK(!strcmp(md_format_shortest(text, 1000000.0), "1000000"));
  CHECK(!strcmp(md_format_shortest(text, 730000.5), "730000.5"));
  CHECK(!strcmp(md_format_shortest(text, 1e20), "1e+20"));
  CHECK(!strcmp(md_format_shortest(text, 0.0001), "0.0001"));
  CHECK(!strcmp(md_format_shortest(text, 1e-300), "1e-300"));
  CHECK(!strcmp(md_format_shortest(text, NAN), ""));
  CHECK(!strcmp(md_format_shortest(text, INFINITY), ""));
  CHECK(!strcmp(md_format_shortest(text, -0.0), "-0"));
  CHECK(!strcmp(md_format_shortest(text, 1e16), "10000000000000000"));
  CHECK(!strcmp(md_format_shortest(text, 4.9406564584124654e-324), "5e-324"));
  /* Against the definition, by brute force: the fewest digits (from the
   * number of integer digits up, %g style) that read back to the value, on
   * values of every kind (random bit patterns, including subnormals; ratios;
   * decimals; values near powers of ten). */
  uint64_t state = 0x9e3779b97f4a7c15u;
  int mismatches = 0;
  for (int i = 0; i < 200000; i++) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    double v;
    switch (i % 5) {
      case 0: memcpy(&v, &state, sizeof v); break;
      case 1: v = (double)(state % 100000) / (double)(1 + (state >> 40) % 997); break;
      case 2: v = (double)(state % 10000000) * 1e-4; break;
      case 3: v = ldexp((double)(state >> 11), -(int)(state % 1100)); break;
      default: v = nextafter(pow(10.0, (double)(state % 40) - 20), (state & 1) ? 0.0 : 1e300); break;
    }
    char want[MD_NUMBER_TEXT_MAX] = "";
    if (isfinite(v)) {
      double magnitude = fabs(v);
      int precision = magnitude >= 1.0 && magnitude < 1e17 ? (int)floor(log10(magnitude)) + 1 : 1;
      for (; precision <= 17; precision++) {
        snprintf(want, sizeof want, "%.*g", precision, v);
        if (strtod(want, NULL) == v) break;
      }
    }
    if (strcmp(md_format_shortest(text, v), want) && mismatches++ < 5)
      CHECK_MSG(0, "%.17g: got %s, want %s", v, text, want);
  }
  CHECK_MSG(mismatches == 0, "%d values formatted unlike the brute-force definition", mismatches);
  /* Numbers inside strings stay; reals stay reals; integers stay. */
  char json[] = "{\"a\": 0.90000000000000002, \"b\": \"0.90000000000000002\", \"c\": 12, "
                "\"d\": 3.0, \"e\": -1.0000000000000001e-05, \"f\": [2.5, \"x\\\"1.50\"]}";
  md_json_shorten_numbers(json);
  CHECK_MSG(!strcmp(json, "{\"a\": 0.9, \"b\": \"0.90000000000000002\", \"c\": 12, \"d\": 3.0, "
                          "\"e\": -1e-05, \"f\": [2.5, \"x\\\"1.50\"]}"),
            "%s", json);
}

/* A two-region config: system fully estimated, tool_in with no events. */
static md_config_region sample_region(const char *name, bool estimable) {
  double v = estimable ? 1.0 : NAN;
  md_config_region region = {
      .name = name,
      .pinned = estimable,
      .base_priority = estimable ? 1.0 : 0.4,
      .base_priority_source = estimable ? "pinned" : "default-prior",
      .lambda = v * 0.0042,
      .half_life = v * 165.03,
      .half_life_ci = {v * 150.1, v * 181.0},
      .fit = {.n = 5400, .weight = 5400, .events = estimable ? 3100 : 0, .exposure = 7.3e5,
              .ci_level = 0.95,
              .exponential = {.lambda = v * 0.0042, .lambda_ci = {v * 0.0038, v * 0.0046},
                              .ci_method = "wald-log", .lambda_ci_profile = {0.0, 4.1e-6},
                              .loglik = v * -1.0e4, .aic = v * 2.0e4},
              .weibull = {.shape = v * 1.08, .scale = v * 230, .shape_ci = {v * 1.02, v * 1.14},
                          .scale_ci = {v * 220, v * 240}, .loglik = v * -9.9e3, .aic = v * 1.99e4,
                          .lrt_statistic = v * 8.8, .lrt_p = v * 0.003},
              .km = {.median = v * 150, .median_ci = {v * 141, INFINITY}, .band = "log"}},
  };
  return region;
}

static void test_writer(void) {
  md_config_region regions[2] = {sample_region("system", true), sample_region("tool_in", false)};
  md_warnings warnings = {0};
  md_error err = {0};
  CHECK(md_warnings_add(&warnings, &err, "regions.tool_in: no observed events") == MD_OK);
  const char *sources[] = {"a.csv", "b.csv"};
  const char *test_regions[] = {"system", "tool_in"};
  md_config_logrank pair = {.regions = {"system", "tool_in"}, .statistic = NAN, .df = 0, .p = NAN};
  md_config config = {
      .generator_version = "9.9.9",
      .created = NULL,
      .workload = {.n_sources = 2, .sources = sources, .rows = 10800, .weight = 10800,
                   .episodes = NAN, .tokens = NAN, .decode_steps = 256, .tau = NAN, .guard = NAN},
      .n_regions = 2,
      .regions = regions,
      .tests = {.present = true, .n_regions = 2, .regions = test_regions,
                .overall = {.statistic = 12.5, .df = 1, .p = 0.000407},
                .n_pairwise = 1, .pairwise = &pair},
      .warnings = &warnings,
  };
  md_config_policy_defaults(&config.policy);
  char *text = NULL, *again = NULL;
  CHECK(md_config_dump(&config, &text, &err) == MD_OK);
  CHECK(md_config_dump(&config, &again, &err) == MD_OK);
  if (!text || !again) return;
  CHECK(!strcmp(text, again));
  CHECK(text[strlen(text) - 1] == '\n');
  CHECK(strstr(text, "NaN") == NULL && strstr(text, "nan") == NULL && strstr(text, "Infinity") == NULL);
  CHECK(strstr(text, "\"created\"") == NULL);
  /* Top-level key order as in memdecay-config(5). */
  const char *keys[] = {"\"format\"", "\"generator\"", "\"model\"", "\"workload\"", "\"policy\"",
                        "\"regions\"", "\"tests\"", "\"warnings\""};
  const char *previous = text;
  for (int i = 0; i < 8; i++) {
    const char *at = strstr(text, keys[i]);
    CHECK_MSG(at && at >= previous, "key %s out of order", keys[i]);
    if (at) previous = at;
  }
  CHECK(strstr(text, "\"ewma_beta\": 0.9,") != NULL);
  CHECK(strstr(text, "\"pooled\"") == NULL);  /* absent unless present */
  CHECK(strstr(text, "\"decode_steps\": 256") != NULL && strstr(text, "256.0") == NULL);
  CHECK(strstr(text, "\"episodes\"") == NULL);

  json_error_t json_err;
  json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &json_err);
  CHECK_MSG(root != NULL, "%s", json_err.text);
  json_t *system = json_object_get(json_object_get(root, "regions"), "system");
  json_t *tool_in = json_object_get(json_object_get(root, "regions"), "tool_in");
  CHECK(json_real_value(json_object_get(system, "half_life")) == 165.03);
  CHECK(json_real_value(json_object_get(system, "lambda")) == 0.0042);
  json_t *km = json_object_get(json_object_get(system, "fit"), "km");
  CHECK(json_real_value(json_array_get(json_object_get(km, "median_ci"), 0)) == 141);
  CHECK(json_is_null(json_array_get(json_object_get(km, "median_ci"), 1)));
  CHECK(json_is_null(json_object_get(tool_in, "half_life")));
  CHECK(json_is_null(json_object_get(root, "model")));
  json_t *profile = json_object_get(json_object_get(json_object_get(tool_in, "fit"), "exponential"),
                                    "lambda_ci_profile");
  CHECK(json_real_value(json_array_get(profile, 1)) == 4.1e-6);
  /* Caller's warning first, then one line per section with nulls. */
  json_t *lines = json_object_get(root, "warnings");
  CHECK(json_array_size(lines) == 4);
  CHECK(!strcmp(json_string_value(json_array_get(lines, 0)), "regions.tool_in: no observed events"));
  const char *system_line = json_string_value(json_array_get(lines, 1));
  CHECK(system_line && !strncmp(system_line, "regions.system: written as null", 31) &&
        strstr(system_line, "fit.km.median_ci[1]"));
  const char *tool_line = json_string_value(json_array_get(lines, 2));
  CHECK(tool_line && strstr(tool_line, "regions.tool_in:") && strstr(tool_line, "half_life_ci[0]"));
  const char *test_line = json_string_value(json_array_get(lines, 3));
  CHECK(test_line && !strncmp(test_line, "tests.logrank: written as null", 30));
  json_decref(root);
  free(text);
  free(again);

  config.created = "2025-01-02T03:04:05Z";
  CHECK(md_config_dump(&config, &text, &err) == MD_OK);
  CHECK(text && strstr(text, "\"created\": \"2025-01-02T03:04:05Z\""));
  free(text);

  /* The pooled fit, between "regions" and "tests": its numbers, and a null
   * lambda named in a "pooled:" warning line. */
  const char *pooled_regions[] = {"tool_in"};
  config.created = NULL;
  config.pooled = (md_config_pooled){
      .present = true, .n_regions = 1, .regions = pooled_regions, .lambda = 0.0125,
      .half_life = 55.451774444795625, .half_life_ci = {40.5, 75.25}, .n = 7, .weight = 7,
      .events = 5, .exposure = 400, .ci_level = 0.95,
      .exponential = {.lambda = 0.0125, .lambda_ci = {0.0092, 0.017}, .ci_method = "wald-log",
                      .lambda_ci_profile = {0.0045, 0.026}, .loglik = -26.9, .aic = 55.8}};
  CHECK(md_config_dump(&config, &text, &err) == MD_OK);
  if (!text) return;
  const char *regions_at = strstr(text, "\"regions\": {"), *pooled_at = strstr(text, "\"pooled\"");
  const char *tests_at = strstr(text, "\"tests\"");
  CHECK(regions_at && pooled_at && tests_at && regions_at < pooled_at && pooled_at < tests_at);
  root = json_loads(text, JSON_REJECT_DUPLICATES, &json_err);
  CHECK_MSG(root != NULL, "%s", json_err.text);
  json_t *pooled = json_object_get(root, "pooled");
  CHECK(json_real_value(json_object_get(pooled, "lambda")) == 0.0125);
  CHECK(json_real_value(json_object_get(pooled, "half_life")) == 55.451774444795625);
  json_t *pooled_names = json_object_get(pooled, "regions");
  const char *first_pooled = json_string_value(json_array_get(pooled_names, 0));
  CHECK(first_pooled && !strcmp(first_pooled, "tool_in"));
  json_t *pooled_fit = json_object_get(pooled, "fit");
  CHECK(json_integer_value(json_object_get(pooled_fit, "n")) == 7);
  CHECK(json_real_value(json_object_get(pooled_fit, "exposure")) == 400);
  CHECK(json_real_value(json_object_get(json_object_get(pooled_fit, "exponential"), "lambda")) ==
        0.0125);
  json_decref(root);
  free(text);
  config.pooled.lambda = config.pooled.half_life = NAN;
  CHECK(md_config_dump(&config, &text, &err) == MD_OK);
  CHECK(text && strstr(text, "\"pooled: written as null (not estimable from these data): "
                             "lambda, half_life\"") != NULL);
  free(text);
  md_warnings_free(&warnings);
}

static void test_reader(void) {
  md_config_summary summary;
  md_error err = {0};
  CHECK_MSG(md_config_read(data_path("golden.json"), &summary, &err) == MD_OK, "%s", err.message);
  CHECK(summary.n_regions == 4);
  if (summary.n_regions == 4) {
    CHECK(!strcmp(summary.regions[0].name, "system") && summary.regions[0].pinned);
    CHECK(summary.regions[0].half_life == 165.0 && summary.regions[0].half_life_ci[1] == 181.0);
    CHECK(isnan(summary.regions[2].half_life) && isnan(summary.regions[2].half_life_ci[0]));
    CHECK(summary.regions[3].half_life_ci[0] == 40.0 && isnan(summary.regions[3].half_life_ci[1]));
    CHECK(summary.regions[1].base_priority == 0.3);
  }
  CHECK(summary.alpha == 0.6 && summary.kappa == 1.0);
  CHECK(!summary.has_pooled && isnan(summary.pooled_lambda));  /* written before "pooled" */
  md_config_summary_free(&summary);

  const struct {
    const char *file;
    md_status status;
    const char *message;
  } bad[] = {
      {"syntax_error.json", MD_E_FORMAT, "syntax_error.json:4:"},
      {"duplicate_key.json", MD_E_FORMAT, "duplicate_key.json:3:"},
      {"not_object.json", MD_E_FORMAT, "expected a JSON object at the top"},
      {"wrong_format.json", MD_E_UNSUPPORTED, "format \"memdecay-config/2\" is not supported"},
      {"half_life_string.json", MD_E_FORMAT, "regions.system.half_life: expected a number or null, found a string"},
      {"ci_wrong_length.json", MD_E_FORMAT, "regions.system.half_life_ci: expected [lower, upper]"},
      {"no_regions.json", MD_E_FORMAT, "regions: expected an object"},
      {"pinned_missing.json", MD_E_FORMAT, "regions.system.pinned: expected true or false"},
      {"bad_region_name.json", MD_E_FORMAT, "\"Tool\" is not a valid region name"},
      {"does-not-exist.json", MD_E_IO, "does-not-exist.json: cannot open"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    md_status status = md_config_read(data_path(bad[i].file), &summary, &err);
    CHECK_MSG(status == bad[i].status, "%s: status %d", bad[i].file, (int)status);
    CHECK_MSG(strstr(err.message, bad[i].message) != NULL, "%s: %s", bad[i].file, err.message);
    CHECK(summary.n_regions == 0 && summary.regions == NULL);
  }
}

static void test_priors(void) {
  md_priors priors;
  md_error err = {0};
  CHECK_MSG(md_priors_read(data_path("priors_good.json"), &priors, &err) == MD_OK, "%s", err.message);
  CHECK(priors.n == 4);
  const md_prior *plan = md_priors_find(&priors, "plan");
  CHECK(plan && plan->has_base_priority && plan->base_priority == 0.95 && plan->has_pinned &&
        plan->pinned);
  const md_prior *system = md_priors_find(&priors, "system");
  CHECK(system && !system->has_base_priority && system->has_pinned && !system->pinned);
  CHECK(md_priors_find(&priors, "user") == NULL);
  md_priors_free(&priors);

  const struct {
    const char *file;
    const char *message;
  } bad[] = {
      {"priors_syntax.json", "priors_syntax.json:3:"},
      {"priors_range.json", "regions.plan.base_priority: expected a number in [0, 1]"},
      {"priors_unknown_key.json", "regions.plan: unknown key \"base_prio\""},
      {"priors_bad_name.json", "\"Plan\" is not a valid region name"},
      {"priors_pinned_type.json", "regions.plan.pinned: expected true or false"},
      {"priors_no_regions.json", "regions: expected an object"},
      {"priors_top_key.json", "unknown key \"region\""},
      {"priors_format.json", "format: expected \"memdecay-priors/1\""},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK_MSG(md_priors_read(data_path(bad[i].file), &priors, &err) == MD_E_FORMAT, "%s", bad[i].file);
    CHECK_MSG(strstr(err.message, bad[i].message) != NULL, "%s: %s", bad[i].file, err.message);
  }
}

int main(void) {
  test_shortest();
  test_writer();
  test_reader();
  test_priors();
  return md_test_finish("config");
}
