/* LayerNorm on the GPU (kernels/cpu/ops_layernorm.c): one block per row for forward and
 * backward_input (block sums as fixed trees, common.cuh), and a column-tiled kernel over row
 * chunks for backward_weight whose sums over the rows have a fixed order too. */
#include "kernels/cuda/common.cuh"

/* Block n does row n; thread t the elements i = t, t + PT_THREADS, ... of it.
 * CPU:  s = sum x;  m = s / D;  v = sum (x - m)^2;  r = 1 / sqrtf(v / D + eps);
 *       y = (x - m) * r * w + b;  mean[n] = m;  rstd[n] = r. */
static __global__ void __launch_bounds__(PT_THREADS)
    layernorm_forward_kernel(float *y, uint16_t *y16, float *mean, float *rstd, const float *x,
                             uint16_t *xbits, const float *w, const float *b, int D, float eps) {
  __shared__ float sh[32];
  const int64_t n = blockIdx.x;
  const float *xr = x + n * D;
  float s = 0.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    if (xbits) xbits[n * D + i] = pt_bf16_bits(xr[i]);
    s += xr[i];
  }
  s = pt_block_sum(s, sh);
  const float m = s / D;
  float v = 0.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    float c = xr[i] - m;
    v += c * c;
  }
  v = pt_block_sum(v, sh);
  const float r = 1.0f / sqrtf(v / D + eps);
  for (int i = threadIdx.x; i < D; i += blockDim.x)
    pt_put(y, y16, n * D + i, (xr[i] - m) * r * w[i] + b[i]);
  if (threadIdx.x == 0) {
    mean[n] = m;
    rstd[n] = r;
  }
}

/* Block n does row n.
 * CPU:  g = dy * w;  sg = sum g / D;  sgx = sum g * (x - m) * r / D;
 *       dx (=|+=) r * (dy * w - sg - (x - m) * r * sgx). */
static __global__ void __launch_bounds__(PT_THREADS)
    layernorm_backward_input_kernel(float *dx, uint16_t *dx16, const float *dy, uint16_t *dy16,
                                    const float *x, const uint16_t *x16, const float *w,
                                    const float *mean, const float *rstd, int D, int acc,
                                    int round_dx) {
  __shared__ float sh[32];
  const int64_t n = blockIdx.x;
  const float *dyr = dy + n * D;
  float *dxr = dx + n * D;
  const float m = mean[n], r = rstd[n];
  float sg = 0.0f, sgx = 0.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    if (dy16) dy16[n * D + i] = pt_bf16_bits(dyr[i]);
    float gi = dyr[i] * w[i];
    sg += gi;
    sgx += gi * (pt_get(x, x16, n * D + i) - m) * r;
  }
  sg = pt_block_sum(sg, sh) / D;
  sgx = pt_block_sum(sgx, sh) / D;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    float v = r * (dyr[i] * w[i] - sg - (pt_get(x, x16, n * D + i) - m) * r * sgx);
    pt_put_dx(dx, dx16, n * D + i, acc ? dxr[i] + v : v, round_dx);
  }
}

/* dw[c] += sum_n dy[n,c] * (x[n,c] - mean[n]) * rstd[n];  db[c] += sum_n dy[n,c], over the rows
 * [r0, r0 + rows) of chunk blockIdx.y. Block (32, LN_LANES) owns columns
 * c = blockIdx.x * 32 + threadIdx.x; row lane threadIdx.y adds the chunk's rows ty, ty + LN_LANES,
 * ... in order; the lanes' partial sums are added by a fixed tree. One chunk: the totals go
 * into dw, db; several: into the partials part[blockIdx.y * D + c] and the same at
 * part + chunks * D for db (pt_chunk_sum_kernel adds them). No atomics, same bits every run.
 * dy and x: floats, or bf16 copies (pt_col_value). */
#define LN_LANES 32
template <class TD, class TX>
static __global__ void __launch_bounds__(32 * LN_LANES)
    layernorm_backward_weight_kernel(float *dw, float *db, float *part, const TD *dy,
                                     const TX *x, const float *mean, const float *rstd, int N,
                                     int D, int rows) {
  __shared__ float pw[LN_LANES][33], pb[LN_LANES][33];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = blockIdx.x * 32 + tx;
  const int64_t r0 = (int64_t)blockIdx.y * rows, r1 = r0 + rows < N ? r0 + rows : N;
  float sw = 0.0f, sb = 0.0f;
  if (c < D)
    for (int64_t n = r0 + ty; n < r1; n += LN_LANES) {
      int64_t o = n * D + c;
      float d = pt_col_value(dy, o);
      sw += d * (pt_col_value(x, o) - mean[n]) * rstd[n];
      sb += d;
    }
  pw[ty][tx] = sw;
  pb[ty][tx] = sb;
  __syncthreads();
  for (int h = LN_LANES / 2; h > 0; h >>= 1) {
    if (ty < h) {
      pw[ty][tx] += pw[ty + h][tx];
      pb[ty][tx] += pb[ty + h][tx];
    }
    __syncthreads();
  }
  if (ty == 0 && c < D) {
    if (!part) {
      dw[c] += pw[0][tx];
      db[c] += pb[0][tx];
    } else {
      part[(int64_t)blockIdx.y * D + c] = pw[0][tx];
      part[((int64_t)gridDim.y + blockIdx.y) * D + c] = pb[0][tx];
    }
  }
}

