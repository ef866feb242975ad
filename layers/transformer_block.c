/* transformer_block: GPT-2 pre-LayerNorm block on [B,T,d].
 *   x1 = x + attn.proj(attn(ln1(x)));  y = x1 + mlp.proj(gelu_tanh(mlp.fc(ln2(x1))))
 * Causal multi-head attention, scores scaled by 1/sqrt(d/heads), LayerNorm eps 1e-5.
 * Settings: block_settings below. Parameter order and shapes follow PyTorch nn.Linear [out,in].
 * The stacked q|k|v weight and bias are one tensor each (GPT-2's c_attn names them so); where a
 * checkpoint names the parts apart (llama_block's q, k, v) they are one parameter group
 * (layer_add_param_group), which the steps use the same way: one stacked matrix at w[first].
 */
#include <math.h>

#include "layers/builtin.h"

enum { LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, MP_W, MP_B };

/* Views into the saved area. The first group is written by forward; the stash by
 * backward_input for backward_weight (which may run later in zero-bubble schedules). attn is the
 * attention's own saved state, attention_saved_floats of the table (the CPU's probabilities
 * [B,H,T,T], the GPU's log-sum-exps [B,H,T]), so the area's size depends on the table.
 * In the area (the fields' order) the float32 statistics come first, then what may be
 * bf16: forward's parts, first those backward reads only as weight gradients' x (xln1, xln2, g:
 * read_at_rest, layer.h; qkv and atty next, read at rest where cuDNN runs the attention; x1,
 * read at rest as the second norm's x), h last, then the stash. So under bf16 storage each kind
 * is one run of adjacent parts (engine/stage_store.c moves and rounds a run in one call), and
 * forward's parts but h, which backward_input overwrites, are one range the products read at
 * rest. */
typedef struct {
  float *mean1, *rstd1, *mean2, *rstd2, *attn, *xln1, *xln2, *g, *qkv, *atty, *x1, *h;
  float *dx1, *dxln2, *dqkv, *dxln1; /* stash; h holds d(fc output) after backward_input */
} block_saved;

enum { N_SAVED = 16 };

/* Floats of each saved view, in the order of block_saved's fields. */
static void block_saved_sizes(int64_t N, int64_t d, int64_t attn, int64_t sizes[N_SAVED]) {
  const int64_t s[N_SAVED] = {N,         N,     N,     N,         attn,  N * d,
                              N * d,     4 * N * d, 3 * N * d, N * d, N * d, 4 * N * d,
                              N * d, N * d, 3 * N * d, N * d};
  /* round each up to 16 floats so every view stays 64-byte aligned */
  for (int i = 0; i < N_SAVED; i++) sizes[i] = (s[i] + 15) & ~(int64_t)15;
}

static int64_t block_attn_floats(const pt_layer *L, const pt_kernels *k, int B, int T) {
  int H = (int)layer_setting_int(L, "heads");
  return k->attention_saved_floats(k, B, T, L->out_dim, H, H);
}

/* Points v's fields into saved (layer_saved_bytes(L, k, B, T) bytes) for a micro-batch of
 * B x T run with table k. */
static void block_views(const pt_layer *L, const pt_kernels *k, int B, int T, void *saved,
                        block_saved *v) {
  int64_t sizes[N_SAVED];
  block_saved_sizes((int64_t)B * T, L->out_dim, block_attn_floats(L, k, B, T), sizes);
  float **slots[N_SAVED] = {&v->mean1, &v->rstd1, &v->mean2, &v->rstd2, &v->attn, &v->xln1,
                            &v->xln2,  &v->g,     &v->qkv,   &v->atty,  &v->x1,   &v->h,
                            &v->dx1,   &v->dxln2, &v->dqkv,  &v->dxln1};
  float *p = saved;
  for (int i = 0; i < N_SAVED; i++) {
    *slots[i] = p;
    p += sizes[i];
  }
}

