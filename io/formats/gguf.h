/* Reading GGUF files, ggml's model format (the specification is docs/gguf.md
 * in github.com/ggml-org/ggml; ggml's own reader is ggml/src/gguf.cpp).
 *
 * A file is, all little-endian and packed: the magic "GGUF", a u32 version,
 * a u64 tensor count, a u64 metadata count; the metadata key-value pairs
 * (a string key, a u32 value type, the value); the tensor infos (a string
 * name, a u32 dimension count, that many u64 extents, a u32 ggml type, a
 * u64 offset relative to the data section); zero padding to the alignment;
 * the data section. A string is a u64 byte count and the bytes (no NUL);
 * an array is a u32 element type, a u64 element count and the elements,
 * which may themselves be arrays.
 *
 * Versions: 2 and 3 have the same layout (version 2 widened version 1's
 * 32-bit counts and lengths to 64 bits; version 3 only allowed big-endian
 * files, whose version field a little-endian reader sees as 0x03000000).
 * Both are read; version 1 and big-endian files are refused by name.
 *
 * md_gguf_open maps the file read-only and validates all of it before
 * anything is used, in memory and time bounded by the file's size (counts
 * are checked against the bytes that could hold them before anything is
 * allocated or walked, so a header claiming 2^63 tensors or a 10^9-entry
 * array is refused at once unless the file really holds it):
 *   - magic, version, tensor and metadata counts;
 *   - every key: 1 to 65535 bytes, no control character (no byte below
 *     0x20, no 0x7F: keys and tensor names are printed in messages and
 *     looked up as C strings), unique;
 *   - every value's type (the thirteen of the specification), every string
 *     and array inside the file, every bool 0 or 1, arrays nested at most
 *     MD_GGUF_MAX_NESTING deep;
 *   - general.alignment (default 32): an integer, a power of two;
 *   - every tensor: a unique name of 1 to MD_GGUF_MAX_NAME bytes (as keys),
 *     at most MD_GGUF_MAX_DIMS dimensions, each extent >= 1 with their
 *     product and byte size below 2^63, a known ggml type whose block size
 *     divides the row length (ne[0]), an offset that is a multiple of the
 *     alignment, data inside the file, no two tensors overlapping;
 *   - the data section starting at the aligned end of the tensor infos,
 *     inside the file.
 * Every failure is MD_E_FORMAT (MD_E_UNSUPPORTED for a version or byte
 * order not read, MD_E_IO for a file that cannot be opened or mapped,
 * MD_E_NOMEM) with a message naming the file and the key or tensor at
 * fault, and the byte offset where it helps; md_error's `file` is the path
 * and `record` the key or tensor.
 *
 * For the model loader (a Qwen2/Qwen2.5 GGUF as llama.cpp's
 * convert_hf_to_gguf.py writes it, such as the checkpoints
 * data/models/fetch_qwen25.py fetches):
 *   - configuration: general.architecture = "qwen2"; qwen2.block_count
 *     (num_hidden_layers), qwen2.context_length (max_position_embeddings),
 *     qwen2.embedding_length (hidden_size), qwen2.feed_forward_length
 *     (intermediate_size), qwen2.attention.head_count (num_attention_heads),
 *     qwen2.attention.head_count_kv (num_key_value_heads) — integers, read
 *     with md_gguf_get_u32; qwen2.rope.freq_base (rope_theta) and
 *     qwen2.attention.layer_norm_rms_epsilon (rms_norm_eps) — float32, read
 *     with md_gguf_get_f32. head_dim is embedding_length / head_count.
 *   - tensors (HF name in brackets): token_embd.weight
 *     [model.embed_tokens.weight]; blk.N.attn_norm.weight
 *     [input_layernorm]; blk.N.attn_q.{weight,bias}, attn_k.{weight,bias},
 *     attn_v.{weight,bias} [self_attn.{q,k,v}_proj]; blk.N.attn_output.weight
 *     [self_attn.o_proj]; blk.N.ffn_norm.weight [post_attention_layernorm];
 *     blk.N.ffn_gate.weight, ffn_up.weight, ffn_down.weight
 *     [mlp.{gate,up,down}_proj]; output_norm.weight [model.norm.weight];
 *     output.weight [lm_head.weight], absent when the embedding is tied.
 *     Extents are in ggml's order, fastest first: an HF weight [out, in]
 *     has ne = {in, out}, so its rows are ne[0] long, as in safetensors.
 *     Qwen2's q and k weights are stored as HF has them: llama.cpp gives
 *     qwen2 the NeoX RoPE layout, HF's rotate_half (llama_model_rope_type
 *     in src/llama-model.cpp), and convert_hf_to_gguf.py's Qwen2Model does
 *     not permute them (its LlamaModel does, for the interleaved layout).
 *     Norm weights and biases are F32; the matrices are quantized (see
 *     gguf_quants.h) and md_gguf_tensor_dequantize expands them.
 *   - tokenizer: tokenizer.ggml.model = "gpt2" (byte-level BPE),
 *     tokenizer.ggml.pre = "qwen2" (the pre-tokenizer regex),
 *     tokenizer.ggml.tokens (array of string, indexed by token id, one per
 *     embedding row: HF's vocabulary in its byte-level form ("Ġ" for a
 *     space), its added tokens, then "[PAD<id>]" fillers up to the
 *     embedding's row count), tokenizer.ggml.token_type (array of int32,
 *     llama.cpp's: 1 normal, 3 control, 4 user-defined, 5 unused for the
 *     fillers), tokenizer.ggml.merges (array of string, "a b" in rank
 *     order), tokenizer.ggml.bos_token_id,
 *     eos_token_id, padding_token_id (u32), tokenizer.ggml.add_bos_token
 *     (bool), tokenizer.chat_template (string, HF's Jinja template). */
