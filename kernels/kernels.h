/* kernels/kernels.h: the numerical interface of a kind of device, as one table of kernels.
 *
 * Layers (through pt_io.k, layers/layer.h) and the engine (through device.h) do every piece of
 * arithmetic on tensors with a pt_kernels table, so a layer written once against it runs on
 * every device: kernels_cpu (kernels/cpu, OpenBLAS and loops; also the emulated
 * device's) and the GPU's (kernels/cuda/kernels_gpu.h, CUDA on the rank's stream).
 *
 * Contract of every entry:
 *   - The first argument is the table itself (its ctx holds the device's state).
 *   - Tensors are float32, row-major; sizes count elements, never bytes: N rows (= B*T
 *     tokens) of D (or Ni in, No out) features; matrices in PyTorch nn.Linear layout W[out, in].
 *   - Every tensor pointer is memory of the table's device (host memory for the CPU table),
 *     except loss targets, which are host memory. Scalars are host values.
 *   - "acc": 1 adds into the destination, 0 overwrites it. Weight gradients (*_backward_weight,
 *     embedding_backward, colsum_acc) always add (+=): gradients accumulate over micro-batches.
 *   - Elementwise entries (copy, add, add_inplace, scale, gelu, relu, the optimizer) allow the
 *     output to alias any input; so do the losses (dy over y) and the residual norms' x1 and
 *     dx as their comments say; the others need distinct buffers.
 *   - Deterministic: reductions add in a fixed order set by the sizes only (no float atomics),
 *     so the same inputs give the same bits on the same device; activation checkpointing re-runs
 *     forward and relies on it. The CPU and GPU tables agree to 1e-5 relative, not bit for bit
 *     (tests/gpu/test_cuda_ops.c).
 *   - Calls run in issue order (the GPU's stream) and return without waiting, except the ones
 *     that return a value to the host (loss, sumsq, all_finite), which wait for it; a training
 *     step uses their non-waiting forms (loss_acc, sumsq_spans_into, finite_check)
 *     instead.
 *   - Failures (a CUDA error, a token id or class id out of range) end the job (core/error.h).
 */
#ifndef PT_KERNELS_H
#define PT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/loss.h"
#include "kernels/weight_copy.h"

/* The rotary embedding's angles per pair of a head (the rope entry below): inv_freq[j] for
 * pair j < pairs, and the factor cos and sin are multiplied by. Small and fixed-size so a GPU
 * launch passes it by value. */
#define PT_ROPE_MAX_PAIRS 256
typedef struct {
  int pairs;
  float scale;
  float inv_freq[PT_ROPE_MAX_PAIRS];
} pt_rope_freqs;

/* One optimizer update (model/optimizer.h semantics): the raw settings, and the float factors
 * the CPU kernel uses (computed once per tensor by the optimizer, so every device agrees).
 * clip: the gradient clipping's factor; every update reads each gradient element g as the float
 * product g * clip, the bits a pass scaling the gradients by clip first would give (1 when not
 * clipped: exact), so clipping needs no pass of its own. */
typedef struct {
  int adam, decay;
  double lr, beta1, beta2, eps, weight_decay, momentum;
  int64_t t;                       /* steps taken, this one included */
  double bc1, bc2;                 /* AdamW bias corrections 1 - beta1^t, 1 - beta2^t */
  float keep, step, inv_sqrt_bc2;  /* AdamW: 1 - lr*wd (or 1), lr / (1 - b1^t), 1/sqrt(1 - b2^t) */
  float clip;                      /* the gradients' factor (model/optimizer.h grad_clip_factor) */
} pt_update;

/* One piece of a multi-tensor optimizer update (optimizer_chunks): floats [offset, offset + n)
 * of the flat buffers, all of one tensor, with that tensor's decay flag. The caller cuts its
 * tensors into pieces of at most PT_OPT_CHUNK_FLOATS (one GPU block each); the gaps between
 * tensors belong to no piece and are not touched. */
typedef struct {
  int64_t offset;
  int32_t n, decay;
} pt_opt_chunk;
#define PT_OPT_CHUNK_FLOATS 4096

/* Floats [offset, offset + n) of a flat buffer: one tensor of a multi-tensor sum of squares
 * (sumsq_spans_into). */
typedef struct {
  int64_t offset, n;
} pt_sum_span;

typedef struct pt_kernels pt_kernels;

/* train.precision (spec_precision, same order): what a table's matrix products compute.
 *   fp32  float32 products (cuBLAS pedantic math): the bitwise reference
 *   tf32  the products' inputs rounded to tf32 (kernels/precision.h), float32 accumulation
 *   bf16  the products' inputs rounded to bf16, float32 accumulation; the stage rounds every
 *         layer's output and input gradient to bf16 (round_bf16; round_pack_bf16 what it keeps
 *         packed; the model's logits are rounded by the losses as they read them,
 *         loss_rounds_bf16, or written at rest as bf16 by the head's product,
 *         engine/stage_store.h), and activations and gradients cross stages as packed bf16
 *         (pack_bf16 / unpack_bf16); the stage also keeps the activations of micro-batches in
 *         flight packed (engine/stage_store.c)
 * Everything else (LayerNorm, softmax, attention, losses, norms, the optimizer, the master
 * weights and gradients) stays float32 in every mode. docs/gpu.md, "Precision". */
