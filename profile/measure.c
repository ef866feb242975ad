/* Layer times measured on the current device (measure.h): the model's distinct shapes, each
 * timed once, then the loss, the optimizer and the host copy rate. */
#include "profile/measure.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "profile/bench.h"

/* The engine passes no input gradient for token input or the model's first layer. */
static int wants_din(const pt_layer *L) { return !L->in_tokens && L->index > 0; }

static int same_params(const pt_layer *a, const pt_layer *b) {
  if (a->n_params != b->n_params) return 0;
  for (int p = 0; p < a->n_params; p++) {
    const pt_param_desc *x = &a->params[p], *y = &b->params[p];
    if (x->ndim != y->ndim || x->decay != y->decay ||
        memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim) != 0)
      return 0;
  }
  return 1;
}

/* Everything a layer's steps depend on besides B and T (the parameters' values aside). */
static int same_shape(const pt_layer *a, const pt_layer *b) {
  return a->type == b->type && a->in_dim == b->in_dim && a->out_dim == b->out_dim &&
         a->in_tokens == b->in_tokens && wants_din(a) == wants_din(b) &&
         !memcmp(a->set.i, b->set.i, sizeof a->set.i) &&
         !memcmp(a->set.f, b->set.f, sizeof a->set.f) &&
         same_params(a, b);
}

/* first[l]: the first layer like l (by same(), l itself when none comes before); returns the
 * number of distinct ones. */
static int group_layers(const pt_model *m, int (*same)(const pt_layer *, const pt_layer *),
                        int *first) {
  int distinct = 0;
  for (int l = 0; l < m->n_layers; l++) {
    first[l] = l;
    for (int j = 0; j < l && first[l] == l; j++)
      if (first[j] == j && same(&m->layers[j], &m->layers[l])) first[l] = j;
    distinct += first[l] == l;
  }
  return distinct;
}

typedef struct {
  pt_device *d;
  const pt_model *m;
  int B, T;
  double share_s;     /* of the budget, per timed piece */
  int *shape, *opt;   /* [n_layers] the first layer of each one's group */
} measure_ctx;

static void measure_layers(const measure_ctx *c, pt_layer_times *t) {
  for (int l = 0; l < c->m->n_layers; l++) {
    int s = c->shape[l];
    if (s == l) {
      const pt_layer *L = &c->m->layers[l];
      bench_fiw x = bench_layer(c->d, L, c->B, c->T, wants_din(L), c->share_s);
      t->f[l] = x.f, t->i[l] = x.i, t->w[l] = x.w;
    } else {
      t->f[l] = t->f[s], t->i[l] = t->i[s], t->w[l] = t->w[s];
    }
  }
  const pt_layer *last = &c->m->layers[c->m->n_layers - 1];
  t->f[c->m->n_layers - 1] += bench_loss(c->d, c->m->loss, c->B * c->T, last->out_dim, c->share_s);
}

static void measure_optimizer(const measure_ctx *c, pt_layer_times *t) {
  for (int l = 0; l < c->m->n_layers; l++) {
    const pt_layer *L = &c->m->layers[l];
    if (L->n_params == 0) t->opt[l] = 0.0;
    else if (c->opt[l] != l) t->opt[l] = t->opt[c->opt[l]];
    else t->opt[l] = bench_optimizer(c->d, &c->m->spec->train, L, c->share_s);
  }
}

/* A message between ranks of one node is copied into shared memory and out again. */
static void measure_p2p(const measure_ctx *c, pt_layer_times *t) {
  if (!device_host_addressable(c->d)) return; /* the defaults: its transfers are not memcpy */
  int widest = 0;
  for (int l = 0; l < c->m->n_layers; l++)
    if (c->m->layers[l].out_dim > widest) widest = c->m->layers[l].out_dim;
  size_t bytes = sizeof(float) * (size_t)c->B * (size_t)c->T * (size_t)widest;
  t->p2p_bytes_per_s = bench_memcpy_rate(bytes, c->share_s) / 2;
  t->p2p_latency_s = PROFILE_P2P_LATENCY_S;
}

/* Offload's copies: one activation between device memory and pinned host memory, each way, on
 * the kinds that offload (device_copy_async; the emulated device's is a memcpy); the host's
 * memcpy rate elsewhere. */
static void measure_copy(const measure_ctx *c, pt_layer_times *t) {
  int widest = 0;
  for (int l = 0; l < c->m->n_layers; l++)
    if (c->m->layers[l].out_dim > widest) widest = c->m->layers[l].out_dim;
  size_t bytes = sizeof(float) * (size_t)c->B * (size_t)c->T * (size_t)widest;
  t->copy_bytes_per_s = device_offloads(c->d) ? bench_copy_rate(c->d, bytes, c->share_s)
                                              : bench_memcpy_rate(bytes, c->share_s);
}

static void describe(const measure_ctx *c, int shapes, double seconds, pt_layer_times *t) {
  char what[160];
  device_describe(c->d, what, sizeof what);
  snprintf(t->source, sizeof t->source, "measured on %s, %d shapes in %.1f s", what, shapes,
           seconds);
}

int profile_measure(pt_layer_times *t, const pt_model *m, double budget_s, char *err,
                    size_t errsz) {
  memset(t, 0, sizeof *t);
  pt_device *d = device_current();
  if (m->n_layers < 1) return pt_errorf(err, errsz, "the model has no layers to measure");
  if (device_check_layers(d, m->layers, 0, m->n_layers, err, errsz) != 0) return -1;
  measure_ctx c = {d, m, (int)m->spec->train.micro_batch_size, profile_tokens_per_sample(m), 0,
                   pt_calloc((size_t)m->n_layers, sizeof(int)),
                   pt_calloc((size_t)m->n_layers, sizeof(int))};
  int shapes = group_layers(m, same_shape, c.shape);
  int opts = group_layers(m, same_params, c.opt);
  /* the shapes, the parameter lists, the loss and the two copies share the budget evenly */
  c.share_s = (budget_s > 0 ? budget_s : PROFILE_BUDGET_S) / (shapes + opts + 3);
  double t0 = pt_now_s();
  profile_times_alloc(t, m->n_layers);
  measure_layers(&c, t);
  measure_optimizer(&c, t);
  measure_p2p(&c, t);
  measure_copy(&c, t);
  describe(&c, shapes, pt_now_s() - t0, t);
  free(c.shape);
  free(c.opt);
  return 0;
}
