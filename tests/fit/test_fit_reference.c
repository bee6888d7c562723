/* Every number R survival gave for the fixture datasets (see
 * tests/fit/make_fixtures.R) against ours.
 *
 * Tolerance: 1e-6 relative, no absolute floor (an exact 0 in R must be an
 * exact 0 here), for every quantity, including the references that come
 * from maximising the left-truncated likelihood directly in R (nlminb
 * polished by Newton steps to a vanishing gradient; information by
 * optimHess) and the profile-likelihood ends (uniroot at tol 1e-14 on
 * log lambda): those are far more accurate than 1e-6, so no looser
 * tolerance is needed. NA in R must be NaN here; R's Inf must be Inf.
 * Every answer line must be checked: an unknown quantity or an answer left
 * over fails the test. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "survival/exponential.h"
#include "survival/km.h"
#include "survival/logrank.h"
#include "survival/surv_data.h"
#include "survival/weibull.h"
#include "tests/fit/fixture.h"
#include "tests/test_util.h"

static const double RTOL = 1e-6;

typedef struct region_fits {
  md_surv_table table;
  md_exponential_fit exponential;
  md_weibull_fit weibull;
  md_km_curve km[3]; /* indexed by md_km_band */
} region_fits;

typedef struct dataset_fits {
  const char *name;
  double level;
  fixture_dataset data;
  region_fits regions[32];
  md_surv_table tables[32]; /* shallow copies for the log-rank calls */
  md_logrank_result overall;
  double *pair_chisq, *pair_p; /* md_logrank_pairwise */
} dataset_fits;

static void check_ok(md_status status, const md_error *err, const char *what) {
  CHECK_MSG(status == MD_OK, "%s: %s", what, err->message);
  if (status != MD_OK) exit(md_test_finish("test_fit_reference"));
}

static void fit_region(const fixture_region *region, double level, region_fits *fits) {
  md_error err = {0};
  md_surv_data data = fixture_surv_data(region);
  check_ok(md_surv_table_build(&data, &fits->table, &err), &err, region->name);
  check_ok(md_fit_exponential(&fits->table, level, &fits->exponential, &err), &err, region->name);
  check_ok(md_fit_weibull(&fits->table, &fits->exponential, level, &fits->weibull, &err), &err,
           region->name);
  for (int band = 0; band < 3; band++)
    check_ok(md_km_fit(&fits->table, (md_km_band)band, level, &fits->km[band], &err), &err,
             region->name);
}

static void fit_dataset(dataset_fits *d) {
  size_t G = d->data.n_regions;
  for (size_t k = 0; k < G; k++) {
    fit_region(&d->data.regions[k], d->level, &d->regions[k]);
    d->tables[k] = d->regions[k].table;
  }
  md_error err = {0};
  if (G < 2) return;
  check_ok(md_logrank(d->tables, G, &d->overall, &err), &err, "log-rank");
  d->pair_chisq = malloc(G * G * sizeof(double));
  d->pair_p = malloc(G * G * sizeof(double));
  check_ok(md_logrank_pairwise(d->tables, G, d->pair_chisq, d->pair_p, &err), &err, "pairwise");
}

static void free_dataset(dataset_fits *d) {
  for (size_t k = 0; k < d->data.n_regions; k++) {
    md_surv_table_free(&d->regions[k].table);
    for (int band = 0; band < 3; band++) md_km_curve_free(&d->regions[k].km[band]);
  }
  md_logrank_result_free(&d->overall);
  free(d->pair_chisq);
  free(d->pair_p);
  fixture_free_dataset(&d->data);
}

/* ---- looking our value up ---------------------------------------------- */

static bool pick(size_t index, size_t n, const double *values, double *out) {
  if (index >= n) return false;
  *out = values[index];
  return true;
}

static bool exponential_value(const md_exponential_fit *f, const char *q, size_t i, double *v) {
  if (!strcmp(q, "exp_estimable")) return pick(i, 1, (double[]){f->estimable}, v);
  if (!strcmp(q, "exp_events")) return pick(i, 1, &f->events, v);
  if (!strcmp(q, "exp_exposure")) return pick(i, 1, &f->exposure, v);
  if (!strcmp(q, "exp_lambda")) return pick(i, 1, &f->lambda, v);
  if (!strcmp(q, "exp_log_lambda_se")) return pick(i, 1, &f->log_lambda_se, v);
  if (!strcmp(q, "exp_ci_wald")) return pick(i, 2, f->lambda_ci_wald, v);
  if (!strcmp(q, "exp_ci_profile")) return pick(i, 2, f->lambda_ci_profile, v);
  if (!strcmp(q, "exp_loglik")) return pick(i, 1, &f->loglik, v);
  if (!strcmp(q, "exp_aic")) return pick(i, 1, &f->aic, v);
  return false;
}

