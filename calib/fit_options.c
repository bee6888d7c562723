#include "calib/fit_options.h"

#include <string.h>

#include "calib/cli.h"
#include "survival/km.h"
#include "io/plot/plot.h"
#include "base/regions.h"

int md_fit_option_level(const char *command, const char *value, md_regions_settings *settings) {
  if (!md_cli_parse_double(value, 0.0, 1.0, &settings->level) || settings->level <= 0.0 ||
      settings->level >= 1.0)
    return md_cli_usage_error(command, "--level must be a number between 0 and 1, got '%s'",
                              value);
  return -1;
}

int md_fit_option_band(const char *command, const char *value, md_regions_settings *settings) {
  if (!md_km_band_parse(value, &settings->band))
    return md_cli_usage_error(command, "--band must be log, log-log or plain, got '%s'", value);
  return -1;
}

int md_fit_option_pin(const char *command, const char *value, bool pinned,
                      md_regions_settings *settings, md_pin_override *pins) {
  if (!md_region_name_valid(value, strlen(value)))
    return md_cli_usage_error(command, "'%s' is not a region name ([a-z][a-z0-9_]*)", value);
  pins[settings->n_pins++] = (md_pin_override){.region = value, .pinned = pinned};
  return -1;
}

int md_fit_option_plot(const char *command, const char *value, const char **plot) {
  md_error err = {0};
  if (md_plot_check_path(value, &err) != MD_OK)
    return md_cli_usage_error(command, "--plot: %s", err.message);
  *plot = value;
  return -1;
}

enum { LEVEL, BAND, PRIORS, KM_CSV, PLOT, PLOT_LOG_TIME };

const md_opt md_fit_option_table[] = {
    {"level", 0, LEVEL, "P"},
    {"band", 0, BAND, "TYPE"},
    {"priors", 0, PRIORS, "FILE"},
    {"km-csv", 0, KM_CSV, "FILE"},
    {"plot", 0, PLOT, "FILE"},
    {"plot-log-time", 0, PLOT_LOG_TIME, NULL},
    {NULL, 0, 0, NULL},
};

int md_fit_option(const char *command, const md_opt *opt, const char *value, md_fit_options *fit) {
  switch (opt->id) {
    case LEVEL: return md_fit_option_level(command, value, &fit->settings);
    case BAND: return md_fit_option_band(command, value, &fit->settings);
    case PRIORS: fit->priors_path = value; return -1;
    case KM_CSV: fit->km_csv = value; return -1;
    case PLOT: return md_fit_option_plot(command, value, &fit->plot);
    case PLOT_LOG_TIME: fit->plot_log_time = true; return -1;
    default: return md_cli_usage_error(command, "unknown option");
  }
}
