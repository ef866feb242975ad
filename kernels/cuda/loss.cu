/* Losses on the GPU (kernels/cpu/loss.c): a block per row (or per few rows) writes dy and adds its
 * rows' losses (double) in row order into a partial sum in scratch; one block then adds the
 * partial sums in a fixed order into *loss_sum_dev. dy may be the logits y themselves
 * (kernels.h): a thread writes only elements it has read. Each launch notes its compulsory
 * work (cost.h). */
#include <math.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cost.h"
#include "kernels/loss.h"
#include "kernels/precision.h"

/* Blocks of the row kernels: one per row up to CUDA_REDUCE_SCRATCH_DOUBLES, a function of N
 * only (so the order of the additions, and the bits, are the same on any GPU). */
static unsigned row_blocks(int N) {
  return (unsigned)(N < CUDA_REDUCE_SCRATCH_DOUBLES ? N : CUDA_REDUCE_SCRATCH_DOUBLES);
}

/* y[f] as the loss reads it (kernels/loss.h pt_loss_read): rounded to bf16 under bf16, whose
 * stage leaves the logits unrounded; the rounding is idempotent, so the bits are those of logits
 * rounded before. y16 non-NULL: y's bf16 bits (its activation copy, kernels.h loss_acc), read
 * instead of its floats: the same values, 2 bytes each. A failed check raises r.mark once a
 * thread, after its rows. */
static __device__ __forceinline__ float read_y(const float *y, const uint16_t *y16, int64_t f,
                                               const pt_loss_read &r) {
  if (y16) return pt_bf16_float(y16[f]);
  return r.round_bf16 ? pt_round_bf16(y[f]) : y[f];
}

/* Element i of the gradient: as a float in dy, or its bf16 bits in dy16 (kernels.h loss_acc). */
static __device__ __forceinline__ void put_dy(float *dy, uint16_t *dy16, int64_t i, float v) {
  if (dy16) dy16[i] = pt_bf16_bits(v);
  else dy[i] = v;
}

/* Block b does rows n = b, b + G, b + 2G, ... (G = gridDim.x) one after the other; its thread 0
 * adds their losses in that order and leaves the block's sum in partial[b].
 * CPU cross_entropy_row: mx = max y;  e[f] = pt_expf(y[f] - mx);  sum = sum e;
 * dy[f] = e[f] * (scale / sum);  dy[target] -= scale;  loss = mx + log(sum) - y[target] (double).
 * Here, after the fused classifier of https://github.com/karpathy/llm.c, a row is read twice
 * and written once (dy may be the logits themselves, kernels.h): the first pass keeps each
 * thread's running max and sum of exps relative to it (online softmax: when the max grows, the
 * sum is rescaled), the block's max and sum follow from the threads' pairs by fixed trees; the
 * second pass writes the gradient. Thread t owns f = t, t + PT_THREADS, ...; y[target] is read
 * before any write. */
static __global__ void __launch_bounds__(PT_THREADS)
    cross_entropy_kernel(float *dy, uint16_t *dy16, double *partial, const float *logits,
                         const uint16_t *logits16, const int32_t *targets, int N, int V,
                         float scale, pt_loss_read r) {
  __shared__ float sh[32];
  double acc = 0.0;
  int bad = 0;
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) { /* the same n in every thread */
    const int64_t row = n * V;
    const float *y = logits + row;
    const uint16_t *y16 = logits16 ? logits16 + row : NULL;
    const int target = targets[n];
    if (target == LOSS_IGNORE) { /* no prediction here: dy = 0, adds 0 (the CPU's skip) */
      for (int f = threadIdx.x; f < V; f += blockDim.x) {
        if (r.mark) bad |= pt_dev_nonfinite(read_y(y, y16, f, r)); /* checked all the same */
        put_dy(dy, dy16, row + f, 0.0f);
      }
      continue;
    }
    const bool valid = target >= 0 && target < V;
    const float yt = threadIdx.x == 0 && valid ? read_y(y, y16, target, r) : 0.0f;
    float mx = pt_dev_neg_inf(), sum = 0.0f;
    for (int f = threadIdx.x; f < V; f += blockDim.x) {
      const float v = read_y(y, y16, f, r);
      bad |= pt_dev_nonfinite(v);
      if (v > mx) {
        sum = sum * pt_dev_expf(mx - v) + 1.0f;
        mx = v;
      } else {
        sum += pt_dev_expf(v - mx);
      }
    }
    const float bmx = pt_block_max(mx, sh);
    sum = pt_block_sum(mx == bmx ? sum : sum * pt_dev_expf(mx - bmx), sh);
    const float inv = scale / sum;
    for (int f = threadIdx.x; f < V; f += blockDim.x) {
      float v = pt_dev_expf(read_y(y, y16, f, r) - bmx) * inv;
      if (f == target) v -= scale;
      put_dy(dy, dy16, row + f, v);
    }
    if (threadIdx.x == 0)
      acc += valid ? (double)bmx + log((double)sum) - (double)yt : (double)pt_dev_nan();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
  if (bad && r.mark) atomicMax(r.mark, r.value); /* finite_mark_kernel's order-free max */
}

