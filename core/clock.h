/* core/clock.h: monotonic seconds, for step timing and benchmarks. */
#ifndef PT_CLOCK_H
#define PT_CLOCK_H

#include <time.h>

static inline double pt_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
