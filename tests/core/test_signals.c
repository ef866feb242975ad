/* core/signals.h: a forwarded copy and its original (SIGTERM to every pipe_train of a job that
 * pipe_train started: each rank gets SIGTERM and the parent's SIGUSR1) are one preemption in
 * either order; a signal beyond that ends the process (128 + SIGTERM), as does one before
 * training starts. Each case runs in a child of its own, which raises the signals in order. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/signals.h"
#include "test_util.h"

/* The child's exit status after raising sigs[0..n) (0 ends the list); it exits 0 when it is
 * still alive with SIGTERM pending, 1 alive with anything else pending. */
static int run_case(int defer, const int *sigs) {
  pid_t pid = fork();
  if (pid == 0) {
    signals_install();
    signals_install_forwarded(SIGUSR1, SIGTERM);
    if (defer) signals_defer_first();
    for (int i = 0; sigs[i]; i++) raise(sigs[i]);
    _exit(signals_pending() == SIGTERM ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
}

int main(void) {
  static const struct {
    const char *what;
    int defer, sigs[4], want;
  } cases[] = {
      {"SIGTERM", 1, {SIGTERM}, 0},
      {"the copy alone", 1, {SIGUSR1}, 0},
      {"SIGTERM, then its copy", 1, {SIGTERM, SIGUSR1}, 0},
      {"the copy, then its SIGTERM", 1, {SIGUSR1, SIGTERM}, 0},
      {"the copy, its SIGTERM, a second SIGTERM", 1, {SIGUSR1, SIGTERM, SIGTERM}, 128 + SIGTERM},
      {"SIGTERM, its copy, a second SIGTERM", 1, {SIGTERM, SIGUSR1, SIGTERM}, 128 + SIGTERM},
      {"two SIGTERMs", 1, {SIGTERM, SIGTERM}, 128 + SIGTERM},
      {"SIGTERM before training starts", 0, {SIGTERM}, 128 + SIGTERM},
      {"the copy before training starts", 0, {SIGUSR1}, 128 + SIGTERM},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int got = run_case(cases[i].defer, cases[i].sigs);
    CHECK(got == cases[i].want, "%s: exit %d, want %d", cases[i].what, got, cases[i].want);
  }
  return test_summary("test_signals");
}
