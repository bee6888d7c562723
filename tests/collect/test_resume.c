/* Resume after a real crash: a child process runs md_collect and kills
 * itself with SIGKILL at a chosen point (through the progress callback, so
 * the point is exact: mid-prefill, mid-decode, after an episode's npy files
 * were renamed but before its manifest rows, after its rows but before
 * run.json lists it). Then md_collect with resume finishes the run, and the
 * run directory must be byte-identical to that of an uninterrupted run
 * (run.json, manifest.csv, every attn/ and prefill/ file, and no other
 * file: no leftover temporary). Also: resuming a complete run changes
 * nothing; a half-written episode is never taken as complete. The kills
 * are repeated with the episodes collected together (--batch 3), against
 * the run collected one at a time.
 *
 *   test_resume OUT_DIR      (a scratch directory of the build tree)
 *
 * Runs on tests/model/fixtures/theta1e4_f32 with the tiny tokenizer of
 * tests/collect/fixtures and tests/collect/data/episodes.jsonl, 2 threads
 * (the capture's reductions are ordered, so results are bitwise
 * reproducible for a given thread count). */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collector/capture/collect.h"
#include "tests/test_util.h"

static char model_dir[4096], traces[4096];

typedef struct kill_point {
  const char *name;
  md_collect_event event;
  int occurrence; /* kill at the n-th time the event is reported (1-based) */
} kill_point;

typedef struct kill_state {
  const kill_point *point;
  int seen;
} kill_state;

static void kill_at(void *context, const md_collect_progress *progress) {
  kill_state *state = context;
  if (progress->event == state->point->event && ++state->seen == state->point->occurrence)
    raise(SIGKILL);
}

/* Episodes collected together in the child (collect --batch). */
static size_t batch = 1;

static void set_options(md_collect_options *o, const char *out) {
  md_collect_options_init(o);
  o->batch = batch;
  o->model_dir = model_dir;
  o->traces_path = traces;
  o->out_dir = out;
  o->threads = 2;
  o->max_steps = 20;
  o->reproducible = true;
}

/* Every collection runs in a child process: the parent never starts the
 * OpenMP and OpenBLAS thread pools, which do not survive a fork. The child
 * kills itself with SIGKILL at `point` (when not NULL), or exits 0 when
 * md_collect succeeded and 10 + status (after printing the error) when it
 * failed. Returns -signal or the exit code. */
static int run_child(const char *out, bool resume, const kill_point *point, md_status *status) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    md_collect_options o;
    set_options(&o, out);
    o.resume = resume;
    kill_state state = {.point = point};
    if (point) {
      o.progress = kill_at;
      o.context = &state;
    }
    md_error err;
    md_status s = md_collect(&o, NULL, &err);
    if (s != MD_OK) fprintf(stderr, "collect %s: %s\n", out, err.message);
    _exit(s == MD_OK ? 0 : 10 + (int)s);
  }
  int wait_status = 0;
  waitpid(pid, &wait_status, 0);
  if (WIFSIGNALED(wait_status)) return -WTERMSIG(wait_status);
  int code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 99;
  if (status) *status = code >= 10 ? (md_status)(code - 10) : MD_OK;
  return code;
}

static int collect(const char *out, bool resume) { return run_child(out, resume, NULL, NULL) == 0; }

/* ---- comparing directories ---------------------------------------------------------- */

static int same_file(const char *a, const char *b) {
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  int same = fa && fb;
  while (same) {
    int ca = fgetc(fa), cb = fgetc(fb);
    if (ca != cb) same = 0;
    if (ca == EOF) break;
  }
  if (fa) fclose(fa);
  if (fb) fclose(fb);
  return same;
}

/* Every entry of dir a exists in b with the same bytes, and b has no other. */
static void compare_dirs(const char *a, const char *b, const char *what) {
  for (int pass = 0; pass < 2; pass++) {
    const char *from = pass ? b : a, *to = pass ? a : b;
    DIR *dir = opendir(from);
    if (!dir) {
      CHECK_MSG(0, "%s: cannot open %s", what, from);
      return;
    }
    struct dirent *entry;
    while ((entry = readdir(dir))) {
      if (!strcmp(entry->d_name, ".") || !strcmp(entry->d_name, "..")) continue;
      char pa[8192], pb[8192];
      snprintf(pa, sizeof pa, "%s/%s", from, entry->d_name);
      snprintf(pb, sizeof pb, "%s/%s", to, entry->d_name);
      struct stat info;
      if (stat(pa, &info) == 0 && S_ISDIR(info.st_mode)) {
        if (pass == 0) compare_dirs(pa, pb, what);
        continue;
      }
      if (pass == 0) CHECK_MSG(same_file(pa, pb), "%s: %s differs from %s", what, pa, pb);
      else CHECK_MSG(access(pb, F_OK) == 0, "%s: %s exists only in %s", what, entry->d_name, from);
    }
    closedir(dir);
  }
}

static void remove_tree(const char *path) {
  DIR *dir = opendir(path);
  if (!dir) {
    unlink(path);
    return;
  }
  struct dirent *entry;
  while ((entry = readdir(dir))) {
    if (!strcmp(entry->d_name, ".") || !strcmp(entry->d_name, "..")) continue;
    char child[8192];
    snprintf(child, sizeof child, "%s/%s", path, entry->d_name);
    remove_tree(child);
  }
  closedir(dir);
  rmdir(path);
}

