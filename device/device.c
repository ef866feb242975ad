/* The device a process computes on: the dispatch to its kind's table (pt_device_ops) and
 * kernel table, the kind found in the registry (registry.c; see device.h). */
#include "device/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "core/error.h"
#include "device/registry.h"

static pt_device g_device = {&device_cpu_ops, &kernels_cpu, NULL};

pt_device *device_current(void) { return &g_device; }

pt_device *device_host(void) {
  static pt_device host = {&device_cpu_ops, &kernels_cpu, NULL};
  return &host;
}

static const pt_device_ops *kind_named(const char *name) {
  for (int i = 0; device_registry[i]; i++)
    if (!strcmp(device_registry[i]->is.name, name)) return device_registry[i];
  return NULL;
}

/* The kind pipeline.device calls `name`, or SPEC_DEVICE_AUTO for none. */
static spec_device kind_of_name(const char *name) {
  for (int k = SPEC_DEVICE_CPU; name && spec_device_names[k]; k++)
    if (!strcmp(name, spec_device_names[k])) return (spec_device)k;
  return SPEC_DEVICE_AUTO;
}

/* PIPETRAIN_AUTO_DEVICE pins what auto means (the CPU tests pin cpu on GPU machines); else the
 * registry's first kind auto may pick that has a device here. */
static spec_device resolve_auto(void) {
  spec_device pinned = kind_of_name(getenv("PIPETRAIN_AUTO_DEVICE"));
  if (pinned != SPEC_DEVICE_AUTO) return pinned;
  for (int i = 0; device_registry[i]; i++)
    if (device_registry[i]->is.picked_by_auto && device_registry[i]->count() > 0 &&
        kind_of_name(device_registry[i]->is.name) != SPEC_DEVICE_AUTO)
      return kind_of_name(device_registry[i]->is.name);
  return SPEC_DEVICE_CPU;
}

/* The layers are not consulted: a layer with host code on a GPU is device_check_layers' to
 * refuse, whether the GPU was named or picked here. */
spec_device device_resolve(spec_device kind) {
  return kind == SPEC_DEVICE_AUTO ? resolve_auto() : kind;
}

const pt_device_ops *device_kind(spec_device kind) {
  const pt_device_ops *o = kind_named(spec_device_names[device_resolve(kind)]);
  if (!o) pt_fatal("pipeline.device %s has no entry in device/registry.c", spec_device_names[kind]);
  return o;
}

int device_count(spec_device kind) { return device_kind(kind)->count(); }

static device_kernels_wrap g_wrap;
static void *g_wrap_arg;

void device_interpose_kernels(device_kernels_wrap wrap, void *arg) {
  g_wrap = wrap;
  g_wrap_arg = arg;
}

/* Where a kind has just set d->k: the one place an interposed table goes in. */
static void interpose(pt_device *d) {
  if (g_wrap) d->k = g_wrap(d->k, g_wrap_arg);
}

/* g_device changes only once the kind has opened. A device lives as long as its process, so
 * selecting the one already open (a second trainer in one process: tests, bench/gpu_roofline)
 * keeps it rather than opening it again beside the first. */
int device_select(spec_device kind, int id, char *err, size_t errsz) {
  pt_device d = {device_kind(kind), NULL, NULL};
  if (g_device.ops == d.ops && g_device.impl && d.ops->local_id && d.ops->local_id(&g_device) == id)
    return 0;
  if (d.ops->open(&d, id, err, errsz) != 0) return -1;
  interpose(&d);
  g_device = d;
  return 0;
}

const char *device_name(const pt_device *d) { return d->ops->is.name; }
int device_shares_host_memory(const pt_device *d) { return d->ops->is.shares_host_memory; }
int device_host_addressable(const pt_device *d) { return d->ops->is.host_addressable; }
int device_offloads(const pt_device *d) { return d->ops->is.offloads; }

_Static_assert((int)SPEC_PRECISION_FP32 == (int)PT_PRECISION_FP32 &&
                   (int)SPEC_PRECISION_TF32 == (int)PT_PRECISION_TF32 &&
                   (int)SPEC_PRECISION_BF16 == (int)PT_PRECISION_BF16,
               "spec_precision and pt_precision name the modes in one order");

void device_set_precision(pt_device *d, spec_precision p) {
  d->ops->set_precision(d, (pt_precision)p);
  interpose(d);
}

const char *device_cpu_bf16_products(spec_device kind, spec_precision p) {
  if (p != SPEC_PRECISION_BF16 || device_kind(kind)->is.precision_in_gemm) return NULL;
  return kernels_cpu_bf16_products();
}

double device_gemm_flops(pt_device *d, int n, double seconds) {
  return d->ops->gemm_flops(d, n, seconds);
}

void device_describe(const pt_device *d, char *buf, size_t size) {
  d->ops->describe(d, buf, size);
}

