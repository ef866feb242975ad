/* kernels/cuda/gpu.h: the GPU a rank drives, and the checks every CUDA/cuBLAS call goes through.
 * Only in builds with the GPU backend (PT_HAVE_GPU; see cmake/gpu.cmake).
 *
 * A gpu_ctx owns one stream and one cuBLAS handle bound to it: every kernel and matrix product
 * of the rank runs on that stream, in issue order, so results do not depend on timing. TF32 is
 * off (cuBLAS pedantic float32) unless the caller turns it on: float32 results must match the
 * CPU path to 1e-5 relative.
 */
#ifndef PT_GPU_H
#define PT_GPU_H

#include <stddef.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

typedef struct {
  int device;
  cudaStream_t stream;
  cublasHandle_t blas;
  char name[256];       /* "NVIDIA H100 80GB HBM3" */
  char pci_bus_id[32];  /* "0000:3b:00.0": where hwloc finds the cores nearest to it */
  size_t total_bytes;   /* device memory */
} gpu_ctx;

/* Devices this process can use: 0 when there is no driver, no device, or the driver is older
 * than the runtime (the reason goes to why, when not NULL). Never fails. */
int gpu_count(char *why, size_t whysz);
/* Selects device, creates the stream and the cuBLAS handle (float32, no TF32). 0, or -1 with
 * err naming the device and the CUDA error. */
int gpu_open(gpu_ctx *g, int device, char *err, size_t errsz);
void gpu_close(gpu_ctx *g);
/* Waits for everything queued on g's stream; a kernel's failure is reported here. */
void gpu_sync(gpu_ctx *g);

/* Device memory (zeroed) and copies on g's stream. Failures end the job naming the rank. */
void *gpu_alloc(size_t bytes);
void gpu_free(void *p);
void gpu_to_device(gpu_ctx *g, void *dst, const void *src, size_t bytes);
void gpu_to_host(gpu_ctx *g, void *dst, const void *src, size_t bytes); /* synchronous */

void gpu_fail_cuda(const char *file, int line, const char *call, int code)
    __attribute__((noreturn));
void gpu_fail_cublas(const char *file, int line, const char *call, int code)
    __attribute__((noreturn));
#define CUDA_CHECK(call)                                                     \
  do {                                                                       \
    cudaError_t pt_e_ = (call);                                              \
    if (pt_e_ != cudaSuccess) gpu_fail_cuda(__FILE__, __LINE__, #call, (int)pt_e_); \
  } while (0)
#define CUBLAS_CHECK(call)                                                   \
  do {                                                                       \
    cublasStatus_t pt_s_ = (call);                                           \
    if (pt_s_ != CUBLAS_STATUS_SUCCESS)                                      \
      gpu_fail_cublas(__FILE__, __LINE__, #call, (int)pt_s_);                \
  } while (0)

#endif
