/* The export formats (export/format.h): one entry per stack. */
#include <stdio.h>
#include <string.h>

#include "export/format.h"

extern const md_export_format md_export_format_trtllm;
extern const md_export_format md_export_format_vllm;
extern const md_export_format md_export_format_sglang;
extern const md_export_format md_export_format_dynamo;

const md_export_format *const md_export_formats[] = {
    &md_export_format_trtllm,
    &md_export_format_vllm,
    &md_export_format_sglang,
    &md_export_format_dynamo,
    NULL,
};

const md_export_format *md_export_format_find(const char *name) {
  for (size_t i = 0; md_export_formats[i]; i++)
    if (!strcmp(md_export_formats[i]->name, name)) return md_export_formats[i];
  return NULL;
}

const char *md_export_format_names(char *buffer, size_t size) {
  size_t used = 0;
  if (size) buffer[0] = '\0';
  for (size_t i = 0; md_export_formats[i] && used < size; i++) {
    int n = snprintf(buffer + used, size - used, "%s%s", i ? ", " : "", md_export_formats[i]->name);
    if (n < 0) break;
    used += (size_t)n;
  }
  return buffer;
}
