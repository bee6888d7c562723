/* Lifetimes, base priorities, EWMA, kappa, alpha and mean relative attention
 * on the synthetic dataset of tests/extract/fixtures, against the values
 * that tests/extract/make_fixtures.R computes in R from the definitions
 * (events exactly, floating-point values within 1e-6 relative). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fit/extract/lifetimes.h"
#include "fit/extract/attention_norm.h"
#include "tests/test_util.h"

#define RTOL 1e-6
#define MAX_FIELDS 8

/* ---- a minimal reader for the fixtures' plain CSV (no quoting) ---------- */

typedef struct table {
  size_t n_rows;
  char ***rows;  /* [n_rows][MAX_FIELDS] pointers into `text` */
  char *text;
} table;

static char *fixture_path(const char *name) {
  const char *root = getenv("MD_SOURCE_ROOT");
  static char path[4096];
  snprintf(path, sizeof path, "%s/tests/extract/fixtures/%s", root ? root : ".", name);
  return path;
}

static int read_table(const char *name, table *out) {
  memset(out, 0, sizeof *out);
  FILE *fp = fopen(fixture_path(name), "rb");
  if (!fp) {
    fprintf(stderr, "cannot open %s (set MD_SOURCE_ROOT)\n", fixture_path(name));
    return 0;
  }
  fseek(fp, 0, SEEK_END);
  long size = ftell(fp);
  rewind(fp);
  out->text = calloc((size_t)size + 1, 1);
  size_t got = fread(out->text, 1, (size_t)size, fp);
  fclose(fp);
  if (got != (size_t)size) return 0;
  size_t lines = 0;
  for (long k = 0; k < size; k++) lines += out->text[k] == '\n';
  out->rows = calloc(lines + 1, sizeof *out->rows);
  char *save = NULL;
  char *line = strtok_r(out->text, "\n", &save);  /* the header */
  while ((line = strtok_r(NULL, "\n", &save))) {
    char **fields = calloc(MAX_FIELDS, sizeof *fields);
    size_t n = 0;
    fields[n++] = line;
    for (char *c = line; *c && n < MAX_FIELDS; c++)
      if (*c == ',') { *c = '\0'; fields[n++] = c + 1; }
    out->rows[out->n_rows++] = fields;
  }
  return 1;
}

static void free_table(table *t) {
  for (size_t r = 0; r < t->n_rows; r++) free(t->rows[r]);
  free(t->rows);
  free(t->text);
}

/* ---- the dataset ---------------------------------------------------------- */

typedef struct dataset {
  size_t n_regions;
  const char *region_names[16];
  bool pinned[16];
  md_region_table regions;
  size_t n_episodes;
  md_attn_episode episodes[16];
  char ids[16][32];
} dataset;

static uint32_t region_index(const dataset *d, const char *name) {
  for (size_t r = 0; r < d->n_regions; r++)
    if (!strcmp(d->region_names[r], name)) return (uint32_t)r;
  fprintf(stderr, "unknown region %s\n", name);
  exit(1);
}

/* Rows of one episode are contiguous; steps and tokens are the largest
 * indices + 1; cells absent from the long format are 0. */
static void build_episode(dataset *d, const table *attn, size_t first, size_t end) {
  md_attn_episode *ep = &d->episodes[d->n_episodes];
  snprintf(d->ids[d->n_episodes], sizeof d->ids[0], "%s", attn->rows[first][0]);
  ep->id = d->ids[d->n_episodes++];
  for (size_t r = first; r < end; r++) {
    size_t step = strtoul(attn->rows[r][1], NULL, 10), token = strtoul(attn->rows[r][2], NULL, 10);
    if (step + 1 > ep->steps) ep->steps = step + 1;
    if (token + 1 > ep->tokens) ep->tokens = token + 1;
  }
  float *matrix = calloc(ep->steps * ep->tokens, sizeof *matrix);
  uint32_t *region = calloc(ep->tokens, sizeof *region);
  int32_t *birth = calloc(ep->tokens, sizeof *birth);
  for (size_t r = first; r < end; r++) {
    char **f = attn->rows[r];
    size_t step = strtoul(f[1], NULL, 10), token = strtoul(f[2], NULL, 10);
    region[token] = region_index(d, f[3]);
    birth[token] = (int32_t)strtol(f[4], NULL, 10);
    double a = strtod(f[5], NULL);
    matrix[step * ep->tokens + token] = (float)a;
    CHECK((double)(float)a == a);  /* the fixture's values are exact in float32 */
  }
  ep->attn = matrix;
  ep->region = region;
  ep->birth = birth;
}

