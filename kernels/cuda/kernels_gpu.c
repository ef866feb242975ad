/* The GPU kernel table (kernels_gpu.h): each entry queues ops_cuda.h's kernel on the stream of
 * the table's gpu_ctx. */
#include "kernels/cuda/kernels_gpu.h"

#include "kernels/cuda/cost.h"
#include "kernels/cuda/ops_cuda.h"

static kernels_gpu *state(const pt_kernels *k) { return k->ctx; }
static gpu_ctx *ctx(const pt_kernels *k) { return state(k)->g; }

/* train.precision bf16: the products take bf16 copies of their operands (the table's scratch). */
static cuda_bf16_scratch *bf16(const pt_kernels *k) {
  return k->precision == PT_PRECISION_BF16 ? &state(k)->bf16 : NULL;
}

/* A norm's weight gradient reads x[0..n) from its bf16 copy where the table holds one with
 * x's values (the same floats, 2 bytes an element), else NULL: the floats. */
static const uint16_t *values_of(const pt_kernels *k, const float *x, int64_t n) {
  const cuda_bf16_scratch *s = bf16(k);
  return s ? cuda_bf16_values(s, x, n) : NULL;
}

/* Where a forward kernel writes y[0..n): its place at rest, alone, where the table has one
 * (kernels.h share_bf16_into), else NULL (y itself); once written there, that place is y's
 * activation copy and y's floats are undefined (NaN on the emulator, so a float32 read fails
 * the tests). */
static uint16_t *alone_place(const pt_kernels *k, float *y, int64_t n) {
  return k->share_bf16_into ? cuda_bf16_take_place(&state(k)->bf16, y, n, 1) : NULL;
}

static void alone_written(const pt_kernels *k, float *y, const uint16_t *y16, int64_t n) {
  if (!y16) return;
  cuda_bf16_keep_copy(&state(k)->bf16, y, y16, n);
  cuda_unset_f32(ctx(k), y, n);
}

/* x[0..n)'s activation copy where the table holds one (a tensor the stage left at rest, its
 * floats undefined: kernels.h activation_copies), else NULL: the floats. */
static const uint16_t *copy_at_rest(const pt_kernels *k, const float *x, int64_t n) {
  return bf16(k) ? weight_copies_find(&state(k)->bf16.acts, x, n) : NULL;
}

/* A tensor a kernel reads whole after its last write, as the gated activations' gu [N, 2F], a
 * norm's forward its x or its backward its dy, or writes whole last (the residual rmsnorm's
 * x1, a norm backward's dx: GPT-2's dx1, the Llama's dh, and the rotation's q|k|v): where its
 * place at rest was handed over (kernels.h share_bf16_into; the layer reads its floats, so not
 * alone), the kernel writes its bits there too, kept as its copy; later readers read that copy
 * where the table has one (copy_at_rest). */
static uint16_t *read_place(const pt_kernels *k, const float *x, int64_t n) {
  return k->share_bf16_into ? cuda_bf16_take_place(&state(k)->bf16, x, n, 0) : NULL;
}

static void read_written(const pt_kernels *k, const float *x, const uint16_t *x16, int64_t n) {
  if (x16) cuda_bf16_keep_copy(&state(k)->bf16, x, x16, n);
}

/* 1 when dx[0..n) is the tensor round_when_written was given (kernels.h): the norm's backward
 * writing it rounds it, and says so. */
static int rounds_dx(const pt_kernels *k, const float *dx, int64_t n) {
  kernels_gpu *s = state(k);
  if (!s->round_at || s->round_at != dx || s->round_n != n) return 0;
  s->round_done = 1;
  return 1;
}

/* A new tensor given (x): the bits kept of the last one are no longer din_copy's. */
static int round_when_written(const pt_kernels *k, float *x, int64_t n) {
  kernels_gpu *s = state(k);
  const int done = s->round_done;
  s->round_at = x;
  s->round_n = n;
  s->round_done = 0;
  if (x) s->din_kept = 0;
  return x ? 0 : done;
}

/* The buffer for the bits of a rounded input gradient dx[0..n): the other side than the last
 * one's (which din_copy may have made the copy of the dout that backward reads), or the same
 * when dx is written again by this layer's backward. */
