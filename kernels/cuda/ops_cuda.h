/* kernels/cuda/ops_cuda.h: the float32 GPU kernels, one for each CPU kernel in kernels/cpu/ops.h
 * (same shapes, layouts and "acc" meaning) plus the losses, the optimizer and the checks the
 * engine runs on device buffers. Every pointer is device memory; every call is queued on g's
 * stream and returns at once (no synchronisation), except where a result comes back to the host.
 * Reductions are written in a fixed order (no atomics on floats), so a call gives the same bits
 * every time for the same inputs: activation checkpointing relies on that. Parity with the CPU
 * kernels: 1e-5 relative (tests/gpu/test_cuda_ops.c).
 */
#ifndef PT_OPS_CUDA_H
#define PT_OPS_CUDA_H

#include <stdint.h>

#include "kernels/cuda/attention_cudnn.h" /* attention_cudnn_shape (wraps itself for C++) */

#ifdef __cplusplus
/* kernels/cuda/gpu.h has no extern "C" of its own: take the CUDA headers first (outside the block,
 * they hold C++), then gpu.h inside it, so a .cu file calls pt_fail_lib() and the error texts
 * by their C names. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
extern "C" {
#endif

#include "kernels/cuda/gpu.h"
#include "kernels/kernels.h" /* pt_opt_chunk */
#include "kernels/weight_copy.h"

/* The kernels' names and arguments mirror kernels/cpu/ops.h with the context first; see there.
 * Elementwise kernels (gelu, relu, add, scale, the optimizers) let the output alias any input
 * (the transformer block runs gelu backward with dx == x). */
void cuda_op_linear_forward(gpu_ctx *g, float *y, const float *x, const float *W, const float *b,
                            int N, int Ni, int No);
void cuda_op_linear_forward_residual(gpu_ctx *g, float *y, const float *res, const float *x,
                                     const float *W, const float *b, int N, int Ni, int No);
void cuda_op_linear_backward_input(gpu_ctx *g, float *dx, const float *dy, const float *W, int N,
                                   int Ni, int No, int acc);
void cuda_op_linear_backward_weight(gpu_ctx *g, float *dW, float *db, const float *dy,
                                    const float *x, int N, int Ni, int No);
/* The forwards taking y16 (layernorm, rmsnorm, their residual rmsnorm, swiglu, geglu): y16
 * NULL writes y; else y's values go to y16 as bf16 bits (kernels/precision.h pt_bf16_bits) and
 * y is not written: a tensor the table keeps only as its bf16 copy (kernels.h share_bf16_into,
 * alone). layernorm's xbits, the residual rmsnorm's x1bits: NULL, or the bits of x as it reads
 * it, of x1 as it writes it, written there too (a tensor whose place at rest the table was
 * handed, not alone). */
void cuda_op_layernorm_forward(gpu_ctx *g, float *y, uint16_t *y16, float *mean, float *rstd,
                               const float *x, uint16_t *xbits, const float *w, const float *b,
                               int N, int D, float eps);
/* The norms' backward_input taking dx16, dy16 and x16 (layernorm, rmsnorm, their residual
 * ones): dy16 NULL, or dy's bits (kernels/precision.h pt_bf16_bits) written there as the kernel
 * reads dy, and dx16 NULL, or dx's bits written there as it writes dx (after the add and the
 * rounding): tensors whose places at rest the table was handed (kernels.h share_bf16_into, not
 * alone), or, for dx, the table's own bits of an input gradient it rounds (kernels.h
 * din_copy); x16 NULL, or x read from there (bf16 copies of x's values; x itself then unread);
 * round_dx: dx written rounded to bf16 values (after the add, acc; kernels.h
 * round_when_written). */
void cuda_op_layernorm_backward_input(gpu_ctx *g, float *dx, uint16_t *dx16, const float *dy,
                                      uint16_t *dy16, const float *x, const uint16_t *x16,
                                      const float *w, const float *mean, const float *rstd, int N,
                                      int D, int acc, int round_dx);
