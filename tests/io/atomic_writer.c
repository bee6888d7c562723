/* A writer of one output that never finishes, for the stale-temporary
 * test (stale_temporaries.sh):
 *
 *   atomic_writer PATH
 *
 * opens PATH as an atomic output (io/files/atomic_file.h), writes part of
 * it, prints its temporary's path on standard output and then waits, the
 * temporary open and locked, until it is killed. */
#include <stdio.h>
#include <unistd.h>

#include "io/files/atomic_file.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: atomic_writer PATH\n");
    return 99;
  }
  md_atomic_file file;
  md_error err;
  if (md_atomic_open(&file, argv[1], &err) != MD_OK) {
    fprintf(stderr, "atomic_writer: %s\n", err.message);
    return 99;
  }
  fputs("half an output", file.fp);
  fflush(file.fp);
  printf("%s\n", file.temp_path);
  fflush(stdout);
  for (;;) pause();
}
