/* memdecay-calibrate check: compares a freshly fitted config with a golden
 * one and fails when a half-life (or a base priority, or a normalisation
 * constant) drifted. Meant for CI. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/cli.h"
#include "io/config.h"

typedef struct check_options {
  const char *golden;
  const char *fresh;
  double rtol;
  bool quiet;
} check_options;

static void print_help(FILE *out) {
  fputs(
      "Usage: " MD_PROGRAM " check NEW.json --golden GOLDEN.json [--rtol R]\n"
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
      "  base_priority, pinned, policy alpha and kappa: drift when the relative change\n"
      "                 exceeds R (pinned: when it differs).\n"
      "  null vs null is ok; null vs a number is drift; a region present on one side\n"
      "  only is drift.\n"
      "\n"
      "Options:\n"
      "      --golden FILE   the reference config (required)\n"
      "      --rtol R        relative tolerance, 0 <= R < 1 (default 0.10)\n"
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

enum { OPT_GOLDEN = 256, OPT_RTOL };

static const struct option long_options[] = {
    {"golden", required_argument, NULL, OPT_GOLDEN},
    {"rtol", required_argument, NULL, OPT_RTOL},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Returns -1 when the run should go on, else the exit code. */
static int parse_options(int argc, char **argv, check_options *options) {
  options->rtol = 0.10;
  opterr = 0;
  optind = 1;
  int code;
  while ((code = getopt_long(argc, argv, ":qh", long_options, NULL)) != -1) {
    switch (code) {
      case OPT_GOLDEN: options->golden = optarg; break;
      case OPT_RTOL:
        if (!md_cli_parse_double(optarg, 0.0, 1.0, &options->rtol) || options->rtol >= 1.0) {
          return md_cli_usage_error("check", "--rtol must be a number in [0, 1), got '%s'", optarg);
        }
        break;
      case 'q': options->quiet = true; break;
      case 'h': print_help(stdout); return MD_EXIT_OK;
      case ':': return md_cli_usage_error("check", "option '%s' needs a value", argv[optind - 1]);
      default: return md_cli_usage_error("check", "unknown option '%s'", argv[optind - 1]);
    }
  }
  if (!options->golden) return md_cli_usage_error("check", "--golden GOLDEN.json is required");
  if (argc - optind != 1) {
    return md_cli_usage_error("check", "expected exactly one NEW.json, got %d files", argc - optind);
  }
  options->fresh = argv[optind];
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
}

static int run(const check_options *options) {
  md_error err = {0};
  md_config_summary golden, fresh;
  if (md_config_read(options->golden, &golden, &err) != MD_OK) return md_cli_report_input(&err);
  if (md_config_read(options->fresh, &fresh, &err) != MD_OK) {
    md_config_summary_free(&golden);
    return md_cli_report_input(&err);
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

int md_cmd_check(int argc, char **argv) {
  check_options options = {0};
  int exit_code = parse_options(argc, argv, &options);
  return exit_code >= 0 ? exit_code : run(&options);
}
