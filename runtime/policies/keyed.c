/* Values kept per token by position (policies_internal.h, md_policy_keyed):
 * the attention snapkv's window calls and votes and tova's last call hold
 * for the tokens cached when they were observed. */
#include <stdlib.h>

#include "runtime/policies/policies_internal.h"

md_status md_policy_keyed_take(md_policy_keyed *k, const md_policy_view *view,
                               const float *values, md_error *err) {
  int64_t n = view->n;
  if (n > k->cap) {
    int64_t cap = k->cap ? k->cap : 256;
    while (cap < n) cap *= 2;
    int64_t *position = realloc(k->position, (size_t)cap * sizeof *position);
    if (position) k->position = position;
    double *value = realloc(k->value, (size_t)cap * sizeof *value);
    if (value) k->value = value;
    if (!position || !value) return md_fail(err, MD_E_NOMEM, "out of memory");
    k->cap = cap;
  }
  for (int64_t i = 0; i < n; i++) {
    k->position[i] = view->position[i];
    k->value[i] = values ? values[i] : 0.0;
  }
  k->n = n;
  return MD_OK;
}

int64_t md_policy_keyed_lower_bound(const md_policy_keyed *k, int64_t position) {
  return md_policy_position_lower_bound(k->position, k->n, position);
}

double md_policy_keyed_at(const md_policy_keyed *k, int64_t position) {
  return md_policy_keyed_value(k, md_policy_keyed_lower_bound(k, position), position);
}

void md_policy_keyed_free(md_policy_keyed *k) {
  free(k->position);
  free(k->value);
  k->position = NULL;
  k->value = NULL;
  k->n = k->cap = 0;
}
