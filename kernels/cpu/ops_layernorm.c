#include "kernels/cpu/ops.h"

#include <math.h>

void op_layernorm_forward(float *y, float *mean, float *rstd, const float *x, const float *w,
                          const float *b, int N, int D, float eps) {
  for (int n = 0; n < N; n++) {
    const float *xr = x + (int64_t)n * D;
    float *yr = y + (int64_t)n * D;
    float s = 0.0f;
    for (int i = 0; i < D; i++) s += xr[i];
    float m = s / D;
    float v = 0.0f;
    for (int i = 0; i < D; i++) {
      float c = xr[i] - m;
      v += c * c;
    }
    float r = 1.0f / sqrtf(v / D + eps);
    for (int i = 0; i < D; i++) yr[i] = (xr[i] - m) * r * w[i] + b[i];
    mean[n] = m;
    rstd[n] = r;
  }
}

void op_layernorm_backward_input(float *dx, const float *dy, const float *x, const float *w,
                                 const float *mean, const float *rstd, int N, int D, int acc) {
  for (int n = 0; n < N; n++) {
    const float *xr = x + (int64_t)n * D, *dyr = dy + (int64_t)n * D;
    float *dxr = dx + (int64_t)n * D;
    float m = mean[n], r = rstd[n];
    /* dx = r * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w */
    float sg = 0.0f, sgx = 0.0f;
    for (int i = 0; i < D; i++) {
      float g = dyr[i] * w[i];
      sg += g;
      sgx += g * (xr[i] - m) * r;
    }
    sg /= D;
    sgx /= D;
    if (acc) {
      for (int i = 0; i < D; i++)
        dxr[i] += r * (dyr[i] * w[i] - sg - (xr[i] - m) * r * sgx);
    } else {
      for (int i = 0; i < D; i++)
        dxr[i] = r * (dyr[i] * w[i] - sg - (xr[i] - m) * r * sgx);
    }
  }
}

void op_layernorm_backward_weight(float *dw, float *db, const float *dy, const float *x,
                                  const float *mean, const float *rstd, int N, int D) {
  for (int n = 0; n < N; n++) {
    const float *xr = x + (int64_t)n * D, *dyr = dy + (int64_t)n * D;
    float m = mean[n], r = rstd[n];
    for (int i = 0; i < D; i++) {
      dw[i] += dyr[i] * (xr[i] - m) * r;
      db[i] += dyr[i];
    }
  }
}
