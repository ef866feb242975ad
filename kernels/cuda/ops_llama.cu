/* The Llama block's kernels on the GPU (kernels/cpu/ops_llama.c; kernels.h: rmsnorm_*, rope,
 * swiglu_*). RMSNorm: one block per row for forward and backward_input (block sums as fixed
 * trees), and for backward_weight the column-tiled chunks of layernorm_backward_weight
 * (ops_layernorm.cu) with pt_chunk_sum_kernel adding the chunks in order: no atomics, the same
 * bits every run. rope and swiglu are elementwise; rope's cos and sin are the CPU's
 * (rope_angle.h), its pt_rope_freqs passed by value (kernel parameters, about 1 KiB). */
#include "kernels/cpu/rope_angle.h"
#include "kernels/cuda/common.cuh"

/* y = x * r * w, r = 1 / sqrtf(sum x^2 / D + eps); rstd[n] = r. */
static __global__ void __launch_bounds__(PT_THREADS)
    rmsnorm_forward_kernel(float *y, uint16_t *y16, float *rstd, const float *x, const float *w,
                           int D, float eps) {
  __shared__ float sh[32];
  const int64_t n = blockIdx.x;
  const float *xr = x + n * D;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) ss += xr[i] * xr[i];
  ss = pt_block_sum(ss, sh);
  const float r = 1.0f / sqrtf(ss / D + eps);
  for (int i = threadIdx.x; i < D; i += blockDim.x) pt_put(y, y16, n * D + i, xr[i] * r * w[i]);
  if (threadIdx.x == 0) rstd[n] = r;
}

/* dx (=|+=) r * (dy * w - x * r * sgx), sgx = sum(dy * w * x * r) / D. */
static __global__ void __launch_bounds__(PT_THREADS)
    rmsnorm_backward_input_kernel(float *dx, uint16_t *dx16, const float *dy, uint16_t *dy16,
                                  const float *x, const uint16_t *x16, const float *w,
                                  const float *rstd, int D, int acc, int round_dx) {
  __shared__ float sh[32];
  const int64_t n = blockIdx.x;
  const float *dyr = dy + n * D;
  float *dxr = dx + n * D;
  const float r = rstd[n];
  float sgx = 0.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    if (dy16) dy16[n * D + i] = pt_bf16_bits(dyr[i]);
    sgx += dyr[i] * w[i] * pt_get(x, x16, n * D + i) * r;
  }
  sgx = pt_block_sum(sgx, sh) / D;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    float v = r * (dyr[i] * w[i] - pt_get(x, x16, n * D + i) * r * sgx);
    pt_put_dx(dx, dx16, n * D + i, acc ? dxr[i] + v : v, round_dx);
  }
}

/* dw[c] += sum_n dy[n,c] * (x[n,c] * rstd[n]) over the rows of chunk blockIdx.y, as
 * layernorm_backward_weight_kernel: block (32, RMS_LANES) owns 32 columns, row lane ty adds rows
 * ty, ty + RMS_LANES, ... in order, the lanes' sums meet in a fixed tree; one chunk adds into
 * dw, several write part[blockIdx.y * D + c] for pt_chunk_sum_kernel. dy and x: floats, or
 * bf16 copies (pt_col_value). */
#define RMS_LANES 32
template <class TD, class TX>
static __global__ void __launch_bounds__(32 * RMS_LANES)
    rmsnorm_backward_weight_kernel(float *dw, float *part, const TD *dy, const TX *x,
                                   const float *rstd, int N, int D, int rows) {
  __shared__ float pw[RMS_LANES][33];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = blockIdx.x * 32 + tx;
  const int64_t r0 = (int64_t)blockIdx.y * rows, r1 = r0 + rows < N ? r0 + rows : N;
  float sw = 0.0f;
  if (c < D)
    for (int64_t n = r0 + ty; n < r1; n += RMS_LANES) {
      const int64_t o = n * D + c;
      sw += pt_col_value(dy, o) * (pt_col_value(x, o) * rstd[n]);
    }
  pw[ty][tx] = sw;
  __syncthreads();
  for (int h = RMS_LANES / 2; h > 0; h >>= 1) {
    if (ty < h) pw[ty][tx] += pw[ty + h][tx];
    __syncthreads();
  }
  if (ty == 0 && c < D) {
    if (!part)
      dw[c] += pw[0][tx];
    else
      part[(int64_t)blockIdx.y * D + c] = pw[0][tx];
  }
}

