/* device/gpu_backend.h: the gpu kind of device (gpu_backend.c), as device.c reaches it.
 * GPU builds only; everything else goes through device.h. */
#ifndef PT_GPU_BACKEND_H
#define PT_GPU_BACKEND_H

#include <stddef.h>

#include "device/device.h"

int gpu_backend_count(void);                     /* usable GPUs (0 without driver or device) */
/* Opens local GPU gpu_id into d (kind DEV_GPU). 0, or -1 with err. */
int gpu_backend_open(pt_device *d, int gpu_id, char *err, size_t errsz);
void *gpu_backend_stream(pt_device *d);          /* the compute stream (cudaStream_t) */
int gpu_backend_ctx_id(const pt_device *d);      /* the local GPU id */
const char *gpu_backend_bus_id(const pt_device *d);
const char *gpu_backend_name(const pt_device *d); /* "NVIDIA H100 80GB HBM3" */
size_t gpu_backend_memory(const pt_device *d);   /* bytes of device memory */
/* The kernel table computes in precision p from now on (kernels_gpu_set_precision). */
void gpu_backend_set_precision(pt_device *d, pt_precision p);
double gpu_backend_gemm_flops(pt_device *d, int n, double seconds); /* cuBLAS sgemm FLOP/s */

#endif
