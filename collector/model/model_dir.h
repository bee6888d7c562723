/* Opening a checkpoint the way every command that runs a model does
 * (collect, eval): a Hugging Face directory (config.json, safetensors, its
 * own tokenizer.json), a GGUF file, or a directory holding one GGUF file and
 * no config.json (the tokenizer then comes from the GGUF metadata,
 * md_tokenizer_load_gguf); the checkpoint is opened
 * (collector/model/qwen2_model.h), with messages that name it. */
#ifndef MD_COLLECTOR_MODEL_MODEL_DIR_H
#define MD_COLLECTOR_MODEL_MODEL_DIR_H

#include <stddef.h>

#include "collector/model/qwen2_model.h"
#include "collector/tokenizer/tokenizer.h"
#include "base/digest.h"
#include "base/error.h"

typedef struct md_model_dir {
  md_qwen2_model *model;
  md_tokenizer *tokenizer;
  char *tokenizer_path;       /* DIR/tokenizer.json, or the GGUF file; malloc'd */
} md_model_dir;

/* Called with each of the checkpoint's notes (md_qwen2_model_warning) as
 * soon as it is open, before the tokenizer is looked for. */
typedef void (*md_model_dir_warning_fn)(void *context, const char *message);

/* Opens `dir`. `user` names who tokenises in the message for a missing
 * tokenizer.json ("the collector", "eval"); warn may be NULL. On failure
 * *out is empty. Errors: MD_E_INVALID (no such directory, no
 * tokenizer.json), and those of md_qwen2_model_open and md_tokenizer_load. */
md_status md_model_dir_open(const char *dir, const char *user, md_model_dir_warning_fn warn,
                            void *context, md_model_dir *out, md_error *err);

/* md_model_dir_open with the checkpoint opened with `options` (how a GGUF
 * file is expanded; NULL: the defaults). */
md_status md_model_dir_open_with(const char *dir, const md_qwen2_open_options *options,
                                 const char *user, md_model_dir_warning_fn warn, void *context,
                                 md_model_dir *out, md_error *err);
void md_model_dir_close(md_model_dir *dir);

/* What a command that only renders and tokenises needs of a checkpoint
 * (export): its configuration (family, vocabulary size, context length) and
 * its tokenizer, found as md_model_dir_open finds them, without the weights
 * (a GGUF file's metadata is read; no tensor is dequantized, so a large
 * checkpoint costs its tokenizer's memory, not its weights'). */
typedef struct md_model_text {
  md_qwen2_config config;
  md_tokenizer *tokenizer;
  char *tokenizer_path;       /* DIR/tokenizer.json, or the GGUF file; malloc'd */
} md_model_text;

md_status md_model_text_open(const char *dir, const char *user, md_model_text *out,
                             md_error *err);
void md_model_text_close(md_model_text *text);

/* The model's identity, as run.json records it (config_sha256): the
 * SHA-256 of a directory's config.json, or of a GGUF file (`model` resolved
 * as md_model_dir_open does). */
md_status md_model_identity(const char *model, char sha256[MD_SHA256_HEX], md_error *err);

/* The checkpoint's name: the directory's last component, trailing slashes
 * ignored ("models/Qwen2.5-0.5B/" -> "Qwen2.5-0.5B"). Returns buffer. */
const char *md_model_dir_name(const char *dir, char *buffer, size_t size);

#endif
