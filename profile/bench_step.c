/* The timed pieces around the layers (bench.h): the loss, the optimizer update and the host
 * copy a transfer between ranks makes. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/optimizer.h"
#include "profile/bench.h"

typedef struct {
  pt_device *d;
  pt_loss_kind kind;
  const float *y;
  float *dy;
  const void *targets;
  size_t target_bytes;
  int N, F;
} loss_call;

static void run_loss(void *ctx) {
  const loss_call *c = ctx;
  device_loss(c->d, c->kind, c->y, c->targets, c->target_bytes, c->N, c->F,
              1.0f / (float)(c->N > 0 ? c->N : 1), c->dy);
}

double bench_loss(pt_device *d, pt_loss_kind kind, int N, int F, double share_s) {
  size_t n = (size_t)N * (size_t)F;
  float *y = bench_alloc_random(d, n, 4), *dy = device_alloc(d, sizeof(float) * n);
  /* class 0 is valid for any F, and zeros are as good a regression target as any */
  size_t target_bytes = kind == LOSS_CROSS_ENTROPY ? sizeof(int32_t) * (size_t)N
                                                   : sizeof(float) * n;
  void *targets = pt_calloc(target_bytes, 1);
  loss_call c = {d, kind, y, dy, targets, target_bytes, N, F};
  double s = bench_time(d, run_loss, &c, share_s);
  free(targets);
  device_free(d, y);
  device_free(d, dy);
  return s;
}

typedef struct {
  pt_device *d;
  const spec_train *cfg;
  const pt_layer *L;
  float *w, *g, *m, *v;
} optimizer_call;


static void run_optimizer(void *ctx) {
  const optimizer_call *c = ctx;
  device_update u = optimizer_update(c->cfg, 1, c->cfg->lr);
  int64_t off = 0;
  for (int p = 0; p < c->L->n_params; p++) {
    optimizer_update_tensor(&u, c->cfg, c->L->params[p].decay);
    device_optimizer(c->d, &u, c->w + off, NULL, c->g + off, c->m + off,
                     c->v ? c->v + off : NULL, c->L->params[p].numel);
    off += layer_param_stride(c->L, p); /* the model's layout */
  }
}

double bench_optimizer(pt_device *d, const spec_train *cfg, const pt_layer *L, double share_s) {
  int64_t n = 0;
  for (int p = 0; p < L->n_params; p++) n += layer_param_stride(L, p);
  size_t bytes = sizeof(float) * (size_t)n;
  optimizer_call c = {d, cfg, L, bench_alloc_random(d, (size_t)n, 5),
                      bench_alloc_random(d, (size_t)n, 6), device_alloc(d, bytes),
                      cfg->optimizer == SPEC_OPTIMIZER_ADAMW ? device_alloc(d, bytes) : NULL};
  double s = bench_time(d, run_optimizer, &c, share_s);
  device_free(d, c.w), device_free(d, c.g), device_free(d, c.m), device_free(d, c.v);
  return s;
}

/* Called through a volatile pointer: the compiler may not merge or drop copies whose result
 * nobody reads, which is all of them here. */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;

typedef struct {
  char *dst;
  const char *src;
  size_t bytes;
  int copies;
} copy_call;

static void run_copies(void *ctx) {
  const copy_call *c = ctx;
  for (int k = 0; k < c->copies; k++) copy_fn(c->dst, c->src, c->bytes);
}

double bench_memcpy_rate(size_t bytes, double share_s) {
  if (bytes < 64) bytes = 64;
  /* small buffers are copied several times a sample, so the clock's cost stays out of it */
  int copies = bytes >= (1u << 20) ? 1 : (int)((1u << 20) / bytes);
  char *src = pt_calloc(bytes, 1), *dst = pt_calloc(bytes, 1);
  memset(src, 1, bytes); /* the warm-up copy faults dst's pages in */
  copy_call c = {dst, src, bytes, copies};
  double s = bench_time(device_host(), run_copies, &c, share_s) / copies;
  free(src);
  free(dst);
  return (double)bytes / s;
}

typedef struct {
  pt_device *d;
  void *dev, *host;
  size_t bytes;
} offload_copy;

static void run_offload_copies(void *ctx) {
  const offload_copy *c = ctx;
  device_copy_async(c->d, c->host, c->dev, c->bytes, 0, NULL);
  device_copy_async(c->d, c->dev, c->host, c->bytes, 1, NULL);
}

double bench_copy_rate(pt_device *d, size_t bytes, double share_s) {
  if (bytes < 64) bytes = 64;
  offload_copy c = {d, device_alloc(d, bytes), device_pinned_alloc(d, bytes), bytes};
  device_zero(d, c.dev, bytes);
  double s = bench_time(d, run_offload_copies, &c, share_s) / 2; /* bench_time syncs d */
  device_free(d, c.dev);
  device_pinned_free(d, c.host);
  return (double)bytes / s;
}
