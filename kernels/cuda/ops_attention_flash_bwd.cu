/* Causal multi-head attention backward on the GPU, fused (attention_flash.cuh): the
 * probabilities are recomputed tile by tile from q, k and the forward's log-sum-exps,
 * P = exp(S scale - lse), never stored whole. Three launches, no atomics:
 *   1. D = rowsum(dO * O) per (b, h, t): a warp per row. D is parked in dq's first column of
 *      the head (dqkv[b, t, h*hd]), which nothing else reads until pass 3 writes dq, so the
 *      backward needs no scratch (cuda_op_attention_scratch_floats is 0).
 *   2. dK, dV: a block per (b, kv head g) and key tile kt walks the query heads of g in order
 *      (h = g*R .. g*R + R-1, R = H/KVH; one head when KVH == H), each over the query tiles
 *      kt .. last in order: dV_j = sum_h sum_t P_tj dO_t,  dK_j = sum_h sum_t dS_tj q_t,
 *      dS = P (dP - D) scale,  dP = dO v^T.
 *   3. dQ: a block per (b, h) and query tile qt walks the key tiles 0 .. qt in order:
 *      dQ_t = sum_j dS_tj k_j (it reads its rows' D from dq first, then overwrites them).
 * Each output element is summed by one thread in a fixed order (tiles, then rows or keys in
 * index order), so the result has the same bits on every run. The work above the diagonal is
 * never done: pass 2 starts at the diagonal tile, pass 3 stops there (and with a window, pass 2
 * skips the query tiles past the band, pass 3 starts at its first key tile).
 */
#include <math.h>

#include "kernels/cuda/attention_flash.cuh"

/* Pass 1: row = (b*H + h)*T + t; lanes take dims l, l + 32, ... then the warp butterfly. */
static __global__ void __launch_bounds__(PT_THREADS)
    flash_rowdot_kernel(float *dqkv, const float *dout, const float *o, int64_t rows, int T,
                        int d, int H, int ld) {
  const int64_t row = (int64_t)blockIdx.x * (PT_THREADS / 32) + (threadIdx.x >> 5);
  if (row >= rows) return; /* the whole warp leaves: row is the same in all its lanes */
  const int lane = threadIdx.x & 31, hd = d / H;
  const int64_t bh = row / T, t = row % T, b = bh / H, h = bh % H;
  const int64_t at = (b * T + t) * d + h * hd;
  float s = 0.0f;
  for (int i = lane; i < hd; i += 32) s += dout[at + i] * o[at + i];
  s = pt_warp_sum(s);
  if (lane == 0) dqkv[(b * T + t) * ld + h * hd] = s;
}

/* A query tile's rows of q, dO and their lse and D (D from dq's parking place). */
template <int BT, int LD>
__device__ __forceinline__ void flash_load_query_tile(float (*Qs)[LD], float (*dOs)[LD],
                                                      float *Ls, float *Ds, const float *q,
                                                      const float *dq, const float *dob,
                                                      const float *lse_bh, int t0, int T, int d,
                                                      int hd, int ld) {
  flash_load_tile<BT, LD>(Qs, q, ld, t0, T, hd);
  flash_load_tile<BT, LD>(dOs, dob, d, t0, T, hd);
  if (threadIdx.x < BT) {
    const int t = t0 + threadIdx.x;
    Ls[threadIdx.x] = t < T ? lse_bh[t] : 0.0f;
    Ds[threadIdx.x] = t < T ? dq[(int64_t)t * ld] : 0.0f;
  }
}