#ifndef MD_IO_FORMATS_GGUF_H
#define MD_IO_FORMATS_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "io/formats/gguf_quants.h"

#define MD_GGUF_MAX_DIMS 4           /* ggml's GGML_MAX_DIMS */
#define MD_GGUF_DEFAULT_ALIGNMENT 32 /* when general.alignment is absent */
#define MD_GGUF_MAX_KEY 65535        /* the specification's limit on keys */
#define MD_GGUF_MAX_NAME 64          /* the specification's limit on tensor names */
#define MD_GGUF_MAX_NESTING 8        /* arrays of arrays: deepest level read */

typedef struct md_gguf_file md_gguf_file;

/* The specification's value types, with its numbers. */
typedef enum md_gguf_value_type {
  MD_GGUF_UINT8 = 0,
  MD_GGUF_INT8 = 1,
  MD_GGUF_UINT16 = 2,
  MD_GGUF_INT16 = 3,
  MD_GGUF_UINT32 = 4,
  MD_GGUF_INT32 = 5,
  MD_GGUF_FLOAT32 = 6,
  MD_GGUF_BOOL = 7,
  MD_GGUF_STRING = 8,
  MD_GGUF_ARRAY = 9,
  MD_GGUF_UINT64 = 10,
  MD_GGUF_INT64 = 11,
  MD_GGUF_FLOAT64 = 12,
} md_gguf_value_type;

/* "uint8", ..., "float64", "bool", "string", "array"; "?" otherwise. */
const char *md_gguf_value_type_name(md_gguf_value_type type);

/* A string inside the mapped file: `len` bytes, not NUL-terminated (and
 * possibly holding NUL bytes). Valid until the file is closed. */
typedef struct md_gguf_string {
  const char *data;
  uint64_t len;
} md_gguf_string;

/* An array value. `data` points at the first element inside the mapping:
 * for numbers and bools the elements packed little-endian at any
 * alignment (read them with md_gguf_array_int / md_gguf_array_float); for
 * arrays of arrays the first nested array's header (nested contents are
 * validated but not indexed). `strings` holds the elements of an array of
 * strings and is NULL otherwise. */
typedef struct md_gguf_array {
  md_gguf_value_type type; /* of the elements */
  uint64_t count;
  const void *data;
  const md_gguf_string *strings;
} md_gguf_array;

/* One tensor. Valid until the file is closed. */
typedef struct md_gguf_tensor {
  const char *name;
  uint32_t type;                 /* an md_ggml_type */
  int n_dims;                    /* 0 to MD_GGUF_MAX_DIMS (0: one element) */
  int64_t ne[MD_GGUF_MAX_DIMS];  /* extents, fastest first; 1 past n_dims */
  uint64_t n_elements;
  uint64_t offset;               /* of the data, from the start of the file */
  uint64_t nbytes;               /* n_elements / block elements x block bytes */
  const void *data;              /* inside the mapping, at offset */
  size_t index;                  /* its place in the file's tensor table (md_gguf_tensor_at) */
} md_gguf_tensor;

