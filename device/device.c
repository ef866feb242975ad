/* The device a process computes on: the cpu and emulated kinds, and the dispatch to a kind's
 * table (see device.h). */
#include "device/device.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "device/gemm_rate.h"

#ifdef PT_HAVE_GPU
#include "device/gpu_backend.h"
#endif

static void *host_alloc(pt_device *d, size_t bytes) { return pt_alloc_aligned(bytes); }
static void host_free(pt_device *d, void *p) { pt_free_aligned(p); }
static void host_zero(pt_device *d, void *p, size_t bytes) { memset(p, 0, bytes); }

/* cpu: a "transfer" between a buffer and itself is nothing; the emulated kind copies. */
static void host_copy(pt_device *d, void *dst, const void *src, size_t bytes) {
  if (dst != src) memcpy(dst, src, bytes);
}

static void host_add(pt_device *d, float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = y[i] + x[i];
}

static void host_scale(pt_device *d, float *x, float s, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] *= s;
}

static double host_sumsq(pt_device *d, const float *x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
  return s;
}

static int host_all_finite(pt_device *d, const float *x, int64_t n) {
  int ok = 1;
  for (int64_t i = 0; i < n; i++) ok &= isfinite(x[i]) != 0;
  return ok;
}

static double host_loss(pt_device *d, pt_loss_kind kind, const float *y, const void *targets,
                        size_t target_bytes, int N, int F, float scale, float *dy) {
  return loss_forward_backward(kind, y, targets, N, F, scale, dy);
}

static void host_adamw(const device_update *u, float *p, const float *g, float *m, float *v,
                       int64_t n) {
  float b1 = (float)u->beta1, b2 = (float)u->beta2, eps = (float)u->eps;
  for (int64_t i = 0; i < n; i++) {
    p[i] *= u->keep;
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    p[i] -= u->step * m[i] / (sqrtf(v[i]) * u->inv_sqrt_bc2 + eps);
  }
}

static void host_sgd(const device_update *u, float *p, const float *g, float *m, int64_t n) {
  float mu = (float)u->momentum, wd = u->decay ? (float)u->weight_decay : 0.0f;
  for (int64_t i = 0; i < n; i++) {
    float dir = g[i] + wd * p[i];
    m[i] = u->t > 1 ? mu * m[i] + dir : dir;
    p[i] -= (float)u->lr * (mu > 0.0f ? m[i] : dir);
  }
}

static void host_optimizer(pt_device *d, const device_update *u, float *w, const float *g,
                           float *m, float *v, int64_t n) {
  if (u->adam) host_adamw(u, w, g, m, v, n);
  else host_sgd(u, w, g, m, n);
}

static void host_layer(pt_device *d, int which, pt_layer *L, const pt_io *io) {
  if (which == 0) L->type->forward(L, io);
  else if (which == 1) L->type->backward_input(L, io);
  else L->type->backward_weight(L, io);
}

static const char *host_layer_missing(pt_device *d, const pt_layer *L) { return NULL; }

static size_t host_scratch_bytes(pt_device *d, const pt_layer *L, int B, int T) {
  return L->type->scratch_bytes ? L->type->scratch_bytes(L, B, T) : 0;
}

static const pt_device_ops host_ops = {
    host_alloc, host_free,  host_copy,       host_copy, host_zero,      host_copy, host_add,
    host_scale, host_sumsq, host_all_finite, host_loss, host_optimizer, host_layer,
    host_layer_missing, host_scratch_bytes};

static pt_device g_device = {DEV_CPU, &host_ops, NULL};

pt_device *device_current(void) { return &g_device; }

pt_device *device_host(void) {
  static pt_device host = {DEV_CPU, &host_ops, NULL};
  return &host;
}

/* auto: the GPU backend when this build has one and a GPU is visible, else the cpu;
 * PIPETRAIN_AUTO_DEVICE=cpu|gpu|emulated decides instead (the CPU tests pin cpu with it). */
static const char *resolve_auto(void) {
  const char *env = getenv("PIPETRAIN_AUTO_DEVICE");
  if (env && (!strcmp(env, "cpu") || !strcmp(env, "gpu") || !strcmp(env, "emulated"))) return env;
#ifdef PT_HAVE_GPU
  return gpu_backend_count() > 0 ? "gpu" : "cpu";
#else
  return "cpu";
#endif
}

const char *device_resolve(const char *kind, const pt_layer *layers, int n_layers) {
  if (strcmp(kind, "auto") != 0) return kind;
  const char *k = resolve_auto();
#ifdef PT_HAVE_GPU
  for (int li = 0; li < n_layers && !strcmp(k, "gpu") && !getenv("PIPETRAIN_AUTO_DEVICE"); li++)
    if (!gpu_backend_supports(&layers[li])) k = "cpu"; /* a custom layer without GPU kernels */
#else
  (void)layers, (void)n_layers;
#endif
  return k;
}

