/* examples/custom_layer.c: registering your own layer types from C (docs/layers.md).
 *
 * Two types, the two ways a layer can be written:
 *   residual_linear  y = x + x W^T + b, written only against the kernel table io->k
 *                    (kernels_only): runs on every device, GPUs included;
 *   my_rmsnorm       y = x / sqrt(mean(x^2) + eps) * weight, with loops of its own on the
 *                    host: runs on pipeline.device cpu (and emulated), refused on a gpu; its
 *                    setting eps is declared once in a table (rms_settings) and read by name.
 * Registers both and trains examples/custom_layer.yaml, which uses them.
 *   custom_layer [SPEC] [--set KEY=VALUE ...]
 * Exits non-zero if the loss did not fall, so the test suite can run it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "layers/layer.h"
#include "spec/spec.h"
#include "engine/train.h"

/* --- residual_linear: every step is a kernel of the table, so it runs where io's buffers are */

static void rl_configure(pt_layer *L, const pt_layer_setup *s, spec_errors *e) {
  if (s->in_tokens) spec_error(e, s->args, 0, "residual_linear needs float features");
  L->out_dim = s->in_dim;
  layer_add_param(L, "weight", 2, s->in_dim, s->in_dim, 0, 0);
  layer_add_param(L, "bias", 1, s->in_dim, 0, 0, 0);
}

static void rl_forward(pt_layer *L, const pt_io *io) {
  const pt_kernels *k = io->k;
  k->linear_forward_residual(k, io->out, io->in, io->in, L->w[0], L->w[1], io->B * io->T,
                             L->in_dim, L->out_dim);
}

/* din = dout (the residual) + dout W: a copy, then the product accumulated onto it. */
static void rl_backward_input(pt_layer *L, const pt_io *io) {
  if (!io->din) return;
  const pt_kernels *k = io->k;
  int N = io->B * io->T;
  k->copy(k, io->din, io->dout, (int64_t)N * L->out_dim);
  k->linear_backward_input(k, io->din, io->dout, L->w[0], N, L->in_dim, L->out_dim, 1);
}

static void rl_backward_weight(pt_layer *L, const pt_io *io) {
  io->k->linear_backward_weight(io->k, L->g[0], L->g[1], io->dout, io->in, io->B * io->T,
                                L->in_dim, L->out_dim);
}

/* No init: the parameters start at zero, so the layer starts as the identity. */
static const pt_layer_type residual_linear_type = {
    .name = "residual_linear",
    .kernels_only = 1,
    .configure = rl_configure,
    .forward = rl_forward,
    .backward_input = rl_backward_input,
    .backward_weight = rl_backward_weight,
};

/* --- my_rmsnorm: host loops over io's buffers (kernels_only stays 0: cpu and emulated only) */

/* The spec arguments, declared once: the model builder parses and range-checks them (errors at
 * the file:line:col of the value) before configure; the steps read them by name. */
static const pt_setting_decl rms_settings[] = {
    /* name, kind, default, default from, min, max, required, doc */
    {"eps", PT_SETTING_NUM, 1e-6, NULL, 0.0, 1.0, 0, "added to the mean square"},
    {.name = NULL},
};

/* saved: rstd[N], written by forward and read by both backward halves */
static void rms_configure(pt_layer *L, const pt_layer_setup *s, spec_errors *e) {
  if (s->in_tokens) spec_error(e, s->args, 0, "my_rmsnorm needs float features");
  L->out_dim = s->in_dim;
  layer_add_param(L, "weight", 1, s->in_dim, 0, 0, 0);
}

static size_t rms_saved(const pt_layer *L, int B, int T) { return sizeof(float) * (size_t)B * T; }

static void rms_init(pt_layer *L, uint64_t seed) { layer_init_const(L, 0, 1.0f); }

static void rms_forward(pt_layer *L, const pt_io *io) {
  int N = io->B * io->T, D = L->out_dim;
  float eps = (float)layer_setting_num(L, "eps");
  const float *x = io->in;
  float *rstd = io->saved;
  for (int n = 0; n < N; n++) {
    const float *xr = x + (size_t)n * D;
    float ss = 0.0f;
    for (int i = 0; i < D; i++) ss += xr[i] * xr[i];
    rstd[n] = 1.0f / sqrtf(ss / D + eps);
    for (int i = 0; i < D; i++) io->out[(size_t)n * D + i] = xr[i] * rstd[n] * L->w[0][i];
  }
}

static void rms_backward_input(pt_layer *L, const pt_io *io) {
  if (!io->din) return;
  int N = io->B * io->T, D = L->out_dim;
  const float *x = io->in, *rstd = io->saved;
  for (int n = 0; n < N; n++) {
    const float *xr = x + (size_t)n * D, *dy = io->dout + (size_t)n * D;
    float dot = 0.0f; /* sum_i dy_i w_i x_i */
    for (int i = 0; i < D; i++) dot += dy[i] * L->w[0][i] * xr[i];
    float r = rstd[n], c = r * r * r * dot / D;
    for (int i = 0; i < D; i++) io->din[(size_t)n * D + i] = dy[i] * L->w[0][i] * r - xr[i] * c;
  }
}

static void rms_backward_weight(pt_layer *L, const pt_io *io) {
  int N = io->B * io->T, D = L->out_dim;
  const float *x = io->in, *rstd = io->saved;
  for (int n = 0; n < N; n++)
    for (int i = 0; i < D; i++)
      L->g[0][i] += io->dout[(size_t)n * D + i] * x[(size_t)n * D + i] * rstd[n];
}

static const pt_layer_type rmsnorm_type = {
    .name = "my_rmsnorm",
    .kernels_only = 0, /* the loops above read io's buffers on the host */
    .settings = rms_settings,
    .configure = rms_configure,
    .saved_bytes = rms_saved,
    .init = rms_init,
    .forward = rms_forward,
    .backward_input = rms_backward_input,
    .backward_weight = rms_backward_weight,
};

int main(int argc, char **argv) {
  const char *path = argc > 1 && argv[1][0] != '-' ? argv[1] : "examples/custom_layer.yaml";
  const char *overrides[64];
  int n_over = 0;
  for (int i = 1; i + 1 < argc && n_over < 64; i++)
    if (strcmp(argv[i], "--set") == 0) overrides[n_over++] = argv[++i];
  if (layer_register(&residual_linear_type) != 0 || layer_register(&rmsnorm_type) != 0) return 1;

  pt_spec spec;
  spec_errors e = {0};
  if (spec_load(path, overrides, n_over, &spec, &e) != 0) {
    fprintf(stderr, "%s\n", e.msg);
    return 2;
  }
  pt_trainer t;
  char err[1024];
  if (trainer_init(&t, &spec, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    return 2;
  }
  pt_step_metrics first, last;
  trainer_step(&t, &first);
  last = first;
  while (t.part.step < spec.train.steps) trainer_step(&t, &last);
  printf("custom_layer: residual_linear + my_rmsnorm model, loss %.4f -> %.4f over %lld steps\n",
         first.loss, last.loss, (long long)t.part.step);
  int ok = last.loss < first.loss - 0.5;
  trainer_free(&t);
  spec_free(&spec);
  if (!ok) fprintf(stderr, "custom_layer: the loss did not fall by 0.5 nats\n");
  return ok ? 0 : 1;
}