static uint16_t *din_bits(kernels_gpu *s, const float *dx, int64_t n) {
  const int side = s->din_kept && s->din_at == dx ? s->din_side : s->din_side ^ 1;
  if (s->din_cap[side] < n) {
    if (s->din_bits[side]) {
      gpu_sync(s->g); /* products still queued may read the old bits */
      gpu_free(s->din_bits[side]);
    }
    s->din_bits[side] = gpu_alloc(s->g, sizeof(uint16_t) * (size_t)n);
    s->din_cap[side] = n;
  }
  s->din_side = side;
  s->din_at = dx;
  s->din_n = n;
  s->din_kept = 1;
  return s->din_bits[side];
}

static int din_copy(const pt_kernels *k, const float *x, int64_t n) {
  kernels_gpu *s = state(k);
  if (!s->din_kept || s->din_at != x || s->din_n != n) return 0;
  s->din_kept = 0;
  return cuda_bf16_keep_values(&s->bf16, x, s->din_bits[s->din_side], n);
}

/* Where a norm's backward writes dx[0..n)'s bits as it writes dx: dx's place at rest where it
 * was handed over (read_place), else, where the norm rounds dx (the stage's input gradient),
 * the table's own (din_bits); NULL: nowhere. */
typedef struct {
  uint16_t *bits;
  int place, round;
} dx_out;

static dx_out dx_out_of(const pt_kernels *k, float *dx, int64_t n) {
  dx_out o = {read_place(k, dx, n), 0, rounds_dx(k, dx, n)};
  o.place = o.bits != NULL;
  if (!o.bits && o.round) o.bits = din_bits(state(k), dx, n);
  return o;
}

static void dx_written(const pt_kernels *k, float *dx, dx_out o, int64_t n) {
  if (o.place) read_written(k, dx, o.bits, n);
}

static void linear_forward(const pt_kernels *k, float *y, const float *x, const float *W,
                           const float *b, int N, int Ni, int No) {
  if (!bf16(k)) {
    cuda_op_linear_forward(ctx(k), y, x, W, b, N, Ni, No);
    return;
  }
  uint16_t *y16 = alone_place(k, y, (int64_t)N * No);
  cuda_op_linear_forward_bf16(ctx(k), bf16(k), y, y16, x, W, b, N, Ni, No);
  alone_written(k, y, y16, (int64_t)N * No);
}

static void linear_forward_residual(const pt_kernels *k, float *y, const float *res,
                                    const float *x, const float *W, const float *b, int N, int Ni,
                                    int No) {
  if (bf16(k))
    cuda_op_linear_forward_residual_bf16(ctx(k), bf16(k), y, res, x, W, b, N, Ni, No);
  else cuda_op_linear_forward_residual(ctx(k), y, res, x, W, b, N, Ni, No);
}

/* dx's place handed over alone (the attention's dout, which cuDNN reads as bf16 only: the
 * blocks' backward) is written as bf16 only. */
static void linear_backward_input(const pt_kernels *k, float *dx, const float *dy, const float *W,
                                  int N, int Ni, int No, int acc) {
  if (!bf16(k)) {
    cuda_op_linear_backward_input(ctx(k), dx, dy, W, N, Ni, No, acc);
    return;
  }
  uint16_t *dx16 = acc ? NULL : alone_place(k, dx, (int64_t)N * Ni);
  cuda_op_linear_backward_input_bf16(ctx(k), bf16(k), dx, dx16, dy, W, N, Ni, No, acc);
  alone_written(k, dx, dx16, (int64_t)N * Ni);
}

static void linear_backward_weight(const pt_kernels *k, float *dW, float *db, const float *dy,
                                   const float *x, int N, int Ni, int No) {
  if (bf16(k)) cuda_op_linear_backward_weight_bf16(ctx(k), bf16(k), dW, db, dy, x, N, Ni, No);
  else cuda_op_linear_backward_weight(ctx(k), dW, db, dy, x, N, Ni, No);
}

static void linear_forward_gelu(const pt_kernels *k, float *y, float *h, const float *x,
                                const float *W, const float *b, int N, int Ni, int No) {
  const int64_t n = (int64_t)N * No;
  uint16_t *y16 = bf16(k) ? alone_place(k, y, n) : NULL, *h16 = bf16(k) ? alone_place(k, h, n) : NULL;
  cuda_op_linear_forward_gelu(ctx(k), bf16(k), y, y16, h, h16, x, W, b, N, Ni, No);
  alone_written(k, y, y16, n);
  alone_written(k, h, h16, n);
}

/* h's copy at rest where the stage left h there (layers/layer.h read_at_rest, backward_at_rest):
 * read as the bf16 aux, and forgotten (dh rewrites h's range); dh to its place alone. */
