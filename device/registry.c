/* The kinds of device (registry.h): the one place that knows which this build has. A new kind
 * is its table (a pt_device_ops, device.h) and a line here. */
#include "device/registry.h"

#include <stdio.h>

#include "device/gpu_backend.h"

extern const pt_device_ops device_emulated_ops;

#ifdef PT_HAVE_GPU
extern const pt_device_ops device_gpu_ops;
#else
/* Without the backend a gpu spec can still be planned (--plan, memory estimates): the kind's
 * traits, the CPU's sizes as before, and an open that refuses. */
static int gpu_none(void) { return 0; }

static int gpu_refuse(pt_device *d, int id, char *err, size_t errsz) {
  (void)d, (void)id;
  snprintf(err, errsz, "this pipetrain was built without the GPU backend (no CUDA toolkit and "
           "NCCL at build time); set pipeline.device: cpu (or auto)");
  return -1;
}

static const pt_device_ops device_gpu_ops = {
    .is = GPU_BACKEND_TRAITS, .count = gpu_none, .open = gpu_refuse, .sizing = &kernels_cpu};
#endif

const pt_device_ops *const device_registry[] = {&device_gpu_ops, &device_cpu_ops,
                                                &device_emulated_ops, NULL};
