/* ReLU on the CPU. Not an ops_*.c file: compiled with the IEEE flags it always had, so a
 * comparison with a NaN or a -0 input gives the bits it always gave. */
#include "kernels/cpu/ops.h"

void op_relu_forward(float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void op_relu_backward(float *dx, const float *dy, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}