static void linear_backward_input_gelu(const pt_kernels *k, float *dh, const float *dy,
                                       const float *W, const float *h, float *scratch, int N,
                                       int Ni, int No) {
  const int64_t n = (int64_t)N * Ni;
  cuda_bf16_scratch *s = bf16(k);
  const uint16_t *h16 = copy_at_rest(k, h, n);
  if (h16) cuda_bf16_forget(s, dh, n);
  uint16_t *dh16 = h16 ? alone_place(k, dh, n) : NULL;
  cuda_op_linear_backward_input_gelu(ctx(k), s, dh, dh16, dy, W, (float *)h, h16, scratch, N, Ni,
                                     No);
  alone_written(k, dh, dh16, n);
}

static void layernorm_forward(const pt_kernels *k, float *y, float *mean, float *rstd,
                              const float *x, const float *w, const float *b, int N, int D,
                              float eps) {
  uint16_t *y16 = alone_place(k, y, (int64_t)N * D), *xbits = read_place(k, x, (int64_t)N * D);
  cuda_op_layernorm_forward(ctx(k), y, y16, mean, rstd, x, xbits, w, b, N, D, eps);
  alone_written(k, y, y16, (int64_t)N * D);
  read_written(k, x, xbits, (int64_t)N * D);
}

static void layernorm_backward_input(const pt_kernels *k, float *dx, const float *dy,
                                     const float *x, const float *w, const float *mean,
                                     const float *rstd, int N, int D, int acc) {
  const int64_t n = (int64_t)N * D;
  uint16_t *dy16 = read_place(k, dy, n);
  const dx_out o = dx_out_of(k, dx, n);
  cuda_op_layernorm_backward_input(ctx(k), dx, o.bits, dy, dy16, x, copy_at_rest(k, x, n), w,
                                   mean, rstd, N, D, acc, o.round);
  read_written(k, dy, dy16, n);
  dx_written(k, dx, o, n);
}

static void layernorm_backward_weight(const pt_kernels *k, float *dw, float *db, const float *dy,
                                      const float *x, const float *mean, const float *rstd, int N,
                                      int D) {
  const int64_t n = (int64_t)N * D;
  cuda_op_layernorm_backward_weight_copies(ctx(k), dw, db, dy, values_of(k, dy, n), x,
                                           values_of(k, x, n), mean, rstd, N, D);
}

/* The fused kernels keep one log-sum-exp per row and need no scratch. */
static int64_t attention_saved_floats(const pt_kernels *k, int B, int T, int d, int H, int KVH) {
  return cuda_op_attention_saved_floats(B, T, d, H, KVH);
}

static int64_t attention_scratch_floats(const pt_kernels *k, int B, int T, int d, int H,
                                        int KVH) {
  return cuda_op_attention_scratch_floats(B, T, d, H, KVH);
}

/* bf16: the library's attention where it takes the shape (attention_bf16.h); the in-house float32
 * kernels otherwise and in fp32/tf32. Both save lse[B,H,T] and need no scratch. */
static void attention_forward(const pt_kernels *k, float *o, float *lse, const float *qkv, int B,
                              int T, int d, int H, int KVH, const int32_t *doc_start,
                              const pt_attention_opts *opts, float *scratch) {
  if (k->precision == PT_PRECISION_BF16)
    cuda_attention_bf16_forward(ctx(k), &state(k)->attention, o, lse, qkv, B, T, d, H, KVH,
                                doc_start, opts);
  else
    cuda_op_attention_forward(ctx(k), o, lse, qkv, B, T, d, H, KVH, doc_start, opts, scratch);
}

/* bf16 tables only: where the library runs the shape (attention_bf16.h). */
static int attention_reads_bf16(const pt_kernels *k, int B, int T, int d, int H, int KVH,
                                const pt_attention_opts *opts) {
  return cuda_attention_bf16_takes(ctx(k), &state(k)->attention, B, T, d, H, KVH, opts);
}

static void attention_backward(const pt_kernels *k, float *dqkv, const float *dout,
                               const float *qkv, const float *o, const float *lse, int B, int T,
                               int d, int H, int KVH, const int32_t *doc_start,
                               const pt_attention_opts *opts, float *scratch) {
  if (k->precision == PT_PRECISION_BF16)
    cuda_attention_bf16_backward(ctx(k), &state(k)->attention, dqkv, dout, qkv, o, lse, B, T, d,
                                 H, KVH, doc_start, opts);
  else
    cuda_op_attention_backward(ctx(k), dqkv, dout, qkv, o, lse, B, T, d, H, KVH, doc_start, opts,
                               scratch);
}

