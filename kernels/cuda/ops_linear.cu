/* Linear layers on the GPU (kernels/cpu/ops_linear.c): cuBLAS float32 products (pedantic math:
 * no TF32, unless train.precision tf32 set the handle's math mode) and the bias kernels; the
 * bf16 variants convert the operands and multiply with cublasGemmEx.
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
#include "kernels/precision.h"

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

/* n floats to bf16 (round to nearest even) / bf16 to float (exact); in place for round. */
static __global__ void __launch_bounds__(PT_THREADS)
    to_bf16_kernel(uint16_t *dst, const float *src, int64_t n) {
  PT_GRID_LOOP(i, n) dst[i] = pt_bf16_bits(src[i]);
}
static __global__ void __launch_bounds__(PT_THREADS)
    from_bf16_kernel(float *dst, const uint16_t *src, int64_t n) {
  PT_GRID_LOOP(i, n) dst[i] = pt_bf16_float(src[i]);
}
static __global__ void __launch_bounds__(PT_THREADS) round_bf16_kernel(float *x, int64_t n) {
  PT_GRID_LOOP(i, n) x[i] = pt_round_bf16(x[i]);
}

/* A bf16 copy of n floats in *buf (capacity *cap elements, grown as needed). */
static const uint16_t *to_bf16(gpu_ctx *g, uint16_t **buf, size_t *cap, const float *src,
                               int64_t n) {
  if ((size_t)n > *cap) {
    if (*buf) {
      gpu_sync(g); /* products still queued may read the old copy */
      gpu_free(*buf);
    }
    *buf = (uint16_t *)gpu_alloc(g, sizeof(uint16_t) * (size_t)n);
    *cap = (size_t)n;
  }
  PT_LAUNCH_COSTED(to_bf16_kernel, pt_cost_of(0.0, 0.0, 6.0 * n), pt_grid(n), PT_THREADS, 0,
                   g->stream, *buf, src, n);
  PT_LAUNCH_CHECK();
  return *buf;
}

/* Elements a column-major operand rows x cols with leading dimension ld spans. */
static int64_t extent(int rows, int cols, int ld) { return (int64_t)(cols - 1) * ld + rows; }

/* The ledger's row of a product: by precision and role (fwd, bwd_input, bwd_weight). */
typedef struct {
  const char *fp32, *tf32, *bf16;
} product_names;
static const product_names k_fwd = {"cublasSgemm:fwd", "cublasSgemm_tf32:fwd",
                                    "cublasGemmEx_bf16:fwd"};
static const product_names k_bwd_input = {"cublasSgemm:bwd_input", "cublasSgemm_tf32:bwd_input",
                                          "cublasGemmEx_bf16:bwd_input"};
static const product_names k_bwd_weight = {"cublasSgemm:bwd_weight",
                                           "cublasSgemm_tf32:bwd_weight",
                                           "cublasGemmEx_bf16:bwd_weight"};

/* A product's cost: 2 m n k FLOPs, on tensor cores for bf16 and TF32 (the handle's math mode,
 * kernels_gpu_set_precision), on the ordinary cores for pedantic float32; A and B read once at
 * their width (2 bytes bf16, else 4), C written (and read first when beta != 0). */
static void product_note(gpu_ctx *g, const product_names *names, int bf16, int m, int n, int k,
                         float beta) {
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  if (!bf16) CUBLAS_CHECK(cublasGetMathMode(g->blas, &math));
  const int tf32 = !bf16 && math == CUBLAS_TF32_TENSOR_OP_MATH;
  const double flops = 2.0 * m * n * k, in = bf16 ? 2.0 : 4.0;
  const double bytes = in * ((double)m * k + (double)k * n) + 4.0 * m * n * (beta != 0.0f ? 2 : 1);
  const char *name = bf16 ? names->bf16 : tf32 ? names->tf32 : names->fp32;
  gpu_cost_note(name, bf16 || tf32 ? flops : 0.0, bf16 || tf32 ? 0.0 : flops, bytes);
}

/* C[m,n] = op(A)[m,k] op(B)[k,n] + beta C, column-major, alpha 1: float32 (s NULL) or with A and
 * B converted to bf16 into s and float32 accumulation (cublasGemmEx). k > 0. */
