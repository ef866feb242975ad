#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/fastmath.h"
#include "kernels/cpu/ops.h"

/* The sgemm path's: a score block. The tile path's: a score block (rows padded to
 * attn_tile_tpad), a transposed k or v, and a sequence's qkv (and dout in backward) packed head
 * by head (attn_tile_pack_heads). */
int64_t op_attention_scratch_floats(int T, int d, int H, int KVH) {
  int hd = d / H;
  if (hd % ATTN_TILE_HD) return (int64_t)T * T;
  return (int64_t)(T + hd) * attn_tile_tpad(T) + (int64_t)T * (2 * d + 2 * KVH * hd);
}

/* The tile path's packed sequence after the score block and the transposed k or v. */
static float *packed_scratch(float *scratch, int T, int hd) {
  return scratch + (int64_t)(T + hd) * attn_tile_tpad(T);
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

/* The largest of s[lo..t] (NaNs skipped), in 16 lanes: GCC vectorises a max reduction only
 * under -ffinite-math-only, and the scalar chain took half the softmax's time. A maximum is
 * the same value in any order (a +0 or -0 found first gives the same s - mx). */
static float row_max(const float *s, int lo, int t) {
  float m[16], mx = -INFINITY;
  for (int l = 0; l < 16; l++) m[l] = -INFINITY;
  int j = lo;
  for (; j + 16 <= t + 1; j += 16)
    for (int l = 0; l < 16; l++) m[l] = s[j + l] > m[l] ? s[j + l] : m[l];
  for (int l = 0; l < 16; l++) mx = m[l] > mx ? m[l] : mx;
  for (; j <= t; j++) mx = s[j] > mx ? s[j] : mx;
  return mx;
}

/* Softmax of row t over the keys lo <= s <= t (lo: row_first_key) of scores*scale; the rest of
 * the row is 0. */
static void softmax_causal_row(float *p, const float *s, int lo, int t, int T, float scale) {
  float mx = row_max(s, lo, t);
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

/* q, k, v: the head's rows, ld apart; on the tile path packed (ld == hd). */
/* Group g's rows (columns g*hd.. of the rows; q heads, then k, then v) in a sequence's qkv,
 * strided, or packed head by head (attn_tile_pack_heads). */
static const float *head_rows(const float *base, int T, int hd, int packed, int g) {
  return base + (packed ? (int64_t)g * T * hd : (int64_t)g * hd);
}

static void attention_head_forward(float *o, int ldo, float *p, const float *q, const float *k,
                                   const float *v, int ld, int T, int hd, float scale,
                                   const int32_t *doc, const pt_attention_opts *a, float *s) {
  if (hd % ATTN_TILE_HD == 0) {
    int tpad = attn_tile_tpad(T);
    float *kt = s + (int64_t)T * tpad;
    attn_tile_transpose(kt, k, hd, T, hd);
    attn_tile_scores(s, tpad, q, hd, kt, T, hd);
    for (int t = 0; t < T; t++)
      probs_row(p + (int64_t)t * T, s + (int64_t)t * tpad, t, T, scale, doc, a);
    attn_tile_rows(o, ldo, p, T, v, hd, T, hd);
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
  int hd = d / H, ld = d + 2 * KVH * hd, R = H / KVH, tile = hd % ATTN_TILE_HD == 0;
  float scale = attention_scale(opts, hd);
  float *pk = packed_scratch(scratch, T, hd);
  for (int b = 0; b < B; b++) {
    const float *base = qkv + (int64_t)b * T * ld;
    int ldi = ld; /* the heads' rows: strided in qkv, or packed */
    if (tile) attn_tile_pack_heads(pk, base, ld, T, ld / hd, hd), base = pk, ldi = hd;
    for (int h = 0; h < H; h++) {
      const float *qh = head_rows(base, T, hd, tile, h), *kh = head_rows(base, T, hd, tile, H + h / R);
      attention_head_forward(o + (int64_t)b * T * d + h * hd, d, p + ((int64_t)b * H + h) * T * T,
                             qh, kh, head_rows(base, T, hd, tile, H + KVH + h / R), ldi, T, hd,
                             scale, doc_start ? doc_start + (int64_t)b * T : NULL, opts, scratch);
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
 * dV = P^T dO and dK = dS^T Q over rows [c0, T) (the rows that attend to those keys). dq, dk,
 * dv: rows ld apart; q, k, v rows ldi apart and dout's ldo (the tile path's packed: hd). */
static void attention_head_backward(float *dq, float *dk, float *dv, int ld, const float *dout,
                                    int ldo, const float *q, const float *k, const float *v,
                                    int ldi, const float *p, int T, int hd, float scale,
                                    const int32_t *doc, const pt_attention_opts *a, float *ds,
                                    float beta) {
  if (hd % ATTN_TILE_HD == 0) {
    int tpad = attn_tile_tpad(T);
    float *vt = ds + (int64_t)T * tpad;
    attn_tile_transpose(vt, v, hd, T, hd);
    attn_tile_scores(ds, tpad, dout, hd, vt, T, hd);
    softmax_backward_rows(ds, tpad, p, T, scale, doc, a, q, k, hd, hd);
    attn_tile_rows(dq, ld, ds, tpad, k, hd, T, hd);
    attn_tile_cols(dk, ld, ds, tpad, q, hd, T, hd, beta != 0.0f);
    attn_tile_cols(dv, ld, p, T, dout, hd, T, hd, beta != 0.0f);
    return;
  }
  for (int c0 = 0; c0 < T; c0 += ATTN_BLOCK) {
    int c1 = c0 + ATTN_BLOCK < T ? c0 + ATTN_BLOCK : T;
    gemm_beta(1, 0, c1 - c0, hd, T - c0, p + (int64_t)c0 * T + c0, T, dout + (int64_t)c0 * ldo,
              ldo, beta, dv + (int64_t)c0 * ld, ld);
  }
  for (int r0 = 0; r0 < T; r0 += ATTN_BLOCK) {
    int r1 = r0 + ATTN_BLOCK < T ? r0 + ATTN_BLOCK : T;
    gemm(0, 1, r1 - r0, r1, hd, dout + (int64_t)r0 * ldo, ldo, v, ldi, ds + (int64_t)r0 * T, T);
  }
  softmax_backward_rows(ds, T, p, T, scale, doc, a, q, k, ldi, hd);
  for (int r0 = 0; r0 < T; r0 += ATTN_BLOCK) {
    int r1 = r0 + ATTN_BLOCK < T ? r0 + ATTN_BLOCK : T;
    gemm(0, 0, r1 - r0, hd, r1, ds + (int64_t)r0 * T, T, k, ldi, dq + (int64_t)r0 * ld, ld);
  }
  for (int c0 = 0; c0 < T; c0 += ATTN_BLOCK) {
    int c1 = c0 + ATTN_BLOCK < T ? c0 + ATTN_BLOCK : T;
    gemm_beta(1, 0, c1 - c0, hd, T - c0, ds + (int64_t)c0 * T + c0, T, q + (int64_t)c0 * ldi,
              ldi, beta, dk + (int64_t)c0 * ld, ld);
  }
}

/* A kv head's dK, dV: its first query head writes them (beta 0), the others add in head order. */
void op_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *p,
                           int B, int T, int d, int H, int KVH, const int32_t *doc_start,
                           const pt_attention_opts *opts, float *scratch) {
  int hd = d / H, ld = d + 2 * KVH * hd, R = H / KVH, tile = hd % ATTN_TILE_HD == 0;
  float scale = attention_scale(opts, hd);
  float *pk = packed_scratch(scratch, T, hd), *pd = pk + (int64_t)T * ld;
  for (int b = 0; b < B; b++) {
    const float *base = qkv + (int64_t)b * T * ld, *dob = dout + (int64_t)b * T * d;
    float *dbase = dqkv + (int64_t)b * T * ld;
    int ldi = ld, ldo = d; /* the heads' rows: strided, or packed */
    if (tile) {
      attn_tile_pack_heads(pk, base, ld, T, ld / hd, hd), base = pk, ldi = hd;
      attn_tile_pack_heads(pd, dob, d, T, H, hd), dob = pd, ldo = hd;
    }
    for (int h = 0; h < H; h++) {
      int c = h * hd, kc = d + (h / R) * hd;
      attention_head_backward(dbase + c, dbase + kc, dbase + kc + KVH * hd, ld,
                              head_rows(dob, T, hd, tile, h), ldo, head_rows(base, T, hd, tile, h),
                              head_rows(base, T, hd, tile, H + h / R),
                              head_rows(base, T, hd, tile, H + KVH + h / R), ldi,
                              p + ((int64_t)b * H + h) * T * T, T, hd, scale,
                              doc_start ? doc_start + (int64_t)b * T : NULL, opts, scratch,
                              h % R ? 1.0f : 0.0f);
    }
  }
}