static void rmsnorm_forward(const pt_kernels *k, float *y, float *rstd, const float *x,
                            const float *w, int N, int D, float eps) {
  uint16_t *y16 = alone_place(k, y, (int64_t)N * D);
  cuda_op_rmsnorm_forward(ctx(k), y, y16, rstd, x, w, N, D, eps);
  alone_written(k, y, y16, (int64_t)N * D);
}

static void rmsnorm_backward_input(const pt_kernels *k, float *dx, const float *dy,
                                   const float *x, const float *w, const float *rstd, int N, int D,
                                   int acc) {
  const int64_t n = (int64_t)N * D;
  uint16_t *dy16 = read_place(k, dy, n);
  const dx_out o = dx_out_of(k, dx, n);
  cuda_op_rmsnorm_backward_input(ctx(k), dx, o.bits, dy, dy16, x, copy_at_rest(k, x, n), w, rstd,
                                 N, D, acc, o.round);
  read_written(k, dy, dy16, n);
  dx_written(k, dx, o, n);
}

static void rmsnorm_backward_weight(const pt_kernels *k, float *dw, const float *dy,
                                    const float *x, const float *rstd, int N, int D) {
  const int64_t n = (int64_t)N * D;
  cuda_op_rmsnorm_backward_weight_copies(ctx(k), dw, dy, values_of(k, dy, n), x,
                                         values_of(k, x, n), rstd, N, D);
}

static void layernorm_forward_residual(const pt_kernels *k, float *x1, float *y, float *mean,
                                       float *rstd, const float *a, const float *b,
                                       const float *w, const float *bias, int N, int D,
                                       float eps) {
  cuda_op_layernorm_forward_residual(ctx(k), x1, y, mean, rstd, a, b, w, bias, N, D, eps);
}

static void layernorm_backward_input_residual(const pt_kernels *k, float *dx, const float *dres,
                                              const float *dy, const float *x, const float *w,
                                              const float *mean, const float *rstd, int N,
                                              int D) {
  const int64_t n = (int64_t)N * D;
  uint16_t *dy16 = read_place(k, dy, n);
  const dx_out o = dx_out_of(k, dx, n);
  cuda_op_layernorm_backward_input_residual(ctx(k), dx, o.bits, dres, dy, dy16, x,
                                            copy_at_rest(k, x, n), w, mean, rstd, N, D,
                                            o.round);
  read_written(k, dy, dy16, n);
  dx_written(k, dx, o, n);
}

static void rmsnorm_forward_residual(const pt_kernels *k, float *x1, float *y, float *rstd,
                                     const float *a, const float *b, const float *w, int N, int D,
                                     float eps) {
  const int64_t n = (int64_t)N * D;
  uint16_t *y16 = alone_place(k, y, n), *x1bits = read_place(k, x1, n);
  cuda_op_rmsnorm_forward_residual(ctx(k), x1, x1bits, y, y16, rstd, a, b, w, N, D, eps);
  alone_written(k, y, y16, n);
  read_written(k, x1, x1bits, n);
}

static void rmsnorm_backward_input_residual(const pt_kernels *k, float *dx, const float *dres,
                                            const float *dy, const float *x, const float *w,
                                            const float *rstd, int N, int D) {
  const int64_t n = (int64_t)N * D;
  uint16_t *dy16 = read_place(k, dy, n);
  const dx_out o = dx_out_of(k, dx, n);
  cuda_op_rmsnorm_backward_input_residual(ctx(k), dx, o.bits, dres, dy, dy16, x,
                                          copy_at_rest(k, x, n), w, rstd, N, D,
                                          o.round);
  read_written(k, dy, dy16, n);
  dx_written(k, dx, o, n);
}

/* The rotation writes q|k|v whole last (forward's qkv, which the attention reads as bf16, and
 * backward's dqkv, which the q|k|v products read): its bits go to the place handed over too.
 * Backward's dqkv the attention left as its library's bits (pt_attention_opts.rotated) is read
 * from those bits, never widened to floats first. */
static void rope(const pt_kernels *k, float *qkv, int B, int T, int H, int KVH, int hd,
                 const pt_rope_freqs *f, int dir, const int32_t *positions) {
  const int64_t n = (int64_t)B * T * (H + 2 * KVH) * hd;
  uint16_t *bits = read_place(k, qkv, n);
  const uint16_t *src = cuda_attention_bf16_left(&state(k)->attention, qkv, n);
  cuda_op_rope(ctx(k), qkv, bits, src, B, T, H, KVH, hd, f, dir, positions);
  read_written(k, qkv, bits, n);
}

