/* embedding: token ids [B,T] -> weight rows [B,T,dim]; weight [vocab, dim], may be tied. */
#include "layers/builtin.h"

static void embedding_configure(pt_layer *L, const pt_layer_setup *s, spec_errors *e) {
  int64_t vocab = layer_require_model_int(s, s->spec->vocab, "vocab", "embedding", e);
  int64_t dim = layer_require_model_int(s, s->spec->dim, "dim", "embedding", e);
  if (!s->in_tokens)
    spec_error(e, s->args, 0, "embedding takes token ids and must come first (or after another "
               "layer that passes tokens through)");
  L->out_dim = (int)dim;
  layer_add_param(L, "weight", 2, vocab, dim, 0, 0);
}

static void embedding_init(pt_layer *L, uint64_t seed) { layer_init_normal(L, 0, seed, 0.02f); }

static void embedding_forward(pt_layer *L, const pt_io *io) {
  io->k->embedding_forward(io->k, io->out, io->in, L->w[0], io->B * io->T, L->out_dim,
                           (int)L->params[0].shape[0]);
}

static void embedding_backward_input(pt_layer *L, const pt_io *io) { (void)L, (void)io; }

static void embedding_backward_weight(pt_layer *L, const pt_io *io) {
  io->k->embedding_backward(io->k, L->g[0], io->in, io->dout, io->B * io->T, L->out_dim,
                            (int)L->params[0].shape[0]);
}

static void embedding_cost(const pt_layer *L, int T, pt_layer_cost *c) {
  layer_cost_default(L, T, c);
  c->fwd_flops = 0; /* a gather, no arithmetic */
  c->bwd_flops = (double)T * L->out_dim;
}

const pt_layer_type layer_type_embedding = {
    .name = "embedding",
    .kernels_only = 1,
    .configure = embedding_configure,
    .init = embedding_init,
    .forward = embedding_forward,
    .backward_input = embedding_backward_input,
    .backward_weight = embedding_backward_weight,
    .cost = embedding_cost,
};
