/* Opening a Hugging Face checkpoint directory the way every command that
 * runs a model does (collect, eval): the directory must exist, the
 * checkpoint is opened (collector/model/qwen2_model.h) and its own tokenizer.json
 * loaded, with messages that name the directory. */
#ifndef MD_COLLECTOR_MODEL_MODEL_DIR_H
#define MD_COLLECTOR_MODEL_MODEL_DIR_H

#include <stddef.h>

#include "collector/model/qwen2_model.h"
#include "collector/tokenizer/tokenizer.h"
#include "base/error.h"

typedef struct md_model_dir {
  md_qwen2_model *model;
  md_tokenizer *tokenizer;
  char *tokenizer_path;       /* DIR/tokenizer.json, malloc'd */
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
void md_model_dir_close(md_model_dir *dir);

/* The checkpoint's name: the directory's last component, trailing slashes
 * ignored ("models/Qwen2.5-0.5B/" -> "Qwen2.5-0.5B"). Returns buffer. */
const char *md_model_dir_name(const char *dir, char *buffer, size_t size);

#endif
