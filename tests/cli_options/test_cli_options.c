/* The option parser (calib/options.h): long options with values in both
 * forms, abbreviations (an exact name wins, an ambiguous prefix is an error),
 * short options grouped, "--" and operands; the messages of each mistake.
 * Then every subcommand's tables: no name or letter twice, and its --help
 * lists exactly the options of its tables, each with its short letter and
 * its value's name. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/commands.h"
#include "calib/options.h"
#include "tests/test_util.h"

/* ---- the parser, on a command of its own --------------------------------------------- */

enum { OUTPUT, LEVEL, QUIET, HELP, PLOT, PLOT_LOG_TIME, PIN, PRIORS };

static const md_opt first_table[] = {
    {"output", 'o', OUTPUT, "FILE"},
    {"level", 0, LEVEL, "P"},
    {"quiet", 'q', QUIET, NULL},
    {"help", 'h', HELP, NULL},
    {NULL, 0, 0, NULL},
};

static const md_opt second_table[] = {
    {"plot", 0, PLOT, "FILE"},
    {"plot-log-time", 0, PLOT_LOG_TIME, NULL},
    {"pin", 'p', PIN, "REGION"},
    {"priors", 0, PRIORS, "FILE"},
    {NULL, 0, 0, NULL},
};

typedef struct seen {
  char log[512]; /* "name=value;" or "name;" per option, in order */
} seen;

static int take(void *context, const md_opt *opt, const char *value) {
  seen *s = context;
  size_t used = strlen(s->log);
  snprintf(s->log + used, sizeof s->log - used, value ? "%s=%s;" : "%s;", opt->name, value);
  return opt->id == HELP ? 0 : -1; /* --help ends the parse with exit code 0 */
}

static const md_opt_group test_groups[] = {
    {first_table, take},
    {second_table, take},
    {NULL, NULL},
};

static const md_opt_command test_command = {"test", test_groups, NULL, 0};

/* Parses the arguments (a NULL-ended list after the command's name). */
static md_opt_status parse(const md_opt_command *command, seen *s, md_opt_result *r,
                           const char *const *words) {
  static char *argv[32];
  static char storage[32][64];
  int argc = 0;
  argv[argc++] = "test";
  for (; *words; words++, argc++) {
    snprintf(storage[argc], sizeof storage[argc], "%s", *words);
    argv[argc] = storage[argc];
  }
  memset(s, 0, sizeof *s);
  return md_opt_parse(command, s, argc, argv, r);
}

#define PARSE(s, r, ...) parse(&test_command, (s), (r), (const char *const[]){__VA_ARGS__, NULL})

static bool args_are(const md_opt_result *r, const char *const *want) {
  int n = 0;
  for (; want[n]; n++)
    if (n >= r->n_args || strcmp(r->args[n], want[n]) != 0) return false;
  return n == r->n_args;
}

#define ARGS_ARE(r, ...) args_are((r), (const char *const[]){__VA_ARGS__, NULL})

static void test_long_options(void) {
  seen s;
  md_opt_result r;
  CHECK(PARSE(&s, &r, "--output", "a.json", "--level=0.9", "--quiet") == MD_OPT_DONE);
  CHECK_MSG(!strcmp(s.log, "output=a.json;level=0.9;quiet;"), "%s", s.log);
  CHECK(r.n_args == 0);

  /* abbreviations, in both forms */
  CHECK(PARSE(&s, &r, "--out", "a.json", "--lev=0.5", "--q", "--plot-l") == MD_OPT_DONE);
  CHECK_MSG(!strcmp(s.log, "output=a.json;level=0.5;quiet;plot-log-time;"), "%s", s.log);

  /* an exact name wins over the longer names it is a prefix of */
  CHECK(PARSE(&s, &r, "--plot", "x.png", "--pin", "plan") == MD_OPT_DONE);
  CHECK_MSG(!strcmp(s.log, "plot=x.png;pin=plan;"), "%s", s.log);

  /* an empty value, and a value that looks like an option */
  CHECK(PARSE(&s, &r, "--output=", "--level", "--quiet") == MD_OPT_DONE);
  CHECK_MSG(!strcmp(s.log, "output=;level=--quiet;"), "%s", s.log);
}

static void test_short_options(void) {
  seen s;
  md_opt_result r;
  CHECK(PARSE(&s, &r, "-o", "a.json", "-q") == MD_OPT_DONE);
  CHECK_MSG(!strcmp(s.log, "output=a.json;quiet;"), "%s", s.log);
  CHECK(PARSE(&s, &r, "-oa.json") == MD_OPT_DONE);
  CHECK_MSG(!strcmp(s.log, "output=a.json;"), "%s", s.log);
  /* grouped: flags, then one with a value that takes the rest or the next */
  CHECK(PARSE(&s, &r, "-qo", "a.json", "-qpplan") == MD_OPT_DONE);
  CHECK_MSG(!strcmp(s.log, "quiet;output=a.json;quiet;pin=plan;"), "%s", s.log);
}