static int load_dataset(dataset *d) {
  memset(d, 0, sizeof *d);
  table regions, attn;
  if (!read_table("regions.csv", &regions)) return 0;
  for (size_t r = 0; r < regions.n_rows; r++) {
    d->region_names[r] = strdup(regions.rows[r][0]);
    d->pinned[r] = atoi(regions.rows[r][1]) == 1;
  }
  d->n_regions = regions.n_rows;
  d->regions = (md_region_table){d->n_regions, d->region_names, d->pinned};
  free_table(&regions);
  if (!read_table("attn_synthetic.csv", &attn)) return 0;
  size_t first = 0;
  for (size_t r = 1; r <= attn.n_rows; r++)
    if (r == attn.n_rows || strcmp(attn.rows[r][0], attn.rows[first][0])) {
      build_episode(d, &attn, first, r);
      first = r;
    }
  free_table(&attn);
  return 1;
}

static void free_dataset(dataset *d) {
  for (size_t e = 0; e < d->n_episodes; e++) {
    free((void *)d->episodes[e].attn);
    free((void *)d->episodes[e].region);
    free((void *)d->episodes[e].birth);
  }
  for (size_t r = 0; r < d->n_regions; r++) free((void *)d->region_names[r]);
}

typedef struct param_set {
  char name[8];
  double tau, beta, quantile;
  long guard;
} param_set;

/* ---- comparisons ---------------------------------------------------------- */

static void compare_events(const md_event_buffer *got, const char *file) {
  table want;
  CHECK(read_table(file, &want));
  CHECK_MSG(got->n == want.n_rows, "%s: %zu rows, R has %zu", file, got->n, want.n_rows);
  size_t mismatches = 0;
  for (size_t r = 0; r < got->n && r < want.n_rows; r++) {
    const md_event_row *row = &got->rows[r];
    char **f = want.rows[r];
    int same = !strcmp(row->episode, f[0]) && row->pos == atol(f[1]) &&
               !strcmp(row->region_name, f[2]) && row->time == strtod(f[3], NULL) &&
               row->event == atoi(f[4]) && row->entry == strtod(f[5], NULL) &&
               row->weight == strtod(f[6], NULL);
    if (!same && mismatches++ < 5)
      CHECK_MSG(same, "%s row %zu: got %s,%lld,%s,%g,%d; R: %s,%s,%s,%s,%s", file, r + 1,
                row->episode, (long long)row->pos, row->region_name, row->time, row->event,
                f[0], f[1], f[2], f[3], f[4]);
  }
  CHECK(mismatches == 0);
  free_table(&want);
}

static const md_region_attn_stats *find_region(const md_attn_norm_result *res, const char *name) {
  for (size_t r = 0; r < res->n_regions; r++)
    if (!strcmp(res->regions[r].name, name)) return &res->regions[r];
  return NULL;
}

static void compare_region_quantity(const md_attn_norm_result *res, char **f) {
  const md_region_attn_stats *s = find_region(res, f[2]);
  CHECK_MSG(s != NULL, "region %s missing", f[2]);
  if (!s) return;
  const char *q = f[1];
  double want = strtod(f[3], NULL);
  int na = !strcmp(f[3], "NA");
  if (!strcmp(q, "tokens")) CHECK(s->tokens == (uint64_t)want);
  else if (!strcmp(q, "observed")) CHECK(s->observed_tokens == (uint64_t)want);
  else if (!strcmp(q, "refreshed")) CHECK(s->refreshed_tokens == (uint64_t)want);
  else if (!strcmp(q, "share")) {
    CHECK_MSG(s->share_defined == !na, "%s share defined", f[2]);
    if (!na) CHECK_REL(s->refreshed_share, want, RTOL);
  } else if (!strcmp(q, "base_priority")) {
    if (!na) CHECK_REL(s->base_priority, want, RTOL);
    else CHECK(!s->share_defined && !s->pinned);
  } else CHECK_MSG(0, "unknown quantity %s", q);
}

