/* tests/gpu/emu/include/cublasLt.h: the CUDA EMULATOR's stand-in for cuBLASLt (docs/gpu.md, "The
 * emulated GPU"). The part pipetrain uses (kernels/cuda/ops_linear.cu): matmuls of float32 or
 * bf16 operands into float32, column-major layouts, the epilogues DEFAULT, BIAS, GELU_AUX_BIAS
 * and DGELU, with cuBLASLt's names, values and statuses; each matmul runs with OpenBLAS, queued
 * on the stream it is given (tests/gpu/emu/src/cublaslt.cpp). Descriptors are the emulator's own
 * objects behind cuBLASLt's pointer types; the algorithm and heuristic-result structs have the
 * real layout. C11 and C++17.
 */
#ifndef PT_EMU_CUBLASLT_H
#define PT_EMU_CUBLASLT_H

#include <stddef.h>
#include <stdint.h>

#include "cublas_v2.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pt_emu_cublaslt *cublasLtHandle_t;
typedef struct pt_emu_lt_desc *cublasLtMatmulDesc_t;
typedef struct pt_emu_lt_layout *cublasLtMatrixLayout_t;
typedef struct pt_emu_lt_pref *cublasLtMatmulPreference_t;

typedef struct {
  uint64_t data[8];
} cublasLtMatmulAlgo_t;

typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;

/* cublasLt.h's values. The attributes the emulator takes, each with its C type (the size
 * SetAttribute requires, as cuBLASLt does): COMPUTE_TYPE int32 (cublasComputeType_t), SCALE_TYPE
 * int32 (cudaDataType_t), TRANSA and TRANSB int32 (cublasOperation_t), EPILOGUE uint32,
 * BIAS_POINTER and EPILOGUE_AUX_POINTER a pointer, EPILOGUE_AUX_LD int64, EPILOGUE_AUX_DATA_TYPE and
 * BIAS_DATA_TYPE int32 (cudaDataType_t). */
typedef enum {
  CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,
  CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE = 22,
  CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26
} cublasLtMatmulDescAttributes_t;

typedef enum {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_BIAS = 4,
  CUBLASLT_EPILOGUE_GELU = 32,
  CUBLASLT_EPILOGUE_GELU_AUX = 32 | 128,
  CUBLASLT_EPILOGUE_GELU_BIAS = 32 | 4,
  CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 32 | 128 | 4,
  CUBLASLT_EPILOGUE_DGELU = 64 | 128,
  CUBLASLT_EPILOGUE_DGELU_BGRAD = 64 | 128 | 16
} cublasLtEpilogue_t;

/* Preferences: MAX_WORKSPACE_BYTES uint64, REDUCTION_SCHEME_MASK uint32 (the emulator's one
 * algorithm has no split-K reduction, so every mask admits it), MIN_ALIGNMENT_{A,B,C,D}_BYTES
 * uint32 (default 256, as cuBLASLt's: the alignment the heuristic may assume of each matrix's
 * pointer, which it is not given; cublasLtMatmul answers NOT_SUPPORTED for a pointer less
 * aligned than its algorithm assumed). */
typedef enum {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8
} cublasLtMatmulPreferenceAttributes_t;
typedef enum {
  CUBLASLT_REDUCTION_SCHEME_NONE = 0,
  CUBLASLT_REDUCTION_SCHEME_INPLACE = 1,
  CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE = 2,
  CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE = 4,
  CUBLASLT_REDUCTION_SCHEME_MASK = 0x7
} cublasLtReductionScheme_t;

#define PT_EMU_AT const char *file, int line
cublasStatus_t pt_emu_cublasLtCreate(PT_EMU_AT, cublasLtHandle_t *handle);
cublasStatus_t pt_emu_cublasLtDestroy(PT_EMU_AT, cublasLtHandle_t handle);
cublasStatus_t pt_emu_cublasLtMatmulDescCreate(PT_EMU_AT, cublasLtMatmulDesc_t *desc,
                                               cublasComputeType_t compute, cudaDataType_t scale);
cublasStatus_t pt_emu_cublasLtMatmulDescDestroy(PT_EMU_AT, cublasLtMatmulDesc_t desc);
cublasStatus_t pt_emu_cublasLtMatmulDescSetAttribute(PT_EMU_AT, cublasLtMatmulDesc_t desc,
                                                     cublasLtMatmulDescAttributes_t attr,
                                                     const void *buf, size_t size);
