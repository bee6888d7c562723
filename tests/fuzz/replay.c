/* Replays inputs through a fuzz harness without libFuzzer: every regular
 * file named on the command line, and every regular file of every directory
 * named there (not recursively, in name order), is read whole and passed
 * once to LLVMFuzzerTestOneInput. Exits 0 when every input ran (a harness
 * reports a broken invariant by aborting), 1 when an input cannot be read
 * and 2 on a usage error. The normal build links each harness with this, so
 * that `meson test --suite fuzz` replays tests/fuzz/corpus/. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
    return 1;
  }
  size_t cap = 4096, len = 0;
  uint8_t *data = malloc(cap);
  while (data) {
    size_t n = fread(data + len, 1, cap - len, f);
    len += n;
    if (len < cap) break;
    uint8_t *grown = realloc(data, cap * 2);
    if (!grown) {
      free(data);
      data = NULL;
      break;
    }
    data = grown;
    cap *= 2;
  }
  int failed = ferror(f) || !data;
  fclose(f);
  if (failed) {
    fprintf(stderr, "replay: %s: cannot read\n", path);
    free(data);
    return 1;
  }
  /* An exact-size copy, so that ASan sees a read past the input. */
  uint8_t *exact = malloc(len ? len : 1);
  if (!exact) {
    free(data);
    return 1;
  }
  if (len) memcpy(exact, data, len);
  free(data);
  fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
  LLVMFuzzerTestOneInput(exact, len);
  free(exact);
  return 0;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_dir(const char *dir, size_t *count) {
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
    return 1;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  int status = 0;
  struct dirent *entry;
  while ((entry = readdir(d)) != NULL) {
    if (entry->d_name[0] == '.') continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      char **grown = realloc(names, cap * sizeof *names);
      if (!grown) {
        status = 1;
        break;
      }
      names = grown;
    }
    size_t size = strlen(dir) + strlen(entry->d_name) + 2;
    names[n] = malloc(size);
    if (!names[n]) {
      status = 1;
      break;
    }
    snprintf(names[n], size, "%s/%s", dir, entry->d_name);
    n++;
  }
  closedir(d);
  qsort(names, n, sizeof *names, compare_names);
  for (size_t i = 0; i < n; i++) {
    struct stat st;
    /* README and other notes are not inputs. */
    const char *base = strrchr(names[i], '/') + 1;
    if (status == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode) &&
        strcmp(base, "README") != 0 && strcmp(base, "README.md") != 0) {
      status = replay_file(names[i]);
      if (status == 0) (*count)++;
    }
    free(names[i]);
  }
  free(names);
  return status;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE_OR_DIRECTORY...\n", argv[0]);
    return 2;
  }
  size_t count = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
      return 1;
    }
    int status;
    if (S_ISDIR(st.st_mode)) {
      status = replay_dir(argv[i], &count);
    } else {
      status = replay_file(argv[i]);
      if (status == 0) count++;
    }
    if (status != 0) return status;
  }
  fprintf(stderr, "replay: %zu inputs, no failure\n", count);
  return count > 0 ? 0 : 1;
}
