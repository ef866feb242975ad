/* The one kernel the device chain sums need: y += x, on the communicator's stream. */
#include <cuda_runtime.h>
#include <stddef.h>

#include "kernels/cuda/launch.cuh"

__global__ static void add_f32(float *y, const float *x, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = x[i] + y[i]; /* the running sum on the left, as the host chain adds */
}

extern "C" void comm_nccl_add_f32(float *y, const float *x, size_t n, cudaStream_t s) {
  if (n == 0) return;
  size_t blocks = (n + 255) / 256;
  gpu_cost_note("add_f32", 0.0, (double)n, 12.0 * (double)n);
  PT_LAUNCH(add_f32, (unsigned)(blocks < 65535 ? blocks : 65535), 256, 0, s, y, x, n);
}
