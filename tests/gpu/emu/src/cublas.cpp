/* cuBLAS on OpenBLAS: the handle's stream and math mode, and the products with cuBLAS's own
 * argument checks (the statuses it returns for them), the matrices' extents checked against
 * their device blocks (a transposed or mis-strided operand shows as a range past a block's end),
 * the product queued on the handle's stream: cblas_sgemm, column-major, when it runs. */
#include <cblas.h>

#include <unordered_set>

#include "cublas_v2.h"
#include "memory.h"
#include "streams.h"

struct pt_emu_cublas {
  cudaStream_t stream;
  cublasMath_t math;
};

namespace pt_emu {
namespace {
std::unordered_set<const pt_emu_cublas *> g_handles;

int at_least_1(int v) { return v > 1 ? v : 1; }
bool valid_op(cublasOperation_t t) { return t == CUBLAS_OP_N || t == CUBLAS_OP_T || t == CUBLAS_OP_C; }

struct gemm {
  cublasOperation_t ta, tb;
  int m, n, k, lda, ldb, ldc, batch;
  float alpha, beta;
  const float *A, *B;
  float *C;
  long long sa, sb, sc;
};

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

/* Every batch's rows x cols column-major matrix at p + i * stride must be device memory. */
void check_matrix(const char *what, const float *p, int rows, int cols, int ld, long long stride,
                  int batch, const char *file, int line) {
  size_t bytes = sizeof(float) * (static_cast<size_t>(cols - 1) * static_cast<size_t>(ld) +
                                  static_cast<size_t>(rows));
  for (int i = 0; i < batch; i++) require_device(what, p + i * stride, bytes, file, line);
}

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
    cblas_sgemm(CblasColMajor, ta, tb, g.m, g.n, g.k, g.alpha, g.A + i * g.sa, g.lda,
                g.B + i * g.sb, g.ldb, g.beta, C, g.ldc);
  }
}

/* One OpenBLAS thread: the same bits whatever the machine (the CPU path's own products keep
 * theirs), and no idle BLAS thread spinning beside the emulated device after each product. */
void run(const gemm &g) {
  const int threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
  run_products(g);
  openblas_set_num_threads(threads);
}

cublasStatus_t queue_gemm(const char *what, const char *file, int line, pt_emu_cublas *h,
                          gemm g, const float *alpha, const float *beta) {
  api_enter(what, file, line);
  cublasStatus_t st = check_args(h, g, alpha, beta);
  if (st != CUBLAS_STATUS_SUCCESS || g.m == 0 || g.n == 0 || g.batch == 0) return st;
  g.alpha = *alpha, g.beta = *beta; /* host pointer mode: read when called */
  if (g.k > 0 && g.alpha != 0.0f) {
    check_matrix("cuBLAS matrix A", g.A, g.ta == CUBLAS_OP_N ? g.m : g.k,
                 g.ta == CUBLAS_OP_N ? g.k : g.m, g.lda, g.sa, g.batch, file, line);
    check_matrix("cuBLAS matrix B", g.B, g.tb == CUBLAS_OP_N ? g.k : g.n,
                 g.tb == CUBLAS_OP_N ? g.n : g.k, g.ldb, g.sb, g.batch, file, line);
  }
  check_matrix("cuBLAS matrix C", g.C, g.m, g.n, g.ldc, g.sc, g.batch, file, line);
  g_counters.blas_calls++;
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
  handle->math = mode; /* float32 either way here: OpenBLAS has no TF32 */
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
