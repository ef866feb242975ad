/* layernorm over the feature dim: params weight [D], bias [D]; setting eps (default 1e-5).
 * saved: mean[N], rstd[N]. */
#include "layers/builtin.h"

static const pt_setting_decl layernorm_settings[] = {
    {"eps", PT_SETTING_NUM, 1e-5, NULL, 1e-12, 1.0, 0, "added to the variance"},
    {.name = NULL},
};

static void layernorm_configure(pt_layer *L, const pt_layer_setup *s, spec_errors *e) {
  if (s->in_tokens)
    spec_error(e, s->args, 0, "layernorm takes float features; put an embedding before it");
  L->out_dim = s->in_dim;
  layer_add_param(L, "weight", 1, s->in_dim, 0, 0, 0);
  layer_add_param(L, "bias", 1, s->in_dim, 0, 0, 0);
}

static size_t layernorm_saved(const pt_layer *L, int B, int T) {
  return sizeof(float) * 2 * (size_t)B * T;
}

static void layernorm_init(pt_layer *L, uint64_t seed) {
  layer_init_const(L, 0, 1.0f);
  layer_init_const(L, 1, 0.0f);
}

static void layernorm_forward(pt_layer *L, const pt_io *io) {
  int N = io->B * io->T;
  float *mean = io->saved, *rstd = mean + N;
  io->k->layernorm_forward(io->k, io->out, mean, rstd, io->in, L->w[0], L->w[1], N, L->out_dim,
                           (float)layer_setting_num(L, "eps"));
}

static void layernorm_backward_input(pt_layer *L, const pt_io *io) {
  if (!io->din) return;
  int N = io->B * io->T;
  const float *mean = io->saved, *rstd = mean + N;
  io->k->layernorm_backward_input(io->k, io->din, io->dout, io->in, L->w[0], mean, rstd, N,
                                  L->out_dim, 0);
}

static void layernorm_backward_weight(pt_layer *L, const pt_io *io) {
  int N = io->B * io->T;
  const float *mean = io->saved, *rstd = mean + N;
  io->k->layernorm_backward_weight(io->k, L->g[0], L->g[1], io->dout, io->in, mean, rstd, N,
                                   L->out_dim);
}

static void layernorm_cost(const pt_layer *L, int T, pt_layer_cost *c) {
  layer_cost_default(L, T, c);
  c->fwd_flops = 8.0 * T * L->out_dim;
  c->bwd_flops = 12.0 * T * L->out_dim;
}

const pt_layer_type layer_type_layernorm = {
    .name = "layernorm",
    .kernels_only = 1,
    .settings = layernorm_settings,
    .configure = layernorm_configure,
    .saved_bytes = layernorm_saved,
    .init = layernorm_init,
    .forward = layernorm_forward,
    .backward_input = layernorm_backward_input,
    .backward_weight = layernorm_backward_weight,
    .din_by_norm = 1, /* its last norm's backward writes din */
    .in_read_at_rest = 1, /* only its norm's backward reads its input */
    .cost = layernorm_cost,
};
