/* The step statistics on the GPU: the finiteness check (kernels.h finite_check), whose failure
 * leaves its mark in a device int the engine reads once a step, and the sums of squares of the
 * gradient norm (sumsq, sumsq_into, sumsq_spans_into), in double with a fixed two-pass
 * reduction: the same blocks and order every run and on every GPU, so the bits are. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"

/* Every thread that meets a NaN or an infinity raises *mark to value: max is order-free, so the
 * result does not depend on which thread or block gets there first. */
static __global__ void __launch_bounds__(PT_THREADS)
    finite_mark_kernel(int *mark, int value, const float *x, int64_t n) {
  int bad = 0;
  PT_GRID_LOOP(i, n) bad |= pt_dev_nonfinite(x[i]);
  if (bad) atomicMax(mark, value);
}

extern "C" void cuda_finite_mark(gpu_ctx *g, int *mark_dev, int value, const float *x,
                                 int64_t n) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(finite_mark_kernel, pt_cost_elementwise(n, 1, 0, 1), pt_grid(n), PT_THREADS, 0,
                   g->stream, mark_dev, value, x, n);
  PT_LAUNCH_CHECK();
}

/* Pass 1, block b of `blocks` over x[0..n): thread t adds the squares (exact in double) of the
 * items b*PT_THREADS + t + k*blocks*PT_THREADS in k order, then the block tree. */
__device__ __forceinline__ double sumsq_block(const float *x, int64_t n, int64_t b,
                                              int64_t blocks, double *sh) {
  double s = 0.0;
  for (int64_t i = b * blockDim.x + threadIdx.x; i < n; i += blocks * blockDim.x) {
    double v = (double)x[i];
    s += v * v;
  }
  return pt_block_sum_d(s, sh);
}

/* Blocks of the first pass: about 16 items per thread, at most the scratch's 1024; a function
 * of n only, so the tree (and the bits) are the same on every GPU. */
static int sumsq_blocks(int64_t n) {
  int64_t b = (n + PT_THREADS * 16 - 1) / (PT_THREADS * 16);
  return (int)(b < 1 ? 1 : b > CUDA_REDUCE_SCRATCH_DOUBLES ? CUDA_REDUCE_SCRATCH_DOUBLES : b);
}

