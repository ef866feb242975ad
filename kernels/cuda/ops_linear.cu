/* Linear layers on the GPU (kernels/cpu/ops_linear.c): cuBLAS float32 products (pedantic math:
 * no TF32) and the bias kernels.
 *
 * cuBLAS is column-major. A row-major matrix M[r, c] with leading dimension ld is, read
 * column-major, the matrix M^T [c, r] with the same ld; so each row-major product is computed
 * as its transpose, which cuBLAS writes column-major, i.e. as the row-major result:
 *   forward          y[N,No] = x W^T     <=>  y^T [No,N]  = W [No,Ni]   x^T [Ni,N]
 *   backward input  dx[N,Ni] = dy W      <=>  dx^T[Ni,N]  = W^T [Ni,No] dy^T[No,N]
 *   backward weight dW[No,Ni] += dy^T x  <=>  dW^T[Ni,No] += x^T[Ni,N]  dy  [N,No]
 * (the stored W read column-major is W^T, so "W" above is op T on it; the same for dy).
 */
#include "kernels/cuda/common.cuh"

/* CPU: memcpy(y + n*No, b, No floats) for every row n. */
static __global__ void __launch_bounds__(PT_THREADS)
    fill_rows_kernel(float *y, const float *b, int64_t total, int No) {
  PT_GRID_LOOP(i, total) y[i] = b[i % No];
}

/* CPU: op_add(y + n*No, res + n*No, b, No) for every row n: y = res + b (b NULL: y = res). */
static __global__ void __launch_bounds__(PT_THREADS)
    add_rows_kernel(float *y, const float *res, const float *b, int64_t total, int No) {
  PT_GRID_LOOP(i, total) y[i] = b ? res[i] + b[i % No] : res[i];
}

/* y (column-major y^T [No, N], ldc No) = W x^T + beta y: m = No, n = N, k = Ni.
 *   A = W stored [No rows of Ni] = column-major [Ni, No], lda Ni, op T -> [No, Ni]: A(o,i) = W[o][i]
 *   B = x stored [N rows of Ni]  = column-major [Ni, N],  lda Ni, op N:            B(i,n) = x[n][i]
 *   C(o, n) = sum_i W[o][i] x[n][i] = y[n][o], at y + o + n*No. */
static void linear_gemm(gpu_ctx *g, float *y, const float *x, const float *W, int N, int Ni,
                        int No, float beta) {
  const float one = 1.0f;
  CUBLAS_CHECK(cublasSgemm(g->blas, CUBLAS_OP_T, CUBLAS_OP_N, No, N, Ni, &one, W, Ni, x, Ni,
                           &beta, y, No));
}

extern "C" void cuda_op_linear_forward(gpu_ctx *g, float *y, const float *x, const float *W,
                                       const float *b, int N, int Ni, int No) {
  if (N <= 0 || No <= 0) return;
  /* as the CPU: y pre-filled with the bias, then the product added (beta = 1) */
  float beta = 0.0f;
  if (b) {
    int64_t total = (int64_t)N * No;
    PT_LAUNCH(fill_rows_kernel, pt_grid(total), PT_THREADS, 0, g->stream, y, b, total, No);
    PT_LAUNCH_CHECK();
    beta = 1.0f;
  }
  linear_gemm(g, y, x, W, N, Ni, No, beta);
}

extern "C" void cuda_op_linear_forward_residual(gpu_ctx *g, float *y, const float *res,
                                                const float *x, const float *W, const float *b,
                                                int N, int Ni, int No) {
  if (N <= 0 || No <= 0) return;
  int64_t total = (int64_t)N * No;
  PT_LAUNCH(add_rows_kernel, pt_grid(total), PT_THREADS, 0, g->stream, y, res, b, total, No);
  PT_LAUNCH_CHECK();
  linear_gemm(g, y, x, W, N, Ni, No, 1.0f);
}

/* dx^T [Ni, N] (=|+=) W^T dy^T: m = Ni, n = N, k = No.
 *   A = W stored [No rows of Ni] = column-major [Ni, No], lda Ni, op N: A(i,o) = W[o][i]
 *   B = dy stored [N rows of No] = column-major [No, N], ldb No, op N:  B(o,n) = dy[n][o]
 *   C(i, n) = sum_o W[o][i] dy[n][o] = dx[n][i], at dx + i + n*Ni. */
extern "C" void cuda_op_linear_backward_input(gpu_ctx *g, float *dx, const float *dy,
                                              const float *W, int N, int Ni, int No, int acc) {
  if (N <= 0 || Ni <= 0) return;
  const float one = 1.0f, beta = acc ? 1.0f : 0.0f;
  CUBLAS_CHECK(cublasSgemm(g->blas, CUBLAS_OP_N, CUBLAS_OP_N, Ni, N, No, &one, W, Ni, dy, No,
                           &beta, dx, Ni));
}

/* dW^T [Ni, No] += x^T dy: m = Ni, n = No, k = N.
 *   A = x stored [N rows of Ni]  = column-major [Ni, N], lda Ni, op N:        A(i,n) = x[n][i]
 *   B = dy stored [N rows of No] = column-major [No, N], ldb No, op T -> [N, No]: B(n,o) = dy[n][o]
 *   C(i, o) = sum_n x[n][i] dy[n][o] = dW[o][i], at dW + i + o*Ni. */
extern "C" void cuda_op_linear_backward_weight(gpu_ctx *g, float *dW, float *db, const float *dy,
                                               const float *x, int N, int Ni, int No) {
  if (N <= 0 || No <= 0) return;
  if (Ni > 0) {
    const float one = 1.0f;
    CUBLAS_CHECK(cublasSgemm(g->blas, CUBLAS_OP_N, CUBLAS_OP_T, Ni, No, N, &one, x, Ni, dy, No,
                             &one, dW, Ni));
  }
  if (db) cuda_op_colsum_acc(g, db, dy, N, No);
}