static void product(gpu_ctx *g, cuda_bf16_scratch *s, const product_names *names,
                    cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    const float *A, int lda, const float *B, int ldb, float beta, float *C,
                    int ldc) {
  const float one = 1.0f;
  product_note(g, names, s != NULL, m, n, k, beta);
  if (!s) {
    CUBLAS_CHECK(cublasSgemm(g->blas, ta, tb, m, n, k, &one, A, lda, B, ldb, &beta, C, ldc));
    return;
  }
  int64_t na = ta == CUBLAS_OP_N ? extent(m, k, lda) : extent(k, m, lda);
  int64_t nb = tb == CUBLAS_OP_N ? extent(k, n, ldb) : extent(n, k, ldb);
  const uint16_t *a16 = to_bf16(g, &s->a, &s->cap_a, A, na);
  const uint16_t *b16 = to_bf16(g, &s->b, &s->cap_b, B, nb);
  CUBLAS_CHECK(cublasGemmEx(g->blas, ta, tb, m, n, k, &one, a16, CUDA_R_16BF, lda, b16,
                            CUDA_R_16BF, ldb, &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
}

/* y (column-major y^T [No, N], ldc No) = W x^T + beta y: m = No, n = N, k = Ni.
 *   A = W stored [No rows of Ni] = column-major [Ni, No], lda Ni, op T -> [No, Ni]: A(o,i) = W[o][i]
 *   B = x stored [N rows of Ni]  = column-major [Ni, N],  lda Ni, op N:            B(i,n) = x[n][i]
 *   C(o, n) = sum_i W[o][i] x[n][i] = y[n][o], at y + o + n*No. */
static void linear_gemm(gpu_ctx *g, cuda_bf16_scratch *s, float *y, const float *x,
                        const float *W, int N, int Ni, int No, float beta) {
  product(g, s, &k_fwd, CUBLAS_OP_T, CUBLAS_OP_N, No, N, Ni, W, Ni, x, Ni, beta, y, No);
}

static void forward(gpu_ctx *g, cuda_bf16_scratch *s, float *y, const float *x, const float *W,
                    const float *b, int N, int Ni, int No) {
  if (N <= 0 || No <= 0) return;
  /* as the CPU: y pre-filled with the bias, then the product added (beta = 1) */
  float beta = 0.0f;
  if (b) {
    int64_t total = (int64_t)N * No;
    PT_LAUNCH_COSTED(fill_rows_kernel, pt_cost_of(0.0, 0.0, 4.0 * (total + No)), pt_grid(total),
                     PT_THREADS, 0, g->stream, y, b, total, No);
    PT_LAUNCH_CHECK();
    beta = 1.0f;
  }
  linear_gemm(g, s, y, x, W, N, Ni, No, beta);
}

static void forward_residual(gpu_ctx *g, cuda_bf16_scratch *s, float *y, const float *res,
                             const float *x, const float *W, const float *b, int N, int Ni,
                             int No) {
  if (N <= 0 || No <= 0) return;
  int64_t total = (int64_t)N * No;
  const pt_cost cost = pt_cost_of(0.0, b ? (double)total : 0.0, 4.0 * (2.0 * total + (b ? No : 0)));
  PT_LAUNCH_COSTED(add_rows_kernel, cost, pt_grid(total), PT_THREADS, 0, g->stream, y, res, b,
                   total, No);
  PT_LAUNCH_CHECK();
  linear_gemm(g, s, y, x, W, N, Ni, No, 1.0f);
}

/* dx^T [Ni, N] (=|+=) W^T dy^T: m = Ni, n = N, k = No.
 *   A = W stored [No rows of Ni] = column-major [Ni, No], lda Ni, op N: A(i,o) = W[o][i]
 *   B = dy stored [N rows of No] = column-major [No, N], ldb No, op N:  B(o,n) = dy[n][o]
 *   C(i, n) = sum_o W[o][i] dy[n][o] = dx[n][i], at dx + i + n*Ni. */
static void backward_input(gpu_ctx *g, cuda_bf16_scratch *s, float *dx, const float *dy,
                           const float *W, int N, int Ni, int No, int acc) {
  if (N <= 0 || Ni <= 0) return;
  product(g, s, &k_bwd_input, CUBLAS_OP_N, CUBLAS_OP_N, Ni, N, No, W, Ni, dy, No,
          acc ? 1.0f : 0.0f, dx, Ni);
}

/* dW^T [Ni, No] += x^T dy: m = Ni, n = No, k = N.
 *   A = x stored [N rows of Ni]  = column-major [Ni, N], lda Ni, op N:        A(i,n) = x[n][i]
 *   B = dy stored [N rows of No] = column-major [No, N], ldb No, op T -> [N, No]: B(n,o) = dy[n][o]
 *   C(i, o) = sum_n x[n][i] dy[n][o] = dW[o][i], at dW + i + o*Ni.
 * The bias gradient sums the float32 dy in both modes. */
static void backward_weight(gpu_ctx *g, cuda_bf16_scratch *s, float *dW, float *db,
                            const float *dy, const float *x, int N, int Ni, int No) {
  if (N <= 0 || No <= 0) return;
  if (Ni > 0)
    product(g, s, &k_bwd_weight, CUBLAS_OP_N, CUBLAS_OP_T, Ni, No, N, x, Ni, dy, No, 1.0f, dW, Ni);
  if (db) cuda_op_colsum_acc(g, db, dy, N, No);
}

extern "C" void cuda_op_linear_forward(gpu_ctx *g, float *y, const float *x, const float *W,
                                       const float *b, int N, int Ni, int No) {
  forward(g, NULL, y, x, W, b, N, Ni, No);
}

extern "C" void cuda_op_linear_forward_residual(gpu_ctx *g, float *y, const float *res,
                                                const float *x, const float *W, const float *b,
                                                int N, int Ni, int No) {
  forward_residual(g, NULL, y, res, x, W, b, N, Ni, No);
}

extern "C" void cuda_op_linear_backward_input(gpu_ctx *g, float *dx, const float *dy,
                                              const float *W, int N, int Ni, int No, int acc) {
  backward_input(g, NULL, dx, dy, W, N, Ni, No, acc);
}

extern "C" void cuda_op_linear_backward_weight(gpu_ctx *g, float *dW, float *db, const float *dy,
                                               const float *x, int N, int Ni, int No) {
  backward_weight(g, NULL, dW, db, dy, x, N, Ni, No);
}

/* --- bf16 ------------------------------------------------------------------------------- */

extern "C" void cuda_op_linear_forward_bf16(gpu_ctx *g, cuda_bf16_scratch *s, float *y,
                                            const float *x, const float *W, const float *b,
                                            int N, int Ni, int No) {
  forward(g, s, y, x, W, b, N, Ni, No);
}

extern "C" void cuda_op_linear_forward_residual_bf16(gpu_ctx *g, cuda_bf16_scratch *s, float *y,
                                                     const float *res, const float *x,
                                                     const float *W, const float *b, int N,
                                                     int Ni, int No) {
  forward_residual(g, s, y, res, x, W, b, N, Ni, No);
}

extern "C" void cuda_op_linear_backward_input_bf16(gpu_ctx *g, cuda_bf16_scratch *s, float *dx,
                                                   const float *dy, const float *W, int N, int Ni,
                                                   int No, int acc) {
  backward_input(g, s, dx, dy, W, N, Ni, No, acc);
}

extern "C" void cuda_op_linear_backward_weight_bf16(gpu_ctx *g, cuda_bf16_scratch *s, float *dW,
                                                    float *db, const float *dy, const float *x,
                                                    int N, int Ni, int No) {
  backward_weight(g, s, dW, db, dy, x, N, Ni, No);
}

extern "C" void cuda_bf16_scratch_free(cuda_bf16_scratch *s) {
  if (s->a) gpu_free(s->a);
  if (s->b) gpu_free(s->b);
  *s = cuda_bf16_scratch{};
}

extern "C" void cuda_round_bf16(gpu_ctx *g, float *x, int64_t n) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(round_bf16_kernel, pt_cost_elementwise(n, 1, 1, 0), pt_grid(n), PT_THREADS, 0,
                   g->stream, x, n);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_pack_bf16(gpu_ctx *g, uint16_t *dst, const float *src, int64_t n) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(to_bf16_kernel, pt_cost_of(0.0, 0.0, 6.0 * n), pt_grid(n), PT_THREADS, 0,
                   g->stream, dst, src, n);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_unpack_bf16(gpu_ctx *g, float *dst, const uint16_t *src, int64_t n) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(from_bf16_kernel, pt_cost_of(0.0, 0.0, 6.0 * n), pt_grid(n), PT_THREADS, 0,
                   g->stream, dst, src, n);
  PT_LAUNCH_CHECK();
}
