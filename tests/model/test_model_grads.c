/* The whole stack's gradient against central finite differences of an independent double
 * reference (tests/ref): a tied GPT (embedding and lm_head share one weight, so the FD of that
 * tensor is the sum of both uses) with cross_entropy, and an MLP with mse. The float path runs
 * exactly what training runs: model_alloc, stage_forward, loss_forward_backward with the 1/(G*T)
 * scale, stage_backward. Then a model held as several layer ranges (a rank running several
 * chunks, model_alloc_ranges): its storage, and its gradients run chunk after chunk against the
 * whole model's, bit for bit. */
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


/* --- Several layer ranges in one process ------------------------------------------------------ */

static const pt_tensor *tensor_named(const pt_model *m, const char *name) {
  for (int i = 0; i < m->n_tensors; i++)
    if (!strcmp(m->tensors[i].name, name)) return &m->tensors[i];
  return NULL;
}

/* Every tensor of part holds the whole model's values (init by global layer index; a tied copy
 * the first owner's), in layer order, 16-float aligned (a group's later members right after the
 * one before). */
static void check_same_init(const pt_model *part, const pt_model *whole, const char *what) {
  for (int i = 0; i < part->n_tensors; i++) {
    const pt_tensor *t = &part->tensors[i];
    char key[128];
    const pt_tensor *w = tensor_named(whole, model_tensor_key(part, i, key, sizeof key));
    CHECK(w && w->numel == t->numel &&
              !memcmp(part->params + t->offset, whole->params + w->offset, 4 * (size_t)t->numel),
          "%s: %s does not start as the whole model's %s", what, t->name, key);
    const pt_tensor *prev = i ? &part->tensors[i - 1] : NULL;
    int grouped = prev && prev->layer == t->layer &&
                  part->layers[t->layer].params[prev->param].group_next;
    CHECK(grouped ? t->offset == prev->offset + prev->numel : t->offset % 16 == 0,
          "%s: %s unaligned, or apart from the parameter group before it", what, t->name);
    CHECK(!prev || t->layer >= prev->layer, "%s: %s out of layer order", what, t->name);
  }
}

/* Three layers share one weight (1, 3, 5). Held as [0, 2) and [5, 7): 1 stores it, 5 borrows
 * it. Held as [2, 7) alone: 3 stores it (a copy of 1's, which another process counts), 5
 * borrows it from 3: one copy per process however many of its layers share it. */
static void check_range_storage(const pt_spec *s) {
  spec_errors e = {0};
  pt_model whole, a, b;
  if (model_configure(&whole, s, &e) || model_configure(&a, s, &e) || model_configure(&b, s, &e))
    pt_fatal("%s", e.msg);
  model_alloc(&whole, 0, whole.n_layers);
  pt_range ra[2] = {{0, 2}, {5, 7}}, rb[1] = {{2, 7}};
  model_alloc_ranges(&a, ra, 2, device_current());
  model_alloc_ranges(&b, rb, 1, device_current());
  CHECK(model_holds_layer(&a, 1) && model_holds_layer(&a, 5) && !model_holds_layer(&a, 3) &&
            a.first == 0 && a.last == 7,
        "ranges: held layers");
  CHECK(a.n_tensors == 7 && !tensor_named(&a, "5.weight") && a.n_tie_copies == 1 &&
            a.tie_copies[0].layer == 5 &&
            !strcmp(a.tensors[a.tie_copies[0].owner_tensor].name, "1.weight"),
        "ranges [0,2) [5,7): %d tensors, %d borrowed copies", a.n_tensors, a.n_tie_copies);
  const pt_tensor *t3 = tensor_named(&b, "3.weight");
  CHECK(t3 && t3->tied_copy && !tensor_named(&b, "5.weight") && b.n_tie_copies == 1 &&
            b.tie_copies[0].layer == 5 && &b.tensors[b.tie_copies[0].owner_tensor] == t3,
        "range [2,7): 3 stores the tied weight, 5 borrows it");
  check_same_init(&a, &whole, "ranges [0,2) [5,7)");
  check_same_init(&b, &whole, "range [2,7)");
  model_free(&whole), model_free(&a), model_free(&b);
}

