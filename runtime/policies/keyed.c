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
  int64_t lo = 0, hi = k->n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (k->position[mid] < position) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

double md_policy_keyed_at(const md_policy_keyed *k, int64_t position) {
  int64_t at = md_policy_keyed_lower_bound(k, position);
  return at < k->n && k->position[at] == position ? k->value[at] : 0.0;
}

void md_policy_keyed_free(md_policy_keyed *k) {
  free(k->position);
  free(k->value);
  k->position = NULL;
  k->value = NULL;
  k->n = k->cap = 0;
}