static void head_rmsnorm_forward(const pt_kernels *k, float *y, float *rstd, const float *x,
                                 const float *wq, const float *wk, int N, int H, int KVH, int hd,
                                 float eps) {
  cuda_op_head_rmsnorm_forward(ctx(k), y, rstd, x, wq, wk, N, H, KVH, hd, eps);
}

static void head_rmsnorm_backward_input(const pt_kernels *k, float *dx, const float *dy,
                                        const float *x, const float *wq, const float *wk,
                                        const float *rstd, int N, int H, int KVH, int hd) {
  cuda_op_head_rmsnorm_backward_input(ctx(k), dx, dy, x, wq, wk, rstd, N, H, KVH, hd);
}

static void head_rmsnorm_backward_weight(const pt_kernels *k, float *dwq, float *dwk,
                                         const float *dy, const float *x, const float *rstd,
                                         int N, int H, int KVH, int hd) {
  cuda_op_head_rmsnorm_backward_weight(ctx(k), dwq, dwk, dy, x, rstd, N, H, KVH, hd);
}

static void swiglu_forward(const pt_kernels *k, float *y, const float *gu, int N, int F) {
  const int64_t n = (int64_t)N * F;
  uint16_t *y16 = alone_place(k, y, n), *gu16 = read_place(k, gu, 2 * n);
  cuda_op_swiglu_forward(ctx(k), y, y16, gu, gu16, N, F);
  alone_written(k, y, y16, n);
  read_written(k, gu, gu16, 2 * n);
}

/* dgu's place handed over alone (layers/layer.h backward_at_rest) is written as bf16 only. */
static void swiglu_backward(const pt_kernels *k, float *dgu, const float *dy, const float *gu,
                            int N, int F) {
  const int64_t n = 2 * (int64_t)N * F;
  uint16_t *dgu16 = alone_place(k, dgu, n);
  cuda_op_swiglu_backward(ctx(k), dgu, dgu16, dy, gu, copy_at_rest(k, gu, n), N, F);
  alone_written(k, dgu, dgu16, n);
}

static void geglu_forward(const pt_kernels *k, float *y, const float *gu, int N, int F) {
  const int64_t n = (int64_t)N * F;
  uint16_t *y16 = alone_place(k, y, n), *gu16 = read_place(k, gu, 2 * n);
  cuda_op_geglu_forward(ctx(k), y, y16, gu, gu16, N, F);
  alone_written(k, y, y16, n);
  read_written(k, gu, gu16, 2 * n);
}

static void geglu_backward(const pt_kernels *k, float *dgu, const float *dy, const float *gu,
                           int N, int F) {
  const int64_t n = 2 * (int64_t)N * F;
  uint16_t *dgu16 = alone_place(k, dgu, n);
  cuda_op_geglu_backward(ctx(k), dgu, dgu16, dy, gu, copy_at_rest(k, gu, n), N, F);
  alone_written(k, dgu, dgu16, n);
}

static void softcap_forward(const pt_kernels *k, float *y, const float *x, float cap, int64_t n) {
  cuda_op_softcap_forward(ctx(k), y, x, cap, n);
}

static void softcap_backward(const pt_kernels *k, float *dx, const float *dy, const float *x,
                             float cap, int64_t n) {
  cuda_op_softcap_backward(ctx(k), dx, dy, x, cap, n);
}

static void add_scalar(const pt_kernels *k, float *y, const float *x, float c, int64_t n) {
  cuda_op_add_scalar(ctx(k), y, x, c, n);
}

static void gelu_forward(const pt_kernels *k, float *y, const float *x, int64_t n) {
  cuda_op_gelu_forward(ctx(k), y, x, n);
}

static void gelu_backward(const pt_kernels *k, float *dx, const float *dy, const float *x,
                          int64_t n) {
  cuda_op_gelu_backward(ctx(k), dx, dy, x, n);
}

static void relu_forward(const pt_kernels *k, float *y, const float *x, int64_t n) {
  cuda_op_relu_forward(ctx(k), y, x, n);
}

static void relu_backward(const pt_kernels *k, float *dx, const float *dy, const float *x,
                          int64_t n) {
  cuda_op_relu_backward(ctx(k), dx, dy, x, n);
}

static void embedding_forward(const pt_kernels *k, float *y, const int32_t *ids,
                              const float *table, int N, int D, int V) {
  cuda_op_embedding_forward(ctx(k), y, ids, table, N, D, V);
}

