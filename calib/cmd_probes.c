/* memdecay-calibrate probes: plants one fact per region into every episode
 * of a trace file and writes the traces with the probes that ask for them
 * (collector/eval/probe_plant.h), so that eval runs on a user's own
 * workload. This file parses options and prints the tally; the work is
 * md_probe_plant. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/cli.h"
#include "calib/commands.h"
#include "collector/eval/probe_plant.h"
#include "io/formats/trace.h"

static const char command[] = "probes";

typedef struct options {
  md_probe_plant_options plant;
  char *regions_text; /* --regions, split in place into `regions` */
  const char **regions;
  bool quiet;
} options;

static void print_help(FILE *out) {
  fputs(
      "Usage: " MD_PROGRAM " probes TRACES.jsonl -o OUT.jsonl [--seed N] [--regions LIST]\n"
      "           [--replace] [-q]\n"
      "\n"
      "Plants one fact per region into every episode of a trace file (memdecay-traces(5))\n"
      "and writes the traces with a probe for each ({\"region\", \"question\", \"answer\"}),\n"
      "so that 'eval' measures recall on your own workload. The value of each fact is a\n"
      "random code (QX7-4821) or number (482193) from a seeded generator, found nowhere\n"
      "else in the episode. It goes in a sentence at a sentence boundary of one of the\n"
      "region's texts (\"The milestone code of this plan is QX7-4821.\"), or, for a region\n"
      "that has tool calls but no text (tool_in), as an extra argument of one call\n"
      "(\"audit_ref\": \"QX7-4821\"). Everything else of the episode stays as it was; the\n"
      "input is never modified. Prints per region how many episodes got a probe.\n"
      "The phrasings and the limits are in memdecay-calibrate(1), PROBES.\n"
      "\n"
      "Options:\n"
      "  -o, --out FILE       the planted traces to write (never the input)\n"
      "      --seed N         seed of the values and places (default 0); the same seed\n"
      "                       gives the same bytes\n"
      "      --regions LIST   comma-separated regions to plant (default: every region\n"
      "                       with text or tool calls in an episode's prompt)\n"
      "      --replace        drop the episodes' existing probes (default: an episode\n"
      "                       with probes is refused)\n"
      "  -q, --quiet          print nothing but errors\n"
      "  -h, --help           this text\n"
      "\n"
      "Example (the shipped traces, their own probes replaced):\n"
      "  " MD_PROGRAM " probes data/traces/agent-450.jsonl -o planted.jsonl --replace\n"
      "  " MD_PROGRAM " eval --traces planted.jsonl -o eval.json --config \\\n"
      "      data/golden/qwen2-tiny-agent-450.json --model data/models/qwen2-tiny\n"
      "\n"
      "Exit status: 0 on success; 2 for a usage error or invalid input (the message\n"
      "names the file, line and episode; an output that is the input; an episode with\n"
      "probes without --replace); 3 when the output cannot be written. Nothing is\n"
      "written unless every episode was planted.\n",
      out);
}

enum { OPT_OUT, OPT_SEED, OPT_REGIONS, OPT_REPLACE, OPT_QUIET, OPT_HELP };

static const md_opt probes_table[] = {
    {"out", 'o', OPT_OUT, "FILE"},
    {"seed", 0, OPT_SEED, "N"},
    {"regions", 0, OPT_REGIONS, "LIST"},
    {"replace", 0, OPT_REPLACE, NULL},
    {"quiet", 'q', OPT_QUIET, NULL},
    {"help", 'h', OPT_HELP, NULL},
    {NULL, 0, 0, NULL},
};

