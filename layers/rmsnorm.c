/* rmsnorm over the feature dim (Llama's, Hugging Face's LlamaRMSNorm): param weight [D], no
 * bias; setting eps (default 1e-6). y = x / sqrt(mean(x^2) + eps) * (weight_offset + w), the
 * sum in float (weight_offset 1: Gemma's RMSNorm, transformers' 1.0 + weight.float()).
 * saved: rstd[N]; scratch: the offset weight [D]. */
#include "layers/builtin.h"

static const pt_setting_decl rmsnorm_settings[] = {
    {"eps", PT_SETTING_NUM, 1e-6, NULL, 1e-12, 1.0, 0, "added to the mean square"},
    {"weight_offset", PT_SETTING_NUM, 0, NULL, -16, 16, 0,
     "added to the weight: 1 is Gemma's (1 + w)"},
    {.name = NULL},
};

static size_t rmsnorm_scratch(const pt_layer *L, const pt_kernels *k, int B, int T) {
  (void)k, (void)B, (void)T;
  return layer_setting_num(L, "weight_offset") != 0 ? sizeof(float) * (size_t)L->out_dim : 0;
}

/* The weight the kernels compute with: w, or w + weight_offset in scratch. */
static const float *norm_weight(const pt_layer *L, const pt_io *io) {
  float off = (float)layer_setting_num(L, "weight_offset");
  if (off == 0) return L->w[0];
  io->k->add_scalar(io->k, io->scratch, L->w[0], off, L->out_dim);
  return io->scratch;
}

static void rmsnorm_configure(pt_layer *L, const pt_layer_setup *s, spec_errors *e) {
  if (s->in_tokens)
    spec_error(e, s->args, 0, "rmsnorm takes float features; put an embedding before it");
  L->out_dim = s->in_dim;
  layer_add_param(L, "weight", 1, s->in_dim, 0, 0, 0);
}

static size_t rmsnorm_saved(const pt_layer *L, int B, int T) {
  return sizeof(float) * (size_t)B * T;
}

static void rmsnorm_init(pt_layer *L, uint64_t seed) {
  layer_init_const(L, 0, 1.0f - (float)layer_setting_num(L, "weight_offset"));
}

static void rmsnorm_forward(pt_layer *L, const pt_io *io) {
  io->k->rmsnorm_forward(io->k, io->out, io->saved, io->in, norm_weight(L, io), io->B * io->T,
                         L->out_dim, (float)layer_setting_num(L, "eps"));
}

static void rmsnorm_backward_input(pt_layer *L, const pt_io *io) {
  if (!io->din) return;
  io->k->rmsnorm_backward_input(io->k, io->din, io->dout, io->in, norm_weight(L, io), io->saved,
                                io->B * io->T, L->out_dim, 0);
}

static void rmsnorm_backward_weight(pt_layer *L, const pt_io *io) {
  io->k->rmsnorm_backward_weight(io->k, L->g[0], io->dout, io->in, io->saved, io->B * io->T,
                                 L->out_dim);
}

static void rmsnorm_cost(const pt_layer *L, int T, pt_layer_cost *c) {
  layer_cost_default(L, T, c);
  c->fwd_flops = 4.0 * T * L->out_dim;
  c->bwd_flops = 8.0 * T * L->out_dim;
}

const pt_layer_type layer_type_rmsnorm = {
    .name = "rmsnorm",
    .kernels_only = 1,
    .settings = rmsnorm_settings,
    .configure = rmsnorm_configure,
    .saved_bytes = rmsnorm_saved,
    .scratch_bytes = rmsnorm_scratch,
    .init = rmsnorm_init,
    .forward = rmsnorm_forward,
    .backward_input = rmsnorm_backward_input,
    .backward_weight = rmsnorm_backward_weight,
    .din_by_norm = 1, /* its last norm's backward writes din */
    .in_read_at_rest = 1, /* only its norm's backward reads its input */
    .cost = rmsnorm_cost,
};
