#include "observe/watchdog.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int g_seconds, g_rank;
static char g_msg[512];
static volatile sig_atomic_t g_len;

static void on_alarm(int sig) {
  (void)sig;
  ssize_t ignored = write(STDERR_FILENO, g_msg, (size_t)g_len);
  (void)ignored;
  _exit(1);
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
}

void watchdog_arm(const char *what, int peer, int64_t step) {
  if (g_seconds <= 0) return;
  alarm(0); /* no alarm while the message changes */
  char from[32] = "";
  if (peer >= 0) snprintf(from, sizeof from, " from rank %d", peer);
  int n = snprintf(g_msg, sizeof g_msg,
                   "pipetrain[rank %d]: error: no progress for %d s while waiting for %s%s "
                   "(step %lld); %s may have died or hung. Ending this rank so the job stops "
                   "(pipeline.timeout_s sets the limit)\n",
                   g_rank, g_seconds, what, from, (long long)step,
                   peer >= 0 ? "that rank" : "another rank");
  g_len = n < 0 ? 0 : (n < (int)sizeof g_msg ? n : (int)sizeof g_msg - 1);
  alarm((unsigned)g_seconds);
}

void watchdog_disarm(void) {
  if (g_seconds > 0) alarm(0);
}
