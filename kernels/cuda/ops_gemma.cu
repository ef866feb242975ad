/* Gemma 2's elementwise kernels on the GPU (kernels.h: geglu_*, softcap_*, add_scalar): the
 * CPU's formulas of kernels/cpu/ops_gemma.c operation for operation (pt_dev_tanhf is the CPU's
 * pt_tanhf). Each thread reads its element before writing it, so outputs may alias inputs. */
#include "kernels/cuda/common.cuh"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f

/* e = n*F + i: y = 0.5 g (1 + tanh(k (g + c g^3))) * u; gu16 (given): gu's bits written there
 * too. */
static __global__ void __launch_bounds__(PT_THREADS)
    geglu_forward_kernel(float *y, uint16_t *y16, const float *gu, uint16_t *gu16, int64_t n,
                         int F) {
  PT_GRID_LOOP(e, n) {
    const int64_t r = e / F, i = e % F;
    const float v = gu[r * 2 * F + i], u = gu[r * 2 * F + F + i];
    if (gu16) gu16[r * 2 * F + i] = pt_bf16_bits(v), gu16[r * 2 * F + F + i] = pt_bf16_bits(u);
    const float t = pt_dev_tanhf(GELU_K * (v + GELU_C * v * v * v));
    pt_put(y, y16, e, 0.5f * v * (1.0f + t) * u);
  }
}

/* gu16 (given): gu read from that copy; dgu16 (given): dgu written there as bf16 instead. */
static __global__ void __launch_bounds__(PT_THREADS)
    geglu_backward_kernel(float *dgu, uint16_t *dgu16, const float *dy, const float *gu,
                          const uint16_t *gu16, int64_t n, int F) {
  PT_GRID_LOOP(e, n) {
    const int64_t r = e / F, i = e % F;
    const float v = pt_get(gu, gu16, r * 2 * F + i), u = pt_get(gu, gu16, r * 2 * F + F + i);
    const float d = dy[e];
    const float t = pt_dev_tanhf(GELU_K * (v + GELU_C * v * v * v));
    const float dt = GELU_K * (1.0f + 3.0f * GELU_C * v * v);
    const float dv = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dt;
    pt_put(dgu, dgu16, r * 2 * F + i, d * u * dv);
    pt_put(dgu, dgu16, r * 2 * F + F + i, d * (0.5f * v * (1.0f + t)));
  }
}

static __global__ void __launch_bounds__(PT_THREADS)
    softcap_forward_kernel(float *y, const float *x, float cap, int64_t n) {
  PT_GRID_LOOP(i, n) y[i] = pt_dev_tanhf(x[i] / cap) * cap;
}

static __global__ void __launch_bounds__(PT_THREADS)
    softcap_backward_kernel(float *dx, const float *dy, const float *x, float cap, int64_t n) {
  PT_GRID_LOOP(i, n) {
    const float t = pt_dev_tanhf(x[i] / cap), d = dy[i];
    dx[i] = d * (1.0f - t * t);
  }
}

static __global__ void __launch_bounds__(PT_THREADS)
    add_scalar_kernel(float *y, const float *x, float c, int64_t n) {
  PT_GRID_LOOP(i, n) y[i] = x[i] + c;
}

extern "C" void cuda_op_geglu_forward(gpu_ctx *g, float *y, uint16_t *y16, const float *gu,
                                      uint16_t *gu16, int N, int F) {
  const int64_t n = (int64_t)N * F;
  if (n <= 0) return;
  const pt_cost cost = pt_cost_of(0.0, 10.0 * n, cuda_gated_forward_bytes(y16, gu16) * n);
  PT_LAUNCH_COSTED(geglu_forward_kernel, cost, pt_grid(n), PT_THREADS, 0, g->stream, y, y16, gu,
                   gu16, n, F);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_geglu_backward(gpu_ctx *g, float *dgu, uint16_t *dgu16, const float *dy,
                                       const float *gu, const uint16_t *gu16, int N, int F) {
  const int64_t n = (int64_t)N * F;
  if (n <= 0) return;
  const pt_cost cost = pt_cost_of(0.0, 22.0 * n, cuda_gated_backward_bytes(gu16, dgu16) * n);
  PT_LAUNCH_COSTED(geglu_backward_kernel, cost, pt_grid(n), PT_THREADS, 0, g->stream, dgu, dgu16,
                   dy, gu, gu16, n, F);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_softcap_forward(gpu_ctx *g, float *y, const float *x, float cap,
                                        int64_t n) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(softcap_forward_kernel, pt_cost_elementwise(n, 1, 1, 6), pt_grid(n),
                   PT_THREADS, 0, g->stream, y, x, cap, n);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_softcap_backward(gpu_ctx *g, float *dx, const float *dy, const float *x,
                                         float cap, int64_t n) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(softcap_backward_kernel, pt_cost_elementwise(n, 2, 1, 8), pt_grid(n),
                   PT_THREADS, 0, g->stream, dx, dy, x, cap, n);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_add_scalar(gpu_ctx *g, float *y, const float *x, float c, int64_t n) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(add_scalar_kernel, pt_cost_elementwise(n, 1, 1, 1), pt_grid(n), PT_THREADS, 0,
                   g->stream, y, x, c, n);
  PT_LAUNCH_CHECK();
}
