/* llama_block: the Llama decoder layer (Hugging Face's LlamaDecoderLayer) on [B,T,dim],
 * pre-RMSNorm, no biases but optional ones on q, k, v (qkv_bias: Qwen2's attention) and on
 * gate, up, down (mlp_bias: Llama's config key), and an optional per-head RMSNorm of q and k
 * before the rotation (qk_norm: Qwen3's q_norm, k_norm, weights [head_dim], the block's eps):
 *   h = x + o(attn(rope(qn(q(n1(x)))), rope(kn(k(n1(x)))), v(n1(x))))
 *   y = h + down(silu(gate(n2(h))) * up(n2(h)))
 * Gemma 2's options (Gemma2DecoderLayer): post_norms adds RMSNorms p1, p2 on the attention's
 * and the MLP's outputs (h = x + p1(o(...)), y = h + p2(down(...))); norm_offset d makes every
 * norm's weight d + w (1: Gemma's (1 + w), with w stored as transformers stores it); mlp_act
 * gelu_tanh gates with the tanh GELU (GeGLU) instead of silu.
 * Causal grouped-query attention (heads query heads, kv_heads kv heads; query head j reads kv
 * head j / (heads / kv_heads)), scale 1/sqrt(head_dim) or attn_scale, head_dim = dim / heads
 * unless set (heads x head_dim may then differ from dim: o maps it back); optionally a
 * sliding window (`window`) and attention-logit soft-capping (`attn_softcap`, Gemma 2), all
 * kernels.h's pt_attention_opts, so alternating local/global layers are layers with and
 * without a window; rotary embeddings in Hugging
 * Face's rotate-half convention (kernels.h, rope), their angle table made once at configure
 * from rope_theta and the optional `rope_scaling` map (layers/rope_freqs.h: transformers'
 * llama3, linear and yarn types) and kept in L->state. Settings: llama_settings
 * below, plus rope_scaling, read by configure.
 *
 * Parameters in the order of docs/layers.md. q, k, v are one parameter group, used as one
 * stacked [(heads + 2 kv_heads) head_dim, dim] matrix, and gate, up another, used as one
 * [2 ffn_dim, dim] matrix (one GEMM each; layer_add_param_group keeps them adjacent); with
 * qkv_bias, the q, k, v biases are a group after them, one stacked bias of that GEMM; then
 * qk_norm's q_norm, k_norm, then mlp_bias's gate|up bias group and down's, then post_norms'
 * attn_post_norm, mlp_post_norm (llama_index).
 */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "layers/builtin.h"
#include "layers/rope_freqs.h"

enum { ATTN_NORM, Q_W, K_W, V_W, O_W, MLP_NORM, GATE_W, UP_W, DOWN_W, QKV_B };

/* Where the optional parameters sit in the list (-1: the option is off), in declaration order
 * after the nine weights. */
typedef struct {
  int qkv_b, q_norm, k_norm, gu_b, down_b, attn_post, mlp_post;
} llama_index;

static llama_index index_of(const pt_layer *L) {
  llama_index x = {-1, -1, -1, -1, -1, -1, -1};
  int p = QKV_B;
  if (layer_setting_bool(L, "qkv_bias")) x.qkv_b = p, p += 3;
  if (layer_setting_bool(L, "qk_norm")) x.q_norm = p, x.k_norm = p + 1, p += 2;
  if (layer_setting_bool(L, "mlp_bias")) x.gu_b = p, x.down_b = p + 2, p += 3;
  if (layer_setting_bool(L, "post_norms")) x.attn_post = p, x.mlp_post = p + 1;
  return x;
}

/* v[i] of an optional parameter i, NULL where the option is off. */
static float *opt(float *const *v, int i) { return i < 0 ? NULL : v[i]; }

/* Views into the saved area. The first group is written by forward (qkv after the rotation,
 * as attention read it); the stash by backward_input for backward_weight. attn is the
 * attention's own saved state, attention_saved_floats of the table. */