typedef enum { PT_PRECISION_FP32, PT_PRECISION_TF32, PT_PRECISION_BF16 } pt_precision;

/* The attention entries' variants (a zeroed struct, or NULL, is plain causal attention):
 *   window  > 0: query t attends only keys s with t - window < s <= t (a band under the
 *           diagonal: transformers' sliding_window, Mistral and Gemma 2's local layers);
 *   softcap > 0: each scaled score z becomes softcap * tanh(z / softcap) (Gemma 2);
 *   scale   > 0: the scores' scale instead of 1/sqrt(hd) (Gemma 2's query_pre_attn_scalar^-0.5).
 * Masked probabilities stay exactly 0 (window and documents combine: both must allow a key).
 *   shared  1: the caller promises of the call's result (o forward, dqkv backward) what
 *           share_bf16 promises: nothing writes it until the next activation_copies call. A
 *           table with activation_copies may then keep a bf16 result it widens into it as its
 *           activation copy (the GPU's cuDNN path, kernels/cuda/attention_bf16.h), or, where
 *           o's place at rest was handed over alone (share_bf16_into), write it there only, not
 *           widened (attention_reads_bf16). No effect on the results.
 *   rotated 1 (backward): the caller's next call is rope (dir -1) over the whole of dqkv, and
 *           nothing reads dqkv before it: a table may leave dqkv as the bf16 bits its library
 *           wrote, which that rope reads (the GPU's cuDNN path), its floats undefined until
 *           then. No effect on the results.
 *   documents > 0 (with doc_start): how many documents doc_start holds (its tokens with
 *           doc_start[t] == t), counted on the host where the micro-batch was made (layers/
 *           layer.h pt_io.documents), so a table that runs each document as its own sequence
 *           (the GPU's cuDNN path: ragged sequences) sizes its call without reading the device;
 *           0: not given (such a table then runs its general path). No effect on the results
 *           beyond that path's rounding. */
typedef struct {
  int window;
  float softcap, scale;
  int shared;
  int rotated;
  int documents;
} pt_attention_opts;

/* The window's first key of query t (0 without a window). */
static inline int pt_attention_first_key(const pt_attention_opts *a, int t) {
  return a && a->window > 0 && t - a->window + 1 > 0 ? t - a->window + 1 : 0;
}

/* The (query, key) pairs a sequence of T attends to: T(T+1)/2 causal, fewer in a window (cost
 * estimates; documents not counted). */
static inline double pt_attention_pairs(int T, const pt_attention_opts *a) {
  const double t = T, w = a && a->window > 0 && a->window < T ? a->window : t;
  return w * (w + 1.0) / 2.0 + (t - w) * w;
}

struct pt_kernels {
  const char *name; /* "cpu" | "gpu" */
  void *ctx;        /* the implementation's state (GPU: its stream, handles, staging) */

  /* y[N,No] = x[N,Ni] W^T (+ b[No] when b != NULL); _residual: y = res[N,No] + x W^T + b
   * (b required; res may be x itself when No == Ni). */
  void (*linear_forward)(const pt_kernels *k, float *y, const float *x, const float *W,
                         const float *b, int N, int Ni, int No);
  void (*linear_forward_residual)(const pt_kernels *k, float *y, const float *res, const float *x,
                                  const float *W, const float *b, int N, int Ni, int No);
  /* dx[N,Ni] (=|+=) dy[N,No] W */
  void (*linear_backward_input)(const pt_kernels *k, float *dx, const float *dy, const float *W,
                                int N, int Ni, int No, int acc);
  /* dW[No,Ni] += dy^T x; db[No] += column sums of dy (db may be NULL) */
  void (*linear_backward_weight)(const pt_kernels *k, float *dW, float *db, const float *dy,
                                 const float *x, int N, int Ni, int No);
  /* A linear layer and the GELU after it (the MLP's fc), each in one call where the device can
   * fuse them (the GPU's cuBLASLt epilogues), else exactly the separate calls:
   * forward_gelu: h[N,No] = x W^T + b (the pre-activation, kept for backward), y = gelu(h), as
   *   linear_forward then gelu_forward; y and h distinct.
   * backward_input_gelu: dh[N,Ni] = (dy[N,No] W) * gelu'(h[N,Ni]) (overwrites), as
   *   linear_backward_input into scratch then gelu_backward; dh may be h (in place); scratch:
   *   N*Ni floats of the caller's, distinct from the rest, which the table may overwrite. */
  void (*linear_forward_gelu)(const pt_kernels *k, float *y, float *h, const float *x,
                              const float *W, const float *b, int N, int Ni, int No);
  void (*linear_backward_input_gelu)(const pt_kernels *k, float *dh, const float *dy,
                                     const float *W, const float *h, float *scratch, int N,
                                     int Ni, int No);

