/* Writes example figures, so that anyone can look at what md_plot_write
 * draws: `meson test -C build plot_demo` leaves them in build/tests/plot/
 * (example-survival.png, example-survival-log.png, example-figure.png,
 * .svg and .pdf).
 *
 * The data are synthetic: exponential lifetimes with the half-lives of the
 * published MemDecay measurements (system 148-189 decode steps, scratchpad
 * 14-16, retrieval the longest-lived movable region), observed over a
 * 256-step window. The Kaplan-Meier curves are computed here with the plain
 * product-limit formula (no weights, no delayed entry) because the demo must
 * not depend on fit/; the figures only need plausible curves. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/plot/plot.h"
#include "tests/test_util.h"

#define WINDOW 256.0
#define TOKENS 400
#define Z95 1.959963984540054

typedef struct demo_region {
  const char *name;
  double half_life;
  bool pinned;
} demo_region;

static const demo_region demo_regions[] = {
    {"system", 165.0, true}, {"plan", 70.0, false},       {"user", 48.0, false},
    {"tool_in", 22.0, false}, {"tool_out", 31.0, false},  {"retrieval", 105.0, false},
    {"scratchpad", 15.0, false},
};
#define N_REGIONS (sizeof demo_regions / sizeof demo_regions[0])

/* A fixed linear congruential generator (Knuth's MMIX constants): the same
 * figures on every machine. */
static double uniform(uint64_t *state) {
  *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
  return ((*state >> 11) + 0.5) / 9007199254740992.0;
}

typedef struct lifetime {
  double time;
  int event;
} lifetime;

static int by_time(const void *a, const void *b) {
  double ta = ((const lifetime *)a)->time, tb = ((const lifetime *)b)->time;
  return (ta > tb) - (ta < tb);
}

/* Integer lifetimes, right-censored at the window end and, for a tenth of
 * the tokens, at a uniform time (episodes that ended early). */
static void draw_lifetimes(double half_life, uint64_t *state, lifetime *out) {
  double lambda = log(2.0) / half_life;
  for (int i = 0; i < TOKENS; i++) {
    double time = ceil(-log(uniform(state)) / lambda);
    double end = uniform(state) < 0.1 ? ceil(WINDOW * uniform(state)) : WINDOW;
    out[i].event = time <= end;
    out[i].time = time <= end ? time : end;
  }
  qsort(out, TOKENS, sizeof *out, by_time);
}

typedef struct demo_fit {
  md_km_curve km;
  double lambda, half_life, half_life_ci[2];
} demo_fit;

/* Product-limit estimate with Greenwood's variance of log S and the log
 * band; exponential rate d / T with the Wald interval on log lambda. */
static void fit_demo(const lifetime *lives, demo_fit *fit) {
  md_km_curve *km = &fit->km;
  memset(km, 0, sizeof *km);
  double **columns[] = {&km->time, &km->n_risk, &km->n_event, &km->n_censor,
                        &km->surv, &km->std_err, &km->lower, &km->upper};
  for (size_t c = 0; c < sizeof columns / sizeof columns[0]; c++)
    *columns[c] = calloc(TOKENS, sizeof(double));
  km->band = MD_KM_BAND_LOG;
  km->level = 0.95;
  double survival = 1.0, greenwood = 0.0, events = 0.0, exposure = 0.0;
  for (size_t i = 0; i < TOKENS;) {
    size_t j = i;
    double d = 0.0, c = 0.0, at_risk = TOKENS - i;
    for (; j < TOKENS && lives[j].time == lives[i].time; j++) {
      d += lives[j].event;
      c += !lives[j].event;
      exposure += lives[j].time;
    }
    survival *= 1.0 - d / at_risk;
    if (at_risk > d) greenwood += d / (at_risk * (at_risk - d));
    size_t row = km->n_times++;
    km->time[row] = lives[i].time;
    km->n_risk[row] = at_risk;
    km->n_event[row] = d;
    km->n_censor[row] = c;
    km->surv[row] = survival;
    km->std_err[row] = survival > 0 ? sqrt(greenwood) : NAN;
    km->lower[row] = survival > 0 ? survival * exp(-Z95 * km->std_err[row]) : NAN;
    km->upper[row] = survival > 0 ? fmin(1.0, survival * exp(Z95 * km->std_err[row])) : NAN;
    events += d;
    i = j;
  }
  km->median = km->median_ci[0] = km->median_ci[1] = NAN;
  fit->lambda = events / exposure;
  fit->half_life = log(2.0) / fit->lambda;
  double spread = exp(Z95 / sqrt(events));
  fit->half_life_ci[0] = fit->half_life / spread;
  fit->half_life_ci[1] = fit->half_life * spread;
}

