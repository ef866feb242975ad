/* The Llama block's kernels on the CPU (kernels.h: rmsnorm_*, rope, swiglu_*). */
#include <math.h>

#include "kernels/cpu/fastmath.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/rope_angle.h"

void op_rmsnorm_forward(float *y, float *rstd, const float *x, const float *w, int N, int D,
                        float eps) {
  for (int n = 0; n < N; n++) {
    const float *xr = x + (int64_t)n * D;
    float *yr = y + (int64_t)n * D;
    float ss = 0.0f;
    for (int i = 0; i < D; i++) ss += xr[i] * xr[i];
    float r = 1.0f / sqrtf(ss / D + eps);
    for (int i = 0; i < D; i++) yr[i] = xr[i] * r * w[i];
    rstd[n] = r;
  }
}

void op_rmsnorm_backward_input(float *dx, const float *dy, const float *x, const float *w,
                               const float *rstd, int N, int D, int acc) {
  for (int n = 0; n < N; n++) {
    const float *xr = x + (int64_t)n * D, *dyr = dy + (int64_t)n * D;
    float *dxr = dx + (int64_t)n * D;
    float r = rstd[n], sgx = 0.0f;
    for (int i = 0; i < D; i++) sgx += dyr[i] * w[i] * xr[i] * r;
    sgx /= D;
    for (int i = 0; i < D; i++) {
      float v = r * (dyr[i] * w[i] - xr[i] * r * sgx);
      dxr[i] = acc ? dxr[i] + v : v;
    }
  }
}

void op_rmsnorm_backward_weight(float *dw, const float *dy, const float *x, const float *rstd,
                                int N, int D) {
  for (int n = 0; n < N; n++) {
    const float *xr = x + (int64_t)n * D, *dyr = dy + (int64_t)n * D;
    float r = rstd[n];
    for (int i = 0; i < D; i++) dw[i] += dyr[i] * (xr[i] * r);
  }
}

/* Token (b, t) at position pos: its q and k heads rotated. */
static void rope_token(float *row, int heads, int hd, int pos, const pt_rope_freqs *f,
                       int dir) {
  const int half = hd / 2;
  for (int j = 0; j < half; j++) {
    float c, s;
    rope_cos_sin(pos, f->inv_freq[j], f->scale, &c, &s);
    if (dir < 0) s = -s;
    for (int h = 0; h < heads; h++) {
      float *x = row + (int64_t)h * hd;
      float x0 = x[j], x1 = x[j + half];
      x[j] = x0 * c - x1 * s;
      x[j + half] = x1 * c + x0 * s;
    }
  }
}

void op_rope(float *qkv, int B, int T, int H, int KVH, int hd, const pt_rope_freqs *f, int dir,
             const int32_t *positions) {
  const int half = hd / 2, heads = H + KVH, ld = (H + 2 * KVH) * hd;
  if (positions) {
    for (int64_t n = 0; n < (int64_t)B * T; n++)
      rope_token(qkv + n * ld, heads, hd, positions[n], f, dir);
    return;
  }
  for (int t = 0; t < T; t++) {
    for (int j = 0; j < half; j++) {
      float c, s;
      rope_cos_sin(t, f->inv_freq[j], f->scale, &c, &s);
      if (dir < 0) s = -s;
      for (int b = 0; b < B; b++) {
        float *row = qkv + ((int64_t)b * T + t) * ld;
        for (int h = 0; h < heads; h++) {
          float *x = row + (int64_t)h * hd;
          float x0 = x[j], x1 = x[j + half];
          x[j] = x0 * c - x1 * s;
          x[j + half] = x1 * c + x0 * s;
        }
      }
    }
  }
}

void op_swiglu_forward(float *y, const float *gu, int N, int F) {
  for (int n = 0; n < N; n++) {
    const float *g = gu + (int64_t)n * 2 * F, *u = g + F;
    float *yr = y + (int64_t)n * F;
    for (int i = 0; i < F; i++) yr[i] = g[i] / (1.0f + pt_expf(-g[i])) * u[i];
  }
}

void op_swiglu_backward(float *dgu, const float *dy, const float *gu, int N, int F) {
  for (int n = 0; n < N; n++) {
    const float *g = gu + (int64_t)n * 2 * F, *u = g + F, *dyr = dy + (int64_t)n * F;
    float *dg = dgu + (int64_t)n * 2 * F, *du = dg + F;
    for (int i = 0; i < F; i++) {
      float sg = 1.0f / (1.0f + pt_expf(-g[i]));
      dg[i] = dyr[i] * u[i] * (sg * (1.0f + g[i] * (1.0f - sg)));
      du[i] = dyr[i] * (g[i] * sg);
    }
  }
}