extern "C" void cuda_op_layernorm_forward(gpu_ctx *g, float *y, uint16_t *y16, float *mean,
                                          float *rstd, const float *x, uint16_t *xbits,
                                          const float *w, const float *b, int N, int D,
                                          float eps) {
  if (N <= 0 || D <= 0) return;
  /* x read, y written (2 bytes as y16), x's bits written (xbits), w and b read, mean and rstd
   * written; sum, centre, square, normalise */
  const double ND = (double)N * D;
  const pt_cost cost = pt_cost_of(
      0.0, 8.0 * ND, (y16 ? 6.0 : 8.0) * ND + (xbits ? 2.0 * ND : 0.0) + 4.0 * (2 * D + 2 * N));
  PT_LAUNCH_COSTED(layernorm_forward_kernel, cost, (unsigned)N, PT_THREADS, 0, g->stream, y, y16,
                   mean, rstd, x, xbits, w, b, D, eps);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_layernorm_backward_input(gpu_ctx *g, float *dx, uint16_t *dx16,
                                                 const float *dy, uint16_t *dy16, const float *x,
                                                 const uint16_t *x16, const float *w,
                                                 const float *mean, const float *rstd, int N,
                                                 int D, int acc, int round_dx) {
  if (N <= 0 || D <= 0) return;
  /* dy, x (2 bytes from x16), w, mean, rstd read, dx written (and read when accumulating), dy's
   * bits written */
  const double ND = (double)N * D;
  const pt_cost cost = pt_cost_of(0.0, (13.0 + acc) * ND,
                                  4.0 * ((3 + acc) * ND + D + 2 * N) +
                                      pt_norm_copies_bytes(ND, dy16, x16, dx16));
  PT_LAUNCH_COSTED(layernorm_backward_input_kernel, cost, (unsigned)N, PT_THREADS, 0, g->stream, dx,
                   dx16, dy, dy16, x, x16, w, mean, rstd, D, acc, round_dx);
  PT_LAUNCH_CHECK();
}

/* The weight gradient with dy and x read as TD and TX (floats, or bf16 copies at 2 bytes an
 * element: the ledger's row with ":bf16"). */
template <class TD, class TX>
static void layernorm_weight(gpu_ctx *g, float *dw, float *db, const TD *dy, const TX *x,
                             const float *mean, const float *rstd, int N, int D) {
  if (N <= 0 || D <= 0) return;
  const int chunks = pt_col_chunks(N, D, 2), rows = pt_col_chunk_rows(N, chunks);
  float *part = chunks == 1 ? NULL : g->col_scratch;
  dim3 block(32, LN_LANES), grid((unsigned)(((int64_t)D + 31) / 32), (unsigned)chunks);
  const double ND = (double)N * D, width = (double)(sizeof(TD) + sizeof(TX));
  void (*kernel)(float *, float *, float *, const TD *, const TX *, const float *, const float *,
                 int, int, int) = layernorm_backward_weight_kernel<TD, TX>;
  gpu_cost_note(width < 8.0 ? "layernorm_backward_weight_kernel:bf16"
                            : "layernorm_backward_weight_kernel",
                0.0, 5.0 * ND, width * ND + 8.0 * N + pt_col_out_bytes(D, chunks, 2));
  PT_LAUNCH(kernel, grid, block, 0, g->stream, dw, db, part, dy, x, mean, rstd, N, D, rows);
  PT_LAUNCH_CHECK();
  if (!part) return;
  PT_LAUNCH_COSTED(pt_chunk_sum_kernel, pt_cost_chunk_sum(chunks, D, 2), pt_grid(D), PT_THREADS, 0,
                   g->stream, dw, db, (const float *)part, chunks, D);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_layernorm_backward_weight(gpu_ctx *g, float *dw, float *db,
                                                  const float *dy, const float *x,
                                                  const float *mean, const float *rstd, int N,
                                                  int D) {
  layernorm_weight(g, dw, db, dy, x, mean, rstd, N, D);
}

extern "C" void cuda_op_layernorm_backward_weight_copies(gpu_ctx *g, float *dw, float *db,
                                                         const float *dy, const uint16_t *dy16,
                                                         const float *x, const uint16_t *x16,
                                                         const float *mean, const float *rstd,
                                                         int N, int D) {
  if (dy16 && x16) layernorm_weight(g, dw, db, dy16, x16, mean, rstd, N, D);
  else if (dy16) layernorm_weight(g, dw, db, dy16, x, mean, rstd, N, D);
  else if (x16) layernorm_weight(g, dw, db, dy, x16, mean, rstd, N, D);
  else layernorm_weight(g, dw, db, dy, x, mean, rstd, N, D);
}
