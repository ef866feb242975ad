/* The host kinds of device (device.h): cpu, whose buffers are the host's own, and emulated,
 * the same memory and CPU kernels with buffers kept apart from the host copies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "device/gemm_rate.h"
#include "kernels/cpu/blas_kernel.h"
#include "kernels/kernels.h"

static int host_count(void) { return 1; }

static int host_open(pt_device *d, int id, char *err, size_t errsz) {
  (void)id, (void)err, (void)errsz;
  d->k = &kernels_cpu;
  d->impl = NULL;
  return 0;
}

static void *host_alloc(pt_device *d, size_t bytes) { return pt_alloc_aligned(bytes); }
static void host_free(pt_device *d, void *p) { pt_free_aligned(p); }
static void host_zero(pt_device *d, void *p, size_t bytes) { memset(p, 0, bytes); }
static void host_sync(pt_device *d) {} /* host kernels have finished when they return */

/* cpu: a "transfer" between a buffer and itself is nothing; the emulated kind copies. */
static void host_copy(pt_device *d, void *dst, const void *src, size_t bytes) {
  if (dst != src) memcpy(dst, src, bytes);
}

static void host_set_precision(pt_device *d, pt_precision p) { d->k = kernels_cpu_for(p); }

static double host_gemm_flops(pt_device *d, int n, double seconds) {
  return gemm_measure_flops(n, seconds);
}

static void host_describe(const pt_device *d, char *buf, size_t size) {
  char kernel[160];
  blas_kernel_describe(kernel, sizeof kernel);
  snprintf(buf, size, "%s, %s, %d thread(s)", d->ops->is.name, kernel, kernels_cpu_threads());
}

/* emulated: "pinned" memory is plain host memory outside the tracker (the device's memory is
 * what pt_mem_peak measures); a copy is done when called, so no events are needed. */
static void *host_pinned_alloc(pt_device *d, size_t bytes) {
  void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
  if (!p) pt_fatal("out of host memory allocating %zu bytes for offloaded activations", bytes);
  return memset(p, 0, bytes);
}
static void host_pinned_free(pt_device *d, void *p) { free(p); }
static void *host_event_new(pt_device *d) { return NULL; }
static void host_event_free(pt_device *d, void *ev) {}
static void host_copy_async(pt_device *d, void *dst, const void *src, size_t bytes, int to_device,
                            void *done) {
  memcpy(dst, src, bytes);
}
static void host_wait_event(pt_device *d, void *ev) {}

#define HOST_ENTRIES                                                                         \
  .count = host_count, .open = host_open, .sizing = &kernels_cpu, .gemm_n = 1024,             \
  .alloc = host_alloc, .free = host_free, .upload = host_copy, .download = host_copy,         \
  .zero = host_zero, .copy = host_copy, .sync = host_sync, .upload_nowait = host_copy,        \
  .set_precision = host_set_precision, .gemm_flops = host_gemm_flops, .describe = host_describe

const pt_device_ops device_cpu_ops = {
    .is = {.name = "cpu", .shares_host_memory = 1, .host_addressable = 1, .picked_by_auto = 1},
    HOST_ENTRIES};

const pt_device_ops device_emulated_ops = {
    .is = {.name = "emulated", .host_addressable = 1, .offloads = 1}, HOST_ENTRIES,
    .pinned_alloc = host_pinned_alloc, .pinned_free = host_pinned_free,
    .event_new = host_event_new, .event_free = host_event_free, .copy_async = host_copy_async,
    .wait_event = host_wait_event};