typedef struct {
  float *rstd1, *xn1, *qkv, *attn, *atty, *h, *rstd2, *xn2, *gu, *a;
  float *dh, *dxn2, *dgu, *dqkv, *dxn1; /* stash; dqkv before the rotation (w.r.t. q(n1(x))) */
  /* qk_norm only (empty otherwise): q|k|v before the head norms and the heads' rstd (forward),
   * the gradient w.r.t. the normed q|k|v (stash; dqkv is then w.r.t. the projection's output) */
  float *qkv_raw, *hrstd, *dqkvn;
  /* post_norms only: o's and down's outputs before their norms, the norms' rstd (forward); the
   * gradients w.r.t. those outputs (stash) */
  float *ao, *rstd3, *mo, *rstd4, *dao, *dmo;
} llama_saved;

/* What configure derived: the rotary table first (hf_export reads it as a pt_rope), then the
 * MLP's gate activation (mlp_act). */
typedef struct {
  pt_rope rope;
  int gelu;
} llama_state;
static const char *const mlp_act_names[] = {"silu", "gelu_tanh", NULL};

enum { N_SAVED = 18, N_POST = 6 }; /* post_norms: ao, rstd3, mo, rstd4, then stash dao, dmo */

typedef struct {
  int64_t N, d, H, KVH, hd, F, W, A; /* W = (H + 2 KVH) hd: the qkv row; A = H hd: attention's */
  int qk_norm, post; /* the qk_norm and post_norms settings */
} llama_dims;

/* The attention's variants (kernels.h) from the settings. */
static pt_attention_opts attention_opts(const pt_layer *L) {
  return (pt_attention_opts){.window = (int)layer_setting_int(L, "window"),
                             .softcap = (float)layer_setting_num(L, "attn_softcap"),
                             .scale = (float)layer_setting_num(L, "attn_scale")};
}

static llama_dims dims_of(const pt_layer *L, int B, int T) {
  llama_dims m;
  m.N = (int64_t)B * T;
  m.d = L->out_dim;
  m.H = layer_setting_int(L, "heads");
  m.KVH = layer_setting_int(L, "kv_heads");
  m.F = layer_setting_int(L, "ffn_dim");
  m.hd = layer_setting_int(L, "head_dim");
  if (m.hd == 0) m.hd = m.d / m.H;
  m.W = (m.H + 2 * m.KVH) * m.hd;
  m.A = m.H * m.hd;
  m.qk_norm = layer_setting_bool(L, "qk_norm");
  m.post = layer_setting_bool(L, "post_norms");
  return m;
}

static int64_t attn_floats(const pt_layer *L, const pt_kernels *k, int B, int T) {
  llama_dims m = dims_of(L, B, T);
  return k->attention_saved_floats(k, B, T, (int)m.A, (int)m.H, (int)m.KVH);
}

/* Floats of each saved view, in the order of llama_saved's fields, each rounded up to 16 so every
 * view stays 64-byte aligned. */
static void saved_sizes(const llama_dims *m, int64_t attn, int64_t sizes[N_SAVED + N_POST]) {
  const int64_t N = m->N, d = m->d, qn = m->qk_norm, p = m->post;
  const int64_t s[N_SAVED + N_POST] = {
      N,     N * d, N * m->W,         attn,  N * m->A,  N * d, N,
      N * d, 2 * N * m->F, N * m->F, N * d, N * d, 2 * N * m->F,
      N * m->W, N * d, qn * N * m->W, qn * N * (m->H + m->KVH), qn * N * m->W,
      p * N * d, p * N, p * N * d, p * N, p * N * d, p * N * d};
  for (int i = 0; i < N_SAVED + N_POST; i++) sizes[i] = (s[i] + 15) & ~(int64_t)15;
}

static void views(const pt_layer *L, const pt_kernels *k, int B, int T, void *saved,
                  llama_saved *v) {
  llama_dims m = dims_of(L, B, T);
  int64_t sizes[N_SAVED + N_POST];
  saved_sizes(&m, attn_floats(L, k, B, T), sizes);
  float **slots[N_SAVED + N_POST] = {&v->rstd1, &v->xn1,  &v->qkv,   &v->attn, &v->atty,
                                     &v->h,     &v->rstd2, &v->xn2,  &v->gu,   &v->a,
                                     &v->dh,    &v->dxn2, &v->dgu,   &v->dqkv, &v->dxn1,
                                     &v->qkv_raw, &v->hrstd, &v->dqkvn,
                                     &v->ao,    &v->rstd3, &v->mo,   &v->rstd4, &v->dao,
                                     &v->dmo};
  float *p = saved;
  for (int i = 0; i < N_SAVED + N_POST; i++) {
    *slots[i] = p;
    p += sizes[i];
  }
}

