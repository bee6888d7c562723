/* SHA-256 (nettle) as lower-case hex: of a file's bytes, the identity of the
 * traces and the tokenizer in run.json (memdecay-run(5)); of a buffer, the
 * identity of a sharded collection's plan (collector/capture/shard.h). */
#ifndef MD_BASE_DIGEST_H
#define MD_BASE_DIGEST_H

#include <stddef.h>

#include "base/error.h"

enum { MD_SHA256_HEX = 65 }; /* 64 hex digits and the NUL */

/* Reads `path` to the end; fails with MD_E_IO naming the file. */
md_status md_sha256_file(const char *path, char hex[MD_SHA256_HEX], md_error *err);

/* The digest of `size` bytes at `data`. */
void md_sha256_bytes(const void *data, size_t size, char hex[MD_SHA256_HEX]);

#endif