/* "a,b,c" into the names, checked: each a valid region name, none twice. */
static int split_regions(options *opt) {
  size_t n = 1;
  for (const char *c = opt->regions_text; *c; c++) n += *c == ',';
  opt->regions = calloc(n, sizeof *opt->regions);
  if (!opt->regions) return MD_EXIT_FAILURE;
  size_t count = 0;
  for (char *name = opt->regions_text, *end; name; name = end) {
    end = strchr(name, ',');
    if (end) *end++ = '\0';
    if (!md_trace_region_valid(name))
      return md_cli_usage_error(command, "--regions: invalid region name '%s' (a region is "
                                "[a-z][a-z0-9_]*, at most %d bytes)", name, MD_TRACE_REGION_MAX);
    for (size_t i = 0; i < count; i++)
      if (!strcmp(opt->regions[i], name))
        return md_cli_usage_error(command, "--regions: region '%s' is listed twice", name);
    opt->regions[count++] = name;
  }
  opt->plant.settings.regions = opt->regions;
  opt->plant.settings.n_regions = count;
  return -1;
}

/* Handles one option; returns -1 to go on, else the exit code. */
static int take_option(void *context, const md_opt *option, const char *value) {
  options *opt = context;
  long seed;
  switch (option->id) {
    case OPT_OUT: opt->plant.output_path = value; return -1;
    case OPT_SEED:
      if (!md_cli_parse_long(value, 0, 0x7FFFFFFFFFFFFFFFL, &seed))
        return md_cli_usage_error(command, "--seed must be a whole number >= 0, got '%s'", value);
      opt->plant.settings.seed = (uint64_t)seed;
      return -1;
    case OPT_REGIONS:
      free(opt->regions_text);
      opt->regions_text = strdup(value);
      return opt->regions_text ? -1 : MD_EXIT_FAILURE;
    case OPT_REPLACE: opt->plant.settings.replace = true; return -1;
    case OPT_QUIET: opt->quiet = true; return -1;
    case OPT_HELP: print_help(stdout); return MD_EXIT_OK;
    default: return md_cli_usage_error(command, "unknown option");
  }
}

static const md_opt_group groups[] = {{probes_table, take_option}, {NULL, NULL}};

const md_opt_command md_probes_command = {"probes", groups, print_help, 0};

/* Returns -1 when the run should go on, else the exit code. */
static int parse_options(int argc, char **argv, options *opt) {
  char **args;
  int n_args;
  int code = md_opt_parse_or_report(&md_probes_command, opt, argc, argv, &args, &n_args);
  if (code >= 0) return code;
  if (n_args != 1)
    return md_cli_usage_error(command, "expected one trace file, got %d", n_args);
  if (!opt->plant.output_path) return md_cli_usage_error(command, "-o OUT.jsonl is required");
  opt->plant.traces_path = args[0];
  return opt->regions_text ? split_regions(opt) : -1;
}

static void print_outcome(const options *opt, const md_probe_plant_outcome *o) {
  printf("%s: %zu episodes, %zu probes planted (seed %llu)\n", command, o->episodes, o->probes,
         (unsigned long long)opt->plant.settings.seed);
  printf("%-16s %8s %13s %8s\n", "region", "planted", "in arguments", "without");
  for (size_t i = 0; i < o->n_regions; i++) {
    const md_probe_region_count *c = &o->regions[i];
    printf("%-16s %8zu %13zu %8zu\n", c->region, c->planted, c->in_arguments, c->without);
  }
  if (o->replaced)
    printf("%s: dropped the input's %zu probes (--replace)\n", command, o->replaced);
  if (o->episodes_without_probes)
    printf("%s: %zu episodes have none of the regions and got no probe: eval refuses them "
           "unless --skip-invalid\n", command, o->episodes_without_probes);
  printf("%s: wrote %s\n", command, opt->plant.output_path);
}

int md_cmd_probes(int argc, char **argv) {
  options opt = {0};
  int code = parse_options(argc, argv, &opt);
  if (code < 0) {
    md_error err = {0};
    md_probe_plant_outcome outcome;
    if (md_probe_plant(&opt.plant, &outcome, &err) != MD_OK) {
      code = md_cli_report(&err);
    } else {
      if (!opt.quiet) print_outcome(&opt, &outcome);
      md_probe_plant_outcome_free(&outcome);
      code = MD_EXIT_OK;
    }
  }
  free(opt.regions);
  free(opt.regions_text);
  return code;
}
