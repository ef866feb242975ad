/* launcher/launch_watch.c: the parent of a self-started job's launcher (launcher/launch_watch.h). */
#include "launcher/launch_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

#define KILL_AFTER_S 10 /* after the SIGTERM past the grace: mpiexec needs odls_base_sigkill_timeout */

static volatile sig_atomic_t g_child, g_first, g_count;

static void on_signal(int sig) {
  /* only async-signal-safe calls here; forwarding here, not in the loop, loses no signal */
  if (!g_first) g_first = sig;
  g_count++;
  /* a second one: mpiexec's own stop (SIGTERM to the ranks, SIGKILL a moment later), which
   * cannot merge with the first in mpiexec as a second SIGUSR1 could */
  if (g_child > 0)
    kill((pid_t)g_child, g_count > 1            ? SIGTERM
                         : g_first == SIGINT ? LAUNCH_WATCH_FOR_SIGINT
                                             : LAUNCH_WATCH_FOR_SIGTERM);
}

static void set_handlers(void (*handler)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
}

/* In the child: its own process group, SIGTERM when the parent dies, default handlers, the mask
 * from before the fork; then the launcher. On failure errno goes to the parent through report. */
static void exec_child(char **args, const sigset_t *mask, pid_t parent, int report) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(128 + SIGTERM); /* the parent died before prctl */
  set_handlers(SIG_DFL);
  sigprocmask(SIG_SETMASK, mask, NULL);
  execvp(args[0], args);
  int e = errno;
  ssize_t ignored = write(report, &e, sizeof e);
  (void)ignored;
  _exit(127);
}

/* Forks and execs args with the signals blocked until g_child is set, so a signal that comes
 * meanwhile is forwarded once it is. Returns the child's pid, or -1 with errno. */
static pid_t start_child(char **args) {
  int report[2];
  if (pipe(report) != 0) return -1;
  fcntl(report[0], F_SETFD, FD_CLOEXEC); /* the write end closed by a successful exec: EOF */
  fcntl(report[1], F_SETFD, FD_CLOEXEC);
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGINT);
  sigprocmask(SIG_BLOCK, &block, &old);
  set_handlers(on_signal);
  pid_t parent = getpid(), pid = fork();
  if (pid == 0) exec_child(args, &old, parent, report[1]);
  int e = errno, failed = 0;
  close(report[1]);
  if (pid > 0) { /* EOF: the exec closed the pipe; else the child's errno */
    setpgid(pid, pid); /* as the child does: whichever runs first (an exec'd child refuses) */
    ssize_t r;
    while ((r = read(report[0], &e, sizeof e)) < 0 && errno == EINTR) {}
    failed = r == (ssize_t)sizeof e;
    if (failed) waitpid(pid, NULL, 0); /* it _exits at once */
    else g_child = pid;
  }
  close(report[0]);
  if (g_child <= 0) set_handlers(SIG_DFL);
  sigprocmask(SIG_SETMASK, &old, NULL);
  if (pid < 0 || failed) {
    errno = e;
    return -1;
  }
  return pid;
}

/* The job's exit code from the launcher's status and the signals this process got. */
static int job_code(int status, int forced) {
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (!g_first || code == 0) return code;
  /* above 128: a rank that ended on the signal (before training, or a second one), or mpiexec
   * killed; 1 or 2 stay: a rank's error while it stopped */
  return code > 128 || forced || g_count > 1 ? 128 + g_first : code;
}

int launch_watch_run(char **args, int64_t grace_s) {
  pid_t pid = start_child(args);
  if (pid < 0) return -1;
  int status = 0, told = 0, forced = 0;
  double since = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) { /* cannot be: pid is this process's child */
      perror("pipetrain: waiting for the launcher");
      return 1;
    }
    if (g_count > told) { /* a SIGTERM/SIGINT, already forwarded by on_signal */
      told = g_count;
      if (!since) since = pt_now_s();
      fprintf(stderr, told == 1 ? "pipetrain: %s: passed to the ranks, which finish the step and "
                                  "save (a second signal stops them at once)\n"
                                : "pipetrain: %s again: the ranks stop without a checkpoint\n",
              g_first == SIGINT ? "SIGINT" : "SIGTERM");
    }
    double waited = since ? pt_now_s() - since : 0;
    if (forced == 0 && grace_s > 0 && waited > (double)grace_s) {
      fprintf(stderr, "pipetrain: the ranks did not stop within %lld s of the signal; stopping "
              "them without a checkpoint\n", (long long)grace_s);
      kill(pid, SIGTERM), forced = 1;
    } else if (forced == 1 && waited > (double)(grace_s + KILL_AFTER_S)) {
      kill(pid, SIGKILL), forced = 2;
    }
    nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
  }
  g_child = 0;
  return job_code(status, forced);
}
