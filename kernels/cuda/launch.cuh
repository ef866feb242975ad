/* kernels/cuda/launch.cuh: PT_LAUNCH(kernel, grid, block, smem, stream, args...), the one way the
 * .cu files launch a kernel.
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

#ifdef __CUDACC__
#define PT_LAUNCH(kernel, grid, block, smem, stream, ...) \
  kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)
#else
#define PT_LAUNCH(kernel, grid, block, smem, stream, ...) \
  pt_emu_launch(#kernel, __FILE__, __LINE__, kernel, grid, block, smem, stream, __VA_ARGS__)
#endif

#endif