static bool weibull_value(const md_weibull_fit *f, const char *q, size_t i, double *v) {
  if (!strcmp(q, "weib_estimable")) return pick(i, 1, (double[]){f->estimable}, v);
  if (!strcmp(q, "weib_mu")) return pick(i, 1, &f->mu, v);
  if (!strcmp(q, "weib_log_sigma")) return pick(i, 1, &f->log_sigma, v);
  if (!strcmp(q, "weib_vcov")) return pick(i, 4, &f->vcov[0][0], v);
  if (!strcmp(q, "weib_shape")) return pick(i, 1, &f->shape, v);
  if (!strcmp(q, "weib_scale")) return pick(i, 1, &f->scale, v);
  if (!strcmp(q, "weib_shape_ci")) return pick(i, 2, f->shape_ci, v);
  if (!strcmp(q, "weib_scale_ci")) return pick(i, 2, f->scale_ci, v);
  if (!strcmp(q, "weib_loglik")) return pick(i, 1, &f->loglik, v);
  if (!strcmp(q, "weib_aic")) return pick(i, 1, &f->aic, v);
  if (!strcmp(q, "weib_lrt")) return pick(i, 1, &f->lrt_statistic, v);
  if (!strcmp(q, "weib_lrt_p")) return pick(i, 1, &f->lrt_p, v);
  return false;
}

static bool km_value(const md_km_curve km[3], const char *q, size_t i, double *v) {
  const md_km_curve *log = &km[MD_KM_BAND_LOG];
  size_t n = log->n_times;
  if (!strcmp(q, "km_time")) return pick(i, n, log->time, v);
  if (!strcmp(q, "km_n_risk")) return pick(i, n, log->n_risk, v);
  if (!strcmp(q, "km_n_event")) return pick(i, n, log->n_event, v);
  if (!strcmp(q, "km_n_censor")) return pick(i, n, log->n_censor, v);
  if (!strcmp(q, "km_surv")) return pick(i, n, log->surv, v);
  if (!strcmp(q, "km_std_err")) return pick(i, n, log->std_err, v);
  static const char *prefixes[3] = {"km_log_", "km_loglog_", "km_plain_"};
  for (int band = 0; band < 3; band++) {
    size_t len = strlen(prefixes[band]);
    if (strncmp(q, prefixes[band], len) != 0) continue;
    const md_km_curve *c = &km[band];
    const char *rest = q + len;
    if (!strcmp(rest, "lower")) return pick(i, c->n_times, c->lower, v);
    if (!strcmp(rest, "upper")) return pick(i, c->n_times, c->upper, v);
    if (!strcmp(rest, "median"))
      return pick(i, 3, (double[]){c->median, c->median_ci[0], c->median_ci[1]}, v);
  }
  return false;
}

static bool logrank_value(const md_logrank_result *r, const char *q, size_t i, double *v) {
  size_t G = r->n_groups;
  if (!strcmp(q, "lr_obs")) return pick(i, G, r->observed, v);
  if (!strcmp(q, "lr_exp")) return pick(i, G, r->expected, v);
  if (!strcmp(q, "lr_var")) return pick(i, G * G, r->variance, v);
  if (!strcmp(q, "lr_chisq")) return pick(i, 1, &r->chisq, v);
  if (!strcmp(q, "lr_df")) return pick(i, 1, (double[]){r->df}, v);
  if (!strcmp(q, "lr_p")) return pick(i, 1, &r->p_value, v);
  return false;
}

/* ---- comparing ---------------------------------------------------------- */

/* The largest relative difference seen, reported per dataset. */
static double worst_difference;
static char worst_quantity[256];

static void compare(const dataset_fits *d, const fixture_answer *a, double got) {
  md_test_checks++;
  if (isfinite(got) && isfinite(a->value) && a->value != 0.0) {
    double difference = fabs(got - a->value) / fabs(a->value);
    if (difference > worst_difference) {
      worst_difference = difference;
      snprintf(worst_quantity, sizeof worst_quantity, "%s %s[%zu]", a->region, a->quantity,
               a->index);
    }
  }
  if (md_test_close(got, a->value, RTOL, 0.0)) return;
  md_test_failures++;
  fprintf(stderr, "%s %s %s[%zu]: got %.17g, R %.17g\n", d->name, a->region, a->quantity, a->index,
          got, a->value);
}

/* survdiff gives chisq 0 and df = (groups with E > 0) - 1, possibly 0 or
 * -1, with p = pchisq(0, df) (1 or NaN): we report the test as not
 * estimable, df 0 and p NaN instead. */
static bool compare_logrank(const dataset_fits *d, const md_logrank_result *r,
                            const fixture_answer *a, double r_df) {
  double got;
  if (r_df < 1 && !strcmp(a->quantity, "lr_df")) {
    CHECK_MSG(!r->estimable && r->df == 0, "%s %s: df %d, estimable %d", d->name, a->region, r->df,
              r->estimable);
    return true;
  }
  if (r_df < 1 && !strcmp(a->quantity, "lr_p")) {
    CHECK_MSG(isnan(r->p_value), "%s %s: p %g, expected NaN (not estimable)", d->name, a->region,
              r->p_value);
    return true;
  }
  if (!logrank_value(r, a->quantity, a->index, &got)) return false;
  compare(d, a, got);
  return true;
}

