/* bf16 attention on the GPU (attention_bf16.h): the library behind attention_cudnn.h where it
 * takes the shape, the in-house fused float32 kernels elsewhere. */
#include "kernels/cuda/attention_bf16.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/cost.h"
#include "kernels/cuda/ops_cuda.h"

static int same_shape(const attention_cudnn_shape *a, const attention_cudnn_shape *b) {
  return a->B == b->B && a->T == b->T && a->H == b->H && a->KVH == b->KVH && a->hd == b->hd &&
         a->window == b->window && a->scale == b->scale && a->seqs == b->seqs;
}

/* The plan of shape s (NULL: refused), built the first time s is seen; seen 0: NULL for a shape
 * not seen yet, nothing built. */
static attention_cudnn_plan *plan_for(gpu_ctx *g, cuda_attention_bf16 *a,
                                      const attention_cudnn_shape *s, int seen) {
  for (int i = 0; i < a->n_shapes; i++)
    if (same_shape(&a->shapes[i].shape, s)) return a->shapes[i].plan;
  if (!seen) return NULL;
  if (a->n_shapes == a->cap_shapes) {
    a->cap_shapes = a->cap_shapes ? 2 * a->cap_shapes : 8;
    a->shapes = realloc(a->shapes, sizeof *a->shapes * (size_t)a->cap_shapes);
    if (!a->shapes) pt_fatal("attention: out of memory for %d shapes", a->cap_shapes);
  }
  char why[768] = "";
  attention_cudnn_plan *p = attention_cudnn_plan_build(g, s, why, sizeof why);
  if (!p)
    pt_notice("bf16 attention B=%d T=%d H=%d KVH=%d hd=%d window=%d%s: %s; the in-house float32 "
              "kernels run it", s->B, s->T, s->H, s->KVH, s->hd, s->window,
              s->seqs ? " packed documents" : "", why);
  a->shapes[a->n_shapes++] = (cuda_attention_bf16_entry){.shape = *s, .plan = p};
  return p;
}

/* Packed documents: the sequences of the library's ragged plan, opts->documents (kernels.h)
 * rounded up to a power of two, so a run's varying counts share a few plans (a slot past the
 * last document costs the library only an empty sequence); -1 (the in-house kernels, said once)
 * without a count or where the table's offsets would not fit in int32. */
static int ragged_slots(cuda_attention_bf16 *a, int B, int T, int d, int H, int KVH,
                        const pt_attention_opts *opts) {
  const int docs = opts ? opts->documents : 0;
  const int64_t tokens = (int64_t)B * T, row = d + 2 * (int64_t)KVH * (d / H);
  const char *why = docs <= 0 ? "the call gives no count of its documents (kernels.h "
                                "pt_attention_opts.documents), which cuDNN's ragged table needs"
                    : docs > tokens ? "more documents than tokens"
                    : tokens * row > INT32_MAX ? "the ragged offsets exceed int32" : NULL;
  if (!why) {
    int seqs = 1;
    while (seqs < docs) seqs *= 2;
    return seqs;
  }
  if (!a->said_documents)
    pt_notice("bf16 attention B=%d T=%d H=%d KVH=%d hd=%d with packed documents "
              "(data.documents): %s; the in-house float32 kernels run it (and every other such "
              "shape)", B, T, H, KVH, d / H, why);
  a->said_documents = 1;
  return -1;
}

/* The library's plan for this call (its shape in *s), or NULL for the in-house kernels (bad
 * shapes included: those report their error there); docs: packed documents (their count in
 * opts); seen 0: only a plan built before. */
