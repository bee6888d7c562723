/* The events CSV (io/formats/events.h) and then the whole fit in memory, as `fit`
 * runs it (fit/regions/region_fits.c): per-region estimators, log-rank tests,
 * the md_config and its dump (io/formats/config.h), which is read back.
 *
 * Invariants: a failed read is MD_E_FORMAT or MD_E_IO naming the file and
 * leaves the set empty; a successful one holds rows within the header's
 * ranges; the fit of any readable input succeeds; the config dump is one
 * JSON document ending in '\n' that md_config_read takes back with the
 * same regions and rates. */
#include <jansson.h>
#include <math.h>

#include "fit/regions/region_fits.h"
#include "fuzz_util.h"
#include "io/formats/config.h"
#include "io/formats/events.h"

static void check_events(const md_events *events) {
  FUZZ_CHECK(events->n_files == 1);
  FUZZ_CHECK(events->n_rows > 0);
  FUZZ_CHECK(events->n_regions > 0 && events->regions != NULL);
  size_t rows = 0;
  for (size_t r = 0; r < events->n_regions; r++) {
    const md_events_region *region = &events->regions[r];
    FUZZ_CHECK(region->name != NULL && strlen(region->name) == region->name_len);
    FUZZ_CHECK(fuzz_region_name(region->name, region->name_len));
    FUZZ_CHECK(region->n > 0 && region->n <= region->cap);
    FUZZ_CHECK(md_events_find(events, region->name) == region);
    for (size_t j = 0; j < r; j++) FUZZ_CHECK(strcmp(events->regions[j].name, region->name) != 0);
    for (size_t i = 0; i < region->n; i++) {
      double entry = region->entry ? region->entry[i] : 0.0;
      double weight = region->weight ? region->weight[i] : 1.0;
      FUZZ_CHECK(isfinite(region->time[i]) && isfinite(entry));
      FUZZ_CHECK(entry >= 0 && region->time[i] > entry);
      FUZZ_CHECK(region->event[i] == 0 || region->event[i] == 1);
      FUZZ_CHECK(isfinite(weight) && weight > 0);
    }
    rows += region->n;
  }
  FUZZ_CHECK(rows == events->n_rows);
  FUZZ_CHECK(md_events_find(events, "no such region") == NULL);
}