  /* LayerNorm over rows of D: y = (x - mean) * rstd * w + b, mean/rstd[N] written for backward;
   * backward_input: dx (=|+=) d/dx; backward_weight: dw += sum_n dy * xhat, db += sum_n dy. */
  void (*layernorm_forward)(const pt_kernels *k, float *y, float *mean, float *rstd,
                            const float *x, const float *w, const float *b, int N, int D,
                            float eps);
  void (*layernorm_backward_input)(const pt_kernels *k, float *dx, const float *dy,
                                   const float *x, const float *w, const float *mean,
                                   const float *rstd, int N, int D, int acc);
  void (*layernorm_backward_weight)(const pt_kernels *k, float *dw, float *db, const float *dy,
                                    const float *x, const float *mean, const float *rstd, int N,
                                    int D);

  /* Causal grouped-query attention, H query heads of hd = d/H dims and KVH kv heads (KVH
   * divides H; KVH == H is multi-head attention): qkv[B,T,d + 2*KVH*hd] = q (H*hd) | k (KVH*hd)
   * | v (KVH*hd), query head h in columns h*hd.. reading kv head h / (H/KVH); output o[B,T,d];
   * scores scaled by 1/sqrt(hd). dK, dV of a kv head sum its query heads in head order.
   * Forward writes into `saved` what its backward needs, attention_saved_floats(B, T, d, H, KVH)
   * floats whose meaning is the table's own: the CPU keeps the probabilities [B,H,T,T]
   * (zero above the diagonal), the GPU's fused kernels the log-sum-exp of each row [B,H,T] and
   * recompute the probabilities in backward. backward reads the same `saved` and forward's o.
   * A micro-batch's saved state is only valid for the table that wrote it.
   * scratch: attention_scratch_floats(B, T, d, H, KVH) floats (0: scratch may be NULL).
   * doc_start (packed documents, data/data_pack.h): NULL is plain causal; else int32 [B,T]
   * device memory, nondecreasing along a row with doc_start[t] <= t, and query t attends only
   * keys s with doc_start[t] <= s <= t (block-diagonal causal; masked probabilities exactly 0).
   * attention_saved_bf16 (a field, not an entry): 1 when `saved` may be stored as bf16 between
   * forward and backward under train.precision bf16 (the CPU's probabilities), 0 when it must
   * stay float32 (the GPU's log-sum-exps); layers' saved_parts say so of their attention part.
   * opts (host memory, may be NULL: all defaults): the variants of pt_attention_opts below,
   * applied in transformers' order: scores q.k times the scale, soft-capped, then masked (causal,
   * documents, window) and softmaxed. Sizes do not depend on them. */
  int64_t (*attention_saved_floats)(const pt_kernels *k, int B, int T, int d, int H, int KVH);
  int64_t (*attention_scratch_floats)(const pt_kernels *k, int B, int T, int d, int H, int KVH);
  void (*attention_forward)(const pt_kernels *k, float *o, float *saved, const float *qkv, int B,
                            int T, int d, int H, int KVH, const int32_t *doc_start,
                            const pt_attention_opts *opts, float *scratch);
  void (*attention_backward)(const pt_kernels *k, float *dqkv, const float *dout,
                             const float *qkv, const float *o, const float *saved, int B, int T,
                             int d, int H, int KVH, const int32_t *doc_start,
                             const pt_attention_opts *opts, float *scratch);

