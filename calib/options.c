#include "calib/options.h"

#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

#include "calib/cli.h"

typedef struct found {
  const md_opt *opt;
  const md_opt_group *group;
} found;

static md_opt_status mistake(md_opt_result *r, md_opt_status status, const char *arg,
                             const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static md_opt_status mistake(md_opt_result *r, md_opt_status status, const char *arg,
                             const char *fmt, ...) {
  r->status = status;
  r->arg = arg;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->message, sizeof r->message, fmt, ap);
  va_end(ap);
  return status;
}

static md_opt_status unknown(const md_opt_command *c, md_opt_result *r, const char *arg) {
  if (c->kept_wording & MD_OPT_KEEP_UNKNOWN_WORDING)
    return mistake(r, MD_OPT_UNKNOWN, arg, "unexpected argument '%s'", arg);
  return mistake(r, MD_OPT_UNKNOWN, arg, "unknown option '%s'", arg);
}

static md_opt_status needs_value(const md_opt_command *c, md_opt_result *r, const char *arg) {
  if (c->kept_wording & MD_OPT_KEEP_NEEDS_VALUE_WORDING)
    return mistake(r, MD_OPT_NEEDS_VALUE, arg, "option %s needs a value", arg);
  return mistake(r, MD_OPT_NEEDS_VALUE, arg, "option '%s' needs a value", arg);
}

/* "--p": every long name it abbreviates, for the message. */
static md_opt_status ambiguous(md_opt_result *r, const md_opt_command *c, const char *arg,
                               const char *name, size_t len) {
  mistake(r, MD_OPT_AMBIGUOUS, arg, "option '%s' is ambiguous; possibilities:", arg);
  size_t used = strlen(r->message);
  for (const md_opt_group *g = c->groups; g->table; g++) {
    for (const md_opt *o = g->table; o->name; o++) {
      if (strncmp(o->name, name, len) != 0 || used >= sizeof r->message) continue;
      int n = snprintf(r->message + used, sizeof r->message - used, " '--%s'", o->name);
      used = n < 0 ? sizeof r->message : used + (size_t)n;
    }
  }
  return MD_OPT_AMBIGUOUS;
}

/* The long option `name` (len bytes) names: exactly, or as the one option
 * it is a prefix of. */
static md_opt_status find_long(const md_opt_command *c, const char *arg, const char *name,
                               size_t len, found *out, md_opt_result *r) {
  size_t matches = 0;
  for (const md_opt_group *g = c->groups; g->table; g++) {
    for (const md_opt *o = g->table; o->name; o++) {
      if (len == 0 || strncmp(o->name, name, len) != 0) continue;
      if (o->name[len] == '\0') {
        *out = (found){o, g};
        return MD_OPT_DONE;
      }
      if (matches++ == 0) *out = (found){o, g};
    }
  }
  if (matches == 1) return MD_OPT_DONE;
  if (matches == 0) return unknown(c, r, arg);
  return ambiguous(r, c, arg, name, len);
}

static bool find_short(const md_opt_command *c, char letter, found *out) {
  for (const md_opt_group *g = c->groups; g->table; g++) {
    for (const md_opt *o = g->table; o->name; o++) {
      if (o->letter && o->letter == letter) {
        *out = (found){o, g};
        return true;
      }
    }
  }
  return false;
}

static md_opt_status take(const found *f, void *context, const char *value, md_opt_result *r) {
  int exit_code = f->group->take(context, f->opt, value);
  if (exit_code < 0) return MD_OPT_DONE;
  r->status = MD_OPT_STOPPED;
  r->exit_code = exit_code;
  return MD_OPT_STOPPED;
}

/* argv[*i] = "--name", "--name=VALUE" or an abbreviation of either. */
static md_opt_status parse_long(const md_opt_command *c, void *context, int argc, char **argv,
                                int *i, md_opt_result *r) {
  const char *arg = argv[*i];
  const char *name = arg + 2;
  const char *equals = strchr(name, '=');
  size_t len = equals ? (size_t)(equals - name) : strlen(name);
  found f = {NULL, NULL};
  md_opt_status status = find_long(c, arg, name, len, &f, r);
  if (status != MD_OPT_DONE) return status;
  const char *value = NULL;
  if (!f.opt->value_name) {
    if (equals)
      return mistake(r, MD_OPT_NO_VALUE, arg, "option '--%s' takes no value", f.opt->name);
  } else if (equals) {
    value = equals + 1;
  } else if (*i + 1 < argc) {
    value = argv[++*i];
  } else {
    return needs_value(c, r, arg);
  }
  return take(&f, context, value, r);
}

/* argv[*i] = "-q", "-qh", "-o FILE", "-oFILE", "-qoFILE", ... */
static md_opt_status parse_short(const md_opt_command *c, void *context, int argc, char **argv,
                                 int *i, md_opt_result *r) {
  const char *arg = argv[*i];
  for (const char *p = arg + 1; *p; p++) {
    found f = {NULL, NULL};
    snprintf(r->letter, sizeof r->letter, "-%c", *p);
    if (!find_short(c, *p, &f)) return unknown(c, r, r->letter);
    const char *value = NULL;
    if (f.opt->value_name) {
      if (p[1]) value = p + 1;
      else if (*i + 1 < argc) value = argv[++*i];
      else return needs_value(c, r, r->letter);
    }
    md_opt_status status = take(&f, context, value, r);
    if (status != MD_OPT_DONE || value) return status;
  }
  return MD_OPT_DONE;
}

md_opt_status md_opt_parse(const md_opt_command *command, void *context, int argc, char **argv,
                           md_opt_result *result) {
  memset(result, 0, sizeof *result);
  int n_args = 0;
  bool operands_only = false;
  for (int i = 1; i < argc; i++) {
    char *arg = argv[i];
    md_opt_status status = MD_OPT_DONE;
    if (operands_only || arg[0] != '-' || arg[1] == '\0') argv[1 + n_args++] = arg;
    else if (!strcmp(arg, "--")) operands_only = true;
    else if (arg[1] == '-') status = parse_long(command, context, argc, argv, &i, result);
    else status = parse_short(command, context, argc, argv, &i, result);
    if (status != MD_OPT_DONE) return status;
  }
  result->status = MD_OPT_DONE;
  result->args = argv + 1;
  result->n_args = n_args;
  return MD_OPT_DONE;
}

int md_opt_parse_or_report(const md_opt_command *command, void *context, int argc, char **argv,
                           char ***args, int *n_args) {
  md_opt_result r;
  switch (md_opt_parse(command, context, argc, argv, &r)) {
    case MD_OPT_DONE:
      if (args) *args = r.args;
      if (n_args) *n_args = r.n_args;
      return -1;
    case MD_OPT_STOPPED: return r.exit_code;
    case MD_OPT_UNKNOWN:
    case MD_OPT_AMBIGUOUS:
    case MD_OPT_NEEDS_VALUE:
    case MD_OPT_NO_VALUE: break;
  }
  return md_cli_usage_error(command->name, "%s", r.message);
}
