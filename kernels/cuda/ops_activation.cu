/* GELU (tanh approximation, kernels/cpu/ops_activation.c) and ReLU (layers/activation.c) on the
 * GPU: elementwise, the CPU's formulas operation for operation (pt_dev_tanhf is the CPU's
 * pt_tanhf). Each thread reads x[i] before it writes element i, so dx may alias dy or x (the
 * transformer block passes dx == x). */
#include "kernels/cuda/common.cuh"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f

static __global__ void __launch_bounds__(PT_THREADS)
    gelu_forward_kernel(float *y, const float *x, int64_t n) {
  PT_GRID_LOOP(i, n) {
    float v = x[i];
    float t = pt_dev_tanhf(GELU_K * (v + GELU_C * v * v * v));
    y[i] = 0.5f * v * (1.0f + t);
  }
}

static __global__ void __launch_bounds__(PT_THREADS)
    gelu_backward_kernel(float *dx, const float *dy, const float *x, int64_t n) {
  PT_GRID_LOOP(i, n) {
    float v = x[i], d = dy[i];
    float t = pt_dev_tanhf(GELU_K * (v + GELU_C * v * v * v));
    float dt = GELU_K * (1.0f + 3.0f * GELU_C * v * v);
    dx[i] = d * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dt);
  }
}

/* CPU: y = x > 0 ? x : 0 (NaN gives 0, as there) */
static __global__ void __launch_bounds__(PT_THREADS)
    relu_forward_kernel(float *y, const float *x, int64_t n) {
  PT_GRID_LOOP(i, n) {
    float v = x[i];
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

/* CPU: dx = x > 0 ? dy : 0 */
static __global__ void __launch_bounds__(PT_THREADS)
    relu_backward_kernel(float *dx, const float *dy, const float *x, int64_t n) {
  PT_GRID_LOOP(i, n) {
    float d = dy[i];
    dx[i] = x[i] > 0.0f ? d : 0.0f;
  }
}

extern "C" void cuda_op_gelu_forward(gpu_ctx *g, float *y, const float *x, int64_t n) {
  if (n <= 0) return;
  /* v^3, the polynomial, tanh, the product: 9 operations an element */
  PT_LAUNCH_COSTED(gelu_forward_kernel, pt_cost_elementwise(n, 1, 1, 9), pt_grid(n), PT_THREADS,
                   0, g->stream, y, x, n);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_gelu_backward(gpu_ctx *g, float *dx, const float *dy, const float *x,
                                      int64_t n) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(gelu_backward_kernel, pt_cost_elementwise(n, 2, 1, 18), pt_grid(n),
                   PT_THREADS, 0, g->stream, dx, dy, x, n);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_relu_forward(gpu_ctx *g, float *y, const float *x, int64_t n) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(relu_forward_kernel, pt_cost_elementwise(n, 1, 1, 1), pt_grid(n), PT_THREADS,
                   0, g->stream, y, x, n);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_relu_backward(gpu_ctx *g, float *dx, const float *dy, const float *x,
                                      int64_t n) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(relu_backward_kernel, pt_cost_elementwise(n, 2, 1, 1), pt_grid(n),
                   PT_THREADS, 0, g->stream, dx, dy, x, n);
  PT_LAUNCH_CHECK();
}
