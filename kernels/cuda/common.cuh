/* kernels/cuda/common.cuh: what the kernels of the kernels/cuda .cu files share (private to them).
 *
 * Device functions live here, inline: the kernels are built without relocatable device code
 * (no device link step, see cmake/gpu.cmake), so a device function used by two .cu files must
 * be in a header. Nothing here needs the C++ runtime library.
 *
 * Reductions are fixed trees: a thread adds its elements in index order, a warp combines its
 * lanes with an xor butterfly, a block adds its warps' sums in warp order. The shape of the tree
 * depends only on the launch configuration, which depends only on the sizes, so a kernel gives
 * the same bits on every run.
 */
#ifndef PT_CUDA_COMMON_CUH
#define PT_CUDA_COMMON_CUH

#include "kernels/cpu/fastmath.h"
#include <stdint.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/precision.h"

/* Threads per block of the 1-D kernels (a multiple of 32: the block reductions need whole
 * warps). */
#define PT_THREADS 256
/* Blocks of a grid-stride loop: enough to fill any GPU; each thread then loops. */
#define PT_MAX_BLOCKS 65536

/* Blocks for a grid-stride loop over n items (n > 0). */
static inline unsigned pt_grid(int64_t n) {
  int64_t b = (n + PT_THREADS - 1) / PT_THREADS;
  return (unsigned)(b < PT_MAX_BLOCKS ? b : PT_MAX_BLOCKS);
}

/* Every launch is followed by this: a bad configuration is reported where it was made. */
#define PT_LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

/* for (i = this thread's first item; i < n; i += all threads of the grid), in 64 bits. */
#define PT_GRID_LOOP(i, n)                                                     \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);    \
       i += (int64_t)gridDim.x * blockDim.x)

/* Element i of an output a kernel writes as float32 y or, where y16 is set, as bf16 bits in
 * y16 instead (y then not written): ops_cuda.h's "y16" outputs. */
__device__ __forceinline__ void pt_put(float *y, uint16_t *y16, int64_t i, float v) {
  if (y16) y16[i] = pt_bf16_bits(v);
  else y[i] = v;
}

/* A norm backward's dx[i] = v (rounded to a bf16 value where round_dx: kernels.h
 * round_when_written), and its bits to dx16 too where given (ops_cuda.h's norm backwards). */
__device__ __forceinline__ void pt_put_dx(float *dx, uint16_t *dx16, int64_t i, float v,
                                          int round_dx) {
  const float r = round_dx ? pt_round_bf16(v) : v;
  dx[i] = r;
  if (dx16) dx16[i] = pt_bf16_bits(r);
}

/* x[i], or its bf16 copy's value where x16 is given (a tensor read from its copy at rest). */
__device__ __forceinline__ float pt_get(const float *x, const uint16_t *x16, int64_t i) {
  return x16 ? pt_bf16_float(x16[i]) : x[i];
}

__device__ __forceinline__ float pt_dev_neg_inf(void) { return __uint_as_float(0xff800000u); }
__device__ __forceinline__ float pt_dev_nan(void) { return __uint_as_float(0x7fc00000u); }
/* NaN or +-infinity: the exponent bits all set. */
__device__ __forceinline__ int pt_dev_nonfinite(float x) {
  return (__float_as_uint(x) & 0x7f800000u) == 0x7f800000u;
}

/* The CPU's exp/tanh approximation (kernels/cpu/fastmath.h, shared): softmax, GELU and cross
 * entropy agree with the CPU's to the last bit or so (nvcc may fuse a multiply-add GCC did not). */
#define pt_dev_expf pt_expf
#define pt_dev_tanhf pt_tanhf

/* Warp reductions (all 32 lanes must take part; every lane gets the same bits: a + b == b + a). */
__device__ __forceinline__ float pt_warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double pt_warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double pt_warp_sum_d(double v) { return pt_warp_sum(v); }
/* Max of non-NaN values (the callers' own loops skip NaN as the CPU's "a > m ? a : m" does). */
__device__ __forceinline__ float pt_warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* Block reductions for 1-D blocks of a multiple of 32 threads (at most 1024); every thread of
 * the block must call them (they synchronise) and every thread gets the result. sh: 32 shared
 * slots, reusable right after the call returns. */
template <typename T> __device__ __forceinline__ T pt_block_sum_t(T v, T *sh) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = pt_warp_sum(v);
  __syncthreads(); /* the threads of a previous call are done reading sh */
  if (lane == 0) sh[w] = v;
  __syncthreads();
  T t = 0;
  for (int i = 0; i < nw; i++) t += sh[i];
  return t;
}
__device__ __forceinline__ float pt_block_sum(float v, float *sh) { return pt_block_sum_t(v, sh); }
__device__ __forceinline__ double pt_block_sum_d(double v, double *sh) {
  return pt_block_sum_t(v, sh);
}
__device__ __forceinline__ float pt_block_max(float v, float *sh) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = pt_warp_max(v);
  __syncthreads();
  if (lane == 0) sh[w] = v;
  __syncthreads();
  float t = sh[0];
  for (int i = 1; i < nw; i++) t = fmaxf(t, sh[i]);
  return t;
}

