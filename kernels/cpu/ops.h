/* kernels/cpu/ops.h: the float32 CPU kernels behind the CPU kernel table (kernels_cpu.c).
 * Shapes: N rows (= B*T tokens) of row-major vectors. Matrices use PyTorch nn.Linear layout
 * W[out, in]. "acc" arguments: 1 adds into the destination, 0 overwrites it.
 * GEMMs go to OpenBLAS, except an attention head's products when its dims are a multiple of
 * 32 (register tiles, attention_tile.h); elementwise kernels are plain loops written for GCC's
 * vectoriser.
 * The ops_*.c files are built with reassociation allowed (CMakeLists.txt, PT_CPU_KERNEL_FLAGS);
 * the kernels declared at the end are not, so their results keep the source order's bits. */
#ifndef PT_OPS_H
#define PT_OPS_H

#include <stdint.h>

#include "kernels/kernels.h"

/* y[N,No] = x[N,Ni] * W[No,Ni]^T (+ b[No] when b != NULL) */
void op_linear_forward(float *y, const float *x, const float *W, const float *b, int N, int Ni,
                       int No);
/* y[N,No] = res[N,No] + x * W^T + b: a linear layer feeding a residual add, in one pass. */
void op_linear_forward_residual(float *y, const float *res, const float *x, const float *W,
                                const float *b, int N, int Ni, int No);
/* dx[N,Ni] (=|+=) dy[N,No] * W[No,Ni] */
void op_linear_backward_input(float *dx, const float *dy, const float *W, int N, int Ni, int No,
                              int acc);
/* dW[No,Ni] += dy^T x; db[No] += column sums of dy (db may be NULL) */
void op_linear_backward_weight(float *dW, float *db, const float *dy, const float *x, int N, int Ni,
                               int No);

/* LayerNorm over rows of length D: y = (x - mean) * rstd * w + b; mean/rstd[N] saved. */
void op_layernorm_forward(float *y, float *mean, float *rstd, const float *x, const float *w,
                          const float *b, int N, int D, float eps);
/* dx (=|+=) d/dx given dy; needs x, w, mean, rstd. */
void op_layernorm_backward_input(float *dx, const float *dy, const float *x, const float *w,
                                 const float *mean, const float *rstd, int N, int D, int acc);
/* dw += sum_n dy * xhat; db += sum_n dy. */
void op_layernorm_backward_weight(float *dw, float *db, const float *dy, const float *x,
                                  const float *mean, const float *rstd, int N, int D);

/* GELU, tanh approximation. n elements. */
void op_gelu_forward(float *y, const float *x, int64_t n);
/* dx = dy * gelu'(x); dx may alias dy. */
void op_gelu_backward(float *dx, const float *dy, const float *x, int64_t n);

/* Causal grouped-query attention (kernels.h). qkv[B,T,d + 2*KVH*hd] (q | k | v, query head h in
 * columns h*hd.., its kv head h/(H/KVH)), out o[B,T,d], probs p[B,H,T,T] saved for backward
 * (upper triangle left zero). scratch: op_attention_scratch_floats(T, d, H, KVH) floats. doc_start
 * [B,T] or NULL: query t sees keys doc_start[t] .. t only (kernels.h); opts: window, soft-cap
 * and scale as kernels.h says (NULL: none; soft-capping's backward recomputes its scores from
 * qkv, a dot product per score). */
int64_t op_attention_scratch_floats(int T, int d, int H, int KVH);
void op_attention_forward(float *o, float *p, const float *qkv, int B, int T, int d, int H,
                          int KVH, const int32_t *doc_start, const pt_attention_opts *opts,
                          float *scratch);
/* dqkv = d/dqkv given do[B,T,d]; uses qkv and p from forward. */
void op_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *p,
                           int B, int T, int d, int H, int KVH, const int32_t *doc_start,
                           const pt_attention_opts *opts, float *scratch);

