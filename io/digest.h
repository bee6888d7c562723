/* SHA-256 of a file's bytes (nettle), as lower-case hex: the identity of the
 * traces and the tokenizer in run.json (memdecay-run(5)). */
#ifndef MD_IO_DIGEST_H
#define MD_IO_DIGEST_H

#include "io/error.h"

enum { MD_SHA256_HEX = 65 }; /* 64 hex digits and the NUL */

/* Reads `path` to the end; fails with MD_E_IO naming the file. */
md_status md_sha256_file(const char *path, char hex[MD_SHA256_HEX], md_error *err);

#endif
