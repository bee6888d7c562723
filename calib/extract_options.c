#include "calib/extract_options.h"

#include "calib/cli.h"
#include "calib/fit_options.h"
#include "fit/regions/region_fits.h"

enum { ESTIMAND, TAU, GUARD, EWMA_BETA, QUANTILE, KAPPA_MEMORY, PIN, NO_PIN };

const md_opt md_extract_option_table[] = {
    {"estimand", 0, ESTIMAND, "NAME"},
    {"tau", 0, TAU, "T"},
    {"guard", 0, GUARD, "N"},
    {"ewma-beta", 0, EWMA_BETA, "B"},
    {"quantile", 0, QUANTILE, "Q"},
    {"kappa-memory", 0, KAPPA_MEMORY, "MIB"},
    {"pin", 0, PIN, "REGION"},
    {"no-pin", 0, NO_PIN, "REGION"},
    {NULL, 0, 0, NULL},
};

int md_extract_option(const char *command, const md_opt *opt, const char *value,
                      md_extract_options *extract, md_pin_override *pins) {
  long number;
  switch (opt->id) {
    case ESTIMAND:
      if (!md_estimand_parse(value, &extract->lifetimes.estimand))
        return md_cli_usage_error(command, "--estimand must be last-use or gap, got '%s'", value);
      return -1;
    case TAU:
      if (!md_cli_parse_double(value, 0.0, 1e300, &extract->lifetimes.tau) || extract->lifetimes.tau <= 0)
        return md_cli_usage_error(command, "--tau must be a number > 0, got '%s'", value);
      return -1;
    case GUARD:
      if (!md_cli_parse_long(value, 0, 1L << 30, &extract->lifetimes.guard))
        return md_cli_usage_error(command, "--guard must be an integer >= 0, got '%s'", value);
      return -1;
    case EWMA_BETA:
      if (!md_cli_parse_double(value, 0.0, 1.0, &extract->norm.ewma_beta) || extract->norm.ewma_beta >= 1)
        return md_cli_usage_error(command, "--ewma-beta must be a number in [0, 1), got '%s'",
                                  value);
      return -1;
    case QUANTILE:
      if (!md_cli_parse_double(value, 0.0, 1.0, &extract->norm.quantile) || extract->norm.quantile <= 0 ||
          extract->norm.quantile >= 1)
        return md_cli_usage_error(command, "--quantile must be a number in (0, 1), got '%s'",
                                  value);
      return -1;
    case KAPPA_MEMORY:
      if (!md_cli_parse_long(value, 0, 1L << 20, &number))
        return md_cli_usage_error(command, "--kappa-memory must be a whole number of MiB in "
                                  "[0, 1048576], got '%s'", value);
      extract->norm.memory_bytes = (size_t)number << 20;
      return -1;
    case PIN:
    case NO_PIN: return md_fit_option_pin(command, value, opt->id == PIN, &extract->settings, pins);
    default: return md_cli_usage_error(command, "unknown option");
  }
}