/* Element e = ((row * heads + h) * half + j) of the rotated pairs, row = b*T + t, heads the
 * H + KVH rotated heads (q's then k's, contiguous in the row). bits (given): each row's ld
 * elements' bits written there too, the rotated pairs' by their thread and, for e >= n, v's
 * (the rest of the row, as it is), element e - n of them, as n + nv threads. src (given): the
 * row's elements read from those bits instead (qkv's floats undefined), v's widened to qkv. */
static __global__ void __launch_bounds__(PT_THREADS)
    rope_kernel(float *qkv, uint16_t *bits, const uint16_t *src, int64_t n, int64_t nv, int T,
                int heads, int ld, int hd, pt_rope_freqs f, int dir, const int32_t *positions) {
  const int half = hd / 2;
  PT_GRID_LOOP(e, n + nv) {
    if (e >= n) {
      const int64_t v = e - n, vw = ld - (int64_t)heads * hd;
      const int64_t at = v / vw * ld + (int64_t)heads * hd + v % vw;
      if (src) qkv[at] = pt_bf16_float(src[at]);
      if (bits) bits[at] = src ? src[at] : pt_bf16_bits(qkv[at]);
      continue;
    }
    const int j = (int)(e % half);
    const int64_t rh = e / half, row = rh / heads;
    const int h = (int)(rh % heads), t = (int)(row % T);
    float c, s;
    rope_cos_sin(positions ? positions[row] : t, f.inv_freq[j], f.scale, &c, &s);
    if (dir < 0) s = -s;
    float *xh = qkv + row * ld + (int64_t)h * hd;
    const uint16_t *sh = src ? src + (xh - qkv) : NULL;
    const float x0 = sh ? pt_bf16_float(sh[j]) : xh[j];
    const float x1 = sh ? pt_bf16_float(sh[j + half]) : xh[j + half];
    const float y0 = x0 * c - x1 * s, y1 = x1 * c + x0 * s;
    xh[j] = y0;
    xh[j + half] = y1;
    if (bits) {
      uint16_t *bh = bits + (xh - qkv);
      bh[j] = pt_bf16_bits(y0);
      bh[j + half] = pt_bf16_bits(y1);
    }
  }
}

/* e = n*F + i: y = g / (1 + exp(-g)) * u; gu16 (given): gu's bits written there too. */
static __global__ void __launch_bounds__(PT_THREADS)
    swiglu_forward_kernel(float *y, uint16_t *y16, const float *gu, uint16_t *gu16, int64_t n,
                          int F) {
  PT_GRID_LOOP(e, n) {
    const int64_t r = e / F, i = e % F;
    const float g = gu[r * 2 * F + i], u = gu[r * 2 * F + F + i];
    if (gu16) gu16[r * 2 * F + i] = pt_bf16_bits(g), gu16[r * 2 * F + F + i] = pt_bf16_bits(u);
    pt_put(y, y16, e, g / (1.0f + pt_dev_expf(-g)) * u);
  }
}

/* gu16 (given): gu read from that copy; dgu16 (given): dgu written there as bf16 instead. */
static __global__ void __launch_bounds__(PT_THREADS)
    swiglu_backward_kernel(float *dgu, uint16_t *dgu16, const float *dy, const float *gu,
                           const uint16_t *gu16, int64_t n, int F) {
  PT_GRID_LOOP(e, n) {
    const int64_t r = e / F, i = e % F;
    const float g = pt_get(gu, gu16, r * 2 * F + i), u = pt_get(gu, gu16, r * 2 * F + F + i);
    const float d = dy[e];
    const float sg = 1.0f / (1.0f + pt_dev_expf(-g));
    pt_put(dgu, dgu16, r * 2 * F + i, d * u * (sg * (1.0f + g * (1.0f - sg))));
    pt_put(dgu, dgu16, r * 2 * F + F + i, d * (g * sg));
  }
}