/* Rows as above. CPU: diff = y - t;  s += (double)diff * diff;  dy = 2 * diff / F * scale;
 * loss = s / F. */
static __global__ void __launch_bounds__(PT_THREADS)
    mse_kernel(float *dy, uint16_t *dy16, double *partial, const float *yv, const uint16_t *yv16,
               const float *targets, int N, int F, float scale, pt_loss_read r) {
  __shared__ double sh[32];
  double acc = 0.0;
  int bad = 0;
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float *y = yv + n * F, *t = targets + n * F;
    const uint16_t *y16 = yv16 ? yv16 + n * F : NULL;
    double s = 0.0;
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
      const float v = read_y(y, y16, f, r);
      bad |= pt_dev_nonfinite(v);
      float diff = v - t[f];
      s += (double)diff * diff;
      put_dy(dy, dy16, n * F + f, 2.0f * diff / (float)F * scale);
    }
    s = pt_block_sum_d(s, sh);
    if (threadIdx.x == 0) acc += s / F;
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
  if (bad && r.mark) atomicMax(r.mark, r.value);
}


extern "C" void cuda_loss_cross_entropy(gpu_ctx *g, float *dy, uint16_t *dy16,
                                        double *loss_sum_dev, const float *logits,
                                        const uint16_t *logits16, const int32_t *targets, int N,
                                        int V, float scale, double *scratch, pt_loss_read r) {
  if (N <= 0 || V <= 0) return;
  unsigned blocks = row_blocks(N);
  /* logits read and the gradient written once each (the kernel reads a row twice: the second
   * read is not compulsory; either as bf16: 2 bytes), ids read, a partial sum per block; the
   * exps (about 2 per logit), the gradient's scaling and the rescaled sums: 4 FLOPs per logit */
  const double NV = (double)N * V, bytes = (logits16 ? 2.0 : 4.0) + (dy16 ? 2.0 : 4.0);
  const pt_cost cost = pt_cost_of(0.0, 4.0 * NV, bytes * NV + 4.0 * N + 8.0 * blocks);
  PT_LAUNCH_COSTED(cross_entropy_kernel, cost, blocks, PT_THREADS, 0, g->stream, dy, dy16, scratch,
                   logits, logits16, targets, N, V, scale, r);
  PT_LAUNCH_CHECK();
  PT_LAUNCH_COSTED(pt_sum_partials_kernel, pt_cost_sum_partials(blocks), 1, PT_THREADS, 0,
                   g->stream, loss_sum_dev, scratch, (int)blocks, 1);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_loss_mse(gpu_ctx *g, float *dy, uint16_t *dy16, double *loss_sum_dev,
                              const float *y, const uint16_t *y16, const float *targets, int N,
                              int F, float scale, double *scratch, pt_loss_read r) {
  if (N <= 0 || F <= 0) return;
  unsigned blocks = row_blocks(N);
  const double NF = (double)N * F, bytes = (y16 ? 2.0 : 4.0) + (dy16 ? 2.0 : 4.0) + 4.0;
  PT_LAUNCH_COSTED(mse_kernel, pt_cost_of(0.0, 6.0 * NF, bytes * NF + 8.0 * blocks), blocks,
                   PT_THREADS, 0, g->stream, dy, dy16, scratch, y, y16, targets, N, F, scale, r);
  PT_LAUNCH_CHECK();
  PT_LAUNCH_COSTED(pt_sum_partials_kernel, pt_cost_sum_partials(blocks), 1, PT_THREADS, 0,
                   g->stream, loss_sum_dev, scratch, (int)blocks, 1);
  PT_LAUNCH_CHECK();
}
