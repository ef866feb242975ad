/* enospc_shim.so: a full disk for machines that cannot mount a small tmpfs (LD_PRELOAD).
 *
 * Files under $PT_ENOSPC_DIR behave as if they lived on a file system of $PT_ENOSPC_BYTES:
 * a write(2) to one of them fails with ENOSPC when the bytes already in the directory tree plus
 * this write would pass the limit. Deleting files frees room, as on a real file system, so a
 * rolled-back checkpoint gives its space back. Every other write goes straight through.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef ssize_t (*write_fn)(int, const void *, size_t);

/* Bytes held by regular files under dir (recursively). */
static long long tree_bytes(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  long long sum = 0;
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d))) {
    struct stat st;
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (lstat(path, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) sum += tree_bytes(path);
    else if (S_ISREG(st.st_mode)) sum += st.st_size;
  }
  closedir(d);
  return sum;
}

/* Is fd a file under dir? Asked through /proc so no open(2) needs wrapping. */
static int fd_under(int fd, const char *dir) {
  char link[64], target[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return 0;
  target[n] = '\0';
  size_t len = strlen(dir);
  return !strncmp(target, dir, len) && target[len] == '/';
}

ssize_t write(int fd, const void *buf, size_t count) {
  static write_fn real;
  if (!real) real = (write_fn)dlsym(RTLD_NEXT, "write");
  const char *dir = getenv("PT_ENOSPC_DIR"), *limit = getenv("PT_ENOSPC_BYTES");
  if (dir && limit && fd > 2 && fd_under(fd, dir) &&
      tree_bytes(dir) + (long long)count > atoll(limit)) {
    errno = ENOSPC;
    return -1;
  }
  return real(fd, buf, count);
}
