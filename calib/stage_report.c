#include "calib/stage_report.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "calib/cli.h"
#include "md_build_config.h"

void md_report_extract_progress(void *context, const md_extract_progress *progress) {
  const char *command = context;
  fprintf(stderr, "\r%s: %s %zu/%zu episodes", command,
          progress->pass == 1 ? "extracting" : "kappa, second pass:", progress->episodes_done,
          progress->episodes_total);
  if (progress->pass_done) fputc('\n', stderr);
  fflush(stderr);
}

/* "%.*f" of a value, or "-" when it is not defined. */
static const char *shown(char out[32], int digits, double value) {
  if (isfinite(value)) snprintf(out, 32, "%.*f", digits, value);
  else snprintf(out, 32, "-");
  return out;
}

static const char *shown_g(char out[32], double value) {
  if (isfinite(value)) snprintf(out, 32, "%.4g", value);
  else snprintf(out, 32, "-");
  return out;
}

void md_report_extract(FILE *out, const char *command, const md_extract_options *options,
                       const md_extract_outcome *outcome) {
  const md_calibration *c = &outcome->calibration;
  fprintf(out, "%zu episodes, %" PRIu64 " tokens (%" PRIu64 " prompt, %" PRIu64 " decoded); "
          "%s, tau %g, guard %ld\n", (size_t)c->workload.episodes, c->workload.tokens,
          c->workload.prompt_tokens, c->workload.decoded_tokens, c->workload.estimand,
          c->workload.tau, c->workload.guard);
  fprintf(out, "%-12s %9s %9s %10s %7s %10s %10s\n", "region", "tokens", "observed", "refreshed",
          "share", "mean a^", "event rows");
  char share[32], mean[32], kappa[32], alpha[32];
  for (size_t i = 0; i < c->n_regions; i++) {
    const md_calibration_region *r = &c->regions[i];
    fprintf(out, "%-12s %9" PRIu64 " %9" PRIu64 " %10" PRIu64 " %7s %10s %10" PRIu64 "%s\n",
            r->name, r->tokens, r->observed_tokens, r->refreshed_tokens,
            shown(share, 3, r->refreshed_share), shown(mean, 3, r->mean_relative_attention),
            r->event_rows, r->pinned ? "  (pinned)" : "");
  }
  fprintf(out, "kappa %s (quantile %g of the attention EWMA, beta %g, over %" PRIu64
          " unpinned token-steps, %d pass%s); alpha %s (median of %" PRIu64 " shares)\n",
          shown_g(kappa, c->policy.kappa),
          c->policy.quantile, c->policy.ewma_beta, c->policy.kappa_samples, c->policy.passes,
          c->policy.passes == 1 ? "" : "es",
          shown_g(alpha, c->policy.alpha),
          c->policy.alpha_regions);
  for (size_t i = 0; i < c->warnings.n; i++)
    fprintf(out, MD_PROGRAM " %s: warning: %s\n", command, c->warnings.lines[i]);
  fprintf(out, "wrote %s (%" PRIu64 " rows) and %s\n", options->events_path, outcome->rows,
          outcome->calibration_path);
}

static bool to_stdout(const char *output) { return !output || !strcmp(output, "-"); }

void md_report_fit(FILE *out, const char *command, const md_fit_options *options,
                   const md_fit_outcome *outcome) {
  const md_regions_results *results = &outcome->results;
  md_regions_print_table(out, results, options->settings.level);
  for (size_t i = 0; i < results->warnings.n; i++)
    fprintf(out, MD_PROGRAM " %s: warning: %s\n", command, results->warnings.lines[i]);
  if (!to_stdout(options->output))
    fprintf(out, "wrote %s (%zu regions)\n", options->output, results->n_regions);
}

int md_report_fit_stdout(const char *command, const md_fit_options *options,
                         const md_fit_outcome *outcome) {
  if (!to_stdout(options->output)) return MD_EXIT_OK;
  if (fputs(outcome->json, stdout) == EOF || fflush(stdout) != 0) {
    fprintf(stderr, MD_PROGRAM " %s: cannot write the config to standard output\n", command);
    return MD_EXIT_FAILURE;
  }
  return MD_EXIT_OK;
}
