/* The gpu kind of device (device.h): buffers in GPU memory, the CUDA kernels of kernels/cuda
 * on the rank's stream. Results that come back to the host (a loss, a sum of squares, a
 * finiteness flag) wait for the stream; nothing else does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/layers_gpu.h"
#include "kernels/cuda/ops_cuda.h"
#include "device/device.h"
#include "core/error.h"
#include "kernels/cuda/gpu.h"
#include "device/gpu_backend.h"

typedef struct {
  gpu_ctx g;
  double *sum;       /* device: one double, for losses and sums of squares */
  double *reduce;    /* device: CUDA_REDUCE_SCRATCH_DOUBLES, the reductions' partial sums */
  int *flag;         /* device: one int, for finiteness */
  void *targets;     /* device copy of a micro-batch's targets */
  size_t targets_bytes;
  struct { void *p; size_t bytes; } *blocks; /* live allocations, for the memory totals */
  int n_blocks, cap_blocks;
} gpu_state;

static gpu_state *state(pt_device *d) { return d->impl; }
static gpu_ctx *ctx(pt_device *d) { return &state(d)->g; }

static void *g_alloc(pt_device *d, size_t bytes) {
  gpu_state *s = state(d);
  void *p = gpu_alloc(bytes);
  if (s->n_blocks == s->cap_blocks) {
    s->cap_blocks = s->cap_blocks ? 2 * s->cap_blocks : 64;
    s->blocks = realloc(s->blocks, sizeof *s->blocks * (size_t)s->cap_blocks);
    if (!s->blocks) pt_fatal("out of memory tracking GPU allocations");
  }
  s->blocks[s->n_blocks].p = p, s->blocks[s->n_blocks++].bytes = bytes;
  pt_mem_account((int64_t)bytes);
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

static void g_download(pt_device *d, void *dst, const void *src, size_t bytes) {
  gpu_to_host(ctx(d), dst, src, bytes);
}

static void g_zero(pt_device *d, void *p, size_t bytes) {
  CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, ctx(d)->stream));
}

static void g_copy(pt_device *d, void *dst, const void *src, size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx(d)->stream));
}

static void g_add(pt_device *d, float *y, const float *x, int64_t n) {
  cuda_op_add_inplace(ctx(d), y, x, n);
}

static void g_scale(pt_device *d, float *x, float s, int64_t n) { cuda_scale(ctx(d), x, s, n); }

static double read_sum(pt_device *d) {
  double v;
  gpu_to_host(ctx(d), &v, state(d)->sum, sizeof v);
  return v;
}

static double g_sumsq(pt_device *d, const float *x, int64_t n) {
  cuda_sumsq(ctx(d), state(d)->sum, x, n, state(d)->reduce);
  return read_sum(d);
}

static int g_all_finite(pt_device *d, const float *x, int64_t n) {
  int bad = 0;
  CUDA_CHECK(cudaMemsetAsync(state(d)->flag, 0, sizeof(int), ctx(d)->stream));
  cuda_check_finite(ctx(d), state(d)->flag, x, n);
  gpu_to_host(ctx(d), &bad, state(d)->flag, sizeof bad);
  return !bad;
}

static double g_loss(pt_device *d, pt_loss_kind kind, const float *y, const void *targets,
                     size_t target_bytes, int N, int F, float scale, float *dy) {
  gpu_state *s = state(d);
  if (s->targets_bytes < target_bytes) {
    gpu_free(s->targets);
    s->targets = gpu_alloc(target_bytes);
    s->targets_bytes = target_bytes;
  }
  if (kind == LOSS_CROSS_ENTROPY) /* ids are checked on the host, where the error can say so */
    for (int n = 0; n < N; n++) {
      int32_t t = ((const int32_t *)targets)[n];
      if (t < 0 || t >= F)
        pt_fail_input("cross_entropy: target %d outside [0, %d): the data holds a class or token "
                      "id the last layer has no output for", t, F);
    }
  g_upload(d, s->targets, targets, target_bytes);
  CUDA_CHECK(cudaMemsetAsync(s->sum, 0, sizeof(double), ctx(d)->stream));
  if (kind == LOSS_CROSS_ENTROPY)
    cuda_loss_cross_entropy(ctx(d), dy, s->sum, y, s->targets, N, F, scale, s->reduce);
  else
    cuda_loss_mse(ctx(d), dy, s->sum, y, s->targets, N, F, scale, s->reduce);
  return read_sum(d);
}