void cuda_op_layernorm_backward_weight(gpu_ctx *g, float *dw, float *db, const float *dy,
                                       const float *x, const float *mean, const float *rstd,
                                       int N, int D);
/* The same with dy, x or both read from bf16 copies of their floats, which are bf16 values
 * (dy16, x16; NULL: the floats): the same bits, 2 bytes an element of a copy (its own row in
 * the ledger). */
void cuda_op_layernorm_backward_weight_copies(gpu_ctx *g, float *dw, float *db, const float *dy,
                                              const uint16_t *dy16, const float *x,
                                              const uint16_t *x16, const float *mean,
                                              const float *rstd, int N, int D);
void cuda_op_gelu_forward(gpu_ctx *g, float *y, const float *x, int64_t n);
void cuda_op_gelu_backward(gpu_ctx *g, float *dx, const float *dy, const float *x, int64_t n);
void cuda_op_relu_forward(gpu_ctx *g, float *y, const float *x, int64_t n);
void cuda_op_relu_backward(gpu_ctx *g, float *dx, const float *dy, const float *x, int64_t n);
/* Causal grouped-query attention (kernels.h: qkv [B,T,d + 2*KVH*hd], H query heads over KVH
 * kv heads; KVH == H is multi-head), fused (ops_attention_flash_fwd.cu, _bwd.cu): the T x T
 * scores live only tile by tile in shared memory. Forward writes o and saves lse[B,H,T], each
 * row's log-sum-exp of the scaled scores (cuda_op_attention_saved_floats: B*H*T); backward
 * recomputes the probabilities from qkv and lse and also reads forward's o. scratch: none
 * (cuda_op_attention_scratch_floats is 0; NULL is fine). Head dims up to 256 (pt_fatal above).
 * doc_start: NULL (causal), or device int32 [B,T]: block-diagonal causal (kernels.h); tiles
 * wholly outside a query row's document are skipped. opts (host, may be NULL): kernels.h's
 * window (tiles wholly outside the band skipped), soft-cap and scale. */
int64_t cuda_op_attention_saved_floats(int B, int T, int d, int H, int KVH);
int64_t cuda_op_attention_scratch_floats(int B, int T, int d, int H, int KVH);
void cuda_op_attention_forward(gpu_ctx *g, float *o, float *lse, const float *qkv, int B, int T,
                               int d, int H, int KVH, const int32_t *doc_start,
                               const pt_attention_opts *opts, float *scratch);
void cuda_op_attention_backward(gpu_ctx *g, float *dqkv, const float *dout, const float *qkv,
                                const float *o, const float *lse, int B, int T, int d, int H,
                                int KVH, const int32_t *doc_start, const pt_attention_opts *opts,
                                float *scratch);
/* ops_attention_ragged.cu: packed documents (doc_start, device int32 [B,T], kernels.h) as
 * attention_cudnn.h's ragged table of shape s (s->seqs slots; table: 4 *
 * attention_cudnn_ragged_stride(s->seqs) device int32; q|k|v rows of (H + 2 KVH) hd elements,
 * o rows of H hd, H log-sum-exps a token, each times B*T within int32); s->seqs must be at
 * least the documents' count (a table of fewer slots has every length -1). _docs is the
 * inverse, for the emulator's cuDNN substitute: doc_start from a table, a token no valid
 * sequence of the table covers (or whose sequence starts in an earlier row) given its own
 * one-token document, so a wrong table shows. */
void cuda_op_attention_ragged(gpu_ctx *g, int32_t *table, const int32_t *doc_start,
                              const attention_cudnn_shape *s);
void cuda_op_attention_ragged_docs(gpu_ctx *g, int32_t *doc_start, const int32_t *table,
                                   const attention_cudnn_shape *s);
/* ops_norm_residual.cu: kernels.h's residual norms, one launch each: x1 = a + b and the norm of
 * x1 (x1 may alias a or b); dx = dres + the norm's input gradient of dy (dx may alias dres). */
void cuda_op_layernorm_forward_residual(gpu_ctx *g, float *x1, float *y, float *mean, float *rstd,
                                        const float *a, const float *b, const float *w,
                                        const float *bias, int N, int D, float eps);
