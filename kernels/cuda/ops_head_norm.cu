/* Per-head RMSNorm of the q and k heads of qkv rows on the GPU (kernels.h: head_rmsnorm_*;
 * kernels/cpu/ops_head_norm.c). forward and backward_input: one block per head of a row (block
 * sums as fixed trees), the v heads copied; backward_weight: one block per column of wq or wk,
 * its threads striding over the (row, head) pairs, their sums meeting in a fixed tree: no
 * atomics, the same bits every run. */
#include "kernels/cuda/common.cuh"

/* Head h of row n (blockIdx.x = n * heads + h, heads = H + 2 KVH): a q head normed with wq, a
 * k head with wk, a v head copied. */
static __global__ void __launch_bounds__(PT_THREADS)
    head_rmsnorm_forward_kernel(float *y, float *rstd, const float *x, const float *wq,
                                const float *wk, int H, int KVH, int hd, float eps) {
  __shared__ float sh[32];
  const int heads = H + 2 * KVH, h = (int)(blockIdx.x % heads);
  const int64_t n = blockIdx.x / heads, o = (int64_t)blockIdx.x * hd;
  const float *xr = x + o;
  float *yr = y + o;
  if (h >= H + KVH) {
    for (int i = threadIdx.x; i < hd; i += blockDim.x) yr[i] = xr[i];
    return;
  }
  const float *w = h < H ? wq : wk;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < hd; i += blockDim.x) ss += xr[i] * xr[i];
  ss = pt_block_sum(ss, sh);
  const float r = 1.0f / sqrtf(ss / hd + eps);
  for (int i = threadIdx.x; i < hd; i += blockDim.x) yr[i] = xr[i] * r * w[i];
  if (threadIdx.x == 0) rstd[n * (H + KVH) + h] = r;
}

static __global__ void __launch_bounds__(PT_THREADS)
    head_rmsnorm_backward_input_kernel(float *dx, const float *dy, const float *x,
                                       const float *wq, const float *wk, const float *rstd, int H,
                                       int KVH, int hd) {
  __shared__ float sh[32];
  const int heads = H + 2 * KVH, h = (int)(blockIdx.x % heads);
  const int64_t n = blockIdx.x / heads, o = (int64_t)blockIdx.x * hd;
  const float *xr = x + o, *dyr = dy + o;
  float *dxr = dx + o;
  if (h >= H + KVH) {
    for (int i = threadIdx.x; i < hd; i += blockDim.x) dxr[i] = dyr[i];
    return;
  }
  const float *w = h < H ? wq : wk;
  const float r = rstd[n * (H + KVH) + h];
  float sgx = 0.0f;
  for (int i = threadIdx.x; i < hd; i += blockDim.x) sgx += dyr[i] * w[i] * xr[i] * r;
  sgx = pt_block_sum(sgx, sh) / hd;
  for (int i = threadIdx.x; i < hd; i += blockDim.x)
    dxr[i] = r * (dyr[i] * w[i] - xr[i] * r * sgx);
}

/* blockIdx.x = c (column of wq) or hd + c (of wk): dw[c] += sum over rows n and the part's
 * heads of dy * x * rstd. */
static __global__ void __launch_bounds__(PT_THREADS)
    head_rmsnorm_backward_weight_kernel(float *dwq, float *dwk, const float *dy, const float *x,
                                        const float *rstd, int N, int H, int KVH, int hd) {
  __shared__ float sh[32];
  const int k = (int)blockIdx.x >= hd, c = (int)blockIdx.x - k * hd;
  const int first = k ? H : 0, count = k ? KVH : H, ld = (H + 2 * KVH) * hd;
  float s = 0.0f;
  for (int64_t e = threadIdx.x; e < (int64_t)N * count; e += blockDim.x) {
    const int64_t n = e / count;
    const int h = first + (int)(e % count);
    const int64_t o = n * ld + (int64_t)h * hd + c;
    s += dy[o] * (x[o] * rstd[n * (H + KVH) + h]);
  }
  s = pt_block_sum(s, sh);
  if (threadIdx.x == 0) (k ? dwk : dwq)[c] += s;
}

extern "C" void cuda_op_head_rmsnorm_forward(gpu_ctx *g, float *y, float *rstd, const float *x,
                                             const float *wq, const float *wk, int N, int H,
                                             int KVH, int hd, float eps) {
  if (N <= 0 || hd <= 0) return;
  const double all = (double)N * (H + 2 * KVH) * hd, normed = (double)N * (H + KVH) * hd;
  const pt_cost cost = pt_cost_of(0.0, 4.0 * normed, 4.0 * (2 * all + 2 * hd + N * (H + KVH)));
  PT_LAUNCH_COSTED(head_rmsnorm_forward_kernel, cost, (unsigned)((int64_t)N * (H + 2 * KVH)),
                   PT_THREADS, 0, g->stream, y, rstd, x, wq, wk, H, KVH, hd, eps);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_head_rmsnorm_backward_input(gpu_ctx *g, float *dx, const float *dy,
                                                    const float *x, const float *wq,
                                                    const float *wk, const float *rstd, int N,
                                                    int H, int KVH, int hd) {
  if (N <= 0 || hd <= 0) return;
  const double all = (double)N * (H + 2 * KVH) * hd, normed = (double)N * (H + KVH) * hd;
  const pt_cost cost = pt_cost_of(0.0, 9.0 * normed, 4.0 * (3 * all + 2 * hd + N * (H + KVH)));
  PT_LAUNCH_COSTED(head_rmsnorm_backward_input_kernel, cost,
                   (unsigned)((int64_t)N * (H + 2 * KVH)), PT_THREADS, 0, g->stream, dx, dy, x,
                   wq, wk, rstd, H, KVH, hd);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_head_rmsnorm_backward_weight(gpu_ctx *g, float *dwq, float *dwk,
                                                     const float *dy, const float *x,
                                                     const float *rstd, int N, int H, int KVH,
                                                     int hd) {
  if (N <= 0 || hd <= 0) return;
  const double normed = (double)N * (H + KVH) * hd;
  const pt_cost cost = pt_cost_of(0.0, 3.0 * normed, 4.0 * (2 * normed + N * (H + KVH) + 4 * hd));
  PT_LAUNCH_COSTED(head_rmsnorm_backward_weight_kernel, cost, (unsigned)(2 * hd), PT_THREADS, 0,
                   g->stream, dwq, dwk, dy, x, rstd, N, H, KVH, hd);
  PT_LAUNCH_CHECK();
}