static size_t block_saved_bytes(const pt_layer *L, int B, int T) {
  int64_t sizes[N_SAVED], total = 0;
  block_saved_sizes((int64_t)B * T, L->out_dim, block_attn_floats(L, layer_kernels(L), B, T),
                    sizes);
  for (int i = 0; i < N_SAVED; i++) total += sizes[i];
  return sizeof(float) * (size_t)total;
}

/* Plain causal attention whose results (atty, dqkv) nothing writes after it: the products may
 * read a bf16 table's kept bits of them (kernels.h pt_attention_opts.shared). */
static const pt_attention_opts k_shared = {.shared = 1};

/* k_shared with the micro-batch's count of packed documents (kernels.h). */
static pt_attention_opts call_opts(const pt_io *io) {
  pt_attention_opts o = k_shared;
  o.documents = io->documents;
  return o;
}

/* The views as parts (layer.h): the norms' mean and rstd stay float32, the attention's state as
 * its table says, the rest may be bf16; h is forward's and then backward_input's. Read at rest
 * (backward's readers): xln1, xln2 and g only as x of the qkv, fc and fc2 weight gradients; qkv
 * and atty (the attention, atty also as the proj weight gradient's x) where the table's
 * attention reads them as bf16 for this shape (layer_attention_at_rest), not where its fallback
 * reads them as float32; x1 as the second norm's backward's x (forward reads its floats in
 * that norm and fc2's residual: forward_reads, the norm writing its bits as it reads it).
 * What backward_input writes (h then holding d(fc output), and the stash) backward_weight
 * reads only as the weight and bias gradients' dy and the norms' weight gradients' dy: read
 * at rest too (layer.h); and forward
 * reads nothing of h (the pre-activation) after the fc product writes it, which may then write
 * it to its place at rest alone (layer.h, parts both write). Of the stash, backward_input
 * itself reads h (once the GELU's gradient is written there) and dqkv only as the fc and qkv
 * products' dy: backward_at_rest (layer.h); forward's h it reads only as the DGELU's input,
 * which reads it at rest. dx1, dxln2 and dxln1 it reads as floats too, each after its one
 * writer (dx1 as the proj product's dy and the first norm's residual gradient, dxln2 and dxln1
 * as the norms' dy): backward_at_rest and backward_reads, their first reader converting them
 * (the norm writing dx1 and those reading dxln2 and dxln1 write their bits as they go,
 * kernels.h share_bf16_into). */