/* Column-major (cuBLASLt's default order; the emulator takes no other). */
cublasStatus_t pt_emu_cublasLtMatrixLayoutCreate(PT_EMU_AT, cublasLtMatrixLayout_t *layout,
                                                 cudaDataType_t type, uint64_t rows,
                                                 uint64_t cols, int64_t ld);
cublasStatus_t pt_emu_cublasLtMatrixLayoutDestroy(PT_EMU_AT, cublasLtMatrixLayout_t layout);
cublasStatus_t pt_emu_cublasLtMatmulPreferenceCreate(PT_EMU_AT, cublasLtMatmulPreference_t *pref);
cublasStatus_t pt_emu_cublasLtMatmulPreferenceDestroy(PT_EMU_AT, cublasLtMatmulPreference_t pref);
cublasStatus_t pt_emu_cublasLtMatmulPreferenceSetAttribute(
    PT_EMU_AT, cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
    const void *buf, size_t size);
/* One algorithm (workspace 0) for a problem the emulator can run; NOT_SUPPORTED and no result
 * where cuBLASLt documents none: an epilogue auxiliary leading dimension not divisible by 8. The
 * algorithm assumes each matrix's pointer aligned as the preference says (256 bytes unless set
 * lower), or as its leading dimension in bytes where that is less. */
cublasStatus_t pt_emu_cublasLtMatmulAlgoGetHeuristic(
    PT_EMU_AT, cublasLtHandle_t handle, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t A,
    cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
    cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
    int *returned);
/* D = epilogue(alpha op(A) op(B) + beta C (+ bias)); algo NULL (the default preferences') or
 * one the heuristic gave for this problem; NOT_SUPPORTED where a pointer is less aligned than
 * the algorithm assumes. */
cublasStatus_t pt_emu_cublasLtMatmul(PT_EMU_AT, cublasLtHandle_t handle, cublasLtMatmulDesc_t op,
                                     const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                                     const void *B, cublasLtMatrixLayout_t Bdesc,
                                     const void *beta, const void *C,
                                     cublasLtMatrixLayout_t Cdesc, void *D,
                                     cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                                     void *workspace, size_t workspaceSize, cudaStream_t stream);
#undef PT_EMU_AT

#define cublasLtCreate(h) pt_emu_cublasLtCreate(PT_EMU_HERE, h)
#define cublasLtDestroy(h) pt_emu_cublasLtDestroy(PT_EMU_HERE, h)
#define cublasLtMatmulDescCreate(...) pt_emu_cublasLtMatmulDescCreate(PT_EMU_HERE, __VA_ARGS__)
#define cublasLtMatmulDescDestroy(d) pt_emu_cublasLtMatmulDescDestroy(PT_EMU_HERE, d)
#define cublasLtMatmulDescSetAttribute(...) \
  pt_emu_cublasLtMatmulDescSetAttribute(PT_EMU_HERE, __VA_ARGS__)
#define cublasLtMatrixLayoutCreate(...) pt_emu_cublasLtMatrixLayoutCreate(PT_EMU_HERE, __VA_ARGS__)
#define cublasLtMatrixLayoutDestroy(l) pt_emu_cublasLtMatrixLayoutDestroy(PT_EMU_HERE, l)
#define cublasLtMatmulPreferenceCreate(p) pt_emu_cublasLtMatmulPreferenceCreate(PT_EMU_HERE, p)
#define cublasLtMatmulPreferenceDestroy(p) pt_emu_cublasLtMatmulPreferenceDestroy(PT_EMU_HERE, p)
#define cublasLtMatmulPreferenceSetAttribute(...) \
  pt_emu_cublasLtMatmulPreferenceSetAttribute(PT_EMU_HERE, __VA_ARGS__)
#define cublasLtMatmulAlgoGetHeuristic(...) \
  pt_emu_cublasLtMatmulAlgoGetHeuristic(PT_EMU_HERE, __VA_ARGS__)
#define cublasLtMatmul(...) pt_emu_cublasLtMatmul(PT_EMU_HERE, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