size_t device_memory_bytes(const pt_device *d) {
  return d->ops->memory_bytes ? d->ops->memory_bytes(d) : 0;
}
int64_t device_span_begin(pt_device *d, int keep) {
  return d->ops->span_begin ? d->ops->span_begin(d, keep) : -1;
}
void device_span_end(pt_device *d) {
  if (d->ops->span_end) d->ops->span_end(d);
}
double device_spans_seconds(pt_device *d, double host_s) {
  return d->ops->spans_seconds ? d->ops->spans_seconds(d) : host_s;
}
int device_span_times(pt_device *d, int64_t ticket, double *t0, double *t1) {
  return d->ops->span_times ? d->ops->span_times(d, ticket, t0, t1) : -1;
}
size_t device_memory_free(const pt_device *d) {
  return d->ops->memory_free ? d->ops->memory_free(d) : device_memory_bytes(d);
}
int device_gpu_id(const pt_device *d) { return d->ops->local_id ? d->ops->local_id(d) : -1; }
const char *device_pci_bus_id(const pt_device *d) {
  return d->ops->bus_id ? d->ops->bus_id(d) : "";
}
const char *device_gpu_name(const pt_device *d) {
  return d->ops->model_name ? d->ops->model_name(d) : "";
}
void *device_stream(pt_device *d) { return d->ops->stream ? d->ops->stream(d) : NULL; }

void *device_alloc(pt_device *d, size_t bytes) { return d->ops->alloc(d, bytes); }
void *device_alloc_sparse(pt_device *d, size_t bytes, size_t touched, size_t *tracked) {
  if (d->ops->alloc_sparse) return d->ops->alloc_sparse(d, bytes, touched, tracked);
  *tracked = bytes;
  return device_alloc(d, bytes);
}
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
int device_kind_offloads(spec_device kind) { return device_kind(kind)->is.offloads; }
void *device_pinned_alloc(pt_device *d, size_t bytes) { return d->ops->pinned_alloc(d, bytes); }
void device_pinned_free(pt_device *d, void *p) {
  if (p) d->ops->pinned_free(d, p);
}
void *device_event_new(pt_device *d) { return d->ops->event_new(d); }
void device_event_free(pt_device *d, void *ev) {
  if (ev) d->ops->event_free(d, ev);
}
void device_copy_async(pt_device *d, void *dst, const void *src, size_t bytes, int to_device,
                       void *done) {
  d->ops->copy_async(d, dst, src, bytes, to_device, done);
}
void device_wait_event(pt_device *d, void *ev) {
  if (ev) d->ops->wait_event(d, ev);
}
void device_sync(pt_device *d) { d->ops->sync(d); }
void device_copy(pt_device *d, void *dst, const void *src, size_t bytes) {
  d->ops->copy(d, dst, src, bytes);
}
void device_add(pt_device *d, float *y, const float *x, int64_t n) {
  d->k->add_inplace(d->k, y, x, n);
}
double device_sumsq(pt_device *d, const float *x, int64_t n) { return d->k->sumsq(d->k, x, n); }
double device_loss(pt_device *d, pt_loss_kind kind, const float *y, const void *targets,
                   size_t target_bytes, int N, int F, float scale, float *dy) {
  return d->k->loss(d->k, kind, y, targets, target_bytes, N, F, scale, dy);
}
void device_optimizer(pt_device *d, const device_update *u, float *w, uint16_t *w16,
                      const float *g, float *m, float *v, int64_t n) {
  d->k->optimizer(d->k, u, w, w16, g, m, v, n);
}
void device_optimizer_chunks(pt_device *d, const device_update *u, float *w, uint16_t *w16,
                             const float *g, float *m, float *v, const pt_opt_chunk *chunks,
                             int64_t n_chunks) {
  d->k->optimizer_chunks(d->k, u, w, w16, g, m, v, chunks, n_chunks);
}

/* PIPETRAIN_WEIGHT_COPY: on (the default) or off. Read once. */
static int weight_copy_wanted(void) {
  static int wanted = -1;
  if (wanted < 0) wanted = !pt_env_switch("PIPETRAIN_WEIGHT_COPY", "on", "off");
  return wanted;
}

int device_weight_copy_used(const pt_device *d) {
  return d->k->weight_copy && weight_copy_wanted();
}

/* Before a device is open: the GPU's bf16 table always reads a copy (bf16 in the GEMM units,
 * precision_in_gemm); the CPU kinds' table for bf16 is kernels_cpu_for's, which does where its
 * products are oneDNN's. */
int device_kind_weight_copy_used(spec_device kind, spec_precision p) {
  if (p != SPEC_PRECISION_BF16 || !weight_copy_wanted()) return 0;
  return device_kind(kind)->is.precision_in_gemm ||
         kernels_cpu_for(PT_PRECISION_BF16)->weight_copy != NULL;
}

const pt_kernels *device_kernels_for(spec_device kind) { return device_kind(kind)->sizing; }

size_t device_scratch_bytes(pt_device *d, const pt_layer *L, int B, int T) {
  return layer_scratch_bytes(L, d->k, B, T);
}

/* Host code in a layer reads and writes io's buffers directly: fine where the host may address
 * them (cpu, emulated), a crash on a GPU's. */
int device_check_layers(pt_device *d, const pt_layer *layers, int first, int last, char *err,
                        size_t errsz) {
  for (int li = first; li < last && !device_host_addressable(d); li++) {
    if (layers[li].type->kernels_only) continue;
    snprintf(err, errsz, "layer %d (%s) cannot run on the %s: it has no GPU kernels (its type "
             "runs host code, kernels_only is 0); write its steps with the kernel table io->k "
             "and set .kernels_only = 1 (docs/layers.md), or set pipeline.device: cpu", li,
             layers[li].type->name, device_name(d));
    return -1;
  }
  return 0;
}
