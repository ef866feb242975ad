/* kernels/cuda/attention_flash.cuh: what the fused causal attention's forward
 * (ops_attention_flash_fwd.cu) and backward (ops_attention_flash_bwd.cu) share.
 *
 * The T x T square is cut in BT x BT tiles: query tile qt (rows t0 = qt*BT ..) against key tile
 * kt (keys k0 = kt*BT ..). Tiles with kt > qt lie entirely above the diagonal and are never
 * visited; on the diagonal tile the entries with key > query are masked (probability exactly
 * 0). With packed documents (doc_start, kernels.h) an entry is also masked when the key lies
 * before the query's document start, and tiles wholly before it are skipped (a skipped tile
 * would add exact zeros: skipping changes no bit). A window (pt_attention_opts.window) masks
 * keys at or before query - window the same way, and the tiles wholly before the band are
 * skipped likewise. Soft-capping (softcap > 0) maps each score s to z = cap tanh(s scale / cap),
 * whose exponent then takes scale 1 (flash_exp_scale). A block of PT_THREADS threads works on one
 * (b, h) and one tile row or column, with the tiles of q, k, v, dO it needs in shared memory,
 * each row padded to MAXHD + 1 floats (so a warp reading one column of a tile hits 32 different
 * banks).
 *
 * Per-row accumulators ([BT rows] x [hd dims]): thread tid owns row tid / TPR and the dims
 * tid % TPR + TPR*c, c < NC; the configurations below all give NC = 8 registers.
 *
 * Configurations by head dim (static shared memory under the 48 KiB every GPU grants):
 *   hd <= 64: BT = 32,  hd <= 128: BT = 16,  hd <= 256: BT = 8.
 * Larger head dims are refused (pt_fatal) before anything is queued.
 *
 * Layouts as in ops_cuda.h: qkv [B,T,d + 2*KVH*hd] (grouped-query: KVH kv heads; KVH == H is
 * GPT-2's [B,T,3d]) with query head h at column h*hd and its kv head g = h / (H/KVH) at columns
 * d + g*hd (k) and d + KVH*hd + g*hd (v); o, dout [B,T,d]; the log-sum-exps lse [B,H,T] (row
 * (b*H + h)*T + t).
 */
#ifndef PT_ATTENTION_FLASH_CUH
#define PT_ATTENTION_FLASH_CUH

#include <math.h>

#include "kernels/cuda/common.cuh"

#define FLASH_MAX_HD 256

template <int BT, int MAXHD> struct flash_cfg {
  static_assert(PT_THREADS % BT == 0 && BT <= 32, "a tile row is handled by one warp");
  enum { TPR = PT_THREADS / BT, NC = MAXHD / TPR, LD = MAXHD + 1 };
  static_assert(NC * TPR == MAXHD, "the dims of a row split evenly over its threads");
};

/* Refuses head dims above FLASH_MAX_HD, before anything is queued. */
static inline void flash_check_head_dim(int d, int H) {
  if (d / H > FLASH_MAX_HD)
    pt_fatal("attention on the GPU: head dim %d (dim %d / heads %d) is above the %d the fused "
             "kernels support; use more heads", d / H, d, H, FLASH_MAX_HD);
}

/* Refuses a kv head count that does not divide the heads (grouped-query attention). */
static inline void flash_check_kv_heads(int H, int KVH) {
  if (KVH <= 0 || H % KVH != 0)
    pt_fatal("attention on the GPU: kv heads %d do not divide heads %d", KVH, H);
}

/* What forward and backward check and compute before launching: the shapes the kernels take,
 * and the scores' scale (opts', else 1/sqrt(head dim)). */
static inline float flash_prepare(int d, int H, int KVH, const pt_attention_opts *opts) {
  flash_check_head_dim(d, H);
  flash_check_kv_heads(H, KVH);
  return opts && opts->scale > 0.0f ? opts->scale : 1.0f / sqrtf((float)(d / H));
}

