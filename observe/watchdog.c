#include "observe/watchdog.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"

static int g_seconds, g_rank;
static char g_msg[512], g_what[200];
static int64_t g_step;
static int g_armed, g_by_comm, g_relay, g_peer = -1;
static volatile sig_atomic_t g_len, g_said; /* g_said: the line is out, the exit comes */

/* The line, then a grace of 2 s before the exit (which makes mpirun end the others): ranks
 * that wait on each other in a chain all time out about now, and the one waiting on the rank
 * that stopped gets to name it too. Nothing re-arms or disarms it meanwhile. */
static void on_alarm(int sig) {
  (void)sig;
  if (g_said) _exit(1);
  g_said = 1;
  ssize_t ignored = write(STDERR_FILENO, g_msg, (size_t)g_len);
  (void)ignored;
  alarm(2);
}

/* The ranks that can name the missing one end the job first: a rank waiting on one that is
 * itself waiting on others (a root's verdict after a gather, a reduction's last rank) waits
 * this much longer. */
static unsigned relay_slack(void) { return (unsigned)(g_seconds / 2 > 2 ? g_seconds / 2 : 2); }

static void format_msg(int peer) {
  char from[112] = "";
  const char *host = peer >= 0 ? comm_host_name(peer) : "";
  if (peer >= 0) snprintf(from, sizeof from, " from rank %d%s%s", peer, *host ? " on " : "", host);
  int n = snprintf(g_msg, sizeof g_msg,
                   "pipetrain[rank %d]: error: no progress for %d s while waiting for %s%s "
                   "(step %lld); %s may have died or hung. Ending this rank so the job stops "
                   "(pipeline.timeout_s sets the limit)\n",
                   g_rank, g_seconds, g_what, from, (long long)g_step,
                   peer >= 0 ? "that rank" : "another rank");
  g_len = n < 0 ? 0 : (n < (int)sizeof g_msg ? n : (int)sizeof g_msg - 1);
}

/* comm's blocking calls name the rank they wait on (comm_set_wait_hook): the armed wait's
 * message names it, the countdown runs on. A blocking call outside any armed wait is watched
 * under its own name until it returns. */
static void on_comm_wait(const char *call, int peer, int relay) {
  if (g_seconds <= 0 || g_said) return;
  if (!call) {
    if (g_by_comm) watchdog_disarm();
    return;
  }
  unsigned left = alarm(0); /* no alarm while the message changes */
  if (!g_armed) {
    snprintf(g_what, sizeof g_what, "%s", call);
    g_armed = 1, g_by_comm = 1, g_relay = 0, g_peer = -1, left = (unsigned)g_seconds;
  }
  if (relay && !g_relay) left += relay_slack();
  g_relay |= relay;
  if (peer >= 0) g_peer = peer;
  format_msg(g_peer);
  alarm(left ? left : 1);
}

void watchdog_init(int seconds, int rank) {
  g_seconds = seconds;
  g_rank = rank;
  if (seconds <= 0) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, NULL);
  comm_set_wait_hook(on_comm_wait);
}

static void arm(const char *what, int peer, int64_t step, unsigned extra) {
  if (g_seconds <= 0 || g_said) return;
  alarm(0); /* no alarm while the message changes */
  snprintf(g_what, sizeof g_what, "%s", what);
  g_step = step, g_armed = 1, g_by_comm = 0, g_relay = extra > 0, g_peer = peer;
  format_msg(peer);
  alarm((unsigned)g_seconds + extra);
}

void watchdog_arm(const char *what, int peer, int64_t step) { arm(what, peer, step, 0); }

void watchdog_arm_relay(const char *what, int peer, int64_t step) {
  arm(what, peer, step, relay_slack());
}

void watchdog_disarm(void) {
  if (g_seconds <= 0 || g_said) return;
  alarm(0);
  g_armed = 0, g_by_comm = 0;
}