static void embedding_backward(const pt_kernels *k, float *dtable, const int32_t *ids,
                               const float *dy, int N, int D, int V) {
  kernels_gpu *kg = state(k);
  int64_t need = cuda_op_embedding_scratch_keys(N);
  if (kg->sort_keys_n < need) { /* gpu_free waits for the work still using the old one */
    if (kg->sort_keys) gpu_free(kg->sort_keys);
    kg->sort_keys = gpu_alloc(kg->g, sizeof(uint64_t) * (size_t)need);
    kg->sort_keys_n = need;
  }
  cuda_op_embedding_backward(ctx(k), dtable, ids, dy, N, D, V, kg->sort_keys);
}

static void pos_forward(const pt_kernels *k, float *y, const float *x, const float *pos, int B,
                        int T, int D, const int32_t *positions) {
  cuda_op_pos_forward(ctx(k), y, x, pos, B, T, D, positions);
}

static void pos_backward_weight(const pt_kernels *k, float *dpos, const float *dy, int B, int T,
                                int D, const int32_t *positions) {
  cuda_op_pos_backward_weight(ctx(k), dpos, dy, B, T, D, positions);
}

static void copy(const pt_kernels *k, float *y, const float *x, int64_t n) {
  cuda_op_copy(ctx(k), y, x, n);
}

static void add(const pt_kernels *k, float *y, const float *a, const float *b, int64_t n) {
  cuda_op_add(ctx(k), y, a, b, n);
}

static void add_inplace(const pt_kernels *k, float *y, const float *a, int64_t n) {
  cuda_op_add_inplace(ctx(k), y, a, n);
}

static void colsum_acc(const pt_kernels *k, float *acc, const float *x, int N, int D) {
  cuda_op_colsum_acc(ctx(k), acc, x, N, D);
}

static void scale(const pt_kernels *k, float *x, float s, int64_t n) {
  cuda_scale(ctx(k), x, s, n);
}

static double read_sum(const pt_kernels *k) {
  double v;
  gpu_to_host(ctx(k), &v, state(k)->sum, sizeof v);
  return v;
}

static double loss(const pt_kernels *k, pt_loss_kind kind, const float *y, const void *targets,
                   size_t target_bytes, int N, int F, float s, float *dy) {
  kernels_gpu *kg = state(k);
  loss_check_targets(kind, targets, N, F);
  if (kg->targets_bytes < target_bytes) {
    gpu_free(kg->targets);
    kg->targets = gpu_alloc(kg->g, target_bytes);
    kg->targets_bytes = target_bytes;
  }
  gpu_staged_to_device(kg->g, &kg->staging, kg->targets, targets, target_bytes); /* no wait */
  gpu_cost_note("cudaMemsetAsync", 0.0, 0.0, sizeof(double));
  CUDA_CHECK(cudaMemsetAsync(kg->sum, 0, sizeof(double), kg->g->stream));
  pt_loss_read r = {.round_bf16 = k->loss_rounds_bf16};
  const uint16_t *y16 = copy_at_rest(k, y, (int64_t)N * F);
  if (kind == LOSS_CROSS_ENTROPY)
    cuda_loss_cross_entropy(kg->g, dy, NULL, kg->sum, y, y16, kg->targets, N, F, s, kg->reduce, r);
  else
    cuda_loss_mse(kg->g, dy, NULL, kg->sum, y, y16, kg->targets, N, F, s, kg->reduce, r);
  return read_sum(k);
}

/* Tensor by tensor (u->decay says whether this one decays), so no decay mask. AdamW gets the
 * factors the CPU kernel uses, as they are (u->keep is 1 without decay). */
static void optimizer(const pt_kernels *k, const pt_update *u, float *w, uint16_t *w16,
                      const float *g, float *m, float *v, int64_t n) {
  float wd = u->decay ? (float)u->weight_decay : 0.0f;
  if (u->adam)
    cuda_adamw_step(ctx(k), w, w16, g, m, v, NULL, n, (float)u->beta1, (float)u->beta2,
                    (float)u->eps, u->step, u->inv_sqrt_bc2, u->keep, u->clip);
  else
    cuda_sgd_step(ctx(k), w, w16, g, m, NULL, n, (float)u->lr, (float)u->momentum, wd, u->t == 1,
                  u->clip);
}

