/* device/cpu_peak.h: every loop this CPU runs computes the recurrence acc = acc/2 + 1 on each of
 * its floats (closed form 2 + (x0 - 2) / 2^n, exact in float for small n and x0), and the
 * measured peak is a positive, finite rate of a supported loop. No timing is asserted. */
#include <math.h>

#include "device/cpu_peak.h"
#include "test_util.h"

/* After `iters` rounds from acc[i] = i - 100, every float equals the closed form. */
static void check_loop(const pt_fma_loop *loop, int iters) {
  float acc[256];
  int n = cpu_fma_floats(loop);
  CHECK(n > 0 && n <= 256, "%s: %d floats", loop->name, n);
  for (int i = 0; i < n; i++) acc[i] = (float)(i - 100);
  loop->run(acc, 0.5f, 1.0f, iters);
  int wrong = 0;
  for (int i = 0; i < n; i++) {
    float want = (float)(2.0 + ((double)(i - 100) - 2.0) / ldexp(1.0, iters));
    if (acc[i] != want) wrong++;
  }
  CHECK(!wrong, "%s, %d rounds: %d of %d floats differ from the closed form", loop->name, iters,
        wrong, n);
}

int main(void) {
  int supported = 0;
  for (int l = 0; cpu_fma_loops[l]; l++) {
    const pt_fma_loop *loop = cpu_fma_loops[l];
    if (!loop->supported()) continue;
    supported++;
    for (int iters = 0; iters <= 12; iters += 3) check_loop(loop, iters);
    /* the recurrence's fixed point: 2 exactly after enough rounds, whatever the start */
    float acc[256];
    for (int i = 0; i < cpu_fma_floats(loop); i++) acc[i] = (float)(i - 100);
    loop->run(acc, 0.5f, 1.0f, 200);
    for (int i = 0; i < cpu_fma_floats(loop); i++) CHECK(acc[i] == 2.0f, "%s: %g", loop->name, acc[i]);
  }
  CHECK(supported > 0, "no loop runs here");
  const pt_fma_loop *widest = cpu_fma_widest();
  CHECK(widest->supported(), "widest loop %s is not supported", widest->name);
  pt_cpu_peak p = cpu_peak_measure(0.02, 2);
  CHECK(p.loop == widest, "measured %s, widest is %s", p.loop->name, widest->name);
  CHECK(isfinite(p.flops) && p.flops > 0, "peak %g FLOP/s", p.flops);
  printf("peak: %.1f GFLOP/s float32 (%s, %d lanes x %d accumulators)\n", p.flops / 1e9,
         p.loop->name, p.loop->lanes, p.loop->accumulators);
  return test_summary("cpu_peak");
}
