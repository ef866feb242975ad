/* The device a process computes on: the cpu and emulated kinds, and the dispatch to a kind's
 * memory operations and kernel table (see device.h). */
#include "device/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "device/gemm_rate.h"

#ifdef PT_HAVE_GPU
#include "device/gpu_backend.h"
#include "kernels/cuda/kernels_gpu.h"
#endif

static void *host_alloc(pt_device *d, size_t bytes) { return pt_alloc_aligned(bytes); }
static void host_free(pt_device *d, void *p) { pt_free_aligned(p); }
static void host_zero(pt_device *d, void *p, size_t bytes) { memset(p, 0, bytes); }
static void host_sync(pt_device *d) {} /* host kernels have finished when they return */

/* cpu: a "transfer" between a buffer and itself is nothing; the emulated kind copies. */
static void host_copy(pt_device *d, void *dst, const void *src, size_t bytes) {
  if (dst != src) memcpy(dst, src, bytes);
}

static const pt_device_ops host_ops = {.alloc = host_alloc, .free = host_free,
                                       .upload = host_copy, .download = host_copy,
                                       .zero = host_zero, .copy = host_copy,
                                       .sync = host_sync, .upload_nowait = host_copy};

static pt_device g_device = {DEV_CPU, &host_ops, &kernels_cpu, NULL};

pt_device *device_current(void) { return &g_device; }

pt_device *device_host(void) {
  static pt_device host = {DEV_CPU, &host_ops, &kernels_cpu, NULL};
  return &host;
}

/* auto: the GPU backend when this build has one and a GPU is visible, else the cpu;
 * PIPETRAIN_AUTO_DEVICE=cpu|gpu|emulated decides instead (the CPU tests pin cpu with it). */
/* PIPETRAIN_AUTO_DEVICE pins what auto means (the CPU tests pin cpu on GPU machines). */
static spec_device resolve_auto(void) {
  const char *env = getenv("PIPETRAIN_AUTO_DEVICE");
  for (int k = SPEC_DEVICE_CPU; env && spec_device_names[k]; k++)
    if (!strcmp(env, spec_device_names[k])) return (spec_device)k;
  return device_gpu_count() > 0 ? SPEC_DEVICE_GPU : SPEC_DEVICE_CPU;
}

/* The layers are not consulted: a layer with host code on a GPU is device_check_layers' to
 * refuse, whether the GPU was named or picked here. */
spec_device device_resolve(spec_device kind) {
  return kind == SPEC_DEVICE_AUTO ? resolve_auto() : kind;
}

int device_select(spec_device kind, int gpu_id, char *err, size_t errsz) {
  kind = device_resolve(kind);
  if (kind != SPEC_DEVICE_GPU) {
    g_device = (pt_device){kind == SPEC_DEVICE_CPU ? DEV_CPU : DEV_EMULATED, &host_ops,
                           &kernels_cpu, NULL};
    return 0;
  }
#ifdef PT_HAVE_GPU
  return gpu_backend_open(&g_device, gpu_id, err, errsz);
#else
  (void)gpu_id;
  snprintf(err, errsz, "this pipetrain was built without the GPU backend (no CUDA toolkit and "
           "NCCL at build time); set pipeline.device: cpu (or auto)");
  return -1;
#endif
}

const char *device_name(const pt_device *d) {
  return d->kind == DEV_GPU ? "gpu" : d->kind == DEV_EMULATED ? "emulated" : "cpu";
}

int device_is_host(const pt_device *d) { return d->kind == DEV_CPU; }

_Static_assert((int)SPEC_PRECISION_FP32 == (int)PT_PRECISION_FP32 &&
                   (int)SPEC_PRECISION_TF32 == (int)PT_PRECISION_TF32 &&
                   (int)SPEC_PRECISION_BF16 == (int)PT_PRECISION_BF16,
               "spec_precision and pt_precision name the modes in one order");

void device_set_precision(pt_device *d, spec_precision p) {
#ifdef PT_HAVE_GPU
  if (d->kind == DEV_GPU) {
    gpu_backend_set_precision(d, (pt_precision)p);
    return;
  }
#endif
  d->k = kernels_cpu_for((pt_precision)p);
}


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

int device_wants_gpu(spec_device kind) { return device_resolve(kind) == SPEC_DEVICE_GPU; }

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

const char *device_gpu_name(const pt_device *d) {
#ifdef PT_HAVE_GPU
  if (d->kind == DEV_GPU) return gpu_backend_name(d);
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
void device_upload_nowait(pt_device *d, void *dst, const void *src, size_t bytes) {
  d->ops->upload_nowait(d, dst, src, bytes);
}
void device_download(pt_device *d, void *dst, const void *src, size_t bytes) {
  d->ops->download(d, dst, src, bytes);
}
void device_zero(pt_device *d, void *p, size_t bytes) { d->ops->zero(d, p, bytes); }
void device_sync(pt_device *d) { d->ops->sync(d); }
void device_copy(pt_device *d, void *dst, const void *src, size_t bytes) {
  d->ops->copy(d, dst, src, bytes);
}
void device_add(pt_device *d, float *y, const float *x, int64_t n) {
  d->k->add_inplace(d->k, y, x, n);
}
void device_scale(pt_device *d, float *x, float s, int64_t n) { d->k->scale(d->k, x, s, n); }
double device_sumsq(pt_device *d, const float *x, int64_t n) { return d->k->sumsq(d->k, x, n); }
double device_loss(pt_device *d, pt_loss_kind kind, const float *y, const void *targets,
                   size_t target_bytes, int N, int F, float scale, float *dy) {
  return d->k->loss(d->k, kind, y, targets, target_bytes, N, F, scale, dy);
}
void device_optimizer(pt_device *d, const device_update *u, float *w, const float *g, float *m,
                      float *v, int64_t n) {
  d->k->optimizer(d->k, u, w, g, m, v, n);
}
void device_optimizer_chunks(pt_device *d, const device_update *u, float *w, const float *g,
                             float *m, float *v, const pt_opt_chunk *chunks, int64_t n_chunks) {
  d->k->optimizer_chunks(d->k, u, w, g, m, v, chunks, n_chunks);
}

const pt_kernels *device_kernels_for(spec_device kind) {
#ifdef PT_HAVE_GPU
  if (device_resolve(kind) == SPEC_DEVICE_GPU) return &kernels_gpu_sizing;
#else
  (void)kind;
#endif
  return &kernels_cpu;
}

size_t device_scratch_bytes(pt_device *d, const pt_layer *L, int B, int T) {
  return layer_scratch_bytes(L, d->k, B, T);
}

/* Host code in a layer reads and writes io's buffers directly: fine where they are host memory
 * (cpu, emulated), a crash on a GPU's. */
int device_check_layers(pt_device *d, const pt_layer *layers, int first, int last, char *err,
                        size_t errsz) {
  for (int li = first; li < last && d->kind == DEV_GPU; li++) {
    if (layers[li].type->kernels_only) continue;
    snprintf(err, errsz, "layer %d (%s) cannot run on the %s: it has no GPU kernels (its type "
             "runs host code, kernels_only is 0); write its steps with the kernel table io->k "
             "and set .kernels_only = 1 (docs/layers.md), or set pipeline.device: cpu", li,
             layers[li].type->name, device_name(d));
    return -1;
  }
  return 0;
}
