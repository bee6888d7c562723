/* memdecay-calibrate check: compares a freshly fitted config with a golden
 * one and fails when a half-life (or a base priority, or a normalisation
 * constant) drifted. Meant for CI. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/cli.h"
#include "calib/commands.h"
#include "io/formats/config.h"
#include "io/formats/eval_results.h"
#include "io/files/json_fields.h"

typedef struct check_options {
  const char *golden;
  const char *fresh;
  double rtol;
  long probes;
  double retention;
  bool quiet;
} check_options;

static void print_help(FILE *out) {
  fputs(
      "Usage: " MD_PROGRAM " check NEW.json --golden GOLDEN.json [--rtol R]\n"
      "       " MD_PROGRAM " check RESULTS.json --golden GOLDEN-RESULTS.json [--probes N]\n"
      "                  [--retention D]\n"
      "\n"
      "Compares a config written by '" MD_PROGRAM " fit' (NEW.json) with a golden one\n"
      "and fails when the fitted decay drifted, e.g. after a change of model, prompts\n"
      "or runtime. Prints one row per compared quantity on standard output: region,\n"
      "quantity, golden value, new value, change in %, verdict.\n"
      "\n"
      "Drift rules (R = --rtol):\n"
      "  half_life      drifts when the new half-life lies outside the golden interval\n"
      "                 widened by R: [lo*(1-R), hi*(1+R)]. A null bound is open (0 or\n"
      "                 infinity); a golden half-life without interval uses |new/golden-1| > R.\n"
      "  lambda, base_priority, pinned, policy alpha and kappa: drift when the relative\n"
      "                 change exceeds R (pinned: when it differs).\n"
      "  policy tau, ewma_beta and page_size (settings the runtime reads): drift when\n"
      "                 they differ at all.\n"
      "  pooled lambda  (one rate for every unpinned region) as lambda, when the golden\n"
      "                 config has a pooled fit; a new config without one drifts.\n"
      "  null vs null is ok; null vs a number is drift; a region present on one side\n"
      "  only is drift.\n"
      "\n"
      "Given eval results (memdecay-eval(5), format memdecay-eval/1, told apart by the\n"
      "golden file's \"format\"), it compares the recall of every region under every\n"
      "policy and budget instead: a region whose recalled count moved by more than N\n"
      "probes (--probes, default 1) drifts, and so does a different probe total, or a\n"
      "policy, budget or region present on one side only; and a region whose retention\n"
      "(the share of its answers' tokens still cached) moved by more than D (--retention,\n"
      "default 0.05) drifts too, as does a retention null on one side only.\n"
      "\n"
      "Options:\n"
      "      --golden FILE   the reference config (required)\n"
      "      --rtol R        relative tolerance, 0 <= R < 1 (default 0.10)\n"
      "      --probes N      eval results: recall change allowed per cell (default 1)\n"
      "      --retention D   eval results: retention change allowed per cell (default 0.05)\n"
      "  -q, --quiet         print only the rows that drifted and the result line\n"
      "  -h, --help          show this help\n"
      "\n"
      "Exit status: 0 nothing drifted, 1 drift or a missing region, 2 unreadable or\n"
      "invalid input or usage.\n"
      "\n"
      "Example:\n"
      "  " MD_PROGRAM " check memdecay.json --golden data/golden/memdecay.json --rtol 0.1\n",
      out);
}

enum { OPT_GOLDEN, OPT_RTOL, OPT_PROBES, OPT_RETENTION, OPT_QUIET, OPT_HELP };

static const md_opt check_table[] = {
    {"golden", 0, OPT_GOLDEN, "FILE"},
    {"rtol", 0, OPT_RTOL, "R"},
    {"probes", 0, OPT_PROBES, "N"},
    {"retention", 0, OPT_RETENTION, "D"},
    {"quiet", 'q', OPT_QUIET, NULL},
    {"help", 'h', OPT_HELP, NULL},
    {NULL, 0, 0, NULL},
};

/* Handles one option; returns -1 to go on, or an exit code. */
static int take_option(void *context, const md_opt *opt, const char *value) {
  check_options *options = context;
  switch (opt->id) {
    case OPT_GOLDEN: options->golden = value; return -1;
    case OPT_RTOL:
      if (!md_cli_parse_double(value, 0.0, 1.0, &options->rtol) || options->rtol >= 1.0)
        return md_cli_usage_error("check", "--rtol must be a number in [0, 1), got '%s'", value);
      return -1;
    case OPT_PROBES:
      if (!md_cli_parse_long(value, 0, 1L << 30, &options->probes))
        return md_cli_usage_error("check", "--probes must be a count >= 0, got '%s'", value);
      return -1;
    case OPT_RETENTION:
      if (!md_cli_parse_double(value, 0.0, 1.0, &options->retention))
        return md_cli_usage_error("check", "--retention must be a number in [0, 1], got '%s'",
                                  value);
      return -1;
    case OPT_QUIET: options->quiet = true; return -1;
    case OPT_HELP: print_help(stdout); return MD_EXIT_OK;
    default: return md_cli_usage_error("check", "unknown option");
  }
}

