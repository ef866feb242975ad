/* One job per checkpoint directory (checkpoint.h, checkpoint_lock_dir): DIR/.pipetrain.lock,
 * held with flock for the life of the process, so the kernel releases it whatever way the
 * holder ends; its text (host, pid, start time) only names the holder. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/checkpoint.h"

enum { MAX_LOCKS = 4 };
static struct {
  char path[4200];
  int fd;
  dev_t dev;
  ino_t ino;
} g_locks[MAX_LOCKS];
static int g_n_locks;

/* Removes this process's lock files (only while they are still the files it locked: a save may
 * have set the directory aside with its lock inside). The locks themselves go with the process. */
static void remove_locks(void) {
  for (int i = 0; i < g_n_locks; i++) {
    struct stat st;
    if (stat(g_locks[i].path, &st) == 0 && st.st_dev == g_locks[i].dev &&
        st.st_ino == g_locks[i].ino)
      unlink(g_locks[i].path);
  }
}

static void read_holder(int fd, char *out, size_t outsz) {
  ssize_t n = pread(fd, out, outsz - 1, 0);
  out[n > 0 ? n : 0] = '\0';
  out[strcspn(out, "\n")] = '\0';
}

/* Opens and locks path; 1 locked (fd kept), 0 held by another process (holder: its text), -1
 * error. Retries when the file it locked was removed meanwhile by the holder's exit. */
static int take(const char *path, int *fd_out, char *holder, size_t holdersz, char *err,
                size_t errsz) {
  for (int tries = 0; tries < 10; tries++) {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
      snprintf(err, errsz, "%s: cannot create the lock file: %s", path, strerror(errno));
      return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int busy = errno == EWOULDBLOCK;
      if (busy) read_holder(fd, holder, holdersz);
      else snprintf(err, errsz, "%s: cannot lock: %s", path, strerror(errno));
      close(fd);
      return busy ? 0 : -1;
    }
    struct stat mine, now;
    if (fstat(fd, &mine) == 0 && stat(path, &now) == 0 && mine.st_ino == now.st_ino &&
        mine.st_dev == now.st_dev) {
      *fd_out = fd;
      return 1;
    }
    close(fd);
  }
  snprintf(err, errsz, "%s: the lock file keeps changing: another job is starting there", path);
  return -1;
}

int checkpoint_lock_dir(const char *dir, const char *what, char *err, size_t errsz) {
  char path[4200], holder[512] = "";
  snprintf(path, sizeof path, "%s/.pipetrain.lock", dir);
  for (int i = 0; i < g_n_locks; i++) /* the same directory twice (--save as the checkpoint root) */
    if (!strcmp(g_locks[i].path, path)) return 0;
  if (g_n_locks == MAX_LOCKS) return 0;
  if (checkpoint_make_dir(dir, err, errsz) != 0) return -1;
  int fd = -1, got = take(path, &fd, holder, sizeof holder, err, errsz);
  if (got < 0) return -1;
  if (got == 0) {
    snprintf(err, errsz,
             "%s %s is in use by another pipetrain job (%s); two jobs would replace each other's "
             "checkpoints: wait for it to end, or give this job another directory",
             what, dir, holder[0] ? holder : "its lock file names no holder");
    return -1;
  }
  read_holder(fd, holder, sizeof holder);
  if (holder[0]) /* its holder ended without removing it (killed): flock says it is gone */
    fprintf(stderr, "pipetrain: note: %s: taking over the lock left by a job that ended (%s)\n",
            dir, holder);
  char host[256] = "?", when[64] = "?", text[512];
  gethostname(host, sizeof host - 1);
  time_t now = time(NULL);
  struct tm tm;
  if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  int n = snprintf(text, sizeof text, "host %s, pid %ld, started %s\n", host, (long)getpid(), when);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)n, 0) != n) {
    /* the lock holds without its text; only the message naming the holder loses */
  }
  struct stat st;
  fstat(fd, &st);
  snprintf(g_locks[g_n_locks].path, sizeof g_locks[0].path, "%s", path);
  g_locks[g_n_locks].fd = fd, g_locks[g_n_locks].dev = st.st_dev, g_locks[g_n_locks].ino = st.st_ino;
  if (g_n_locks++ == 0) atexit(remove_locks);
  return 0;
}
