/* The engine's whole-buffer kernels on the CPU: gradient clipping's scale, the gradient norm's
 * sum of squares, the finiteness check. Not an ops_*.c file: without reassociation the sum runs
 * in element order, so a tensor's norm has the same bits in every layout that holds it. */
#include <math.h>

#include "kernels/cpu/ops.h"

void op_scale(float *x, float s, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] *= s;
}

double op_sumsq(const float *x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
  return s;
}

int op_all_finite(const float *x, int64_t n) {
  int ok = 1;
  for (int64_t i = 0; i < n; i++) ok &= isfinite(x[i]) != 0;
  return ok;
}
