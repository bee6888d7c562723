/* Writing GGUF files byte by byte for the tests (the layout is described in
 * io/formats/gguf.h): a growing buffer and one helper per field, so that a
 * test can write any file, well-formed or not. */
#ifndef MD_TESTS_GGUF_BUILDER_H
#define MD_TESTS_GGUF_BUILDER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gguf_bytes {
  uint8_t *data;
  size_t len, cap;
} gguf_bytes;

static inline void gb_put(gguf_bytes *b, const void *p, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n) cap *= 2;
    uint8_t *grown = realloc(b->data, cap);
    if (!grown) {
      fprintf(stderr, "gguf_builder: out of memory\n");
      exit(1);
    }
    b->data = grown;
    b->cap = cap;
  }
  if (n) memcpy(b->data + b->len, p, n);
  b->len += n;
}

static inline void gb_u8(gguf_bytes *b, uint8_t v) { gb_put(b, &v, 1); }
static inline void gb_u32(gguf_bytes *b, uint32_t v) { gb_put(b, &v, 4); } /* little-endian host */
static inline void gb_u64(gguf_bytes *b, uint64_t v) { gb_put(b, &v, 8); }
static inline void gb_f32(gguf_bytes *b, float v) { gb_put(b, &v, 4); }

/* A GGUF string: u64 length, bytes. */
static inline void gb_str(gguf_bytes *b, const char *s) {
  gb_u64(b, strlen(s));
  gb_put(b, s, strlen(s));
}

static inline void gb_header(gguf_bytes *b, uint32_t version, uint64_t tensors, uint64_t kvs) {
  gb_put(b, "GGUF", 4);
  gb_u32(b, version);
  gb_u64(b, tensors);
  gb_u64(b, kvs);
}

/* Value types (the specification's numbers). */
enum { GB_U8 = 0, GB_I8, GB_U16, GB_I16, GB_U32, GB_I32, GB_F32, GB_BOOL, GB_STRING, GB_ARRAY,
       GB_U64, GB_I64, GB_F64 };

static inline void gb_kv_u32(gguf_bytes *b, const char *key, uint32_t v) {
  gb_str(b, key);
  gb_u32(b, GB_U32);
  gb_u32(b, v);
}

static inline void gb_kv_str(gguf_bytes *b, const char *key, const char *v) {
  gb_str(b, key);
  gb_u32(b, GB_STRING);
  gb_str(b, v);
}

/* A tensor info: name, extents (fastest first), ggml type, data offset. */
static inline void gb_tensor(gguf_bytes *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                      uint32_t type, uint64_t offset) {
  gb_str(b, name);
  gb_u32(b, n_dims);
  for (uint32_t d = 0; d < n_dims; d++) gb_u64(b, ne[d]);
  gb_u32(b, type);
  gb_u64(b, offset);
}

static inline void gb_pad(gguf_bytes *b, size_t alignment) {
  while (b->len % alignment) gb_u8(b, 0);
}

static inline void gb_write(const gguf_bytes *b, size_t len, const char *path) {
  FILE *fp = fopen(path, "wb");
  if (!fp || (len && fwrite(b->data, 1, len, fp) != len)) {
    perror(path);
    exit(1);
  }
  fclose(fp);
}

static inline void gb_free(gguf_bytes *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

#endif