static void compare_stats(const md_attn_norm_result *res, const char *file) {
  table want;
  CHECK(read_table(file, &want));
  for (size_t r = 0; r < want.n_rows; r++) {
    char **f = want.rows[r];
    double value = strtod(f[3], NULL);
    if (!strcmp(f[1], "kappa_samples")) CHECK(res->kappa_samples == (uint64_t)value);
    else if (!strcmp(f[1], "kappa")) {
      CHECK(res->kappa_status == MD_KAPPA_OK);
      CHECK_REL(res->kappa, value, RTOL);
    } else if (!strcmp(f[1], "alpha")) {
      CHECK(res->alpha_defined);
      CHECK_REL(res->alpha, value, RTOL);
    } else if (!strcmp(f[1], "alpha_regions")) CHECK(res->alpha_regions == (size_t)value);
    else compare_region_quantity(res, f);
  }
  free_table(&want);
}

static void compare_means(const md_attn_norm_result *res) {
  table means, curve;
  CHECK(read_table("mean_relative_attention.csv", &means));
  for (size_t r = 0; r < means.n_rows; r++) {
    const md_region_attn_stats *s = find_region(res, means.rows[r][0]);
    CHECK(s && s->visible_pairs == strtoull(means.rows[r][1], NULL, 10));
    if (s) CHECK_REL(s->mean_relative_attention, strtod(means.rows[r][2], NULL), RTOL);
  }
  CHECK(read_table("curve.csv", &curve));
  size_t rows_per_region[16] = {0};
  for (size_t r = 0; r < curve.n_rows; r++) {
    char **f = curve.rows[r];
    const md_region_attn_stats *s = find_region(res, f[0]);
    size_t age = strtoul(f[1], NULL, 10);
    CHECK_MSG(s && age < s->curve_length, "curve %s age %zu", f[0], age);
    if (!s || age >= s->curve_length) continue;
    rows_per_region[s - res->regions]++;
    CHECK(s->curve_pairs[age] == strtoull(f[2], NULL, 10));
    CHECK_REL(s->curve_mean[age], strtod(f[3], NULL), RTOL);
  }
  for (size_t r = 0; r < res->n_regions; r++)
    CHECK_MSG(rows_per_region[r] == res->regions[r].curve_length, "curve length of %s",
              res->regions[r].name);
  free_table(&means);
  free_table(&curve);
}

static void compare_ewma(const dataset *d, const param_set *p) {
  char file[64];
  snprintf(file, sizeof file, "ewma_%s.csv", p->name);
  table want;
  CHECK(read_table(file, &want));
  size_t row = 0;
  double series[256], ewma[256];
  for (size_t e = 0; e < d->n_episodes; e++) {
    const md_attn_episode *ep = &d->episodes[e];
    uint32_t visible[256];
    CHECK(ep->steps <= 256 && md_attn_episode_check(ep, d->n_regions, visible, NULL) == MD_OK);
    for (size_t i = 0; i < ep->tokens && row < want.n_rows; i++, row++) {
      size_t n_ages = ep->steps - md_token_origin(ep, i);
      md_token_relative_attention(ep, visible, i, series);
      md_ewma(series, n_ages, p->beta, ewma);
      CHECK(!strcmp(want.rows[row][0], ep->id) && (size_t)atol(want.rows[row][1]) == i);
      CHECK_REL(ewma[n_ages - 1], strtod(want.rows[row][2], NULL), RTOL);
    }
  }
  CHECK(row == want.n_rows);
  free_table(&want);
}