static size_t llama_saved_bytes(const pt_layer *L, int B, int T) {
  llama_dims m = dims_of(L, B, T);
  int64_t sizes[N_SAVED + N_POST], total = 0;
  saved_sizes(&m, attn_floats(L, layer_kernels(L), B, T), sizes);
  for (int i = 0; i < N_SAVED + N_POST; i++) total += sizes[i];
  return sizeof(float) * (size_t)total;
}

/* The views as parts (layer.h): the norms' rstd stay float32, the attention's state as its
 * table says, the rest may be bf16. Read at rest (backward's readers, every option): xn1, xn2
 * and a only as x of the q|k|v, gate|up and down weight gradients (their biases sum the
 * gradients); qkv (rotated in forward before the attention reads it; backward rotates only
 * dqkv) and atty (also the o weight gradient's x) where the table's attention reads them as
 * bf16 for this shape and options (layer_attention_at_rest), not where its fallback reads them
 * as float32 (soft-capping, say); gu only by swiglu or geglu backward (layer.h: the activation
 * converts it to its place at rest as it reads it in forward); h as the MLP norm's backward's
 * x (forward reads its floats: the residual norm writing it writes its bits too); not qkv_raw
 * (the head norms' backward), ao and mo (the post norms' backward). The
 * stash (layer.h: read by backward_weight as products' and bias sums' dy and as the norms'
 * weight gradients' dy) is read at rest too, but dqkvn, which the head norms' weight gradient
 * reads as float32. Of the stash, backward_input itself reads dgu, dao and dmo only as the
 * gate|up, o and down products' dy once it has written them, and dqkv so with qk_norm (the
 * head norms' gradient): backward_at_rest (layer.h). dh, dxn2 and dxn1 it reads as floats too,
 * each after its one writer (dh as the o product's or the attention post-norm's dy and the
 * first norm's residual gradient, dxn2 and dxn1 as the norms' dy), and dqkv without qk_norm
 * (the attention's, which the rotation rewrites in place before the q|k|v product reads it):
 * backward_at_rest and backward_reads, their first reader after their last write converting
 * them (dh, dxn2 and dxn1: the norm writing or reading them writes their bits as it goes,
 * kernels.h share_bf16_into). */
static int llama_saved_parts(const pt_layer *L, const pt_kernels *k, int B, int T,
                             pt_saved_part *parts) {
  enum { F = PT_SAVED_FORWARD, S = PT_SAVED_STASH };
  static const int f32[N_SAVED + N_POST] = {1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0,
                                            0, 0, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0};
  static const int writers[N_SAVED + N_POST] = {F, F, F, F, F, F, F, F, F, F, S, S,
                                                S, S, S, F, F, S, F, F, F, F, S, S};
  static const int at_rest[N_SAVED + N_POST] = {0, 1, 0, 0, 0, 1, 0, 1, 1, 1, 1, 1,
                                                1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1};
  llama_dims m = dims_of(L, B, T);
  int64_t sizes[N_SAVED + N_POST];
  saved_sizes(&m, attn_floats(L, k, B, T), sizes);
  int n = m.post ? N_SAVED + N_POST : N_SAVED;
  for (int i = 0; i < n; i++)
    parts[i] = (pt_saved_part){.floats = sizes[i], .bf16 = !f32[i], .writers = writers[i],
                               .read_at_rest = at_rest[i]};
  parts[12].backward_at_rest = 1;                         /* dgu */
  static const int reads[3] = {10, 11, 14}; /* dh, dxn2, dxn1 */
  for (int i = 0; i < 3; i++) parts[reads[i]].backward_at_rest = parts[reads[i]].backward_reads = 1;
  parts[13].backward_at_rest = 1;                         /* dqkv */
  parts[13].backward_reads = !m.qk_norm; /* without: the rotation rewrites it after the attention */
  if (m.post) parts[22].backward_at_rest = parts[23].backward_at_rest = 1; /* dao, dmo */
  parts[3].bf16 = k->attention_saved_bf16;
  const pt_attention_opts ao = attention_opts(L);
  parts[2].read_at_rest = parts[4].read_at_rest = /* qkv, atty */
      layer_attention_at_rest(k, B, T, (int)m.A, (int)m.H, (int)m.KVH, &ao);
  parts[2].forward_reads = 1; /* RoPE rotates q|k|v in place after the product (or norm) */
  parts[8].forward_reads = 1; /* the activation reads gate|up after the product */
  parts[5].forward_reads = 1; /* h: the MLP norm and the last residual add read it */
  return n;
}