void cuda_op_layernorm_backward_input_residual(gpu_ctx *g, float *dx, uint16_t *dx16,
                                               const float *dres, const float *dy, uint16_t *dy16,
                                               const float *x, const uint16_t *x16, const float *w,
                                               const float *mean, const float *rstd, int N, int D,
                                               int round_dx);
void cuda_op_rmsnorm_forward_residual(gpu_ctx *g, float *x1, uint16_t *x1bits, float *y,
                                      uint16_t *y16, float *rstd, const float *a, const float *b,
                                      const float *w, int N, int D, float eps);
void cuda_op_rmsnorm_backward_input_residual(gpu_ctx *g, float *dx, uint16_t *dx16,
                                             const float *dres, const float *dy, uint16_t *dy16,
                                             const float *x, const uint16_t *x16, const float *w,
                                             const float *rstd, int N, int D, int round_dx);
/* ops_llama.cu: kernels.h's rmsnorm_*, rope, swiglu_* (rmsnorm_backward_weight keeps its
 * per-chunk partial column sums in g's col_scratch, as layernorm_backward_weight does). */
void cuda_op_rmsnorm_forward(gpu_ctx *g, float *y, uint16_t *y16, float *rstd, const float *x,
                             const float *w, int N, int D, float eps);
void cuda_op_rmsnorm_backward_input(gpu_ctx *g, float *dx, uint16_t *dx16, const float *dy,
                                    uint16_t *dy16, const float *x, const uint16_t *x16,
                                    const float *w, const float *rstd, int N, int D, int acc,
                                    int round_dx);
void cuda_op_rmsnorm_backward_weight(gpu_ctx *g, float *dw, const float *dy, const float *x,
                                     const float *rstd, int N, int D);
/* As cuda_op_layernorm_backward_weight_copies: dy16, x16 NULL or copies of bf16 values. */
void cuda_op_rmsnorm_backward_weight_copies(gpu_ctx *g, float *dw, const float *dy,
                                            const uint16_t *dy16, const float *x,
                                            const uint16_t *x16, const float *rstd, int N, int D);
/* bits NULL, or the bits of all of qkv [B*T, (H + 2 KVH) hd] as rotated (v's as they are)
 * written there too: a tensor whose place at rest the table was handed (kernels.h
 * share_bf16_into, not alone). src NULL, or bf16 bits standing for all of qkv (its floats
 * undefined): read there instead, the rotated floats (v's widened) written to qkv. */
void cuda_op_rope(gpu_ctx *g, float *qkv, uint16_t *bits, const uint16_t *src, int B, int T,
                  int H, int KVH, int hd, const pt_rope_freqs *f, int dir,
                  const int32_t *positions);
/* ops_head_norm.cu: kernels.h's head_rmsnorm_* */
void cuda_op_head_rmsnorm_forward(gpu_ctx *g, float *y, float *rstd, const float *x,
                                  const float *wq, const float *wk, int N, int H, int KVH, int hd,
                                  float eps);
void cuda_op_head_rmsnorm_backward_input(gpu_ctx *g, float *dx, const float *dy, const float *x,
                                         const float *wq, const float *wk, const float *rstd,
                                         int N, int H, int KVH, int hd);
void cuda_op_head_rmsnorm_backward_weight(gpu_ctx *g, float *dwq, float *dwk, const float *dy,
                                          const float *x, const float *rstd, int N, int H,
                                          int KVH, int hd);
/* The gated activations (swiglu here, geglu below): gu16 of forward (NULL: none) gets gu's bf16
 * bits as the kernel reads gu (gu's place at rest: kernels.h share_bf16_into); backward reads gu
 * from gu16 where given (its copy at rest, bf16 values), else its floats, and writes dgu's bf16
 * bits to dgu16 where given (dgu's place handed over alone), not dgu. The bytes an element of y
 * each moves (the ledger's). */
