/* Optimizer updates and gradient checks on the GPU (model/optimizer.c; the sums of squares are
 * stats.cu's): AdamW and SGD with the CPU's float operations in the CPU's order
 * (kernels/cpu/optimizer.c), on the step's factors the host computed once for every device
 * (model/optimizer.c: optimizer_update), so a step gives the CPU's bits. Products and sums are
 * written __fmul_rn/__fadd_rn where nvcc would otherwise fuse them into a multiply-add the CPU
 * kernel (built without contraction) does not do. w16 (NULL: none) gets the new weights' bf16
 * bits in the same pass, the weight copy the products read. Each gradient element is read
 * times clip (__fmul_rn: the gradient clipping's scale, the bits a separate scaling pass gave;
 * 1 when not clipped). */
#include <math.h>
#include <stdlib.h>

#include "kernels/cuda/common.cuh"
#include "kernels/precision.h"

/* CPU op_adamw_step, with keep (1 - lr*wd, or 1) where decay applies (everywhere when
 * decay_mask is NULL; elsewhere p is left as it is, which p * 1 also does):
 *   g = grad * clip;  p *= keep;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g;
 *   p -= step * m / (sqrtf(v) * inv_sqrt_bc2 + eps). */
__device__ __forceinline__ void adamw_one(float *w, uint16_t *w16, const float *grad, float *m,
                                          float *v, int64_t i, int decay, float b1, float b2,
                                          float eps, float step, float inv_sqrt_bc2, float keep,
                                          float clip) {
  float p = w[i], g = __fmul_rn(grad[i], clip);
  if (decay) p *= keep;
  float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(1.0f - b1, g));
  float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(1.0f - b2, g), g));
  m[i] = mi;
  v[i] = vi;
  p -= __fmul_rn(step, mi) / __fadd_rn(__fmul_rn(sqrtf(vi), inv_sqrt_bc2), eps);
  w[i] = p;
  if (w16) w16[i] = pt_bf16_bits(p);
}

static __global__ void __launch_bounds__(PT_THREADS)
    adamw_kernel(float *w, uint16_t *w16, const float *grad, float *m, float *v,
                 const uint8_t *decay_mask, int64_t n, float b1, float b2, float eps, float step,
                 float inv_sqrt_bc2, float keep, float clip) {
  PT_GRID_LOOP(i, n) {
    adamw_one(w, w16, grad, m, v, i, !decay_mask || decay_mask[i], b1, b2, eps, step, inv_sqrt_bc2,
              keep, clip);
  }
}

/* Block b updates piece chunks[b] (the same operations on each float as adamw_kernel). */
static __global__ void __launch_bounds__(PT_THREADS)
    adamw_chunks_kernel(float *w, uint16_t *w16, const float *grad, float *m, float *v,
                        const pt_opt_chunk *chunks, float b1, float b2, float eps, float step,
                        float inv_sqrt_bc2, float keep, float clip) {
  const pt_opt_chunk c = chunks[blockIdx.x];
  for (int64_t i = c.offset + threadIdx.x; i < c.offset + c.n; i += blockDim.x)
    adamw_one(w, w16, grad, m, v, i, c.decay, b1, b2, eps, step, inv_sqrt_bc2, keep, clip);
}

/* The CPU's op_sgd_step, wd = weight_decay where decay applies (everywhere when decay_mask is
 * NULL), 0 elsewhere:
 *   d = grad * clip + wd p;  m = t > 1 ? mu m + d : d;  p -= lr * (mu > 0 ? m : d). */
__device__ __forceinline__ void sgd_one(float *w, uint16_t *w16, const float *grad,
                                        float *momentum, int64_t i, float wd, float lr, float mu,
                                        int first_step, float clip) {
  float p = w[i];
  float d = __fadd_rn(__fmul_rn(grad[i], clip), __fmul_rn(wd, p));
  float mi = d;
  if (momentum) {
    if (!first_step) mi = __fadd_rn(__fmul_rn(mu, momentum[i]), d);
    momentum[i] = mi;
  }
  p = __fsub_rn(p, __fmul_rn(lr, mu > 0.0f ? mi : d));
  w[i] = p;
  if (w16) w16[i] = pt_bf16_bits(p);
}

static __global__ void __launch_bounds__(PT_THREADS)
    sgd_kernel(float *w, uint16_t *w16, const float *grad, float *momentum,
               const uint8_t *decay_mask, int64_t n, float lr, float mu, float weight_decay,
               int first_step, float clip) {
  PT_GRID_LOOP(i, n) {
    float wd = (!decay_mask || decay_mask[i]) ? weight_decay : 0.0f;
    sgd_one(w, w16, grad, momentum, i, wd, lr, mu, first_step, clip);
  }
}

/* Block b updates piece chunks[b] (the same operations on each float as sgd_kernel). */
static __global__ void __launch_bounds__(PT_THREADS)
    sgd_chunks_kernel(float *w, uint16_t *w16, const float *grad, float *momentum,
                      const pt_opt_chunk *chunks, float lr, float mu, float weight_decay,
                      int first_step, float clip) {
  const pt_opt_chunk c = chunks[blockIdx.x];
  const float wd = c.decay ? weight_decay : 0.0f;
  for (int64_t i = c.offset + threadIdx.x; i < c.offset + c.n; i += blockDim.x)
    sgd_one(w, w16, grad, momentum, i, wd, lr, mu, first_step, clip);
}

static __global__ void __launch_bounds__(PT_THREADS) scale_kernel(float *x, float s, int64_t n) {
  PT_GRID_LOOP(i, n) x[i] *= s;
}


