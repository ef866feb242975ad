/* The gpu kind of device (device.h): buffers in GPU memory, and the GPU kernel table
 * (kernels/cuda/kernels_gpu.h) on the rank's stream. Its table, device_gpu_ops, is listed in
 * device/registry.c; its traits are device/gpu_backend.h's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "device/device.h"
#include "device/gpu_backend.h"
#include "kernels/cuda/cost.h"
#include "kernels/cuda/gpu.h"
#include "kernels/cuda/kernels_gpu.h"
#include "kernels/cuda/spans.h"
#include "kernels/cuda/staging.h"

typedef struct {
  gpu_ctx g;
  kernels_gpu kernels; /* the device's kernel table, on g */
  gpu_staging staging; /* device_upload_nowait's pinned buffers (staging.h) */
  gpu_spans spans;     /* device_span_begin's timed spans (spans.h) */
  struct { void *p; size_t bytes; } *blocks; /* live allocations, for the memory totals */
  int n_blocks, cap_blocks;
  /* Activation offload's copy stream and the event that forks it from the compute stream,
   * created at the first offload call. */
  cudaStream_t copy_stream;
  cudaEvent_t fork;
} gpu_state;

static gpu_state *state(pt_device *d) { return d->impl; }
static gpu_ctx *ctx(pt_device *d) { return &state(d)->g; }

/* p of `bytes` counted in the memory totals until g_free. */
static void track_block(gpu_state *s, void *p, size_t bytes) {
  if (s->n_blocks == s->cap_blocks) {
    s->cap_blocks = s->cap_blocks ? 2 * s->cap_blocks : 64;
    s->blocks = realloc(s->blocks, sizeof *s->blocks * (size_t)s->cap_blocks);
    if (!s->blocks) pt_fatal("out of memory tracking GPU allocations");
  }
  s->blocks[s->n_blocks].p = p, s->blocks[s->n_blocks++].bytes = bytes;
  pt_mem_account((int64_t)bytes);
}

static void *g_alloc(pt_device *d, size_t bytes) {
  void *p = gpu_alloc(ctx(d), bytes);
  track_block(state(d), p, bytes);
  return p;
}

/* Tracked as the touched bytes only: the rest is never given memory (gpu_alloc_sparse); where
 * the device has no managed memory, all of it, allocated as ever. */
static void *g_alloc_sparse(pt_device *d, size_t bytes, size_t touched, size_t *tracked) {
  void *p = gpu_alloc_sparse(bytes);
  *tracked = p ? touched : bytes;
  if (!p) p = gpu_alloc(ctx(d), bytes);
  track_block(state(d), p, *tracked);
  return p;
}

static void g_free(pt_device *d, void *p) {
  gpu_state *s = state(d);
  for (int i = 0; i < s->n_blocks; i++)
    if (s->blocks[i].p == p) {
      pt_mem_account(-(int64_t)s->blocks[i].bytes);
      s->blocks[i] = s->blocks[--s->n_blocks];
      break;
    }
  gpu_free(p);
}

/* Host memory may be reused as soon as this returns: the copy is waited for. */
static void g_upload(pt_device *d, void *dst, const void *src, size_t bytes) {
  gpu_to_device(ctx(d), dst, src, bytes);
  gpu_sync(ctx(d));
}

static void g_upload_nowait(pt_device *d, void *dst, const void *src, size_t bytes) {
  gpu_staged_to_device(ctx(d), &state(d)->staging, dst, src, bytes);
}

/* A read the host blocks on anchors the spans' clock to the host's (spans.h). */
static void g_download(pt_device *d, void *dst, const void *src, size_t bytes) {
  gpu_spans_anchor_record(ctx(d), &state(d)->spans);
  gpu_to_host(ctx(d), dst, src, bytes);
  gpu_spans_anchor_set(&state(d)->spans, pt_now_s());
}

static void g_zero(pt_device *d, void *p, size_t bytes) {
  gpu_cost_note("cudaMemsetAsync", 0.0, 0.0, (double)bytes);
  CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, ctx(d)->stream));
}