static const md_opt_group groups[] = {{check_table, take_option}, {NULL, NULL}};

const md_opt_command md_check_command = {"check", groups, print_help, 0};

/* Returns -1 when the run should go on, else the exit code. */
static int parse_options(int argc, char **argv, check_options *options) {
  options->rtol = 0.10;
  options->probes = 1;
  options->retention = 0.05;
  char **args;
  int n_args;
  int exit_code = md_opt_parse_or_report(&md_check_command, options, argc, argv, &args, &n_args);
  if (exit_code >= 0) return exit_code;
  if (!options->golden) return md_cli_usage_error("check", "--golden GOLDEN.json is required");
  if (n_args != 1) {
    return md_cli_usage_error("check", "expected exactly one NEW.json, got %d files", n_args);
  }
  options->fresh = args[0];
  return -1;
}

/* ---- comparison rules --------------------------------------------------- */

typedef struct verdict {
  bool drift;
  char why[96];  /* shown after the verdict */
} verdict;

static verdict make_verdict(bool drift, const char *why) {
  verdict v = {.drift = drift};
  snprintf(v.why, sizeof v.why, "%s", why);
  return v;
}

static verdict compare_null(double golden, double fresh) {
  if (isnan(golden) && isnan(fresh)) return make_verdict(false, "both null");
  if (isnan(fresh)) return make_verdict(true, "null in new");
  return make_verdict(true, "null in golden");
}

static verdict compare_relative(double golden, double fresh, double rtol) {
  if (isnan(golden) || isnan(fresh)) return compare_null(golden, fresh);
  bool drift = fabs(fresh - golden) > rtol * fabs(golden);
  return make_verdict(drift, drift ? "relative change above rtol" : "");
}

/* A setting (tau, the EWMA's beta, the page size): any change drifts. */
static verdict compare_exact(double golden, double fresh) {
  if (isnan(golden) || isnan(fresh)) return compare_null(golden, fresh);
  bool drift = golden != fresh;
  return make_verdict(drift, drift ? "setting changed" : "");
}

/* The golden interval widened by rtol; a null bound is open. */
static verdict compare_half_life(const md_config_read_region *golden, double fresh, double rtol) {
  if (isnan(golden->half_life) || isnan(fresh)) return compare_null(golden->half_life, fresh);
  const double *ci = golden->half_life_ci;
  if (isnan(ci[0]) && isnan(ci[1])) return compare_relative(golden->half_life, fresh, rtol);
  double lower = isnan(ci[0]) ? 0.0 : ci[0] * (1.0 - rtol);
  double upper = isnan(ci[1]) ? INFINITY : ci[1] * (1.0 + rtol);
  if (fresh >= lower && fresh <= upper) return make_verdict(false, "");
  verdict v = {.drift = true};
  snprintf(v.why, sizeof v.why, "%s the widened golden interval [%.6g, %.6g]",
           fresh < lower ? "below" : "above", lower, upper);
  return v;
}

