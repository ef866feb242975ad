/* embedding: token ids [B,T] -> weight rows [B,T,dim]; weight [vocab, dim], may be tied. */
#include <string.h>

#include "layers/builtin.h"
#include "core/error.h"

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
  const int32_t *tok = io->in;
  int64_t D = L->out_dim, V = L->params[0].shape[0], N = (int64_t)io->B * io->T;
  for (int64_t n = 0; n < N; n++) {
    if (tok[n] < 0 || tok[n] >= V)
      pt_fatal("embedding layer %d: token id %d outside [0, %lld)", L->index, tok[n],
               (long long)V);
    memcpy(io->out + n * D, L->w[0] + (int64_t)tok[n] * D, sizeof(float) * D);
  }
}

static void embedding_backward_input(pt_layer *L, const pt_io *io) { (void)L, (void)io; }

static void embedding_backward_weight(pt_layer *L, const pt_io *io) {
  const int32_t *tok = io->in;
  int64_t D = L->out_dim, N = (int64_t)io->B * io->T;
  for (int64_t n = 0; n < N; n++) {
    float *row = L->g[0] + (int64_t)tok[n] * D;
    const float *d = io->dout + n * D;
    for (int64_t i = 0; i < D; i++) row[i] += d[i];
  }
}

static void embedding_cost(const pt_layer *L, int T, pt_layer_cost *c) {
  layer_cost_default(L, T, c);
  c->fwd_flops = 0; /* a gather, no arithmetic */
  c->bwd_flops = (double)T * L->out_dim;
}

const pt_layer_type layer_type_embedding = {
    .name = "embedding",
    .configure = embedding_configure,
    .init = embedding_init,
    .forward = embedding_forward,
    .backward_input = embedding_backward_input,
    .backward_weight = embedding_backward_weight,
    .cost = embedding_cost,
};
