/* The timing kernel table (kernels_timed.h): each entry forwards to the inner table and tallies
 * its time and work. */
#include "kernels/kernels_timed.h"

#include <string.h>

#include "core/clock.h"

static pt_kernels_timed *timed(const pt_kernels *k) {
  return (pt_kernels_timed *)k; /* the table is the first member of a (mutable) pt_kernels_timed */
}
#define IN(k) (timed(k)->inner)

static void tally(const pt_kernels *k, pt_kernel_entry e, pt_kernel_category c, double t0,
                  double work) {
  pt_kernel_tally *s = &timed(k)->entry[e];
  s->seconds += pt_now_s() - t0;
  s->work += work;
  s->calls++;
  s->category = c;
}

/* One entry without a result: time the inner entry's call with the same arguments. */
#define TIMED(entry, cat, work, ...)                \
  double t0 = pt_now_s();                           \
  IN(k)->entry(IN(k), __VA_ARGS__);                 \
  tally(k, PT_KT_##entry, PT_KCAT_##cat, t0, work)
/* The same for an entry that returns a value (type T). */
#define TIMED_RETURN(T, entry, cat, work, ...)      \
  double t0 = pt_now_s();                           \
  T r = IN(k)->entry(IN(k), __VA_ARGS__);           \
  tally(k, PT_KT_##entry, PT_KCAT_##cat, t0, work); \
  return r

#define F4 4.0 /* bytes per float */

static double gemm(int N, int Ni, int No) { return 2.0 * N * Ni * (double)No; }
/* QK^T and PV over the pairs attended (kernels.h, pt_attention_pairs): 4 FLOPs a pair and dim. */
static double attention(int B, int T, int d, const pt_attention_opts *a) {
  return 4.0 * B * pt_attention_pairs(T, a) * d;
}

static void linear_forward(const pt_kernels *k, float *y, const float *x, const float *W,
                           const float *b, int N, int Ni, int No) {
  TIMED(linear_forward, GEMM, gemm(N, Ni, No), y, x, W, b, N, Ni, No);
}
static void linear_forward_residual(const pt_kernels *k, float *y, const float *res,
                                    const float *x, const float *W, const float *b, int N, int Ni,
                                    int No) {
  TIMED(linear_forward_residual, GEMM, gemm(N, Ni, No), y, res, x, W, b, N, Ni, No);
}
static void linear_backward_input(const pt_kernels *k, float *dx, const float *dy, const float *W,
                                  int N, int Ni, int No, int acc) {
  TIMED(linear_backward_input, GEMM, gemm(N, Ni, No), dx, dy, W, N, Ni, No, acc);
}
static void linear_backward_weight(const pt_kernels *k, float *dW, float *db, const float *dy,
                                   const float *x, int N, int Ni, int No) {
  TIMED(linear_backward_weight, GEMM, gemm(N, Ni, No), dW, db, dy, x, N, Ni, No);
}

/* The fused entries: kernels_cpu's (which the CPU's precision tables keep) compose two calls
 * through their k, so they run with this table as k and each call is timed in its category; a
 * fused call (the GPU's) is timed whole, as a product. */
static void linear_forward_gelu(const pt_kernels *k, float *y, float *h, const float *x,
                                const float *W, const float *b, int N, int Ni, int No) {
  if (IN(k)->linear_forward_gelu == kernels_cpu.linear_forward_gelu) {
    kernels_cpu.linear_forward_gelu(k, y, h, x, W, b, N, Ni, No);
    return;
  }
  TIMED(linear_forward_gelu, GEMM, gemm(N, Ni, No), y, h, x, W, b, N, Ni, No);
}
static void linear_backward_input_gelu(const pt_kernels *k, float *dh, const float *dy,
                                       const float *W, const float *h, float *scratch, int N,
                                       int Ni, int No) {
  if (IN(k)->linear_backward_input_gelu == kernels_cpu.linear_backward_input_gelu) {
    kernels_cpu.linear_backward_input_gelu(k, dh, dy, W, h, scratch, N, Ni, No);
    return;
  }
  TIMED(linear_backward_input_gelu, GEMM, gemm(N, Ni, No), dh, dy, W, h, scratch, N, Ni, No);
}

static void layernorm_forward(const pt_kernels *k, float *y, float *mean, float *rstd,
                              const float *x, const float *w, const float *b, int N, int D,
                              float eps) {
  TIMED(layernorm_forward, NORM, F4 * (2.0 * N * D + 2.0 * N + 2.0 * D), y, mean, rstd, x, w, b,
        N, D, eps);
}
static void layernorm_backward_input(const pt_kernels *k, float *dx, const float *dy,
                                     const float *x, const float *w, const float *mean,
                                     const float *rstd, int N, int D, int acc) {
  TIMED(layernorm_backward_input, NORM, F4 * ((3.0 + acc) * N * D + D + 2.0 * N), dx, dy, x, w,
        mean, rstd, N, D, acc);
}
static void layernorm_backward_weight(const pt_kernels *k, float *dw, float *db, const float *dy,
                                      const float *x, const float *mean, const float *rstd, int N,
                                      int D) {
  TIMED(layernorm_backward_weight, NORM, F4 * (2.0 * N * D + 2.0 * N + 4.0 * D), dw, db, dy, x,
        mean, rstd, N, D);
}

/* The residual norms: the plain entry's bytes, plus the residual's second operand read and the
 * stream written (forward), the residual gradient read (backward). */
static void layernorm_forward_residual(const pt_kernels *k, float *x1, float *y, float *mean,
                                       float *rstd, const float *a, const float *b,
                                       const float *w, const float *bias, int N, int D,
                                       float eps) {
  TIMED(layernorm_forward_residual, NORM, F4 * (4.0 * N * D + 2.0 * N + 2.0 * D), x1, y, mean,
        rstd, a, b, w, bias, N, D, eps);
}
static void layernorm_backward_input_residual(const pt_kernels *k, float *dx, const float *dres,
                                              const float *dy, const float *x, const float *w,
                                              const float *mean, const float *rstd, int N,
                                              int D) {
  TIMED(layernorm_backward_input_residual, NORM, F4 * (4.0 * N * D + D + 2.0 * N), dx, dres, dy,
        x, w, mean, rstd, N, D);
}
static void rmsnorm_forward_residual(const pt_kernels *k, float *x1, float *y, float *rstd,
                                     const float *a, const float *b, const float *w, int N, int D,
                                     float eps) {
  TIMED(rmsnorm_forward_residual, NORM, F4 * (4.0 * N * D + N + D), x1, y, rstd, a, b, w, N, D,
        eps);
}
static void rmsnorm_backward_input_residual(const pt_kernels *k, float *dx, const float *dres,
                                            const float *dy, const float *x, const float *w,
                                            const float *rstd, int N, int D) {
  TIMED(rmsnorm_backward_input_residual, NORM, F4 * (4.0 * N * D + D + N), dx, dres, dy, x, w,
        rstd, N, D);
}

/* Sizes only: forwarded, not tallied. */
static int64_t attention_saved_floats(const pt_kernels *k, int B, int T, int d, int H, int KVH) {
  return IN(k)->attention_saved_floats(IN(k), B, T, d, H, KVH);
}
static int64_t attention_scratch_floats(const pt_kernels *k, int B, int T, int d, int H,
                                        int KVH) {
  return IN(k)->attention_scratch_floats(IN(k), B, T, d, H, KVH);
}
static void attention_forward(const pt_kernels *k, float *o, float *saved, const float *qkv,
                              int B, int T, int d, int H, int KVH, const int32_t *doc_start,
                              const pt_attention_opts *opts, float *scratch) {
  TIMED(attention_forward, ATTENTION, attention(B, T, d, opts), o, saved, qkv, B, T, d, H, KVH,
        doc_start, opts, scratch);
}
static void attention_backward(const pt_kernels *k, float *dqkv, const float *dout,
                               const float *qkv, const float *o, const float *saved, int B, int T,
                               int d, int H, int KVH, const int32_t *doc_start,
                               const pt_attention_opts *opts, float *scratch) {
  TIMED(attention_backward, ATTENTION, 2.0 * attention(B, T, d, opts), dqkv, dout, qkv, o, saved,
        B, T, d, H, KVH, doc_start, opts, scratch);
}

static void rmsnorm_forward(const pt_kernels *k, float *y, float *rstd, const float *x,
                            const float *w, int N, int D, float eps) {
  TIMED(rmsnorm_forward, NORM, F4 * (2.0 * N * D + N + D), y, rstd, x, w, N, D, eps);
}
static void rmsnorm_backward_input(const pt_kernels *k, float *dx, const float *dy, const float *x,
                                   const float *w, const float *rstd, int N, int D, int acc) {
  TIMED(rmsnorm_backward_input, NORM, F4 * ((3.0 + acc) * N * D + D + N), dx, dy, x, w, rstd, N,
        D, acc);
}
static void rmsnorm_backward_weight(const pt_kernels *k, float *dw, const float *dy,
                                    const float *x, const float *rstd, int N, int D) {
  TIMED(rmsnorm_backward_weight, NORM, F4 * (2.0 * N * D + N + 2.0 * D), dw, dy, x, rstd, N, D);
}
static void rope(const pt_kernels *k, float *qkv, int B, int T, int H, int KVH, int hd,
                 const pt_rope_freqs *f, int dir, const int32_t *positions) {
  TIMED(rope, ACTIVATION, F4 * 2.0 * B * T * (H + KVH) * (double)hd, qkv, B, T, H, KVH, hd, f,
        dir, positions);
}
static void head_rmsnorm_forward(const pt_kernels *k, float *y, float *rstd, const float *x,
                                 const float *wq, const float *wk, int N, int H, int KVH, int hd,
                                 float eps) {
  TIMED(head_rmsnorm_forward, NORM, F4 * (2.0 * N * (H + 2 * KVH) * (double)hd + N * (H + KVH)),
        y, rstd, x, wq, wk, N, H, KVH, hd, eps);
}
static void head_rmsnorm_backward_input(const pt_kernels *k, float *dx, const float *dy,
                                        const float *x, const float *wq, const float *wk,
                                        const float *rstd, int N, int H, int KVH, int hd) {
  TIMED(head_rmsnorm_backward_input, NORM, F4 * 3.0 * N * (H + 2 * KVH) * (double)hd, dx, dy, x,
        wq, wk, rstd, N, H, KVH, hd);
}
static void head_rmsnorm_backward_weight(const pt_kernels *k, float *dwq, float *dwk,
                                         const float *dy, const float *x, const float *rstd,
                                         int N, int H, int KVH, int hd) {
  TIMED(head_rmsnorm_backward_weight, NORM, F4 * 2.0 * N * (H + KVH) * (double)hd, dwq, dwk, dy,
        x, rstd, N, H, KVH, hd);
}
static void swiglu_forward(const pt_kernels *k, float *y, const float *gu, int N, int F) {
  TIMED(swiglu_forward, ACTIVATION, F4 * 3.0 * N * F, y, gu, N, F);
}
static void swiglu_backward(const pt_kernels *k, float *dgu, const float *dy, const float *gu,
                            int N, int F) {
  TIMED(swiglu_backward, ACTIVATION, F4 * 5.0 * N * F, dgu, dy, gu, N, F);
}
static void geglu_forward(const pt_kernels *k, float *y, const float *gu, int N, int F) {
  TIMED(geglu_forward, ACTIVATION, F4 * 3.0 * N * F, y, gu, N, F);
}
static void geglu_backward(const pt_kernels *k, float *dgu, const float *dy, const float *gu,
                           int N, int F) {
  TIMED(geglu_backward, ACTIVATION, F4 * 5.0 * N * F, dgu, dy, gu, N, F);
}
static void softcap_forward(const pt_kernels *k, float *y, const float *x, float cap, int64_t n) {
  TIMED(softcap_forward, ACTIVATION, F4 * 2.0 * n, y, x, cap, n);
}
static void softcap_backward(const pt_kernels *k, float *dx, const float *dy, const float *x,
                             float cap, int64_t n) {
  TIMED(softcap_backward, ACTIVATION, F4 * 3.0 * n, dx, dy, x, cap, n);
}
static void add_scalar(const pt_kernels *k, float *y, const float *x, float c, int64_t n) {
  TIMED(add_scalar, OTHER, F4 * 2.0 * n, y, x, c, n);
}
static void gelu_forward(const pt_kernels *k, float *y, const float *x, int64_t n) {
  TIMED(gelu_forward, ACTIVATION, F4 * 2.0 * n, y, x, n);
}
static void gelu_backward(const pt_kernels *k, float *dx, const float *dy, const float *x,
                          int64_t n) {
  TIMED(gelu_backward, ACTIVATION, F4 * 3.0 * n, dx, dy, x, n);
}
static void relu_forward(const pt_kernels *k, float *y, const float *x, int64_t n) {
  TIMED(relu_forward, ACTIVATION, F4 * 2.0 * n, y, x, n);
}
static void relu_backward(const pt_kernels *k, float *dx, const float *dy, const float *x,
                          int64_t n) {
  TIMED(relu_backward, ACTIVATION, F4 * 3.0 * n, dx, dy, x, n);
}

static void embedding_forward(const pt_kernels *k, float *y, const int32_t *ids,
                              const float *table, int N, int D, int V) {
  TIMED(embedding_forward, OTHER, F4 * (2.0 * N * D + N), y, ids, table, N, D, V);
}
static void embedding_backward(const pt_kernels *k, float *dtable, const int32_t *ids,
                               const float *dy, int N, int D, int V) {
  TIMED(embedding_backward, OTHER, F4 * (3.0 * N * D + N), dtable, ids, dy, N, D, V);
}
static void pos_forward(const pt_kernels *k, float *y, const float *x, const float *pos, int B,
                        int T, int D, const int32_t *positions) {
  TIMED(pos_forward, OTHER, F4 * (2.0 * B * T * D + (double)T * D), y, x, pos, B, T, D, positions);
}
static void pos_backward_weight(const pt_kernels *k, float *dpos, const float *dy, int B, int T,
                                int D, const int32_t *positions) {
  TIMED(pos_backward_weight, OTHER, F4 * ((double)B * T * D + 2.0 * T * D), dpos, dy, B, T, D,
        positions);
}
static void copy(const pt_kernels *k, float *y, const float *x, int64_t n) {
  TIMED(copy, OTHER, F4 * 2.0 * n, y, x, n);
}
static void add(const pt_kernels *k, float *y, const float *a, const float *b, int64_t n) {
  TIMED(add, OTHER, F4 * 3.0 * n, y, a, b, n);
}
static void add_inplace(const pt_kernels *k, float *y, const float *a, int64_t n) {
  TIMED(add_inplace, OTHER, F4 * 3.0 * n, y, a, n);
}
static void colsum_acc(const pt_kernels *k, float *acc, const float *x, int N, int D) {
  TIMED(colsum_acc, OTHER, F4 * ((double)N * D + 2.0 * D), acc, x, N, D);
}
static void scale(const pt_kernels *k, float *x, float s, int64_t n) {
  TIMED(scale, OTHER, F4 * 2.0 * n, x, s, n);
}

static double loss_bytes(size_t target_bytes, int N, int F) {
  return F4 * 2.0 * N * F + (double)target_bytes;
}
static double loss(const pt_kernels *k, pt_loss_kind kind, const float *y, const void *targets,
                   size_t target_bytes, int N, int F, float scale, float *dy) {
  TIMED_RETURN(double, loss, LOSS, loss_bytes(target_bytes, N, F), kind, y, targets, target_bytes,
               N, F, scale, dy);
}
static void loss_acc(const pt_kernels *k, pt_loss_kind kind, const float *y, const void *targets,
                     size_t target_bytes, int N, int F, float scale, float *dy, uint16_t *dy16,
                     double *sum, int32_t *mark, int32_t value) {
  TIMED(loss_acc, LOSS, loss_bytes(target_bytes, N, F), kind, y, targets, target_bytes, N, F,
        scale, dy, dy16, sum, mark, value);
}

/* An update reads w, g, m (and v) and writes w, m (and v), and the bf16 copy when there is one. */
static double update_bytes(const uint16_t *w16, const float *v, int64_t n) {
  return (F4 * (v ? 7.0 : 5.0) + (w16 ? 2.0 : 0.0)) * n;
}
static void optimizer(const pt_kernels *k, const pt_update *u, float *w, uint16_t *w16,
                      const float *g, float *m, float *v, int64_t n) {
  TIMED(optimizer, OPTIMIZER, update_bytes(w16, v, n), u, w, w16, g, m, v, n);
}
static void optimizer_chunks(const pt_kernels *k, const pt_update *u, float *w, uint16_t *w16,
                             const float *g, float *m, float *v, const pt_opt_chunk *chunks,
                             int64_t n_chunks) {
  int64_t n = 0;
  for (int64_t i = 0; i < n_chunks; i++) n += chunks[i].n; /* host memory: kernels_timed.h */
  TIMED(optimizer_chunks, OPTIMIZER, update_bytes(w16, v, n), u, w, w16, g, m, v, chunks,
        n_chunks);
}
static double sumsq(const pt_kernels *k, const float *x, int64_t n) {
  TIMED_RETURN(double, sumsq, OPTIMIZER, F4 * n, x, n);
}
static int all_finite(const pt_kernels *k, const float *x, int64_t n) {
  TIMED_RETURN(int, all_finite, OPTIMIZER, F4 * n, x, n);
}
static void sumsq_spans_into(const pt_kernels *k, double *out, const float *x,
                             const pt_sum_span *spans, int n_spans) {
  int64_t n = 0;
  for (int j = 0; j < n_spans; j++) n += spans[j].n;
  TIMED(sumsq_spans_into, OPTIMIZER, F4 * n, out, x, spans, n_spans);
}
static void finite_check(const pt_kernels *k, int32_t *mark, int32_t value, const float *x,
                         int64_t n) {
  TIMED(finite_check, OPTIMIZER, F4 * n, mark, value, x, n);
}

static void round_bf16(const pt_kernels *k, float *x, int64_t n) {
  TIMED(round_bf16, OTHER, F4 * 2.0 * n, x, n);
}
static void pack_bf16(const pt_kernels *k, uint16_t *dst, const float *src, int64_t n) {
  TIMED(pack_bf16, OTHER, 6.0 * n, dst, src, n);
}
static void unpack_bf16(const pt_kernels *k, float *dst, const uint16_t *src, int64_t n) {
  TIMED(unpack_bf16, OTHER, 6.0 * n, dst, src, n);
}

static void round_pack_bf16(const pt_kernels *k, uint16_t *dst, float *x, int64_t n,
                            int32_t *mark, int32_t value) {
  TIMED(round_pack_bf16, OTHER, (mark ? 14.0 : 10.0) * n, dst, x, n, mark, value);
}

const pt_kernels *kernels_timed_wrap(pt_kernels_timed *t, const pt_kernels *inner) {
  if (inner == &t->table) inner = t->inner; /* copy again what may have changed in place */
  /* name, ctx, precision, which bf16 entries exist; weight_copy and
   * activation_copies as they are (they time nothing) */
  pt_kernels table = *inner;
#define PT_KT_TAKE(entry) table.entry = entry; /* this file's wrapper of that name */
  PT_KERNELS_ENTRIES(PT_KT_TAKE)
#undef PT_KT_TAKE
  if (inner->round_bf16) table.round_bf16 = round_bf16;
  if (inner->pack_bf16) table.pack_bf16 = pack_bf16;
  if (inner->unpack_bf16) table.unpack_bf16 = unpack_bf16;
  if (inner->round_pack_bf16) table.round_pack_bf16 = round_pack_bf16;
  t->table = table;
  t->inner = inner;
  kernels_timed_reset(t);
  return &t->table;
}

void kernels_timed_reset(pt_kernels_timed *t) { memset(t->entry, 0, sizeof t->entry); }

void kernels_timed_by_category(const pt_kernels_timed *t, pt_kernel_tally out[PT_KCAT_COUNT]) {
  memset(out, 0, sizeof *out * PT_KCAT_COUNT);
  for (int c = 0; c < PT_KCAT_COUNT; c++) out[c].category = (pt_kernel_category)c;
  for (int e = 0; e < PT_KT_COUNT; e++) {
    const pt_kernel_tally *s = &t->entry[e];
    if (!s->calls) continue;
    out[s->category].seconds += s->seconds;
    out[s->category].work += s->work;
    out[s->category].calls += s->calls;
  }
}

const char *kernels_timed_category_name(pt_kernel_category c) {
  static const char *const names[PT_KCAT_COUNT] = {
      "gemm", "attention", "norms", "activations", "loss", "optimizer", "copies/other"};
  return c >= 0 && c < PT_KCAT_COUNT ? names[c] : "?";
}

const char *kernels_timed_entry_name(pt_kernel_entry e) {
#define PT_KT_NAME(entry) #entry,
  static const char *const names[PT_KT_COUNT] = {PT_KERNELS_ENTRIES(PT_KT_NAME) "round_bf16",
                                                 "pack_bf16", "unpack_bf16", "round_pack_bf16"};
#undef PT_KT_NAME
  return e >= 0 && e < PT_KT_COUNT ? names[e] : "?";
}

int kernels_timed_counts_flops(pt_kernel_category c) {
  return c == PT_KCAT_GEMM || c == PT_KCAT_ATTENTION;
}
