/* Repetition policy, medians and input buffers shared by the timed pieces (bench.h). */
#include "profile/bench.h"

#include <stdlib.h>

#include "core/clock.h"
#include "core/error.h"

int bench_more(int reps, double t0_s, double share_s) {
  if (reps < BENCH_MIN_REPS) return 1;
  return reps < BENCH_MAX_REPS && pt_now_s() - t0_s < share_s;
}

double bench_median(double *x, int n) {
  for (int a = 1; a < n; a++) /* insertion sort: n <= BENCH_MAX_REPS */
    for (int b = a; b > 0 && x[b - 1] > x[b]; b--) {
      double s = x[b];
      x[b] = x[b - 1];
      x[b - 1] = s;
    }
  double m = n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
  return m > BENCH_MIN_S ? m : BENCH_MIN_S;
}

double bench_time(pt_device *d, void (*run)(void *ctx), void *ctx, double share_s) {
  double t[BENCH_MAX_REPS];
  int reps = -1; /* -1: the warm-up */
  for (double t0 = pt_now_s(); reps < 0 || bench_more(reps, t0, share_s); reps++) {
    device_sync(d);
    double s = pt_now_s();
    run(ctx);
    device_sync(d);
    if (reps >= 0) t[reps] = pt_now_s() - s;
  }
  return bench_median(t, reps);
}

float *bench_alloc_random(pt_device *d, size_t n, uint64_t seed) {
  float *host = pt_calloc(n ? n : 1, sizeof(float));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  if (s == 0) s = 1; /* xorshift's one fixed point */
  for (size_t k = 0; k < n; k++) { /* xorshift64: cheap, and the same values on every run */
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    host[k] = (float)(s >> 40) * (1.0f / 16777216.0f) - 0.5f;
  }
  float *buf = device_alloc(d, sizeof(float) * (n ? n : 1));
  device_upload(d, buf, host, sizeof(float) * n);
  free(host);
  return buf;
}