static void g_optimizer(pt_device *d, const device_update *u, float *w, const float *g, float *m,
                        float *v, int64_t n) {
  float wd = u->decay ? (float)u->weight_decay : 0.0f;
  if (u->adam)
    cuda_adamw_step(ctx(d), w, g, m, v, NULL, n, (float)u->lr, (float)u->beta1, (float)u->beta2,
                    (float)u->eps, wd, (float)u->bc1, (float)u->bc2);
  else
    cuda_sgd_step(ctx(d), w, g, m, NULL, n, (float)u->lr, (float)u->momentum, wd, u->t == 1);
}

static void g_layer(pt_device *d, int which, pt_layer *L, const pt_io *io) {
  const pt_layer_gpu *t = layer_gpu_find(L->type);
  if (!t) pt_fatal("layer %d (%s) has no GPU kernels", L->index, L->type->name);
  if (which == 0) t->forward(ctx(d), L, io);
  else if (which == 1) t->backward_input(ctx(d), L, io);
  else t->backward_weight(ctx(d), L, io);
}

static const char *g_layer_missing(pt_device *d, const pt_layer *L) {
  return layer_gpu_find(L->type) ? NULL : "it has no GPU kernels; run it with "
                                          "pipeline.device: cpu";
}

static size_t g_scratch_bytes(pt_device *d, const pt_layer *L, int B, int T) {
  const pt_layer_gpu *t = layer_gpu_find(L->type);
  if (t && t->scratch_bytes) return t->scratch_bytes(L, B, T);
  return L->type->scratch_bytes ? L->type->scratch_bytes(L, B, T) : 0;
}

static const pt_device_ops gpu_ops = {
    g_alloc, g_free,  g_upload,       g_download, g_zero,      g_copy,          g_add,
    g_scale, g_sumsq, g_all_finite,   g_loss,     g_optimizer, g_layer,         g_layer_missing,
    g_scratch_bytes};

/* cuBLAS sgemm (the same pedantic float32 the kernels use) on n^3, timed with events: repeated
 * until `seconds` have passed, after one warm-up call. */
double gpu_backend_gemm_flops(pt_device *d, int n, double seconds) {
  gpu_ctx *g = ctx(d);
  size_t bytes = sizeof(float) * (size_t)n * n;
  float *a = gpu_alloc(bytes), *b = gpu_alloc(bytes), *c = gpu_alloc(bytes), one = 1.0f, zero = 0.0f;
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

int gpu_backend_count(void) { return gpu_count(NULL, 0); }
int gpu_backend_supports(const pt_layer *L) { return layer_gpu_find(L->type) != NULL; }

void *gpu_backend_stream(pt_device *d) { return ctx(d)->stream; }
int gpu_backend_ctx_id(const pt_device *d) { return ((const gpu_state *)d->impl)->g.device; }
size_t gpu_backend_memory(const pt_device *d) { return ((const gpu_state *)d->impl)->g.total_bytes; }
const char *gpu_backend_bus_id(const pt_device *d) {
  return ((const gpu_state *)d->impl)->g.pci_bus_id;
}

int gpu_backend_open(pt_device *d, int gpu_id, char *err, size_t errsz) {
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
  s->sum = gpu_alloc(sizeof(double));
  s->reduce = gpu_alloc(sizeof(double) * CUDA_REDUCE_SCRATCH_DOUBLES);
  s->flag = gpu_alloc(sizeof(int));
  *d = (pt_device){DEV_GPU, &gpu_ops, s};
  return 0;
}
