/* The emulated cuBLAS's products (cublas.cpp), shared with the emulated cuBLASLt (cublaslt.cpp):
 * one description of a column-major product and the pieces that check and run it. */
#ifndef PT_EMU_BLAS_H
#define PT_EMU_BLAS_H

#include <cstddef>
#include <vector>

#include "cublas_v2.h"

namespace pt_emu {

/* C = alpha op(A) op(B) + beta C, batch times (operands i * stride elements apart). */
struct gemm {
  cublasOperation_t ta, tb;
  int m, n, k, lda, ldb, ldc, batch;
  float alpha, beta;
  const void *A, *B; /* float, or bf16 (uint16_t) when bf16 */
  float *C;
  long long sa, sb, sc;
  bool bf16 = false; /* A and B are bf16: widened exactly to float before the product */
  bool tf32 = false; /* A and B float rounded to TF32 (10 mantissa bits) before the product */
  bool pedantic = false; /* float32 whatever the handle's math mode */
};

/* The TF32 a tensor core reads: the top 10 mantissa bits, rounded to nearest even (NaN, inf
 * kept). Hardware may round the last place differently: tf32 is compared with tolerances. */
float tf32_round(float x);
/* An operand of `count` elements as floats: bf16 widened (exact), TF32 rounded, else copied. */
std::vector<float> widen(const void *p, size_t count, bool bf16, bool tf32);
/* Elements a column-major rows x cols matrix with leading dimension ld spans. */
size_t span(int rows, int cols, int ld);
/* Every batch's rows x cols column-major matrix of `elem`-byte elements at p + i * stride must
 * be device memory (else the run ends naming what and file:line). */
void check_matrix(const char *what, const void *p, int rows, int cols, int ld, long long stride,
                  int batch, const char *file, int line, size_t elem = sizeof(float));
/* Runs g now, on the calling thread, with one OpenBLAS thread: the same bits whatever the
 * machine (the CPU path's own products keep theirs), and no idle BLAS thread spinning beside
 * the emulated device after each product. */
void run(const gemm &g);

} // namespace pt_emu

#endif