/* ---- the table ------------------------------------------------------------ */

typedef struct tally {
  size_t compared;
  size_t drifted;
  bool quiet;
} tally;

static void format_value(char *out, size_t size, double value) {
  if (isnan(value)) {
    snprintf(out, size, "null");
  } else {
    snprintf(out, size, "%.6g", value);
  }
}

static void print_row(tally *t, const char *region, const char *quantity, const char *golden,
                      const char *fresh, double change, verdict v) {
  t->compared++;
  if (v.drift) t->drifted++;
  if (t->quiet && !v.drift) return;
  char change_text[32] = "-";
  if (isfinite(change)) snprintf(change_text, sizeof change_text, "%+.1f%%", 100.0 * change);
  printf("%-12s %-14s %-26s %-12s %8s  %s%s%s%s\n", region, quantity, golden, fresh, change_text,
         v.drift ? "DRIFT" : "ok", v.why[0] ? " (" : "", v.why, v.why[0] ? ")" : "");
}

static double relative_change(double golden, double fresh) {
  return (golden != 0.0) ? (fresh - golden) / golden : NAN;
}

static void compare_number(tally *t, const char *region, const char *quantity, double golden,
                           double fresh, double rtol) {
  char golden_text[32], fresh_text[32];
  format_value(golden_text, sizeof golden_text, golden);
  format_value(fresh_text, sizeof fresh_text, fresh);
  print_row(t, region, quantity, golden_text, fresh_text, relative_change(golden, fresh),
            compare_relative(golden, fresh, rtol));
}

static void compare_region(tally *t, const md_config_read_region *golden,
                           const md_config_read_region *fresh, double rtol) {
  char golden_text[128], fresh_text[32], value[32], lower[32], upper[32];
  format_value(value, sizeof value, golden->half_life);
  format_value(lower, sizeof lower, golden->half_life_ci[0]);
  format_value(upper, sizeof upper, golden->half_life_ci[1]);
  snprintf(golden_text, sizeof golden_text, "%s [%s, %s]", value, lower, upper);
  format_value(fresh_text, sizeof fresh_text, fresh->half_life);
  print_row(t, golden->name, "half_life", golden_text, fresh_text,
            relative_change(golden->half_life, fresh->half_life),
            compare_half_life(golden, fresh->half_life, rtol));
  compare_number(t, golden->name, "lambda", golden->lambda, fresh->lambda, rtol);
  compare_number(t, golden->name, "base_priority", golden->base_priority, fresh->base_priority,
                 rtol);
  bool pin_changed = golden->pinned != fresh->pinned;
  print_row(t, golden->name, "pinned", golden->pinned ? "true" : "false",
            fresh->pinned ? "true" : "false", NAN,
            make_verdict(pin_changed, pin_changed ? "pinning changed" : ""));
}

static const md_config_read_region *find_region(const md_config_summary *config,
                                                const char *name) {
  for (size_t i = 0; i < config->n_regions; i++) {
    if (!strcmp(config->regions[i].name, name)) return &config->regions[i];
  }
  return NULL;
}