double cuda_gated_forward_bytes(const uint16_t *y16, const uint16_t *gu16);
double cuda_gated_backward_bytes(const uint16_t *gu16, const uint16_t *dgu16);
void cuda_op_swiglu_forward(gpu_ctx *g, float *y, uint16_t *y16, const float *gu, uint16_t *gu16,
                            int N, int F);
void cuda_op_swiglu_backward(gpu_ctx *g, float *dgu, uint16_t *dgu16, const float *dy,
                             const float *gu, const uint16_t *gu16, int N, int F);
/* ops_gemma.cu: kernels.h's geglu_*, softcap_* and add_scalar (the CPU's formulas). */
void cuda_op_geglu_forward(gpu_ctx *g, float *y, uint16_t *y16, const float *gu, uint16_t *gu16,
                           int N, int F);
void cuda_op_geglu_backward(gpu_ctx *g, float *dgu, uint16_t *dgu16, const float *dy,
                            const float *gu, const uint16_t *gu16, int N, int F);
void cuda_op_softcap_forward(gpu_ctx *g, float *y, const float *x, float cap, int64_t n);
void cuda_op_softcap_backward(gpu_ctx *g, float *dx, const float *dy, const float *x, float cap,
                              int64_t n);
void cuda_op_add_scalar(gpu_ctx *g, float *y, const float *x, float c, int64_t n);
void cuda_op_add(gpu_ctx *g, float *y, const float *a, const float *b, int64_t n);
void cuda_op_add_inplace(gpu_ctx *g, float *y, const float *a, int64_t n);
void cuda_op_copy(gpu_ctx *g, float *y, const float *x, int64_t n);
/* colsum_acc and layernorm_backward_weight keep their per-chunk partial column sums in g's
 * col_scratch (gpu.h) between their two passes. */
void cuda_op_colsum_acc(gpu_ctx *g, float *acc, const float *x, int N, int D);
/* The same sums read from x16 = pt_bf16_bits of floats that are bf16 values (the same floats in
 * the same order: the same bits), 2 bytes an element (its own row in the ledger). */
void cuda_op_colsum_acc_bf16(gpu_ctx *g, float *acc, const uint16_t *x16, int N, int D);

/* Embeddings: y[N,D] = table[ids[n]] (ids int32, checked < V on the host before upload; one
 * outside [0, V) reads nothing: forward writes NaN in its row, backward skips it);
 * backward: dtable[ids[n]] += dy[n], accumulated in token order (the CPU's bits, every run).
 * Backward sorts the tokens by id first: scratch is cuda_op_embedding_scratch_keys(N) device
 * uint64s (the power of two >= N), owned by the caller, free again when the call's work ends
 * (stream order). */
void cuda_op_embedding_forward(gpu_ctx *g, float *y, const int32_t *ids, const float *table,
                               int N, int D, int V);
int64_t cuda_op_embedding_scratch_keys(int N);
void cuda_op_embedding_backward(gpu_ctx *g, float *dtable, const int32_t *ids, const float *dy,
                                int N, int D, int V, uint64_t *scratch);
/* Positions: y[B,T,D] = x + pos[t]; dpos[t] += sum over b of dy[b,t]. With positions (device
 * int32 [B,T]; NULL: t) as kernels.h says, in the CPU's (b, t) order. */
void cuda_op_pos_forward(gpu_ctx *g, float *y, const float *x, const float *pos, int B, int T,
                         int D, const int32_t *positions);
void cuda_op_pos_backward_weight(gpu_ctx *g, float *dpos, const float *dy, int B, int T, int D,
                                 const int32_t *positions);

/* Scratch of the reductions to a device double (losses, sumsq): per-block partial sums, added
 * by a second pass in a fixed order. A constant: one buffer of this many device doubles serves
 * every such call on the stream (the calls run in stream order). */
#define CUDA_REDUCE_SCRATCH_DOUBLES 1024

