/* The step statistics' finiteness check (kernels.h finite_check): no value comes back to the
 * host; a failed check leaves its mark in a device int, which the engine reads once a step. */
#include "kernels/cuda/common.cuh"

/* Every thread that meets a NaN or an infinity raises *mark to value: max is order-free, so the
 * result does not depend on which thread or block gets there first. */
static __global__ void __launch_bounds__(PT_THREADS)
    finite_mark_kernel(int *mark, int value, const float *x, int64_t n) {
  int bad = 0;
  PT_GRID_LOOP(i, n) bad |= pt_dev_nonfinite(x[i]);
  if (bad) atomicMax(mark, value);
}

extern "C" void cuda_finite_mark(gpu_ctx *g, int *mark_dev, int value, const float *x,
                                 int64_t n) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(finite_mark_kernel, pt_cost_elementwise(n, 1, 0, 1), pt_grid(n), PT_THREADS, 0,
                   g->stream, mark_dev, value, x, n);
  PT_LAUNCH_CHECK();
}
