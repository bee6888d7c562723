#include "io/files/mapped_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

md_status md_mapped_file_open(const char *path, md_mapped_file *file, md_error *err) {
  file->data = NULL;
  file->size = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: %s", path, strerror(errno));
  struct stat info;
  md_status status = MD_OK;
  if (fstat(fd, &info) != 0) {
    status = md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: %s", path, strerror(errno));
  } else if (!S_ISREG(info.st_mode)) {
    status = md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: not a regular file", path);
  } else if (info.st_size > 0) {
    void *map = mmap(NULL, (size_t)info.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      status = md_fail_kind(err, MD_E_IO, MD_KIND_INPUT, "%s: mmap failed: %s", path,
                            strerror(errno));
    } else {
      file->data = map;
      file->size = (size_t)info.st_size;
    }
  }
  close(fd);
  return status;
}

void md_mapped_file_close(md_mapped_file *file) {
  if (file->data) munmap((void *)file->data, file->size);
  file->data = NULL;
  file->size = 0;
}

bool md_is_regular_file(const char *path) {
  struct stat info;
  return stat(path, &info) == 0 && S_ISREG(info.st_mode);
}
