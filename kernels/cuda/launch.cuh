/* kernels/cuda/launch.cuh: PT_LAUNCH(kernel, grid, block, smem, stream, args...), the one way the
 * .cu files launch a kernel, and PT_LAUNCH_COSTED, the same with the launch's cost noted in the
 * ledger (kernels/cuda/cost.h) under the kernel's name.
 *
 * Under nvcc it is exactly kernel<<<grid, block, smem, stream>>>(args...). Elsewhere the .cu
 * files are being compiled as host C++ by the CUDA emulation (tests/gpu/emu, docs/gpu.md, "The
 * emulated GPU"), whose cuda_runtime.h defines pt_emu_launch: the launch is queued on the
 * stream and the kernel's body later runs on the CPU, each block's threads as fibers. The
 * kernel's name and this line go with it, so the emulator's errors can name both.
 */
#ifndef PT_CUDA_LAUNCH_CUH
#define PT_CUDA_LAUNCH_CUH

#include <cuda_runtime.h>

#include "kernels/cuda/cost.h"

#ifdef __CUDACC__
#define PT_LAUNCH(kernel, grid, block, smem, stream, ...) \
  kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)
#else
#define PT_LAUNCH(kernel, grid, block, smem, stream, ...) \
  pt_emu_launch(#kernel, __FILE__, __LINE__, kernel, grid, block, smem, stream, __VA_ARGS__)
#endif

/* What one launch must do (cost.h): FLOPs on tensor cores, FLOPs elsewhere, compulsory bytes. */
struct pt_cost {
  double tensor_flops, other_flops, bytes;
};
static inline pt_cost pt_cost_of(double tensor_flops, double other_flops, double bytes) {
  return pt_cost{tensor_flops, other_flops, bytes};
}
/* n elements, each read from `in` arrays and written to `out` arrays of 4-byte floats, with
 * `flops` arithmetic operations each (an exp or tanh counts as one): an elementwise kernel. */
static inline pt_cost pt_cost_elementwise(double n, int in, int out, double flops) {
  return pt_cost{0.0, flops * n, 4.0 * n * (in + out)};
}
/* The bytes a norm's backward over n elements adds with its copies (ops_cuda.h): dy's and dx's
 * bits written (dy16, dx16: 2 an element more each), x read from its copy (x16: 2 fewer). */
static inline double pt_norm_copies_bytes(double n, const void *dy16, const void *x16,
                                          const void *dx16) {
  return ((dy16 ? 2.0 : 0.0) + (dx16 ? 2.0 : 0.0) - (x16 ? 2.0 : 0.0)) * n;
}

/* PT_LAUNCH after noting cost (a pt_cost) under #kernel: the launch and what it costs sit
 * together. A kernel reached through a pointer (a template instance) notes its own name with
 * gpu_cost_note beside its PT_LAUNCH instead. */
#define PT_LAUNCH_COSTED(kernel, cost, grid, block, smem, stream, ...)                       \
  do {                                                                                      \
    const pt_cost pt_cost_ = (cost);                                                        \
    gpu_cost_note(#kernel, pt_cost_.tensor_flops, pt_cost_.other_flops, pt_cost_.bytes);    \
    PT_LAUNCH(kernel, grid, block, smem, stream, __VA_ARGS__);                              \
  } while (0)

#endif