/* Pass 2: thread (j, il) sums dK and dV of key k0 + j, dims il + TPR*n. */
template <int BT, int MAXHD>
static __global__ void __launch_bounds__(PT_THREADS)
    flash_dkdv_kernel(float *dqkv, const float *dout, const float *qkv, const float *lse, int T,
                      int d, int H, int KVH, float scale, const int32_t *doc_start, int window,
                      float softcap) {
  typedef flash_cfg<BT, MAXHD> C;
  __shared__ float Qs[BT][C::LD], dOs[BT][C::LD], Ks[BT][C::LD], Vs[BT][C::LD];
  __shared__ float Ps[BT][BT + 1], dSs[BT][BT + 1], Ls[BT], Ds[BT];
  const int bg = blockIdx.x, b = bg / KVH, kvh = bg % KVH, hd = d / H, ld = d + 2 * KVH * hd;
  const int R = H / KVH; /* query heads per kv head */
  const int n_tiles = (T + BT - 1) / BT, kt = blockIdx.y, k0 = kt * BT; /* long columns first */
  const float *k = qkv + (int64_t)b * T * ld + d + kvh * hd, *v = k + KVH * hd;
  float *dk = dqkv + (int64_t)b * T * ld + d + kvh * hd, *dv = dk + KVH * hd;
  const int32_t *doc = doc_start ? doc_start + (int64_t)b * T : NULL;
  const int j = threadIdx.x / C::TPR, il = threadIdx.x % C::TPR;
  float ak[C::NC], av[C::NC];
  for (int n = 0; n < C::NC; n++) ak[n] = av[n] = 0.0f;
  flash_load_tile<BT, C::LD>(Ks, k, ld, k0, T, hd);
  flash_load_tile<BT, C::LD>(Vs, v, ld, k0, T, hd);
  for (int qi = 0; qi < n_tiles * R; qi++) { /* heads of the group in order, tiles in order */
    const int h = kvh * R + qi / n_tiles, qt = qi % n_tiles;
    if (qt < kt) continue; /* above the diagonal (uniform over the block) */
    const int t0 = qt * BT;
    if (!flash_tile_sees(doc, t0, k0, BT, window)) continue; /* past their documents, window */
    const float *q = qkv + (int64_t)b * T * ld + h * hd;
    const float *dq = dqkv + (int64_t)b * T * ld + h * hd;
    const float *dob = dout + (int64_t)b * T * d + h * hd;
    const float *lse_bh = lse + ((int64_t)b * H + h) * T;
    __syncthreads(); /* the previous tile's Qs, dOs, Ps, dSs are no longer read */
    flash_load_query_tile<BT, C::LD>(Qs, dOs, Ls, Ds, q, dq, dob, lse_bh, t0, T, d, hd, ld);
    __syncthreads();
    flash_dscores<BT, C::LD>(Ps, dSs, Qs, dOs, Ks, Vs, Ls, Ds, t0, k0, T, hd, scale, doc, window,
                             softcap);
    __syncthreads();
    for (int n = 0; n < C::NC; n++) {
      const int i = il + C::TPR * n;
      if (i >= hd) break;
      float sk = ak[n], sv = av[n];
      for (int t = 0; t < BT; t++) {
        sv += Ps[t][j] * dOs[t][i];
        sk += dSs[t][j] * Qs[t][i];
      }
      ak[n] = sk;
      av[n] = sv;
    }
  }
  if (k0 + j >= T) return;
  for (int n = 0; n < C::NC; n++) {
    const int i = il + C::TPR * n;
    if (i >= hd) break;
    dk[(int64_t)(k0 + j) * ld + i] = ak[n];
    dv[(int64_t)(k0 + j) * ld + i] = av[n];
  }
}

/* Pass 3: thread (r, il) sums dQ of query t0 + r, dims il + TPR*n. Runs after pass 2 on the
 * stream, so every block of pass 2 has read the D parked in dq before this overwrites it. */
template <int BT, int MAXHD>
static __global__ void __launch_bounds__(PT_THREADS)
    flash_dq_kernel(float *dqkv, const float *dout, const float *qkv, const float *lse, int T,
                    int d, int H, int KVH, float scale, const int32_t *doc_start, int window,
                    float softcap) {
  typedef flash_cfg<BT, MAXHD> C;
  __shared__ float Qs[BT][C::LD], dOs[BT][C::LD], Ks[BT][C::LD], Vs[BT][C::LD];
  __shared__ float Ps[BT][BT + 1], dSs[BT][BT + 1], Ls[BT], Ds[BT];
  const int bh = blockIdx.x, b = bh / H, h = bh % H, hd = d / H, ld = d + 2 * KVH * hd;
  const int n_tiles = (T + BT - 1) / BT, qt = n_tiles - 1 - (int)blockIdx.y; /* long rows first */
  const int t0 = qt * BT, kvh = h / (H / KVH);
  const float *q = qkv + (int64_t)b * T * ld + h * hd;
  const float *k = qkv + (int64_t)b * T * ld + d + kvh * hd, *v = k + KVH * hd;
  float *dq = dqkv + (int64_t)b * T * ld + h * hd;
  const float *dob = dout + (int64_t)b * T * d + h * hd, *lse_bh = lse + (int64_t)bh * T;
  const int32_t *doc = doc_start ? doc_start + (int64_t)b * T : NULL;
  const int r = threadIdx.x / C::TPR, il = threadIdx.x % C::TPR;
  float aq[C::NC];
  for (int n = 0; n < C::NC; n++) aq[n] = 0.0f;
  flash_load_query_tile<BT, C::LD>(Qs, dOs, Ls, Ds, q, dq, dob, lse_bh, t0, T, d, hd, ld);
  for (int kt = flash_first_key_tile(doc, t0, BT, window); kt <= qt; kt++) {
    const int k0 = kt * BT;
    __syncthreads(); /* the previous tile's Ks, Vs, dSs are no longer read */
    flash_load_tile<BT, C::LD>(Ks, k, ld, k0, T, hd);
    flash_load_tile<BT, C::LD>(Vs, v, ld, k0, T, hd);
    __syncthreads();
    flash_dscores<BT, C::LD>(Ps, dSs, Qs, dOs, Ks, Vs, Ls, Ds, t0, k0, T, hd, scale, doc, window,
                             softcap);
    __syncthreads();
    for (int n = 0; n < C::NC; n++) {
      const int i = il + C::TPR * n;
      if (i >= hd) break;
      float s = aq[n];
      for (int jj = 0; jj < BT; jj++) s += dSs[r][jj] * Ks[jj][i];
      aq[n] = s;
    }
  }
  if (t0 + r >= T) return;
  for (int n = 0; n < C::NC; n++) {
    const int i = il + C::TPR * n;
    if (i >= hd) break;
    dq[(int64_t)(t0 + r) * ld + i] = aq[n];
  }
}