/* backward_input's da[N,F] and datty[N,A], then the attention's scratch (forward's at 0);
 * then, 64-byte aligned, norm_room's floats. */
static int64_t scratch_head(const pt_layer *L, const pt_kernels *k, int B, int T) {
  llama_dims m = dims_of(L, B, T);
  int64_t attn = k->attention_scratch_floats(k, B, T, (int)m.A, (int)m.H, (int)m.KVH);
  int64_t da = (m.N * m.F + 15) & ~(int64_t)15, datty = (m.N * m.A + 15) & ~(int64_t)15;
  return da + datty + attn;
}

/* norm_weights' row stride: room for a [dim] or a [head_dim] weight, 64-byte aligned. */
static int64_t norm_stride(const pt_layer *L) {
  llama_dims m = dims_of(L, 1, 1);
  return ((m.d > m.hd ? m.d : m.hd) + 15) & ~(int64_t)15;
}

/* Floats of the norms' offset weights (norm_weights): six rows, none without an offset. */
static int64_t norm_room(const pt_layer *L) {
  return layer_setting_num(L, "norm_offset") != 0 ? 6 * norm_stride(L) : 0;
}

static size_t llama_scratch_bytes(const pt_layer *L, const pt_kernels *k, int B, int T) {
  return sizeof(float) * (size_t)(scratch_head(L, k, B, T) + norm_room(L) + 64);
}

/* The weights the norms compute with (attn_norm, mlp_norm, attn_post_norm, mlp_post_norm,
 * q_norm, k_norm; NULL for a norm the layer lacks): w itself, or w + norm_offset in float
 * (transformers' 1.0 + weight.float()) in the scratch after scratch_head, which no step reuses. */
static void norm_weights(const pt_layer *L, const pt_io *io, float *const *w, const float *nw[6]) {
  const llama_index x = index_of(L);
  const int idx[6] = {ATTN_NORM, MLP_NORM, x.attn_post, x.mlp_post, x.q_norm, x.k_norm};
  const float off = (float)layer_setting_num(L, "norm_offset");
  const int64_t stride = norm_stride(L);
  float *room = (float *)io->scratch + ((scratch_head(L, io->k, io->B, io->T) + 15) & ~15);
  for (int i = 0; i < 6; i++) {
    nw[i] = idx[i] < 0 ? NULL : w[idx[i]];
    if (!nw[i] || off == 0) continue;
    io->k->add_scalar(io->k, room + i * stride, nw[i], off, L->params[idx[i]].shape[0]);
    nw[i] = room + i * stride;
  }
}

