#include "runtime/optimizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"

void optimizer_init(pt_optimizer *o, const spec_train *cfg, int64_t n_floats) {
  memset(o, 0, sizeof *o);
  o->cfg = *cfg;
  o->n_floats = n_floats;
  o->m = pt_alloc_aligned(sizeof(float) * (size_t)n_floats);
  /* SGD keeps one buffer (momentum); AdamW two */
  if (strcmp(cfg->optimizer, "sgd") != 0) o->v = pt_alloc_aligned(sizeof(float) * (size_t)n_floats);
}

void optimizer_free(pt_optimizer *o) {
  pt_free_aligned(o->m);
  pt_free_aligned(o->v);
  memset(o, 0, sizeof *o);
}

static void adamw_tensor(pt_optimizer *o, float *p, const float *g, float *m, float *v,
                         int64_t n, int decay, double lr) {
  const spec_train *c = &o->cfg;
  float b1 = (float)c->beta1, b2 = (float)c->beta2, eps = (float)c->eps;
  double bc1 = 1.0 - pow(c->beta1, (double)o->t), bc2 = 1.0 - pow(c->beta2, (double)o->t);
  float step = (float)(lr / bc1), inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
  float keep = decay ? (float)(1.0 - lr * c->weight_decay) : 1.0f;
  for (int64_t i = 0; i < n; i++) {
    p[i] *= keep;
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    p[i] -= step * m[i] / (sqrtf(v[i]) * inv_sqrt_bc2 + eps);
  }
}

static void sgd_tensor(pt_optimizer *o, float *p, const float *g, float *m, int64_t n, int decay,
                       double lr) {
  float mu = (float)o->cfg.momentum, wd = decay ? (float)o->cfg.weight_decay : 0.0f;
  for (int64_t i = 0; i < n; i++) {
    float d = g[i] + wd * p[i];
    m[i] = o->t > 1 ? mu * m[i] + d : d;
    p[i] -= (float)lr * (mu > 0.0f ? m[i] : d);
  }
}

void optimizer_step(pt_optimizer *o, pt_model *m, double lr) {
  if (o->n_floats != m->n_floats) pt_fatal("optimizer state does not match the model's size");
  o->t++;
  int adam = strcmp(o->cfg.optimizer, "sgd") != 0;
  for (int i = 0; i < m->n_tensors; i++) {
    const pt_tensor *t = &m->tensors[i];
    float *p = m->params + t->offset, *mm = o->m + t->offset;
    const float *g = m->grads + t->offset;
    if (adam)
      adamw_tensor(o, p, g, mm, o->v + t->offset, t->numel, t->decay, lr);
    else
      sgd_tensor(o, p, g, mm, t->numel, t->decay, lr);
  }
}

double lr_at(const spec_train *c, int64_t step) {
  if (step < c->warmup_steps) return c->lr * (double)(step + 1) / (double)c->warmup_steps;
  if (strcmp(c->lr_schedule, "cosine") != 0) return c->lr;
  int64_t span = c->steps - c->warmup_steps;
  double progress = span > 1 ? (double)(step - c->warmup_steps) / (double)(span - 1) : 1.0;
  if (progress > 1.0) progress = 1.0;
  return c->min_lr + (c->lr - c->min_lr) * 0.5 * (1.0 + cos(3.14159265358979323846 * progress));
}

void grad_tensor_sumsq(const pt_model *m, double *out) {
  for (int i = 0; i < m->n_tensors; i++) {
    const float *g = m->grads + m->tensors[i].offset;
    double s = 0.0;
    for (int64_t j = 0; j < m->tensors[i].numel && !m->tensors[i].tied_copy; j++)
      s += (double)g[j] * g[j];
    out[i] = s;
  }
}

double grad_sumsq(const pt_model *m) {
  double *per = pt_calloc((size_t)m->n_tensors + 1, sizeof(double)), s = 0.0;
  grad_tensor_sumsq(m, per);
  for (int i = 0; i < m->n_tensors; i++) s += per[i];
  free(per);
  return s;
}

double grad_clip(pt_model *m, double norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0;
  double coef = max_norm / (norm + 1e-6);
  if (coef >= 1.0) return 1.0;
  float c = (float)coef;
  for (int64_t i = 0; i < m->n_floats; i++) m->grads[i] *= c;
  return coef;
}

void nonfinite_message(const pt_model *m, int64_t step, int bad_layer, int stage, char *out,
                       size_t outsz) {
  if (bad_layer >= 0)
    snprintf(out, outsz, "step %lld: non-finite values: the output of layer %d (%s) on stage %d "
             "went non-finite first; lower the learning rate or check the data (or set "
             "train.on_nonfinite: skip)", (long long)step, bad_layer,
             m->layers[bad_layer].type->name, stage);
  else
    snprintf(out, outsz, "step %lld: non-finite gradients although every layer's output was "
             "finite (an overflow in the backward pass); lower the learning rate (or set "
             "train.on_nonfinite: skip)", (long long)step);
}