static attention_cudnn_plan *route(gpu_ctx *g, cuda_attention_bf16 *a, int B, int T, int d,
                                   int H, int KVH, int docs,
                                   const pt_attention_opts *opts, attention_cudnn_shape *s,
                                   int seen) {
  if (B <= 0 || T <= 0 || d <= 0 || H <= 0 || KVH <= 0 || d % H != 0 || H % KVH != 0)
    return NULL;
  if (opts && opts->softcap > 0.0f) {
    if (!a->said_softcap)
      pt_notice("bf16 attention B=%d T=%d H=%d KVH=%d hd=%d with soft-capping (attn_softcap "
                "%g): cuDNN's fused attention has no logit soft-cap; the in-house float32 "
                "kernels run it (and every other soft-capped shape)", B, T, H, KVH, d / H,
                (double)opts->softcap);
    a->said_softcap = 1;
    return NULL;
  }
  const int seqs = docs ? ragged_slots(a, B, T, d, H, KVH, opts) : 0;
  if (seqs < 0) return NULL;
  /* a window as long as the sequence masks nothing: the plain plan */
  const int window = opts && opts->window > 0 && opts->window < T ? opts->window : 0;
  const float scale = opts && opts->scale > 0.0f ? opts->scale : 1.0f / sqrtf((float)(d / H));
  *s = (attention_cudnn_shape){.B = B, .T = T, .H = H, .KVH = KVH, .hd = d / H,
                               .window = window, .scale = scale, .seqs = seqs};
  return plan_for(g, a, s, seen);
}

/* Elements of qkv and o of a valid shape. */
static void sizes(int B, int T, int d, int H, int KVH, int64_t *n_qkv, int64_t *n_o) {
  *n_o = (int64_t)B * T * d;
  *n_qkv = (int64_t)B * T * (d + 2 * KVH * (d / H));
}

/* Device buffer *buf of at least bytes (grown; gpu_free waits for work still using the old). */
static void *grown(gpu_ctx *g, void **buf, size_t *have, size_t bytes) {
  if (*have < bytes) {
    if (*buf) gpu_free(*buf);
    *buf = gpu_alloc(g, bytes);
    *have = bytes;
  }
  return *buf;
}

/* bf16 room for qkv, o, dout and dqkv: n_qkv elements twice, n_o twice. */
static uint16_t *bf16_room(gpu_ctx *g, cuda_attention_bf16 *a, int64_t n_qkv, int64_t n_o) {
  void *p = a->bf16;
  uint16_t *r = grown(g, &p, &a->bf16_bytes, sizeof(uint16_t) * (size_t)(2 * n_qkv + 2 * n_o));
  a->bf16 = r;
  return r;
}

/* Float32 room of n floats (fallback_floats). */
static float *float_room(gpu_ctx *g, cuda_attention_bf16 *a, int64_t n) {
  void *p = a->floats;
  float *r = grown(g, &p, &a->floats_bytes, sizeof(float) * (size_t)n);
  a->floats = r;
  return r;
}

/* Packed documents (s->seqs > 0): the ragged table of doc_start built in room kept here (a
 * kernel per call: forward and backward of a micro-batch are apart); NULL for whole rows. */
static const int32_t *ragged_table(gpu_ctx *g, cuda_attention_bf16 *a,
                                   const attention_cudnn_shape *s, const int32_t *doc_start) {
  if (s->seqs <= 0) return NULL;
  const int64_t ints = 4 * attention_cudnn_ragged_stride(s->seqs);
  void *p = a->ragged;
  int32_t *table = grown(g, &p, &a->ragged_bytes, sizeof(int32_t) * (size_t)ints);
  a->ragged = table;
  cuda_op_attention_ragged(g, table, doc_start, s);
  return table;
}

static void *workspace(gpu_ctx *g, cuda_attention_bf16 *a, const attention_cudnn_plan *p) {
  size_t bytes = attention_cudnn_plan_workspace(p);
  return bytes ? grown(g, &a->workspace, &a->workspace_bytes, bytes) : NULL;
}

/* The ledger (cost.h): the two products QK^T and PV over the causal half of the scores on
 * tensor cores, 4*B*H*T*T*hd/2 FLOPs (2 per multiply-add, the diagonal's own half not counted),
 * times the share of the causal pairs a window keeps (band);
 * backward's five products (S again, dP, dV, dK, dQ) 2.5 times that. The softmax's arithmetic
 * is not counted. Bytes: the bf16 operands read and results written once, lse (float32) once. */
static void cudnn_note(const char *name, double products, const attention_cudnn_shape *s,
                      int64_t n_qkv, int64_t n_o, double tensors) {
  const int B = s->B, T = s->T, H = s->H;
  const double hd_all = (double)n_o / ((double)B * T); /* H*hd */
  const pt_attention_opts band = {.window = s->window};
  const double share = pt_attention_pairs(T, &band) / pt_attention_pairs(T, NULL);
  gpu_cost_note(name, share * products * 4.0 * B * T * (double)T * hd_all / 2.0, 0.0,
                2.0 * tensors * (double)(n_qkv + n_o) + 4.0 * B * H * (double)T);
}