/* Opens, maps and validates `path` (see above). On failure *file is NULL. */
md_status md_gguf_open(const char *path, md_gguf_file **file, md_error *err);
void md_gguf_close(md_gguf_file *file);

const char *md_gguf_path(const md_gguf_file *file);
uint32_t md_gguf_version(const md_gguf_file *file);   /* 2 or 3 */
uint64_t md_gguf_file_size(const md_gguf_file *file);
uint32_t md_gguf_alignment(const md_gguf_file *file);
uint64_t md_gguf_data_offset(const md_gguf_file *file); /* start of the data section */

/* Metadata, in file order. */
size_t md_gguf_kv_count(const md_gguf_file *file);
const char *md_gguf_kv_key(const md_gguf_file *file, size_t index);
md_gguf_value_type md_gguf_kv_type(const md_gguf_file *file, size_t index);
bool md_gguf_has_key(const md_gguf_file *file, const char *key);

/* Typed getters. Each fails with MD_E_FORMAT naming the file and key when
 * the key is absent, has another type or a value out of range.
 *
 * Integers: any of the eight integer types is taken (writers differ:
 * gguf-py writes uint32 for the counts, the specification says uint64)
 * when the value fits the requested type. */
md_status md_gguf_get_u32(const md_gguf_file *file, const char *key, uint32_t *value,
                          md_error *err);
md_status md_gguf_get_u64(const md_gguf_file *file, const char *key, uint64_t *value,
                          md_error *err);
md_status md_gguf_get_i64(const md_gguf_file *file, const char *key, int64_t *value,
                          md_error *err);
/* float32, or float64 rounded to the nearest float32 (refused when it
 * overflows). */
md_status md_gguf_get_f32(const md_gguf_file *file, const char *key, float *value,
                          md_error *err);
/* float32 (exactly widened) or float64. */
md_status md_gguf_get_f64(const md_gguf_file *file, const char *key, double *value,
                          md_error *err);
md_status md_gguf_get_bool(const md_gguf_file *file, const char *key, bool *value,
                           md_error *err);
/* A NUL-terminated copy of a string value, valid until the file is closed;
 * `len` (may be NULL) receives its byte count, which exceeds strlen when
 * the string holds NUL bytes. */
md_status md_gguf_get_string(const md_gguf_file *file, const char *key, const char **value,
                             size_t *len, md_error *err);
/* An array of any element type. */
md_status md_gguf_get_array(const md_gguf_file *file, const char *key, md_gguf_array *array,
                            md_error *err);
/* An array of strings (tokenizer.ggml.tokens, tokenizer.ggml.merges). */
md_status md_gguf_get_string_array(const md_gguf_file *file, const char *key,
                                   const md_gguf_string **items, uint64_t *count,
                                   md_error *err);

/* Element `index` of an array of integers (any of the eight types), as an
 * int64; false when the array's elements are not integers, the index is
 * out of range or a uint64 exceeds INT64_MAX. */
bool md_gguf_array_int(const md_gguf_array *array, uint64_t index, int64_t *value);
/* Element `index` of an array of float32 or float64, as a double. */
bool md_gguf_array_float(const md_gguf_array *array, uint64_t index, double *value);

/* Tensors, in file order. */
size_t md_gguf_tensor_count(const md_gguf_file *file);
const md_gguf_tensor *md_gguf_tensor_at(const md_gguf_file *file, size_t index);
/* The tensor called `name`, or NULL. */
const md_gguf_tensor *md_gguf_find_tensor(const md_gguf_file *file, const char *name);
/* As md_gguf_find_tensor, failing with MD_E_FORMAT naming file and tensor. */
md_status md_gguf_get_tensor(const md_gguf_file *file, const char *name,
                             const md_gguf_tensor **tensor, md_error *err);

/* All of a tensor's elements as float32 (n_elements floats) or bf16 bits,
 * through md_ggml_dequantize(_bf16); MD_E_UNSUPPORTED naming the file, the
 * tensor and its type for a type without a dequantizer. */
md_status md_gguf_tensor_dequantize(const md_gguf_file *file, const md_gguf_tensor *tensor,
                                    float *out, md_error *err);
md_status md_gguf_tensor_dequantize_bf16(const md_gguf_file *file,
                                         const md_gguf_tensor *tensor, uint16_t *out,
                                         md_error *err);

#endif
