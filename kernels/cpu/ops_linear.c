#include "kernels/cpu/ops.h"

#include <cblas.h>
#include <string.h>

void op_linear_forward(float *y, const float *x, const float *W, const float *b, int N, int Ni,
                       int No) {
  /* Pre-filling y with the bias and letting sgemm accumulate (beta = 1) saves a second pass. */
  float beta = 0.0f;
  if (b) {
    for (int n = 0; n < N; n++) memcpy(y + (int64_t)n * No, b, sizeof(float) * No);
    beta = 1.0f;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, No, Ni, 1.0f, x, Ni, W, Ni, beta, y, No);
}

void op_linear_backward_input(float *dx, const float *dy, const float *W, int N, int Ni, int No,
                              int acc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, Ni, No, 1.0f, dy, No, W, Ni,
              acc ? 1.0f : 0.0f, dx, Ni);
}

void op_linear_backward_weight(float *dW, float *db, const float *dy, const float *x, int N, int Ni,
                               int No) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, No, Ni, N, 1.0f, dy, No, x, Ni, 1.0f, dW, Ni);
  if (db) op_colsum_acc(db, dy, N, No);
}

void op_add(float *y, const float *a, const float *b, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

void op_add_inplace(float *y, const float *a, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += a[i];
}

void op_colsum_acc(float *acc, const float *x, int N, int D) {
  for (int n = 0; n < N; n++) {
    const float *row = x + (int64_t)n * D;
    for (int i = 0; i < D; i++) acc[i] += row[i];
  }
}

void op_linear_forward_residual(float *y, const float *res, const float *x, const float *W,
                                const float *b, int N, int Ni, int No) {
  for (int n = 0; n < N; n++) op_add(y + (int64_t)n * No, res + (int64_t)n * No, b, No);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, No, Ni, 1.0f, x, Ni, W, Ni, 1.0f, y, No);
}
