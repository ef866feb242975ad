/* kernels/cuda/gpu.h: the GPU a rank drives, and the checks every CUDA/cuBLAS call goes through.
 * Only in builds with the GPU backend (PT_HAVE_GPU; see cmake/gpu.cmake).
 *
 * A gpu_ctx owns one stream, one cuBLAS handle bound to it and one cuBLASLt handle with its
 * workspace (the products with epilogues, kernels/cuda/ops_linear.cu; a cuBLASLt matmul names
 * its stream at each call): every kernel and matrix product of the rank runs on that stream, in
 * issue order, so results do not depend on timing. TF32 is off (cuBLAS pedantic float32, and
 * lt_compute CUBLAS_COMPUTE_32F_PEDANTIC) unless the caller turns it on: float32 results must
 * match the CPU path to 1e-5 relative.
 */
#ifndef PT_GPU_H
#define PT_GPU_H

#include <stddef.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "core/error.h"

struct matmul_plans;

typedef struct {
  int device;
  cudaStream_t stream;
  cublasHandle_t blas;
  cublasLtHandle_t lt;
  void *lt_workspace;   /* GPU_LT_WORKSPACE_BYTES for every cuBLASLt matmul (stream order) */
  /* the compute type of cuBLASLt's float32 products, as the cuBLAS handle's math mode says for
   * its own: pedantic float32 from gpu_open, TF32 under train.precision tf32
   * (kernels_gpu_set_precision) */
  cublasComputeType_t lt_compute;
  char name[256];       /* "NVIDIA H100 80GB HBM3" */
  char pci_bus_id[32];  /* "0000:3b:00.0": where hwloc finds the cores nearest to it */
  size_t total_bytes;   /* device memory */
  /* GPU_COL_SCRATCH_FLOATS device floats: the column reductions' per-chunk partial sums
   * (kernels/cuda/common.cuh, pt_col_chunks), used between a call's two passes; the calls run
   * in stream order, so one buffer serves them all. Allocated by gpu_open, once. */
  float *col_scratch;
  /* every product's cuBLASLt descriptors and algorithm, made at its first call
   * (kernels/cuda/matmul_plan.h); freed by gpu_close */
  struct matmul_plans *plans;
} gpu_ctx;

#define GPU_COL_SCRATCH_FLOATS (1 << 20)
/* as https://github.com/karpathy/llm.c gives cuBLASLt on Hopper */
#define GPU_LT_WORKSPACE_BYTES ((size_t)32 << 20)

/* Devices this process can use: 0 when there is no driver, no device, or the driver is older
 * than the runtime (the reason goes to why, when not NULL). Never fails. */
int gpu_count(char *why, size_t whysz);
/* Selects device, creates the stream, the cuBLAS handle (float32, no TF32) and the cuBLASLt
 * handle and workspace. 0, or -1 with
 * err naming the device and the CUDA error. */
int gpu_open(gpu_ctx *g, int device, char *err, size_t errsz);
void gpu_close(gpu_ctx *g);
/* Waits for everything queued on g's stream; a kernel's failure is reported here. */
void gpu_sync(gpu_ctx *g);

/* Device memory and copies on g's stream. Failures end the job naming the rank. gpu_alloc's
 * memory is zeroed on g's stream: zero for everything queued there afterwards (and for other
 * streams that wait for it, as the NCCL stream does for the compute stream); g NULL: zeroed
 * before it returns (a synchronisation; for callers without a stream). */
void *gpu_alloc(const gpu_ctx *g, size_t bytes);
/* bytes of managed memory (cudaMallocManaged), not zeroed: a GPU gives a page memory only when
 * something first touches it, so a buffer whose tail nothing writes costs no more than its
 * head (engine/stage_store.c: the logits' working buffer). Freed with gpu_free. NULL where the
 * device has no managed memory. */
void *gpu_alloc_sparse(size_t bytes);
void gpu_free(void *p);
/* Bytes of g's device no process holds now (cudaMemGetInfo: every context, this one's too). */
size_t gpu_free_bytes(const gpu_ctx *g);
void gpu_to_device(gpu_ctx *g, void *dst, const void *src, size_t bytes);
void gpu_to_host(gpu_ctx *g, void *dst, const void *src, size_t bytes); /* synchronous */

/* core/error.h's check of a library call for CUDA, cuBLAS and cuBLASLt (whose calls return
 * cuBLAS's statuses): "FILE:LINE: CALL failed: CUDA: cudaErrorX (text)" with the rank.
 * CUDA_CHECK and CUBLAS_CHECK are the same macros under the names the kernels use. The text functions take the result as an int so that C and C++ (.cu)
 * callers see one signature; their buffers are static (the job ends right after). */
const char *gpu_cuda_error_text(int code);
const char *gpu_cublas_error_text(int code);
#define GPU_CUDA_OK(r) ((r) == cudaSuccess)
#define GPU_CUBLAS_OK(r) ((r) == CUBLAS_STATUS_SUCCESS)
#define PT_CHECK_CUDA(call) \
  PT_CHECK_CALL(cudaError_t, call, #call, GPU_CUDA_OK, "CUDA", gpu_cuda_error_text)
#define PT_CHECK_CUBLAS(call) \
  PT_CHECK_CALL(cublasStatus_t, call, #call, GPU_CUBLAS_OK, "cuBLAS", gpu_cublas_error_text)
#define PT_CHECK_CUBLASLT(call) \
  PT_CHECK_CALL(cublasStatus_t, call, #call, GPU_CUBLAS_OK, "cuBLASLt", gpu_cublas_error_text)
#define CUDA_CHECK(call) PT_CHECK_CUDA(call)
#define CUBLAS_CHECK(call) PT_CHECK_CUBLAS(call)

#endif