static double answer_df(const fixture_answers *answers, const char *region) {
  for (size_t i = 0; i < answers->n; i++)
    if (!strcmp(answers->items[i].region, region) && !strcmp(answers->items[i].quantity, "lr_df"))
      return answers->items[i].value;
  return NAN;
}

static bool check_pair(const dataset_fits *d, const fixture_answers *answers,
                       const fixture_answer *a) {
  char first[160];
  snprintf(first, sizeof first, "%s", a->region);
  char *bar = strchr(first, '|');
  if (!bar) return false;
  *bar = '\0';
  int i = fixture_region_index(&d->data, first), j = fixture_region_index(&d->data, bar + 1);
  if (i < 0 || j < 0) return false;
  md_surv_table pair[2] = {d->tables[i], d->tables[j]};
  md_logrank_result r;
  md_error err = {0};
  check_ok(md_logrank(pair, 2, &r, &err), &err, a->region);
  double r_df = answer_df(answers, a->region);
  bool known = compare_logrank(d, &r, a, r_df);
  /* The pairwise matrix must hold the same test. */
  size_t G = d->data.n_regions;
  if (!strcmp(a->quantity, "lr_chisq")) {
    double want = r.estimable ? r.chisq : NAN;
    CHECK(md_test_close(d->pair_chisq[i * G + j], want, 0.0, 0.0));
    CHECK(md_test_close(d->pair_chisq[j * G + i], want, 0.0, 0.0));
  }
  if (!strcmp(a->quantity, "lr_p")) CHECK(md_test_close(d->pair_p[i * G + j], r.p_value, 0.0, 0.0));
  md_logrank_result_free(&r);
  return known;
}

static bool check_answer(const dataset_fits *d, const fixture_answers *answers,
                         const fixture_answer *a) {
  if (!strcmp(a->region, "*") && !strcmp(a->quantity, "level")) return true;
  if (!strncmp(a->quantity, "lr_", 3)) {
    if (!strcmp(a->region, "*"))
      return compare_logrank(d, &d->overall, a, answer_df(answers, "*"));
    return check_pair(d, answers, a);
  }
  int k = fixture_region_index(&d->data, a->region);
  if (k < 0) return false;
  const region_fits *f = &d->regions[k];
  double got;
  bool known = exponential_value(&f->exponential, a->quantity, a->index, &got) ||
               weibull_value(&f->weibull, a->quantity, a->index, &got) ||
               km_value(f->km, a->quantity, a->index, &got);
  if (known) compare(d, a, got);
  return known;
}

/* Our curves must have exactly as many rows as R's. */
static void check_curve_lengths(const dataset_fits *d, const fixture_answers *answers) {
  for (size_t k = 0; k < d->data.n_regions; k++) {
    size_t rows = 0;
    for (size_t i = 0; i < answers->n; i++)
      rows += !strcmp(answers->items[i].region, d->data.regions[k].name) &&
              !strcmp(answers->items[i].quantity, "km_time");
    for (int band = 0; band < 3; band++)
      CHECK_MSG(d->regions[k].km[band].n_times == rows, "%s %s: %zu curve rows, R has %zu", d->name,
                d->data.regions[k].name, d->regions[k].km[band].n_times, rows);
  }
}

static double answer_level(const fixture_answers *answers) {
  for (size_t i = 0; i < answers->n; i++)
    if (!strcmp(answers->items[i].quantity, "level")) return answers->items[i].value;
  fprintf(stderr, "fixture has no level\n");
  exit(2);
}

static void run_dataset(const char *name) {
  char path[256];
  dataset_fits d;
  memset(&d, 0, sizeof d);
  d.name = name;
  fixture_answers answers;
  snprintf(path, sizeof path, "tests/fit/fixtures/%s.tsv", name);
  fixture_load_answers(path, &answers);
  snprintf(path, sizeof path, "tests/fit/fixtures/%s.csv", name);
  fixture_load_dataset(path, &d.data);
  d.level = answer_level(&answers);
  fit_dataset(&d);
  size_t checked = 0;
  worst_difference = 0.0;
  worst_quantity[0] = '\0';
  for (size_t i = 0; i < answers.n; i++) {
    const fixture_answer *a = &answers.items[i];
    bool known = check_answer(&d, &answers, a);
    CHECK_MSG(known, "%s: answer %s %s[%zu] has no counterpart", name, a->region, a->quantity,
              a->index);
    checked += known;
  }
  CHECK_MSG(checked == answers.n && answers.n > 0, "%s: %zu of %zu answers checked", name, checked,
            answers.n);
  check_curve_lengths(&d, &answers);
  printf("%s: %zu R answers compared; largest relative difference %.3g (%s)\n", name, checked,
         worst_difference, worst_quantity);
  fixture_free_answers(&answers);
  free_dataset(&d);
}

int main(void) {
  const char *datasets[] = {"regions", "weights_int", "weights_frac", "entry", "entry_ties", "edge"};
  for (size_t i = 0; i < sizeof datasets / sizeof datasets[0]; i++) run_dataset(datasets[i]);
  return md_test_finish("test_fit_reference");
}
