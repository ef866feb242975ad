/* tests/gpu/emu/nccl/src/wait.c: the clock, the deadlock report, and waits on the host. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"

double emu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

double emu_timeout(void) {
  static double timeout = -1;
  if (timeout < 0) {
    const char *s = getenv("PT_EMU_NCCL_TIMEOUT");
    char *end = NULL;
    double v = s ? strtod(s, &end) : 0;
    timeout = s && end != s && *end == '\0' && v > 0 ? v : 30.0;
  }
  return timeout;
}

void emu_deadlock(double waited, const char *fmt, ...) {
  char what[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  emu_die("a deadlock in the emulated NCCL: %s blocked for %.1f s (PT_EMU_NCCL_TIMEOUT=%g)", what,
          waited, emu_timeout());
}

/* A GPU goes on running queued work while the host waits in NCCL's blocking calls, so the
 * streams are driven here too: a peer may be waiting for one of this rank's queued sends. */
void emu_wait_host(int n, MPI_Request *reqs, MPI_Status *st, const char *what) {
  struct timespec nap = {0, 50000};
  double start = emu_now();
  for (;;) {
    int flag = 0;
    EMU_CHECK_MPI(MPI_Testall(n, reqs, &flag, st ? st : MPI_STATUSES_IGNORE));
    if (flag) return;
    nccl_emu_stream_progress();
    double waited = emu_now() - start;
    if (waited > emu_timeout()) emu_deadlock(waited, "%s", what);
    nanosleep(&nap, NULL);
  }
}
