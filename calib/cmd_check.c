/* Placeholder until the check command lands. */
#include <stdio.h>

#include "calib/cli.h"

int md_cmd_check(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, MD_PROGRAM " check: not built yet\n");
  return MD_EXIT_FAILURE;
}