/* Losses over N rows of F values, as kernels/cpu/loss.c: dy = scale * d(loss)/dy written; the
 * loss sum (not mean) over the rows is added to *loss_sum_dev (one device double). The rows'
 * losses are added in a fixed order (scratch: CUDA_REDUCE_SCRATCH_DOUBLES device doubles).
 * dy16 NULL, or the gradient is written there as bf16 bits (pt_bf16_bits) and dy not at all.
 * y16 (logits16) NULL, or y's bf16 bits, read instead of y's floats (not read then); dy16 may be
 * y16 itself (a thread writes only elements it has read). Cross entropy targets are checked on
 * the host (as kernels/cpu/loss.c does); one outside [0, V) gives a NaN loss and no -scale in
 * its row. y is read as r says (kernels/loss.h; r.mark device memory). */
void cuda_loss_cross_entropy(gpu_ctx *g, float *dy, uint16_t *dy16, double *loss_sum_dev,
                             const float *logits, const uint16_t *logits16,
                             const int32_t *targets, int N, int V, float scale, double *scratch,
                             pt_loss_read r);
void cuda_loss_mse(gpu_ctx *g, float *dy, uint16_t *dy16, double *loss_sum_dev, const float *y,
                   const uint16_t *y16, const float *targets, int N, int F, float scale,
                   double *scratch, pt_loss_read r);

/* AdamW / SGD updates over n floats, as kernels/cpu/optimizer.c (PyTorch semantics), bit for
 * bit: weight decay applies to float i where decay_mask[i] is nonzero; NULL: decay applies to
 * all n (a caller going tensor by tensor passes keep 1 / weight_decay 0 for a tensor without
 * decay, exactly the CPU's update then). AdamW takes the step's factors as the host computed them in double for every
 * device (pt_update: step = lr / (1 - beta1^t), inv_sqrt_bc2 = 1 / sqrt(1 - beta2^t),
 * keep = 1 - lr * weight_decay, each rounded to float once), never recomputed in float here.
 * SGD: first_step is 1 on the optimizer's first step (t == 1: momentum = d); momentum may be
 * NULL when mu == 0. w16: NULL, or n bf16 given pt_bf16_bits of each new weight in the same
 * pass (kernels.h's optimizer entry). Both read each gradient element times clip (pt_update's
 * clip: the gradient clipping's factor, 1 when not clipped). */
void cuda_adamw_step(gpu_ctx *g, float *w, uint16_t *w16, const float *grad, float *m,
                     float *v, const uint8_t *decay_mask, int64_t n, float beta1, float beta2,
                     float eps, float step, float inv_sqrt_bc2, float keep, float clip);
void cuda_sgd_step(gpu_ctx *g, float *w, uint16_t *w16, const float *grad, float *momentum,
                   const uint8_t *decay_mask, int64_t n, float lr, float mu, float weight_decay,
                   int first_step, float clip);
/* The same updates over the pieces chunks[0..n_chunks) (kernels.h's pt_opt_chunk, device
 * memory) of flat buffers, one launch, a block per piece: a piece's floats get exactly what
 * the call above gives a tensor (keep / weight_decay where the piece's decay is set; keep 1 /
 * 0 elsewhere). */
void cuda_adamw_chunks(gpu_ctx *g, float *w, uint16_t *w16, const float *grad, float *m,
                       float *v, const pt_opt_chunk *chunks, int64_t n_chunks, float beta1,
                       float beta2, float eps, float step, float inv_sqrt_bc2, float keep,
                       float clip);
void cuda_sgd_chunks(gpu_ctx *g, float *w, uint16_t *w16, const float *grad, float *momentum,
                     const pt_opt_chunk *chunks, int64_t n_chunks, float lr, float mu,
                     float weight_decay, int first_step, float clip);
void cuda_scale(gpu_ctx *g, float *x, float s, int64_t n);
/* Sum of squares of x[0..n) in double, written to *out_dev (one device double); fixed order
 * (scratch: CUDA_REDUCE_SCRATCH_DOUBLES device doubles). stats.cu. */
