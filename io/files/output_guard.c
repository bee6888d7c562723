#include "io/files/output_guard.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool skipped(const char *path) { return !path || !*path || strcmp(path, "-") == 0; }

/* The canonical absolute path of `path` (which may not exist yet: then its
 * directory's canonical path and its own name) into out, and whether it
 * exists. False with errno set when the directory does not resolve. */
static bool canonical(const char *given, char out[PATH_MAX], bool *exists) {
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s", given) >= (int)sizeof path) {
    errno = ENAMETOOLONG;
    return false;
  }
  for (size_t n = strlen(path); n > 1 && path[n - 1] == '/'; n--) path[n - 1] = '\0';
  char *resolved = realpath(path, NULL);
  if (resolved) {
    snprintf(out, PATH_MAX, "%s", resolved);
    free(resolved);
    *exists = true;
    return true;
  }
  if (errno != ENOENT) return false;
  *exists = false;
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  const char *name = slash ? path + (slash - dir) + 1 : path;
  if (slash == dir) snprintf(dir, sizeof dir, "/");
  else if (slash) *slash = '\0';
  else snprintf(dir, sizeof dir, ".");
  resolved = realpath(dir, NULL);
  if (!resolved) return false;
  int n = snprintf(out, PATH_MAX, "%s/%s", strcmp(resolved, "/") ? resolved : "", name);
  free(resolved);
  if (n < 0 || n >= PATH_MAX) {
    errno = ENAMETOOLONG;
    return false;
  }
  return true;
}

/* Whether `path` is `dir` or lies below it (canonical paths). */
static bool within(const char *path, const char *dir) {
  size_t n = strlen(dir);
  if (strncmp(path, dir, n) != 0) return false;
  return path[n] == '\0' || path[n] == '/' || (n == 1 && dir[0] == '/');
}

/* Whether a file below dir (two levels at most: a run directory's attn/)
 * is the inode (dev, ino): a hard link into an input directory. */
static bool links_into(const char *dir, dev_t dev, ino_t ino, int depth) {
  DIR *d = opendir(dir);
  if (!d) return false;
  bool found = false;
  struct dirent *e;
  while (!found && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char child[PATH_MAX];
    if (snprintf(child, sizeof child, "%s/%s", dir, e->d_name) >= (int)sizeof child) continue;
    struct stat st;
    if (lstat(child, &st) != 0) continue;
    if (S_ISREG(st.st_mode)) found = st.st_dev == dev && st.st_ino == ino;
    else if (S_ISDIR(st.st_mode) && depth > 0) found = links_into(child, dev, ino, depth - 1);
  }
  closedir(d);
  return found;
}

typedef struct resolved_output {
  char path[PATH_MAX];
  bool exists, special;  /* special: exists and is neither a regular file nor a directory */
  struct stat st;
} resolved_output;

static md_status resolve_output(const md_path_role *o, resolved_output *r, md_error *err) {
  if (!canonical(o->path, r->path, &r->exists))
    return md_fail_kind(err, MD_E_IO, MD_KIND_USAGE, "%s %s: its directory %s (%s)", o->what, o->path,
                   errno == ENOENT ? "does not exist" : "cannot be resolved", strerror(errno));
  if (r->exists && stat(r->path, &r->st) != 0)
    return md_fail(err, MD_E_IO, "%s %s: %s", o->what, o->path, strerror(errno));
  r->special = r->exists && !S_ISREG(r->st.st_mode) && !S_ISDIR(r->st.st_mode);
  if (r->exists && S_ISDIR(r->st.st_mode) && !o->directory)
    return md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE, "%s %s is a directory, not a file to write", o->what, o->path);
  if (r->exists && !S_ISDIR(r->st.st_mode) && o->directory && !r->special)
    return md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE, "%s %s is a file, not a directory", o->what, o->path);
  if (r->special) return MD_OK;
  /* Where the file is created (or replaced: atomic_file.h renames a
   * temporary beside it) must be writable. */
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", r->path);
  char *slash = strrchr(dir, '/');
  if (slash == dir) dir[1] = '\0';
  else if (slash) *slash = '\0';
  if (access(dir, W_OK | X_OK) != 0)
    return md_fail_kind(err, MD_E_IO, MD_KIND_USAGE, "%s %s: cannot write in %s (%s)", o->what, o->path, dir,
                   strerror(errno));
  return MD_OK;
}

/* An input as the checks compare it: its canonical path and what stat
 * says; `known` false when it is skipped or does not exist. */
typedef struct resolved_input {
  bool known;
  char path[PATH_MAX];
  struct stat st;
} resolved_input;

static void resolve_input(const md_path_role *in, resolved_input *r) {
  bool exists = false;
  r->known = !skipped(in->path) && canonical(in->path, r->path, &exists) && exists &&
             stat(r->path, &r->st) == 0; /* a missing input: reported when it is read */
}

/* Refused when output o (resolved as r) is input `in` (resolved as ri),
 * lies inside it, or is a hard link into it. */
static md_status check_against(const md_path_role *o, const resolved_output *r, const md_path_role *in,
                               const resolved_input *ri, md_error *err) {
  const bool same = r->exists && r->st.st_dev == ri->st.st_dev && r->st.st_ino == ri->st.st_ino;
  if (same || !strcmp(r->path, ri->path))
    return md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE, "%s %s is the same file as the input %s "
                        "%s: refusing to overwrite an input", o->what, o->path, in->what, in->path);
  if (!S_ISDIR(ri->st.st_mode)) return MD_OK;
  if (within(r->path, ri->path))
    return md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE, "%s %s is inside the input %s %s: refusing "
                        "to write into an input directory", o->what, o->path, in->what, in->path);
  if (r->exists && S_ISREG(r->st.st_mode) && r->st.st_nlink > 1 &&
      links_into(ri->path, r->st.st_dev, r->st.st_ino, 2))
    return md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE, "%s %s is a hard link to a file of the "
                        "input %s %s: refusing to overwrite an input", o->what, o->path, in->what,
                        in->path);
  return MD_OK;
}

md_status md_outputs_check(const md_path_role *outputs, size_t n_outputs, const md_path_role *inputs,
                           size_t n_inputs, md_error *err) {
  resolved_output *out = calloc(n_outputs ? n_outputs : 1, sizeof *out);
  resolved_input *in = calloc(n_inputs ? n_inputs : 1, sizeof *in);
  md_status s = out && in ? MD_OK : md_fail(err, MD_E_NOMEM, "out of memory");
  for (size_t j = 0; s == MD_OK && j < n_inputs; j++) resolve_input(&inputs[j], &in[j]);
  for (size_t i = 0; s == MD_OK && i < n_outputs; i++) {
    const md_path_role *o = &outputs[i];
    if (skipped(o->path)) continue;
    resolved_output *r = &out[i];
    if ((s = resolve_output(o, r, err)) != MD_OK || r->special) continue;
    for (size_t j = 0; s == MD_OK && j < n_inputs; j++)
      if (in[j].known) s = check_against(o, r, &inputs[j], &in[j], err);
    for (size_t j = 0; s == MD_OK && j < i; j++) {
      const resolved_output *q = &out[j];
      if (skipped(outputs[j].path) || q->special) continue;
      const bool same = r->exists && q->exists && r->st.st_dev == q->st.st_dev && r->st.st_ino == q->st.st_ino;
      if (same || !strcmp(r->path, q->path))
        s = md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE, "%s %s and %s %s are the same file",
                         outputs[j].what, outputs[j].path, o->what, o->path);
    }
  }
  free(out);
  free(in);
  return s;
}