extern "C" void cuda_op_rmsnorm_forward(gpu_ctx *g, float *y, uint16_t *y16, float *rstd,
                                        const float *x, const float *w, int N, int D, float eps) {
  if (N <= 0 || D <= 0) return;
  const double ND = (double)N * D;
  const pt_cost cost = pt_cost_of(0.0, 4.0 * ND, (y16 ? 6.0 : 8.0) * ND + 4.0 * (D + N));
  PT_LAUNCH_COSTED(rmsnorm_forward_kernel, cost, (unsigned)N, PT_THREADS, 0, g->stream, y, y16,
                   rstd, x, w, D, eps);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_rmsnorm_backward_input(gpu_ctx *g, float *dx, uint16_t *dx16,
                                               const float *dy, uint16_t *dy16, const float *x,
                                               const uint16_t *x16, const float *w,
                                               const float *rstd, int N, int D, int acc,
                                               int round_dx) {
  if (N <= 0 || D <= 0) return;
  const double ND = (double)N * D;
  const pt_cost cost = pt_cost_of(0.0, (9.0 + acc) * ND,
                                  4.0 * ((3 + acc) * ND + D + N) +
                                      pt_norm_copies_bytes(ND, dy16, x16, dx16));
  PT_LAUNCH_COSTED(rmsnorm_backward_input_kernel, cost, (unsigned)N, PT_THREADS, 0, g->stream, dx,
                   dx16, dy, dy16, x, x16, w, rstd, D, acc, round_dx);
  PT_LAUNCH_CHECK();
}

/* The weight gradient with dy and x read as TD and TX (floats, or bf16 copies at 2 bytes an
 * element: the ledger's row with ":bf16"). */
template <class TD, class TX>
static void rmsnorm_weight(gpu_ctx *g, float *dw, const TD *dy, const TX *x, const float *rstd,
                           int N, int D) {
  if (N <= 0 || D <= 0) return;
  const int chunks = pt_col_chunks(N, D, 1), rows = pt_col_chunk_rows(N, chunks);
  float *part = chunks == 1 ? NULL : g->col_scratch;
  dim3 block(32, RMS_LANES), grid((unsigned)(((int64_t)D + 31) / 32), (unsigned)chunks);
  const double ND = (double)N * D, width = (double)(sizeof(TD) + sizeof(TX));
  void (*kernel)(float *, float *, const TD *, const TX *, const float *, int, int, int) =
      rmsnorm_backward_weight_kernel<TD, TX>;
  gpu_cost_note(width < 8.0 ? "rmsnorm_backward_weight_kernel:bf16"
                            : "rmsnorm_backward_weight_kernel",
                0.0, 3.0 * ND, width * ND + 4.0 * N + pt_col_out_bytes(D, chunks, 1));
  PT_LAUNCH(kernel, grid, block, 0, g->stream, dw, part, dy, x, rstd, N, D, rows);
  PT_LAUNCH_CHECK();
  if (!part) return;
  PT_LAUNCH_COSTED(pt_chunk_sum_kernel, pt_cost_chunk_sum(chunks, D, 1), pt_grid(D), PT_THREADS, 0,
                   g->stream, dw, (float *)NULL, (const float *)part, chunks, D);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_rmsnorm_backward_weight(gpu_ctx *g, float *dw, const float *dy,
                                                const float *x, const float *rstd, int N, int D) {
  rmsnorm_weight(g, dw, dy, x, rstd, N, D);
}

extern "C" void cuda_op_rmsnorm_backward_weight_copies(gpu_ctx *g, float *dw, const float *dy,
                                                       const uint16_t *dy16, const float *x,
                                                       const uint16_t *x16, const float *rstd,
                                                       int N, int D) {
  if (dy16 && x16) rmsnorm_weight(g, dw, dy16, x16, rstd, N, D);
  else if (dy16) rmsnorm_weight(g, dw, dy16, x, rstd, N, D);
  else if (x16) rmsnorm_weight(g, dw, dy, x16, rstd, N, D);
  else rmsnorm_weight(g, dw, dy, x, rstd, N, D);
}

extern "C" void cuda_op_rope(gpu_ctx *g, float *qkv, uint16_t *bits, const uint16_t *src,
                             int B, int T, int H, int KVH, int hd, const pt_rope_freqs *f,
                             int dir, const int32_t *positions) {
  const int64_t n = (int64_t)B * T * (H + KVH) * (hd / 2);
  if (n <= 0) return;
  /* v's elements, for their bits or widened from src */
  const int64_t nv = bits || src ? (int64_t)B * T * KVH * hd : 0;
  /* each pair read and written in place, 6 operations (the angle's own math not counted);
   * the positions read once a row; with bits, 2 bytes more an element rotated; from src a pair
   * read as 4 bytes, not 8; v read (4, or 2 from src) and written (its bits 2; from src its
   * floats 4) */
  const double v_bytes = (src ? 6.0 : 4.0) + (bits ? 2.0 : 0.0);
  const double bytes = (src ? 12.0 : 16.0) * n + (positions ? 4.0 * B * T : 0.0) +
                       (bits ? 4.0 * n : 0.0) + v_bytes * nv;
  PT_LAUNCH_COSTED(rope_kernel, pt_cost_of(0.0, 6.0 * n, bytes), pt_grid(n + nv), PT_THREADS, 0,
                   g->stream, qkv, bits, src, n, nv, T, H + KVH, (H + 2 * KVH) * hd, hd, *f, dir,
                   positions);
  PT_LAUNCH_CHECK();
}

/* Bytes an element of y of the gated activations (swiglu, geglu: gu [N, 2F] in, y [N, F]
 * out): gu read (8), y written (4, or 2 as y16), gu's bits written (4, with gu16). */
double cuda_gated_forward_bytes(const uint16_t *y16, const uint16_t *gu16) {
  return 8.0 + (y16 ? 2.0 : 4.0) + (gu16 ? 4.0 : 0.0);
}

/* Their backward's: gu read (8, or 4 from gu16), dy read (4), dgu written (8, or 4 as dgu16). */
double cuda_gated_backward_bytes(const uint16_t *gu16, const uint16_t *dgu16) {
  return (gu16 ? 4.0 : 8.0) + 4.0 + (dgu16 ? 4.0 : 8.0);
}

extern "C" void cuda_op_swiglu_forward(gpu_ctx *g, float *y, uint16_t *y16, const float *gu,
                                       uint16_t *gu16, int N, int F) {
  const int64_t n = (int64_t)N * F;
  if (n <= 0) return;
  const pt_cost cost = pt_cost_of(0.0, 5.0 * n, cuda_gated_forward_bytes(y16, gu16) * n);
  PT_LAUNCH_COSTED(swiglu_forward_kernel, cost, pt_grid(n), PT_THREADS, 0, g->stream, y, y16, gu,
                   gu16, n, F);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_swiglu_backward(gpu_ctx *g, float *dgu, uint16_t *dgu16, const float *dy,
                                        const float *gu, const uint16_t *gu16, int N, int F) {
  const int64_t n = (int64_t)N * F;
  if (n <= 0) return;
  const pt_cost cost = pt_cost_of(0.0, 12.0 * n, cuda_gated_backward_bytes(gu16, dgu16) * n);
  PT_LAUNCH_COSTED(swiglu_backward_kernel, cost, pt_grid(n), PT_THREADS, 0, g->stream, dgu, dgu16,
                   dy, gu, gu16, n, F);
  PT_LAUNCH_CHECK();
}