static const pt_setting_decl llama_settings[] = {
    {"heads", PT_SETTING_INT, 0, "model.heads", 1, 1 << 16, 0, "query heads, dividing dim"},
    {"kv_heads", PT_SETTING_INT, 0, "heads", 1, 1 << 16, 0,
     "key/value heads (grouped-query attention), dividing heads"},
    {"ffn_dim", PT_SETTING_INT, 0, NULL, 1, 1 << 24, 1, "the SwiGLU MLP's hidden width"},
    {"rope_theta", PT_SETTING_NUM, 10000.0, NULL, 1e-30, 1e30, 0, "rotary embedding base"},
    {"eps", PT_SETTING_NUM, 1e-6, NULL, 1e-12, 1.0, 0, "the two RMSNorms' eps"},
    {"qkv_bias", PT_SETTING_BOOL, 0, NULL, 0, 1, 0, "biases on q, k and v (Qwen2)"},
    {"head_dim", PT_SETTING_INT, 0, NULL, 0, 1 << 16, 0,
     "dims of a head; 0: dim / heads (heads must divide dim)"},
    {"qk_norm", PT_SETTING_BOOL, 0, NULL, 0, 1, 0,
     "RMSNorm of each q and k head before the rotation (Qwen3's q_norm, k_norm)"},
    {"mlp_bias", PT_SETTING_BOOL, 0, NULL, 0, 1, 0, "biases on gate, up and down"},
    {"window", PT_SETTING_INT, 0, NULL, 0, 1 << 30, 0,
     "sliding attention window: query t sees keys t - window < s <= t; 0: none (Mistral)"},
    {"attn_softcap", PT_SETTING_NUM, 0.0, NULL, 0.0, 1e30, 0,
     "attention-logit soft-cap c: scores become c tanh(score / c); 0: none (Gemma 2)"},
    {"attn_scale", PT_SETTING_NUM, 0.0, NULL, 0.0, 1e30, 0,
     "the attention scores' scale; 0: 1/sqrt(head_dim) (Gemma 2: query_pre_attn_scalar^-0.5)"},
    {"norm_offset", PT_SETTING_NUM, 0, NULL, -16, 16, 0,
     "added to every norm's weight: 1 is Gemma's (1 + w)"},
    {"post_norms", PT_SETTING_BOOL, 0, NULL, 0, 1, 0,
     "RMSNorms on the attention's and the MLP's outputs (Gemma 2)"},
    {.name = NULL},
};

/* The head dim (head_dim, or dim / heads) after checking the attention's shape; 0 on error. */
static int64_t checked_head_dim(const pt_layer *L, const pt_layer_setup *s, int64_t d,
                                spec_errors *e) {
  int64_t H = layer_setting_int(L, "heads"), KVH = layer_setting_int(L, "kv_heads");
  int64_t hd = layer_setting_int(L, "head_dim");
  if (hd == 0 && d % H != 0) {
    spec_error(e, s->args, 0, "llama_block: dim %lld is not divisible by heads %lld (or set "
               "head_dim)", (long long)d, (long long)H);
    return 0;
  }
  if (hd == 0) hd = d / H;
  if (H % KVH != 0)
    spec_error(e, s->args, 0, "llama_block: kv_heads %lld must divide heads %lld",
               (long long)KVH, (long long)H);
  else if (hd % 2 != 0 || hd / 2 > PT_ROPE_MAX_PAIRS)
    spec_error(e, s->args, 0, "llama_block: head dim %lld (head_dim or dim / heads) must be "
               "even and at most %d for the rotary embedding", (long long)hd,
               2 * PT_ROPE_MAX_PAIRS);
  else if (H * hd > INT32_MAX / 4)
    spec_error(e, s->args, 0, "llama_block: heads x head_dim %lld is too large",
               (long long)(H * hd));
  return e->failed ? 0 : hd;
}

