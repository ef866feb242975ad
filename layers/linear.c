/* linear: out = in * weight^T + bias; weight [out, in], bias [out] (setting bias: false drops
 * it). Setting out: output features (default model.dim). Also lm_head: weight [vocab, dim], no
 * bias, tieable with an embedding; its setting softcap c > 0 caps the logits to
 * tanh(logits / c) * c (Gemma 2's final_logit_softcapping), keeping the uncapped logits in the
 * saved area, where backward_input turns them into their gradient for backward_weight. */
#include <math.h>

#include "layers/builtin.h"

static const pt_setting_decl linear_settings[] = {
    {"out", PT_SETTING_INT, 0, "model.dim", 1, 1 << 24, 0, "output features"},
    {"bias", PT_SETTING_BOOL, 1, NULL, 0, 1, 0, "add a bias"},
    {.name = NULL},
};

static void linear_configure(pt_layer *L, const pt_layer_setup *s, spec_errors *e) {
  if (s->in_tokens)
    spec_error(e, s->args, 0, "linear takes float features; put an embedding before it");
  int64_t out = layer_setting_int(L, "out");
  int bias = layer_setting_bool(L, "bias");
  L->out_dim = (int)out;
  layer_add_param(L, "weight", 2, out, s->in_dim, 0, 0);
  if (bias) layer_add_param(L, "bias", 1, out, 0, 0, 0);
}

static void linear_init(pt_layer *L, uint64_t seed) {
  /* LeCun-normal: keeps activations O(1) through stacks of linear/relu layers. */
  layer_init_normal(L, 0, seed, 1.0f / sqrtf((float)(L->in_dim > 0 ? L->in_dim : 1)));
  if (L->n_params > 1) layer_init_const(L, 1, 0.0f);
}

static void linear_forward(pt_layer *L, const pt_io *io) {
  io->k->linear_forward(io->k, io->out, io->in, L->w[0], L->n_params > 1 ? L->w[1] : NULL,
                        io->B * io->T, L->in_dim, L->out_dim);
}

static void linear_backward_input(pt_layer *L, const pt_io *io) {
  if (io->din)
    io->k->linear_backward_input(io->k, io->din, io->dout, L->w[0], io->B * io->T, L->in_dim,
                                 L->out_dim, 0);
}

static void linear_backward_weight(pt_layer *L, const pt_io *io) {
  io->k->linear_backward_weight(io->k, L->g[0], L->n_params > 1 ? L->g[1] : NULL, io->dout,
                                io->in, io->B * io->T, L->in_dim, L->out_dim);
}

/* Without a bias only the products read dout (layer.h dout_read_at_rest). */
static int linear_dout_read_at_rest(const pt_layer *L) { return L->n_params == 1; }

/* forward is one linear_forward (layer.h out_by_product), with or without a bias. */
static int linear_out_by_product(const pt_layer *L) {
  (void)L;
  return 1;
}

static void lm_head_configure(pt_layer *L, const pt_layer_setup *s, spec_errors *e) {
  int64_t vocab = layer_require_model_int(s, s->spec->vocab, "vocab", "lm_head", e);
  int64_t dim = layer_require_model_int(s, s->spec->dim, "dim", "lm_head", e);
  layer_expect_features(s, dim, "lm_head", e);
  L->out_dim = (int)vocab;
  layer_add_param(L, "weight", 2, vocab, dim, 0, 0);
}

static void lm_head_init(pt_layer *L, uint64_t seed) { layer_init_normal(L, 0, seed, 0.02f); }

static const pt_setting_decl lm_head_settings[] = {
    {"softcap", PT_SETTING_NUM, 0, NULL, 0, 1e6, 0,
     "logits capped to tanh(z / softcap) * softcap; 0: none (Gemma 2: 30)"},
    {.name = NULL},
};

static float head_softcap(const pt_layer *L) { return (float)layer_setting_num(L, "softcap"); }

/* softcap: the logits before the cap [B*T, vocab] (one float32 part, written by forward, then
 * by backward_input with their gradient). */
static size_t lm_head_saved(const pt_layer *L, int B, int T) {
  return head_softcap(L) > 0 ? sizeof(float) * (size_t)B * T * L->out_dim : 0;
}

static void lm_head_forward(pt_layer *L, const pt_io *io) {
  const float cap = head_softcap(L);
  if (cap == 0) {
    linear_forward(L, io);
    return;
  }
  io->k->linear_forward(io->k, io->saved, io->in, L->w[0], NULL, io->B * io->T, L->in_dim,
                        L->out_dim);
  io->k->softcap_forward(io->k, io->out, io->saved, cap, (int64_t)io->B * io->T * L->out_dim);
}

static void lm_head_backward_input(pt_layer *L, const pt_io *io) {
  const float cap = head_softcap(L);
  if (cap == 0) {
    linear_backward_input(L, io);
    return;
  }
  float *dz = io->saved; /* the gradient w.r.t. the uncapped logits, over them */
  io->k->softcap_backward(io->k, dz, io->dout, dz, cap, (int64_t)io->B * io->T * L->out_dim);
  if (io->din)
    io->k->linear_backward_input(io->k, io->din, dz, L->w[0], io->B * io->T, L->in_dim,
                                 L->out_dim, 0);
}

static void lm_head_backward_weight(pt_layer *L, const pt_io *io) {
  if (head_softcap(L) == 0) {
    linear_backward_weight(L, io);
    return;
  }
  io->k->linear_backward_weight(io->k, L->g[0], NULL, io->saved, io->in, io->B * io->T,
                                L->in_dim, L->out_dim);
}

/* The soft-cap's backward reads dout as float32; its forward writes the logits from the
 * product's output in a pass of its own. */
static int lm_head_dout_read_at_rest(const pt_layer *L) { return head_softcap(L) == 0; }
static int lm_head_out_by_product(const pt_layer *L) { return head_softcap(L) == 0; }

static void lm_head_cost(const pt_layer *L, int T, pt_layer_cost *c) {
  layer_cost_default(L, T, c);
  if (head_softcap(L) > 0) c->fwd_flops += 3.0 * T * L->out_dim, c->bwd_flops += 4.0 * T * L->out_dim;
}

const pt_layer_type layer_type_linear = {
    .name = "linear",
    .kernels_only = 1,
    .settings = linear_settings,
    .configure = linear_configure,
    .init = linear_init,
    .forward = linear_forward,
    .backward_input = linear_backward_input,
    .backward_weight = linear_backward_weight,
    .dout_read_at_rest = linear_dout_read_at_rest,
    .out_by_product = linear_out_by_product,
    .in_read_at_rest = 1, /* only its weight gradient's product reads its input */
};

const pt_layer_type layer_type_lm_head = {
    .name = "lm_head",
    .kernels_only = 1,
    .settings = lm_head_settings,
    .configure = lm_head_configure,
    .saved_bytes = lm_head_saved,
    .init = lm_head_init,
    .forward = lm_head_forward,
    .backward_input = lm_head_backward_input,
    .backward_weight = lm_head_backward_weight,
    .dout_read_at_rest = lm_head_dout_read_at_rest,
    .out_by_product = lm_head_out_by_product,
    .in_read_at_rest = 1, /* only its weight gradient's product reads its input */
    .cost = lm_head_cost,
};
