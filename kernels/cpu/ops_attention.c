#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/fastmath.h"
#include "kernels/cpu/ops.h"

/* The sgemm path's: a score block. The tile path's: a score block (rows padded to
 * attn_tile_tpad), a transposed k or v, and contiguous copies of the head's q, k, v (and dout in
 * backward). */
int64_t op_attention_scratch_floats(int T, int hd) {
  if (hd % ATTN_TILE_HD) return (int64_t)T * T;
  return (int64_t)(T + hd) * attn_tile_tpad(T) + 4 * (int64_t)T * hd;
}

/* The first key query t sees: its document's start (0 without documents) or its window's. */
static int row_first_key(const int32_t *doc, const pt_attention_opts *a, int t) {
  int lo = doc ? doc[t] : 0, w = pt_attention_first_key(a, t);
  return w > lo ? w : lo;
}

/* The scores' scale: opts' or 1/sqrt(hd). */
static float attention_scale(const pt_attention_opts *a, int hd) {
  return a && a->scale > 0.0f ? a->scale : 1.0f / sqrtf((float)hd);
}

/* Soft-capping (kernels.h) of keys lo..t of a score row in place: s = cap tanh(s scale / cap),
 * as transformers' Gemma 2 computes it; the softmax then takes them with scale 1. */
static void softcap_row(float *s, int lo, int t, float scale, float cap) {
  for (int j = lo; j <= t; j++) s[j] = tanhf(s[j] * scale / cap) * cap;
}

/* Softmax of row t over the keys lo <= s <= t (lo: row_first_key) of scores*scale; the rest of
 * the row is 0. */
static void softmax_causal_row(float *p, const float *s, int lo, int t, int T, float scale) {
  float mx = -INFINITY;
  for (int j = lo; j <= t; j++) mx = s[j] > mx ? s[j] : mx;
  float sum = 0.0f;
  for (int j = lo; j <= t; j++) {
    float e = pt_expf((s[j] - mx) * scale);
    p[j] = e;
    sum += e;
  }
  float inv = 1.0f / sum;
  for (int j = 0; j < lo; j++) p[j] = 0.0f;
  for (int j = lo; j <= t; j++) p[j] *= inv;
  for (int j = t + 1; j < T; j++) p[j] = 0.0f;
}

/* Row t of the probabilities from its raw scores s (soft-capped in place when opts say). */
static void probs_row(float *p, float *s, int t, int T, float scale, const int32_t *doc,
                      const pt_attention_opts *a) {
  int lo = row_first_key(doc, a, t);
  if (a && a->softcap > 0.0f) {
    softcap_row(s, lo, t, scale, a->softcap);
    scale = 1.0f;
  }
  softmax_causal_row(p, s, lo, t, T, scale);
}

/* Row blocks of the causal square: block [r0, r1) only needs key columns [0, r1), so GEMMs stop
 * at the diagonal and skip about a quarter of the work at T = 128 (more for longer T). */
#define ATTN_BLOCK 64