  /* RMSNorm over rows of D (Llama): y = x * rstd * w, rstd = 1/sqrt(sum(x^2)/D + eps), rstd[N]
   * written for backward; backward_input: dx (=|+=) rstd * (dy*w - xhat * mean(dy*w*xhat)),
   * xhat = x * rstd; backward_weight: dw += sum_n dy * xhat (rows in order). */
  void (*rmsnorm_forward)(const pt_kernels *k, float *y, float *rstd, const float *x,
                          const float *w, int N, int D, float eps);
  void (*rmsnorm_backward_input)(const pt_kernels *k, float *dx, const float *dy, const float *x,
                                 const float *w, const float *rstd, int N, int D, int acc);
  void (*rmsnorm_backward_weight)(const pt_kernels *k, float *dw, const float *dy,
                                  const float *x, const float *rstd, int N, int D);
  /* Per-head RMSNorm of the q and k heads of qkv rows x[N,(H + 2 KVH) hd] (the attention's
   * layout; Qwen3's q_norm and k_norm): y's H q heads are rmsnorm rows of hd with wq[hd], its KVH
   * k heads with wk[hd] (as rmsnorm_forward, eps), its v heads x's copied; rstd[N, H + KVH].
   * backward_input: dx's q and k heads as rmsnorm_backward_input (acc 0), v's dy's copied;
   * backward_weight: dwq += sum over rows, then q heads, in order of dy * xhat (dwk: k heads).
   * y, dx distinct from x, dy (kernels/cpu/ops_head_norm.c, kernels/cuda/ops_head_norm.cu). */
  void (*head_rmsnorm_forward)(const pt_kernels *k, float *y, float *rstd, const float *x,
                               const float *wq, const float *wk, int N, int H, int KVH, int hd,
                               float eps);
  void (*head_rmsnorm_backward_input)(const pt_kernels *k, float *dx, const float *dy,
                                      const float *x, const float *wq, const float *wk,
                                      const float *rstd, int N, int H, int KVH, int hd);
  void (*head_rmsnorm_backward_weight)(const pt_kernels *k, float *dwq, float *dwk,
                                       const float *dy, const float *x, const float *rstd, int N,
                                       int H, int KVH, int hd);
  /* Rotary position embedding in place on the q and k parts of qkv[B,T,(H + 2*KVH)*hd] (the
   * attention's layout; v untouched), Hugging Face's rotate-half convention: position t of the
   * sequence, pair (j, j + hd/2) of each head, j < hd/2, angle a = t * f->inv_freq[j] in float
   * (f: host memory, made once by the layer, layers/rope_freqs.h); c = cos a, s = sin a (rounded
   * from double), each then times f->scale in float (yarn's attention factor, else 1: exact);
   * dir = 1: x'[j] = x[j] c - x[j+hd/2] s,  x'[j+hd/2] = x[j+hd/2] c + x[j] s;
   * dir = -1: the transpose (angle -a), which backward applies to a gradient. hd even, hd / 2 =
   * f->pairs <= PT_ROPE_MAX_PAIRS.
   * positions: NULL (token t is at position t), or int32 [B,T] device memory: token (b, t) is at
   * positions[b*T + t] (< T; packed documents restart them at each document). */
  void (*rope)(const pt_kernels *k, float *qkv, int B, int T, int H, int KVH, int hd,
               const pt_rope_freqs *f, int dir, const int32_t *positions);
  /* SwiGLU: gu[N,2F] = gate (F) | up (F) per row; y[N,F] = silu(gate) * up, silu(g) = g /
   * (1 + exp(-g)); backward: dgu[N,2F] = d/dgate | d/dup given dy[N,F]. */
  void (*swiglu_forward)(const pt_kernels *k, float *y, const float *gu, int N, int F);
  void (*swiglu_backward)(const pt_kernels *k, float *dgu, const float *dy, const float *gu,
                          int N, int F);

  /* Gemma 2's pieces. geglu: as swiglu with the tanh GELU of gelu_forward for silu, y =
   * gelu(gate) * up (llama_block's mlp_act gelu_tanh). softcap: y = tanh(x / cap) * cap over n
   * elements, backward dx = dy * (1 - tanh(x / cap)^2) (lm_head's softcap). add_scalar: y = x +
   * c (the norms' weight offset, (1 + w)). Elementwise (y may alias x, dx dy or x). */
  void (*geglu_forward)(const pt_kernels *k, float *y, const float *gu, int N, int F);
  void (*geglu_backward)(const pt_kernels *k, float *dgu, const float *dy, const float *gu,
                         int N, int F);
  void (*softcap_forward)(const pt_kernels *k, float *y, const float *x, float cap, int64_t n);
  void (*softcap_backward)(const pt_kernels *k, float *dx, const float *dy, const float *x,
                           float cap, int64_t n);
  void (*add_scalar)(const pt_kernels *k, float *y, const float *x, float c, int64_t n);

  /* GELU (tanh approximation) and ReLU over n elements; backward: dx = dy * f'(x). */
  void (*gelu_forward)(const pt_kernels *k, float *y, const float *x, int64_t n);
  void (*gelu_backward)(const pt_kernels *k, float *dx, const float *dy, const float *x,
                        int64_t n);
  void (*relu_forward)(const pt_kernels *k, float *y, const float *x, int64_t n);
  void (*relu_backward)(const pt_kernels *k, float *dx, const float *dy, const float *x,
                        int64_t n);

  /* y[N,D] = table[ids[n]] (ids int32 in [0, V): the data loader checks them; the CPU table
   * checks again); backward: dtable[ids[n]] += dy[n], added in token order. */
  void (*embedding_forward)(const pt_kernels *k, float *y, const int32_t *ids, const float *table,
                            int N, int D, int V);
  void (*embedding_backward)(const pt_kernels *k, float *dtable, const int32_t *ids,
                             const float *dy, int N, int D, int V);
  /* Positions: y[B,T,D] = x + pos[t]; dpos[T,D] += dy[b] for b in order. With positions (int32
   * [B,T] device memory, each < T; NULL: p = t): y[b,t] = x + pos[p(b,t)], and dpos[p] adds the
   * dy[b,t] with p(b,t) = p in (b, t) order. */
  void (*pos_forward)(const pt_kernels *k, float *y, const float *x, const float *pos, int B,
                      int T, int D, const int32_t *positions);
  void (*pos_backward_weight)(const pt_kernels *k, float *dpos, const float *dy, int B, int T,
                              int D, const int32_t *positions);

