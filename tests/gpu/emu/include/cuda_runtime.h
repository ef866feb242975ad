/* tests/gpu/emu/include/cuda_runtime.h: the CUDA EMULATOR's stand-in for NVIDIA's header (docs/gpu.md,
 * "The emulated GPU"): the host API (cuda_runtime_api.h) and, for C++ (the .cu files compiled
 * as host code), the device side: qualifiers, built-in variables, barriers, warp operations,
 * atomics and the launch that kernels/cuda/launch.cuh's PT_LAUNCH expands to. */
#ifndef PT_EMU_CUDA_RUNTIME_H
#define PT_EMU_CUDA_RUNTIME_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
#include "pt_emu_device.h"
#endif

#endif