/* C = A B (beta 0) or C += A B (beta 1), A and B optionally transposed. */
static void gemm_beta(int ta, int tb, int M, int N, int K, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
              K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

static void gemm(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                 int ldb, float *C, int ldc) {
  gemm_beta(ta, tb, M, N, K, A, lda, B, ldb, 0.0f, C, ldc);
}

static void attention_head_forward(float *o, int ldo, float *p, const float *q, const float *k,
                                   const float *v, int ld, int T, int hd, float scale,
                                   const int32_t *doc, const pt_attention_opts *a, float *s) {
  if (hd % ATTN_TILE_HD == 0) {
    int tpad = attn_tile_tpad(T);
    float *kt = s + (int64_t)T * tpad, *qc = kt + (int64_t)hd * tpad, *kc = qc + (int64_t)T * hd;
    float *vc = kc + (int64_t)T * hd;
    attn_tile_pack(qc, q, ld, T, hd);
    attn_tile_pack(kc, k, ld, T, hd);
    attn_tile_pack(vc, v, ld, T, hd);
    attn_tile_transpose(kt, kc, hd, T, hd);
    attn_tile_scores(s, tpad, qc, hd, kt, T, hd);
    for (int t = 0; t < T; t++)
      probs_row(p + (int64_t)t * T, s + (int64_t)t * tpad, t, T, scale, doc, a);
    attn_tile_rows(o, ldo, p, T, vc, hd, T, hd);
    return;
  }
  for (int r0 = 0; r0 < T; r0 += ATTN_BLOCK) {
    int r1 = r0 + ATTN_BLOCK < T ? r0 + ATTN_BLOCK : T;
    gemm(0, 1, r1 - r0, r1, hd, q + (int64_t)r0 * ld, ld, k, ld, s + (int64_t)r0 * T, T);
  }
  for (int t = 0; t < T; t++)
    probs_row(p + (int64_t)t * T, s + (int64_t)t * T, t, T, scale, doc, a);
  for (int r0 = 0; r0 < T; r0 += ATTN_BLOCK) {
    int r1 = r0 + ATTN_BLOCK < T ? r0 + ATTN_BLOCK : T;
    gemm(0, 0, r1 - r0, hd, r1, p + (int64_t)r0 * T, T, v, ld, o + (int64_t)r0 * ldo, ldo);
  }
}

void op_attention_forward(float *o, float *p, const float *qkv, int B, int T, int d, int H,
                          int KVH, const int32_t *doc_start, const pt_attention_opts *opts,
                          float *scratch) {
  int hd = d / H, ld = d + 2 * KVH * hd, R = H / KVH;
  float scale = attention_scale(opts, hd);
  for (int b = 0; b < B; b++) {
    const float *base = qkv + (int64_t)b * T * ld;
    for (int h = 0; h < H; h++) {
      const float *kh = base + d + (h / R) * hd;
      attention_head_forward(o + (int64_t)b * T * d + h * hd, d, p + ((int64_t)b * H + h) * T * T,
                             base + h * hd, kh, kh + KVH * hd, ld, T, hd, scale,
                             doc_start ? doc_start + (int64_t)b * T : NULL, opts, scratch);
    }
  }
}

/* Soft-capping's derivative at score (t, j), 1 - tanh^2: the score recomputed from the head's
 * q and k rows (ld apart), a dot product in index order, since only P is saved. */
static float softcap_slope(const float *q, const float *k, int ld, int hd, int t, int j,
                           float scale, float cap) {
  const float *qr = q + (int64_t)t * ld, *kr = k + (int64_t)j * ld;
  float s = 0.0f;
  for (int i = 0; i < hd; i++) s += qr[i] * kr[i];
  float th = tanhf(s * scale / cap);
  return 1.0f - th * th;
}

/* dS = P * (dP - rowsum(P * dP)) * scale, in place over dP (rows ldd apart); row t over keys
 * row_first_key .. t; soft-capped scores also times softcap_slope (q, k: the head's rows, ld
 * apart, hd dims; read only then). */
static void softmax_backward_rows(float *dp, int ldd, const float *p, int T, float scale,
                                  const int32_t *doc, const pt_attention_opts *a, const float *q,
                                  const float *k, int ld, int hd) {
  for (int t = 0; t < T; t++) {
    float *dr = dp + (int64_t)t * ldd;
    const float *pr = p + (int64_t)t * T;
    int lo = row_first_key(doc, a, t);
    float dot = 0.0f;
    for (int j = lo; j <= t; j++) dot += pr[j] * dr[j];
    for (int j = 0; j < lo; j++) dr[j] = 0.0f;
    if (a && a->softcap > 0.0f)
      for (int j = lo; j <= t; j++)
        dr[j] = pr[j] * (dr[j] - dot) * softcap_slope(q, k, ld, hd, t, j, scale, a->softcap) *
                scale;
    else
      for (int j = lo; j <= t; j++) dr[j] = pr[j] * (dr[j] - dot) * scale;
    for (int j = t + 1; j < T; j++) dr[j] = 0.0f;
  }
}

/* One head: row blocks give dP = dO V^T and dQ = dS K over columns [0, r1); column blocks give
 * dV = P^T dO and dK = dS^T Q over rows [c0, T) (the rows that attend to those keys). */
static void attention_head_backward(float *dq, float *dk, float *dv, int ld, const float *dout,
                                    int ldo, const float *q, const float *k, const float *v,
                                    const float *p, int T, int hd, float scale,
                                    const int32_t *doc, const pt_attention_opts *a, float *ds,
                                    float beta) {
  if (hd % ATTN_TILE_HD == 0) {
    int tpad = attn_tile_tpad(T);
    float *vt = ds + (int64_t)T * tpad, *kc = vt + (int64_t)hd * tpad, *qc = kc + (int64_t)T * hd;
    float *dc = qc + (int64_t)T * hd, *vc = dc + (int64_t)T * hd;
    attn_tile_pack(kc, k, ld, T, hd);
    attn_tile_pack(qc, q, ld, T, hd);
    attn_tile_pack(dc, dout, ldo, T, hd);
    attn_tile_pack(vc, v, ld, T, hd);
    attn_tile_transpose(vt, vc, hd, T, hd);
    attn_tile_scores(ds, tpad, dc, hd, vt, T, hd);
    softmax_backward_rows(ds, tpad, p, T, scale, doc, a, qc, kc, hd, hd);
    attn_tile_rows(dq, ld, ds, tpad, kc, hd, T, hd);
    attn_tile_cols(dk, ld, ds, tpad, qc, hd, T, hd, beta != 0.0f);
    attn_tile_cols(dv, ld, p, T, dc, hd, T, hd, beta != 0.0f);
    return;
  }
  for (int c0 = 0; c0 < T; c0 += ATTN_BLOCK) {
    int c1 = c0 + ATTN_BLOCK < T ? c0 + ATTN_BLOCK : T;
    gemm_beta(1, 0, c1 - c0, hd, T - c0, p + (int64_t)c0 * T + c0, T, dout + (int64_t)c0 * ldo,
              ldo, beta, dv + (int64_t)c0 * ld, ld);
  }
  for (int r0 = 0; r0 < T; r0 += ATTN_BLOCK) {
    int r1 = r0 + ATTN_BLOCK < T ? r0 + ATTN_BLOCK : T;
    gemm(0, 1, r1 - r0, r1, hd, dout + (int64_t)r0 * ldo, ldo, v, ld, ds + (int64_t)r0 * T, T);
  }
  softmax_backward_rows(ds, T, p, T, scale, doc, a, q, k, ld, hd);
  for (int r0 = 0; r0 < T; r0 += ATTN_BLOCK) {
    int r1 = r0 + ATTN_BLOCK < T ? r0 + ATTN_BLOCK : T;
    gemm(0, 0, r1 - r0, hd, r1, ds + (int64_t)r0 * T, T, k, ld, dq + (int64_t)r0 * ld, ld);
  }
  for (int c0 = 0; c0 < T; c0 += ATTN_BLOCK) {
    int c1 = c0 + ATTN_BLOCK < T ? c0 + ATTN_BLOCK : T;
    gemm_beta(1, 0, c1 - c0, hd, T - c0, ds + (int64_t)c0 * T + c0, T, q + (int64_t)c0 * ld, ld,
              beta, dk + (int64_t)c0 * ld, ld);
  }
}

/* A kv head's dK, dV: its first query head writes them (beta 0), the others add in head order. */
void op_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *p,
                           int B, int T, int d, int H, int KVH, const int32_t *doc_start,
                           const pt_attention_opts *opts, float *scratch) {
  int hd = d / H, ld = d + 2 * KVH * hd, R = H / KVH;
  float scale = attention_scale(opts, hd);
  for (int b = 0; b < B; b++) {
    const float *base = qkv + (int64_t)b * T * ld;
    float *dbase = dqkv + (int64_t)b * T * ld;
    for (int h = 0; h < H; h++) {
      int c = h * hd, kc = d + (h / R) * hd;
      attention_head_backward(dbase + c, dbase + kc, dbase + kc + KVH * hd, ld,
                              dout + (int64_t)b * T * d + c, d, base + c, base + kc,
                              base + kc + KVH * hd, p + ((int64_t)b * H + h) * T * T, T, hd,
                              scale, doc_start ? doc_start + (int64_t)b * T : NULL, opts, scratch,
                              h % R ? 1.0f : 0.0f);
    }
  }
}