  /* y = x; y = a + b; y += a; acc[D] += sum over the N rows of x; x *= s. */
  void (*copy)(const pt_kernels *k, float *y, const float *x, int64_t n);
  void (*add)(const pt_kernels *k, float *y, const float *a, const float *b, int64_t n);
  void (*add_inplace)(const pt_kernels *k, float *y, const float *a, int64_t n);
  void (*colsum_acc)(const pt_kernels *k, float *acc, const float *x, int N, int D);
  void (*scale)(const pt_kernels *k, float *x, float s, int64_t n);

  /* kernels/loss.h's loss_forward_backward on device y and dy, with HOST targets (int32 ids
   * [N] or float [N,F]; target_bytes of them): returns the sum of the rows' losses, writes
   * dy = scale * d(sum)/dy. dy may be y itself: the gradient then overwrites the logits (the
   * last stage keeps no second [N,F] buffer, engine/stage.h stage_loss_gradient). y is read as
   * loss_rounds_bf16 below says, or, on a table with activation_copies, from y's activation
   * copy where one holds y whole (its floats then not read: the logits the head's product wrote
   * to their place at rest alone, engine/stage_store.h). */
  double (*loss)(const pt_kernels *k, pt_loss_kind kind, const float *y, const void *targets,
                 size_t target_bytes, int N, int F, float scale, float *dy);
  /* One optimizer update of n floats: w, m (and v for AdamW) updated from gradient g (each
   * element read times u->clip); w16 NULL, or n bf16 written pt_bf16_bits(new w)
   * (kernels/precision.h) in the same pass: the weight copy the products read (weight_copy
   * below). */
  void (*optimizer)(const pt_kernels *k, const pt_update *u, float *w, uint16_t *w16,
                    const float *g, float *m, float *v, int64_t n);
  /* The same for many tensors at once (one launch on the GPU): chunks[0..n_chunks) of the
   * flat buffers w, g, m, v (v NULL for SGD), each updated as a call of `optimizer` on its
   * floats with u's factors for its decay flag: u is the update with decay (keep = 1 - lr*wd);
   * a piece without decay gets keep 1 (AdamW) and weight decay 0 (SGD), exactly the factors
   * optimizer_update_tensor gives such a tensor. chunks: memory of the table's device. w16:
   * NULL, or laid out like w, written at the pieces' offsets (the gaps are not touched). */
  void (*optimizer_chunks)(const pt_kernels *k, const pt_update *u, float *w, uint16_t *w16,
                           const float *g, float *m, float *v, const pt_opt_chunk *chunks,
                           int64_t n_chunks);
  /* Sum of squares in double; 1 when every element is finite. */
  double (*sumsq)(const pt_kernels *k, const float *x, int64_t n);
  int (*all_finite)(const pt_kernels *k, const float *x, int64_t n);

  /* --- Fused residual add + norm: a block's residual stream and its norm in one pass over
   * each row (after the fused residual forward of https://github.com/karpathy/llm.c), where
   * the separate calls would write the stream, then read it back.
   * forward_residual: x1 = a + b (the residual add), then y and mean/rstd as the plain
   * forward of x1; x1 may alias a or b. backward_input_residual: dx = dres + d/dx of the norm
   * given dy (x, w, mean/rstd as in backward_input): the residual stream's gradient and the
   * norm's in one pass, what copy(dx, dres) then backward_input with acc = 1 computes, bit for
   * bit on the CPU; dx may alias dres (not dy or x). */
  void (*layernorm_forward_residual)(const pt_kernels *k, float *x1, float *y, float *mean,
                                     float *rstd, const float *a, const float *b, const float *w,
                                     const float *bias, int N, int D, float eps);
  void (*layernorm_backward_input_residual)(const pt_kernels *k, float *dx, const float *dres,
                                            const float *dy, const float *x, const float *w,
                                            const float *mean, const float *rstd, int N, int D);
  void (*rmsnorm_forward_residual)(const pt_kernels *k, float *x1, float *y, float *rstd,
                                   const float *a, const float *b, const float *w, int N, int D,
                                   float eps);
  void (*rmsnorm_backward_input_residual)(const pt_kernels *k, float *dx, const float *dres,
                                          const float *dy, const float *x, const float *w,
                                          const float *rstd, int N, int D);

