/* Causal multi-head attention on the GPU (kernels/cpu/ops_attention.c): the four products of a
 * head are cuBLAS strided-batched GEMMs over the H heads of one sequence b (one call per b: the
 * heads of q, k, v sit hd floats apart in a row of qkv, the sequences T*3d apart, so no single
 * stride covers both), the softmax and its backward are warp-per-row kernels.
 *
 * The products run over the full T x T square; the softmax writes exact zeros above the
 * diagonal (of P, and of dS in backward), so the products over it add zeros and equal the
 * CPU's causal ones (which stop at the diagonal).
 *
 * Layouts (row-major): qkv [B,T,3d], head h of q at columns h*hd.., of k at d + h*hd.., of v at
 * 2d + h*hd..; o and dout [B,T,d], head h at columns h*hd..; p [B,H,T,T].
 * Read column-major, a row-major X[T, hd] with leading dimension ld is X^T [hd, T] (same ld), a
 * row-major P[T,T] is P^T. Each product below is computed as its transpose (see each call).
 */
#include <math.h>

#include "kernels/cuda/common.cuh"

#define ROWS_PER_BLOCK (PT_THREADS / 32) /* one warp per row */

/* In place over p: scores S (q . k, unscaled) in, probabilities out. Row = (b*H + h)*T + t.
 * CPU softmax_causal_row: mx = max_{j<=t} s[j];  e_j = pt_expf((s[j] - mx) * scale);
 * p[j] = e_j / sum (as e_j * (1/sum)) for j <= t, 0 for j > t. Lane l owns j = l, l+32, ...:
 * it reads and writes only its own elements, so in place is safe. */
static __global__ void __launch_bounds__(PT_THREADS)
    softmax_causal_kernel(float *p, int64_t rows, int T, float scale) {
  const int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  if (row >= rows) return; /* the whole warp leaves: row is the same in all its lanes */
  const int lane = threadIdx.x & 31;
  const int t = (int)(row % T);
  float *s = p + row * T;
  float mx = pt_dev_neg_inf();
  for (int j = lane; j <= t; j += 32) mx = s[j] > mx ? s[j] : mx;
  mx = pt_warp_max(mx);
  float sum = 0.0f;
  for (int j = lane; j <= t; j += 32) {
    float e = pt_dev_expf((s[j] - mx) * scale);
    s[j] = e;
    sum += e;
  }
  sum = pt_warp_sum(sum);
  const float inv = 1.0f / sum;
  for (int j = lane; j <= t; j += 32) s[j] *= inv;
  for (int j = t + 1 + lane; j < T; j += 32) s[j] = 0.0f;
}

/* In place over ds: dP in, dS out; p the probabilities of the same rows.
 * CPU softmax_backward_rows: dot = sum_{j<=t} p[j] dP[j];  dS[j] = p[j] (dP[j] - dot) scale for
 * j <= t, 0 above. */
static __global__ void __launch_bounds__(PT_THREADS)
    softmax_causal_backward_kernel(float *ds, const float *p, int64_t rows, int T, float scale) {
  const int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  const int t = (int)(row % T);
  float *dr = ds + row * T;
  const float *pr = p + row * T;
  float dot = 0.0f;
  for (int j = lane; j <= t; j += 32) dot += pr[j] * dr[j];
  dot = pt_warp_sum(dot);
  for (int j = lane; j <= t; j += 32) dr[j] = pr[j] * (dr[j] - dot) * scale;
  for (int j = t + 1 + lane; j < T; j += 32) dr[j] = 0.0f;
}

static unsigned row_blocks(int64_t rows) {
  return (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
}

/* One strided-batched product over the H heads (batch stride sa, sb, sc). */
static void gemm_heads(gpu_ctx *g, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                       int k, const float *A, int lda, long long sa, const float *B, int ldb,
                       long long sb, float *C, int ldc, long long sc, int H) {
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasSgemmStridedBatched(g->blas, ta, tb, m, n, k, &one, A, lda, sa, B, ldb, sb,
                                         &zero, C, ldc, sc, H));
}

extern "C" int64_t cuda_op_attention_scratch_floats(int B, int T, int d, int H) {
  (void)B, (void)d;
  return (int64_t)H * T * T; /* dS of one sequence's heads (backward); forward needs none */
}

