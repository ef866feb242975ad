/* Causal multi-head attention forward on the GPU, fused (attention_flash.cuh): one block per
 * (b, h) and query tile walks the key tiles 0 .. qt in order with an online softmax, so the
 * T x T scores never reach device memory. What it saves for backward is the log-sum-exp of
 * each row, lse[B,H,T] (cuda_op_attention_saved_floats); o is written directly.
 *
 * Per query row t, after key tiles 0 .. kt (m the running max of the raw scores s, scaled only
 * inside the exponent as the CPU's softmax_causal_row does):
 *   m' = max(m, max_j s_j);  c = exp((m - m') scale) (0 on the first tile);
 *   e_j = exp((s_j - m') scale);  l' = l c + sum_j e_j;  acc' = acc c + sum_j e_j v_j
 * and at the end o = acc (1/l), lse = m scale + log(l). exp is pt_dev_expf, the CPU's.
 * Soft-capped (attention_flash.cuh), s is the capped z and the exponents' scale is 1.
 * Every sum runs in a fixed order (keys in index order, tiles in order; the row's l as a warp
 * butterfly), so the result has the same bits on every run.
 */
#include <math.h>

#include "kernels/cuda/attention_flash.cuh"

/* Folds the scores of one key tile (in Ps) into each row's running max and sum: warp w takes
 * rows w, w + 8, ..., lane j key j. Ps becomes the tile's e_j (0 where masked); row_c gets the
 * rescale c of the row's earlier terms. */
template <int BT>
__device__ __forceinline__ void flash_online_softmax(float (*Ps)[BT + 1], float *row_m,
                                                     float *row_l, float *row_c, int t0, int k0,
                                                     int T, float scale, const int32_t *doc,
                                                     int window, float softcap) {
  const int lane = threadIdx.x & 31, nw = PT_THREADS / 32;
  const float es = flash_exp_scale(scale, softcap);
  for (int t = threadIdx.x >> 5; t < BT; t += nw) {
    const int vis = lane < BT && flash_visible(t0, t, k0, lane, T, doc, window);
    const float s = vis ? flash_softcap(Ps[t][lane], scale, softcap) : pt_dev_neg_inf();
    const float m_old = row_m[t], l_old = row_l[t]; /* read before the shuffles: lane 0 writes */
    const float m_new = fmaxf(m_old, pt_warp_max(s));
    const float e = vis ? pt_dev_expf((s - m_new) * es) : 0.0f;
    const float sum = pt_warp_sum(e);
    const float c = m_old == pt_dev_neg_inf() ? 0.0f : pt_dev_expf((m_old - m_new) * es);
    if (lane < BT) Ps[t][lane] = e;
    if (lane == 0) {
      row_m[t] = m_new;
      row_l[t] = l_old * c + sum;
      row_c[t] = c;
    }
  }
}

