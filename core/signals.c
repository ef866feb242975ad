#include "core/signals.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"

static volatile sig_atomic_t g_pending, g_defer;

static void on_signal(int sig) {
  /* only async-signal-safe calls here */
  if (!g_defer) {
    static const char msg[] = "pipetrain: signal before training started, exiting\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    _exit(128 + sig);
  }
  if (g_pending) {
    static const char msg[] = "pipetrain: second signal, exiting without a checkpoint\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    _exit(128 + sig);
  }
  g_pending = sig;
}

void signals_defer_first(void) { g_defer = 1; }

void signals_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART; /* blocking reads and MPI waits resume instead of failing */
  PT_CHECK_LIBC(sigaction(SIGTERM, &sa, NULL)); /* without it a preemption saves nothing */
  PT_CHECK_LIBC(sigaction(SIGINT, &sa, NULL));
}

int signals_pending(void) { return (int)g_pending; }