static bool same_double(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

static void check_fit(const md_events *events, const md_regions_results *results) {
  FUZZ_CHECK(results->n_regions == events->n_regions);
  for (size_t i = 0; i < results->n_regions; i++) {
    const md_region_fit *fit = &results->regions[i];
    FUZZ_CHECK(md_events_find(events, fit->name) != NULL);
    FUZZ_CHECK(fit->base_priority_source != NULL);
    FUZZ_CHECK(fit->pinned ? fit->base_priority == 1.0
                           : fit->base_priority >= 0 && fit->base_priority <= 1);
    const md_exponential_fit *e = &fit->exponential;
    if (e->estimable) {
      FUZZ_CHECK(e->lambda > 0 || e->lambda == 0);
      FUZZ_CHECK(!(e->lambda_ci_wald[0] > e->lambda_ci_wald[1]));
    }
    FUZZ_CHECK(!(e->lambda_ci_profile[0] < 0));
    const md_weibull_fit *w = &fit->weibull;
    if (w->estimable) {
      FUZZ_CHECK(!(w->shape <= 0) && !(w->scale <= 0));
      FUZZ_CHECK(!(w->lrt_statistic < 0));
      FUZZ_CHECK(!(w->lrt_p < 0) && !(w->lrt_p > 1));
    }
    FUZZ_CHECK(!(fit->km.median < 0));
  }
  if (results->overall.estimable) {
    FUZZ_CHECK(!(results->overall.chisq < 0) && results->overall.df >= 1);
    FUZZ_CHECK(!(results->overall.p_value < 0) && !(results->overall.p_value > 1));
  }
  size_t n = results->n_regions;
  FUZZ_CHECK(results->n_pairs == (n < 2 ? 0 : n * (n - 1) / 2) || n < 2);
  for (size_t i = 0; i < results->n_pairs; i++) {
    const md_config_logrank *pair = &results->pairwise[i];
    FUZZ_CHECK(!(pair->p < 0) && !(pair->p > 1));
    FUZZ_CHECK(pair->df == 0 || pair->df == 1);
  }
}

static void check_dump(const char *text, const md_regions_results *results, const md_config *config) {
  size_t len = strlen(text);
  FUZZ_CHECK(len > 0 && text[len - 1] == '\n');
  json_error_t jerr;
  json_t *root = json_loads(text, 0, &jerr);
  FUZZ_CHECK_MSG(root != NULL, "the dump is not JSON: %s", jerr.text);
  FUZZ_CHECK(json_is_object(root));
  const char *format = json_string_value(json_object_get(root, "format"));
  FUZZ_CHECK(format && !strcmp(format, MD_CONFIG_FORMAT));
  json_decref(root);

  const char *path = fuzz_temp_slot(1, ".json");
  fuzz_write_file(path, (const uint8_t *)text, len);
  md_config_summary summary;
  md_error err = {0};
  md_status status = md_config_read(path, &summary, &err);
  FUZZ_CHECK_MSG(status == MD_OK, "the dump does not read back: %s", err.message);
  FUZZ_CHECK(summary.n_regions == config->n_regions);
  FUZZ_CHECK(summary.n_regions == results->n_regions);
  for (size_t i = 0; i < summary.n_regions; i++) {
    const md_config_read_region *back = &summary.regions[i];
    const md_config_region *region = &config->regions[i];
    FUZZ_CHECK(!strcmp(back->name, region->name));
    FUZZ_CHECK(back->pinned == region->pinned);
    FUZZ_CHECK(same_double(back->base_priority, region->base_priority));
    /* Numbers go out in shortest round-trip form, non-finite ones as null. */
    double lambda = isfinite(region->lambda) ? region->lambda : NAN;
    FUZZ_CHECK_MSG(same_double(back->lambda, lambda), "lambda %.17g read back as %.17g",
                   region->lambda, back->lambda);
    double half_life = isfinite(region->half_life) ? region->half_life : NAN;
    FUZZ_CHECK(same_double(back->half_life, half_life));
  }
  md_config_summary_free(&summary);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_input_file(data, size, ".csv");
  md_events events;
  md_error err = {0};
  md_status status = md_events_read(&events, &path, 1, &err);
  if (status != MD_OK) {
    fuzz_check_failure(status, &err, FUZZ_ST(MD_E_FORMAT) | FUZZ_ST(MD_E_IO), path);
    FUZZ_CHECK(events.n_regions == 0 && events.regions == NULL && events.n_rows == 0);
    return 0;
  }
  check_events(&events);

  md_priors priors = {0};
  md_regions_settings settings = {.level = 0.95, .band = MD_KM_BAND_LOG, .priors = &priors};
  if (size > 0) {
    /* Vary the settings with the input, deterministically. */
    settings.band = (md_km_band)(data[size - 1] % 3);
    settings.drop_curves = data[0] & 1;
  }
  md_regions_results results;
  md_error fit_err = {0};
  status = md_regions_fit_all(&events, &settings, &results, &fit_err);
  FUZZ_CHECK_MSG(status == MD_OK || status == MD_E_NOMEM, "the fit failed: %s", fit_err.message);
  if (status == MD_OK) {
    check_fit(&events, &results);
    md_config config = {.generator_version = "0.0.0", .model_name = NULL};
    md_regions_config_storage storage = {0};
    status = md_regions_config(&results, &settings, &config, &storage, &fit_err);
    FUZZ_CHECK(status == MD_OK);
    const char *source = "events.csv";
    config.workload.n_sources = 1;
    config.workload.sources = &source;
    config.workload.rows = events.n_rows;
    double weight = 0.0;
    for (size_t i = 0; i < results.n_regions; i++) weight += results.regions[i].totals.weight;
    config.workload.weight = weight;
    config.workload.episodes = config.workload.tokens = NAN;
    config.workload.decode_steps = config.workload.tau = config.workload.guard = NAN;
    char *text = NULL;
    status = md_config_dump(&config, &text, &fit_err);
    FUZZ_CHECK_MSG(status == MD_OK, "the dump failed: %s", fit_err.message);
    check_dump(text, &results, &config);
    free(text);
    md_regions_config_free(&storage);
    md_regions_results_free(&results);
  }
  md_events_free(&events);
  return 0;
}
