#include "kernels/cpu/fastmath.h"
#include "kernels/cpu/ops.h"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f

void op_gelu_forward(float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    float t = pt_tanhf(GELU_K * (v + GELU_C * v * v * v));
    y[i] = 0.5f * v * (1.0f + t);
  }
}

void op_gelu_backward(float *dx, const float *dy, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    float t = pt_tanhf(GELU_K * (v + GELU_C * v * v * v));
    float dt = GELU_K * (1.0f + 3.0f * GELU_C * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dt);
  }
}
