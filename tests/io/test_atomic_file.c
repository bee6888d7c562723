#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/files/atomic_file.h"
#include "tests/test_util.h"

static char *slurp(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  char *buf = calloc(1, 4096);
  fread(buf, 1, 4095, fp);
  fclose(fp);
  return buf;
}

/* A writer in a child process: opens `path` as an output, writes part of
 * it, sends its temporary's name down `report`, then waits for a byte on
 * `go` and commits (or is killed before). Returns the child's pid. */
static pid_t start_writer(const char *path, char *temp, size_t size, int *go_fd) {
  int report[2], go[2];
  CHECK(pipe(report) == 0 && pipe(go) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(report[0]);
    close(go[1]);
    md_atomic_file file;
    md_error err;
    if (md_atomic_open(&file, path, &err) != MD_OK) _exit(3);
    fputs("from the child", file.fp);
    fflush(file.fp);
    if (write(report[1], file.temp_path, strlen(file.temp_path) + 1) < 0) _exit(4);
    char byte;
    if (read(go[0], &byte, 1) != 1) _exit(5);
    _exit(md_atomic_commit(&file, &err) == MD_OK ? 0 : 6);
  }
  close(report[1]);
  close(go[0]);
  ssize_t got = read(report[0], temp, size - 1);
  CHECK(got > 0);
  temp[got > 0 ? got : 0] = '\0';
  close(report[0]);
  *go_fd = go[1];
  return pid;
}

/* Stale temporaries: a writer killed with SIGKILL leaves its temporary;
 * the next writer of the same target removes it, but never a live
 * writer's, nor a file that is not a temporary of that target. */
static void test_stale_temporaries(const char *dir) {
  char path[256], temp[512];
  snprintf(path, sizeof path, "%s/stale.json", dir);
  md_error err;
  int go;
  pid_t pid = start_writer(path, temp, sizeof temp, &go);
  CHECK(kill(pid, SIGKILL) == 0);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status));
  close(go);
  CHECK_MSG(access(temp, F_OK) == 0, "kill -9 left no temporary %s", temp);

  /* Not ours, kept: other targets, other patterns, a directory. */
  const char *strangers[] = {".stale.json.ABC", ".stale.json.AB-DEF", ".stale.jsonx.ABCDEF",
                             ".other.json.ABCDEF", "stale.json.ABCDEF", ".stale.json.ABCDEFG"};
  char other[512];
  for (size_t i = 0; i < sizeof strangers / sizeof strangers[0]; i++) {
    snprintf(other, sizeof other, "%s/%s", dir, strangers[i]);
    int fd = open(other, O_WRONLY | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0);
    close(fd);
  }
  char subdir[512];
  snprintf(subdir, sizeof subdir, "%s/.stale.json.DIRECT", dir);
  CHECK(mkdir(subdir, 0700) == 0);

  CHECK(md_write_file_atomic(path, "next", 4, &err) == MD_OK);
  CHECK_MSG(access(temp, F_OK) != 0, "the dead writer's %s is still there", temp);
  for (size_t i = 0; i < sizeof strangers / sizeof strangers[0]; i++) {
    snprintf(other, sizeof other, "%s/%s", dir, strangers[i]);
    CHECK_MSG(access(other, F_OK) == 0, "%s was removed", strangers[i]);
    unlink(other);
  }
  CHECK(rmdir(subdir) == 0);

  /* A live writer's temporary is kept, and the writer still commits. */
  pid = start_writer(path, temp, sizeof temp, &go);
  CHECK(md_write_file_atomic(path, "meanwhile", 9, &err) == MD_OK);
  CHECK_MSG(access(temp, F_OK) == 0, "a live writer's %s was removed", temp);
  CHECK(write(go, "x", 1) == 1);
  close(go);
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char *text = slurp(path);
  CHECK(text && !strcmp(text, "from the child"));
  free(text);
  CHECK(access(temp, F_OK) != 0);

  /* A file of our pattern that another process holds a lock on (its
   * writer alive, whoever it is) is kept too. */
  snprintf(other, sizeof other, "%s/.stale.json.LOCKED", dir);
  int held = open(other, O_WRONLY | O_CREAT | O_EXCL, 0600);
  CHECK(held >= 0);
  int to_child[2];
  CHECK(pipe(to_child) == 0);
  pid = fork();
  if (pid == 0) {
    close(to_child[1]);
    if (flock(held, LOCK_EX) != 0) _exit(3);
    char byte;
    if (read(to_child[0], &byte, 1) != 1) _exit(4); /* the lock held until then */
    _exit(0);
  }
  close(held);
  close(to_child[0]);
  /* wait until the child holds it */
  for (int i = 0; i < 500; i++) {
    int probe = open(other, O_RDONLY);
    bool locked = probe >= 0 && flock(probe, LOCK_EX | LOCK_NB) != 0;
    if (probe >= 0) close(probe);
    if (locked) break;
    usleep(10000);
  }
  CHECK(md_write_file_atomic(path, "again", 5, &err) == MD_OK);
  CHECK_MSG(access(other, F_OK) == 0, "a locked temporary was removed");
  CHECK(write(to_child[1], "x", 1) == 1);
  close(to_child[1]);
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  /* Its holder gone, it is stale: the next writer removes it. */
  CHECK(md_write_file_atomic(path, "last", 4, &err) == MD_OK);
  CHECK(access(other, F_OK) != 0);
  unlink(path);
}

int main(void) {
  char dir[] = "/tmp/md-atomic-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[256];
  snprintf(path, sizeof path, "%s/out.json", dir);
  md_error err;

  /* A committed write replaces the file. */
  CHECK(md_write_file_atomic(path, "first", 5, &err) == MD_OK);
  char *text = slurp(path);
  CHECK(text && !strcmp(text, "first"));
  free(text);

  /* An aborted write leaves the old content and no temporary file. */
  md_atomic_file file;
  CHECK(md_atomic_open(&file, path, &err) == MD_OK);
  fputs("partial", file.fp);
  char temp_copy[256];
  snprintf(temp_copy, sizeof temp_copy, "%s", file.temp_path);
  md_atomic_abort(&file);
  text = slurp(path);
  CHECK(text && !strcmp(text, "first"));
  free(text);
  CHECK(access(temp_copy, F_OK) != 0);

  /* A directory that does not exist is an I/O error naming the path. */
  CHECK(md_write_file_atomic("/nonexistent-dir/x.json", "x", 1, &err) == MD_E_IO);
  CHECK(strstr(err.message, "/nonexistent-dir/x.json") != NULL);

  /* A FIFO (like /dev/null or /dev/stdout) is written through, never
   * replaced by a plain file. */
  char fifo[256];
  snprintf(fifo, sizeof fifo, "%s/pipe", dir);
  CHECK(mkfifo(fifo, 0600) == 0);
  int reader = open(fifo, O_RDONLY | O_NONBLOCK);
  CHECK(reader >= 0);
  CHECK(md_write_file_atomic(fifo, "through", 7, &err) == MD_OK);
  char got[16] = {0};
  CHECK(read(reader, got, sizeof got - 1) == 7 && !strcmp(got, "through"));
  close(reader);
  struct stat info;
  CHECK(stat(fifo, &info) == 0 && S_ISFIFO(info.st_mode));
  unlink(fifo);

  test_stale_temporaries(dir);

  unlink(path);
  rmdir(dir);
  return md_test_finish("io_atomic_file");
}
