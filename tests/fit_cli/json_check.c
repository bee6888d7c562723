/* Checks values in a JSON file: `json_check [--rtol R] FILE EXPECT...`
 * where each EXPECT is PATH=VALUE, !PATH (PATH is absent) or @FILE (one
 * EXPECT a line, '#' comments). PATH is dotted with [i] for array elements
 * (regions.plan.half_life_ci[0]); VALUE is JSON: a number (compared with
 * relative tolerance R, default 1e-6, absolute below 1e-300), a string,
 * true, false or null. Prints every mismatch; exits 1 on any. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *lookup(json_t *root, const char *path) {
  char buffer[512];
  snprintf(buffer, sizeof buffer, "%s", path);
  json_t *node = root;
  char *save = NULL;
  for (char *part = strtok_r(buffer, ".", &save); part && node; part = strtok_r(NULL, ".", &save)) {
    char *bracket = strchr(part, '[');
    if (bracket) *bracket = '\0';
    if (*part) node = json_object_get(node, part);
    while (node && bracket) {
      node = json_array_get(node, strtoul(bracket + 1, NULL, 10));
      bracket = strchr(bracket + 1, '[');
    }
  }
  return node;
}

static int check_one(json_t *root, const char *expectation, double rtol) {
  if (expectation[0] == '!') {
    if (!lookup(root, expectation + 1)) return 0;
    fprintf(stderr, "json_check: %s: present, expected absent\n", expectation + 1);
    return 1;
  }
  const char *eq = strchr(expectation, '=');
  if (!eq) {
    fprintf(stderr, "json_check: bad expectation '%s'\n", expectation);
    return 1;
  }
  char path[512];
  snprintf(path, sizeof path, "%.*s", (int)(eq - expectation), expectation);
  json_error_t err;
  json_t *want = json_loads(eq + 1, JSON_DECODE_ANY, &err);
  size_t path_len = strlen(path);
  if (want && path_len > 3 && !strcmp(path + path_len - 3, "[*]")) {
    path[path_len - 3] = '\0';
    json_t *array = lookup(root, path);
    size_t index;
    json_t *element;
    json_array_foreach(array, index, element) {
      if (json_equal(element, want)) {
        json_decref(want);
        return 0;
      }
    }
    fprintf(stderr, "json_check: no element of %s equals %s\n", path, eq + 1);
    json_decref(want);
    return 1;
  }
  json_t *got = lookup(root, path);
  int bad = 0;
  if (!want) {
    fprintf(stderr, "json_check: %s: cannot parse expected value '%s'\n", path, eq + 1);
    bad = 1;
  } else if (!got) {
    fprintf(stderr, "json_check: %s: missing\n", path);
    bad = 1;
  } else if (json_is_number(want) && json_is_number(got)) {
    double w = json_number_value(want), g = json_number_value(got);
    double scale = fabs(w) > 1e-300 ? fabs(w) : 1.0;
    if (!(fabs(g - w) <= rtol * scale)) {
      fprintf(stderr, "json_check: %s = %.17g, expected %.17g (rel. diff %.3g)\n", path, g, w,
              fabs(g - w) / scale);
      bad = 1;
    }
  } else if (!json_equal(want, got)) {
    char *text = json_dumps(got, JSON_ENCODE_ANY);
    fprintf(stderr, "json_check: %s = %s, expected %s\n", path, text ? text : "?", eq + 1);
    free(text);
    bad = 1;
  }
  json_decref(want);
  return bad;
}

static int check_file(json_t *root, const char *list, double rtol, int *checked) {
  FILE *fp = fopen(list, "r");
  if (!fp) {
    fprintf(stderr, "json_check: cannot open %s\n", list);
    return 1;
  }
  int bad = 0;
  char line[1024];
  while (fgets(line, sizeof line, fp)) {
    line[strcspn(line, "\r\n")] = '\0';
    if (!line[0] || line[0] == '#') continue;
    bad += check_one(root, line, rtol);
    (*checked)++;
  }
  fclose(fp);
  return bad;
}

int main(int argc, char **argv) {
  double rtol = 1e-6;
  int first = 1;
  if (argc > 2 && !strcmp(argv[1], "--rtol")) {
    rtol = strtod(argv[2], NULL);
    first = 3;
  }
  if (argc - first < 2) {
    fprintf(stderr, "usage: json_check [--rtol R] FILE PATH=VALUE|@LIST...\n");
    return 2;
  }
  json_error_t err;
  json_t *root = json_load_file(argv[first], 0, &err);
  if (!root) {
    fprintf(stderr, "json_check: %s:%d:%d: %s\n", argv[first], err.line, err.column, err.text);
    return 1;
  }
  int bad = 0, checked = 0;
  for (int i = first + 1; i < argc; i++) {
    if (argv[i][0] == '@') {
      bad += check_file(root, argv[i] + 1, rtol, &checked);
    } else {
      bad += check_one(root, argv[i], rtol);
      checked++;
    }
  }
  json_decref(root);
  if (checked == 0) {
    fprintf(stderr, "json_check: nothing checked\n");
    return 1;
  }
  printf("json_check: %d of %d values differ\n", bad, checked);
  return bad ? 1 : 0;
}