template <int BT, int MAXHD>
static void flash_backward(gpu_ctx *g, float *dqkv, const float *dout, const float *qkv,
                           const float *lse, int B, int T, int d, int H, int KVH, float scale,
                           const int32_t *doc, int window, float softcap) {
  typedef void (*pass)(float *, const float *, const float *, const float *, int, int, int, int,
                       float, const int32_t *, int, float);
  pass dkdv = flash_dkdv_kernel<BT, MAXHD>, dq = flash_dq_kernel<BT, MAXHD>;
  /* scalar FMAs per score: S and dP recomputed in both passes (2 hd each), dV and dK (pass 2),
   * dQ (pass 3), ~6 for P and dS. Bytes: q, k, v, dO, lse and D read once; dk, dv (pass 2),
   * dq (pass 3) written. */
  const int hd = d / H;
  const double scores = flash_scores_visited(B, T, H, BT, window), rows = (double)B * T;
  const double kv = rows * 2.0 * KVH * hd, stats = 2.0 * rows * H;
  gpu_cost_note("flash_dkdv_kernel", 0.0, scores * (8.0 * hd + 6.0),
                4.0 * (2.0 * rows * d + 2.0 * kv + stats));
  PT_LAUNCH(dkdv, flash_grid(B, T, KVH, BT), PT_THREADS, 0, g->stream, dqkv, dout, qkv, lse, T,
            d, H, KVH, scale, doc, window, softcap);
  PT_LAUNCH_CHECK();
  gpu_cost_note("flash_dq_kernel", 0.0, scores * (6.0 * hd + 6.0),
                4.0 * (3.0 * rows * d + kv + stats));
  PT_LAUNCH(dq, flash_grid(B, T, H, BT), PT_THREADS, 0, g->stream, dqkv, dout, qkv, lse, T, d, H,
            KVH, scale, doc, window, softcap);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_attention_backward(gpu_ctx *g, float *dqkv, const float *dout,
                                           const float *qkv, const float *o, const float *lse,
                                           int B, int T, int d, int H, int KVH,
                                           const int32_t *doc_start,
                                           const pt_attention_opts *opts, float *scratch) {
  (void)scratch;
  if (B <= 0 || T <= 0 || d <= 0 || H <= 0) return;
  const int hd = d / H, w = opts ? opts->window : 0;
  const float scale = flash_prepare(d, H, KVH, opts), cap = opts ? opts->softcap : 0.0f;
  const int64_t rows = (int64_t)B * H * T, per_block = PT_THREADS / 32;
  /* D = rowsum(dO * O): dO and O read, one float a (row, head) written */
  const pt_cost cost = pt_cost_of(0.0, 2.0 * B * T * (double)d, 4.0 * (2.0 * B * T * d + rows));
  PT_LAUNCH_COSTED(flash_rowdot_kernel, cost, (unsigned)((rows + per_block - 1) / per_block),
                   PT_THREADS, 0, g->stream, dqkv, dout, o, rows, T, d, H, d + 2 * KVH * hd);
  PT_LAUNCH_CHECK();
  if (hd <= 64)
    flash_backward<32, 64>(g, dqkv, dout, qkv, lse, B, T, d, H, KVH, scale, doc_start, w, cap);
  else if (hd <= 128)
    flash_backward<16, 128>(g, dqkv, dout, qkv, lse, B, T, d, H, KVH, scale, doc_start, w, cap);
  else
    flash_backward<8, 256>(g, dqkv, dout, qkv, lse, B, T, d, H, KVH, scale, doc_start, w, cap);
}