static void compare_configs(tally *t, const md_config_summary *golden,
                            const md_config_summary *fresh, double rtol) {
  for (size_t i = 0; i < golden->n_regions; i++) {
    const md_config_read_region *match = find_region(fresh, golden->regions[i].name);
    if (match) {
      compare_region(t, &golden->regions[i], match, rtol);
    } else {
      print_row(t, golden->regions[i].name, "region", "present", "missing", NAN,
                make_verdict(true, "region missing in new"));
    }
  }
  for (size_t i = 0; i < fresh->n_regions; i++) {
    if (!find_region(golden, fresh->regions[i].name)) {
      print_row(t, fresh->regions[i].name, "region", "missing", "present", NAN,
                make_verdict(true, "region missing in golden"));
    }
  }
  if (!isnan(golden->alpha) || !isnan(fresh->alpha)) {
    compare_number(t, "policy", "alpha", golden->alpha, fresh->alpha, rtol);
  }
  if (!isnan(golden->kappa) || !isnan(fresh->kappa)) {
    compare_number(t, "policy", "kappa", golden->kappa, fresh->kappa, rtol);
  }
  /* The pooled rate, when the golden has one (configs written before the
   * fit computed it have none: nothing to compare). */
  if (golden->has_pooled) {
    if (fresh->has_pooled) {
      compare_number(t, "pooled", "lambda", golden->pooled_lambda, fresh->pooled_lambda, rtol);
    } else {
      print_row(t, "pooled", "fit", "present", "missing", NAN,
                make_verdict(true, "pooled fit missing in new"));
    }
  }
  /* The settings the runtime reads with them (0 pages: absent). */
  const double settings[3][2] = {
      {golden->tau, fresh->tau},
      {golden->ewma_beta, fresh->ewma_beta},
      {golden->page_size > 0 ? golden->page_size : NAN, fresh->page_size > 0 ? fresh->page_size : NAN}};
  const char *names[3] = {"tau", "ewma_beta", "page_size"};
  for (int i = 0; i < 3; i++) {
    char golden_text[32], fresh_text[32];
    format_value(golden_text, sizeof golden_text, settings[i][0]);
    format_value(fresh_text, sizeof fresh_text, settings[i][1]);
    print_row(t, "policy", names[i], golden_text, fresh_text,
              relative_change(settings[i][0], settings[i][1]),
              compare_exact(settings[i][0], settings[i][1]));
  }
}

static int run(const check_options *options) {
  md_error err = {0};
  md_config_summary golden, fresh;
  if (md_config_read(options->golden, &golden, &err) != MD_OK) return md_cli_report(&err);
  if (md_config_read(options->fresh, &fresh, &err) != MD_OK) {
    md_config_summary_free(&golden);
    return md_cli_report(&err);
  }
  tally t = {.quiet = options->quiet};
  printf("%-12s %-14s %-26s %-12s %8s  %s\n", "region", "quantity", "golden", "new", "change",
         "verdict");
  compare_configs(&t, &golden, &fresh, options->rtol);
  printf("%s: %zu of %zu comparisons drifted (rtol %g)\n", t.drifted ? "DRIFT" : "OK", t.drifted,
         t.compared, options->rtol);
  md_config_summary_free(&golden);
  md_config_summary_free(&fresh);
  return t.drifted ? MD_EXIT_DRIFT : MD_EXIT_OK;
}

/* ---- eval results ---------------------------------------------------------- */

static void compare_cell(tally *t, const char *policy, double budget, const char *region,
                         const md_eval_cell *golden, const md_eval_cell *fresh, long probes,
                         double retention) {
  char label[64], golden_text[32], fresh_text[32];
  snprintf(label, sizeof label, "%s@%g", policy, budget);
  if (!golden || !fresh) {
    print_row(t, region, label, golden ? "present" : "missing", fresh ? "present" : "missing",
              NAN, make_verdict(true, golden ? "missing in new" : "missing in golden"));
    return;
  }
  snprintf(golden_text, sizeof golden_text, "%zu/%zu", golden->recalled, golden->total);
  snprintf(fresh_text, sizeof fresh_text, "%zu/%zu", fresh->recalled, fresh->total);
  long moved = (long)fresh->recalled - (long)golden->recalled;
  verdict v = make_verdict(false, "");
  if (golden->total != fresh->total) {
    v = make_verdict(true, "different probe total");
  } else if (labs(moved) > probes) {
    v.drift = true;
    snprintf(v.why, sizeof v.why, "recall moved by %ld probes, more than %ld", moved, probes);
  }
  print_row(t, region, label, golden_text, fresh_text,
            golden->recalled ? (double)moved / (double)golden->recalled : NAN, v);
  double rg = golden->answer_tokens ? (double)golden->answer_kept / (double)golden->answer_tokens : NAN;
  double rf = fresh->answer_tokens ? (double)fresh->answer_kept / (double)fresh->answer_tokens : NAN;
  char retention_label[80];
  snprintf(retention_label, sizeof retention_label, "%s retention", label);
  format_value(golden_text, sizeof golden_text, rg);
  format_value(fresh_text, sizeof fresh_text, rf);
  verdict rv = isnan(rg) || isnan(rf) ? compare_null(rg, rf) : make_verdict(false, "");
  if (!isnan(rg) && !isnan(rf) && fabs(rf - rg) > retention + 1e-9) {
    rv.drift = true;
    snprintf(rv.why, sizeof rv.why, "retention moved by %+.3f, more than %g", rf - rg, retention);
  }
  print_row(t, region, retention_label, golden_text, fresh_text, rg > 0 ? (rf - rg) / rg : NAN, rv);
}

