/* The CPU kernel table (kernels/kernels.h): the op_* kernels of kernels/cpu/ops.h and the CPU
 * loss, on host memory. The CPU needs no state, so every entry ignores k. */
#include <string.h>

#include "kernels/cpu/ops.h"
#include "kernels/kernels.h"
#include "kernels/precision.h"

static void linear_forward(const pt_kernels *k, float *y, const float *x, const float *W,
                           const float *b, int N, int Ni, int No) {
  op_linear_forward(y, x, W, b, N, Ni, No);
}

static void linear_forward_residual(const pt_kernels *k, float *y, const float *res,
                                    const float *x, const float *W, const float *b, int N, int Ni,
                                    int No) {
  op_linear_forward_residual(y, res, x, W, b, N, Ni, No);
}

static void linear_backward_input(const pt_kernels *k, float *dx, const float *dy, const float *W,
                                  int N, int Ni, int No, int acc) {
  op_linear_backward_input(dx, dy, W, N, Ni, No, acc);
}

static void linear_backward_weight(const pt_kernels *k, float *dW, float *db, const float *dy,
                                   const float *x, int N, int Ni, int No) {
  op_linear_backward_weight(dW, db, dy, x, N, Ni, No);
}

/* The fused entries as the separate calls they stand for, made through k: a table built from
 * this one with products of its own (kernels_cpu_precision.c, kernels_cpu_bf16.c) composes
 * those, bit for bit the calls a layer would make itself; the timing table (kernels_timed.c)
 * calls these with itself as k to time the two calls apart. */
static void linear_forward_gelu(const pt_kernels *k, float *y, float *h, const float *x,
                                const float *W, const float *b, int N, int Ni, int No) {
  k->linear_forward(k, h, x, W, b, N, Ni, No);
  k->gelu_forward(k, y, h, (int64_t)N * No);
}

static void linear_backward_input_gelu(const pt_kernels *k, float *dh, const float *dy,
                                       const float *W, const float *h, float *scratch, int N,
                                       int Ni, int No) {
  k->linear_backward_input(k, scratch, dy, W, N, Ni, No, 0);
  k->gelu_backward(k, dh, scratch, h, (int64_t)N * Ni);
}

static void layernorm_forward(const pt_kernels *k, float *y, float *mean, float *rstd,
                              const float *x, const float *w, const float *b, int N, int D,
                              float eps) {
  op_layernorm_forward(y, mean, rstd, x, w, b, N, D, eps);
}

static void layernorm_backward_input(const pt_kernels *k, float *dx, const float *dy,
                                     const float *x, const float *w, const float *mean,
                                     const float *rstd, int N, int D, int acc) {
  op_layernorm_backward_input(dx, dy, x, w, mean, rstd, N, D, acc);
}

static void layernorm_backward_weight(const pt_kernels *k, float *dw, float *db, const float *dy,
                                      const float *x, const float *mean, const float *rstd, int N,
                                      int D) {
  op_layernorm_backward_weight(dw, db, dy, x, mean, rstd, N, D);
}

/* The probabilities [B,H,T,T]: backward reads them instead of recomputing. */
static int64_t attention_saved_floats(const pt_kernels *k, int B, int T, int d, int H, int KVH) {
  return (int64_t)B * H * T * (int64_t)T;
}

/* One head's T x T score block and a sequence's q, k, v rows packed at a time: the CPU reuses
 * them across heads and sequences. */
static int64_t attention_scratch_floats(const pt_kernels *k, int B, int T, int d, int H,
                                        int KVH) {
  return op_attention_scratch_floats(T, d, H, KVH);
}

static void attention_forward(const pt_kernels *k, float *o, float *p, const float *qkv, int B,
                              int T, int d, int H, int KVH, const int32_t *doc_start,
                              const pt_attention_opts *opts, float *scratch) {
  op_attention_forward(o, p, qkv, B, T, d, H, KVH, doc_start, opts, scratch);
}

