# The GPU backend: CUDA kernels for the layers and the optimizer (layers/cuda/*.cu), cuBLAS for
# the matrix products, NCCL for the pipeline's and the reductions' traffic (comm/comm_nccl.c),
# and the device helpers (runtime/gpu_*.c). Built whenever the CUDA toolkit, nvcc and NCCL are
# found, even on machines without a GPU (CI compiles and links it; GPU tests skip at run time).
# -DPT_CUDA=OFF builds the CPU-only runtime.
option(PT_CUDA "Build the GPU backend when the CUDA toolkit and NCCL are found" ON)
set(PT_HAVE_GPU OFF)
if(PT_CUDA)
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

if(PT_HAVE_GPU)
  # Hopper (H100/H200) and Ampere; override with -DCMAKE_CUDA_ARCHITECTURES=...
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  enable_language(CUDA)
  # Programs link with the C compiler (see pipetrain_kernels below), not nvcc.
  set(CMAKE_CUDA_LINKER_PREFERENCE 0)
  set(CMAKE_CUDA_LINKER_PREFERENCE_PROPAGATES FALSE)
  message(STATUS "GPU backend: CUDA ${CUDAToolkit_VERSION}, NCCL ${NCCL_VERSION}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES}")
  # The kernels go in through an object library: pipetrain itself then has only C sources, so
  # every program still links with the C compiler (sanitizer and fuzzer flags included); the
  # kernels need only the CUDA runtime, no device link step.
  file(GLOB PT_CUDA_SOURCES CONFIGURE_DEPENDS layers/cuda/*.cu comm/*.cu)
  add_library(pipetrain_kernels OBJECT ${PT_CUDA_SOURCES})
  target_include_directories(pipetrain_kernels PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(pipetrain_kernels PRIVATE CUDA::cudart CUDA::cublas)
  # No fast-math: float32 results must match the CPU path to 1e-5.
  # no thread-safe statics: nvcc's launch stubs then need nothing from the C++ runtime
  target_compile_options(pipetrain_kernels PRIVATE -Xcompiler=-Wall -Xcompiler=-fno-threadsafe-statics)
  set_target_properties(pipetrain_kernels PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}"
                        POSITION_INDEPENDENT_CODE ON)
  file(GLOB PT_GPU_C_SOURCES CONFIGURE_DEPENDS comm/comm_nccl.c runtime/gpu_*.c layers/cuda/*.c)
  target_sources(pipetrain PRIVATE ${PT_GPU_C_SOURCES} $<TARGET_OBJECTS:pipetrain_kernels>)
  target_compile_definitions(pipetrain PUBLIC PT_HAVE_GPU=1)
  # Created before CUDA was enabled, so it lacks the architectures CMake wants on every target.
  set_target_properties(pipetrain PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
  target_link_libraries(pipetrain PUBLIC CUDA::cudart CUDA::cublas NCCL::NCCL)
endif()