static int find_eval_region(const md_eval_results *r, const char *name) {
  for (size_t g = 0; g < r->n_regions; g++)
    if (!strcmp(r->regions[g], name)) return (int)g;
  return -1;
}

static void compare_eval(tally *t, const md_eval_results *golden, const md_eval_results *fresh,
                         long probes, double retention) {
  for (size_t run = 0; run < golden->n_runs; run++) {
    int other = md_eval_run_index(fresh, golden->run_policy[run], golden->run_budget[run]);
    for (size_t g = 0; g < golden->n_regions; g++) {
      int h = find_eval_region(fresh, golden->regions[g]);
      compare_cell(t, golden->run_policy[run], golden->run_budget[run], golden->regions[g],
                   md_eval_cell_at(golden, run, g),
                   other >= 0 && h >= 0 ? md_eval_cell_at(fresh, (size_t)other, (size_t)h) : NULL,
                   probes, retention);
    }
  }
  for (size_t run = 0; run < fresh->n_runs; run++) {
    bool run_known = md_eval_run_index(golden, fresh->run_policy[run], fresh->run_budget[run]) >= 0;
    for (size_t g = 0; g < fresh->n_regions; g++)
      if (!run_known || find_eval_region(golden, fresh->regions[g]) < 0)
        compare_cell(t, fresh->run_policy[run], fresh->run_budget[run], fresh->regions[g], NULL,
                     md_eval_cell_at(fresh, run, g), probes, retention);
  }
}

static int run_eval(const check_options *options) {
  md_error err = {0};
  md_eval_results golden, fresh;
  if (md_eval_results_read(options->golden, &golden, &err) != MD_OK) return md_cli_report(&err);
  if (md_eval_results_read(options->fresh, &fresh, &err) != MD_OK) {
    md_eval_results_free(&golden);
    return md_cli_report(&err);
  }
  tally t = {.quiet = options->quiet};
  printf("%-12s %-14s %-26s %-12s %8s  %s\n", "region", "policy@budget", "golden", "new",
         "change", "verdict");
  compare_eval(&t, &golden, &fresh, options->probes, options->retention);
  printf("%s: %zu of %zu comparisons drifted (probes %ld, retention %g)\n",
         t.drifted ? "DRIFT" : "OK", t.drifted, t.compared, options->probes, options->retention);
  md_eval_results_free(&golden);
  md_eval_results_free(&fresh);
  return t.drifted ? MD_EXIT_DRIFT : MD_EXIT_OK;
}

/* True when the golden file says it holds eval results; anything unreadable
 * is left to the config reader, whose messages name the problem. */
static bool is_eval_results(const char *path) {
  json_t *root = NULL;
  md_error ignored;
  if (md_json_load(path, &root, &ignored) != MD_OK) return false;
  const json_t *format = json_is_object(root) ? json_object_get(root, "format") : NULL;
  bool eval = json_is_string(format) && !strcmp(json_string_value(format), MD_EVAL_FORMAT);
  json_decref(root);
  return eval;
}

int md_cmd_check(int argc, char **argv) {
  check_options options = {0};
  int exit_code = parse_options(argc, argv, &options);
  if (exit_code >= 0) return exit_code;
  return is_eval_results(options.golden) ? run_eval(&options) : run(&options);
}
