/* The CPU's tf32 and bf16 tables (kernels.h, kernels_cpu_for): the float32 kernels of ops.h on
 * copies of the products' inputs rounded to the mode's format, which is what a tensor-core
 * product with float32 accumulation computes, up to the order of the sums. The rounded copies
 * live in scratch of the calling thread, grown as needed and kept for the process, counted by
 * the memory tracker and by partition/memory.c's estimate: the weight, and the activation
 * operands PT_PRECISION_BLOCK_ROWS rows at a time (a product of N rows is done in blocks, so
 * the scratch does not grow with the micro-batch).
 *
 * Also the registry of the CPU's precision tables (kernels_cpu_for): bf16 takes the table with
 * products in hardware (kernels/cpu/kernels_cpu_bf16.c, oneDNN) where the build and the CPU
 * have them, this file's emulation otherwise or when PIPETRAIN_CPU_BF16=emulated. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "core/error.h"
#include "kernels/cpu/kernels_cpu_bf16.h"
#include "kernels/cpu/ops.h"
#include "kernels/kernels.h"
#include "kernels/precision.h"

enum { SCRATCH_W, SCRATCH_X, SCRATCH_Y, N_SCRATCH };

static _Thread_local void *g_scratch[N_SCRATCH];
static _Thread_local size_t g_cap[N_SCRATCH];

/* x's n floats rounded as k's precision says, in scratch buffer `which`. */
static const float *rounded(const pt_kernels *k, int which, const float *x, int64_t n) {
  float *r = pt_grow_aligned(&g_scratch[which], &g_cap[which], sizeof(float) * (size_t)n);
  if (k->precision == PT_PRECISION_BF16)
    for (int64_t i = 0; i < n; i++) r[i] = pt_round_bf16(x[i]);
  else
    for (int64_t i = 0; i < n; i++) r[i] = pt_round_tf32(x[i]);
  return r;
}

/* Rows [n0, n0 + rows) of an activation operand of `cols` columns, rounded, in scratch `which`. */
static const float *block(const pt_kernels *k, int which, const float *x, int n0, int rows,
                          int cols) {
  return rounded(k, which, x + (int64_t)n0 * cols, (int64_t)rows * cols);
}

static void linear_forward(const pt_kernels *k, float *y, const float *x, const float *W,
                           const float *b, int N, int Ni, int No) {
  const float *w = rounded(k, SCRATCH_W, W, (int64_t)No * Ni);
  for (int n0 = 0; n0 < N; n0 += PT_PRECISION_BLOCK_ROWS) {
    int rows = op_block_rows(N, n0);
    op_linear_forward(y + (int64_t)n0 * No, block(k, SCRATCH_X, x, n0, rows, Ni), w, b, rows, Ni,
                      No);
  }
}

static void linear_forward_residual(const pt_kernels *k, float *y, const float *res,
                                    const float *x, const float *W, const float *b, int N, int Ni,
                                    int No) {
  const float *w = rounded(k, SCRATCH_W, W, (int64_t)No * Ni);
  for (int n0 = 0; n0 < N; n0 += PT_PRECISION_BLOCK_ROWS) {
    int rows = op_block_rows(N, n0);
    op_linear_forward_residual(y + (int64_t)n0 * No, res + (int64_t)n0 * No,
                               block(k, SCRATCH_X, x, n0, rows, Ni), w, b, rows, Ni, No);
  }
}

static void linear_backward_input(const pt_kernels *k, float *dx, const float *dy, const float *W,
                                  int N, int Ni, int No, int acc) {
  const float *w = rounded(k, SCRATCH_W, W, (int64_t)No * Ni);
  for (int n0 = 0; n0 < N; n0 += PT_PRECISION_BLOCK_ROWS) {
    int rows = op_block_rows(N, n0);
    op_linear_backward_input(dx + (int64_t)n0 * Ni, block(k, SCRATCH_Y, dy, n0, rows, No), w,
                             rows, Ni, No, acc);
  }
}

/* dW += the blocks' products in row order. The bias gradient sums the float32 dy (only the
 * product's inputs are rounded), block by block, in the same row order as one pass. */
