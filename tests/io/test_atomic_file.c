#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/stat.h>

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

  unlink(path);
  rmdir(dir);
  return md_test_finish("io_atomic_file");
}