/* The scale inside the exponent: the raw scores' scale, or 1 for soft-capped ones (z already
 * holds it). */
__host__ __device__ __forceinline__ float flash_exp_scale(float scale, float softcap) {
  return softcap > 0.0f ? 1.0f : scale;
}

/* The soft-capped score z of a raw score s (s itself without soft-capping). */
__device__ __forceinline__ float flash_softcap(float s, float scale, float softcap) {
  return softcap > 0.0f ? tanhf(s * scale / softcap) * softcap : s;
}

/* The grid of a pass over tiles of BT rows: x the B*H heads, y the tiles. */
static inline dim3 flash_grid(int B, int T, int H, int BT) {
  const int64_t tiles = (T + BT - 1) / BT;
  if ((int64_t)B * H > 2147483647 || tiles > 65535)
    pt_fatal("attention on the GPU: B*heads = %lld or %lld tiles of %d rows is beyond a launch "
             "grid", (long long)B * H, (long long)tiles, BT);
  return dim3((unsigned)(B * H), (unsigned)tiles);
}

/* The scores a pass over heads x causal tiles computes: B H n(n+1)/2 tiles of BT x BT, n the
 * tiles of T (the diagonal tiles whole; a document mask skips tiles, not counted), fewer in a
 * window: query tile qt from the tile of its first row's first key. The kernels' scalar FMAs
 * (2 FLOPs) per score and head dim are counted on it, for the ledger. */
static inline double flash_scores_visited(int B, int T, int H, int BT, int window) {
  const int n = (T + BT - 1) / BT;
  double tiles = 0.0;
  for (int qt = 0; qt < n; qt++) {
    const int first = window > 0 && qt * BT - window + 1 > 0 ? (qt * BT - window + 1) / BT : 0;
    tiles += qt - first + 1;
  }
  return (double)B * H * tiles * BT * BT;
}

/* Rows r0 .. r0 + BT - 1 of a [*, ld] matrix, columns col .. col + hd - 1, into tile[BT][LD];
 * rows at or past T read as 0 (so a partial tile multiplies zeros). Every thread of the block
 * calls it; the caller synchronises before reading the tile. */
template <int BT, int LD>
__device__ __forceinline__ void flash_load_tile(float (*tile)[LD], const float *x, int64_t ld,
                                                int r0, int T, int hd) {
  for (int e = threadIdx.x; e < BT * hd; e += PT_THREADS) {
    const int r = e / hd, i = e % hd;
    tile[r][i] = r0 + r < T ? x[(int64_t)(r0 + r) * ld + i] : 0.0f;
  }
}

/* The rows of a score tile one thread computes: thread tid takes key j = tid % BT and query
 * rows tid / BT + RS*k, k < R (for BT = 32: 4 rows, so a k value read from shared memory
 * serves 4 products); with BT = 8 only the first BT*BT threads have one. */
template <int BT> struct flash_rows {
  enum { RS = PT_THREADS / BT, R = BT > RS ? BT / RS : 1 };
};

/* S = q . k (unscaled, as the CPU's GEMM gives it) of every entry of the tile, each a sum over
 * i in order, into Ps. Every thread calls it. */
template <int BT, int LD>
__device__ __forceinline__ void flash_scores(float (*Ps)[BT + 1], const float (*Qs)[LD],
                                             const float (*Ks)[LD], int hd) {
  typedef flash_rows<BT> W;
  const int j = threadIdx.x % BT, tb = threadIdx.x / BT;
  if (tb >= BT) return;
  float s[W::R];
  for (int k = 0; k < W::R; k++) s[k] = 0.0f;
  for (int i = 0; i < hd; i++) {
    const float kj = Ks[j][i];
    for (int k = 0; k < W::R; k++) s[k] += Qs[tb + W::RS * k][i] * kj;
  }
  for (int k = 0; k < W::R; k++) Ps[tb + W::RS * k][j] = s[k];
}

