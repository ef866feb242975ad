/* device/gpu_backend.h: the gpu kind's traits (pt_device_traits), shared by its table
 * (cuda/gpu_backend.c, GPU builds) and registry.c's stand-in where the backend is not built,
 * so a gpu spec plans the same in every build. */
#ifndef PT_GPU_BACKEND_H
#define PT_GPU_BACKEND_H

#define GPU_BACKEND_TRAITS                                                                   \
  {                                                                                          \
    .name = "gpu", .shares_host_memory = 0, .host_addressable = 0, .one_per_rank = 1,        \
    .picked_by_auto = 1, .binds_after_open = 1, .precision_in_gemm = 1, .offloads = 1,       \
    .copies_overlap = 1                                                                      \
  }

#endif