void cuda_sumsq(gpu_ctx *g, double *out_dev, const float *x, int64_t n, double *scratch);
/* cuda_sumsq of many spans of x in two launches (one over every span's blocks, one adding each
 * span's partials): out_dev[j] gets the bits cuda_sumsq writes for x[spans[j].offset,
 * + spans[j].n) (0.0 for an empty span). spans: host memory. The layout (a block per piece,
 * device memory) is built at the first call and kept in plan for the next calls with the
 * same spans (a different list rebuilds it, after a wait). Zeroed plan: none yet. */
typedef struct {
  pt_sum_span *spans; /* host copy of the list it was built for */
  int n_spans;
  int64_t n_pieces;
  double floats;  /* the spans' floats, for the ledger */
  void *pieces;   /* device: n_pieces blocks' spans and places */
  int32_t *first; /* device: span j's pieces are [first[j], first[j + 1]) */
  double *partials; /* device: n_pieces doubles */
} cuda_sumsq_plan;
void cuda_sumsq_spans(gpu_ctx *g, cuda_sumsq_plan *plan, double *out_dev, const float *x,
                      const pt_sum_span *spans, int n_spans);
void cuda_sumsq_plan_free(cuda_sumsq_plan *plan);
/* 1 in *flag_dev (device int) when x holds a NaN or an infinity; flag left alone otherwise. */
void cuda_check_finite(gpu_ctx *g, int *flag_dev, const float *x, int64_t n);
/* *mark_dev (device int) = max(*mark_dev, value) when x holds a NaN or an infinity; left alone
 * otherwise (stats.cu). */
void cuda_finite_mark(gpu_ctx *g, int *mark_dev, int value, const float *x, int64_t n);

/* --- train.precision bf16 (ops_linear.cu) ------------------------------------------------ */
/* Device bf16 copies of a product's two operands, grown as needed (the old ones freed after a
 * synchronisation: work still queued may read them). Zeroed struct: none yet. */
typedef struct {
  uint16_t *a, *b;
  size_t cap_a, cap_b; /* elements */
  /* Weights with a ready bf16 copy (the table's weight_copy entry): read, not converted. */
  pt_weight_copies copies;
  /* Activations with a ready bf16 copy (the table's activation_copies entry): read, not
   * converted, wherever they are an operand. */
  pt_weight_copies acts;
  /* Ranges promised unchanged until the next activation_copies (kernels.h share_bf16): an
   * operand inside one is converted into kept and then read there, as an activation copy. */
  pt_weight_range shared[PT_WEIGHT_COPY_RANGES]; /* copy: the range's own place, or NULL */
  unsigned into_done;  /* bit i: shared[i] converted into its place (share_bf16_into) */
  unsigned into_alone; /* bit i: shared[i]'s place may stand alone for it (its floats unread) */
  /* bit i: shared[i]'s floats are bf16 values (kernels.h share_bf16), or, of a place with room
   * kept (share_bf16_into without a place), stand for its values: no sum reads them before they
   * are undefined, so a sum may read the place (cuda_bf16_values) */
  unsigned shared_values;
  /* bit i: acts.r[i]'s floats are its copy widened (or undefined: the copy stands for them), so
   * a column sum (a bias gradient, a norm's weight gradient: cuda_bf16_values) may read the
   * copy: the activation_copies set, round_share_bf16's copies, a library's result kept
   * (cuda_bf16_keep_result) and conversions inside a shared range of bf16 values (share_bf16
   * with values) and places with room kept (shared_values); not share_bf16_into's others
   * (forward's, converted before their floats are rounded). */
  unsigned values;
  /* Places take_place or keep_room gave that keep_copy or keep_result has not kept yet: each
   * holds a free range of acts (and of exact) for them, so a kernel taking two places at once
   * (a norm's dy and dx) can keep both. */
  int pending;
  /* Ranges of acts whose floats are their copy widened (a library's bf16 result kept,
   * cuda_bf16_keep_result): rounding them is the identity, so round_share_bf16 skips them. */
  pt_weight_range exact[PT_WEIGHT_COPY_RANGES];
  uint16_t *kept; /* the kept copies, back to back from 0 since activation_copies */
  size_t kept_cap, kept_used, kept_want; /* elements; want: what a step asked for at most */
} cuda_bf16_scratch;
/* The linear kernels above with the products' operands converted to bf16 (round to nearest
 * even, kernels/precision.h) into s, then cublasGemmEx: bf16 inputs, float32 accumulation and
 * output; a W inside one of s->copies is read from its copy instead (the same bits). Bias sums
 * and everything else as the float32 kernels (a bias sum reads dy's copy instead where that
 * holds dy's values, s->values: the same bits). */
