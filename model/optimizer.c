#include "model/optimizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "device/stats.h"

/* A device buffer of n floats and its host copy (the same buffer on the cpu). */
static float *state_alloc(pt_device *d, int64_t n, float **host) {
  float *b = device_alloc(d, sizeof(float) * (size_t)n);
  *host = device_shares_host_memory(d) ? b : pt_calloc((size_t)n + 16, sizeof(float));
  return b;
}

int64_t optimizer_shard_end(int64_t n, int shards, int r) {
  if (r < 0) return 0;
  if (r >= shards - 1) return n;
  int64_t end = (n * (r + 1) / shards + 15) & ~(int64_t)15;
  return end < n ? end : n;
}

int64_t optimizer_shard_max(int64_t n, int shards) {
  int64_t most = 0;
  for (int r = 0; r < shards; r++) {
    int64_t len = optimizer_shard_end(n, shards, r) - optimizer_shard_end(n, shards, r - 1);
    if (len > most) most = len;
  }
  return most;
}

void optimizer_init_shard(pt_optimizer *o, const spec_train *cfg, int64_t n_floats, int shard,
                          int shards) {
  memset(o, 0, sizeof *o);
  o->cfg = *cfg;
  o->model_floats = n_floats;
  o->shard = shard, o->shards = shards;
  o->lo = optimizer_shard_end(n_floats, shards, shard - 1);
  o->n_floats = optimizer_shard_end(n_floats, shards, shard) - o->lo;
  o->dev = device_current();
  o->m = state_alloc(o->dev, o->n_floats, &o->host_m);
  /* SGD keeps one buffer (momentum); AdamW two */
  if (cfg->optimizer != SPEC_OPTIMIZER_SGD) o->v = state_alloc(o->dev, o->n_floats, &o->host_v);
}

void optimizer_init(pt_optimizer *o, const spec_train *cfg, int64_t n_floats) {
  optimizer_init_shard(o, cfg, n_floats, 0, 1);
}

void optimizer_init_whole(pt_optimizer *whole, const pt_optimizer *o) {
  memset(whole, 0, sizeof *whole);
  whole->cfg = o->cfg;
  whole->t = o->t;
  whole->n_floats = whole->model_floats = o->model_floats;
  whole->shards = 1;
  whole->host_m = pt_calloc((size_t)o->model_floats + 16, sizeof(float));
  if (o->v) whole->host_v = pt_calloc((size_t)o->model_floats + 16, sizeof(float));
}

void optimizer_shard_put(pt_optimizer *whole, const pt_optimizer *o) {
  size_t bytes = sizeof(float) * (size_t)o->n_floats;
  memcpy(whole->host_m + o->lo, o->host_m, bytes);
  if (o->v) memcpy(whole->host_v + o->lo, o->host_v, bytes);
}

void optimizer_shard_take(pt_optimizer *o, const pt_optimizer *whole) {
  size_t bytes = sizeof(float) * (size_t)o->n_floats;
  memcpy(o->host_m, whole->host_m + o->lo, bytes);
  if (o->v) memcpy(o->host_v, whole->host_v + o->lo, bytes);
  o->t = whole->t;
}

void optimizer_free(pt_optimizer *o) {
  if (o->host_m != o->m) free(o->host_m);
  if (o->host_v != o->v) free(o->host_v);
  if (o->dev) device_free(o->dev, o->m), device_free(o->dev, o->v);
  if (o->dev && o->chunks) device_free(o->dev, o->chunks);
  memset(o, 0, sizeof *o);
}

void optimizer_to_host(pt_optimizer *o) {
  size_t bytes = sizeof(float) * (size_t)o->n_floats;
  device_download(o->dev, o->host_m, o->m, bytes);
  if (o->v) device_download(o->dev, o->host_v, o->v, bytes);
}

void optimizer_to_device(pt_optimizer *o) {
  size_t bytes = sizeof(float) * (size_t)o->n_floats;
  device_upload(o->dev, o->m, o->host_m, bytes);
  if (o->v) device_upload(o->dev, o->v, o->host_v, bytes);
}

/* The per-step factors, computed here once so every device applies the same update. */
device_update optimizer_update(const spec_train *c, int64_t t, double lr) {
  double bc1 = 1.0 - pow(c->beta1, (double)t), bc2 = 1.0 - pow(c->beta2, (double)t);
  device_update u = {.adam = c->optimizer == SPEC_OPTIMIZER_ADAMW, .lr = lr, .beta1 = c->beta1,
                     .beta2 = c->beta2, .eps = c->eps, .weight_decay = c->weight_decay,
                     .momentum = c->momentum, .t = t, .bc1 = bc1, .bc2 = bc2};
  u.clip = 1.0f;
  u.step = (float)(lr / bc1);
  u.inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
  return u;
}

