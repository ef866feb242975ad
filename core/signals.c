#include "core/signals.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"

static volatile sig_atomic_t g_pending, g_defer;
static volatile sig_atomic_t g_fwd_sig[4], g_fwd_as[4];
/* The pending signal came as a forwarded copy, whose original may still come (and is absorbed
 * once): both pending at once, the kernel delivers the lower number first, SIGUSR1 (10) before
 * SIGTERM (15), so the copy may well come first. */
static volatile sig_atomic_t g_copy_first;

static void on_signal(int sig) {
  /* only async-signal-safe calls here */
  int copy = 0;
  for (int i = 0; i < 4; i++)
    if (g_fwd_sig[i] == sig) { /* a forwarded copy: never a second signal */
      if (g_pending && g_defer) return;
      sig = g_fwd_as[i], copy = 1;
      break;
    }
  if (!copy && g_copy_first && g_pending == sig) { /* the copy's original: one preemption */
    g_copy_first = 0;
    return;
  }
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
  g_copy_first = copy;
}

void signals_defer_first(void) { g_defer = 1; }

/* sig's action: on_signal (without it a preemption saves nothing), or SIG_DFL. */
static void set_action(int sig, void (*action)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = action;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART; /* blocking reads and MPI waits resume instead of failing */
  PT_CHECK_LIBC(sigaction(sig, &sa, NULL));
}

static void handle(int sig) { set_action(sig, on_signal); }

void signals_install(void) {
  handle(SIGTERM);
  handle(SIGINT);
}

void signals_install_forwarded(int sig, int as) {
  for (int i = 0; i < 4; i++)
    if (!g_fwd_sig[i] || g_fwd_sig[i] == sig) {
      g_fwd_as[i] = as, g_fwd_sig[i] = sig;
      handle(sig);
      return;
    }
  pt_fatal("signals_install_forwarded: more than 4 forwarded signals");
}

void signals_restore_default(void) {
  set_action(SIGTERM, SIG_DFL);
  set_action(SIGINT, SIG_DFL);
  for (int i = 0; i < 4; i++)
    if (g_fwd_sig[i]) set_action(g_fwd_sig[i], SIG_DFL);
}

int signals_pending(void) { return (int)g_pending; }