/* linear_forward_bf16's y16 (NULL: none): y's place at rest handed over alone (kernels.h
 * share_bf16_into): y written there as bf16 only (a cuBLASLt bf16 D), or, without an algorithm
 * for that, y's floats written and their bits packed there. */
void cuda_op_linear_forward_bf16(gpu_ctx *g, cuda_bf16_scratch *s, float *y, uint16_t *y16,
                                 const float *x, const float *W, const float *b, int N, int Ni,
                                 int No);
void cuda_op_linear_forward_residual_bf16(gpu_ctx *g, cuda_bf16_scratch *s, float *y,
                                          const float *res, const float *x, const float *W,
                                          const float *b, int N, int Ni, int No);
/* dx16 (acc 0 only; NULL: none): dx written there as bf16 instead of as floats (cuBLASLt's
 * bf16 D, else the floats packed there after). */
void cuda_op_linear_backward_input_bf16(gpu_ctx *g, cuda_bf16_scratch *s, float *dx,
                                        uint16_t *dx16, const float *dy, const float *W, int N,
                                        int Ni, int No, int acc);
void cuda_op_linear_backward_weight_bf16(gpu_ctx *g, cuda_bf16_scratch *s, float *dW, float *db,
                                         const float *dy, const float *x, int N, int Ni, int No);
void cuda_bf16_scratch_free(cuda_bf16_scratch *s);
/* kernels.h's activation_copies, share_bf16 (place NULL) or share_bf16_into (share_into; and
 * share with the caller's place), shared_into_done and round_share_bf16 on s: the set of copies
 * replaced by r[0..n) (and kept grown, when the last set asked for more, while no copy is in
 * it); x promised unchanged (converted whole into place by the first operand inside it, when
 * place is given; values: x holds bf16 values, kernels.h share_bf16; share_into without a
 * place: room for x taken in kept at once, its place then, read for x's values, or x not shared
 * at all where kept or s->acts has no room); whether
 * that conversion ran; x rounded and its bits kept, both where s->acts and kept have room
 * (else: nothing; cuda_round_bf16), in one launch around the exact range inside x (more than
 * one: a launch before each); unset: the bits kept, the floats not rounded but unset
 * (cuda_unset_f32), where there is room. */
void cuda_bf16_acts_reset(gpu_ctx *g, cuda_bf16_scratch *s, const pt_weight_range *r, int n);
void cuda_bf16_share(cuda_bf16_scratch *s, const float *x, int64_t n, uint16_t *place,
                     int alone, int values);
void cuda_bf16_share_into(gpu_ctx *g, cuda_bf16_scratch *s, const float *x, int64_t n,
                          uint16_t *place, int alone);
int cuda_bf16_shared_into_done(const cuda_bf16_scratch *s, const float *x);
void cuda_bf16_round_share(gpu_ctx *g, cuda_bf16_scratch *s, float *x, int64_t n, int unset);
/* A library's bf16 result widened into x[0..n) (kernels.h pt_attention_opts.shared: nothing
 * writes x until the next activation_copies): keep_room gives room for its n bf16 values in
 * kept (NULL: no room or no free range, the caller writes them elsewhere and keeps nothing),
 * keep_result registers that room, once the result is written and widened, as x's activation
 * copy and as exact (round_share_bf16 skips it). forget: x[0..n) is being written, any copy
 * of a range overlapping it is forgotten (a result written twice without activation_copies
 * between). */