/* partial[b] = block b's sum (sumsq_block, the grid's blocks over x[0..n)). */
static __global__ void __launch_bounds__(PT_THREADS)
    sumsq_partial_kernel(double *partial, const float *x, int64_t n) {
  __shared__ double sh[32];
  double s = sumsq_block(x, n, blockIdx.x, gridDim.x, sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

extern "C" void cuda_sumsq(gpu_ctx *g, double *out_dev, const float *x, int64_t n,
                           double *scratch) {
  if (n <= 0) {
    gpu_cost_note("cudaMemsetAsync", 0.0, 0.0, sizeof(double));
    CUDA_CHECK(cudaMemsetAsync(out_dev, 0, sizeof(double), g->stream)); /* 0.0 */
    return;
  }
  int blocks = sumsq_blocks(n);
  PT_LAUNCH_COSTED(sumsq_partial_kernel, pt_cost_of(0.0, 2.0 * n, 4.0 * n + 8.0 * blocks),
                   (unsigned)blocks, PT_THREADS, 0, g->stream, scratch, x, n);
  PT_LAUNCH_CHECK();
  PT_LAUNCH_COSTED(pt_sum_partials_kernel, pt_cost_sum_partials(blocks), 1, PT_THREADS, 0,
                   g->stream, out_dev, scratch, blocks, 0);
  PT_LAUNCH_CHECK();
}

/* --- Many spans at once (cuda_sumsq_spans). The layout is a block per piece, as the
 * optimizer's multi-tensor update (optimizer.cu's adamw_chunks_kernel): span j's cuda_sumsq
 * blocks are the pieces [first[j], first[j + 1]), piece p block b of them, its partial at p. */
struct sumsq_piece {
  int64_t offset, n; /* the span */
  int32_t b, blocks; /* this block of the span's cuda_sumsq blocks */
};

/* Block p: piece p's sum, what sumsq_partial_kernel's block b writes for the span alone. */
static __global__ void __launch_bounds__(PT_THREADS)
    sumsq_spans_partial_kernel(double *partial, const float *x, const sumsq_piece *pieces) {
  __shared__ double sh[32];
  const sumsq_piece c = pieces[blockIdx.x];
  double s = sumsq_block(x + c.offset, c.n, c.b, c.blocks, sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

/* Block j: out[j] = span j's partials added as pt_sum_partials_kernel adds them (0: none). */
static __global__ void __launch_bounds__(PT_THREADS)
    sumsq_spans_finish_kernel(double *out, const double *partial, const int32_t *first) {
  __shared__ double sh[32];
  const int32_t at = first[blockIdx.x], count = first[blockIdx.x + 1] - at;
  double s = pt_sum_partials(partial + at, count, sh);
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}

extern "C" void cuda_sumsq_plan_free(cuda_sumsq_plan *p) {
  if (p->pieces) gpu_free(p->pieces);
  if (p->first) gpu_free(p->first);
  if (p->partials) gpu_free(p->partials);
  free(p->spans);
  memset(p, 0, sizeof *p);
}

/* p laid out for spans[0..n_spans) (host memory, kept as p->spans) and uploaded. */
static void sumsq_plan_build(gpu_ctx *g, cuda_sumsq_plan *p, const pt_sum_span *spans,
                             int n_spans) {
  int64_t pieces = 0;
  for (int j = 0; j < n_spans; j++) pieces += spans[j].n > 0 ? sumsq_blocks(spans[j].n) : 0;
  if (pieces > 0x7fffffff) pt_fatal("sumsq: %lld blocks, more than one launch takes",
                                    (long long)pieces);
  sumsq_piece *host = (sumsq_piece *)calloc((size_t)pieces + 1, sizeof *host);
  int32_t *first = (int32_t *)calloc((size_t)n_spans + 1, sizeof *first);
  p->spans = (pt_sum_span *)calloc((size_t)n_spans + 1, sizeof *spans);
  if (!host || !first || !p->spans) pt_fatal("sumsq: no memory for %d spans", n_spans);
  memcpy(p->spans, spans, sizeof *spans * (size_t)n_spans);
  p->n_spans = n_spans, p->n_pieces = pieces, p->floats = 0.0;
  int64_t c = 0;
  for (int j = 0; j < n_spans; j++) {
    first[j] = (int32_t)c;
    int blocks = spans[j].n > 0 ? sumsq_blocks(spans[j].n) : 0;
    for (int b = 0; b < blocks; b++) host[c++] = {spans[j].offset, spans[j].n, b, blocks};
    p->floats += (double)(spans[j].n > 0 ? spans[j].n : 0);
  }
  first[n_spans] = (int32_t)c;
  p->pieces = gpu_alloc(g, sizeof *host * (size_t)(pieces + 1));
  p->first = (int32_t *)gpu_alloc(g, sizeof *first * (size_t)(n_spans + 1));
  p->partials = (double *)gpu_alloc(g, sizeof(double) * (size_t)(pieces + 1));
  gpu_to_device(g, p->pieces, host, sizeof *host * (size_t)pieces);
  gpu_to_device(g, p->first, first, sizeof *first * (size_t)(n_spans + 1));
  free(host), free(first);
}

/* Whether p was built for exactly these spans. */
static int sumsq_plan_matches(const cuda_sumsq_plan *p, const pt_sum_span *spans, int n_spans) {
  return p->spans && p->n_spans == n_spans &&
         !memcmp(p->spans, spans, sizeof *spans * (size_t)n_spans);
}

extern "C" void cuda_sumsq_spans(gpu_ctx *g, cuda_sumsq_plan *p, double *out_dev, const float *x,
                                 const pt_sum_span *spans, int n_spans) {
  if (n_spans <= 0) return;
  if (!sumsq_plan_matches(p, spans, n_spans)) {
    gpu_sync(g); /* work queued may still read the old layout */
    cuda_sumsq_plan_free(p);
    sumsq_plan_build(g, p, spans, n_spans);
  }
  const double n = p->floats, pieces = (double)p->n_pieces;
  if (p->n_pieces > 0) {
    PT_LAUNCH_COSTED(sumsq_spans_partial_kernel, pt_cost_of(0.0, 2.0 * n, 4.0 * n + 8.0 * pieces),
                     (unsigned)p->n_pieces, PT_THREADS, 0, g->stream, p->partials, x,
                     (const sumsq_piece *)p->pieces);
    PT_LAUNCH_CHECK();
  }
  PT_LAUNCH_COSTED(sumsq_spans_finish_kernel,
                   pt_cost_of(0.0, pieces, 8.0 * pieces + 4.0 * (n_spans + 1) + 8.0 * n_spans),
                   (unsigned)n_spans, PT_THREADS, 0, g->stream, out_dev, p->partials, p->first);
  PT_LAUNCH_CHECK();
}