/* One launch, a block per piece (ops_cuda.h). */
static void optimizer_chunks(const pt_kernels *k, const pt_update *u, float *w, uint16_t *w16,
                             const float *g, float *m, float *v, const pt_opt_chunk *chunks,
                             int64_t n_chunks) {
  if (u->adam)
    cuda_adamw_chunks(ctx(k), w, w16, g, m, v, chunks, n_chunks, (float)u->beta1,
                      (float)u->beta2, (float)u->eps, u->step, u->inv_sqrt_bc2, u->keep, u->clip);
  else
    cuda_sgd_chunks(ctx(k), w, w16, g, m, chunks, n_chunks, (float)u->lr, (float)u->momentum,
                    (float)u->weight_decay, u->t == 1, u->clip);
}

static double sumsq(const pt_kernels *k, const float *x, int64_t n) {
  cuda_sumsq(ctx(k), state(k)->sum, x, n, state(k)->reduce);
  return read_sum(k);
}

static int all_finite(const pt_kernels *k, const float *x, int64_t n) {
  int bad = 0;
  gpu_cost_note("cudaMemsetAsync", 0.0, 0.0, sizeof(int));
  CUDA_CHECK(cudaMemsetAsync(state(k)->flag, 0, sizeof(int), ctx(k)->stream));
  cuda_check_finite(ctx(k), state(k)->flag, x, n);
  gpu_to_host(ctx(k), &bad, state(k)->flag, sizeof bad);
  return !bad;
}

static void round_bf16(const pt_kernels *k, float *x, int64_t n) { cuda_round_bf16(ctx(k), x, n); }

static void pack_bf16(const pt_kernels *k, uint16_t *dst, const float *src, int64_t n) {
  cuda_pack_bf16(ctx(k), dst, src, n);
}

static void unpack_bf16(const pt_kernels *k, float *dst, const uint16_t *src, int64_t n) {
  cuda_unpack_bf16(ctx(k), dst, src, n);
}

static void weight_copy(const pt_kernels *k, const float *base, const uint16_t *copy, int64_t n) {
  weight_copies_set(&state(k)->bf16.copies, base, copy, n);
}

static void round_pack_bf16(const pt_kernels *k, uint16_t *dst, float *x, int64_t n,
                            int32_t *mark, int32_t value) {
  cuda_round_pack_bf16(ctx(k), dst, x, n, mark, value);
}

/* More ranges than the registry holds: the first ones, the others converted (kernels.h). */
static void activation_copies(const pt_kernels *k, const pt_weight_range *r, int n) {
  cuda_bf16_acts_reset(ctx(k), &state(k)->bf16, r, n);
}

static void unset_f32(const pt_kernels *k, float *x, int64_t n) { cuda_unset_f32(ctx(k), x, n); }

static void share_bf16(const pt_kernels *k, const float *x, int64_t n, int values) {
  cuda_bf16_share(&state(k)->bf16, x, n, NULL, 0, values);
}

static void share_bf16_into(const pt_kernels *k, const float *x, int64_t n, uint16_t *place,
                            int alone) {
  cuda_bf16_share_into(ctx(k), &state(k)->bf16, x, n, place, alone);
}

static int shared_into_done(const pt_kernels *k, const float *x) {
  return cuda_bf16_shared_into_done(&state(k)->bf16, x);
}

static void round_share_bf16(const pt_kernels *k, float *x, int64_t n, int unset) {
  cuda_bf16_round_share(ctx(k), &state(k)->bf16, x, n, unset);
}

/* The device targets buffer (reused by every micro-batch in stream order), grown when needed. */
static void *device_targets(kernels_gpu *kg, size_t bytes) {
  if (kg->targets_bytes < bytes) {
    if (kg->targets) gpu_free(kg->targets);
    kg->targets = gpu_alloc(kg->g, bytes);
    kg->targets_bytes = bytes;
  }
  return kg->targets;
}

static void loss_acc(const pt_kernels *k, pt_loss_kind kind, const float *y, const void *targets,
                     size_t target_bytes, int N, int F, float s, float *dy, uint16_t *dy16,
                     double *sum, int32_t *mark, int32_t value) {
  kernels_gpu *kg = state(k);
  loss_check_targets(kind, targets, N, F);
  void *dev = device_targets(kg, target_bytes);
  gpu_staged_to_device(kg->g, &kg->staging, dev, targets, target_bytes); /* no wait */
  pt_loss_read r = {.round_bf16 = k->loss_rounds_bf16, .mark = mark, .value = value};
  const uint16_t *y16 = copy_at_rest(k, y, (int64_t)N * F); /* the logits at rest alone */
  if (kind == LOSS_CROSS_ENTROPY)
    cuda_loss_cross_entropy(kg->g, dy, dy16, sum, y, y16, dev, N, F, s, kg->reduce, r);
  else
    cuda_loss_mse(kg->g, dy, dy16, sum, y, y16, dev, N, F, s, kg->reduce, r);
}

