/* tests/gpu/emu/include/cublas_v2.h: the CUDA EMULATOR's stand-in for cuBLAS (docs/gpu.md, "The
 * emulated GPU"). The calls pipetrain makes, with cuBLAS's names, values and argument checks
 * (CUBLAS_STATUS_INVALID_VALUE where cuBLAS returns it); the products run with OpenBLAS,
 * column-major, queued on the handle's stream (tests/gpu/emu/src/cublas.cpp). C11 and C++17.
 */
#ifndef PT_EMU_CUBLAS_V2_H
#define PT_EMU_CUBLAS_V2_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;

typedef enum {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
  CUBLAS_OP_C = 2,
  CUBLAS_OP_HERMITAN = 2,
  CUBLAS_OP_CONJG = 3
} cublasOperation_t;

typedef enum {
  CUBLAS_DEFAULT_MATH = 0,
  CUBLAS_TENSOR_OP_MATH = 1,
  CUBLAS_PEDANTIC_MATH = 2,
  CUBLAS_TF32_TENSOR_OP_MATH = 3
} cublasMath_t;

/* library_types.h's and cublas_api.h's values for the types cublasGemmEx takes (the emulator
 * implements bf16 and float32 operands with float32 accumulation). */
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType_t;
typedef cudaDataType_t cudaDataType;
typedef enum {
  CUBLAS_COMPUTE_16F = 64,
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_PEDANTIC = 69,
  CUBLAS_COMPUTE_32F_FAST_16F = 74,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77
} cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;

typedef struct pt_emu_cublas *cublasHandle_t;

const char *cublasGetStatusString(cublasStatus_t status);
const char *cublasGetStatusName(cublasStatus_t status);

#define PT_EMU_AT const char *file, int line
cublasStatus_t pt_emu_cublasCreate(PT_EMU_AT, cublasHandle_t *handle);
cublasStatus_t pt_emu_cublasDestroy(PT_EMU_AT, cublasHandle_t handle);
cublasStatus_t pt_emu_cublasSetStream(PT_EMU_AT, cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t pt_emu_cublasGetStream(PT_EMU_AT, cublasHandle_t handle, cudaStream_t *stream);
cublasStatus_t pt_emu_cublasSetMathMode(PT_EMU_AT, cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t pt_emu_cublasGetMathMode(PT_EMU_AT, cublasHandle_t handle, cublasMath_t *mode);
cublasStatus_t pt_emu_cublasSgemm(PT_EMU_AT, cublasHandle_t handle, cublasOperation_t transa,
                                  cublasOperation_t transb, int m, int n, int k,
                                  const float *alpha, const float *A, int lda, const float *B,
                                  int ldb, const float *beta, float *C, int ldc);
cublasStatus_t pt_emu_cublasSgemmStridedBatched(
    PT_EMU_AT, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
    int n, int k, const float *alpha, const float *A, int lda, long long strideA, const float *B,
    int ldb, long long strideB, const float *beta, float *C, int ldc, long long strideC,
    int batchCount);
/* Float32 output and accumulation only: A and B both CUDA_R_16BF (converted exactly to float,
 * as a bf16 tensor-core product reads them) or both CUDA_R_32F (TF32 inputs under
 * CUBLAS_COMPUTE_32F_FAST_TF32 or the handle's TF32 math); anything else NOT_SUPPORTED. */
cublasStatus_t pt_emu_cublasGemmEx(PT_EMU_AT, cublasHandle_t handle, cublasOperation_t transa,
                                   cublasOperation_t transb, int m, int n, int k,
                                   const void *alpha, const void *A, cudaDataType_t Atype,
                                   int lda, const void *B, cudaDataType_t Btype, int ldb,
                                   const void *beta, void *C, cudaDataType_t Ctype, int ldc,
                                   cublasComputeType_t computeType, cublasGemmAlgo_t algo);
#undef PT_EMU_AT

#define cublasCreate(h) pt_emu_cublasCreate(PT_EMU_HERE, h)
#define cublasDestroy(h) pt_emu_cublasDestroy(PT_EMU_HERE, h)
#define cublasSetStream(h, s) pt_emu_cublasSetStream(PT_EMU_HERE, h, s)
#define cublasGetStream(h, s) pt_emu_cublasGetStream(PT_EMU_HERE, h, s)
#define cublasSetMathMode(h, m) pt_emu_cublasSetMathMode(PT_EMU_HERE, h, m)
#define cublasGetMathMode(h, m) pt_emu_cublasGetMathMode(PT_EMU_HERE, h, m)
#define cublasSgemm(...) pt_emu_cublasSgemm(PT_EMU_HERE, __VA_ARGS__)
#define cublasGemmEx(...) pt_emu_cublasGemmEx(PT_EMU_HERE, __VA_ARGS__)
#define cublasSgemmStridedBatched(...) pt_emu_cublasSgemmStridedBatched(PT_EMU_HERE, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