static void g_copy(pt_device *d, void *dst, const void *src, size_t bytes) {
  gpu_cost_note("cudaMemcpyAsync:d2d", 0.0, 0.0, 2.0 * (double)bytes);
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx(d)->stream));
}

static void g_sync(pt_device *d) {
  gpu_spans_anchor_record(ctx(d), &state(d)->spans);
  gpu_sync(ctx(d));
  gpu_spans_anchor_set(&state(d)->spans, pt_now_s());
}
static int64_t g_span_begin(pt_device *d, int keep) {
  return gpu_spans_begin(ctx(d), &state(d)->spans, keep);
}
static void g_span_end(pt_device *d) { gpu_spans_end(ctx(d), &state(d)->spans); }
static double g_spans_seconds(pt_device *d) { return gpu_spans_take(&state(d)->spans); }
static int g_span_times(pt_device *d, int64_t ticket, double *t0, double *t1) {
  return gpu_spans_times(&state(d)->spans, ticket, t0, t1);
}

/* --- Activation offload: pinned host memory, a second stream, events ----------------------- */

static void *g_pinned_alloc(pt_device *d, size_t bytes) {
  void *p = NULL;
  CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
  memset(p, 0, bytes);
  return p;
}

static void g_pinned_free(pt_device *d, void *p) { CUDA_CHECK(cudaFreeHost(p)); }

static void *g_event_new(pt_device *d) {
  cudaEvent_t ev;
  CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  return ev;
}

static void g_event_free(pt_device *d, void *ev) { cudaEventDestroy((cudaEvent_t)ev); }

/* The copy stream waits for the compute stream's work so far (the fork event), copies, and
 * records done: the compute stream runs on meanwhile. */
static void g_copy_async(pt_device *d, void *dst, const void *src, size_t bytes, int to_device,
                         void *done) {
  gpu_state *s = state(d);
  if (!s->copy_stream) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&s->copy_stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&s->fork, cudaEventDisableTiming));
  }
  gpu_cost_note(to_device ? "cudaMemcpyAsync:prefetch" : "cudaMemcpyAsync:offload", 0.0, 0.0,
                (double)bytes);
  CUDA_CHECK(cudaEventRecord(s->fork, ctx(d)->stream));
  CUDA_CHECK(cudaStreamWaitEvent(s->copy_stream, s->fork, 0));
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes,
                             to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                             s->copy_stream));
  if (done) CUDA_CHECK(cudaEventRecord((cudaEvent_t)done, s->copy_stream));
}

/* Tests on the CUDA emulator only (its cuda_runtime_api.h defines PT_CUDA_EMULATION):
 * PT_EMU_OFFLOAD_UNORDERED=1 drops the compute stream's waits for offload copies, so
 * tests/gpu/overlap_order.sh (gpu_offload_order) can show the emulator catches the missing ordering. Never set in a
 * build for a real GPU: there it is always 0. */
static int offload_unordered(void) {
#ifdef PT_CUDA_EMULATION
  const char *v = getenv("PT_EMU_OFFLOAD_UNORDERED");
  return v && !strcmp(v, "1");
#else
  return 0;
#endif
}

static void g_wait_event(pt_device *d, void *ev) {
  if (!offload_unordered()) CUDA_CHECK(cudaStreamWaitEvent(ctx(d)->stream, (cudaEvent_t)ev, 0));
}

/* cuBLAS sgemm (the same pedantic float32 the kernels use) on n^3, timed with events: repeated
 * until `seconds` have passed, after one warm-up call. */
