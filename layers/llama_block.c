/* llama_block: the Llama decoder layer (Hugging Face's LlamaDecoderLayer) on [B,T,dim],
 * pre-RMSNorm, no biases:
 *   h = x + o(attn(rope(q(n1(x))), rope(k(n1(x))), v(n1(x))))
 *   y = h + down(silu(gate(n2(h))) * up(n2(h)))
 * Causal grouped-query attention (heads query heads, kv_heads kv heads; query head j reads kv
 * head j / (heads / kv_heads)), scale 1/sqrt(head_dim), head_dim = dim / heads; rotary
 * embeddings in Hugging Face's rotate-half convention (kernels.h, rope). Args: heads (default
 * model.heads), kv_heads (default heads), ffn_dim (required), rope_theta (default 10000), eps
 * (RMSNorm, default 1e-6).
 *
 * Parameters in the order of docs/layers.md. q, k, v are used as one stacked [(heads +
 * 2 kv_heads) head_dim, dim] matrix and gate, up as one [2 ffn_dim, dim] matrix (one GEMM each):
 * the model lays a layer's tensors out in order, each padded to 16 floats, so configure
 * requires the q, k and gate tensors' sizes to be multiples of 16 floats, and the steps check
 * the adjacency (pt_fatal otherwise: a caller that allocates the tensors apart).
 */
#include <math.h>

#include "core/error.h"
#include "layers/builtin.h"

enum { ATTN_NORM, Q_W, K_W, V_W, O_W, MLP_NORM, GATE_W, UP_W, DOWN_W, N_PARAMS };

/* Views into the saved area. The first group is written by forward (qkv after the rotation,
 * as attention read it); the stash by backward_input for backward_weight. attn is the
 * attention's own saved state, attention_saved_floats of the table. */
typedef struct {
  float *rstd1, *xn1, *qkv, *attn, *atty, *h, *rstd2, *xn2, *gu, *a;
  float *dh, *dxn2, *dgu, *dqkv, *dxn1; /* stash; dqkv before the rotation (w.r.t. q(n1(x))) */
} llama_saved;

enum { N_SAVED = 15 };

typedef struct {
  int64_t N, d, H, KVH, hd, F, W; /* W = (H + 2 KVH) hd: the qkv row */
} llama_dims;

static llama_dims dims_of(const pt_layer *L, int B, int T) {
  llama_dims m;
  m.N = (int64_t)B * T;
  m.d = L->out_dim;
  m.H = L->iarg[0];
  m.KVH = L->iarg[1];
  m.F = L->iarg[2];
  m.hd = m.d / m.H;
  m.W = (m.H + 2 * m.KVH) * m.hd;
  return m;
}

static int64_t attn_floats(const pt_layer *L, const pt_kernels *k, int B, int T) {
  return k->attention_saved_floats(k, B, T, L->out_dim, (int)L->iarg[0], (int)L->iarg[1]);
}

/* Floats of each saved view, in the order of llama_saved's fields, each rounded up to 16 so every
 * view stays 64-byte aligned. */
static void saved_sizes(const llama_dims *m, int64_t attn, int64_t sizes[N_SAVED]) {
  const int64_t N = m->N, d = m->d;
  const int64_t s[N_SAVED] = {N,     N * d, N * m->W,         attn,  N * d,     N * d, N,
                              N * d, 2 * N * m->F, N * m->F, N * d, N * d, 2 * N * m->F,
                              N * m->W, N * d};
  for (int i = 0; i < N_SAVED; i++) sizes[i] = (s[i] + 15) & ~(int64_t)15;
}

static void views(const pt_layer *L, const pt_kernels *k, int B, int T, void *saved,
                  llama_saved *v) {
  llama_dims m = dims_of(L, B, T);
  int64_t sizes[N_SAVED];
  saved_sizes(&m, attn_floats(L, k, B, T), sizes);
  float **slots[N_SAVED] = {&v->rstd1, &v->xn1, &v->qkv,  &v->attn, &v->atty,
                            &v->h,     &v->rstd2, &v->xn2, &v->gu,  &v->a,
                            &v->dh,    &v->dxn2, &v->dgu, &v->dqkv, &v->dxn1};
  float *p = saved;
  for (int i = 0; i < N_SAVED; i++) {
    *slots[i] = p;
    p += sizes[i];
  }
}

static size_t llama_saved_bytes(const pt_layer *L, int B, int T) {
  llama_dims m = dims_of(L, B, T);
  int64_t sizes[N_SAVED], total = 0;
  saved_sizes(&m, attn_floats(L, layer_kernels(L), B, T), sizes);
  for (int i = 0; i < N_SAVED; i++) total += sizes[i];
  return sizeof(float) * (size_t)total;
}

