#include "base/digest.h"

#include <errno.h>
#include <nettle/sha2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void to_hex(struct sha256_ctx *ctx, char hex[MD_SHA256_HEX]) {
  uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_digest(ctx, sizeof digest, digest);
  for (size_t i = 0; i < sizeof digest; i++) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
}

void md_sha256_bytes(const void *data, size_t size, char hex[MD_SHA256_HEX]) {
  struct sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, size, data);
  to_hex(&ctx, hex);
}

md_status md_sha256_file(const char *path, char hex[MD_SHA256_HEX], md_error *err) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: cannot open: %s", path, strerror(errno));
  struct sha256_ctx ctx;
  sha256_init(&ctx);
  uint8_t buffer[1 << 16];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, fp)) > 0) sha256_update(&ctx, n, buffer);
  int failed = ferror(fp);
  fclose(fp);
  if (failed) return md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: read error", path);
  to_hex(&ctx, hex);
  return MD_OK;
}
