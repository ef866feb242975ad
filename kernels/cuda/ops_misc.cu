/* Elementwise adds, copies and column sums on the GPU (kernels/cpu/ops_linear.c's op_add,
 * op_add_inplace, op_colsum_acc). */
#include "kernels/cuda/common.cuh"

/* CPU: y[i] = a[i] + b[i] */
static __global__ void __launch_bounds__(PT_THREADS)
    add_kernel(float *y, const float *a, const float *b, int64_t n) {
  PT_GRID_LOOP(i, n) y[i] = a[i] + b[i];
}

/* CPU: y[i] += a[i] */
static __global__ void __launch_bounds__(PT_THREADS)
    add_inplace_kernel(float *y, const float *a, int64_t n) {
  PT_GRID_LOOP(i, n) y[i] += a[i];
}

/* Column sums of rows [r0, r0 + rows) of x[N,D], r0 = blockIdx.y * rows. Block (32, COLSUM_LANES):
 * threadIdx.x picks the column c = blockIdx.x * 32 + threadIdx.x (a warp reads 32 consecutive
 * floats of a row), threadIdx.y the row lane: lane r adds the chunk's rows r, r + LANES, ... in
 * order; the LANES partial sums of a column are then added by a fixed tree in shared memory.
 * The total is added into out[c] (one chunk: out is the accumulator) or written to
 * out[blockIdx.y * D + c] (a chunk's partial, pt_chunk_sum_kernel adds them). One block owns each
 * (column, chunk): no atomics, same bits every run. x: floats, or bf16 (read widened, exact). */
#define COLSUM_LANES 32
template <class T>
static __global__ void __launch_bounds__(32 * COLSUM_LANES)
    colsum_acc_kernel(float *out, const T *x, int N, int D, int rows, int accumulate) {
  __shared__ float part[COLSUM_LANES][33];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = blockIdx.x * 32 + tx;
  const int64_t r0 = (int64_t)blockIdx.y * rows, r1 = r0 + rows < N ? r0 + rows : N;
  float s = 0.0f;
  if (c < D)
    for (int64_t n = r0 + ty; n < r1; n += COLSUM_LANES) s += pt_col_value(x, n * D + c);
  part[ty][tx] = s;
  __syncthreads();
  for (int h = COLSUM_LANES / 2; h > 0; h >>= 1) {
    if (ty < h) part[ty][tx] += part[ty + h][tx];
    __syncthreads();
  }
  if (ty == 0 && c < D) {
    if (accumulate) out[c] += part[0][tx];
    else out[(int64_t)blockIdx.y * D + c] = part[0][tx];
  }
}

extern "C" void cuda_op_add(gpu_ctx *g, float *y, const float *a, const float *b, int64_t n) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(add_kernel, pt_cost_elementwise(n, 2, 1, 1), pt_grid(n), PT_THREADS, 0,
                   g->stream, y, a, b, n);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_add_inplace(gpu_ctx *g, float *y, const float *a, int64_t n) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(add_inplace_kernel, pt_cost_elementwise(n, 2, 1, 1), pt_grid(n), PT_THREADS,
                   0, g->stream, y, a, n);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_copy(gpu_ctx *g, float *y, const float *x, int64_t n) {
  if (n <= 0 || y == x) return;
  gpu_cost_note("cudaMemcpyAsync:d2d", 0.0, 0.0, 8.0 * (double)n);
  CUDA_CHECK(cudaMemcpyAsync(y, x, sizeof(float) * (size_t)n, cudaMemcpyDeviceToDevice,
                             g->stream));
}

/* The column sums of x (T: float, or bf16 at 2 bytes an element) under the ledger's row `name`. */
template <class T>
static void colsum_acc(gpu_ctx *g, const char *name, float *acc, const T *x, int N, int D) {
  float *scratch = g->col_scratch;
  if (N <= 0 || D <= 0) return;
  const int chunks = pt_col_chunks(N, D, 1), rows = pt_col_chunk_rows(N, chunks);
  dim3 block(32, COLSUM_LANES), grid((unsigned)(((int64_t)D + 31) / 32), (unsigned)chunks);
  const double ND = (double)N * D;
  void (*kernel)(float *, const T *, int, int, int, int) = colsum_acc_kernel<T>;
  gpu_cost_note(name, 0.0, ND, sizeof(T) * ND + pt_col_out_bytes(D, chunks, 1));
  PT_LAUNCH(kernel, grid, block, 0, g->stream, chunks == 1 ? acc : scratch, x, N, D, rows,
            chunks == 1);
  PT_LAUNCH_CHECK();
  if (chunks == 1) return;
  PT_LAUNCH_COSTED(pt_chunk_sum_kernel, pt_cost_chunk_sum(chunks, D, 1), pt_grid(D), PT_THREADS,
                   0, g->stream, acc, (float *)NULL, (const float *)scratch, chunks, D);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_colsum_acc(gpu_ctx *g, float *acc, const float *x, int N, int D) {
  colsum_acc(g, "colsum_acc_kernel", acc, x, N, D);
}

extern "C" void cuda_op_colsum_acc_bf16(gpu_ctx *g, float *acc, const uint16_t *x16, int N,
                                        int D) {
  colsum_acc(g, "colsum_acc_kernel:bf16", acc, x16, N, D);
}

/* kernels.h unset_f32. The emulator (the .cu files compiled as host C++, launch.cuh) sets every
 * byte to 0xff, a NaN as float32, so a float32 read of an unset range poisons the results the
 * GPU tests compare; a real GPU's build (nvcc) queues nothing: the floats there are whatever
 * they were, which nobody reads. Noted in no ledger: a real GPU does no work for it. */
extern "C" void cuda_unset_f32(gpu_ctx *g, float *x, int64_t n) {
#ifdef __CUDACC__
  (void)g, (void)x, (void)n;
#else
  if (n > 0) CUDA_CHECK(cudaMemsetAsync(x, 0xff, sizeof(float) * (size_t)n, g->stream));
#endif
}
