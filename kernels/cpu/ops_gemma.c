/* Gemma 2's elementwise kernels on the CPU (kernels.h: geglu_*, softcap_*, add_scalar). */
#include "kernels/cpu/fastmath.h"
#include "kernels/cpu/ops.h"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi), as op_gelu_forward */
#define GELU_C 0.044715f

void op_geglu_forward(float *y, const float *gu, int N, int F) {
  for (int n = 0; n < N; n++) {
    const float *g = gu + (int64_t)n * 2 * F, *u = g + F;
    float *yr = y + (int64_t)n * F;
    for (int i = 0; i < F; i++) {
      float v = g[i], t = pt_tanhf(GELU_K * (v + GELU_C * v * v * v));
      yr[i] = 0.5f * v * (1.0f + t) * u[i];
    }
  }
}

void op_geglu_backward(float *dgu, const float *dy, const float *gu, int N, int F) {
  for (int n = 0; n < N; n++) {
    const float *g = gu + (int64_t)n * 2 * F, *u = g + F, *dyr = dy + (int64_t)n * F;
    float *dg = dgu + (int64_t)n * 2 * F, *du = dg + F;
    for (int i = 0; i < F; i++) {
      float v = g[i], t = pt_tanhf(GELU_K * (v + GELU_C * v * v * v));
      float dt = GELU_K * (1.0f + 3.0f * GELU_C * v * v);
      dg[i] = dyr[i] * u[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dt);
      du[i] = dyr[i] * (0.5f * v * (1.0f + t));
    }
  }
}

void op_softcap_forward(float *y, const float *x, float cap, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = pt_tanhf(x[i] / cap) * cap;
}

void op_softcap_backward(float *dx, const float *dy, const float *x, float cap, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float t = pt_tanhf(x[i] / cap);
    dx[i] = dy[i] * (1.0f - t * t);
  }
}

void op_add_scalar(float *y, const float *x, float c, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] + c;
}