/* The fixture must reach the refresh threshold exactly (a_hat == tau). */
static void check_boundaries_present(const dataset *d) {
  size_t at_one = 0, at_two = 0, just_under_one = 0;
  double series[256];
  for (size_t e = 0; e < d->n_episodes; e++) {
    const md_attn_episode *ep = &d->episodes[e];
    uint32_t visible[256];
    md_attn_episode_check(ep, d->n_regions, visible, NULL);
    for (size_t i = 0; i < ep->tokens; i++) {
      md_token_relative_attention(ep, visible, i, series);
      for (size_t k = 0; k < ep->steps - md_token_origin(ep, i); k++) {
        at_one += series[k] == 1.0;
        at_two += series[k] == 2.0;
        just_under_one += series[k] < 1.0 && series[k] > 1.0 - 1e-4;
      }
    }
  }
  CHECK(at_one > 0 && at_two > 0 && just_under_one > 0);
}

/* ---- runs ----------------------------------------------------------------- */

static void run_set(const dataset *d, const param_set *p, md_estimand estimand,
                    size_t memory_bytes) {
  md_error err = {0};
  md_lifetime_params lp = {.estimand = estimand, .tau = p->tau, .guard = p->guard};
  md_attn_norm_params np = {.ewma_beta = p->beta, .quantile = p->quantile,
                            .memory_bytes = memory_bytes};
  md_attn_norm *stats = NULL;
  CHECK(md_attn_norm_new(&d->regions, &np, &stats, &err) == MD_OK);
  md_event_buffer events = {0};
  for (size_t e = 0; e < d->n_episodes; e++)
    CHECK_MSG(md_lifetimes_episode(&d->episodes[e], &d->regions, &lp, md_event_buffer_sink,
                                   &events, stats, &err) == MD_OK, "%s", err.message);
  bool again = false;
  CHECK(md_attn_norm_end_pass(stats, &again, &err) == MD_OK);
  CHECK(again == (memory_bytes == 0));
  if (again) {
    for (size_t e = 0; e < d->n_episodes; e++)
      CHECK(md_lifetimes_episode(&d->episodes[e], &d->regions, &lp, NULL, NULL, stats, &err)
            == MD_OK);
    CHECK(md_attn_norm_end_pass(stats, &again, &err) == MD_OK && !again);
  }
  char file[64];
  snprintf(file, sizeof file, "events_%s_%s.csv", p->name, md_estimand_name(estimand));
  compare_events(&events, file);
  md_attn_norm_result res;
  CHECK_MSG(md_attn_norm_finish(stats, &res, &err) == MD_OK, "%s", err.message);
  CHECK(res.passes == (memory_bytes == 0 ? 2 : 1));
  snprintf(file, sizeof file, "stats_%s.csv", p->name);
  compare_stats(&res, file);
  compare_means(&res);
  md_attn_norm_result_free(&res);
  md_attn_norm_free(stats);
  md_event_buffer_free(&events);
}

int main(void) {
  dataset d;
  CHECK(load_dataset(&d));
  CHECK(d.n_episodes == 6);
  check_boundaries_present(&d);
  table params;
  CHECK(read_table("params.csv", &params));
  CHECK(params.n_rows == 2);
  for (size_t s = 0; s < params.n_rows; s++) {
    char **f = params.rows[s];
    param_set p = {.tau = strtod(f[1], NULL), .guard = atol(f[2]), .beta = strtod(f[3], NULL),
                   .quantile = strtod(f[4], NULL)};
    snprintf(p.name, sizeof p.name, "%s", f[0]);
    /* last-use keeping the EWMA values in memory, gap with a forced second pass */
    run_set(&d, &p, MD_ESTIMAND_LAST_USE, MD_ATTN_NORM_DEFAULT_MEMORY);
    run_set(&d, &p, MD_ESTIMAND_GAP, 0);
    compare_ewma(&d, &p);
  }
  free_table(&params);
  free_dataset(&d);
  return md_test_finish("extract_fixtures");
}
