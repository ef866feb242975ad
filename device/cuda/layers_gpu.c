/* The built-in layer types on the GPU: the CPU versions' steps (layers/NAME.c) with the CUDA
 * kernels of ops_cuda.h, on device buffers. Token ids were range-checked when the data was
 * read (engine/data.c), so the embedding does not check them again here. */
#include "layers/builtin.h"
#include "device/cuda/layers_gpu.h"
#include "kernels/cuda/ops_cuda.h"
#include "layers/transformer_block.h"

static int rows(const pt_io *io) { return io->B * io->T; }
static int64_t numel(const pt_layer *L, const pt_io *io) { return (int64_t)rows(io) * L->out_dim; }
static void no_weights(gpu_ctx *g, pt_layer *L, const pt_io *io) { (void)g, (void)L, (void)io; }

/* --- embedding, pos_embedding ------------------------------------------------------------- */
static void embedding_forward(gpu_ctx *g, pt_layer *L, const pt_io *io) {
  cuda_op_embedding_forward(g, io->out, io->in, L->w[0], rows(io), L->out_dim,
                            (int)L->params[0].shape[0]);
}
static void embedding_backward_weight(gpu_ctx *g, pt_layer *L, const pt_io *io) {
  cuda_op_embedding_backward(g, L->g[0], io->in, io->dout, rows(io), L->out_dim,
                             (int)L->params[0].shape[0]);
}

static void pos_forward(gpu_ctx *g, pt_layer *L, const pt_io *io) {
  cuda_op_pos_forward(g, io->out, io->in, L->w[0], io->B, io->T, L->out_dim);
}
static void pos_backward_input(gpu_ctx *g, pt_layer *L, const pt_io *io) {
  if (io->din) cuda_op_copy(g, io->din, io->dout, numel(L, io));
}
static void pos_backward_weight(gpu_ctx *g, pt_layer *L, const pt_io *io) {
  cuda_op_pos_backward_weight(g, L->g[0], io->dout, io->B, io->T, L->out_dim);
}

/* --- layernorm: saved mean[N], rstd[N] ---------------------------------------------------- */
static void layernorm_forward(gpu_ctx *g, pt_layer *L, const pt_io *io) {
  float *mean = io->saved, *rstd = mean + rows(io);
  cuda_op_layernorm_forward(g, io->out, mean, rstd, io->in, L->w[0], L->w[1], rows(io),
                            L->out_dim, (float)L->farg[0]);
}
static void layernorm_backward_input(gpu_ctx *g, pt_layer *L, const pt_io *io) {
  if (!io->din) return;
  const float *mean = io->saved, *rstd = mean + rows(io);
  cuda_op_layernorm_backward_input(g, io->din, io->dout, io->in, L->w[0], mean, rstd, rows(io),
                                   L->out_dim, 0);
}
static void layernorm_backward_weight(gpu_ctx *g, pt_layer *L, const pt_io *io) {
  const float *mean = io->saved, *rstd = mean + rows(io);
  cuda_op_layernorm_backward_weight(g, L->g[0], L->g[1], io->dout, io->in, mean, rstd, rows(io),
                                    L->out_dim);
}

/* --- linear, lm_head ---------------------------------------------------------------------- */
static void linear_forward(gpu_ctx *g, pt_layer *L, const pt_io *io) {
  cuda_op_linear_forward(g, io->out, io->in, L->w[0], L->n_params > 1 ? L->w[1] : NULL, rows(io),
                         L->in_dim, L->out_dim);
}
static void linear_backward_input(gpu_ctx *g, pt_layer *L, const pt_io *io) {
  if (io->din)
    cuda_op_linear_backward_input(g, io->din, io->dout, L->w[0], rows(io), L->in_dim, L->out_dim, 0);
}
static void linear_backward_weight(gpu_ctx *g, pt_layer *L, const pt_io *io) {
  cuda_op_linear_backward_weight(g, L->g[0], L->n_params > 1 ? L->g[1] : NULL, io->dout, io->in,
                                 rows(io), L->in_dim, L->out_dim);
}

/* --- gelu, relu --------------------------------------------------------------------------- */
static void gelu_forward(gpu_ctx *g, pt_layer *L, const pt_io *io) {
  cuda_op_gelu_forward(g, io->out, io->in, numel(L, io));
}
static void gelu_backward_input(gpu_ctx *g, pt_layer *L, const pt_io *io) {
  if (io->din) cuda_op_gelu_backward(g, io->din, io->dout, io->in, numel(L, io));
}
static void relu_forward(gpu_ctx *g, pt_layer *L, const pt_io *io) {
  cuda_op_relu_forward(g, io->out, io->in, numel(L, io));
}
static void relu_backward_input(gpu_ctx *g, pt_layer *L, const pt_io *io) {
  if (io->din) cuda_op_relu_backward(g, io->din, io->dout, io->in, numel(L, io));
}

/* --- transformer_block: the steps of transformer_block.c, same saved layout ---------------- */
static size_t block_scratch_bytes(const pt_layer *L, int B, int T) {
  int64_t N = (int64_t)B * T, d = L->out_dim;
  return sizeof(float) *
         (size_t)(5 * N * d + cuda_op_attention_scratch_floats(B, T, (int)d, (int)L->iarg[0]) + 64);
}