static void linear_backward_weight(const pt_kernels *k, float *dW, float *db, const float *dy,
                                   const float *x, int N, int Ni, int No) {
  for (int n0 = 0; n0 < N; n0 += PT_PRECISION_BLOCK_ROWS) {
    int rows = op_block_rows(N, n0);
    const float *a = block(k, SCRATCH_Y, dy, n0, rows, No);
    if (db) op_colsum_acc(db, dy + (int64_t)n0 * No, rows, No); /* the block just read */
    op_linear_backward_weight(dW, NULL, a, block(k, SCRATCH_X, x, n0, rows, Ni), rows, Ni, No);
  }
}

static void round_bf16(const pt_kernels *k, float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] = pt_round_bf16(x[i]);
}

static void pack_bf16(const pt_kernels *k, uint16_t *dst, const float *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = pt_bf16_bits(src[i]);
}

static void unpack_bf16(const pt_kernels *k, float *dst, const uint16_t *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = pt_bf16_float(src[i]);
}

static void round_pack_bf16(const pt_kernels *k, uint16_t *dst, float *x, int64_t n,
                            int32_t *mark, int32_t value) {
  for (int64_t i = 0; i < n; i++) {
    dst[i] = pt_bf16_bits(x[i]);
    x[i] = pt_bf16_float(dst[i]);
  }
  if (mark) k->finite_check(k, mark, value, x, n); /* x still in cache */
}

static pt_kernels make(pt_precision p) {
  pt_kernels t = kernels_cpu;
  t.precision = p;
  t.linear_forward = linear_forward;
  t.linear_forward_residual = linear_forward_residual;
  t.linear_backward_input = linear_backward_input;
  t.linear_backward_weight = linear_backward_weight;
  /* linear_forward_gelu, linear_backward_input_gelu: kernels_cpu's, composing these products */
  if (p == PT_PRECISION_BF16)
    t.round_bf16 = round_bf16, t.pack_bf16 = pack_bf16, t.unpack_bf16 = unpack_bf16,
    t.round_pack_bf16 = round_pack_bf16, t.loss_rounds_bf16 = 1;
  return t;
}

/* bf16's products in hardware (kernels/cpu/kernels_cpu_bf16.c): in a build with oneDNN, on a
 * CPU where oneDNN multiplies bf16; else none. Decided once. */
static const pt_kernels *bf16_hardware(const char **isa) {
  static pt_kernels table;
  static const char *name;
  static int made;
  if (!made) {
#ifdef PT_HAVE_DNNL
    name = kernels_cpu_bf16_isa();
    if (name) table = kernels_cpu_bf16_make(kernels_cpu_for_emulated(PT_PRECISION_BF16));
#endif
    made = 1;
  }
  if (isa) *isa = name;
  return name ? &table : NULL;
}

const pt_kernels *kernels_cpu_bf16_hardware(void) { return bf16_hardware(NULL); }

/* PIPETRAIN_CPU_BF16=emulated: the emulation even where the hardware path exists. Read once. */
static int bf16_forced_emulated(void) {
  static int forced = -1;
  if (forced < 0) forced = pt_env_switch("PIPETRAIN_CPU_BF16", "auto", "emulated");
  return forced;
}

const char *kernels_cpu_bf16_products(void) {
  static char text[64];
  const char *isa;
  if (bf16_forced_emulated() || !bf16_hardware(&isa)) snprintf(text, sizeof text, "emulated");
  else snprintf(text, sizeof text, "oneDNN %s", isa);
  return text;
}

const pt_kernels *kernels_cpu_for_emulated(pt_precision p) {
  static pt_kernels tables[PT_PRECISION_BF16 + 1];
  static int made[PT_PRECISION_BF16 + 1];
  if (p == PT_PRECISION_FP32) return &kernels_cpu;
  if (p != PT_PRECISION_TF32 && p != PT_PRECISION_BF16) pt_fatal("unknown precision %d", (int)p);
  if (!made[p]) tables[p] = make(p), made[p] = 1;
  return &tables[p];
}

const pt_kernels *kernels_cpu_for(pt_precision p) {
  const pt_kernels *hw = p == PT_PRECISION_BF16 && !bf16_forced_emulated() ? bf16_hardware(NULL)
                                                                          : NULL;
  return hw ? hw : kernels_cpu_for_emulated(p);
}