static void llama_configure(pt_layer *L, const pt_layer_setup *s, spec_errors *e) {
  int64_t d = layer_require_model_int(s, s->spec->dim, "dim", "llama_block", e);
  int64_t H = layer_setting_int(L, "heads"), KVH = layer_setting_int(L, "kv_heads");
  int64_t F = layer_setting_int(L, "ffn_dim");
  layer_expect_features(s, d, "llama_block", e);
  if (e->failed) return;
  int64_t hd = checked_head_dim(L, s, d, e);
  pt_rope_scaling scaling;
  rope_scaling_read(spec_find(s->args, "rope_scaling"), layer_setting_num(L, "rope_theta"),
                    &scaling, e);
  spec_node *act = spec_find(s->args, "mlp_act");
  int gelu = act ? spec_node_choice(act, mlp_act_names, e) : 0;
  if (e->failed) return;
  llama_state *st = layer_state_alloc(L, sizeof(llama_state));
  st->rope.scaling = scaling;
  rope_freqs_make(&scaling, (int)hd, &st->rope.freqs);
  st->gelu = gelu == 1;
  L->out_dim = (int)d;
  layer_add_param(L, "attn_norm.weight", 1, d, 0, 0, 0);
  const pt_param_decl qkv[3] = {{"attn.q.weight", 2, {H * hd, d}},
                                {"attn.k.weight", 2, {KVH * hd, d}},
                                {"attn.v.weight", 2, {KVH * hd, d}}};
  layer_add_param_group(L, qkv, 3);
  layer_add_param(L, "attn.o.weight", 2, d, H * hd, 0, 0);
  layer_add_param(L, "mlp_norm.weight", 1, d, 0, 0, 0);
  const pt_param_decl gate_up[2] = {{"mlp.gate.weight", 2, {F, d}}, {"mlp.up.weight", 2, {F, d}}};
  layer_add_param_group(L, gate_up, 2);
  layer_add_param(L, "mlp.down.weight", 2, d, F, 0, 0);
  if (layer_setting_bool(L, "qkv_bias")) {
    const pt_param_decl qkv_bias[3] = {{"attn.q.bias", 1, {H * hd}},
                                       {"attn.k.bias", 1, {KVH * hd}},
                                       {"attn.v.bias", 1, {KVH * hd}}};
    layer_add_param_group(L, qkv_bias, 3);
  }
  if (layer_setting_bool(L, "qk_norm")) {
    layer_add_param(L, "attn.q_norm.weight", 1, hd, 0, 0, 0);
    layer_add_param(L, "attn.k_norm.weight", 1, hd, 0, 0, 0);
  }
  if (layer_setting_bool(L, "mlp_bias")) {
    const pt_param_decl gate_up_bias[2] = {{"mlp.gate.bias", 1, {F}}, {"mlp.up.bias", 1, {F}}};
    layer_add_param_group(L, gate_up_bias, 2);
    layer_add_param(L, "mlp.down.bias", 1, d, 0, 0, 0);
  }
  if (!layer_setting_bool(L, "post_norms")) return;
  layer_add_param(L, "attn_post_norm.weight", 1, d, 0, 0, 0);
  layer_add_param(L, "mlp_post_norm.weight", 1, d, 0, 0, 0);
}

static void llama_init(pt_layer *L, uint64_t seed) {
  /* N(0, 0.02) (Hugging Face's initializer_range), norms 1 (their weight 1 - norm_offset),
   * biases 0; the projections into the residual stream (o, down) scaled by 1/sqrt(2 * blocks)
   * as GPT-2's are. */
  float resid_std = 0.02f / sqrtf(2.0f * (float)(L->type_count > 0 ? L->type_count : 1));
  float norm = 1.0f - (float)layer_setting_num(L, "norm_offset");
  for (int p = 0; p < L->n_params; p++) {
    if (L->params[p].ndim == 1)
      layer_init_const(L, p, strstr(L->params[p].name, "norm.weight") ? norm : 0.0f);
    else
      layer_init_normal(L, p, seed, (p == O_W || p == DOWN_W) ? resid_std : 0.02f);
  }
}

/* The MLP's gate: silu (SwiGLU) or, with mlp_act gelu_tanh, the tanh GELU (GeGLU). */
static void mlp_act_forward(const pt_layer *L, const pt_kernels *k, float *a, const float *gu,
                            int N, int F) {
  if (((const llama_state *)L->state)->gelu) k->geglu_forward(k, a, gu, N, F);
  else k->swiglu_forward(k, a, gu, N, F);
}

static void mlp_act_backward(const pt_layer *L, const pt_kernels *k, float *dgu, const float *da,
                             const float *gu, int N, int F) {
  if (((const llama_state *)L->state)->gelu) k->geglu_backward(k, dgu, da, gu, N, F);
  else k->swiglu_backward(k, dgu, da, gu, N, F);
}

