/* The fused residual-add + norm kernels on the GPU (kernels.h: layernorm_forward_residual,
 * layernorm_backward_input_residual, rmsnorm_*_residual), after the fused residual forward and
 * the layernorm backward of https://github.com/karpathy/llm.c: one launch and one pass over each row where the separate calls
 * launched an add (or a copy of the residual gradient) and the norm, writing the residual
 * stream and reading it back. One block per row, as ops_layernorm.cu and ops_llama.cu; thread t
 * owns the elements i = t, t + PT_THREADS, ... of its row and rereads only what it wrote, so
 * x1 and dx may alias an input elementwise. The block sums are the same fixed trees
 * (common.cuh): the same bits every run. Each launch notes its compulsory work (cost.h). */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cost.h"

/* x1 = a + b over this thread's elements of the row at o (and its bits to x1bits, given);
 * returns their sum (squares: of their squares), the thread's share of the row's. */
static __device__ __forceinline__ float residual_add(float *x1, uint16_t *x1bits, const float *a,
                                                     const float *b, int64_t o, int D,
                                                     bool squares) {
  float s = 0.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    const float v = a[o + i] + b[o + i];
    x1[o + i] = v;
    if (x1bits) x1bits[o + i] = pt_bf16_bits(v);
    s += squares ? v * v : v;
  }
  return s;
}

/* x1 = a + b;  then ops_layernorm.cu's forward of x1:  m = sum x1 / D;  v = sum (x1 - m)^2;
 * r = 1 / sqrtf(v / D + eps);  y = (x1 - m) * r * w + bias. */
static __global__ void __launch_bounds__(PT_THREADS)
    layernorm_forward_residual_kernel(float *x1, float *y, float *mean, float *rstd,
                                      const float *a, const float *b, const float *w,
                                      const float *bias, int D, float eps) {
  __shared__ float sh[32];
  const int64_t o = (int64_t)blockIdx.x * D;
  const float m = pt_block_sum(residual_add(x1, NULL, a, b, o, D, false), sh) / D;
  float var = 0.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    const float c = x1[o + i] - m;
    var += c * c;
  }
  const float r = 1.0f / sqrtf(pt_block_sum(var, sh) / D + eps);
  for (int i = threadIdx.x; i < D; i += blockDim.x)
    y[o + i] = (x1[o + i] - m) * r * w[i] + bias[i];
  if (threadIdx.x == 0) {
    mean[blockIdx.x] = m;
    rstd[blockIdx.x] = r;
  }
}

/* dx = dres + r * (dy * w - sg - (x - m) * r * sgx), sg = sum(dy * w) / D,
 * sgx = sum(dy * w * (x - m) * r) / D (ops_layernorm.cu's backward_input). */
static __global__ void __launch_bounds__(PT_THREADS)
    layernorm_backward_input_residual_kernel(float *dx, uint16_t *dx16, const float *dres,
                                             const float *dy, uint16_t *dy16, const float *x,
                                             const uint16_t *x16, const float *w,
                                             const float *mean, const float *rstd, int D,
                                             int round_dx) {
  __shared__ float sh[32];
  const int64_t o = (int64_t)blockIdx.x * D;
  const float m = mean[blockIdx.x], r = rstd[blockIdx.x];
  float sg = 0.0f, sgx = 0.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    if (dy16) dy16[o + i] = pt_bf16_bits(dy[o + i]);
    const float g = dy[o + i] * w[i];
    sg += g;
    sgx += g * (pt_get(x, x16, o + i) - m) * r;
  }
  sg = pt_block_sum(sg, sh) / D;
  sgx = pt_block_sum(sgx, sh) / D;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    const float v = dres[o + i] + r * (dy[o + i] * w[i] - sg - (pt_get(x, x16, o + i) - m) * r * sgx);
    pt_put_dx(dx, dx16, o + i, v, round_dx);
  }
}

/* x1 = a + b;  then ops_llama.cu's forward of x1:  r = 1 / sqrtf(sum x1^2 / D + eps);
 * y = x1 * r * w. */
static __global__ void __launch_bounds__(PT_THREADS)
    rmsnorm_forward_residual_kernel(float *x1, uint16_t *x1bits, float *y, uint16_t *y16,
                                    float *rstd, const float *a, const float *b, const float *w,
                                    int D, float eps) {
  __shared__ float sh[32];
  const int64_t o = (int64_t)blockIdx.x * D;
  const float r =
      1.0f / sqrtf(pt_block_sum(residual_add(x1, x1bits, a, b, o, D, true), sh) / D + eps);
  for (int i = threadIdx.x; i < D; i += blockDim.x) pt_put(y, y16, o + i, x1[o + i] * r * w[i]);
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}

