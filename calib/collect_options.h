/* The options of the collect stage that `collect` and `run` share (--device,
 * --threads, --layers, --heads, --page-size, --max-steps, --max-episodes,
 * --shard),
 * with one parser so that both validate them alike. */
#ifndef MD_CALIB_COLLECT_OPTIONS_H
#define MD_CALIB_COLLECT_OPTIONS_H

#include <stdbool.h>

#include "collector/capture/collect.h"

/* Applies option `name` ("--device", ...) with `value` to `options`.
 * Returns -1 when applied, an exit code after printing a usage error
 * (messages start with "memdecay-calibrate COMMAND:"), or -2 when `name` is
 * not one of these options. */
int md_collect_option(const char *command, const char *name, const char *value,
                      md_collect_options *options);

/* Applies the shared flag `name` ("--exact-gemm", "--cuda-graphs") to
 * `options`; false when `name` is not one of them. */
bool md_collect_flag(const char *name, md_collect_options *options);

#endif