  /* --- Precision: not in PT_KERNELS_ENTRIES; a table made for a precision sets them. ------ */
  pt_precision precision; /* PT_PRECISION_FP32 (0) in the plain tables */
  int attention_saved_bf16; /* see attention_saved_floats above */
  /* 1 in bf16 tables: the losses (loss, loss_acc) read each y rounded to bf16 (kernels/loss.h
   * pt_loss_read round_bf16), since the stage hands them the logits unrounded
   * (engine/stage_store.h); the same bits as on logits rounded before. */
  int loss_rounds_bf16;
  /* bf16 tables only (NULL elsewhere): x rounded in place to bf16 values; n floats packed into
   * n bf16 (lossless on bf16 values, else rounded) and back (exact). Elementwise. */
  void (*round_bf16)(const pt_kernels *k, float *x, int64_t n);
  void (*pack_bf16)(const pt_kernels *k, uint16_t *dst, const float *src, int64_t n);
  void (*unpack_bf16)(const pt_kernels *k, float *dst, const uint16_t *src, int64_t n);
  /* round_bf16 then pack_bf16 of the same n floats in one pass (x rounded in place, dst its
   * bits): what the stage does to a tensor it keeps at rest right after the step writing it.
   * mark NULL, or finite_check(mark, value) of x as rounded, in the same pass (the stage's check
   * of a layer output it keeps: one read of it fewer). */
  void (*round_pack_bf16)(const pt_kernels *k, uint16_t *dst, float *x, int64_t n,
                          int32_t *mark, int32_t value);
  /* bf16 tables whose norms' backward can round as they write (the GPU's; NULL elsewhere):
   * x non-NULL: the next norm backward_input call (layernorm_backward_input,
   * rmsnorm_backward_input, their _residual ones) whose dx is exactly x[0..n) writes it rounded
   * to bf16 values (round_bf16's bits); returns 0. x NULL: returns 1 when such a call did so
   * since (round_bf16 of it would leave it as it is), else 0, and forgets the x given before.
   * The stage's input gradients (layers/layer.h din_by_norm). */
  int (*round_when_written)(const pt_kernels *k, float *x, int64_t n);
  /* Tables with round_when_written (NULL elsewhere): x[0..n) is the tensor the last
   * round_when_written(x, n) call gave, which a norm's backward wrote rounded
   * (round_when_written(NULL) said 1) and nothing has written since; called after the
   * activation_copies that follows and before anything reads x (the stage's dout of the layer
   * before, engine/stage_store.h store_ready_backward). Returns 1 when the table kept x's bits
   * as that norm wrote them (the GPU: in one of two buffers of its own, the next input
   * gradient's going to the other) and holds them now as x's activation copy, of x's values
   * (share_bf16's values), until the next activation_copies; 0 when it has none or no room
   * (the caller shares x instead). */
  int (*din_copy)(const pt_kernels *k, const float *x, int64_t n);
  /* bf16 tables whose products can take a ready bf16 weight (the GPU's, the CPU's oneDNN one;
   * NULL elsewhere, the emulated CPU table included: it multiplies floats and would gain
   * nothing): from now on a linear entry whose W lies whole in [base, base + n) reads copy at
   * W's offset instead of converting W (kernels/weight_copy.h); copy NULL forgets base. The
   * caller keeps copy[i] == pt_bf16_bits(base[i]) whenever a product may run, so results are
   * the bits converting gives (model/model.c owns the model's copy). */
  void (*weight_copy)(const pt_kernels *k, const float *base, const uint16_t *copy, int64_t n);
  /* bf16 tables whose products (and attention) can read a ready bf16 activation (the GPU's;
   * NULL elsewhere): replaces the table's set of activation copies with r[0..n) (n 0: none).
   * Any product operand, and the bf16 attention's qkv and o, lying whole in one range reads
   * its copy instead of converting (more than the table holds: the rest are converted), and so
   * do a linear's bias gradient, the dy and x of layernorm_backward_weight and
   * rmsnorm_backward_weight (the same floats) and the x of the norms' backward_input
   * (layernorm_backward_input, rmsnorm_backward_input, their _residual ones). The caller
   * keeps every copy equal to pt_bf16_bits of its range, whose floats are bf16 values (or
   * undefined, below), from this call until it replaces the set, and replaces it before
   * anything writes a range (engine/stage_store.c: the saved parts only forward writes, between
   * their move to or from rest and the next forward or move). The table holds the first
   * PT_WEIGHT_COPY_RANGES ranges at least, so a caller may leave the floats of such a range
   * undefined (unset_f32) where only products read them, and the attention where
   * attention_reads_bf16 (layers/layer.h read_at_rest), and those norms (layers/layer.h
   * in_read_at_rest): they then read the copy alone. */
  void (*activation_copies)(const pt_kernels *k, const pt_weight_range *r, int n);
  /* Tables with activation_copies (NULL elsewhere): x[0..n) holds nothing anyone may read as
   * float32 until it is written again (its activation copy stands for it). The emulated GPU
   * fills it with NaN, so a float32 read of it fails the tests; a real GPU does nothing. No row
   * in the cost ledger (kernels/cuda/cost.h): no work a real GPU runs. */
  void (*unset_f32)(const pt_kernels *k, float *x, int64_t n);
  /* Tables with activation_copies (NULL elsewhere); the caller promises that nothing writes
   * x[0..n) until its next activation_copies call. share_bf16: products may keep the first
   * conversion of an operand inside x and read it from then on (a tensor two products read,
   * converted once); round_share_bf16: round_bf16 of x and its bits kept at once (one pass),
   * read as an activation copy (a range inside x that the table keeps already as bf16 values,
   * an attention result of pt_attention_opts.shared, is left out: rounding it is the
   * identity; so is room kept for a share_bf16_into without a place, once written or
   * converted: its floats the caller leaves undefined). Where the table has no room the call
   * only does what its results need (nothing; round_bf16), so every path gives the bits
   * converting gives.
   * share_bf16's values: x holds bf16 values (round_bf16 would leave it as it is), so a
   * linear_backward_weight's bias gradient of a dy inside x may sum its conversion (the same
   * floats); round_share_bf16's x holds them once rounded. round_share_bf16's unset: x's bits
   * are kept but its floats not rounded, left undefined instead (unset_f32: only what reads
   * the copy may read them; 6 bytes an element, not 10), where the table has room; without
   * room they are rounded, as with unset 0. */
  void (*share_bf16)(const pt_kernels *k, const float *x, int64_t n, int values);
  void (*round_share_bf16)(const pt_kernels *k, float *x, int64_t n, int unset);
  /* Tables with activation_copies (NULL elsewhere): share_bf16 of x[0..n), and place[0..n) (n
   * bf16, the caller's) is the table's until the next activation_copies: the first product
   * reading an operand inside x (or swiglu_forward or geglu_forward reading x as gu, a norm's
   * backward_input, plain or _residual, reading x as its dy or writing x as its dx: its bits
   * written there as it reads or writes it) converts the whole of x into place (padding
   * included) and
   * reads it there from then on, so a tensor kept at rest costs no pass of its own; the
   * attention may write its result there. alone: nothing reads x's floats from here on but
   * products and an attention_reads_bf16 attention (layers/layer.h read_at_rest and
   * backward_at_rest), so the kernel writing x (a norm, swiglu, geglu, linear_forward,
   * linear_forward_gelu's y and h, linear_backward_input's dx without acc, that attention's o
   * forward, its dqkv backward) may write its bf16 values to place alone, x's floats left
   * undefined. place NULL: room the table keeps
   * instead (as share_bf16's conversions), for a tensor nobody keeps at rest
   * (engine/stage_store.c: the stash of a backward_weight that follows at once), which no sum (a
   * bias or norm weight gradient, activation_copies) reads before its floats are undefined
   * (unset_f32): those then read that room; where the table has none, x is not shared at all
   * (shared_into_done 0).
   * shared_into_done(x): 1 once that conversion is queued (place then holds pt_bf16_bits of
   * x[0..n), x itself not rounded), 0 while no product has read x (the caller fills place);
   * asked before the next activation_copies. */
  void (*share_bf16_into)(const pt_kernels *k, const float *x, int64_t n, uint16_t *place,
                          int alone);
  int (*shared_into_done)(const pt_kernels *k, const float *x);
  /* Tables with activation_copies (NULL elsewhere: 0): 1 when the attention entries of this
   * shape and opts read qkv and o (and backward its dout) only as bf16, from their activation
   * copies where registered
   * (the GPU's cuDNN path, kernels/cuda/attention_bf16.h), and forward, with opts->shared,
   * writes o straight to its place at rest where o was handed over alone (share_bf16_into): its
   * floats then undefined; 0 where they read them as float32 (the in-house fallback:
   * soft-capping, shapes the library refuses). Decided by the arguments alone, once per shape
   * for the table's life, and the same answer the calls follow, so a layer may mark qkv and o
   * read_at_rest on it (layers/layer.h). opts->documents > 0 asks about packed documents of
   * that count, 0 about whole rows: packed documents whose own answer is 0 run the fallback
   * even where the whole rows' is 1, and it widens the copies of qkv and o itself (so a caller
   * leaves dout's floats undefined with documents only where it asked with their count). */
  int (*attention_reads_bf16)(const pt_kernels *k, int B, int T, int d, int H, int KVH,
                              const pt_attention_opts *opts);
  /* Step statistics kept on the device until the caller reads them once (device/stats.h), so a
   * step need not wait for the device: these return without waiting. `sum`, `out` and `mark`
   * are device memory (host memory for the CPU table, where the result is there at once).
   * loss_acc: as loss, the rows' loss sum added to *sum (one double); the host targets are
   * taken before it returns (the caller may reuse them at once; the GPU stages them in pinned
   * memory of its own, no wait); mark NULL, or finite_check(mark, value) of y as the loss reads
   * it, in the loss's pass (kernels/loss.h pt_loss_read); y read from its activation copy as
   * loss says; dy16 NULL, or the gradient goes there (which may be that copy of y: the copy is
   * then the gradient's bits, no longer y's)
   * as n = N*F bf16 (pt_bf16_bits of each value dy would get: what converting dy gives) and dy's
   * floats are left undefined (the GPU writes none of them: 2 bytes a logit instead of 4 and no
   * conversion after; engine/stage_store.h, layers/layer.h dout_read_at_rest). finite_check:
   * *mark = max(*mark, value) when x holds a NaN or an infinity (one int32; value > 0, so a
   * zeroed mark means "all finite" and the largest value of the checks that failed is left,
   * whatever the order the device ran them in). */
  void (*loss_acc)(const pt_kernels *k, pt_loss_kind kind, const float *y, const void *targets,
                   size_t target_bytes, int N, int F, float scale, float *dy, uint16_t *dy16,
                   double *sum, int32_t *mark, int32_t value);
  /* sumsq_spans_into: out[j] = sumsq of x[spans[j].offset, + spans[j].n), bit for bit, for
   * every j < n_spans (0 for an empty span; one double each); spans: host memory, read before
   * it returns. On the GPU two launches in all (kernels/cuda/ops_cuda.h cuda_sumsq_spans), the
   * layout built once per distinct list: a caller passes the same list every step. */
  void (*sumsq_spans_into)(const pt_kernels *k, double *out, const float *x,
                           const pt_sum_span *spans, int n_spans);
  void (*finite_check)(const pt_kernels *k, int32_t *mark, int32_t value, const float *x,
                       int64_t n);
};

