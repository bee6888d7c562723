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

const char *md_model_family_hf_names(char *buffer, size_t size) {
  size_t used = 0;
  if (size) buffer[0] = '\0';
  for (size_t f = 0; md_model_families[f]; f++)
    for (size_t a = 0; md_model_families[f]->hf_architectures[a]; a++) {
      int n = snprintf(buffer + used, size - used, "%s%s", used ? ", " : "",
                       md_model_families[f]->hf_architectures[a]);
      if (n < 0 || (size_t)n >= size - used) return buffer;
      used += (size_t)n;
    }
  return buffer;
}