static void test_operands(void) {
  seen s;
  md_opt_result r;
  /* anywhere, in order; "-" is one; after "--" everything is one */
  CHECK(PARSE(&s, &r, "a.csv", "-q", "-", "--level", "0.9", "b.csv", "--", "-o", "--x") ==
        MD_OPT_DONE);
  CHECK_MSG(!strcmp(s.log, "quiet;level=0.9;"), "%s", s.log);
  CHECK(ARGS_ARE(&r, "a.csv", "-", "b.csv", "-o", "--x"));
  CHECK(PARSE(&s, &r, "--") == MD_OPT_DONE && r.n_args == 0);
}

static void test_stop(void) {
  seen s;
  md_opt_result r;
  /* the handler ends the parse: what follows is not read */
  CHECK(PARSE(&s, &r, "-q", "--help", "--colour") == MD_OPT_STOPPED);
  CHECK(r.exit_code == 0);
  CHECK_MSG(!strcmp(s.log, "quiet;help;"), "%s", s.log);
  CHECK(PARSE(&s, &r, "-qh", "-x") == MD_OPT_STOPPED && r.exit_code == 0);
}

#define MISTAKE(status_, message_, ...)                                             \
  do {                                                                              \
    seen s_;                                                                        \
    md_opt_result r_;                                                               \
    CHECK(PARSE(&s_, &r_, __VA_ARGS__) == (status_));                               \
    CHECK_MSG(!strcmp(r_.message, (message_)), "got \"%s\", want \"%s\"", r_.message, \
              (message_));                                                          \
  } while (0)

static void test_mistakes(void) {
  MISTAKE(MD_OPT_UNKNOWN, "unknown option '--colour'", "--colour");
  MISTAKE(MD_OPT_UNKNOWN, "unknown option '--colour=red'", "--colour=red");
  MISTAKE(MD_OPT_UNKNOWN, "unknown option '--plotx'", "--plotx");
  MISTAKE(MD_OPT_UNKNOWN, "unknown option '-x'", "-x");
  MISTAKE(MD_OPT_UNKNOWN, "unknown option '-x'", "-qx");
  MISTAKE(MD_OPT_UNKNOWN, "unknown option '--=a'", "--=a");
  MISTAKE(MD_OPT_NEEDS_VALUE, "option '--level' needs a value", "--level");
  MISTAKE(MD_OPT_NEEDS_VALUE, "option '--lev' needs a value", "--lev");
  MISTAKE(MD_OPT_NEEDS_VALUE, "option '-o' needs a value", "-qo");
  MISTAKE(MD_OPT_NO_VALUE, "option '--quiet' takes no value", "--qu=1");
  MISTAKE(MD_OPT_AMBIGUOUS,
          "option '--p' is ambiguous; possibilities: '--plot' '--plot-log-time' '--pin' '--priors'",
          "--p", "x");
  MISTAKE(MD_OPT_AMBIGUOUS, "option '--pl=x' is ambiguous; possibilities: '--plot' '--plot-log-time'",
          "--pl=x");

  /* the wordings collect and tokenize keep */
  md_opt_command kept = test_command;
  kept.kept_wording = MD_OPT_KEEP_UNKNOWN_WORDING | MD_OPT_KEEP_NEEDS_VALUE_WORDING;
  seen s;
  md_opt_result r;
  CHECK(parse(&kept, &s, &r, (const char *const[]){"--colour", NULL}) == MD_OPT_UNKNOWN);
  CHECK_MSG(!strcmp(r.message, "unexpected argument '--colour'"), "%s", r.message);
  CHECK(parse(&kept, &s, &r, (const char *const[]){"--level", NULL}) == MD_OPT_NEEDS_VALUE);
  CHECK_MSG(!strcmp(r.message, "option --level needs a value"), "%s", r.message);
}

/* ---- every subcommand's tables against its --help ------------------------------------ */

static const md_opt_command *const commands[] = {
    &md_run_command,     &md_collect_command, &md_extract_command, &md_fit_command,
    &md_eval_command,    &md_check_command,   &md_tokenize_command, &md_devices_command,
    &md_probes_command,  &md_export_command,
};

static char *help_text(const md_opt_command *c) {
  char *text = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  if (!out) return NULL;
  c->print_help(out);
  fclose(out);
  return text;
}

/* The option lines of a help text: indented, starting with a dash (as
 * tests/man/options_sync.sh reads them). */
static bool is_option_line(const char *line) {
  if (*line != ' ') return false;
  while (*line == ' ') line++;
  return *line == '-';
}

static bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
}

/* The option of the command that `token` ("--name" or "-x") names exactly. */
static const md_opt *lookup(const md_opt_command *c, const char *token, size_t len) {
  for (const md_opt_group *g = c->groups; g->table; g++) {
    for (const md_opt *o = g->table; o->name; o++) {
      if (len == strlen(o->name) + 2 && token[1] == '-' && !strncmp(token + 2, o->name, len - 2))
        return o;
      if (len == 2 && token[1] == o->letter && o->letter) return o;
    }
  }
  return NULL;
}