template <int BT, int MAXHD>
static __global__ void __launch_bounds__(PT_THREADS)
    flash_forward_kernel(float *o, float *lse, const float *qkv, int T, int d, int H, int KVH,
                         float scale, const int32_t *doc_start, int window, float softcap) {
  typedef flash_cfg<BT, MAXHD> C;
  __shared__ float Qs[BT][C::LD], Ks[BT][C::LD], Vs[BT][C::LD], Ps[BT][BT + 1];
  __shared__ float row_m[BT], row_l[BT], row_c[BT];
  const int bh = blockIdx.x, b = bh / H, h = bh % H, hd = d / H, ld = d + 2 * KVH * hd;
  const int n_tiles = (T + BT - 1) / BT, qt = n_tiles - 1 - (int)blockIdx.y; /* long rows first */
  const int t0 = qt * BT, kvh = h / (H / KVH);
  const float *q = qkv + (int64_t)b * T * ld + h * hd;
  const float *k = qkv + (int64_t)b * T * ld + d + kvh * hd, *v = k + KVH * hd;
  const int32_t *doc = doc_start ? doc_start + (int64_t)b * T : NULL;
  const int r = threadIdx.x / C::TPR, il = threadIdx.x % C::TPR;
  float acc[C::NC];
  for (int c = 0; c < C::NC; c++) acc[c] = 0.0f;
  flash_load_tile<BT, C::LD>(Qs, q, ld, t0, T, hd);
  if (threadIdx.x < BT) {
    row_m[threadIdx.x] = pt_dev_neg_inf();
    row_l[threadIdx.x] = 0.0f;
  }
  /* key tiles above the diagonal, or before the tile's first document or window: never visited */
  for (int kt = flash_first_key_tile(doc, t0, BT, window); kt <= qt; kt++) {
    const int k0 = kt * BT;
    __syncthreads(); /* the previous tile's Ks, Vs, Ps are no longer read */
    flash_load_tile<BT, C::LD>(Ks, k, ld, k0, T, hd);
    flash_load_tile<BT, C::LD>(Vs, v, ld, k0, T, hd);
    __syncthreads();
    flash_scores<BT, C::LD>(Ps, Qs, Ks, hd);
    __syncthreads();
    flash_online_softmax<BT>(Ps, row_m, row_l, row_c, t0, k0, T, scale, doc, window, softcap);
    __syncthreads();
    const float c = row_c[r];
    for (int n = 0; n < C::NC; n++) {
      const int i = il + C::TPR * n;
      if (i >= hd) break;
      float a = acc[n] * c;
      for (int j = 0; j < BT; j++) a += Ps[r][j] * Vs[j][i];
      acc[n] = a;
    }
  }
  if (t0 + r < T) {
    const float inv = 1.0f / row_l[r];
    float *orow = o + ((int64_t)b * T + t0 + r) * d + h * hd;
    for (int n = 0; n < C::NC; n++) {
      const int i = il + C::TPR * n;
      if (i >= hd) break;
      orow[i] = acc[n] * inv;
    }
  }
  if (threadIdx.x < BT && t0 + (int)threadIdx.x < T)
    lse[(int64_t)bh * T + t0 + threadIdx.x] =
        row_m[threadIdx.x] * flash_exp_scale(scale, softcap) + logf(row_l[threadIdx.x]);
}

template <int BT, int MAXHD>
static void flash_forward(gpu_ctx *g, float *o, float *lse, const float *qkv, int B, int T, int d,
                          int H, int KVH, float scale, const int32_t *doc_start, int window,
                          float softcap) {
  void (*kernel)(float *, float *, const float *, int, int, int, int, float, const int32_t *, int,
                 float) = flash_forward_kernel<BT, MAXHD>;
  /* scalar FMAs: S = q k^T and o += P v (2 hd FLOPs each per score) and ~5 for the online
   * softmax (soft-capping's tanh not counted); q, k, v read once, o and lse written */
  const int hd = d / H;
  const double scores = flash_scores_visited(B, T, H, BT, window), rows = (double)B * T;
  gpu_cost_note("flash_forward_kernel", 0.0, scores * (4.0 * hd + 5.0),
                4.0 * (rows * (d + 2.0 * KVH * hd) + rows * d + rows * H));
  PT_LAUNCH(kernel, flash_grid(B, T, H, BT), PT_THREADS, 0, g->stream, o, lse, qkv, T, d, H,
            KVH, scale, doc_start, window, softcap);
  PT_LAUNCH_CHECK();
}

extern "C" int64_t cuda_op_attention_saved_floats(int B, int T, int d, int H, int KVH) {
  (void)d, (void)KVH;
  return (int64_t)B * H * T;
}

extern "C" int64_t cuda_op_attention_scratch_floats(int B, int T, int d, int H, int KVH) {
  (void)B, (void)T, (void)d, (void)H, (void)KVH;
  return 0; /* backward parks D in dq until it writes dq (ops_attention_flash_bwd.cu) */
}

extern "C" void cuda_op_attention_forward(gpu_ctx *g, float *o, float *lse, const float *qkv,
                                          int B, int T, int d, int H, int KVH,
                                          const int32_t *doc_start,
                                          const pt_attention_opts *opts, float *scratch) {
  (void)scratch;
  if (B <= 0 || T <= 0 || d <= 0 || H <= 0) return;
  const int hd = d / H, w = opts ? opts->window : 0;
  const float scale = flash_prepare(d, H, KVH, opts), cap = opts ? opts->softcap : 0.0f;
  if (hd <= 64)
    flash_forward<32, 64>(g, o, lse, qkv, B, T, d, H, KVH, scale, doc_start, w, cap);
  else if (hd <= 128)
    flash_forward<16, 128>(g, o, lse, qkv, B, T, d, H, KVH, scale, doc_start, w, cap);
  else
    flash_forward<8, 256>(g, o, lse, qkv, B, T, d, H, KVH, scale, doc_start, w, cap);
}
