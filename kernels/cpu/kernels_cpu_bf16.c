/* The CPU's bf16 table with products in hardware (kernels/cpu/kernels_cpu_bf16.h): the linear
 * entries convert their operands to bf16 (rounded as kernels/precision.h's pt_bf16_bits does)
 * and multiply them with float32 accumulation through oneDNN (kernels/cpu/onednn.h). What they
 * compute is what the emulated table computes (float32 sums of products of bf16 values) up to
 * the order of the sums, and but for subnormal bf16 operands, which the hardware takes as zero.
 *
 * The bf16 copies live in scratch of the calling thread, grown as needed and kept for the
 * process, counted by the memory tracker and by partition/memory.c's estimate (which counts
 * them as floats, twice their size here, leaving room for oneDNN's working memory, which
 * kernels/cpu/onednn.c also takes through the tracker): the weight, and the activation
 * operands PT_PRECISION_BLOCK_ROWS rows at a time. dW's product reads dy's block as its
 * transpose (a strided operand: oneDNN's kernels copy it faster than a transposing conversion
 * here). A weight inside a registered weight copy (the weight_copy entry, kernels/weight_copy.h:
 * the model's parameters under bf16) is read there and not converted: the same bits. */
#include "kernels/cpu/kernels_cpu_bf16.h"

#include <string.h>

#include "core/error.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/ops.h"
#include "kernels/weight_copy.h"

enum { SCRATCH_W, SCRATCH_X, SCRATCH_Y, N_SCRATCH };

static _Thread_local void *g_scratch[N_SCRATCH];
static _Thread_local size_t g_cap[N_SCRATCH];

/* pt_bf16_bits without branches, so the loops below vectorise: round to nearest even; a NaN
 * keeps its top half with the quiet bit set (the same bits, kernels/precision.h). */
static inline uint16_t bf16_of(const float *x) {
  uint32_t u;
  memcpy(&u, x, sizeof u);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, quiet = (u >> 16) | 0x40u;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

static const uint16_t *converted(int which, const float *x, int64_t n) {
  uint16_t *r = pt_grow_aligned(&g_scratch[which], &g_cap[which], sizeof(uint16_t) * (size_t)n);
  for (int64_t i = 0; i < n; i++) r[i] = bf16_of(x + i);
  return r;
}

/* The process's weight copies: every thread's products read the one model buffer. */
static pt_weight_copies g_copies;

static void weight_copy(const pt_kernels *k, const float *base, const uint16_t *copy, int64_t n) {
  weight_copies_set(&g_copies, base, copy, n);
}

/* The weight W[No, Ni] as bf16: its registered copy, else converted into scratch. */
static const uint16_t *weight(const float *W, int No, int Ni) {
  int64_t n = (int64_t)No * Ni;
  const uint16_t *copy = weight_copies_find(&g_copies, W, n);
  return copy ? copy : converted(SCRATCH_W, W, n);
}

static void linear_forward(const pt_kernels *k, float *y, const float *x, const float *W,
                           const float *b, int N, int Ni, int No) {
  const uint16_t *w = weight(W, No, Ni);
  for (int n0 = 0; n0 < N; n0 += PT_PRECISION_BLOCK_ROWS) {
    int rows = op_block_rows(N, n0);
    onednn_shape s = {.M = rows, .K = Ni, .N = No, .b_rows_are_n = 1};
    onednn_matmul(&s, y + (int64_t)n0 * No,
                  converted(SCRATCH_X, x + (int64_t)n0 * Ni, (int64_t)rows * Ni), w, b);
  }
}

/* y = res + (x W^T + b): res copied into y, the product added (res may be x itself). */
static void linear_forward_residual(const pt_kernels *k, float *y, const float *res,
                                    const float *x, const float *W, const float *b, int N, int Ni,
                                    int No) {
  const uint16_t *w = weight(W, No, Ni);
  for (int n0 = 0; n0 < N; n0 += PT_PRECISION_BLOCK_ROWS) {
    int rows = op_block_rows(N, n0);
    const uint16_t *xb = converted(SCRATCH_X, x + (int64_t)n0 * Ni, (int64_t)rows * Ni);
    float *yb = y + (int64_t)n0 * No;
    if (yb != res + (int64_t)n0 * No)
      memcpy(yb, res + (int64_t)n0 * No, sizeof(float) * (size_t)rows * No);
    onednn_shape s = {.M = rows, .K = Ni, .N = No, .b_rows_are_n = 1, .acc = 1};
    onednn_matmul(&s, yb, xb, w, b);
  }
}

static void linear_backward_input(const pt_kernels *k, float *dx, const float *dy, const float *W,
                                  int N, int Ni, int No, int acc) {
  const uint16_t *w = weight(W, No, Ni);
  for (int n0 = 0; n0 < N; n0 += PT_PRECISION_BLOCK_ROWS) {
    int rows = op_block_rows(N, n0);
    onednn_shape s = {.M = rows, .K = No, .N = Ni, .acc = acc};
    onednn_matmul(&s, dx + (int64_t)n0 * Ni,
                  converted(SCRATCH_Y, dy + (int64_t)n0 * No, (int64_t)rows * No), w, NULL);
  }
}

/* dW += the blocks' products dy^T x in row order. The bias gradient sums the float32 dy (only
 * the product's inputs are rounded), block by block, in the same row order as one pass. */
static void linear_backward_weight(const pt_kernels *k, float *dW, float *db, const float *dy,
                                   const float *x, int N, int Ni, int No) {
  for (int n0 = 0; n0 < N; n0 += PT_PRECISION_BLOCK_ROWS) {
    int rows = op_block_rows(N, n0);
    const float *dyb = dy + (int64_t)n0 * No;
    const uint16_t *a = converted(SCRATCH_Y, dyb, (int64_t)rows * No);
    if (db) op_colsum_acc(db, dyb, rows, No); /* the block just read: still in cache */
    onednn_shape s = {.M = No, .K = rows, .N = Ni, .a_rows_are_k = 1, .acc = 1};
    onednn_matmul(&s, dW, a, converted(SCRATCH_X, x + (int64_t)n0 * Ni, (int64_t)rows * Ni),
                  NULL);
  }
}

const char *kernels_cpu_bf16_isa(void) { return onednn_bf16_isa(); }

pt_kernels kernels_cpu_bf16_make(const pt_kernels *emulated) {
  pt_kernels t = *emulated;
  t.linear_forward = linear_forward;
  t.linear_forward_residual = linear_forward_residual;
  t.linear_backward_input = linear_backward_input;
  t.linear_backward_weight = linear_backward_weight;
  /* linear_forward_gelu, linear_backward_input_gelu: kernels_cpu's, composing these products */
  t.weight_copy = weight_copy;
  return t;
}