static void attention_backward(const pt_kernels *k, float *dqkv, const float *dout,
                               const float *qkv, const float *o, const float *p, int B, int T,
                               int d, int H, int KVH, const int32_t *doc_start,
                               const pt_attention_opts *opts, float *scratch) {
  (void)o; /* the saved probabilities give everything */
  op_attention_backward(dqkv, dout, qkv, p, B, T, d, H, KVH, doc_start, opts, scratch);
}

static void rmsnorm_forward(const pt_kernels *k, float *y, float *rstd, const float *x,
                            const float *w, int N, int D, float eps) {
  op_rmsnorm_forward(y, rstd, x, w, N, D, eps);
}

static void rmsnorm_backward_input(const pt_kernels *k, float *dx, const float *dy,
                                   const float *x, const float *w, const float *rstd, int N, int D,
                                   int acc) {
  op_rmsnorm_backward_input(dx, dy, x, w, rstd, N, D, acc);
}

static void rmsnorm_backward_weight(const pt_kernels *k, float *dw, const float *dy,
                                    const float *x, const float *rstd, int N, int D) {
  op_rmsnorm_backward_weight(dw, dy, x, rstd, N, D);
}

static void rope(const pt_kernels *k, float *qkv, int B, int T, int H, int KVH, int hd,
                 const pt_rope_freqs *f, int dir, const int32_t *positions) {
  op_rope(qkv, B, T, H, KVH, hd, f, dir, positions);
}

static void head_rmsnorm_forward(const pt_kernels *k, float *y, float *rstd, const float *x,
                                 const float *wq, const float *wk, int N, int H, int KVH, int hd,
                                 float eps) {
  op_head_rmsnorm_forward(y, rstd, x, wq, wk, N, H, KVH, hd, eps);
}

static void head_rmsnorm_backward_input(const pt_kernels *k, float *dx, const float *dy,
                                        const float *x, const float *wq, const float *wk,
                                        const float *rstd, int N, int H, int KVH, int hd) {
  op_head_rmsnorm_backward_input(dx, dy, x, wq, wk, rstd, N, H, KVH, hd);
}

static void head_rmsnorm_backward_weight(const pt_kernels *k, float *dwq, float *dwk,
                                         const float *dy, const float *x, const float *rstd,
                                         int N, int H, int KVH, int hd) {
  op_head_rmsnorm_backward_weight(dwq, dwk, dy, x, rstd, N, H, KVH, hd);
}

static void swiglu_forward(const pt_kernels *k, float *y, const float *gu, int N, int F) {
  op_swiglu_forward(y, gu, N, F);
}

static void swiglu_backward(const pt_kernels *k, float *dgu, const float *dy, const float *gu,
                            int N, int F) {
  op_swiglu_backward(dgu, dy, gu, N, F);
}

static void geglu_forward(const pt_kernels *k, float *y, const float *gu, int N, int F) {
  op_geglu_forward(y, gu, N, F);
}

static void geglu_backward(const pt_kernels *k, float *dgu, const float *dy, const float *gu,
                           int N, int F) {
  op_geglu_backward(dgu, dy, gu, N, F);
}

static void softcap_forward(const pt_kernels *k, float *y, const float *x, float cap, int64_t n) {
  op_softcap_forward(y, x, cap, n);
}

static void softcap_backward(const pt_kernels *k, float *dx, const float *dy, const float *x,
                             float cap, int64_t n) {
  op_softcap_backward(dx, dy, x, cap, n);
}

static void add_scalar(const pt_kernels *k, float *y, const float *x, float c, int64_t n) {
  op_add_scalar(y, x, c, n);
}

static void gelu_forward(const pt_kernels *k, float *y, const float *x, int64_t n) {
  op_gelu_forward(y, x, n);
}

static void gelu_backward(const pt_kernels *k, float *dx, const float *dy, const float *x,
                          int64_t n) {
  op_gelu_backward(dx, dy, x, n);
}

