/* A checkpoint file read where it lies: a regular file mapped read-only and
 * private (the safetensors and GGUF readers). */
#ifndef MD_IO_FILES_MAPPED_FILE_H
#define MD_IO_FILES_MAPPED_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

typedef struct md_mapped_file {
  const unsigned char *data; /* NULL for an empty file */
  size_t size;
} md_mapped_file;

/* Maps the regular file `path` (MD_E_IO, an input's fault, naming the path:
 * it cannot be opened, is not a regular file, or mmap fails). */
md_status md_mapped_file_open(const char *path, md_mapped_file *file, md_error *err);
void md_mapped_file_close(md_mapped_file *file);

/* Whether `path` names a regular file (following links). */
bool md_is_regular_file(const char *path);

#endif
