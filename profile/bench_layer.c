/* One layer shape timed on a device with buffers of its own (bench.h: bench_layer). */
#include <stdlib.h>

#include "core/clock.h"
#include "core/error.h"
#include "profile/bench.h"

typedef void (*layer_step)(pt_layer *L, const pt_io *io);

/* A copy of the layer bound to its own parameters, gradients and activations on d. */
typedef struct {
  pt_device *d;
  pt_layer L;
  float *wblock, *gblock; /* the layer's parameters and gradients */
  pt_io io;
} layer_rig;

static size_t floats_bytes(int64_t n) { return sizeof(float) * (size_t)n; }

static void *alloc_or_null(pt_device *d, size_t bytes) {
  return bytes ? device_alloc(d, bytes) : NULL;
}

/* The type's init runs on host buffers (layers/layer.h), which are then uploaded. Values and
 * gradients are one block each, laid out as the model's (layer_param_stride): a parameter
 * group's members adjacent. */
static void rig_params(layer_rig *r) {
  pt_layer *L = &r->L;
  int64_t total = 0, off[PT_MAX_PARAMS];
  for (int p = 0; p < L->n_params; p++) off[p] = total, total += layer_param_stride(L, p);
  float *host = pt_calloc((size_t)total + 1, sizeof(float));
  for (int p = 0; p < L->n_params; p++) {
    L->borrowed[p] = 0; /* a tied copy gets storage of its own here: its init must fill it */
    L->w[p] = host + off[p];
  }
  layer_init_params(L, 1);
  size_t bytes = floats_bytes(total);
  r->wblock = alloc_or_null(r->d, bytes);
  r->gblock = alloc_or_null(r->d, bytes);
  if (bytes) device_upload(r->d, r->wblock, host, bytes);
  free(host);
  for (int p = 0; p < L->n_params; p++) L->w[p] = r->wblock + off[p], L->g[p] = r->gblock + off[p];
}

static void rig_open(layer_rig *r, pt_device *d, const pt_layer *L, int B, int T, int with_din) {
  r->d = d;
  r->L = *L;
  r->L.k = d->k;
  rig_params(r);
  size_t rows = (size_t)B * (size_t)T, in_n = rows * (size_t)L->in_dim;
  size_t out_n = rows * (size_t)L->out_dim;
  /* token id 0 is valid for every vocabulary; zeroed memory holds just that */
  const void *in = L->in_tokens ? device_alloc(d, sizeof(int32_t) * rows)
                                : (const void *)bench_alloc_random(d, in_n, 2);
  size_t saved = layer_saved_bytes(L, d->k, B, T);
  r->io = (pt_io){.k = d->k, .B = B, .T = T, .in = in,
                  .out = device_alloc(d, sizeof(float) * out_n),
                  .saved = alloc_or_null(d, saved),
                  .scratch = alloc_or_null(d, device_scratch_bytes(d, L, B, T)),
                  .dout = bench_alloc_random(d, out_n, 3),
                  .din = with_din ? device_alloc(d, sizeof(float) * in_n) : NULL};
}

static void rig_close(layer_rig *r) {
  device_free(r->d, r->wblock);
  device_free(r->d, r->gblock);
  device_free(r->d, (void *)r->io.in);
  device_free(r->d, r->io.out);
  device_free(r->d, r->io.saved);
  device_free(r->d, r->io.scratch);
  device_free(r->d, (float *)r->io.dout);
  device_free(r->d, r->io.din);
}

/* Seconds of step a, then step b when given, on the drained device. */
static double timed(layer_rig *r, layer_step a, layer_step b) {
  device_sync(r->d);
  double t0 = pt_now_s();
  a(&r->L, &r->io);
  if (b) b(&r->L, &r->io);
  device_sync(r->d);
  return pt_now_s() - t0;
}

bench_fiw bench_layer(pt_device *d, const pt_layer *L, int B, int T, int with_din,
                      double share_s) {
  layer_rig r;
  rig_open(&r, d, L, B, T, with_din);
  const pt_layer_type *ty = L->type;
  int split = L->n_params > 0; /* without parameters backward_weight belongs to I */
  timed(&r, ty->forward, NULL); /* warm-up */
  timed(&r, ty->backward_input, ty->backward_weight);
  double f[BENCH_MAX_REPS], i[BENCH_MAX_REPS], w[BENCH_MAX_REPS];
  int n = 0;
  for (double t0 = pt_now_s(); bench_more(n, t0, share_s); n++) {
    f[n] = timed(&r, ty->forward, NULL);
    i[n] = timed(&r, ty->backward_input, split ? NULL : ty->backward_weight);
    w[n] = split ? timed(&r, ty->backward_weight, NULL) : 0.0;
  }
  rig_close(&r);
  return (bench_fiw){bench_median(f, n), bench_median(i, n), split ? bench_median(w, n) : 0.0};
}