int device_select(const char *kind, int gpu_id, char *err, size_t errsz) {
  if (!strcmp(kind, "auto")) kind = resolve_auto();
  if (!strcmp(kind, "cpu") || !strcmp(kind, "emulated")) {
    g_device = (pt_device){!strcmp(kind, "cpu") ? DEV_CPU : DEV_EMULATED, &host_ops, NULL};
    return 0;
  }
  if (strcmp(kind, "gpu") != 0) {
    snprintf(err, errsz, "unknown device '%s' (cpu, gpu, emulated)", kind);
    return -1;
  }
#ifdef PT_HAVE_GPU
  return gpu_backend_open(&g_device, gpu_id, err, errsz);
#else
  snprintf(err, errsz, "this pipetrain was built without the GPU backend (no CUDA toolkit and "
           "NCCL at build time); set pipeline.device: cpu (or auto)");
  return -1;
#endif
}

const char *device_name(const pt_device *d) {
  return d->kind == DEV_GPU ? "gpu" : d->kind == DEV_EMULATED ? "emulated" : "cpu";
}

int device_is_host(const pt_device *d) { return d->kind == DEV_CPU; }


double device_gemm_flops(pt_device *d, int n, double seconds) {
#ifdef PT_HAVE_GPU
  if (d->kind == DEV_GPU) return gpu_backend_gemm_flops(d, n, seconds);
#endif
  return gemm_measure_flops(n, seconds);
}

size_t device_memory_bytes(const pt_device *d) {
#ifdef PT_HAVE_GPU
  if (d->kind == DEV_GPU) return gpu_backend_memory(d);
#endif
  return 0;
}

int device_gpu_count(void) {
#ifdef PT_HAVE_GPU
  return gpu_backend_count();
#else
  return 0;
#endif
}

int device_wants_gpu(const char *kind) {
  return !strcmp(kind, "gpu") || (!strcmp(kind, "auto") && !strcmp(resolve_auto(), "gpu"));
}

int device_gpu_id(const pt_device *d) {
#ifdef PT_HAVE_GPU
  if (d->kind == DEV_GPU) return gpu_backend_ctx_id(d);
#endif
  return -1;
}

const char *device_pci_bus_id(const pt_device *d) {
#ifdef PT_HAVE_GPU
  if (d->kind == DEV_GPU) return gpu_backend_bus_id(d);
#endif
  return "";
}

void *device_stream(pt_device *d) {
#ifdef PT_HAVE_GPU
  if (d->kind == DEV_GPU) return gpu_backend_stream(d);
#endif
  return NULL;
}

void *device_alloc(pt_device *d, size_t bytes) { return d->ops->alloc(d, bytes); }
void device_free(pt_device *d, void *p) {
  if (p) d->ops->free(d, p);
}
void device_upload(pt_device *d, void *dst, const void *src, size_t bytes) {
  d->ops->upload(d, dst, src, bytes);
}
void device_download(pt_device *d, void *dst, const void *src, size_t bytes) {
  d->ops->download(d, dst, src, bytes);
}
void device_zero(pt_device *d, void *p, size_t bytes) { d->ops->zero(d, p, bytes); }
void device_copy(pt_device *d, void *dst, const void *src, size_t bytes) {
  d->ops->copy(d, dst, src, bytes);
}
void device_add(pt_device *d, float *y, const float *x, int64_t n) { d->ops->add(d, y, x, n); }
void device_scale(pt_device *d, float *x, float s, int64_t n) { d->ops->scale(d, x, s, n); }
double device_sumsq(pt_device *d, const float *x, int64_t n) { return d->ops->sumsq(d, x, n); }
int device_all_finite(pt_device *d, const float *x, int64_t n) {
  return d->ops->all_finite(d, x, n);
}
double device_loss(pt_device *d, pt_loss_kind kind, const float *y, const void *targets,
                   size_t target_bytes, int N, int F, float scale, float *dy) {
  return d->ops->loss(d, kind, y, targets, target_bytes, N, F, scale, dy);
}
void device_optimizer(pt_device *d, const device_update *u, float *w, const float *g, float *m,
                      float *v, int64_t n) {
  d->ops->optimizer(d, u, w, g, m, v, n);
}
void device_forward(pt_device *d, pt_layer *L, const pt_io *io) { d->ops->layer(d, 0, L, io); }
void device_backward_input(pt_device *d, pt_layer *L, const pt_io *io) {
  d->ops->layer(d, 1, L, io);
}
void device_backward_weight(pt_device *d, pt_layer *L, const pt_io *io) {
  d->ops->layer(d, 2, L, io);
}

size_t device_scratch_bytes(pt_device *d, const pt_layer *L, int B, int T) {
  return d->ops->scratch_bytes(d, L, B, T);
}

int device_check_layers(pt_device *d, const pt_layer *layers, int first, int last, char *err,
                        size_t errsz) {
  for (int li = first; li < last; li++) {
    const char *why = d->ops->layer_missing(d, &layers[li]);
    if (why) {
      snprintf(err, errsz, "layer %d (%s) cannot run on the %s: %s", li, layers[li].type->name,
               device_name(d), why);
      return -1;
    }
  }
  return 0;
}