static void sumsq_spans_into(const pt_kernels *k, double *out, const float *x,
                             const pt_sum_span *spans, int n_spans) {
  cuda_sumsq_spans(ctx(k), &state(k)->sumsq_plan, out, x, spans, n_spans);
}

static void finite_check(const pt_kernels *k, int32_t *mark, int32_t value, const float *x,
                         int64_t n) {
  cuda_finite_mark(ctx(k), mark, value, x, n);
}

/* The fused attention saves row log-sum-exps: they stay float32 at rest (attention_saved_bf16). */
static const pt_kernels gpu_table = {.name = "gpu", PT_KERNELS_ENTRIES(PT_KERNELS_INIT)
                                     .attention_saved_bf16 = 0};
const pt_kernels kernels_gpu_sizing = {.name = "gpu", PT_KERNELS_ENTRIES(PT_KERNELS_INIT)
                                       .attention_saved_bf16 = 0};

void kernels_gpu_open(kernels_gpu *kg, gpu_ctx *g) {
  *kg = (kernels_gpu){.table = gpu_table, .g = g};
  kg->table.ctx = kg;
  kg->sum = gpu_alloc(kg->g, sizeof(double));
  kg->reduce = gpu_alloc(kg->g, sizeof(double) * CUDA_REDUCE_SCRATCH_DOUBLES);
  kg->flag = gpu_alloc(kg->g, sizeof(int));
}

void kernels_gpu_set_precision(kernels_gpu *kg, pt_precision p) {
  static const cublasMath_t math[] = {[PT_PRECISION_FP32] = CUBLAS_PEDANTIC_MATH,
                                      [PT_PRECISION_TF32] = CUBLAS_TF32_TENSOR_OP_MATH,
                                      [PT_PRECISION_BF16] = CUBLAS_DEFAULT_MATH};
  if (p < PT_PRECISION_FP32 || p > PT_PRECISION_BF16) pt_fatal("unknown precision %d", (int)p);
  static const cublasComputeType_t lt[] = {[PT_PRECISION_FP32] = CUBLAS_COMPUTE_32F_PEDANTIC,
                                           [PT_PRECISION_TF32] = CUBLAS_COMPUTE_32F_FAST_TF32,
                                           [PT_PRECISION_BF16] = CUBLAS_COMPUTE_32F};
  CUBLAS_CHECK(cublasSetMathMode(kg->g->blas, math[p]));
  kg->g->lt_compute = lt[p];
  int b = p == PT_PRECISION_BF16;
  kg->table.precision = p;
  kg->table.round_bf16 = b ? round_bf16 : NULL;
  kg->table.pack_bf16 = b ? pack_bf16 : NULL;
  kg->table.unpack_bf16 = b ? unpack_bf16 : NULL;
  kg->table.weight_copy = b ? weight_copy : NULL;
  kg->table.round_pack_bf16 = b ? round_pack_bf16 : NULL;
  kg->table.round_when_written = b ? round_when_written : NULL;
  kg->table.din_copy = b ? din_copy : NULL;
  kg->table.activation_copies = b ? activation_copies : NULL;
  kg->table.unset_f32 = b ? unset_f32 : NULL;
  kg->table.share_bf16 = b ? share_bf16 : NULL;
  kg->table.share_bf16_into = b ? share_bf16_into : NULL;
  kg->table.shared_into_done = b ? shared_into_done : NULL;
  kg->table.round_share_bf16 = b ? round_share_bf16 : NULL;
  kg->table.attention_reads_bf16 = b ? attention_reads_bf16 : NULL;
  kg->table.loss_rounds_bf16 = b;
  cuda_bf16_acts_reset(kg->g, &kg->bf16, NULL, 0);
  kg->attention.copies = &kg->bf16;
}

void kernels_gpu_close(kernels_gpu *kg) {
  cuda_bf16_scratch_free(&kg->bf16);
  cuda_attention_bf16_free(&kg->attention);
  gpu_free(kg->sum);
  gpu_free(kg->reduce);
  gpu_free(kg->flag);
  if (kg->targets) gpu_free(kg->targets);
  if (kg->sort_keys) gpu_free(kg->sort_keys);
  gpu_staging_free(&kg->staging);
  cuda_sumsq_plan_free(&kg->sumsq_plan);
  for (int i = 0; i < 2; i++)
    if (kg->din_bits[i]) gpu_free(kg->din_bits[i]);
  *kg = (kernels_gpu){0};
}
