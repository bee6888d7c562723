/* Opening a checkpoint: a Hugging Face directory or a GGUF file
 * (collector/model/model_dir.h). */
#include "collector/model/model_dir.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/model/qwen2_config.h"
#include "collector/model/qwen2_gguf.h"
#include "io/files/mapped_file.h"
#include "io/formats/gguf.h"

static bool is_directory(const char *path) {
  struct stat info;
  return stat(path, &info) == 0 && S_ISDIR(info.st_mode);
}

static bool is_gguf_name(const char *name) {
  size_t n = strlen(name);
  return n > 5 && !strcmp(name + n - 5, ".gguf");
}

/* The checkpoint `path` names: itself (a directory with config.json, or a
 * .gguf file), or the one .gguf file of a directory without config.json.
 * malloc'd into *resolved. */
static md_status resolve(const char *path, char **resolved, md_error *err) {
  *resolved = NULL;
  if (md_is_regular_file(path)) {
    if (!is_gguf_name(path))
      return md_fail(err, MD_E_INVALID, "model '%s' is a file but not a .gguf file (give a Hugging "
                     "Face checkpoint directory or a GGUF file)", path);
    return (*resolved = strdup(path)) ? MD_OK : md_fail(err, MD_E_NOMEM, "out of memory");
  }
  if (!is_directory(path))
    return md_fail(err, MD_E_INVALID, "model directory '%s' %s", path,
                   access(path, F_OK) == 0 ? "is not a directory" : "does not exist");
  size_t size = strlen(path) + sizeof "/config.json";
  char *config = malloc(size);
  if (!config) return md_fail(err, MD_E_NOMEM, "out of memory");
  snprintf(config, size, "%s/config.json", path);
  bool hf = access(config, F_OK) == 0;
  free(config);
  DIR *dir = hf ? NULL : opendir(path);
  char *found = NULL;
  size_t count = 0;
  for (struct dirent *e; dir && (e = readdir(dir));) {
    if (e->d_name[0] == '.' || !is_gguf_name(e->d_name)) continue;
    if (count++ == 0) {
      size_t n = strlen(path) + 1 + strlen(e->d_name) + 1;
      if ((found = malloc(n))) snprintf(found, n, "%s/%s", path, e->d_name);
    }
  }
  if (dir) closedir(dir);
  if (count > 1) {
    free(found);
    return md_fail(err, MD_E_INVALID, "model directory '%s' holds %zu .gguf files and no "
                   "config.json: name the one to use", path, count);
  }
  if (count == 1 && !found) return md_fail(err, MD_E_NOMEM, "out of memory");
  *resolved = found ? found : strdup(path);
  return *resolved ? MD_OK : md_fail(err, MD_E_NOMEM, "out of memory");
}

md_status md_model_dir_open(const char *dir, const char *user, md_model_dir_warning_fn warn,
                            void *context, md_model_dir *out, md_error *err) {
  return md_model_dir_open_with(dir, NULL, user, warn, context, out, err);
}

/* A Hugging Face directory's DIR/tokenizer.json: *path set (malloc'd) and
 * the tokenizer loaded, or a refusal naming who tokenises. */
static md_status load_dir_tokenizer(const char *dir, const char *user, char **path,
                                    md_tokenizer **tokenizer, md_error *err) {
  size_t size = strlen(dir) + sizeof "/tokenizer.json";
  if (!(*path = malloc(size))) return md_fail(err, MD_E_NOMEM, "out of memory");
  snprintf(*path, size, "%s/tokenizer.json", dir);
  if (access(*path, F_OK) != 0)
    return md_fail(err, MD_E_INVALID,
                   "%s: no tokenizer.json: %s tokenises with the checkpoint's own tokenizer (copy "
                   "tokenizer.json from the model's Hugging Face repository)",
                   dir, user);
  return md_tokenizer_load(*path, tokenizer, err);
}

md_status md_model_dir_open_with(const char *dir, const md_qwen2_open_options *options,
                                 const char *user, md_model_dir_warning_fn warn, void *context,
                                 md_model_dir *out, md_error *err) {
  memset(out, 0, sizeof *out);
  char *path = NULL;
  md_status s = resolve(dir, &path, err);
  if (s == MD_OK) s = md_qwen2_model_open_with(path, options, &out->model, err);
  if (s != MD_OK) {
    free(path);
    return s;
  }
  for (size_t i = 0; warn && i < md_qwen2_model_warning_count(out->model); i++)
    warn(context, md_qwen2_model_warning(out->model, i));
  const md_gguf_file *gguf = md_qwen2_model_gguf(out->model);
  if (gguf) { /* the tokenizer of its metadata */
    out->tokenizer_path = path;
    path = NULL;
    s = md_tokenizer_load_gguf(gguf, &out->tokenizer, err);
  } else {
    s = load_dir_tokenizer(dir, user, &out->tokenizer_path, &out->tokenizer, err);
  }
  free(path);
  if (s != MD_OK) md_model_dir_close(out);
  return s;
}

md_status md_model_identity(const char *model, char sha256[MD_SHA256_HEX], md_error *err) {
  char *path = NULL;
  md_status s = resolve(model, &path, err);
  if (s != MD_OK) return s;
  if (md_is_regular_file(path)) {
    s = md_sha256_file(path, sha256, err);
  } else {
    size_t size = strlen(path) + sizeof "/config.json";
    char *config = malloc(size);
    if (config) snprintf(config, size, "%s/config.json", path);
    s = config ? md_sha256_file(config, sha256, err) : md_fail(err, MD_E_NOMEM, "out of memory");
    free(config);
  }
  free(path);
  return s;
}

void md_model_dir_close(md_model_dir *dir) {
  md_tokenizer_free(dir->tokenizer);
  md_qwen2_model_close(dir->model);
  free(dir->tokenizer_path);
  memset(dir, 0, sizeof *dir);
}

md_status md_model_text_open(const char *dir, const char *user, md_model_text *out,
                             md_error *err) {
  memset(out, 0, sizeof *out);
  char *path = NULL;
  md_status s = resolve(dir, &path, err);
  if (s != MD_OK) return s;
  if (md_is_regular_file(path)) { /* a GGUF file: its metadata and tokenizer */
    md_gguf_file *gguf = NULL;
    s = md_gguf_open(path, &gguf, err);
    if (s == MD_OK) s = md_qwen2_gguf_config(gguf, false, &out->config, err);
    if (s == MD_OK) s = md_tokenizer_load_gguf(gguf, &out->tokenizer, err);
    md_gguf_close(gguf);
    out->tokenizer_path = path;
    path = NULL;
  } else {
    size_t size = strlen(path) + sizeof "/config.json";
    char *config = malloc(size);
    if (!config) {
      s = md_fail(err, MD_E_NOMEM, "out of memory");
    } else {
      snprintf(config, size, "%s/config.json", path);
      s = md_qwen2_config_load(config, &out->config, err);
      free(config);
    }
    if (s == MD_OK) s = load_dir_tokenizer(dir, user, &out->tokenizer_path, &out->tokenizer, err);
  }
  free(path);
  if (s != MD_OK) md_model_text_close(out);
  return s;
}

void md_model_text_close(md_model_text *text) {
  md_tokenizer_free(text->tokenizer);
  free(text->tokenizer_path);
  memset(text, 0, sizeof *text);
}

const char *md_model_dir_name(const char *dir, char *buffer, size_t size) {
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') n--;
  size_t start = n;
  while (start > 0 && dir[start - 1] != '/') start--;
  snprintf(buffer, size, "%.*s", (int)(n - start), dir + start);
  return buffer;
}
