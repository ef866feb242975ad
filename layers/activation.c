/* gelu (tanh approximation) and relu: elementwise, no parameters, nothing saved (the input is). */
#include "layers/builtin.h"

static void act_configure(pt_layer *L, const pt_layer_setup *s, spec_errors *e) {
  if (s->in_tokens)
    spec_error(e, s->args, 0, "%s takes float features; put an embedding before it",
               L->type->name);
  L->out_dim = s->in_dim;
}

static void act_backward_weight(pt_layer *L, const pt_io *io) { (void)L, (void)io; }

static int64_t act_numel(const pt_layer *L, const pt_io *io) {
  return (int64_t)io->B * io->T * L->out_dim;
}

static void gelu_forward(pt_layer *L, const pt_io *io) {
  io->k->gelu_forward(io->k, io->out, io->in, act_numel(L, io));
}

static void gelu_backward_input(pt_layer *L, const pt_io *io) {
  if (io->din) io->k->gelu_backward(io->k, io->din, io->dout, io->in, act_numel(L, io));
}

static void relu_forward(pt_layer *L, const pt_io *io) {
  io->k->relu_forward(io->k, io->out, io->in, act_numel(L, io));
}

static void relu_backward_input(pt_layer *L, const pt_io *io) {
  if (io->din) io->k->relu_backward(io->k, io->din, io->dout, io->in, act_numel(L, io));
}

static void act_cost(const pt_layer *L, int T, pt_layer_cost *c) {
  layer_cost_default(L, T, c);
  c->fwd_flops = 8.0 * T * L->out_dim;
  c->bwd_flops = 12.0 * T * L->out_dim;
}

const pt_layer_type layer_type_gelu = {
    .name = "gelu",
    .kernels_only = 1,
    .configure = act_configure,
    .forward = gelu_forward,
    .backward_input = gelu_backward_input,
    .backward_weight = act_backward_weight,
    .cost = act_cost,
};

const pt_layer_type layer_type_relu = {
    .name = "relu",
    .kernels_only = 1,
    .configure = act_configure,
    .forward = relu_forward,
    .backward_input = relu_backward_input,
    .backward_weight = act_backward_weight,
    .cost = act_cost,
};
