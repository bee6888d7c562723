#include "calib/fit_options.h"

#include <string.h>

#include "calib/cli.h"
#include "fit/survival/km.h"
#include "io/plot/plot.h"
#include "io/base/regions.h"

int md_fit_option_level(const char *command, const char *value, md_fit_settings *settings) {
  if (!md_cli_parse_double(value, 0.0, 1.0, &settings->level) || settings->level <= 0.0 ||
      settings->level >= 1.0)
    return md_cli_usage_error(command, "--level must be a number between 0 and 1, got '%s'",
                              value);
  return -1;
}

int md_fit_option_band(const char *command, const char *value, md_fit_settings *settings) {
  if (!md_km_band_parse(value, &settings->band))
    return md_cli_usage_error(command, "--band must be log, log-log or plain, got '%s'", value);
  return -1;
}

int md_fit_option_pin(const char *command, const char *value, bool pinned,
                      md_fit_settings *settings, md_pin_override *pins) {
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