static void relu_forward(const pt_kernels *k, float *y, const float *x, int64_t n) {
  op_relu_forward(y, x, n);
}

static void relu_backward(const pt_kernels *k, float *dx, const float *dy, const float *x,
                          int64_t n) {
  op_relu_backward(dx, dy, x, n);
}

static void embedding_forward(const pt_kernels *k, float *y, const int32_t *ids,
                              const float *table, int N, int D, int V) {
  op_embedding_forward(y, ids, table, N, D, V);
}

static void embedding_backward(const pt_kernels *k, float *dtable, const int32_t *ids,
                               const float *dy, int N, int D, int V) {
  op_embedding_backward(dtable, ids, dy, N, D);
}

/* Sequence by sequence, so the positions' gradient adds the batch in order. */
static void pos_forward(const pt_kernels *k, float *y, const float *x, const float *pos, int B,
                        int T, int D, const int32_t *positions) {
  int64_t TD = (int64_t)T * D;
  if (positions) {
    for (int64_t n = 0; n < (int64_t)B * T; n++)
      op_add(y + n * D, x + n * D, pos + (int64_t)positions[n] * D, D);
    return;
  }
  for (int b = 0; b < B; b++) op_add(y + b * TD, x + b * TD, pos, TD);
}

static void pos_backward_weight(const pt_kernels *k, float *dpos, const float *dy, int B, int T,
                                int D, const int32_t *positions) {
  int64_t TD = (int64_t)T * D;
  if (positions) { /* (b, t) order: what the GPU's per-position loop adds */
    for (int64_t n = 0; n < (int64_t)B * T; n++)
      op_add_inplace(dpos + (int64_t)positions[n] * D, dy + n * D, D);
    return;
  }
  for (int b = 0; b < B; b++) op_add_inplace(dpos, dy + b * TD, TD);
}

static void copy(const pt_kernels *k, float *y, const float *x, int64_t n) {
  if (y != x) memcpy(y, x, sizeof(float) * (size_t)n);
}

static void add(const pt_kernels *k, float *y, const float *a, const float *b, int64_t n) {
  op_add(y, a, b, n);
}

static void add_inplace(const pt_kernels *k, float *y, const float *a, int64_t n) {
  op_add_inplace(y, a, n);
}

static void colsum_acc(const pt_kernels *k, float *acc, const float *x, int N, int D) {
  op_colsum_acc(acc, x, N, D);
}

static void scale(const pt_kernels *k, float *x, float s, int64_t n) { op_scale(x, s, n); }

static double loss(const pt_kernels *k, pt_loss_kind kind, const float *y, const void *targets,
                   size_t target_bytes, int N, int F, float s, float *dy) {
  pt_loss_read r = {.round_bf16 = k->loss_rounds_bf16};
  return loss_forward_backward_read(kind, y, targets, N, F, s, dy, &r);
}

static void optimizer(const pt_kernels *k, const pt_update *u, float *w, uint16_t *w16,
                      const float *g, float *m, float *v, int64_t n) {
  if (u->adam) op_adamw_step(u, w, w16, g, m, v, n);
  else op_sgd_step(u, w, w16, g, m, n);
}

/* Piece by piece, each as the per-tensor entry with its tensor's factors: the same float
 * operations on every element as the tensor-by-tensor loop, so the same bits. */
static void optimizer_chunks(const pt_kernels *k, const pt_update *u, float *w, uint16_t *w16,
                             const float *g, float *m, float *v, const pt_opt_chunk *chunks,
                             int64_t n_chunks) {
  for (int64_t c = 0; c < n_chunks; c++) {
    const int64_t o = chunks[c].offset;
    pt_update r = *u;
    r.decay = chunks[c].decay != 0;
    if (!r.decay) r.keep = 1.0f;
    optimizer(k, &r, w + o, w16 ? w16 + o : NULL, g + o, m + o, v ? v + o : NULL,
              chunks[c].n);
  }
}

