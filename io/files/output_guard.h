/* Outputs that cannot destroy inputs. A command names its inputs (files it
 * reads, and directories whose files it reads: a run directory, a model)
 * and its outputs, and checks them before any work:
 *
 *   - an output that is the same file as an input is refused: the same
 *     path after symbolic links, or a hard link (the same device and inode);
 *   - an output inside an input directory is refused;
 *   - two outputs that are the same file are refused;
 *   - an output whose directory does not exist, is not a directory, or
 *     cannot be written, and an output that is a directory, are refused.
 *
 * Outputs that are not regular files when they exist (/dev/null, a FIFO,
 * a terminal) are written directly (atomic_file.h) and are not compared.
 * "-" (standard input or output) is skipped. Inputs that do not exist are
 * skipped: the command reports them when it opens them. */
#ifndef MD_IO_FILES_OUTPUT_GUARD_H
#define MD_IO_FILES_OUTPUT_GUARD_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

typedef struct md_path_role {
  const char *path;  /* NULL or "-": none, skipped */
  const char *what;  /* how the user named it, for messages: "-o", "--traces", "the run" */
  bool directory;    /* an input directory (its files are inputs) or an output directory */
} md_path_role;

/* MD_E_INVALID with a message naming both paths and their roles when an
 * output would overwrite an input or another output, or lands inside an
 * input directory; MD_E_IO when an output's directory is missing or not
 * writable. */
md_status md_outputs_check(const md_path_role *outputs, size_t n_outputs, const md_path_role *inputs,
                           size_t n_inputs, md_error *err);

#endif
