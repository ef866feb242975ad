/* The rank's GPU: device selection, stream, cuBLAS handle, memory, error reporting. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "kernels/cuda/gpu.h"
#include "kernels/cuda/matmul_plan.h"

const char *gpu_cuda_error_text(int code) {
  static char text[256];
  cudaError_t e = (cudaError_t)code;
  snprintf(text, sizeof text, "%s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
  return text;
}

const char *gpu_cublas_error_text(int code) {
  return cublasGetStatusString((cublasStatus_t)code);
}

int gpu_count(char *why, size_t whysz) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) snprintf(why, whysz, "%s", cudaGetErrorString(e));
    (void)cudaGetLastError(); /* the error is not sticky: clear it for later calls */
    return 0;
  }
  if (n == 0 && why) snprintf(why, whysz, "no CUDA device");
  return n;
}

int gpu_open(gpu_ctx *g, int device, char *err, size_t errsz) {
  memset(g, 0, sizeof *g);
  g->device = device;
  struct cudaDeviceProp prop;
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, device);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    snprintf(err, errsz, "GPU %d: %s", device, cudaGetErrorString(e));
    return -1;
  }
  snprintf(g->name, sizeof g->name, "%s", prop.name);
  g->total_bytes = prop.totalGlobalMem;
  if (cudaDeviceGetPCIBusId(g->pci_bus_id, (int)sizeof g->pci_bus_id, device) != cudaSuccess)
    g->pci_bus_id[0] = '\0';
  cublasStatus_t s = cublasCreate(&g->blas);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetStream(g->blas, g->stream);
  /* pedantic: no TF32 or other reduced-precision shortcuts in float32 products */
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetMathMode(g->blas, CUBLAS_PEDANTIC_MATH);
  if (s != CUBLAS_STATUS_SUCCESS) {
    snprintf(err, errsz, "GPU %d: cuBLAS: %s", device, cublasGetStatusString(s));
    return -1;
  }
  s = cublasLtCreate(&g->lt);
  if (s != CUBLAS_STATUS_SUCCESS) {
    snprintf(err, errsz, "GPU %d: cuBLASLt: %s", device, cublasGetStatusString(s));
    return -1;
  }
  g->lt_compute = CUBLAS_COMPUTE_32F_PEDANTIC;
  g->lt_workspace = gpu_alloc(g, GPU_LT_WORKSPACE_BYTES);
  g->col_scratch = gpu_alloc(g, sizeof(float) * GPU_COL_SCRATCH_FLOATS);
  return 0;
}

void gpu_close(gpu_ctx *g) {
  gpu_free(g->col_scratch);
  gpu_free(g->lt_workspace);
  matmul_plans_free(g);
  if (g->lt) cublasLtDestroy(g->lt);
  if (g->blas) cublasDestroy(g->blas);
  if (g->stream) cudaStreamDestroy(g->stream);
  memset(g, 0, sizeof *g);
}

void gpu_sync(gpu_ctx *g) { CUDA_CHECK(cudaStreamSynchronize(g->stream)); }

/* The zeroing goes on g's stream, in line with everything the rank does next: cudaMemset
 * would run on the legacy default stream, which a non-blocking stream (the rank's) does not
 * wait for, so a copy or kernel queued there next could run first and be zeroed after. */
void *gpu_alloc(const gpu_ctx *g, size_t bytes) {
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
  if (e != cudaSuccess)
    pt_fatal("cannot allocate %zu bytes on the GPU: %s", bytes, cudaGetErrorString(e));
  if (g) {
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes ? bytes : 1, g->stream));
  } else { /* no stream to order it on: done before anything else can see the memory */
    CUDA_CHECK(cudaMemset(p, 0, bytes ? bytes : 1));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  return p;
}

void *gpu_alloc_sparse(size_t bytes) {
  void *p = NULL;
  if (cudaMallocManaged(&p, bytes ? bytes : 1, cudaMemAttachGlobal) == cudaSuccess) return p;
  (void)cudaGetLastError(); /* a device without managed memory: the caller allocates */
  return NULL;
}

void gpu_free(void *p) {
  if (p) CUDA_CHECK(cudaFree(p));
}

size_t gpu_free_bytes(const gpu_ctx *g) {
  size_t free_b = 0, total = 0;
  CUDA_CHECK(cudaSetDevice(g->device));
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
  return free_b;
}

void gpu_to_device(gpu_ctx *g, void *dst, const void *src, size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, g->stream));
}

void gpu_to_host(gpu_ctx *g, void *dst, const void *src, size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g->stream));
  gpu_sync(g);
}