void optimizer_update_tensor(device_update *u, const spec_train *c, int decay) {
  u->decay = decay;
  u->keep = decay ? (float)(1.0 - u->lr * c->weight_decay) : 1.0f;
}

/* Tensor t's part inside the state's range [lo, hi): its first float there and its length
 * (0 when none). */
static int64_t tensor_in_range(const pt_optimizer *o, const pt_tensor *t, int64_t *len) {
  int64_t a = t->offset > o->lo ? t->offset : o->lo, hi = o->lo + o->n_floats;
  int64_t b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
  *len = b > a ? b - a : 0;
  return a;
}

/* Every tensor the per-tensor loop would update (all of m->tensors, with their decay flags; of
 * a shard, their parts inside its range, at offsets from its start), cut into pieces of at
 * most PT_OPT_CHUNK_FLOATS, uploaded once. */
static void optimizer_build_chunks(pt_optimizer *o, const pt_model *m) {
  int64_t n = 0, len;
  for (int i = 0; i < m->n_tensors; i++) {
    tensor_in_range(o, &m->tensors[i], &len);
    n += (len + PT_OPT_CHUNK_FLOATS - 1) / PT_OPT_CHUNK_FLOATS;
  }
  pt_opt_chunk *host = pt_calloc((size_t)n + 1, sizeof *host);
  int64_t c = 0;
  for (int i = 0; i < m->n_tensors; i++) {
    const pt_tensor *t = &m->tensors[i];
    int64_t first = tensor_in_range(o, t, &len) - o->lo;
    for (int64_t at = 0; at < len; at += PT_OPT_CHUNK_FLOATS) {
      int64_t piece = len - at < PT_OPT_CHUNK_FLOATS ? len - at : PT_OPT_CHUNK_FLOATS;
      host[c++] = (pt_opt_chunk){.offset = first + at, .n = (int32_t)piece,
                                 .decay = t->decay != 0};
    }
  }
  o->chunks = device_alloc(o->dev, sizeof *host * (size_t)(n + 1));
  device_upload(o->dev, o->chunks, host, sizeof *host * (size_t)n);
  o->n_chunks = n;
  free(host);
}

void optimizer_step(pt_optimizer *o, pt_model *m, double lr, float clip) {
  if (o->model_floats != m->n_floats) pt_fatal("optimizer state does not match the model's size");
  if (!o->chunks) optimizer_build_chunks(o, m);
  o->t++;
  device_update u = optimizer_update(&o->cfg, o->t, lr);
  u.clip = clip;
  optimizer_update_tensor(&u, &o->cfg, 1); /* the pieces without decay use keep 1, wd 0 */
  uint16_t *w16 = m->params_bf16 ? m->params_bf16 + o->lo : NULL;
  device_optimizer_chunks(o->dev, &u, m->params + o->lo, w16, m->grads + o->lo, o->m, o->v,
                          o->chunks, o->n_chunks);
}

double lr_at(const spec_train *c, int64_t step) {
  if (step < c->warmup_steps) return c->lr * (double)(step + 1) / (double)c->warmup_steps;
  if (c->lr_schedule != SPEC_LR_COSINE) return c->lr;
  int64_t span = c->steps - c->warmup_steps;
  double progress = span > 1 ? (double)(step - c->warmup_steps) / (double)(span - 1) : 1.0;
  if (progress > 1.0) progress = 1.0;
  return c->min_lr + (c->lr - c->min_lr) * 0.5 * (1.0 + cos(3.14159265358979323846 * progress));
}

void grad_tensor_sumsq(const pt_model *m, double *out) {
  for (int i = 0; i < m->n_tensors; i++) {
    const pt_tensor *t = &m->tensors[i];
    out[i] = t->tied_copy ? 0.0 : device_sumsq(m->dev, m->grads + t->offset, t->numel);
  }
}

void grad_tensor_sumsq_into(const pt_model *m, double *out_dev) {
  pt_sum_span *spans = pt_calloc((size_t)m->n_tensors + 1, sizeof *spans);
  for (int i = 0; i < m->n_tensors; i++) {
    const pt_tensor *t = &m->tensors[i];
    spans[i] = (pt_sum_span){.offset = t->offset, .n = t->tied_copy ? 0 : t->numel};
  }
  device_sumsq_spans_into(m->dev, out_dev, m->grads, spans, m->n_tensors);
  free(spans);
}

double grad_sumsq(const pt_model *m) {
  double *per = pt_calloc((size_t)m->n_tensors + 1, sizeof(double)), s = 0.0;
  grad_tensor_sumsq(m, per);
  for (int i = 0; i < m->n_tensors; i++) s += per[i];
  free(per);
  return s;
}

float grad_clip_factor(double norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0f;
  double coef = max_norm / (norm + 1e-6);
  return coef >= 1.0 ? 1.0f : (float)coef;
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
