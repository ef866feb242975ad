#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m) {
  if (S_ISDIR(m)) return "it is a directory, not a file";
  if (S_ISFIFO(m)) return "it is a FIFO (named pipe), not a regular file";
  if (S_ISCHR(m) || S_ISBLK(m)) return "it is a device, not a regular file";
  if (S_ISSOCK(m)) return "it is a socket, not a regular file";
  return "it is not a regular file";
}

int pt_open_regular_file(const char *path, const char **why) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    *why = strerror(errno);
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *why = fstat(fd, &st) != 0 ? strerror(errno) : kind_of(st.st_mode);
    close(fd);
    return -1;
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  *why = NULL;
  return fd;
}