static void llama_forward(pt_layer *L, const pt_io *io) {
  llama_dims m = dims_of(L, io->B, io->T);
  const int N = (int)m.N, d = (int)m.d, H = (int)m.H, KVH = (int)m.KVH, F = (int)m.F;
  const int A = (int)m.A;
  const pt_kernels *k = io->k;
  const float eps = (float)layer_setting_num(L, "eps");
  const llama_state *st = L->state;
  const int post = m.post;
  float *const *w = L->w;
  const float *x = io->in, *nw[6];
  layer_check_groups(L, w);
  llama_saved s;
  views(L, k, io->B, io->T, io->saved, &s);
  llama_index ix = index_of(L);
  norm_weights(L, io, w, nw);
  k->rmsnorm_forward(k, s.xn1, s.rstd1, x, nw[0], N, d, eps);
  k->linear_forward(k, m.qk_norm ? s.qkv_raw : s.qkv, s.xn1, w[Q_W], opt(w, ix.qkv_b), N, d,
                    (int)m.W);
  if (m.qk_norm)
    k->head_rmsnorm_forward(k, s.qkv, s.hrstd, s.qkv_raw, nw[4], nw[5], N, H, KVH, (int)m.hd,
                            eps);
  k->rope(k, s.qkv, io->B, io->T, H, KVH, (int)m.hd, &st->rope.freqs, 1, io->positions);
  pt_attention_opts ao = attention_opts(L);
  ao.shared = 1; /* nothing writes atty after it (not so dqkv backward: the rotation does) */
  ao.documents = io->documents;
  k->attention_forward(k, s.atty, s.attn, s.qkv, io->B, io->T, A, H, KVH, io->doc_start, &ao,
                       io->scratch);
  k->linear_forward(k, post ? s.ao : s.h, s.atty, w[O_W], NULL, N, A, d);
  if (post) k->rmsnorm_forward(k, s.h, s.rstd3, s.ao, nw[2], N, d, eps);
  k->rmsnorm_forward_residual(k, s.h, s.xn2, s.rstd2, s.h, x, nw[1], N, d, eps);
  k->linear_forward(k, s.gu, s.xn2, w[GATE_W], opt(w, ix.gu_b), N, d, 2 * F);
  mlp_act_forward(L, k, s.a, s.gu, N, F);
  k->linear_forward(k, post ? s.mo : io->out, s.a, w[DOWN_W], opt(w, ix.down_b), N, F, d);
  if (post) k->rmsnorm_forward(k, io->out, s.rstd4, s.mo, nw[3], N, d, eps);
  k->add_inplace(k, io->out, s.h, m.N * d);
}

static void llama_backward_input(pt_layer *L, const pt_io *io) {
  llama_dims m = dims_of(L, io->B, io->T);
  const int N = (int)m.N, d = (int)m.d, H = (int)m.H, KVH = (int)m.KVH, F = (int)m.F;
  const int A = (int)m.A;
  const pt_kernels *k = io->k;
  const llama_state *st = L->state;
  const int post = m.post;
  float *const *w = L->w;
  const float *dy = io->dout, *nw[6];
  llama_saved s;
  views(L, k, io->B, io->T, io->saved, &s);
  norm_weights(L, io, w, nw);
  float *da = io->scratch, *datty = da + ((m.N * F + 15) & ~(int64_t)15);
  float *attn_scratch = datty + ((m.N * A + 15) & ~(int64_t)15);
  if (post) k->rmsnorm_backward_input(k, s.dmo, dy, s.mo, nw[3], s.rstd4, N, d, 0);
  k->linear_backward_input(k, da, post ? s.dmo : dy, w[DOWN_W], N, F, d, 0);
  mlp_act_backward(L, k, s.dgu, da, s.gu, N, F);
  k->linear_backward_input(k, s.dxn2, s.dgu, w[GATE_W], N, d, 2 * F, 0);
  k->rmsnorm_backward_input_residual(k, s.dh, dy, s.dxn2, s.h, nw[1], s.rstd2, N, d);
  if (post) k->rmsnorm_backward_input(k, s.dao, s.dh, s.ao, nw[2], s.rstd3, N, d, 0);
  pt_attention_opts ao = attention_opts(L);
  ao.documents = io->documents;
  layer_attention_dout_at_rest(io, datty, A, H, KVH, &ao);
  k->linear_backward_input(k, datty, post ? s.dao : s.dh, w[O_W], N, A, d, 0);
  float *dqkvn = m.qk_norm ? s.dqkvn : s.dqkv; /* w.r.t. what the rotation read */
  pt_attention_opts rotated = ao;
  rotated.rotated = 1; /* the rotation reads dqkvn next, whole (kernels.h) */
  k->attention_backward(k, dqkvn, datty, s.qkv, s.atty, s.attn, io->B, io->T, A, H, KVH,
                        io->doc_start, &rotated, attn_scratch);
  k->rope(k, dqkvn, io->B, io->T, H, KVH, (int)m.hd, &st->rope.freqs, -1, io->positions);
  if (m.qk_norm)
    k->head_rmsnorm_backward_input(k, s.dqkv, dqkvn, s.qkv_raw, nw[4], nw[5], s.hrstd, N, H, KVH,
                                   (int)m.hd);
  k->linear_backward_input(k, s.dxn1, s.dqkv, w[Q_W], N, d, (int)m.W, 0);
  if (!io->din) return;
  k->rmsnorm_backward_input_residual(k, io->din, s.dh, s.dxn1, io->in, nw[0], s.rstd1, N, d);
}