/* backward_input's da[N,F] and datty[N,d], then the attention's scratch (forward's at 0). */
static size_t llama_scratch_bytes(const pt_layer *L, const pt_kernels *k, int B, int T) {
  llama_dims m = dims_of(L, B, T);
  int64_t attn = k->attention_scratch_floats(k, B, T, (int)m.d, (int)m.H, (int)m.KVH);
  int64_t da = (m.N * m.F + 15) & ~(int64_t)15, datty = (m.N * m.d + 15) & ~(int64_t)15;
  return sizeof(float) * (size_t)(da + datty + attn + 64);
}

static void llama_configure(pt_layer *L, const pt_layer_setup *s, spec_errors *e) {
  int64_t d = layer_require_model_int(s, s->spec->dim, "dim", "llama_block", e);
  int64_t H = spec_get_int(s->args, "heads", s->spec->heads <= 0, s->spec->heads, 1, 1 << 16, e);
  int64_t KVH = spec_get_int(s->args, "kv_heads", 0, H, 1, 1 << 16, e);
  int64_t F = spec_get_int(s->args, "ffn_dim", 1, 0, 1, 1 << 24, e);
  L->farg[0] = spec_get_num(s->args, "rope_theta", 0, 10000.0, 1e-30, 1e30, e);
  L->farg[1] = spec_get_num(s->args, "eps", 0, 1e-6, 1e-12, 1.0, e);
  layer_expect_features(s, d, "llama_block", e);
  if (e->failed) return;
  if (d % H != 0) {
    spec_error(e, s->args, 0, "llama_block: dim %lld is not divisible by heads %lld",
               (long long)d, (long long)H);
    return;
  }
  int64_t hd = d / H;
  if (H % KVH != 0)
    spec_error(e, s->args, 0, "llama_block: kv_heads %lld must divide heads %lld",
               (long long)KVH, (long long)H);
  else if (hd % 2 != 0)
    spec_error(e, s->args, 0, "llama_block: head dim %lld (dim / heads) must be even for the "
               "rotary embedding", (long long)hd);
  else if ((KVH * hd * d) % 16 != 0 || (F * d) % 16 != 0 || (d * d) % 16 != 0)
    spec_error(e, s->args, 0, "llama_block: dim*dim, kv_heads*head_dim*dim and ffn_dim*dim "
               "must be multiples of 16 (stacked q|k|v and gate|up weights); use a dim that is "
               "a multiple of 16");
  if (e->failed) return;
  L->out_dim = (int)d;
  L->iarg[0] = H;
  L->iarg[1] = KVH;
  L->iarg[2] = F;
  static const char *const names[N_PARAMS] = {
      "attn_norm.weight", "attn.q.weight",   "attn.k.weight", "attn.v.weight",
      "attn.o.weight",    "mlp_norm.weight", "mlp.gate.weight", "mlp.up.weight",
      "mlp.down.weight"};
  const int64_t rows[N_PARAMS] = {d, H * hd, KVH * hd, KVH * hd, d, d, F, F, d};
  const int64_t cols[N_PARAMS] = {0, d, d, d, H * hd, 0, d, d, F};
  for (int p = 0; p < N_PARAMS; p++)
    layer_add_param(L, names[p], cols[p] ? 2 : 1, rows[p], cols[p], 0, 0);
  L->iarg[3] = layer_count_type(s->spec, "llama_block");
}

static void llama_init(pt_layer *L, uint64_t seed) {
  /* N(0, 0.02) (Hugging Face's initializer_range), norms 1; the projections into the residual
   * stream (o, down) scaled by 1/sqrt(2 * blocks) as GPT-2's are. */
  float resid_std = 0.02f / sqrtf(2.0f * (float)(L->iarg[3] > 0 ? L->iarg[3] : 1));
  for (int p = 0; p < L->n_params; p++) {
    if (L->params[p].ndim == 1)
      layer_init_const(L, p, 1.0f);
    else
      layer_init_normal(L, p, seed, (p == O_W || p == DOWN_W) ? resid_std : 0.02f);
  }
}

/* The stacked matrices the steps multiply by: q|k|v and gate|up must be adjacent in v. */
static void check_stacked(const pt_layer *L, float *const *v) {
  if (v[K_W] != v[Q_W] + L->params[Q_W].numel || v[V_W] != v[K_W] + L->params[K_W].numel ||
      v[UP_W] != v[GATE_W] + L->params[GATE_W].numel)
    pt_fatal("llama_block (layer %d): attn.q/k/v and mlp.gate/up tensors are not adjacent in "
             "the parameter buffer; allocate a layer's tensors in order, 16-float aligned",
             L->index);
}

