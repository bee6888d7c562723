/* Opening a checkpoint directory (collector/model/model_dir.h). */
#include "collector/model/model_dir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool is_directory(const char *path) {
  struct stat info;
  return stat(path, &info) == 0 && S_ISDIR(info.st_mode);
}

md_status md_model_dir_open(const char *dir, const char *user, md_model_dir_warning_fn warn,
                            void *context, md_model_dir *out, md_error *err) {
  memset(out, 0, sizeof *out);
  if (!is_directory(dir))
    return md_fail(err, MD_E_INVALID, "model directory '%s' %s", dir,
                   access(dir, F_OK) == 0 ? "is not a directory" : "does not exist");
  md_status s = md_qwen2_model_open(dir, &out->model, err);
  if (s != MD_OK) return s;
  for (size_t i = 0; warn && i < md_qwen2_model_warning_count(out->model); i++)
    warn(context, md_qwen2_model_warning(out->model, i));
  size_t size = strlen(dir) + sizeof "/tokenizer.json";
  out->tokenizer_path = malloc(size);
  if (!out->tokenizer_path) {
    s = md_fail(err, MD_E_NOMEM, "out of memory");
  } else {
    snprintf(out->tokenizer_path, size, "%s/tokenizer.json", dir);
    if (access(out->tokenizer_path, F_OK) != 0)
      s = md_fail(err, MD_E_INVALID,
                  "%s: no tokenizer.json: %s tokenises with the checkpoint's own tokenizer (copy "
                  "tokenizer.json from the model's Hugging Face repository)",
                  dir, user);
    else
      s = md_tokenizer_load(out->tokenizer_path, &out->tokenizer, err);
  }
  if (s != MD_OK) md_model_dir_close(out);
  return s;
}

void md_model_dir_close(md_model_dir *dir) {
  md_tokenizer_free(dir->tokenizer);
  md_qwen2_model_close(dir->model);
  free(dir->tokenizer_path);
  memset(dir, 0, sizeof *dir);
}

const char *md_model_dir_name(const char *dir, char *buffer, size_t size) {
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') n--;
  size_t start = n;
  while (start > 0 && dir[start - 1] != '/') start--;
  snprintf(buffer, size, "%.*s", (int)(n - start), dir + start);
  return buffer;
}