/* Mean relative attention: a slow decay towards a per-region level with
 * deterministic wobble; scratchpad tokens are born at step 3 (NaN before),
 * tool_out has no visible token for steps 120-139 (a gap in its line). */
static void fill_attention(size_t region, double *values, size_t n_steps) {
  static const double level[] = {4.0, 1.6, 1.1, 0.45, 0.7, 1.3, 2.4};
  for (size_t t = 0; t < n_steps; t++) {
    double wobble = 1.0 + 0.12 * sin(0.21 * t + region) + 0.06 * sin(0.77 * t + 2 * region);
    values[t] = level[region] * (0.55 + 0.45 * exp(-(double)t / 90.0)) * wobble;
  }
  if (strcmp(demo_regions[region].name, "scratchpad") == 0)
    for (size_t t = 0; t < 3; t++) values[t] = NAN;
  if (strcmp(demo_regions[region].name, "tool_out") == 0)
    for (size_t t = 120; t < 140 && t < n_steps; t++) values[t] = NAN;
}

static void free_demo(demo_fit *fit) {
  md_km_curve *km = &fit->km;
  double *columns[] = {km->time, km->n_risk, km->n_event, km->n_censor,
                       km->surv, km->std_err, km->lower, km->upper};
  for (size_t c = 0; c < sizeof columns / sizeof columns[0]; c++) free(columns[c]);
}

static void write_figure(const char *dir, const char *name, const md_plot_request *request) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  md_error err;
  md_status status = md_plot_write(path, request, &err);
  CHECK_MSG(status == MD_OK, "%s", err.message);
  if (status == MD_OK) printf("wrote %s\n", path);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : ".";
  uint64_t state = 20240611;
  demo_fit fits[N_REGIONS];
  md_plot_survival_series survival[N_REGIONS];
  md_plot_attention_series attention[N_REGIONS];
  double values[N_REGIONS][256];
  lifetime lives[TOKENS];
  for (size_t r = 0; r < N_REGIONS; r++) {
    draw_lifetimes(demo_regions[r].half_life, &state, lives);
    fit_demo(lives, &fits[r]);
    survival[r] = (md_plot_survival_series){
        .region = demo_regions[r].name, .km = &fits[r].km, .lambda = fits[r].lambda,
        .half_life = fits[r].half_life, .pinned = demo_regions[r].pinned,
        .half_life_ci = {fits[r].half_life_ci[0], fits[r].half_life_ci[1]}};
    fill_attention(r, values[r], 256);
    attention[r] = (md_plot_attention_series){demo_regions[r].name, 256, values[r]};
  }
  md_plot_request request = {.survival = survival, .n_survival = N_REGIONS};
  write_figure(dir, "example-survival.png", &request);
  request.log_time = true;
  request.censor_marks = true;
  write_figure(dir, "example-survival-log.png", &request);
  request.log_time = false;
  request.censor_marks = false;
  request.attention = attention;
  request.n_attention = N_REGIONS;
  write_figure(dir, "example-figure.png", &request);
  write_figure(dir, "example-figure.svg", &request);
  write_figure(dir, "example-figure.pdf", &request);
  for (size_t r = 0; r < N_REGIONS; r++) free_demo(&fits[r]);
  return md_test_finish("plot_demo");
}
