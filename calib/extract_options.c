#include "calib/extract_options.h"

#include "calib/cli.h"
#include "calib/fit_options.h"

enum { ESTIMAND, TAU, GUARD, EWMA_BETA, QUANTILE, KAPPA_MEMORY, PIN, NO_PIN };

static const char *const names[MD_EXTRACT_OPTION_COUNT] = {
    "estimand", "tau", "guard", "ewma-beta", "quantile", "kappa-memory", "pin", "no-pin"};

void md_extract_job_defaults(md_extract_job *job, const char *command) {
  job->command = command;
  job->lifetimes = MD_LIFETIME_PARAMS_DEFAULT;
  job->norm = MD_ATTN_NORM_PARAMS_DEFAULT;
  job->settings.level = 0.95;
  job->settings.band = MD_KM_BAND_LOG;
}

void md_extract_long_options(struct option *out, int first) {
  for (int i = 0; i < MD_EXTRACT_OPTION_COUNT; i++)
    out[i] = (struct option){names[i], required_argument, NULL, first + i};
  out[MD_EXTRACT_OPTION_COUNT] = (struct option){NULL, 0, NULL, 0};
}

int md_extract_option(int id, const char *value, const char *command, md_extract_job *job,
                      md_pin_override *pins) {
  long number;
  switch (id) {
    case ESTIMAND:
      if (!md_estimand_parse(value, &job->lifetimes.estimand))
        return md_cli_usage_error(command, "--estimand must be last-use or gap, got '%s'", value);
      return -1;
    case TAU:
      if (!md_cli_parse_double(value, 0.0, 1e300, &job->lifetimes.tau) || job->lifetimes.tau <= 0)
        return md_cli_usage_error(command, "--tau must be a number > 0, got '%s'", value);
      return -1;
    case GUARD:
      if (!md_cli_parse_long(value, 0, 1L << 30, &job->lifetimes.guard))
        return md_cli_usage_error(command, "--guard must be an integer >= 0, got '%s'", value);
      return -1;
    case EWMA_BETA:
      if (!md_cli_parse_double(value, 0.0, 1.0, &job->norm.ewma_beta) || job->norm.ewma_beta >= 1)
        return md_cli_usage_error(command, "--ewma-beta must be a number in [0, 1), got '%s'",
                                  value);
      return -1;
    case QUANTILE:
      if (!md_cli_parse_double(value, 0.0, 1.0, &job->norm.quantile) || job->norm.quantile <= 0 ||
          job->norm.quantile >= 1)
        return md_cli_usage_error(command, "--quantile must be a number in (0, 1), got '%s'",
                                  value);
      return -1;
    case KAPPA_MEMORY:
      if (!md_cli_parse_long(value, 0, 1L << 20, &number))
        return md_cli_usage_error(command, "--kappa-memory must be a whole number of MiB in "
                                  "[0, 1048576], got '%s'", value);
      job->norm.memory_bytes = (size_t)number << 20;
      return -1;
    case PIN:
    case NO_PIN: return md_fit_option_pin(command, value, id == PIN, &job->settings, pins);
    default: return md_cli_usage_error(command, "unknown option");
  }
}
