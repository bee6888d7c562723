/* Placeholder until the fit command lands. */
#include <stdio.h>

#include "calib/cli.h"

int md_cmd_fit(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, MD_PROGRAM " fit: not built yet\n");
  return MD_EXIT_FAILURE;
}
