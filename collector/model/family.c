#include "collector/model/family.h"

#include <stdio.h>
#include <string.h>

#include "collector/model/qwen2_family.h"

const md_model_family *const md_model_families[] = {
    &md_family_qwen2,
    NULL,
};

const md_model_family *md_model_family_for_hf(const char *architecture) {
  for (size_t f = 0; md_model_families[f]; f++)
    for (size_t a = 0; md_model_families[f]->hf_architectures[a]; a++)
      if (!strcmp(md_model_families[f]->hf_architectures[a], architecture))
        return md_model_families[f];
  return NULL;
}

const md_model_family *md_model_family_for_gguf(const char *architecture) {
  for (size_t f = 0; md_model_families[f]; f++)
    if (!strcmp(md_model_families[f]->gguf_architecture, architecture)) return md_model_families[f];
  return NULL;
}

/* Appends ", name" (or "name" first) to buffer; false once it is full. */
static bool append_name(char *buffer, size_t size, size_t *used, const char *name) {
  int n = snprintf(buffer + *used, size - *used, "%s%s", *used ? ", " : "", name);
  if (n < 0 || (size_t)n >= size - *used) return false;
  *used += (size_t)n;
  return true;
}

const char *md_model_family_hf_names(char *buffer, size_t size) {
  size_t used = 0;
  if (size) buffer[0] = '\0';
  for (size_t f = 0; md_model_families[f]; f++)
    for (size_t a = 0; md_model_families[f]->hf_architectures[a]; a++)
      if (!append_name(buffer, size, &used, md_model_families[f]->hf_architectures[a]))
        return buffer;
  return buffer;
}

const char *md_model_family_gguf_names(char *buffer, size_t size) {
  size_t used = 0;
  if (size) buffer[0] = '\0';
  for (size_t f = 0; md_model_families[f]; f++)
    if (!append_name(buffer, size, &used, md_model_families[f]->gguf_architecture)) break;
  return buffer;
}
