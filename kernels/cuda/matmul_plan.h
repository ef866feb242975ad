/* kernels/cuda/matmul_plan.h: every matrix product of a rank's GPU through cuBLASLt, each
 * problem's descriptors and algorithm made once and kept (kernels/cuda/ops_linear.cu calls it;
 * the rank's thread only, like everything on its gpu_ctx).
 *
 * Why one algorithm per problem, chosen from the problem alone. cuBLASLt's heuristic is told the
 * alignment of A, B, C and D (it is not given the pointers), and the algorithm it picks may move
 * with them; two algorithms sum in different orders and give different bits. A weight's or an
 * activation's address moves with the layout (a stage's buffers start at its first layer), so an
 * alignment told as the address has it could give a pipelined run other bits than
 * `--sequential`. The heuristic is told each pointer's alignment capped at 16 bytes
 * (MATMUL_PLAN_ALIGN_MAX): every tensor starts at least 32-byte aligned (device buffers 256,
 * float32 tensors in them 64, their bf16 copies at half the offset), so the capped value is the
 * pointer's alignment within its tensor, the same in every layout. 16 bytes is what the tensor
 * cores' vector and TMA loads need. The emulated cuBLASLt picks an algorithm that sums k in
 * more parts the further the alignments it is told are from 16 bytes (split_parts in
 * tests/gpu/emu/src/cublaslt.cpp), so an uncapped alignment fails the bitwise gates here.
 *
 * Keeping the plan also spares the host the heuristic and five descriptors per product (asked
 * once per problem: the emulator counts the heuristic's calls, tests/gpu/emu/counters.sh). */
#ifndef PT_MATMUL_PLAN_H
#define PT_MATMUL_PLAN_H

#include <stdint.h>

#include "kernels/cuda/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MATMUL_PLAN_ALIGN_MAX 16u

/* One product, column-major: D[m,n] = epilogue(op(A)[m,k] op(B)[k,n] + beta C + bias[m]).
 * C and D share a layout (leading dimension ldd). epilogue: DEFAULT, BIAS, GELU_AUX_BIAS (aux
 * written, leading dimension aux_ld) or DGELU (aux read). The bias is float32 whatever D's
 * type. Fill it after memset to 0, align left to matmul_plan_find, which sets it from the
 * operands: the whole struct is the key. */
typedef struct {
  int32_t epilogue, ta, tb;
  int32_t m, n, k, lda, ldb, ldd;
  int32_t in, out;   /* cudaDataType_t of A and B; of C, D and aux */
  int32_t compute;   /* cublasComputeType_t */
  int32_t bias;      /* 1: a bias vector (BIAS, GELU_AUX_BIAS) */
  int64_t aux_ld;    /* GELU_AUX_BIAS and DGELU; else 0 */
  uint32_t align[4]; /* of A, B, C, D's pointers (C's is D's when beta is 0): bytes, powers of
                        two up to MATMUL_PLAN_ALIGN_MAX */
} matmul_problem;

/* One call's operands, alpha 1: A, B at the problem's `in` type; C read when beta != 0; bias
 * (float32, [m]) and aux as the epilogue needs, else NULL. */
typedef struct {
  const void *A, *B;
  float beta;
  const void *C;
  void *D;
  const float *bias;
  void *aux;
} matmul_operands;

typedef struct matmul_plan matmul_plan;

/* The plan of p with its alignments set from x's pointers (each one's, capped at
 * MATMUL_PLAN_ALIGN_MAX), made at its first call (cuBLASLt's first algorithm, split-K reductions
 * in place excluded: DGELU's D may be its aux input, which such a reduction would overwrite
 * first; x's bias and aux pointers set for the heuristic to see the epilogue whole) and kept
 * until gpu_close. NULL when cuBLASLt has no algorithm for p (an answer kept too): the caller
 * runs another path. */
const matmul_plan *matmul_plan_find(gpu_ctx *g, const matmul_problem *p,
                                    const matmul_operands *x);

/* Queues plan's product on g's stream with x's operands (those it was found with, or others as
 * aligned: the same capped alignments). */
void matmul_plan_run(gpu_ctx *g, const matmul_plan *plan, const matmul_operands *x);

/* Destroys g's plans (gpu_close). */
void matmul_plans_free(gpu_ctx *g);

#ifdef __cplusplus
}
#endif

#endif