/* Query t0 + t may see key k0 + j: causal, a real row, (packed documents: doc is the
 * sequence's doc_start row, NULL without) a key of the query's document, and within the window
 * (0: none). */
__device__ __forceinline__ int flash_visible(int t0, int t, int k0, int j, int T,
                                             const int32_t *doc, int window) {
  return t0 + t < T && k0 + j <= t0 + t && (!doc || k0 + j >= doc[t0 + t]) &&
         (window <= 0 || k0 + j > t0 + t - window);
}

/* The first key tile a query tile starting at row t0 sees: doc_start grows along a row and the
 * window's first key too, so its first row's bounds them all (0 without either). */
__device__ __forceinline__ int flash_first_key_tile(const int32_t *doc, int t0, int BT,
                                                    int window) {
  const int d0 = doc ? doc[t0] / BT : 0;
  const int w0 = window > 0 && t0 - window + 1 > 0 ? (t0 - window + 1) / BT : 0;
  return d0 > w0 ? d0 : w0;
}

/* Whether a query tile starting at row t0 (at or below the key tile's diagonal) sees any key of
 * the tile [k0, k0 + BT): its first row's document start (the smallest) is at most the tile's
 * last key, and so is its first row's window start. */
__device__ __forceinline__ int flash_tile_sees(const int32_t *doc, int t0, int k0, int BT,
                                               int window) {
  return (!doc || doc[t0] <= k0 + BT - 1) && (window <= 0 || t0 - window < k0 + BT - 1);
}

/* The backward's tile: recomputed probabilities P = exp(S*scale - lse) and dS = P (dP - D)
 * scale (dP = dO . v, D = rowsum(dO * O) of the query row), both 0 where masked; soft-capped:
 * P = exp(z - lse) and dS also times dz/ds / scale = 1 - tanh^2. Reads Qs, dOs
 * (query rows), Ks, Vs (key rows), Ls, Ds (per query row); writes Ps, dSs. Rows per thread as in
 * flash_scores. Every thread calls it. */
template <int BT, int LD>
__device__ __forceinline__ void flash_dscores(float (*Ps)[BT + 1], float (*dSs)[BT + 1],
                                              const float (*Qs)[LD], const float (*dOs)[LD],
                                              const float (*Ks)[LD], const float (*Vs)[LD],
                                              const float *Ls, const float *Ds, int t0, int k0,
                                              int T, int hd, float scale, const int32_t *doc,
                                              int window, float softcap) {
  typedef flash_rows<BT> W;
  const int j = threadIdx.x % BT, tb = threadIdx.x / BT;
  if (tb >= BT) return;
  float s[W::R], dp[W::R];
  for (int k = 0; k < W::R; k++) s[k] = dp[k] = 0.0f;
  for (int i = 0; i < hd; i++) {
    const float kj = Ks[j][i], vj = Vs[j][i];
    for (int k = 0; k < W::R; k++) {
      s[k] += Qs[tb + W::RS * k][i] * kj;
      dp[k] += dOs[tb + W::RS * k][i] * vj;
    }
  }
  for (int k = 0; k < W::R; k++) {
    const int t = tb + W::RS * k;
    float p = 0.0f, ds = 0.0f;
    if (flash_visible(t0, t, k0, j, T, doc, window)) {
      if (softcap > 0.0f) {
        const float th = tanhf(s[k] * scale / softcap);
        p = pt_dev_expf(th * softcap - Ls[t]);
        ds = p * (dp[k] - Ds[t]) * (1.0f - th * th) * scale;
      } else {
        p = pt_dev_expf(s[k] * scale - Ls[t]);
        ds = p * (dp[k] - Ds[t]) * scale;
      }
    }
    Ps[t][j] = p;
    dSs[t][j] = ds;
  }
}

#endif
