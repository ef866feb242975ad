/* pos_embedding: out[b,t,:] = in[b,t,:] + weight[t,:]; weight [seq_len, dim]. */
#include "layers/builtin.h"

static void pos_configure(pt_layer *L, const pt_layer_setup *s, spec_errors *e) {
  int64_t T = layer_require_model_int(s, s->spec->seq_len, "seq_len", "pos_embedding", e);
  int64_t dim = layer_require_model_int(s, s->spec->dim, "dim", "pos_embedding", e);
  layer_expect_features(s, dim, "pos_embedding", e);
  L->out_dim = (int)dim;
  layer_add_param(L, "weight", 2, T, dim, 0, 0);
}

static void pos_init(pt_layer *L, uint64_t seed) { layer_init_normal(L, 0, seed, 0.02f); }

static void pos_forward(pt_layer *L, const pt_io *io) {
  io->k->pos_forward(io->k, io->out, io->in, L->w[0], io->B, io->T, L->out_dim, io->positions);
}

static void pos_backward_input(pt_layer *L, const pt_io *io) {
  if (io->din) io->k->copy(io->k, io->din, io->dout, (int64_t)io->B * io->T * L->out_dim);
}

static void pos_backward_weight(pt_layer *L, const pt_io *io) {
  io->k->pos_backward_weight(io->k, L->g[0], io->dout, io->B, io->T, L->out_dim,
                             io->positions);
}

static void pos_cost(const pt_layer *L, int T, pt_layer_cost *c) {
  layer_cost_default(L, T, c);
  c->fwd_flops = (double)T * L->out_dim;
  c->bwd_flops = c->fwd_flops;
}

const pt_layer_type layer_type_pos_embedding = {
    .name = "pos_embedding",
    .kernels_only = 1,
    .configure = pos_configure,
    .init = pos_init,
    .forward = pos_forward,
    .backward_input = pos_backward_input,
    .backward_weight = pos_backward_weight,
    .in_read_at_rest = 1, /* its backward reads no input */
    .cost = pos_cost,
};
