/* kernels/cpu/onednn.h: bf16 matrix products through oneDNN (kernels/cpu/onednn.c), for the
 * CPU's bf16 table (kernels/cpu/kernels_cpu_bf16.c). Built only when CMake found oneDNN
 * (PT_HAVE_DNNL); kernels/cpu/kernels_cpu_precision.c is the one place that asks.
 *
 * onednn_bf16_isa: the name of the instruction set oneDNN multiplies bf16 with on this CPU
 * (e.g. "avx512_core_bf16", "avx512_core_amx"), or NULL when it has no bf16 products.
 *
 * onednn_matmul: C[M, N] (float32, row-major, contiguous) = A[M, K] B[K, N] (+ bias[N])
 * (+ the old C when acc), A and B bf16 bit patterns (uint16), products accumulated in float32.
 * A is row-major [M, K]; B is row-major [K, N], or, with b_rows_are_n, row-major [N, K] (so a
 * weight W[No, Ni] serves as W^T). The primitive for each shape and layout is made once per
 * thread and kept for the process (a small table); the buffers are set per call. Uses as many
 * OpenMP threads as OpenBLAS has (kernels_cpu_threads), and gives the same bits for any thread
 * count (tests/kernels/test_cpu_bf16.c). A failed oneDNN call ends the job (PT_CHECK_DNNL). */
#ifndef PT_KERNELS_CPU_ONEDNN_H
#define PT_KERNELS_CPU_ONEDNN_H

#include <stdint.h>

const char *onednn_bf16_isa(void);

typedef struct {
  int M, K, N;
  int a_rows_are_k; /* A given as [K, M] row-major */
  int b_rows_are_n; /* B given as [N, K] row-major */
  int bias;         /* bias[N] added to every row */
  int acc;          /* C += the product (else C =) */
} onednn_shape;

void onednn_matmul(const onednn_shape *s, float *C, const uint16_t *A, const uint16_t *B,
                   const float *bias);

#endif