/* ops_llama.c: kernels.h's rmsnorm_*, rope and swiglu_*. */
void op_rmsnorm_forward(float *y, float *rstd, const float *x, const float *w, int N, int D,
                        float eps);
void op_rmsnorm_backward_input(float *dx, const float *dy, const float *x, const float *w,
                               const float *rstd, int N, int D, int acc);
void op_rmsnorm_backward_weight(float *dw, const float *dy, const float *x, const float *rstd,
                                int N, int D);
/* ops_head_norm.c: kernels.h's head_rmsnorm_* */
void op_head_rmsnorm_forward(float *y, float *rstd, const float *x, const float *wq,
                             const float *wk, int N, int H, int KVH, int hd, float eps);
void op_head_rmsnorm_backward_input(float *dx, const float *dy, const float *x, const float *wq,
                                    const float *wk, const float *rstd, int N, int H, int KVH,
                                    int hd);
void op_head_rmsnorm_backward_weight(float *dwq, float *dwk, const float *dy, const float *x,
                                     const float *rstd, int N, int H, int KVH, int hd);
void op_rope(float *qkv, int B, int T, int H, int KVH, int hd, const pt_rope_freqs *f, int dir,
             const int32_t *positions);
void op_swiglu_forward(float *y, const float *gu, int N, int F);
void op_swiglu_backward(float *dgu, const float *dy, const float *gu, int N, int F);
/* ops_gemma.c: kernels.h's geglu_*, softcap_* and add_scalar. */
void op_geglu_forward(float *y, const float *gu, int N, int F);
void op_geglu_backward(float *dgu, const float *dy, const float *gu, int N, int F);
void op_softcap_forward(float *y, const float *x, float cap, int64_t n);
void op_softcap_backward(float *dx, const float *dy, const float *x, float cap, int64_t n);
void op_add_scalar(float *y, const float *x, float c, int64_t n);

void op_add(float *y, const float *a, const float *b, int64_t n);      /* y = a + b */
void op_add_inplace(float *y, const float *a, int64_t n);              /* y += a */
void op_colsum_acc(float *acc, const float *x, int N, int D);          /* acc[D] += sum_n x */

/* --- Without reassociation (their files are not ops_*.c) ------------------------------------ */
/* relu.c: y = x > 0 ? x : 0; dx = x > 0 ? dy : 0 (dx may alias dy or x). */
void op_relu_forward(float *y, const float *x, int64_t n);
void op_relu_backward(float *dx, const float *dy, const float *x, int64_t n);
/* embedding.c: y[n] = table[ids[n]] (an id outside [0, V) ends the job); dtable[ids[n]] +=
 * dy[n] in token order. */
void op_embedding_forward(float *y, const int32_t *ids, const float *table, int N, int D, int V);
void op_embedding_backward(float *dtable, const int32_t *ids, const float *dy, int N, int D);
/* reduce.c: x *= s; the sum of squares in double, in element order (a gradient norm then has
 * the same bits however the model is split); 1 when every element is finite. */
void op_scale(float *x, float s, int64_t n);
double op_sumsq(const float *x, int64_t n);
int op_all_finite(const float *x, int64_t n);
/* optimizer.c: AdamW (m and v) and SGD (m: momentum) over n floats, model/optimizer.h's
 * semantics with u's precomputed factors; w16 NULL or n bf16 given the new weights' bits. */
void op_adamw_step(const pt_update *u, float *w, uint16_t *w16, const float *g, float *m,
                   float *v, int64_t n);
void op_sgd_step(const pt_update *u, float *w, uint16_t *w16, const float *g, float *m,
                 int64_t n);

/* The precision tables' products go PT_PRECISION_BLOCK_ROWS rows at a time (kernels.h): the rows
 * of the block of a product over N rows that starts at row n0. */
static inline int op_block_rows(int N, int n0) {
  return N - n0 < PT_PRECISION_BLOCK_ROWS ? N - n0 : PT_PRECISION_BLOCK_ROWS;
}

#endif