static double sumsq(const pt_kernels *k, const float *x, int64_t n) { return op_sumsq(x, n); }

static int all_finite(const pt_kernels *k, const float *x, int64_t n) {
  return op_all_finite(x, n);
}

/* The step statistics' forms: host memory, so the value is there when they return; the same
 * arithmetic as loss and sumsq, so the bits do not change. */
static void loss_acc(const pt_kernels *k, pt_loss_kind kind, const float *y, const void *targets,
                     size_t target_bytes, int N, int F, float s, float *dy, uint16_t *dy16,
                     double *sum, int32_t *mark, int32_t value) {
  pt_loss_read r = {.round_bf16 = k->loss_rounds_bf16, .mark = mark, .value = value};
  *sum += loss_forward_backward_read(kind, y, targets, N, F, s, dy, &r);
  for (int64_t i = 0; dy16 && i < (int64_t)N * F; i++) dy16[i] = pt_bf16_bits(dy[i]); /* dy: scratch */
}

static void sumsq_spans_into(const pt_kernels *k, double *out, const float *x,
                             const pt_sum_span *spans, int n_spans) {
  for (int j = 0; j < n_spans; j++) out[j] = op_sumsq(x + spans[j].offset, spans[j].n);
}

static void finite_check(const pt_kernels *k, int32_t *mark, int32_t value, const float *x,
                         int64_t n) {
  if (value > *mark && !op_all_finite(x, n)) *mark = value;
}

/* The fused residual norms row by row, each row through the separate kernels (N = 1): the same
 * float operations in the same order as the separate calls over all rows, so the same bits,
 * with the row still in cache between the two. */
static void layernorm_forward_residual(const pt_kernels *k, float *x1, float *y, float *mean,
                                       float *rstd, const float *a, const float *b,
                                       const float *w, const float *bias, int N, int D,
                                       float eps) {
  for (int64_t n = 0; n < N; n++) {
    float *xr = x1 + n * D;
    op_add(xr, a + n * D, b + n * D, D);
    op_layernorm_forward(y + n * D, mean + n, rstd + n, xr, w, bias, 1, D, eps);
  }
}

static void layernorm_backward_input_residual(const pt_kernels *k, float *dx, const float *dres,
                                              const float *dy, const float *x, const float *w,
                                              const float *mean, const float *rstd, int N,
                                              int D) {
  for (int64_t n = 0; n < N; n++) {
    copy(k, dx + n * D, dres + n * D, D);
    op_layernorm_backward_input(dx + n * D, dy + n * D, x + n * D, w, mean + n, rstd + n, 1, D,
                                1);
  }
}

static void rmsnorm_forward_residual(const pt_kernels *k, float *x1, float *y, float *rstd,
                                     const float *a, const float *b, const float *w, int N, int D,
                                     float eps) {
  for (int64_t n = 0; n < N; n++) {
    float *xr = x1 + n * D;
    op_add(xr, a + n * D, b + n * D, D);
    op_rmsnorm_forward(y + n * D, rstd + n, xr, w, 1, D, eps);
  }
}

static void rmsnorm_backward_input_residual(const pt_kernels *k, float *dx, const float *dres,
                                            const float *dy, const float *x, const float *w,
                                            const float *rstd, int N, int D) {
  for (int64_t n = 0; n < N; n++) {
    copy(k, dx + n * D, dres + n * D, D);
    op_rmsnorm_backward_input(dx + n * D, dy + n * D, x + n * D, w, rstd + n, 1, D, 1);
  }
}

/* The probabilities the attention saves may be kept as bf16 under train.precision bf16. */
const pt_kernels kernels_cpu = {.name = "cpu", PT_KERNELS_ENTRIES(PT_KERNELS_INIT)
                                .attention_saved_bf16 = 1};