uint16_t *cuda_bf16_keep_room(gpu_ctx *g, cuda_bf16_scratch *s, int64_t n);
/* For the attention's bf16 operands and results, as for the products', and for the forward
 * kernels with a y16 output: shared_operand is x's conversion where x lies in a shared range
 * (into its place, or kept; NULL elsewhere or without room); take_place is the place of a
 * shared_into range starting at x and not yet converted (alone: one whose place may stand alone
 * for x, kernels.h share_bf16_into), given over to the caller's result (its padding past n left
 * as it was), counted as converted (shared_into_done), NULL where there is none or no room to
 * keep the result after: keep_result (the result widened into x too) or keep_copy (x's floats
 * not written; the place registered as x's activation copy alone, read for x's values where
 * it is room kept, shared_values). */
const uint16_t *cuda_bf16_shared_operand(gpu_ctx *g, cuda_bf16_scratch *s, const float *x,
                                         int64_t n);
uint16_t *cuda_bf16_take_place(cuda_bf16_scratch *s, const float *x, int64_t n, int alone);
void cuda_bf16_keep_copy(cuda_bf16_scratch *s, const float *x, const uint16_t *copy, int64_t n);
void cuda_bf16_keep_result(cuda_bf16_scratch *s, const float *x, const uint16_t *copy, int64_t n);
void cuda_bf16_forget(cuda_bf16_scratch *s, const float *x, int64_t n);
/* copy (the caller's, n bf16, kept unchanged until the next activation_copies) registered as
 * x[0..n)'s activation copy, of x's values (s->values): 1, or 0 where s->acts has no free range
 * beside the places pending (nothing registered). */
int cuda_bf16_keep_values(cuda_bf16_scratch *s, const float *x, const uint16_t *copy, int64_t n);
/* x[0..n)'s copy where its floats are the copy's values (s->values; or a place of values
 * written, shared_values), else NULL. */
const uint16_t *cuda_bf16_values(const cuda_bf16_scratch *s, const float *x, int64_t n);
/* kernels.h's linear_forward_gelu and linear_backward_input_gelu: one cuBLASLt matmul with the
 * GELU_AUX_BIAS or DGELU epilogue where cuBLASLt has an algorithm for the shape, else the linear
 * kernel and the gelu kernel (scratch: the backward's N*Ni product). s NULL: float32 products
 * (g->lt_compute); else their operands converted to bf16 into s, as the _bf16 kernels above.
 * y16 and h16 (s only; NULL: none): y's and h's places handed over alone, written as
 * linear_forward_bf16's y16 (one matmul with a bf16 D and aux where both are given). */
void cuda_op_linear_forward_gelu(gpu_ctx *g, cuda_bf16_scratch *s, float *y, uint16_t *y16,
                                 float *h, uint16_t *h16, const float *x, const float *W,
                                 const float *b, int N, int Ni, int No);
/* h16 (s only; NULL: none): h's floats are left at rest, read from this bf16 copy (widened into
 * h where the bf16 matmul cannot run); dh16 (NULL: none): dh's place handed over alone, written
 * as bf16 only (one matmul with a bf16 D and aux where both are given; dh16 may be h16). */
void cuda_op_linear_backward_input_gelu(gpu_ctx *g, cuda_bf16_scratch *s, float *dh,
                                        uint16_t *dh16, const float *dy, const float *W,
                                        float *h, const uint16_t *h16, float *scratch, int N,
                                        int Ni, int No);
/* Elementwise: x rounded to bf16 values in place; n floats to n bf16 and back; both of the
 * first two in one pass, with mark (device int, or NULL) raised to value when a rounded value
 * is not finite (cuda_finite_mark's check, in the same pass). */
void cuda_round_bf16(gpu_ctx *g, float *x, int64_t n);
void cuda_pack_bf16(gpu_ctx *g, uint16_t *dst, const float *src, int64_t n);
void cuda_round_pack_bf16(gpu_ctx *g, uint16_t *dst, float *x, int64_t n, int *mark,
                          int value);
void cuda_unpack_bf16(gpu_ctx *g, float *dst, const uint16_t *src, int64_t n);
/* kernels.h's unset_f32: NaN in x[0..n) under the CUDA emulator, nothing under nvcc. */
void cuda_unset_f32(gpu_ctx *g, float *x, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
