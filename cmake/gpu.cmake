# Finds what the GPU backend needs (the CUDA toolkit, nvcc, NCCL) and sets PT_HAVE_GPU; the
# root CMakeLists.txt adds the GPU sources (kernels/cuda, device/cuda, comm/nccl) to their
# folders' libraries in one if(PT_HAVE_GPU) block. Built whenever they are found, even on
# machines without a GPU (CI compiles and links it; GPU tests skip at run time).
# -DPT_CUDA=OFF builds the CPU-only runtime. -DPT_GPU_EMULATION=ON builds the GPU backend
# against the CUDA emulator in tests/gpu/emu instead (no CUDA needed; docs/gpu.md), never with
# the real CUDA in the same build.
option(PT_CUDA "Build the GPU backend when the CUDA toolkit and NCCL are found" ON)
option(PT_GPU_EMULATION "Build the GPU backend against the CUDA emulator (tests/gpu/emu)" OFF)
set(PT_HAVE_GPU OFF)
if(PT_GPU_EMULATION)
  set(PT_HAVE_GPU ON)
  enable_language(CXX)
  message(STATUS "GPU backend: the CUDA emulator (tests/gpu/emu), not real CUDA")
elseif(PT_CUDA)
  find_package(CUDAToolkit)
  find_package(NCCL)
  include(CheckLanguage)
  check_language(CUDA)
  if(CUDAToolkit_FOUND AND NCCL_FOUND AND CMAKE_CUDA_COMPILER)
    set(PT_HAVE_GPU ON)
  else()
    message(STATUS "GPU backend: off (CUDA toolkit: ${CUDAToolkit_FOUND}, NCCL: ${NCCL_FOUND}, "
                   "nvcc: ${CMAKE_CUDA_COMPILER}); building for CPUs only")
  endif()
endif()

if(PT_HAVE_GPU AND NOT PT_GPU_EMULATION)
  # Hopper (H100/H200) and Ampere; override with -DCMAKE_CUDA_ARCHITECTURES=...
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  enable_language(CUDA)
  # Programs link with the C compiler (see pt_kernels_cuda in CMakeLists.txt), not nvcc.
  set(CMAKE_CUDA_LINKER_PREFERENCE 0)
  set(CMAKE_CUDA_LINKER_PREFERENCE_PROPAGATES FALSE)
  message(STATUS "GPU backend: CUDA ${CUDAToolkit_VERSION}, NCCL ${NCCL_VERSION}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES}")
endif()