/* Every entry, for the implementations' initialisers: a table is
 *   {.name = "...", PT_KERNELS_ENTRIES(PT_KERNELS_INIT)}
 * with a function of each entry's name in scope, so one left out fails to compile. */
#define PT_KERNELS_ENTRIES(X)                                                                     \
  X(linear_forward) X(linear_forward_residual) X(linear_backward_input)                           \
  X(linear_backward_weight) X(linear_forward_gelu) X(linear_backward_input_gelu)                  \
  X(layernorm_forward) X(layernorm_backward_input)                      \
  X(layernorm_backward_weight) X(attention_saved_floats) X(attention_scratch_floats)              \
  X(attention_forward) X(attention_backward) X(rmsnorm_forward) X(rmsnorm_backward_input)         \
  X(rmsnorm_backward_weight) X(rope) X(swiglu_forward) X(swiglu_backward)                        \
  X(gelu_forward) X(gelu_backward) X(relu_forward) X(relu_backward)                               \
  X(embedding_forward) X(embedding_backward) X(pos_forward) X(pos_backward_weight) X(copy)        \
  X(add) X(add_inplace) X(colsum_acc) X(scale) X(loss) X(optimizer) X(optimizer_chunks)           \
  X(sumsq) X(all_finite)                                                                          \
  X(loss_acc) X(sumsq_spans_into) X(finite_check)                                                \
  X(layernorm_forward_residual) X(layernorm_backward_input_residual)                              \
  X(rmsnorm_forward_residual) X(rmsnorm_backward_input_residual)                                  \
  X(head_rmsnorm_forward) X(head_rmsnorm_backward_input) X(head_rmsnorm_backward_weight)          \
  X(geglu_forward) X(geglu_backward) X(softcap_forward) X(softcap_backward) X(add_scalar)
