/* The option parser of every subcommand: a table per group of options, and
 * one parse function that reads a command line against a command's tables.
 *
 * Accepted, as getopt_long accepts them:
 *   --name VALUE, --name=VALUE   an option with a value (the next argument is
 *                                the value whatever it looks like)
 *   --name                       an option without one
 *   --na                         any unambiguous prefix of a long name; an
 *                                exact name wins over the names it prefixes
 *   -o FILE, -oFILE, -qh         short options, grouped; a short option with
 *                                a value takes the rest of its group or the
 *                                next argument
 *   --                           the end of the options: the rest are operands
 *   -, anything else             operands, in order, wherever they stand
 *
 * The parser prints nothing and never exits: md_opt_parse says what it found
 * and md_opt_parse_or_report (for the subcommands) prints the usage error. */
#ifndef MD_CALIB_OPTIONS_H
#define MD_CALIB_OPTIONS_H

#include <stdio.h>

typedef struct md_opt {
  const char *name;       /* the long name, without "--"; NULL ends a table */
  char letter;            /* the short option (-o), or 0 */
  int id;                 /* tells the group's handler which option it is */
  const char *value_name; /* the value as --help names it ("FILE"); NULL for an
                             option that takes no value */
} md_opt;

/* Handles one option of its group: `value` is NULL for an option without a
 * value. Returns -1 to go on, or an exit code that ends the parse (a usage
 * error already printed, or 0 after --help). */
typedef int md_opt_take(void *context, const md_opt *opt, const char *value);

typedef struct md_opt_group {
  const md_opt *table;    /* NULL ends a command's groups */
  md_opt_take *take;
} md_opt_group;

/* Wordings a subcommand kept from its parser before this one, because its
 * tests check them (md_opt_command.kept_wording). */
enum {
  MD_OPT_KEEP_UNKNOWN_WORDING = 1,     /* "unexpected argument '--x'" */
  MD_OPT_KEEP_NEEDS_VALUE_WORDING = 2, /* "option --x needs a value" */
};

typedef struct md_opt_command {
  const char *name;              /* "fit": messages start "memdecay-calibrate fit: " */
  const md_opt_group *groups;    /* the command's options: its tables, concatenated */
  void (*print_help)(FILE *out); /* its --help text (checked against the tables) */
  unsigned kept_wording;         /* MD_OPT_KEEP_*; 0: the common wording */
} md_opt_command;

typedef enum md_opt_status {
  MD_OPT_DONE,        /* all read: the operands are in args */
  MD_OPT_STOPPED,     /* a handler ended the parse with exit_code */
  MD_OPT_UNKNOWN,     /* "unknown option '--x'" */
  MD_OPT_AMBIGUOUS,   /* "option '--p' is ambiguous; possibilities: '--pin' '--plot'" */
  MD_OPT_NEEDS_VALUE, /* "option '--level' needs a value" */
  MD_OPT_NO_VALUE,    /* "option '--quiet' takes no value" (--quiet=1) */
} md_opt_status;

typedef struct md_opt_result {
  md_opt_status status;
  int exit_code;       /* MD_OPT_STOPPED: what the handler returned */
  char **args;         /* MD_OPT_DONE: the operands, in command-line order */
  int n_args;
  const char *arg;     /* a mistake: the option as given ("--lev", "-x") */
  char message[512];   /* a mistake: what is wrong, for md_cli_usage_error */
  char letter[3];      /* storage behind arg for a short option */
} md_opt_result;

/* Reads argv[1..argc) against the command's tables, calling the handler of
 * each option found with `context`, in command-line order. The operands are
 * moved to the front (args = argv + 1; the strings are not touched). */
md_opt_status md_opt_parse(const md_opt_command *command, void *context, int argc, char **argv,
                           md_opt_result *result);

/* md_opt_parse for a subcommand: returns -1 when the parse is done (operands
 * in *args and *n_args, either may be NULL), the handler's exit code when it
 * stopped, or MD_EXIT_INPUT after printing the usage error of a mistake. */
int md_opt_parse_or_report(const md_opt_command *command, void *context, int argc, char **argv,
                           char ***args, int *n_args);

#endif