/* Any thread that sees a NaN or an infinity writes 1 (all writers write the same value). */
static __global__ void __launch_bounds__(PT_THREADS)
    check_finite_kernel(int *flag, const float *x, int64_t n) {
  PT_GRID_LOOP(i, n) if (pt_dev_nonfinite(x[i])) *flag = 1;
}

/* An AdamW update of n floats: w, grad, m, v read, w, m, v written (and a mask byte each, and
 * the 2-byte bf16 weight copy written where there is one, kernels.h's optimizer entry); the
 * clip, decay, the two moments, the square root and the step: 15 operations a float. */
static pt_cost adamw_cost(double n, int mask, int copy) {
  return pt_cost_of(0.0, 15.0 * n, (28.0 + mask + 2.0 * copy) * n);
}
/* SGD: w, grad (and momentum) read, w (and momentum, and the bf16 copy) written; clip, decay,
 * momentum, step. */
static pt_cost sgd_cost(double n, int momentum, int mask, int copy) {
  return pt_cost_of(0.0, (momentum ? 7.0 : 5.0) * n,
                    ((momentum ? 20.0 : 12.0) + mask + 2.0 * copy) * n);
}

extern "C" void cuda_adamw_step(gpu_ctx *g, float *w, uint16_t *w16, const float *grad,
                                float *m, float *v, const uint8_t *decay_mask, int64_t n,
                                float beta1, float beta2, float eps, float step,
                                float inv_sqrt_bc2, float keep, float clip) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(adamw_kernel, adamw_cost((double)n, decay_mask != NULL, w16 != NULL),
                   pt_grid(n), PT_THREADS, 0, g->stream, w, w16, grad, m, v, decay_mask, n, beta1,
                   beta2, eps, step, inv_sqrt_bc2, keep, clip);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_sgd_step(gpu_ctx *g, float *w, uint16_t *w16, const float *grad,
                              float *momentum, const uint8_t *decay_mask, int64_t n, float lr,
                              float mu, float weight_decay, int first_step, float clip) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(sgd_kernel,
                   sgd_cost((double)n, momentum != NULL, decay_mask != NULL, w16 != NULL),
                   pt_grid(n), PT_THREADS, 0, g->stream, w, w16, grad, momentum, decay_mask, n, lr,
                   mu, weight_decay, first_step, clip);
  PT_LAUNCH_CHECK();
}

/* The floats the pieces chunks[0..n_chunks) (device memory) cover, for the ledger: the list is
 * read back once (a wait, at the first update only) and remembered by its address and length,
 * a few lists at a time (a list freed and another made at the same address with the same
 * length would be counted with the old total: the ledger only). */
static double chunk_floats(gpu_ctx *g, const pt_opt_chunk *chunks, int64_t n_chunks) {
  static struct {
    const pt_opt_chunk *at;
    int64_t n;
    double floats;
  } seen[8];
  static int next;
  for (int i = 0; i < 8; i++)
    if (seen[i].at == chunks && seen[i].n == n_chunks) return seen[i].floats;
  pt_opt_chunk *host = (pt_opt_chunk *)malloc(sizeof *host * (size_t)n_chunks);
  if (!host) pt_fatal("optimizer: no memory for %lld pieces", (long long)n_chunks);
  gpu_to_host(g, host, chunks, sizeof *host * (size_t)n_chunks);
  double floats = 0.0;
  for (int64_t i = 0; i < n_chunks; i++) floats += host[i].n;
  free(host);
  seen[next] = {chunks, n_chunks, floats};
  next = (next + 1) % 8;
  return floats;
}

/* One block per piece: the grid's x dimension takes up to 2^31 - 1 of them. */
static unsigned chunk_grid(int64_t n_chunks) {
  if (n_chunks > 0x7fffffff) pt_fatal("optimizer: %lld pieces, more than one launch takes",
                                      (long long)n_chunks);
  return (unsigned)n_chunks;
}

extern "C" void cuda_adamw_chunks(gpu_ctx *g, float *w, uint16_t *w16, const float *grad,
                                  float *m, float *v, const pt_opt_chunk *chunks, int64_t n_chunks,
                                  float beta1, float beta2, float eps, float step,
                                  float inv_sqrt_bc2, float keep, float clip) {
  if (n_chunks <= 0) return;
  const pt_cost cost = adamw_cost(chunk_floats(g, chunks, n_chunks), 0, w16 != NULL);
  PT_LAUNCH_COSTED(adamw_chunks_kernel, cost, chunk_grid(n_chunks), PT_THREADS, 0, g->stream, w,
                   w16, grad, m, v, chunks, beta1, beta2, eps, step, inv_sqrt_bc2, keep, clip);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_sgd_chunks(gpu_ctx *g, float *w, uint16_t *w16, const float *grad,
                                float *momentum, const pt_opt_chunk *chunks, int64_t n_chunks,
                                float lr, float mu, float weight_decay, int first_step,
                                float clip) {
  if (n_chunks <= 0) return;
  const pt_cost cost = sgd_cost(chunk_floats(g, chunks, n_chunks), momentum != NULL, 0,
                                w16 != NULL);
  PT_LAUNCH_COSTED(sgd_chunks_kernel, cost, chunk_grid(n_chunks), PT_THREADS, 0, g->stream, w,
                   w16, grad, momentum, chunks, lr, mu, weight_decay, first_step, clip);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_scale(gpu_ctx *g, float *x, float s, int64_t n) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(scale_kernel, pt_cost_elementwise(n, 1, 1, 1), pt_grid(n), PT_THREADS, 0,
                   g->stream, x, s, n);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_check_finite(gpu_ctx *g, int *flag_dev, const float *x, int64_t n) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(check_finite_kernel, pt_cost_elementwise(n, 1, 0, 1), pt_grid(n), PT_THREADS,
                   0, g->stream, flag_dev, x, n);
  PT_LAUNCH_CHECK();
}
