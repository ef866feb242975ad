/* embedding: token ids [B,T] -> weight rows [B,T,dim]; weight [vocab, dim], may be tied.
 * Setting scale_sqrt_dim: the rows times sqrt(dim) rounded to float32, as Gemma's scaled
 * embedding multiplies by its normalizer in the weight's dtype. */
#include <math.h>

#include "layers/builtin.h"

static const pt_setting_decl embedding_settings[] = {
    {"scale_sqrt_dim", PT_SETTING_BOOL, 0, NULL, 0, 1, 0,
     "multiply the rows by sqrt(dim) in float32 (Gemma)"},
    {.name = NULL},
};

/* The factor of the rows: sqrt(dim) as float32 (1: no scaling). */
static float row_scale(const pt_layer *L) {
  return layer_setting_bool(L, "scale_sqrt_dim") ? (float)sqrt((double)L->out_dim) : 1.0f;
}

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

/* scale_sqrt_dim: backward_weight's dout times the factor, [B*T, dim]. */
static size_t embedding_scratch(const pt_layer *L, const pt_kernels *k, int B, int T) {
  (void)k;
  return row_scale(L) != 1.0f ? sizeof(float) * (size_t)B * T * L->out_dim : 0;
}

static void embedding_forward(pt_layer *L, const pt_io *io) {
  io->k->embedding_forward(io->k, io->out, io->in, L->w[0], io->B * io->T, L->out_dim,
                           (int)L->params[0].shape[0]);
  if (row_scale(L) != 1.0f)
    io->k->scale(io->k, io->out, row_scale(L), (int64_t)io->B * io->T * L->out_dim);
}

static void embedding_backward_input(pt_layer *L, const pt_io *io) { (void)L, (void)io; }

static void embedding_backward_weight(pt_layer *L, const pt_io *io) {
  const float *dy = io->dout;
  const int64_t n = (int64_t)io->B * io->T * L->out_dim;
  if (row_scale(L) != 1.0f) { /* d(s * row) = s * dy, scaled before the adds as autograd does */
    io->k->copy(io->k, io->scratch, dy, n);
    io->k->scale(io->k, io->scratch, row_scale(L), n);
    dy = io->scratch;
  }
  io->k->embedding_backward(io->k, L->g[0], io->in, dy, io->B * io->T, L->out_dim,
                            (int)L->params[0].shape[0]);
}

static void embedding_cost(const pt_layer *L, int T, pt_layer_cost *c) {
  layer_cost_default(L, T, c);
  c->fwd_flops = 0; /* a gather, no arithmetic */
  c->bwd_flops = (double)T * L->out_dim;
  if (row_scale(L) != 1.0f) c->fwd_flops = c->bwd_flops = 2.0 * T * L->out_dim;
}

const pt_layer_type layer_type_embedding = {
    .name = "embedding",
    .kernels_only = 1,
    .settings = embedding_settings,
    .configure = embedding_configure,
    .scratch_bytes = embedding_scratch,
    .init = embedding_init,
    .forward = embedding_forward,
    .backward_input = embedding_backward_input,
    .backward_weight = embedding_backward_weight,
    .cost = embedding_cost,
};