/* A help line that shows the entry: "--name VALUE" (or "--name" then two
 * spaces or the end for an option without a value), after "-x, " when it
 * has a short letter. */
static bool help_shows(const char *help, const md_opt *o) {
  char want[128];
  if (o->letter) snprintf(want, sizeof want, "-%c, --%s", o->letter, o->name);
  else snprintf(want, sizeof want, " --%s", o->name);
  for (const char *line = help; *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    if (is_option_line(line)) {
      const char *at = strstr(line, want);
      if (at && at < line + len) {
        const char *after = at + strlen(want);
        if (o->value_name) {
          size_t n = strlen(o->value_name);
          if (after[0] == ' ' && !strncmp(after + 1, o->value_name, n) &&
              (after[1 + n] == ' ' || after[1 + n] == '\n' || after[1 + n] == '\0'))
            return true;
        } else if (after == line + len || (after[0] == ' ' && after[1] == ' ')) {
          return true;
        }
      }
    }
    line += len + (end ? 1 : 0);
  }
  return false;
}

/* Prints each way the command's tables and its --help disagree; returns how
 * many there are. */
static int help_mismatches(const md_opt_command *c) {
  int problems = 0;
  char *help = help_text(c);
  if (!help) return 1;
  /* every entry in the help, as the help shows it */
  for (const md_opt_group *g = c->groups; g->table; g++) {
    for (const md_opt *o = g->table; o->name; o++) {
      if (help_shows(help, o)) continue;
      char letter[8] = "";
      if (o->letter) snprintf(letter, sizeof letter, "-%c, ", o->letter);
      fprintf(stderr, "%s --help: no option line shows %s--%s%s%s\n", c->name, letter, o->name,
              o->value_name ? " " : "", o->value_name ? o->value_name : "");
      problems++;
    }
  }
  /* every option the help's option lines name is in the tables */
  for (const char *line = help; *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    if (is_option_line(line)) {
      for (size_t i = 0; i < len; i++) {
        bool starts = line[i] == '-' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == ',');
        size_t dashes = starts ? (line[i + 1] == '-' ? 2 : 1) : 0;
        if (!starts || i + dashes >= len || !is_name_char(line[i + dashes]) ||
            line[i + dashes] == '-')
          continue;
        size_t n = dashes; /* digits after the first letter too: --bf16-gemm */
        while (i + n < len && (is_name_char(line[i + n]) || (line[i + n] >= '0' && line[i + n] <= '9')))
          n++;
        if (!lookup(c, line + i, n)) {
          fprintf(stderr, "%s --help names %.*s, which is in no table\n", c->name, (int)n,
                  line + i);
          problems++;
        }
        i += n;
      }
    }
    line += len + (end ? 1 : 0);
  }
  free(help);
  return problems;
}

static void test_command_tables(const md_opt_command *c) {
  /* each name and letter once; a handler for each group */
  for (const md_opt_group *g = c->groups; g->table; g++) {
    CHECK_MSG(g->take != NULL, "%s: a group without a handler", c->name);
    for (const md_opt *o = g->table; o->name; o++) {
      CHECK_MSG(is_name_char(o->name[0]) && o->name[0] != '-', "%s: name '%s'", c->name,
                o->name);
      for (const md_opt_group *h = g; h->table; h++) {
        for (const md_opt *p = h == g ? o + 1 : h->table; p->name; p++) {
          CHECK_MSG(strcmp(o->name, p->name) != 0, "%s: --%s twice", c->name, o->name);
          CHECK_MSG(!o->letter || o->letter != p->letter, "%s: -%c twice", c->name, o->letter);
        }
      }
    }
  }
  CHECK_MSG(help_mismatches(c) == 0, "%s: --help and the option tables disagree", c->name);
}

/* The check itself finds an option the help leaves out, one shown with
 * another value or without its letter, and one the help has in excess. */
static void bad_help(FILE *out) {
  fputs("Usage: test [OPTIONS]\n"
        "  -o, --output DIR   the value named otherwise\n"
        "      --quiet        without its letter\n"
        "      --colour       in no table\n"
        "      --plot FILE    right\n"
        "      --plot-log-time  right\n"
        "  -p, --pin REGION   right\n"
        "      --priors FILE  right\n"
        "  -h, --help         right\n"
        "Not an option line: --level.\n",
        out);
}

static void test_help_check(void) {
  md_opt_command bad = test_command;
  bad.print_help = bad_help;
  fprintf(stderr, "(four mismatches expected:)\n");
  CHECK(help_mismatches(&bad) == 4); /* --output DIR, --level, -q, --colour */
}

int main(void) {
  test_long_options();
  test_short_options();
  test_operands();
  test_stop();
  test_mistakes();
  test_help_check();
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) test_command_tables(commands[i]);
  return md_test_finish("cli_options");
}