static int block_saved_parts(const pt_layer *L, const pt_kernels *k, int B, int T,
                             pt_saved_part *parts) {
  enum { F = PT_SAVED_FORWARD, S = PT_SAVED_STASH };
  static const int f32[N_SAVED] = {1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  static const int writers[N_SAVED] = {F, F, F, F, F, F, F, F, F, F, F, F | S, S, S, S, S};
  static const int at_rest[N_SAVED] = {0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1};
  int64_t sizes[N_SAVED];
  block_saved_sizes((int64_t)B * T, L->out_dim, block_attn_floats(L, k, B, T), sizes);
  for (int i = 0; i < N_SAVED; i++)
    parts[i] = (pt_saved_part){.floats = sizes[i], .bf16 = !f32[i], .writers = writers[i],
                               .read_at_rest = at_rest[i]};
  parts[11].backward_at_rest = parts[14].backward_at_rest = 1; /* h, dqkv */
  static const int reads[3] = {12, 13, 15}; /* dx1, dxln2, dxln1 */
  for (int i = 0; i < 3; i++) parts[reads[i]].backward_at_rest = parts[reads[i]].backward_reads = 1;
  parts[4].bf16 = k->attention_saved_bf16;
  int H = (int)layer_setting_int(L, "heads");
  parts[8].read_at_rest = parts[9].read_at_rest =
      layer_attention_at_rest(k, B, T, L->out_dim, H, H, &k_shared); /* qkv, atty */
  parts[10].forward_reads = 1; /* x1: the second norm and fc2's residual read it in forward */
  return N_SAVED;
}

/* backward_input's dg[N,4d] and datty[N,d], then the attention's scratch (forward's at 0). */
static size_t block_scratch_bytes(const pt_layer *L, const pt_kernels *k, int B, int T) {
  int64_t N = (int64_t)B * T, d = L->out_dim;
  int H = (int)layer_setting_int(L, "heads");
  int64_t attn = k->attention_scratch_floats(k, B, T, (int)d, H, H);
  return sizeof(float) * (size_t)(4 * N * d + N * d + attn + 64);
}

static const pt_setting_decl block_settings[] = {
    {"heads", PT_SETTING_INT, 0, "model.heads", 1, 1 << 16, 0, "attention heads, dividing dim"},
    {.name = NULL},
};

static void block_configure(pt_layer *L, const pt_layer_setup *s, spec_errors *e) {
  int64_t d = layer_require_model_int(s, s->spec->dim, "dim", "transformer_block", e);
  int64_t H = layer_setting_int(L, "heads");
  layer_expect_features(s, d, "transformer_block", e);
  if (!e->failed && d % H != 0)
    spec_error(e, s->args, 0, "transformer_block: dim %lld is not divisible by heads %lld",
               (long long)d, (long long)H);
  L->out_dim = (int)d;
  static const char *const names[12] = {
      "ln1.weight",      "ln1.bias",       "attn.qkv.weight", "attn.qkv.bias",
      "attn.proj.weight", "attn.proj.bias", "ln2.weight",      "ln2.bias",
      "mlp.fc.weight",   "mlp.fc.bias",    "mlp.proj.weight", "mlp.proj.bias"};
  const int64_t rows[12] = {d, d, 3 * d, 3 * d, d, d, d, d, 4 * d, 4 * d, d, d};
  const int64_t cols[12] = {0, 0, d, 0, d, 0, 0, 0, d, 0, 4 * d, 0};
  for (int p = 0; p < 12; p++) layer_add_param(L, names[p], cols[p] ? 2 : 1, rows[p], cols[p], 0, 0);
}

static void block_init(pt_layer *L, uint64_t seed) {
  /* GPT-2: N(0, 0.02) weights, zero biases, residual projections scaled by 1/sqrt(2 * blocks) */
  float resid_std = 0.02f / sqrtf(2.0f * (float)(L->type_count > 0 ? L->type_count : 1));
  for (int p = 0; p < L->n_params; p++) {
    if (p == LN1_W || p == LN2_W)
      layer_init_const(L, p, 1.0f);
    else if (L->params[p].ndim == 1)
      layer_init_const(L, p, 0.0f);
    else
      layer_init_normal(L, p, seed, (p == PROJ_W || p == MP_W) ? resid_std : 0.02f);
  }
}

static void block_forward(pt_layer *L, const pt_io *io) {
  int B = io->B, T = io->T, N = B * T, d = L->out_dim, H = (int)layer_setting_int(L, "heads");
  const pt_kernels *k = io->k;
  float *const *w = L->w;
  const float *x = io->in;
  block_saved s;
  block_views(L, k, B, T, io->saved, &s);
  k->layernorm_forward(k, s.xln1, s.mean1, s.rstd1, x, w[LN1_W], w[LN1_B], N, d, 1e-5f);
  k->linear_forward(k, s.qkv, s.xln1, w[QKV_W], w[QKV_B], N, d, 3 * d);
  const pt_attention_opts ao = call_opts(io);
  k->attention_forward(k, s.atty, s.attn, s.qkv, B, T, d, H, H, io->doc_start, &ao, io->scratch);
  k->linear_forward_residual(k, s.x1, x, s.atty, w[PROJ_W], w[PROJ_B], N, d, d);
  k->layernorm_forward(k, s.xln2, s.mean2, s.rstd2, s.x1, w[LN2_W], w[LN2_B], N, d, 1e-5f);
  k->linear_forward_gelu(k, s.g, s.h, s.xln2, w[FC_W], w[FC_B], N, d, 4 * d);
  k->linear_forward_residual(k, io->out, s.x1, s.g, w[MP_W], w[MP_B], N, 4 * d, d);
}

static void block_backward_input(pt_layer *L, const pt_io *io) {
  int B = io->B, T = io->T, N = B * T, d = L->out_dim, H = (int)layer_setting_int(L, "heads");
  const pt_kernels *k = io->k;
  float *const *w = L->w;
  const float *dy = io->dout;
  block_saved s;
  block_views(L, k, B, T, io->saved, &s);
  float *dg = io->scratch, *datty = dg + (int64_t)N * 4 * d, *attn_scratch = datty + (int64_t)N * d;
  /* h now holds d(fc output); dg is the product's scratch */
  k->linear_backward_input_gelu(k, s.h, dy, w[MP_W], s.h, dg, N, 4 * d, d);
  k->linear_backward_input(k, s.dxln2, s.h, w[FC_W], N, d, 4 * d, 0);
  k->layernorm_backward_input_residual(k, s.dx1, dy, s.dxln2, s.x1, w[LN2_W], s.mean2, s.rstd2,
                                       N, d);
  const pt_attention_opts ao = call_opts(io);
  layer_attention_dout_at_rest(io, datty, d, H, H, &ao);
  k->linear_backward_input(k, datty, s.dx1, w[PROJ_W], N, d, d, 0);
  k->attention_backward(k, s.dqkv, datty, s.qkv, s.atty, s.attn, B, T, d, H, H, io->doc_start,
                        &ao, attn_scratch);
  k->linear_backward_input(k, s.dxln1, s.dqkv, w[QKV_W], N, d, 3 * d, 0);
  if (!io->din) return;
  k->layernorm_backward_input_residual(k, io->din, s.dx1, s.dxln1, io->in, w[LN1_W], s.mean1,
                                       s.rstd1, N, d);
}

static void block_backward_weight(pt_layer *L, const pt_io *io) {
  int N = io->B * io->T, d = L->out_dim;
  const pt_kernels *k = io->k;
  float *const *g = L->g;
  block_saved s;
  block_views(L, k, io->B, io->T, io->saved, &s);
  k->linear_backward_weight(k, g[MP_W], g[MP_B], io->dout, s.g, N, 4 * d, d);
  k->linear_backward_weight(k, g[FC_W], g[FC_B], s.h, s.xln2, N, d, 4 * d);
  k->layernorm_backward_weight(k, g[LN2_W], g[LN2_B], s.dxln2, s.x1, s.mean2, s.rstd2, N, d);
  k->linear_backward_weight(k, g[PROJ_W], g[PROJ_B], s.dx1, s.atty, N, d, d);
  k->linear_backward_weight(k, g[QKV_W], g[QKV_B], s.dqkv, s.xln1, N, d, 3 * d);
  k->layernorm_backward_weight(k, g[LN1_W], g[LN1_B], s.dxln1, io->in, s.mean1, s.rstd1, N, d);
}

static void block_cost(const pt_layer *L, int T, pt_layer_cost *c) {
  layer_cost_default(L, T, c);
  double d = L->out_dim;
  /* the linears, plus both attention products computed over the full T x T square */
  c->fwd_flops = 2.0 * T * 12.0 * d * d + 4.0 * T * (double)T * d;
  c->bwd_flops = 2.0 * c->fwd_flops;
}

const pt_layer_type layer_type_transformer_block = {
    .name = "transformer_block",
    .kernels_only = 1,
    .settings = block_settings,
    .configure = block_configure,
    .saved_bytes = block_saved_bytes,
    .saved_parts = block_saved_parts,
    .scratch_bytes = block_scratch_bytes,
    .init = block_init,
    .forward = block_forward,
    .backward_input = block_backward_input,
    .backward_weight = block_backward_weight,
    .din_by_norm = 1, /* its last norm's backward writes din */
    .in_read_at_rest = 1, /* only its first norm's backward reads its input */
    .cost = block_cost,
};