/* x's registered bf16 copy, else x converted where the table shares it (its place at rest, say:
 * kernels.h share_bf16_into), else into buf. */
static const uint16_t *operand(gpu_ctx *g, const cuda_attention_bf16 *a, uint16_t *buf,
                               const float *x, int64_t n) {
  const uint16_t *copy = a->copies ? weight_copies_find(&a->copies->acts, x, n) : NULL;
  if (!copy && a->copies) copy = cuda_bf16_shared_operand(g, a->copies, x, n);
  if (copy) return copy;
  cuda_pack_bf16(g, buf, x, n);
  return buf;
}

/* Where the library writes the bf16 result it widens into x[0..n): when the caller shares x
 * (kernels.h pt_attention_opts.shared), x's place where the table has one (share_bf16_into: at
 * rest, or room the table keeps; *alone: handed over alone, the result stands there for x, not
 * widened),
 * else room the table keeps where it has it; else buf. Any copy of x from before is
 * forgotten: x is rewritten. */
static uint16_t *result_room(gpu_ctx *g, const cuda_attention_bf16 *a, uint16_t *buf,
                             const float *x, int64_t n, const pt_attention_opts *opts,
                             int *alone) {
  *alone = 0;
  if (!a->copies) return buf;
  cuda_bf16_forget(a->copies, x, n);
  if (!opts || !opts->shared) return buf;
  uint16_t *kept = cuda_bf16_take_place(a->copies, x, n, 1);
  if (kept) {
    *alone = 1;
    return kept;
  }
  kept = cuda_bf16_take_place(a->copies, x, n, 0);
  if (!kept) kept = cuda_bf16_keep_room(g, a->copies, n);
  return kept ? kept : buf;
}

/* The result r widened into x; kept as x's copy when r is the table's room. alone: r is x's
 * place, x's copy alone (forward's o, backward's dqkv of a stash handed over); x's floats are
 * left undefined (NaN on the emulator, so a float32 read of them fails the tests). */
static void result_widen(gpu_ctx *g, const cuda_attention_bf16 *a, float *x, const uint16_t *r,
                         const uint16_t *buf, int64_t n, int alone) {
  if (alone) {
    cuda_bf16_keep_copy(a->copies, x, r, n);
    cuda_unset_f32(g, x, n);
    return;
  }
  cuda_unpack_bf16(g, x, r, n);
  if (r != buf) cuda_bf16_keep_result(a->copies, x, r, n);
}

/* The in-house kernels' float32 x: x itself, but where the shape is one the library takes
 * (packed documents sent the call here) and x has an activation copy, whose floats the caller
 * may have left undefined (kernels.h attention_reads_bf16): the copy widened into buf. */
static const float *fallback_floats(gpu_ctx *g, const cuda_attention_bf16 *a, int takes,
                                    float *buf, const float *x, int64_t n) {
  const uint16_t *copy = takes && a->copies ? weight_copies_find(&a->copies->acts, x, n) : NULL;
  if (!copy) return x;
  cuda_unpack_bf16(g, buf, copy, n);
  return buf;
}

void cuda_attention_bf16_forward(gpu_ctx *g, cuda_attention_bf16 *a, float *o, float *lse,
                                 const float *qkv, int B, int T, int d, int H, int KVH,
                                 const int32_t *doc_start, const pt_attention_opts *opts) {
  attention_cudnn_shape s;
  a->left_at = NULL; /* a dqkv left as bits is the next rope's alone */
  attention_cudnn_plan *p = route(g, a, B, T, d, H, KVH, doc_start != NULL, opts, &s, 1);
  if (!p) {
    a->fallback_calls++;
    cuda_op_attention_forward(g, o, lse, qkv, B, T, d, H, KVH, doc_start, opts, NULL);
    return;
  }
  int64_t n_qkv, n_o;
  sizes(B, T, d, H, KVH, &n_qkv, &n_o);
  uint16_t *qkv_b = bf16_room(g, a, n_qkv, n_o), *o_b = qkv_b + n_qkv;
  int alone;
  uint16_t *o_r = result_room(g, a, o_b, o, n_o, opts, &alone);
  void *ws = workspace(g, a, p);
  const uint16_t *qkv_in = operand(g, a, qkv_b, qkv, n_qkv);
  const int32_t *table = ragged_table(g, a, &s, doc_start); /* its own launch, noted before */
  cudnn_note("cudnn_attention_forward", 1.0, &s, n_qkv, n_o, 1.0); /* before: a timed ledger */
  attention_cudnn_forward(g, p, ws, o_r, lse, qkv_in, table);
  result_widen(g, a, o, o_r, o_b, n_o, alone);
  a->library_calls++;
}

