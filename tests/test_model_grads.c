/* The whole stack's gradient against central finite differences of an independent double
 * reference (tests/ref): a tied GPT (embedding and lm_head share one weight, so the FD of that
 * tensor is the sum of both uses) with cross_entropy, and an MLP with mse. The float path runs
 * exactly what training runs: model_alloc, stage_forward, loss_forward_backward with the 1/(G*T)
 * scale, stage_backward. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref_layers.h"
#include "core/error.h"
#include "kernels/loss.h"
#include "model/model.h"
#include "engine/stage.h"
#include "test_util.h"

enum { B = 2, T = 5 };

typedef struct {
  pt_model *m;
  double **p;    /* double copy of each stored tensor (index as m->tensors) */
  int32_t *tok, *cls;
  double *x, *y; /* float-feature input and mse targets */
} ref_case;

static uint64_t g_rng = 12345;
static double urand(void) { /* uniform in [-1, 1) */
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static ref_shape shape_of(const pt_model *m, const pt_layer *L) {
  const pt_spec *s = m->spec;
  ref_shape r = ref_shape_default((int)s->vocab, (int)s->seq_len, (int)s->dim, (int)s->heads);
  r.in_dim = L->in_dim;
  r.out_dim = L->out_dim;
  r.has_bias = L->n_params > 1;
  return r;
}

/* Where layer L's parameter p lives in the double copy (tied copies share the owner's). */
static double *ref_param_of(ref_case *c, const pt_layer *L, int p) {
  for (int i = 0; i < c->m->n_tensors; i++) {
    const pt_tensor *t = &c->m->tensors[i];
    if (L->w[p] == c->m->params + t->offset) return c->p[i];
  }
  pt_fatal("no tensor for layer %d param %d", L->index, p);
}

/* Loss of the double reference, with the trainer's scaling (sum / (B*T)). */
static double ref_loss(ref_case *c) {
  pt_model *m = c->m;
  double *cur = NULL;
  for (int li = 0; li < m->n_layers; li++) {
    const pt_layer *L = &m->layers[li];
    ref_shape s = shape_of(m, L);
    double *params[PT_MAX_PARAMS], *out = malloc(sizeof(double) * B * T * L->out_dim);
    for (int p = 0; p < L->n_params; p++) params[p] = ref_param_of(c, L, p);
    ref_forward(L->type->name, &s, params, li ? cur : c->x, c->tok, B, T, out);
    free(cur);
    cur = out;
  }
  int F = m->layers[m->n_layers - 1].out_dim;
  double sum = m->loss == LOSS_CROSS_ENTROPY ? ref_cross_entropy_sum(cur, c->cls, B * T, F)
                                             : ref_mse_sum(cur, c->y, B * T, F);
  free(cur);
  return sum / (B * T);
}

/* Float forward+backward; returns the loss. Gradients land in m->grads. */
static double float_step(ref_case *c, pt_stage *st) {
  pt_model *m = c->m;
  int F = m->layers[m->n_layers - 1].out_dim, in_f = m->input_tokens ? 1 : m->input_dim;
  float *in = stage_input(st, 0), *dy = pt_alloc_aligned(sizeof(float) * B * T * F);
  float *yt = pt_calloc((size_t)B * T * F, sizeof(float));
  for (int i = 0; i < B * T * in_f; i++)
    if (m->input_tokens) ((int32_t *)in)[i] = c->tok[i];
    else in[i] = (float)c->x[i];
  for (int i = 0; i < B * T * F; i++) yt[i] = c->y ? (float)c->y[i] : 0.0f;
  model_zero_grads(m);
  const float *out = stage_forward(st, 0, B, T);
  float scale = 1.0f / (B * T);
  const void *tg = m->loss == LOSS_CROSS_ENTROPY ? (const void *)c->cls : (const void *)yt;
  double loss = loss_forward_backward(m->loss, out, tg, B * T, F, scale, dy) * scale;
  stage_backward(st, 0, dy, 0, NULL);
  model_tie_reduce_local(m); /* as the trainer does: copies fold into the owner */
  pt_free_aligned(dy);
  free(yt);
  return loss;
}

/* Compares every stored tensor's gradient (up to 48 sampled elements each) with central FD.
 * Tolerance: the float gradient carries float32 rounding (~1e-6 relative per op) against an FD
 * in double with error ~h^2; 2e-4 of the tensor's largest gradient covers the first with
 * margin while a wrong formula is off by O(1). */
static void check_grads(ref_case *c, const char *what) {
  pt_model *m = c->m;
  for (int i = 0; i < m->n_tensors; i++) {
    const pt_tensor *t = &m->tensors[i];
    const float *g = m->grads + t->offset;
    double gmax = 1e-6;
    for (int64_t j = 0; j < t->numel; j++) gmax = fmax(gmax, fabs(g[j]));
    int64_t stride = t->numel > 48 ? t->numel / 48 : 1;
    for (int64_t j = 0; j < t->numel; j += stride) {
      double keep = c->p[i][j], h = 1e-5;
      c->p[i][j] = keep + h;
      double lp = ref_loss(c);
      c->p[i][j] = keep - h;
      double lm = ref_loss(c);
      c->p[i][j] = keep;
      double fd = (lp - lm) / (2 * h);
      CHECK(fabs(g[j] - fd) <= 2e-4 * gmax, "%s: %s[%lld]: analytic %.8g vs FD %.8g (max %.3g)",
            what, t->name, (long long)j, g[j], fd, gmax);
    }
  }
}

static void run_case(const char *yaml, const char *what) {
  pt_spec s;
  spec_errors e = {0};
  if (spec_load_text(yaml, strlen(yaml), "grads.yaml", NULL, 0, &s, &e) != 0) pt_fatal("%s", e.msg);
  pt_model m;
  if (model_configure(&m, &s, &e) != 0) pt_fatal("%s", e.msg);
  model_alloc(&m, 0, m.n_layers);
  int F = m.layers[m.n_layers - 1].out_dim;
  ref_case c = {.m = &m, .p = pt_calloc((size_t)m.n_tensors, sizeof(double *))};
  for (int i = 0; i < m.n_tensors; i++) {
    const pt_tensor *t = &m.tensors[i];
    c.p[i] = pt_calloc((size_t)t->numel, sizeof(double));
    for (int64_t j = 0; j < t->numel; j++) {
      /* perturb the init so biases and LayerNorm affine parts are not trivially 0/1 */
      m.params[t->offset + j] += (float)(0.05 * urand());
      c.p[i][j] = m.params[t->offset + j];
    }
  }
  c.tok = pt_calloc(B * T, sizeof(int32_t));
  c.cls = pt_calloc(B * T, sizeof(int32_t));
  c.x = pt_calloc((size_t)B * T * (m.input_dim + 1), sizeof(double));
  c.y = m.loss == LOSS_MSE ? pt_calloc((size_t)B * T * F, sizeof(double)) : NULL;
  for (int i = 0; i < B * T; i++) {
    c.tok[i] = (int32_t)((urand() + 1.0) * 0.5 * s.vocab) % (s.vocab > 0 ? (int)s.vocab : 1);
    c.cls[i] = (int32_t)((urand() + 1.0) * 0.5 * F) % F;
  }
  for (int i = 0; i < B * T * m.input_dim; i++) c.x[i] = urand();
  for (int i = 0; c.y && i < B * T * F; i++) c.y[i] = urand();
  pt_stage st;
  stage_init(&st, &m, 0, m.n_layers, B, T, 1, 0);
  double lf = float_step(&c, &st), lr = ref_loss(&c);
  CHECK(fabs(lf - lr) <= 1e-5 * fabs(lr), "%s: loss float %.9g vs double %.9g", what, lf, lr);
  check_grads(&c, what);
  stage_free(&st);
  for (int i = 0; i < m.n_tensors; i++) free(c.p[i]);
  free(c.p), free(c.tok), free(c.cls), free(c.x), free(c.y);
  model_free(&m);
  spec_free(&s);
}

int main(void) {
  run_case("model: {vocab: 11, seq_len: 6, dim: 8, heads: 2}\n"
           "layers:\n  - embedding: {tie: wte}\n  - pos_embedding: {}\n"
           "  - transformer_block: {repeat: 2}\n  - layernorm: {}\n  - lm_head: {tie: wte}\n",
           "tied gpt");
  char path[] = "/tmp/pt_grads_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) pt_fatal("mkstemp");
  char yaml[1024];
  snprintf(yaml, sizeof yaml,
           "model: {dim: 7}\n"
           "layers:\n  - linear: {out: 16}\n  - relu: {}\n  - linear: {out: 12, bias: false}\n"
           "  - gelu: {}\n  - layernorm: {}\n  - linear: {out: 3}\n"
           "loss: mse\ndata: {path: %s, format: f32, inputs: 6, targets: 3}\n", path);
  run_case(yaml, "mlp mse");
  remove(path);
  return test_summary("model grads");
}