extern "C" void cuda_op_attention_forward(gpu_ctx *g, float *o, float *p, const float *qkv, int B,
                                          int T, int d, int H, float *scratch) {
  (void)scratch;
  if (B <= 0 || T <= 0 || d <= 0 || H <= 0) return;
  const int hd = d / H, ld = 3 * d;
  const float scale = 1.0f / sqrtf((float)hd);
  const long long TT = (long long)T * T;
  for (int b = 0; b < B; b++) {
    const float *q = qkv + (int64_t)b * T * ld, *k = q + d;
    float *pb = p + (int64_t)b * H * TT;
    /* S^T[s,t] (column-major [T,T], ld T: element s + t*T = row-major S[t][s]) = K Q^T:
     * m = T (s), n = T (t), k = hd.  A = k stored [T rows of hd, ld 3d] = column-major
     * K^T [hd,T]; op T: A(s,i) = K[s][i].  B = q, column-major Q^T [hd,T], op N: B(i,t) = Q[t][i].
     * C(s,t) = sum_i K[s][i] Q[t][i] = S[t][s]. Heads: A, B +hd, C +T*T. */
    gemm_heads(g, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hd, k, ld, hd, q, ld, hd, pb, T, TT, H);
  }
  const int64_t rows = (int64_t)B * H * T;
  PT_LAUNCH(softmax_causal_kernel, row_blocks(rows), PT_THREADS, 0, g->stream, p, rows, T, scale);
  PT_LAUNCH_CHECK();
  for (int b = 0; b < B; b++) {
    const float *v = qkv + (int64_t)b * T * ld + 2 * d;
    const float *pb = p + (int64_t)b * H * TT;
    float *ob = o + (int64_t)b * T * d;
    /* O^T [hd,T] (column-major, ld d: element i + t*d = O[t][i]) = V^T P^T: m = hd, n = T,
     * k = T.  A = v, column-major V^T [hd,T], ld 3d, op N: A(i,s) = V[s][i].  B = p, column-major
     * P^T [T,T], ld T, op N: B(s,t) = P[t][s].  C(i,t) = sum_s V[s][i] P[t][s] = O[t][i].
     * Heads: A +hd, B +T*T, C +hd (interleaved columns of o, each element written once). */
    gemm_heads(g, CUBLAS_OP_N, CUBLAS_OP_N, hd, T, T, v, ld, hd, pb, T, TT, ob, d, hd, H);
  }
}

extern "C" void cuda_op_attention_backward(gpu_ctx *g, float *dqkv, const float *dout,
                                           const float *qkv, const float *p, int B, int T, int d,
                                           int H, float *scratch) {
  if (B <= 0 || T <= 0 || d <= 0 || H <= 0) return;
  const int hd = d / H, ld = 3 * d;
  const float scale = 1.0f / sqrtf((float)hd);
  const long long TT = (long long)T * T;
  float *ds = scratch; /* [H,T,T]: dP, then dS, of sequence b */
  for (int b = 0; b < B; b++) {
    const float *q = qkv + (int64_t)b * T * ld, *k = q + d, *v = q + 2 * d;
    float *dq = dqkv + (int64_t)b * T * ld, *dk = dq + d, *dv = dq + 2 * d;
    const float *dob = dout + (int64_t)b * T * d;
    const float *pb = p + (int64_t)b * H * TT;
    /* dV = P^T dO, i.e. dV^T [hd,T] = dO^T P: m = hd, n = T (s), k = T (t).
     * A = dout, column-major dO^T [hd,T], ld d, op N: A(i,t) = dO[t][i].  B = p, column-major
     * P^T, ld T, op T: B(t,s) = P[t][s].  C(i,s) = sum_t dO[t][i] P[t][s] = dV[s][i], ld 3d. */
    gemm_heads(g, CUBLAS_OP_N, CUBLAS_OP_T, hd, T, T, dob, d, hd, pb, T, TT, dv, ld, hd, H);
    /* dP = dO V^T, i.e. dP^T [T,T] (column-major, element s + t*T = dP[t][s]) = V dO^T:
     * m = T (s), n = T (t), k = hd.  A = v, column-major V^T [hd,T], ld 3d, op T:
     * A(s,i) = V[s][i].  B = dout, column-major dO^T, ld d, op N: B(i,t) = dO[t][i].
     * C(s,t) = sum_i V[s][i] dO[t][i] = dP[t][s]. Heads: C +T*T in scratch. */
    gemm_heads(g, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hd, v, ld, hd, dob, d, hd, ds, T, TT, H);
    const int64_t rows = (int64_t)H * T;
    PT_LAUNCH(softmax_causal_backward_kernel, row_blocks(rows), PT_THREADS, 0, g->stream, ds, pb,
              rows, T, scale);
    PT_LAUNCH_CHECK();
    /* dQ = dS K, i.e. dQ^T [hd,T] = K^T dS^T: m = hd, n = T (t), k = T (s).
     * A = k, column-major K^T, ld 3d, op N: A(i,s) = K[s][i].  B = ds, column-major dS^T, ld T,
     * op N: B(s,t) = dS[t][s].  C(i,t) = sum_s K[s][i] dS[t][s] = dQ[t][i], ld 3d. */
    gemm_heads(g, CUBLAS_OP_N, CUBLAS_OP_N, hd, T, T, k, ld, hd, ds, T, TT, dq, ld, hd, H);
    /* dK = dS^T Q, i.e. dK^T [hd,T] = Q^T dS: m = hd, n = T (s), k = T (t).
     * A = q, column-major Q^T, ld 3d, op N: A(i,t) = Q[t][i].  B = ds, column-major dS^T, ld T,
     * op T: B(t,s) = dS[t][s].  C(i,s) = sum_t Q[t][i] dS[t][s] = dK[s][i], ld 3d. */
    gemm_heads(g, CUBLAS_OP_N, CUBLAS_OP_T, hd, T, T, q, ld, hd, ds, T, TT, dk, ld, hd, H);
  }
}