void cuda_attention_bf16_backward(gpu_ctx *g, cuda_attention_bf16 *a, float *dqkv,
                                  const float *dout, const float *qkv, const float *o,
                                  const float *lse, int B, int T, int d, int H, int KVH,
                                  const int32_t *doc_start, const pt_attention_opts *opts) {
  attention_cudnn_shape s;
  a->left_at = NULL;
  attention_cudnn_plan *p = route(g, a, B, T, d, H, KVH, doc_start != NULL, opts, &s, 1);
  int64_t n_qkv = 0, n_o = 0;
  if (!p) {
    a->fallback_calls++;
    /* only a shape asked for before (attention_reads_bf16) may have left its floats */
    const int takes = doc_start && route(g, a, B, T, d, H, KVH, 0, opts, &s, 0);
    if (takes) sizes(B, T, d, H, KVH, &n_qkv, &n_o);
    float *f = takes ? float_room(g, a, n_qkv + n_o) : NULL;
    cuda_op_attention_backward(g, dqkv, dout, fallback_floats(g, a, takes, f, qkv, n_qkv),
                               fallback_floats(g, a, takes, f ? f + n_qkv : NULL, o, n_o), lse,
                               B, T, d, H, KVH, doc_start, opts, NULL);
    return;
  }
  sizes(B, T, d, H, KVH, &n_qkv, &n_o);
  uint16_t *qkv_b = bf16_room(g, a, n_qkv, n_o), *o_b = qkv_b + n_qkv;
  uint16_t *dout_b = o_b + n_o, *dqkv_b = dout_b + n_o;
  const uint16_t *qkv_in = operand(g, a, qkv_b, qkv, n_qkv), *o_in = operand(g, a, o_b, o, n_o);
  const uint16_t *dout_in = operand(g, a, dout_b, dout, n_o); /* the product's bits, alone */
  int alone;
  uint16_t *dqkv_r = result_room(g, a, dqkv_b, dqkv, n_qkv, opts, &alone);
  void *ws = workspace(g, a, p);
  const int32_t *table = ragged_table(g, a, &s, doc_start);
  cudnn_note("cudnn_attention_backward", 2.5, &s, n_qkv, n_o, 2.0);
  attention_cudnn_backward(g, p, ws, dqkv_r, dout_in, qkv_in, o_in, lse, table);
  a->library_calls++;
  if (opts && opts->rotated && dqkv_r == dqkv_b) { /* the rope reads these bits instead */
    a->left_at = dqkv;
    a->left_bits = dqkv_b;
    a->left_n = n_qkv;
    cuda_unset_f32(g, dqkv, n_qkv);
    return;
  }
  result_widen(g, a, dqkv, dqkv_r, dqkv_b, n_qkv, alone);
}

const uint16_t *cuda_attention_bf16_left(cuda_attention_bf16 *a, const float *x, int64_t n) {
  const uint16_t *bits = a->left_at == x && a->left_n == n ? a->left_bits : NULL;
  a->left_at = NULL;
  return bits;
}

int cuda_attention_bf16_takes(gpu_ctx *g, cuda_attention_bf16 *a, int B, int T, int d, int H,
                               int KVH, const pt_attention_opts *opts) {
  attention_cudnn_shape s;
  return route(g, a, B, T, d, H, KVH, opts && opts->documents > 0, opts, &s, 1) != NULL;
}

void cuda_attention_bf16_free(cuda_attention_bf16 *a) {
  for (int i = 0; i < a->n_shapes; i++)
    if (a->shapes[i].plan) attention_cudnn_plan_free(a->shapes[i].plan);
  free(a->shapes);
  if (a->bf16) gpu_free(a->bf16);
  if (a->workspace) gpu_free(a->workspace);
  if (a->floats) gpu_free(a->floats);
  if (a->ragged) gpu_free(a->ragged);
  *a = (cuda_attention_bf16){0};
}