/* ---- the cases ------------------------------------------------------------------------ */

static const kill_point POINTS[] = {
    {"during the first prefill", MD_COLLECT_EPISODE_BEGIN, 1},
    {"after the first prefill file", MD_COLLECT_PREFILL, 1},
    {"mid-decode, episode 1 step 7", MD_COLLECT_STEP, 7},
    {"after episode 1's npy files, before its rows", MD_COLLECT_EPISODE_FILES, 1},
    {"after episode 2's rows, before run.json", MD_COLLECT_EPISODE_ROWS, 2},
    {"mid-decode, episode 3 (generated)", MD_COLLECT_STEP, 20 + 12 + 5},
    {"after the last episode, before complete", MD_COLLECT_EPISODE_DONE, 3},
};

/* The same with the 3 episodes collected together (--batch 3): the steps
 * are the batch's, the files are finished in order after them. */
static const kill_point BATCH_POINTS[] = {
    {"batched, during the second prefill", MD_COLLECT_EPISODE_BEGIN, 2},
    {"batched, after the third prefill file", MD_COLLECT_PREFILL, 3},
    {"batched, mid-decode, step 9", MD_COLLECT_STEP, 9},
    {"batched, after episode 1's npy files, before its rows", MD_COLLECT_EPISODE_FILES, 1},
    {"batched, after episode 2's rows, before run.json", MD_COLLECT_EPISODE_ROWS, 2},
    {"batched, after episode 2", MD_COLLECT_EPISODE_DONE, 2},
};

static void check_crash_and_resume(const char *base, const char *reference, const kill_point *p,
                                   int index) {
  char out[4096];
  snprintf(out, sizeof out, "%s/crash-%d", base, index);
  remove_tree(out);
  CHECK_MSG(run_child(out, false, p, NULL) == -SIGKILL, "%s: the child was not killed", p->name);
  /* Without resume the crashed directory is refused (the child prints the
   * message, which names --resume) and left alone. */
  md_status status = MD_OK;
  CHECK_MSG(run_child(out, false, NULL, &status) != 0 && status == MD_E_INVALID,
            "%s: a run directory without resume was not refused", p->name);
  CHECK_MSG(collect(out, true), "%s: resume failed", p->name);
  int failures_before = md_test_failures;
  compare_dirs(reference, out, p->name);
  if (md_test_failures == failures_before)
    printf("killed %s: resumed run identical to the uninterrupted one\n", p->name);
  remove_tree(out);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_resume OUT_DIR\n");
    return 2;
  }
  const char *root = getenv("MD_SOURCE_ROOT");
  if (!root) root = ".";
  const char *base = argv[1];
  mkdir(base, 0777);
  /* The checkpoint with the tiny tokenizer beside it. */
  snprintf(model_dir, sizeof model_dir, "%s/model", base);
  remove_tree(model_dir);
  mkdir(model_dir, 0777);
  const char *files[][2] = {{"tests/model/fixtures/theta1e4_f32/config.json", "config.json"},
                            {"tests/model/fixtures/theta1e4_f32/model.safetensors", "model.safetensors"},
                            {"tests/collect/fixtures/tokenizer.json", "tokenizer.json"}};
  for (int i = 0; i < 3; i++) {
    char from[4096], to[8192];
    snprintf(from, sizeof from, "%s/%s", root, files[i][0]);
    snprintf(to, sizeof to, "%s/%s", model_dir, files[i][1]);
    if (symlink(from, to) != 0) {
      fprintf(stderr, "test_resume: cannot link %s: %s\n", to, strerror(errno));
      return 2;
    }
  }
  snprintf(traces, sizeof traces, "%s/tests/collect/data/episodes.jsonl", root);

  char reference[4096], again[4096];
  snprintf(reference, sizeof reference, "%s/reference", base);
  snprintf(again, sizeof again, "%s/again", base);
  remove_tree(reference);
  remove_tree(again);
  CHECK_MSG(collect(reference, false), "uninterrupted run failed");
  /* Two uninterrupted runs agree bit for bit (the premise of the comparison). */
  CHECK_MSG(collect(again, false), "second run failed");
  compare_dirs(reference, again, "two uninterrupted runs");
  /* Resuming a complete run changes nothing. */
  CHECK_MSG(collect(again, true), "resume of a complete run failed");
  compare_dirs(reference, again, "resume of a complete run");
  remove_tree(again);

  for (size_t i = 0; i < sizeof POINTS / sizeof POINTS[0]; i++)
    check_crash_and_resume(base, reference, &POINTS[i], (int)i);
  batch = 3; /* the bytes of the run collected one episode at a time */
  for (size_t i = 0; i < sizeof BATCH_POINTS / sizeof BATCH_POINTS[0]; i++)
    check_crash_and_resume(base, reference, &BATCH_POINTS[i], (int)(100 + i));
  remove_tree(reference);
  remove_tree(model_dir);
  return md_test_finish("test_resume");
}