/* The second pass of the two-pass double sums (losses, sumsq), one block of PT_THREADS: the
 * sum of partial[0..count); thread t adds t, t + PT_THREADS, ... in order, then the block tree,
 * so the order is fixed. pt_sum_partials_kernel: *out = (accumulate ? *out : 0) + that sum. */
__device__ __forceinline__ double pt_sum_partials(const double *partial, int count, double *sh) {
  double s = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) s += partial[i];
  return pt_block_sum_d(s, sh);
}
static __global__ void __launch_bounds__(PT_THREADS)
    pt_sum_partials_kernel(double *out, const double *partial, int count, int accumulate) {
  __shared__ double sh[32];
  double s = pt_sum_partials(partial, count, sh);
  if (threadIdx.x == 0) *out = accumulate ? *out + s : s;
}

/* pt_sum_partials_kernel's cost: count partials read and added, the double out read and
 * written. */
static inline pt_cost pt_cost_sum_partials(int64_t count) {
  return pt_cost_of(0.0, (double)count, 8.0 * count + 16.0);
}

/* x[i] as the float it stands for: a column reduction's input, floats or a bf16 copy of floats
 * that are bf16 values (read widened: the same floats). */
static __device__ inline float pt_col_value(const float *x, int64_t i) { return x[i]; }
static __device__ inline float pt_col_value(const uint16_t *x, int64_t i) {
  return pt_bf16_float(x[i]);
}

/* Column reductions over x[N,D] (colsum_acc, LayerNorm's weight gradient) cut the rows into
 * chunks so that a narrow D still fills the GPU: block (column group of 32, chunk) writes its
 * chunk's column sums into scratch, and pt_chunk_sum_kernel adds the chunks in chunk order
 * into the accumulator. The chunk count comes from N, D only (same tree, same bits, every run
 * and every GPU): about PT_COL_BLOCKS blocks, at least PT_COL_MIN_ROWS rows a chunk, and
 * `parts` partial arrays of chunks * D floats within GPU_COL_SCRATCH_FLOATS. 1: no split
 * (the block adds its total straight into the accumulator, no scratch). */
#define PT_COL_BLOCKS 528   /* four waves of 132 SMs at one 1024-thread block per SM */
#define PT_COL_MIN_ROWS 128 /* 4 rows per row lane of a 32-lane block */
static inline int pt_col_chunks(int N, int D, int parts) {
  int64_t groups = ((int64_t)D + 31) / 32, r = (PT_COL_BLOCKS + groups - 1) / groups;
  int64_t by_rows = N / PT_COL_MIN_ROWS;
  int64_t by_scratch = GPU_COL_SCRATCH_FLOATS / ((int64_t)D * parts);
  if (r > by_rows) r = by_rows;
  if (r > by_scratch) r = by_scratch;
  return r < 1 ? 1 : (int)r;
}
/* Rows per chunk for a chunk count from pt_col_chunks (the last chunk may be shorter). */
static inline int pt_col_chunk_rows(int N, int chunks) { return (N + chunks - 1) / chunks; }

/* Bytes a column reduction's first pass writes for `parts` sums of D columns: the partials of
 * its chunks, or (one chunk) the accumulators, read and written. */
static inline double pt_col_out_bytes(int D, int chunks, int parts) {
  return chunks == 1 ? 8.0 * D * parts : 4.0 * chunks * D * parts;
}
/* pt_chunk_sum_kernel's cost: the chunks' partials read, each accumulator read and written. */
static inline pt_cost pt_cost_chunk_sum(int chunks, int D, int parts) {
  return pt_cost_of(0.0, (double)chunks * D * parts, 4.0 * ((double)chunks * D + 2.0 * D) * parts);
}

/* acc0[c] += sum over chunks r in order of part[r D + c]; and acc1 (when not NULL) likewise
 * from the second array, part + chunks D. Thread per column. */
static __global__ void __launch_bounds__(PT_THREADS)
    pt_chunk_sum_kernel(float *acc0, float *acc1, const float *part, int chunks, int D) {
  PT_GRID_LOOP(c, D) {
    float s = 0.0f;
    for (int r = 0; r < chunks; r++) s += part[(int64_t)r * D + c];
    acc0[c] += s;
    if (acc1) {
      const float *p1 = part + (int64_t)chunks * D;
      float s1 = 0.0f;
      for (int r = 0; r < chunks; r++) s1 += p1[(int64_t)r * D + c];
      acc1[c] += s1;
    }
  }
}

#endif