static double g_gemm_flops(pt_device *d, int n, double seconds) {
  gpu_ctx *g = ctx(d);
  size_t bytes = sizeof(float) * (size_t)n * n;
  float *a = gpu_alloc(g, bytes), *b = gpu_alloc(g, bytes), *c = gpu_alloc(g, bytes);
  float one = 1.0f, zero = 0.0f;
  cudaEvent_t t0, t1;
  CUDA_CHECK(cudaEventCreate(&t0));
  CUDA_CHECK(cudaEventCreate(&t1));
  CUBLAS_CHECK(cublasSgemm(g->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n));
  float ms = 0.0f, total = 0.0f;
  int calls = 0;
  while (total < 1e3 * seconds && calls < 100000) {
    CUDA_CHECK(cudaEventRecord(t0, g->stream));
    for (int i = 0; i < 10; i++)
      CUBLAS_CHECK(cublasSgemm(g->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n));
    CUDA_CHECK(cudaEventRecord(t1, g->stream));
    CUDA_CHECK(cudaEventSynchronize(t1));
    CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
    total += ms;
    calls += 10;
  }
  cudaEventDestroy(t0), cudaEventDestroy(t1);
  gpu_free(a), gpu_free(b), gpu_free(c);
  return total > 0 ? 2.0 * n * (double)n * n * calls / (total / 1e3) : 0.0;
}

static int g_count(void) { return gpu_count(NULL, 0); }

static const gpu_state *cstate(const pt_device *d) { return d->impl; }
static void *g_stream(pt_device *d) { return ctx(d)->stream; }
static int g_local_id(const pt_device *d) { return cstate(d)->g.device; }
static size_t g_memory(const pt_device *d) { return cstate(d)->g.total_bytes; }
static size_t g_memory_free(const pt_device *d) { return gpu_free_bytes(&cstate(d)->g); }
static const char *g_bus_id(const pt_device *d) { return cstate(d)->g.pci_bus_id; }
static const char *g_name(const pt_device *d) { return cstate(d)->g.name; }

static void g_describe(const pt_device *d, char *buf, size_t size) {
  snprintf(buf, size, "%s (%s)", d->ops->is.name, g_name(d));
}

static int g_open(pt_device *d, int gpu_id, char *err, size_t errsz) {
  char why[256] = "";
  int n = gpu_count(why, sizeof why);
  if (gpu_id < 0 || gpu_id >= n) {
    if (n == 0) snprintf(err, errsz, "pipeline.device is gpu but no GPU can be used: %s", why);
    else snprintf(err, errsz, "GPU %d does not exist: this node has %d (pipeline.devices picks "
                  "them)", gpu_id, n);
    return -1;
  }
  gpu_state *s = pt_calloc(1, sizeof *s);
  if (gpu_open(&s->g, gpu_id, err, errsz) != 0) {
    free(s);
    return -1;
  }
  kernels_gpu_open(&s->kernels, &s->g);
  d->k = &s->kernels.table;
  d->impl = s;
  return 0;
}

/* The kernel table computes in precision p from now on. */
static void g_set_precision(pt_device *d, pt_precision p) {
  kernels_gpu_set_precision(&state(d)->kernels, p);
}

/* n = 4096: a smaller product leaves a GPU partly idle, understating its rate. */
const pt_device_ops device_gpu_ops = {
    .is = GPU_BACKEND_TRAITS, .count = g_count, .open = g_open, .sizing = &kernels_gpu_sizing,
    .gemm_n = 4096, .alloc = g_alloc, .free = g_free, .alloc_sparse = g_alloc_sparse,
    .upload = g_upload, .download = g_download,
    .zero = g_zero, .copy = g_copy, .sync = g_sync, .upload_nowait = g_upload_nowait,
    .set_precision = g_set_precision, .gemm_flops = g_gemm_flops, .describe = g_describe,
    .memory_bytes = g_memory, .memory_free = g_memory_free, .local_id = g_local_id,
    .bus_id = g_bus_id, .model_name = g_name,
    .stream = g_stream, .pinned_alloc = g_pinned_alloc, .pinned_free = g_pinned_free,
    .event_new = g_event_new, .event_free = g_event_free, .copy_async = g_copy_async,
    .wait_event = g_wait_event, .span_begin = g_span_begin, .span_end = g_span_end,
    .spans_seconds = g_spans_seconds, .span_times = g_span_times};