static void llama_backward_weight(pt_layer *L, const pt_io *io) {
  llama_dims m = dims_of(L, io->B, io->T);
  const int N = (int)m.N, d = (int)m.d, F = (int)m.F;
  const pt_kernels *k = io->k;
  const int post = m.post;
  float *const *g = L->g;
  layer_check_groups(L, g);
  llama_saved s;
  views(L, k, io->B, io->T, io->saved, &s);
  llama_index ix = index_of(L);
  k->linear_backward_weight(k, g[DOWN_W], opt(g, ix.down_b), post ? s.dmo : io->dout, s.a, N, F,
                            d);
  if (post) k->rmsnorm_backward_weight(k, g[ix.mlp_post], io->dout, s.mo, s.rstd4, N, d);
  k->linear_backward_weight(k, g[GATE_W], opt(g, ix.gu_b), s.dgu, s.xn2, N, d, 2 * F);
  k->rmsnorm_backward_weight(k, g[MLP_NORM], s.dxn2, s.h, s.rstd2, N, d);
  k->linear_backward_weight(k, g[O_W], NULL, post ? s.dao : s.dh, s.atty, N, (int)m.A, d);
  if (post) k->rmsnorm_backward_weight(k, g[ix.attn_post], s.dh, s.ao, s.rstd3, N, d);
  if (m.qk_norm)
    k->head_rmsnorm_backward_weight(k, g[ix.q_norm], g[ix.k_norm], s.dqkvn, s.qkv_raw, s.hrstd,
                                    N, (int)m.H, (int)m.KVH, (int)m.hd);
  k->linear_backward_weight(k, g[Q_W], opt(g, ix.qkv_b), s.dqkv, s.xn1, N, d, (int)m.W);
  k->rmsnorm_backward_weight(k, g[ATTN_NORM], s.dxn1, io->in, s.rstd1, N, d);
}

static void llama_cost(const pt_layer *L, int T, pt_layer_cost *c) {
  layer_cost_default(L, T, c);
  llama_dims m = dims_of(L, 1, T);
  /* the linears (2 flops per weight per token), plus both attention products over the full
   * T x T square of every query head, times the share of the causal pairs a window keeps */
  double weights = (double)m.W * m.d + (double)m.d * m.A + 3.0 * m.F * m.d;
  const pt_attention_opts ao = attention_opts(L);
  double band = T > 0 ? pt_attention_pairs(T, &ao) / pt_attention_pairs(T, NULL) : 1.0;
  c->fwd_flops = 2.0 * T * weights + 4.0 * T * (double)T * m.A * band;
  llama_index ix = index_of(L);
  if (ix.qkv_b >= 0) c->fwd_flops += (double)T * m.W; /* the q|k|v bias adds */
  if (ix.gu_b >= 0) c->fwd_flops += (double)T * (2.0 * m.F + m.d); /* the MLP's bias adds */
  if (m.qk_norm) c->fwd_flops += 4.0 * T * (double)(m.H + m.KVH) * m.hd; /* the head norms */
  if (m.post) c->fwd_flops += 8.0 * T * m.d; /* two more norms */
  c->bwd_flops = 2.0 * c->fwd_flops;
}

const pt_layer_type layer_type_llama_block = {
    .name = "llama_block",
    .kernels_only = 1,
    .settings = llama_settings,
    .configure = llama_configure,
    .saved_bytes = llama_saved_bytes,
    .saved_parts = llama_saved_parts,
    .scratch_bytes = llama_scratch_bytes,
    .init = llama_init,
    .forward = llama_forward,
    .backward_input = llama_backward_input,
    .backward_weight = llama_backward_weight,
    .din_by_norm = 1, /* its last norm's backward writes din */
    .in_read_at_rest = 1, /* only its first norm's backward reads its input */
    .cost = llama_cost,
};