static void llama_forward(pt_layer *L, const pt_io *io) {
  llama_dims m = dims_of(L, io->B, io->T);
  const int N = (int)m.N, d = (int)m.d, H = (int)m.H, KVH = (int)m.KVH, F = (int)m.F;
  const pt_kernels *k = io->k;
  float *const *w = L->w;
  const float *x = io->in;
  check_stacked(L, w);
  llama_saved s;
  views(L, k, io->B, io->T, io->saved, &s);
  k->rmsnorm_forward(k, s.xn1, s.rstd1, x, w[ATTN_NORM], N, d, (float)L->farg[1]);
  k->linear_forward(k, s.qkv, s.xn1, w[Q_W], NULL, N, d, (int)m.W);
  k->rope(k, s.qkv, io->B, io->T, H, KVH, (int)m.hd, (float)L->farg[0], 1, io->positions);
  k->attention_forward(k, s.atty, s.attn, s.qkv, io->B, io->T, d, H, KVH, io->doc_start,
                       io->scratch);
  k->linear_forward(k, s.h, s.atty, w[O_W], NULL, N, d, d);
  k->add_inplace(k, s.h, x, m.N * d);
  k->rmsnorm_forward(k, s.xn2, s.rstd2, s.h, w[MLP_NORM], N, d, (float)L->farg[1]);
  k->linear_forward(k, s.gu, s.xn2, w[GATE_W], NULL, N, d, 2 * F);
  k->swiglu_forward(k, s.a, s.gu, N, F);
  k->linear_forward(k, io->out, s.a, w[DOWN_W], NULL, N, F, d);
  k->add_inplace(k, io->out, s.h, m.N * d);
}

static void llama_backward_input(pt_layer *L, const pt_io *io) {
  llama_dims m = dims_of(L, io->B, io->T);
  const int N = (int)m.N, d = (int)m.d, H = (int)m.H, KVH = (int)m.KVH, F = (int)m.F;
  const pt_kernels *k = io->k;
  float *const *w = L->w;
  const float *dy = io->dout;
  llama_saved s;
  views(L, k, io->B, io->T, io->saved, &s);
  float *da = io->scratch, *datty = da + ((m.N * F + 15) & ~(int64_t)15);
  float *attn_scratch = datty + ((m.N * d + 15) & ~(int64_t)15);
  k->linear_backward_input(k, da, dy, w[DOWN_W], N, F, d, 0);
  k->swiglu_backward(k, s.dgu, da, s.gu, N, F);
  k->linear_backward_input(k, s.dxn2, s.dgu, w[GATE_W], N, d, 2 * F, 0);
  k->copy(k, s.dh, dy, m.N * d);
  k->rmsnorm_backward_input(k, s.dh, s.dxn2, s.h, w[MLP_NORM], s.rstd2, N, d, 1);
  k->linear_backward_input(k, datty, s.dh, w[O_W], N, d, d, 0);
  k->attention_backward(k, s.dqkv, datty, s.qkv, s.atty, s.attn, io->B, io->T, d, H, KVH,
                        io->doc_start, attn_scratch);
  k->rope(k, s.dqkv, io->B, io->T, H, KVH, (int)m.hd, (float)L->farg[0], -1, io->positions);
  k->linear_backward_input(k, s.dxn1, s.dqkv, w[Q_W], N, d, (int)m.W, 0);
  if (!io->din) return;
  k->copy(k, io->din, s.dh, m.N * d);
  k->rmsnorm_backward_input(k, io->din, s.dxn1, io->in, w[ATTN_NORM], s.rstd1, N, d, 1);
}

static void llama_backward_weight(pt_layer *L, const pt_io *io) {
  llama_dims m = dims_of(L, io->B, io->T);
  const int N = (int)m.N, d = (int)m.d, F = (int)m.F;
  const pt_kernels *k = io->k;
  float *const *g = L->g;
  check_stacked(L, g);
  llama_saved s;
  views(L, k, io->B, io->T, io->saved, &s);
  k->linear_backward_weight(k, g[DOWN_W], NULL, io->dout, s.a, N, F, d);
  k->linear_backward_weight(k, g[GATE_W], NULL, s.dgu, s.xn2, N, d, 2 * F);
  k->rmsnorm_backward_weight(k, g[MLP_NORM], s.dxn2, s.h, s.rstd2, N, d);
  k->linear_backward_weight(k, g[O_W], NULL, s.dh, s.atty, N, d, d);
  k->linear_backward_weight(k, g[Q_W], NULL, s.dqkv, s.xn1, N, d, (int)m.W);
  k->rmsnorm_backward_weight(k, g[ATTN_NORM], s.dxn1, io->in, s.rstd1, N, d);
}

static void llama_cost(const pt_layer *L, int T, pt_layer_cost *c) {
  layer_cost_default(L, T, c);
  llama_dims m = dims_of(L, 1, T);
  /* the linears (2 flops per weight per token), plus both attention products over the full
   * T x T square of every query head */
  double weights = (double)m.W * m.d + (double)m.d * m.d + 3.0 * m.F * m.d;
  c->fwd_flops = 2.0 * T * weights + 4.0 * T * (double)T * m.d;
  c->bwd_flops = 2.0 * c->fwd_flops;
}

const pt_layer_type layer_type_llama_block = {
    .name = "llama_block",
    .kernels_only = 1,
    .configure = llama_configure,
    .saved_bytes = llama_saved_bytes,
    .scratch_bytes = llama_scratch_bytes,
    .init = llama_init,
    .forward = llama_forward,
    .backward_input = llama_backward_input,
    .backward_weight = llama_backward_weight,
    .cost = llama_cost,
};