/* Forward through the chunks' stages in turn (the local hand-off: each chunk copies its
 * predecessor's output), the loss, backward in reverse with each chunk's input gradient written
 * into its predecessor's output-gradient buffer; the tied copies folded. */
static void chunked_step(pt_model *m, const pt_range *r, int n, const int32_t *tok,
                         const int32_t *cls) {
  pt_stage st[4];
  float *dout[4];
  for (int i = 0; i < n; i++) {
    stage_init(&st[i], m, r[i].first, r[i].last, B, T, 1, i == 1 ? 1 : 0);
    dout[i] = pt_alloc_aligned(sizeof(float) * B * T * m->layers[r[i].last - 1].out_dim);
  }
  memcpy(stage_input(&st[0], 0), tok, sizeof(int32_t) * B * T);
  model_zero_grads(m);
  for (int i = 0; i < n; i++) {
    if (i > 0) memcpy(stage_input(&st[i], 0), stage_output(&st[i - 1], 0), st[i].in_bytes);
    stage_forward(&st[i], 0, B, T);
  }
  int F = m->layers[m->n_layers - 1].out_dim;
  loss_forward_backward(m->loss, stage_output(&st[n - 1], 0), cls, B * T, F, 1.0f / (B * T),
                        dout[n - 1]);
  for (int i = n - 1; i >= 0; i--)
    stage_backward(&st[i], 0, dout[i], i > 0, i > 0 ? dout[i - 1] : NULL);
  model_tie_reduce_local(m);
  for (int i = 0; i < n; i++) stage_free(&st[i]), pt_free_aligned(dout[i]);
}

/* The tied GPT as three chunks in one process, one of them checkpointed, against the whole model
 * as one stage: the same layout, so every gradient float must match. */
static void check_range_grads(const pt_spec *s) {
  spec_errors e = {0};
  pt_model whole, part;
  if (model_configure(&whole, s, &e) || model_configure(&part, s, &e)) pt_fatal("%s", e.msg);
  pt_range all = {0, whole.n_layers}, r[3] = {{0, 2}, {2, 4}, {4, whole.n_layers}};
  model_alloc_ranges(&whole, &all, 1, device_current());
  model_alloc_ranges(&part, r, 3, device_current());
  int32_t tok[B * T], cls[B * T];
  for (int i = 0; i < B * T; i++)
    tok[i] = (7 * i + 3) % (int)s->vocab, cls[i] = (5 * i + 1) % (int)s->vocab;
  chunked_step(&whole, &all, 1, tok, cls);
  chunked_step(&part, r, 3, tok, cls);
  CHECK(whole.n_grad_floats == part.n_grad_floats &&
            !memcmp(whole.grads, part.grads, sizeof(float) * (size_t)whole.n_floats),
        "three chunks in one process: gradients differ from the whole model's");
  model_free(&whole), model_free(&part);
}

static void run_ranges(const char *gpt_yaml, const char *f32_path) {
  char yaml[1024];
  snprintf(yaml, sizeof yaml,
           "model: {dim: 8}\n"
           "layers:\n  - linear: {out: 8}\n  - linear: {tie: w}\n  - gelu: {}\n"
           "  - linear: {tie: w}\n  - gelu: {}\n  - linear: {tie: w}\n  - linear: {out: 3}\n"
           "loss: mse\ndata: {path: %s, format: f32, inputs: 6, targets: 3}\n", f32_path);
  pt_spec s, g;
  spec_errors e = {0};
  if (spec_load_text(yaml, strlen(yaml), "ties3.yaml", NULL, 0, &s, &e) != 0 ||
      spec_load_text(gpt_yaml, strlen(gpt_yaml), "gpt.yaml", NULL, 0, &g, &e) != 0)
    pt_fatal("%s", e.msg);
  check_range_storage(&s);
  check_range_grads(&g);
  spec_free(&s), spec_free(&g);
}

int main(void) {
  const char *gpt = "model: {vocab: 11, seq_len: 6, dim: 8, heads: 2}\n"
                    "layers:\n  - embedding: {tie: wte}\n  - pos_embedding: {}\n"
                    "  - transformer_block: {repeat: 2}\n  - layernorm: {}\n"
                    "  - lm_head: {tie: wte}\n";
  run_case(gpt, "tied gpt");
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
  run_ranges(gpt, path);
  remove(path);
  return test_summary("model grads");
}
