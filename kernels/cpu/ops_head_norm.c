/* Per-head RMSNorm of the q and k heads of qkv rows on the CPU (kernels.h: head_rmsnorm_*):
 * each token's q heads, then its k heads, are contiguous rows of hd, so the row RMSNorm of
 * ops_llama.c does them token by token. */
#include <string.h>

#include "kernels/cpu/ops.h"

void op_head_rmsnorm_forward(float *y, float *rstd, const float *x, const float *wq,
                             const float *wk, int N, int H, int KVH, int hd, float eps) {
  const int64_t ld = (int64_t)(H + 2 * KVH) * hd, qk = (int64_t)(H + KVH) * hd;
  for (int64_t n = 0; n < N; n++) {
    const float *xr = x + n * ld;
    float *yr = y + n * ld, *r = rstd + n * (H + KVH);
    op_rmsnorm_forward(yr, r, xr, wq, H, hd, eps);
    op_rmsnorm_forward(yr + (int64_t)H * hd, r + H, xr + (int64_t)H * hd, wk, KVH, hd, eps);
    memcpy(yr + qk, xr + qk, sizeof(float) * (size_t)(ld - qk));
  }
}

void op_head_rmsnorm_backward_input(float *dx, const float *dy, const float *x, const float *wq,
                                    const float *wk, const float *rstd, int N, int H, int KVH,
                                    int hd) {
  const int64_t ld = (int64_t)(H + 2 * KVH) * hd, qk = (int64_t)(H + KVH) * hd, q = (int64_t)H * hd;
  for (int64_t n = 0; n < N; n++) {
    const float *xr = x + n * ld, *dyr = dy + n * ld, *r = rstd + n * (H + KVH);
    float *dxr = dx + n * ld;
    op_rmsnorm_backward_input(dxr, dyr, xr, wq, r, H, hd, 0);
    op_rmsnorm_backward_input(dxr + q, dyr + q, xr + q, wk, r + H, KVH, hd, 0);
    memcpy(dxr + qk, dyr + qk, sizeof(float) * (size_t)(ld - qk));
  }
}

void op_head_rmsnorm_backward_weight(float *dwq, float *dwk, const float *dy, const float *x,
                                     const float *rstd, int N, int H, int KVH, int hd) {
  const int64_t ld = (int64_t)(H + 2 * KVH) * hd, q = (int64_t)H * hd;
  for (int64_t n = 0; n < N; n++) {
    const float *xr = x + n * ld, *dyr = dy + n * ld, *r = rstd + n * (H + KVH);
    op_rmsnorm_backward_weight(dwq, dyr, xr, r, H, hd);
    op_rmsnorm_backward_weight(dwk, dyr + q, xr + q, r + H, KVH, hd);
  }
}
