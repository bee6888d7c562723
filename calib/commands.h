/* The options of every subcommand (calib/options.h): its tables, the groups
 * its command line is read against, and its --help text, which
 * tests/cli_options checks against the tables. Each is defined in its
 * calib/cmd_<name>.c. */
#ifndef MD_CALIB_COMMANDS_H
#define MD_CALIB_COMMANDS_H

#include "calib/options.h"

extern const md_opt_command md_fit_command;
extern const md_opt_command md_extract_command;
extern const md_opt_command md_run_command;
extern const md_opt_command md_check_command;
extern const md_opt_command md_collect_command;
extern const md_opt_command md_tokenize_command;
extern const md_opt_command md_devices_command;
extern const md_opt_command md_eval_command;
extern const md_opt_command md_probes_command;
extern const md_opt_command md_export_command;

#endif
