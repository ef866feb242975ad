/* cuBLAS on OpenBLAS: the handle's stream and math mode, and the products with cuBLAS's own
 * argument checks (the statuses it returns for them), the matrices' extents checked against
 * their device blocks (a transposed or mis-strided operand shows as a range past a block's end),
 * the product queued on the handle's stream: cblas_sgemm, column-major, when it runs. */
#include <cblas.h>

#include <cstdint>
#include <cstring>
#include <unordered_set>
#include <vector>

#include "blas.h"
#include "cublas_v2.h"
#include "memory.h"
#include "streams.h"

struct pt_emu_cublas {
  cudaStream_t stream;
  cublasMath_t math;
};

namespace pt_emu {

float tf32_round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

std::vector<float> widen(const void *p, size_t count, bool bf16, bool tf32) {
  std::vector<float> out(count);
  for (size_t i = 0; i < count; i++) {
    if (bf16) {
      uint32_t u = static_cast<uint32_t>(static_cast<const uint16_t *>(p)[i]) << 16;
      std::memcpy(&out[i], &u, sizeof u);
    } else {
      out[i] = static_cast<const float *>(p)[i];
      if (tf32) out[i] = tf32_round(out[i]);
    }
  }
  return out;
}

size_t span(int rows, int cols, int ld) {
  return static_cast<size_t>(cols - 1) * static_cast<size_t>(ld) + static_cast<size_t>(rows);
}

void check_matrix(const char *what, const void *p, int rows, int cols, int ld, long long stride,
                  int batch, const char *file, int line, size_t elem) {
  size_t bytes = elem * span(rows, cols, ld);
  for (int i = 0; i < batch; i++)
    require_device(what, static_cast<const char *>(p) + i * stride * static_cast<long long>(elem),
                   bytes, file, line);
}

namespace {
void run_products(const gemm &g) {
  const CBLAS_TRANSPOSE ta = g.ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
  const CBLAS_TRANSPOSE tb = g.tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
  for (int i = 0; i < g.batch; i++) {
    float *C = g.C + i * g.sc;
    if (g.k == 0 || g.alpha == 0.0f) { /* cuBLAS reads neither A nor B; beta 0 ignores C */
      for (int c = 0; c < g.n; c++)
        for (int r = 0; r < g.m; r++) {
          float &x = C[static_cast<size_t>(c) * static_cast<size_t>(g.ldc) + static_cast<size_t>(r)];
          x = g.beta == 0.0f ? 0.0f : g.beta * x;
        }
      continue;
    }
    if (g.bf16 || g.tf32) {
      size_t elem = g.bf16 ? 2 : 4;
      const char *a = static_cast<const char *>(g.A) + i * g.sa * static_cast<long long>(elem);
      const char *b = static_cast<const char *>(g.B) + i * g.sb * static_cast<long long>(elem);
      std::vector<float> wa = widen(a, g.ta == CUBLAS_OP_N ? span(g.m, g.k, g.lda)
                                                           : span(g.k, g.m, g.lda), g.bf16, g.tf32);
      std::vector<float> wb = widen(b, g.tb == CUBLAS_OP_N ? span(g.k, g.n, g.ldb)
                                                           : span(g.n, g.k, g.ldb), g.bf16, g.tf32);
      cblas_sgemm(CblasColMajor, ta, tb, g.m, g.n, g.k, g.alpha, wa.data(), g.lda, wb.data(),
                  g.ldb, g.beta, C, g.ldc);
      continue;
    }
    cblas_sgemm(CblasColMajor, ta, tb, g.m, g.n, g.k, g.alpha,
                static_cast<const float *>(g.A) + i * g.sa, g.lda,
                static_cast<const float *>(g.B) + i * g.sb, g.ldb, g.beta, C, g.ldc);
  }
}

} // namespace

void run(const gemm &g) {
  const int threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
  run_products(g);
  openblas_set_num_threads(threads);
}

namespace {
std::unordered_set<const pt_emu_cublas *> g_handles;

int at_least_1(int v) { return v > 1 ? v : 1; }
bool valid_op(cublasOperation_t t) { return t == CUBLAS_OP_N || t == CUBLAS_OP_T || t == CUBLAS_OP_C; }

/* cuBLAS's checks, in its order (CUBLAS_STATUS_INVALID_VALUE cases of cublas<t>gemm). */
cublasStatus_t check_args(const pt_emu_cublas *h, const gemm &g, const float *alpha,
                          const float *beta) {
  if (!g_handles.count(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (!valid_op(g.ta) || !valid_op(g.tb)) return CUBLAS_STATUS_INVALID_VALUE;
  if (g.lda < at_least_1(g.ta == CUBLAS_OP_N ? g.m : g.k)) return CUBLAS_STATUS_INVALID_VALUE;
  if (g.ldb < at_least_1(g.tb == CUBLAS_OP_N ? g.k : g.n)) return CUBLAS_STATUS_INVALID_VALUE;
  if (g.ldc < at_least_1(g.m)) return CUBLAS_STATUS_INVALID_VALUE;
  if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t queue_gemm(const char *what, const char *file, int line, pt_emu_cublas *h,
                          gemm g, const float *alpha, const float *beta) {
  api_enter(what, file, line);
  cublasStatus_t st = check_args(h, g, alpha, beta);
  if (st != CUBLAS_STATUS_SUCCESS || g.m == 0 || g.n == 0 || g.batch == 0) return st;
  g.alpha = *alpha, g.beta = *beta; /* host pointer mode: read when called */
  if (!g.bf16 && !g.pedantic && g_handles.count(h) && h->math == CUBLAS_TF32_TENSOR_OP_MATH)
    g.tf32 = true; /* the handle's math mode, read when called */
  size_t elem = g.bf16 ? 2 : sizeof(float);
  if (g.k > 0 && g.alpha != 0.0f) {
    check_matrix("cuBLAS matrix A", g.A, g.ta == CUBLAS_OP_N ? g.m : g.k,
                 g.ta == CUBLAS_OP_N ? g.k : g.m, g.lda, g.sa, g.batch, file, line, elem);
    check_matrix("cuBLAS matrix B", g.B, g.tb == CUBLAS_OP_N ? g.k : g.n,
                 g.tb == CUBLAS_OP_N ? g.n : g.k, g.ldb, g.sb, g.batch, file, line, elem);
  }
  check_matrix("cuBLAS matrix C", g.C, g.m, g.n, g.ldc, g.sc, g.batch, file, line);
  g_counters.blas_calls++;
  if (cfg().count_only) return CUBLAS_STATUS_SUCCESS;
  enqueue_fn(resolve_stream(h->stream, what, file, line), what, file, line, [g] { run(g); });
  return CUBLAS_STATUS_SUCCESS;
}
} // namespace
} // namespace pt_emu

using namespace pt_emu;

extern "C" {

cublasStatus_t pt_emu_cublasCreate(const char *file, int line, cublasHandle_t *handle) {
  api_enter("cublasCreate", file, line);
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new pt_emu_cublas{nullptr, CUBLAS_DEFAULT_MATH};
  g_handles.insert(*handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t pt_emu_cublasDestroy(const char *file, int line, cublasHandle_t handle) {
  api_enter("cublasDestroy", file, line);
  if (!g_handles.erase(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t pt_emu_cublasSetStream(const char *file, int line, cublasHandle_t handle,
                                      cudaStream_t stream) {
  api_enter("cublasSetStream", file, line);
  if (!g_handles.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  resolve_stream(stream, "cublasSetStream", file, line); /* a dead stream ends the run here */
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t pt_emu_cublasGetStream(const char *file, int line, cublasHandle_t handle,
                                      cudaStream_t *stream) {
  api_enter("cublasGetStream", file, line);
  if (!g_handles.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!stream) return CUBLAS_STATUS_INVALID_VALUE;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t pt_emu_cublasSetMathMode(const char *file, int line, cublasHandle_t handle,
                                        cublasMath_t mode) {
  api_enter("cublasSetMathMode", file, line);
  if (!g_handles.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode < CUBLAS_DEFAULT_MATH || mode > CUBLAS_TF32_TENSOR_OP_MATH) return CUBLAS_STATUS_INVALID_VALUE;
  handle->math = mode; /* TF32: the float32 products' inputs rounded to TF32 (queue_gemm) */
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t pt_emu_cublasGetMathMode(const char *file, int line, cublasHandle_t handle,
                                        cublasMath_t *mode) {
  api_enter("cublasGetMathMode", file, line);
  if (!g_handles.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!mode) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->math;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t pt_emu_cublasSgemm(const char *file, int line, cublasHandle_t handle,
                                  cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                                  int k, const float *alpha, const float *A, int lda,
                                  const float *B, int ldb, const float *beta, float *C, int ldc) {
  gemm g{transa, transb, m, n, k, lda, ldb, ldc, 1, 0.0f, 0.0f, A, B, C, 0, 0, 0};
  return queue_gemm("cublasSgemm", file, line, handle, g, alpha, beta);
}

cublasStatus_t pt_emu_cublasSgemmStridedBatched(
    const char *file, int line, cublasHandle_t handle, cublasOperation_t transa,
    cublasOperation_t transb, int m, int n, int k, const float *alpha, const float *A, int lda,
    long long strideA, const float *B, int ldb, long long strideB, const float *beta, float *C,
    int ldc, long long strideC, int batchCount) {
  gemm g{transa, transb, m, n, k, lda, ldb, ldc, batchCount, 0.0f, 0.0f, A, B, C, strideA,
         strideB, strideC};
  return queue_gemm("cublasSgemmStridedBatched", file, line, handle, g, alpha, beta);
}

cublasStatus_t pt_emu_cublasGemmEx(const char *file, int line, cublasHandle_t handle,
                                   cublasOperation_t transa, cublasOperation_t transb, int m,
                                   int n, int k, const void *alpha, const void *A,
                                   cudaDataType_t Atype, int lda, const void *B,
                                   cudaDataType_t Btype, int ldb, const void *beta, void *C,
                                   cudaDataType_t Ctype, int ldc, cublasComputeType_t computeType,
                                   cublasGemmAlgo_t algo) {
  const bool bf16 = Atype == CUDA_R_16BF && Btype == CUDA_R_16BF;
  const bool f32 = Atype == CUDA_R_32F && Btype == CUDA_R_32F;
  const bool compute32 = computeType == CUBLAS_COMPUTE_32F ||
                         computeType == CUBLAS_COMPUTE_32F_PEDANTIC ||
                         computeType == CUBLAS_COMPUTE_32F_FAST_TF32;
  if (algo != CUBLAS_GEMM_DEFAULT || Ctype != CUDA_R_32F || !(bf16 || f32) || !compute32 ||
      (bf16 && computeType == CUBLAS_COMPUTE_32F_FAST_TF32)) {
    api_enter("cublasGemmEx", file, line);
    return CUBLAS_STATUS_NOT_SUPPORTED; /* combinations pipetrain does not use */
  }
  gemm g{transa, transb, m, n, k, lda, ldb, ldc, 1, 0.0f, 0.0f, A, B, static_cast<float *>(C),
         0, 0, 0};
  g.bf16 = bf16;
  g.tf32 = f32 && computeType == CUBLAS_COMPUTE_32F_FAST_TF32;
  g.pedantic = computeType == CUBLAS_COMPUTE_32F_PEDANTIC; /* wins over the handle's TF32 */
  return queue_gemm("cublasGemmEx", file, line, handle, g, static_cast<const float *>(alpha),
                    static_cast<const float *>(beta));
}

const char *cublasGetStatusName(cublasStatus_t s) {
  switch (s) {
#define PT_EMU_NAME(x) case x: return #x;
    PT_EMU_NAME(CUBLAS_STATUS_SUCCESS)
    PT_EMU_NAME(CUBLAS_STATUS_NOT_INITIALIZED)
    PT_EMU_NAME(CUBLAS_STATUS_ALLOC_FAILED)
    PT_EMU_NAME(CUBLAS_STATUS_INVALID_VALUE)
    PT_EMU_NAME(CUBLAS_STATUS_ARCH_MISMATCH)
    PT_EMU_NAME(CUBLAS_STATUS_MAPPING_ERROR)
    PT_EMU_NAME(CUBLAS_STATUS_EXECUTION_FAILED)
    PT_EMU_NAME(CUBLAS_STATUS_INTERNAL_ERROR)
    PT_EMU_NAME(CUBLAS_STATUS_NOT_SUPPORTED)
    PT_EMU_NAME(CUBLAS_STATUS_LICENSE_ERROR)
#undef PT_EMU_NAME
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_SUCCESS: return "success";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
  case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
  default: return cublasGetStatusName(s);
  }
}

} // extern "C"