static void block_forward(gpu_ctx *g, pt_layer *L, const pt_io *io) {
  int B = io->B, T = io->T, N = B * T, d = L->out_dim, H = (int)L->iarg[0];
  float *const *w = L->w;
  block_saved s;
  transformer_block_views(L, B, T, io->saved, &s);
  cuda_op_layernorm_forward(g, s.xln1, s.mean1, s.rstd1, io->in, w[LN1_W], w[LN1_B], N, d, 1e-5f);
  cuda_op_linear_forward(g, s.qkv, s.xln1, w[QKV_W], w[QKV_B], N, d, 3 * d);
  cuda_op_attention_forward(g, s.atty, s.probs, s.qkv, B, T, d, H,
                            (float *)io->scratch + 5 * (int64_t)N * d);
  cuda_op_linear_forward_residual(g, s.x1, io->in, s.atty, w[PROJ_W], w[PROJ_B], N, d, d);
  cuda_op_layernorm_forward(g, s.xln2, s.mean2, s.rstd2, s.x1, w[LN2_W], w[LN2_B], N, d, 1e-5f);
  cuda_op_linear_forward(g, s.h, s.xln2, w[FC_W], w[FC_B], N, d, 4 * d);
  cuda_op_gelu_forward(g, s.g, s.h, (int64_t)N * 4 * d);
  cuda_op_linear_forward_residual(g, io->out, s.x1, s.g, w[MP_W], w[MP_B], N, 4 * d, d);
}

static void block_backward_input(gpu_ctx *g, pt_layer *L, const pt_io *io) {
  int B = io->B, T = io->T, N = B * T, d = L->out_dim, H = (int)L->iarg[0];
  float *const *w = L->w;
  block_saved s;
  transformer_block_views(L, B, T, io->saved, &s);
  float *dg = io->scratch, *datty = dg + (int64_t)N * 4 * d, *attn_scratch = datty + (int64_t)N * d;
  cuda_op_linear_backward_input(g, dg, io->dout, w[MP_W], N, 4 * d, d, 0);
  cuda_op_gelu_backward(g, s.h, dg, s.h, (int64_t)N * 4 * d); /* h now holds d(fc output) */
  cuda_op_linear_backward_input(g, s.dxln2, s.h, w[FC_W], N, d, 4 * d, 0);
  cuda_op_copy(g, s.dx1, io->dout, (int64_t)N * d);
  cuda_op_layernorm_backward_input(g, s.dx1, s.dxln2, s.x1, w[LN2_W], s.mean2, s.rstd2, N, d, 1);
  cuda_op_linear_backward_input(g, datty, s.dx1, w[PROJ_W], N, d, d, 0);
  cuda_op_attention_backward(g, s.dqkv, datty, s.qkv, s.probs, B, T, d, H, attn_scratch);
  cuda_op_linear_backward_input(g, s.dxln1, s.dqkv, w[QKV_W], N, d, 3 * d, 0);
  if (!io->din) return;
  cuda_op_copy(g, io->din, s.dx1, (int64_t)N * d);
  cuda_op_layernorm_backward_input(g, io->din, s.dxln1, io->in, w[LN1_W], s.mean1, s.rstd1, N, d,
                                   1);
}

static void block_backward_weight(gpu_ctx *g, pt_layer *L, const pt_io *io) {
  int N = io->B * io->T, d = L->out_dim;
  float *const *gr = L->g;
  block_saved s;
  transformer_block_views(L, io->B, io->T, io->saved, &s);
  cuda_op_linear_backward_weight(g, gr[MP_W], gr[MP_B], io->dout, s.g, N, 4 * d, d);
  cuda_op_linear_backward_weight(g, gr[FC_W], gr[FC_B], s.h, s.xln2, N, d, 4 * d);
  cuda_op_layernorm_backward_weight(g, gr[LN2_W], gr[LN2_B], s.dxln2, s.x1, s.mean2, s.rstd2, N, d);
  cuda_op_linear_backward_weight(g, gr[PROJ_W], gr[PROJ_B], s.dx1, s.atty, N, d, d);
  cuda_op_linear_backward_weight(g, gr[QKV_W], gr[QKV_B], s.dqkv, s.xln1, N, d, 3 * d);
  cuda_op_layernorm_backward_weight(g, gr[LN1_W], gr[LN1_B], s.dxln1, io->in, s.mean1, s.rstd1, N,
                                    d);
}

static const pt_layer_gpu tables[] = {
    {&layer_type_embedding, embedding_forward, no_weights, embedding_backward_weight, NULL},
    {&layer_type_pos_embedding, pos_forward, pos_backward_input, pos_backward_weight, NULL},
    {&layer_type_layernorm, layernorm_forward, layernorm_backward_input,
     layernorm_backward_weight, NULL},
    {&layer_type_linear, linear_forward, linear_backward_input, linear_backward_weight, NULL},
    {&layer_type_lm_head, linear_forward, linear_backward_input, linear_backward_weight, NULL},
    {&layer_type_gelu, gelu_forward, gelu_backward_input, no_weights, NULL},
    {&layer_type_relu, relu_forward, relu_backward_input, no_weights, NULL},
    {&layer_type_transformer_block, block_forward, block_backward_input, block_backward_weight,
     block_scratch_bytes},
};

/* By table, not by name: a user's type registered under a built-in's name has no kernels. */
const pt_layer_gpu *layer_gpu_find(const pt_layer_type *type) {
  for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
    if (tables[i].type == type) return &tables[i];
  return NULL;
}
