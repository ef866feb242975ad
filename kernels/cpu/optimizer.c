/* The optimizer updates on the CPU (PyTorch's AdamW and SGD), elementwise. Not an ops_*.c
 * file: no reassociation or signed-zero shortcuts, and built with -ffp-contract=off (no fused
 * multiply-adds, CMakeLists.txt), so every element gets exactly the float operations written
 * here; the GPU's update (kernels/cuda/optimizer.cu) does the same operations on the same
 * factors (pt_update's, computed once on the host), so both give the same bits. w16 (NULL:
 * none) gets the new weights' bf16 bits in the same pass (kernels.h's optimizer entry). Each
 * gradient is read times u->clip, one float multiply: the gradient clipping's scale. */
#include <math.h>

#include "kernels/cpu/ops.h"
#include "kernels/precision.h"

void op_adamw_step(const pt_update *u, float *p, uint16_t *w16, const float *g, float *m,
                   float *v, int64_t n) {
  float b1 = (float)u->beta1, b2 = (float)u->beta2, eps = (float)u->eps;
  for (int64_t i = 0; i < n; i++) {
    float gi = g[i] * u->clip;
    p[i] *= u->keep;
    m[i] = b1 * m[i] + (1.0f - b1) * gi;
    v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
    p[i] -= u->step * m[i] / (sqrtf(v[i]) * u->inv_sqrt_bc2 + eps);
    if (w16) w16[i] = pt_bf16_bits(p[i]);
  }
}

void op_sgd_step(const pt_update *u, float *p, uint16_t *w16, const float *g, float *m,
                 int64_t n) {
  float mu = (float)u->momentum, wd = u->decay ? (float)u->weight_decay : 0.0f;
  for (int64_t i = 0; i < n; i++) {
    float dir = g[i] * u->clip + wd * p[i];
    m[i] = u->t > 1 ? mu * m[i] + dir : dir;
    p[i] -= (float)u->lr * (mu > 0.0f ? m[i] : dir);
    if (w16) w16[i] = pt_bf16_bits(p[i]);
  }
}
