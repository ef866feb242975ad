/* The engine's whole-buffer kernels on the CPU: gradient clipping's scale, the gradient norm's
 * sum of squares, the finiteness check. Not an ops_*.c file: without reassociation the sum runs
 * in element order, so a tensor's norm has the same bits in every layout that holds it. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/ops.h"

void op_scale(float *x, float s, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] *= s;
}

double op_sumsq(const float *x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
  return s;
}

/* An exponent field of all ones is an infinity or a NaN. Integer ORs over pieces of a fixed
 * length, which GCC vectorises at -O2 (isfinite on each float stays scalar). */
#define FINITE_PIECE 256
static uint32_t nonfinite_bits(const float *x, int64_t n) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    uint32_t b;
    memcpy(&b, x + i, sizeof b);
    bad |= (b & 0x7f800000u) ^ 0x7f800000u ? 0u : 1u;
  }
  return bad;
}

int op_all_finite(const float *x, int64_t n) {
  uint32_t bad = 0;
  int64_t i = 0;
  for (; i + FINITE_PIECE <= n; i += FINITE_PIECE) bad |= nonfinite_bits(x + i, FINITE_PIECE);
  return (bad | nonfinite_bits(x + i, n - i)) == 0;
}