/* dx = dres + r * (dy * w - x * r * sgx), sgx = sum(dy * w * x * r) / D. */
static __global__ void __launch_bounds__(PT_THREADS)
    rmsnorm_backward_input_residual_kernel(float *dx, uint16_t *dx16, const float *dres,
                                           const float *dy, uint16_t *dy16, const float *x,
                                           const uint16_t *x16, const float *w,
                                           const float *rstd, int D, int round_dx) {
  __shared__ float sh[32];
  const int64_t o = (int64_t)blockIdx.x * D;
  const float r = rstd[blockIdx.x];
  float sgx = 0.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    if (dy16) dy16[o + i] = pt_bf16_bits(dy[o + i]);
    sgx += dy[o + i] * w[i] * pt_get(x, x16, o + i) * r;
  }
  sgx = pt_block_sum(sgx, sh) / D;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    const float v = dres[o + i] + r * (dy[o + i] * w[i] - pt_get(x, x16, o + i) * r * sgx);
    pt_put_dx(dx, dx16, o + i, v, round_dx);
  }
}

/* Compulsory bytes: each [N, D] operand read or written once (rows), the [D] weights once, the
 * [N] statistics once. FLOPs per element, as the formulas above count them. */
static double rows_bytes(int N, int D, int row_operands, int vectors, int stats) {
  return 4.0 * ((double)row_operands * N * D + (double)vectors * D + (double)stats * N);
}

extern "C" void cuda_op_layernorm_forward_residual(gpu_ctx *g, float *x1, float *y, float *mean,
                                                   float *rstd, const float *a, const float *b,
                                                   const float *w, const float *bias, int N,
                                                   int D, float eps) {
  if (N <= 0 || D <= 0) return;
  gpu_cost_note("layernorm_forward_residual_kernel", 0, 9.0 * N * D, rows_bytes(N, D, 4, 2, 2));
  PT_LAUNCH(layernorm_forward_residual_kernel, (unsigned)N, PT_THREADS, 0, g->stream, x1, y, mean,
            rstd, a, b, w, bias, D, eps);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_layernorm_backward_input_residual(gpu_ctx *g, float *dx,
                                                          uint16_t *dx16, const float *dres,
                                                          const float *dy, uint16_t *dy16,
                                                          const float *x, const uint16_t *x16,
                                                          const float *w, const float *mean,
                                                          const float *rstd, int N, int D,
                                                          int round_dx) {
  if (N <= 0 || D <= 0) return;
  gpu_cost_note("layernorm_backward_input_residual_kernel", 0, 13.0 * N * D,
                rows_bytes(N, D, 4, 1, 2) + pt_norm_copies_bytes((double)N * D, dy16, x16, dx16));
  PT_LAUNCH(layernorm_backward_input_residual_kernel, (unsigned)N, PT_THREADS, 0, g->stream, dx,
            dx16, dres, dy, dy16, x, x16, w, mean, rstd, D, round_dx);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_rmsnorm_forward_residual(gpu_ctx *g, float *x1, uint16_t *x1bits,
                                                 float *y, uint16_t *y16, float *rstd,
                                                 const float *a, const float *b, const float *w,
                                                 int N, int D, float eps) {
  if (N <= 0 || D <= 0) return;
  gpu_cost_note("rmsnorm_forward_residual_kernel", 0, 5.0 * N * D,
                rows_bytes(N, D, 4, 1, 1) - (y16 ? 2.0 * N * D : 0.0) +
                    (x1bits ? 2.0 * N * D : 0.0));
  PT_LAUNCH(rmsnorm_forward_residual_kernel, (unsigned)N, PT_THREADS, 0, g->stream, x1, x1bits, y,
            y16, rstd, a, b, w, D, eps);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_rmsnorm_backward_input_residual(gpu_ctx *g, float *dx, uint16_t *dx16,
                                                        const float *dres, const float *dy,
                                                        uint16_t *dy16, const float *x,
                                                        const uint16_t *x16, const float *w,
                                                        const float *rstd, int N, int D,
                                                        int round_dx) {
  if (N <= 0 || D <= 0) return;
  gpu_cost_note("rmsnorm_backward_input_residual_kernel", 0, 10.0 * N * D,
                rows_bytes(N, D, 4, 1, 1) + pt_norm_copies_bytes((double)N * D, dy16, x16, dx16));
  PT_LAUNCH(rmsnorm_backward_input_residual_kernel, (unsigned)N, PT_THREADS, 0, g->stream, dx,
            dx16, dres, dy, dy16, x, x16, w, rstd, D, round_dx);
  PT_LAUNCH_CHECK();
}