#define PT_KERNELS_INIT(entry) .entry = entry,

/* The CPU's table (kernels/cpu/kernels_cpu.c): host memory, results bitwise reproducible for a
 * given binary. Every build has it. */
extern const pt_kernels kernels_cpu;
/* The CPU's table for a precision (kernels/cpu/kernels_cpu_precision.c): kernels_cpu itself for
 * fp32; for tf32 and bf16, kernels_cpu with the linear entries taking their products' inputs
 * rounded (into host scratch of the calling thread, kept for the process) and, for bf16, the
 * round/pack entries. bf16's products are bf16 products in hardware (oneDNN,
 * kernels_cpu_bf16_hardware) where this build has oneDNN and the CPU multiplies bf16, and else
 * (or with PIPETRAIN_CPU_BF16=emulated in the environment) float32 products of rounded copies
 * (kernels_cpu_for_emulated). Both give float32 sums of the same bf16 products; the order of
 * the sums differs, so their results agree to rounding, not bit for bit. */
const pt_kernels *kernels_cpu_for(pt_precision p);
const pt_kernels *kernels_cpu_for_emulated(pt_precision p);
const pt_kernels *kernels_cpu_bf16_hardware(void); /* NULL: none in this build or on this CPU */
/* Which bf16 products kernels_cpu_for(PT_PRECISION_BF16) has, for the start-up line: "oneDNN
 * <instruction set>" or "emulated". */
const char *kernels_cpu_bf16_products(void);
/* The CPU kernels' threads per process: OpenBLAS's pool, which the oneDNN products follow
 * (kernels/cpu/threads.c). OPENBLAS_NUM_THREADS in the environment sets the start value. */
void kernels_cpu_set_threads(int n);
int kernels_cpu_threads(void);
/* Those tables round a product's activation operands this many rows at a time, so their scratch
 * is at most a weight [No, Ni] plus PT_PRECISION_BLOCK_ROWS * (Ni + No) floats. */
#define PT_PRECISION_BLOCK_ROWS 256

#endif
