/* The attention head's products as register tiles (attention_tile.h). GCC's vector extension
 * gives 16-float vectors whatever the target (AVX-512: one register; narrower ISAs: several),
 * and each element of a sum adds its terms in index order, so the order is set by the sizes. */
#include "kernels/cpu/attention_tile.h"

typedef float v16 __attribute__((vector_size(64)));
/* The same vectors at any float address; macros, not functions, since a 64-byte vector passed
 * or returned by value has another ABI on narrower targets (GCC's -Wpsabi). */
typedef float v16_any __attribute__((vector_size(64), aligned(4), may_alias));
#define VLOAD(p) ((v16)*(const v16_any *)(p))
#define VSTORE(p, v) (*(v16_any *)(p) = (v))
#define VSPLAT(x) ((v16){0} + (x))

/* Row by row: each source row is read once (strided rows would leave L1 between columns). */
void attn_tile_transpose(float *bt, const float *b, int ldb, int T, int hd) {
  int tpad = attn_tile_tpad(T);
  for (int s = 0; s < T; s++) {
    const float *row = b + (long)s * ldb;
    for (int c = 0; c < hd; c++) bt[(long)c * tpad + s] = row[c];
  }
  for (int c = 0; c < hd; c++)
    for (int s = T; s < tpad; s++) bt[(long)c * tpad + s] = 0.0f;
}

/* A sequence's rows are read whole, in order (the hardware prefetcher follows them; a head's
 * slice of strided rows, read head by head, waited on a miss per row), each group's slice going
 * to its own contiguous block. */
void attn_tile_pack_heads(float *dst, const float *src, int lds, int T, int G, int hd) {
  for (int t = 0; t < T; t++) {
    const float *row = src + (long)t * lds;
    for (int g = 0; g < G; g++) {
      float *out = dst + ((long)g * T + t) * hd;
      for (int c = 0; c < hd; c += 16) VSTORE(out + c, VLOAD(row + (long)g * hd + c));
    }
  }
}

/* R rows (R <= 8) from t, W chunks of 16 columns from j0 (W <= 2): 16 sums in registers (8
 * did not hide the multiply-adds' latency behind the loads). */
static inline __attribute__((always_inline)) void scores_tile(float *s, int lds, const float *a,
                                                              int lda, const float *bt,
                                                              int tpad, int hd, int j0, int R,
                                                              int W) {
  v16 acc[8][2] = {{{0}}};
  for (int c = 0; c < hd; c++) {
    const float *b = bt + (long)c * tpad + j0;
    v16 b0 = VLOAD(b), b1 = W > 1 ? VLOAD(b + 16) : b0;
    for (int r = 0; r < R; r++) {
      v16 x = VSPLAT(a[(long)r * lda + c]);
      acc[r][0] += x * b0;
      if (W > 1) acc[r][1] += x * b1;
    }
  }
  for (int r = 0; r < R; r++)
    for (int w = 0; w < W; w++) VSTORE(s + (long)r * lds + j0 + 16 * w, acc[r][w]);
}

/* Rows t .. t+R-1: the chunks covering columns 0 .. t+R-1. */
static inline __attribute__((always_inline)) void scores_rows(float *s, int lds, const float *a,
                                                              int lda, const float *bt,
                                                              int tpad, int hd, int t, int R) {
  int nc = (t + R - 1) / 16 + 1, j = 0;
  for (; j + 2 <= nc; j += 2) scores_tile(s, lds, a, lda, bt, tpad, hd, 16 * j, R, 2);
  if (j < nc) scores_tile(s, lds, a, lda, bt, tpad, hd, 16 * j, R, 1);
}

void attn_tile_scores(float *s, int lds, const float *a, int lda, const float *bt, int T,
                      int hd) {
  int tpad = attn_tile_tpad(T), t = 0;
  for (; t + 8 <= T; t += 8)
    scores_rows(s + (long)t * lds, lds, a + (long)t * lda, lda, bt, tpad, hd, t, 8);
  for (; t < T; t++)
    scores_rows(s + (long)t * lds, lds, a + (long)t * lda, lda, bt, tpad, hd, t, 1);
}

/* R output rows (R <= 16), NV vectors of 16 columns (NV <= 2): o[r] (=|+=) sum over k in
 * [k0, kn) of w(r, k) * x[k], w(r, k) = p[r * ldp_r + k * ldp_k] (p row-major or transposed). */
static inline __attribute__((always_inline)) void tile_sum(float *o, int ldo, const float *p,
                                                           long ldp_r, long ldp_k,
                                                           const float *x, int ldx, int k0,
                                                           int kn, int R, int NV, int acc_out) {
  v16 acc[16][2] = {{{0}}};
  for (int k = k0; k < kn; k++) {
    const float *xr = x + (long)k * ldx;
    v16 x0 = VLOAD(xr), x1 = NV > 1 ? VLOAD(xr + 16) : x0;
    for (int r = 0; r < R; r++) {
      v16 w = VSPLAT(p[r * ldp_r + k * ldp_k]);
      acc[r][0] += w * x0;
      if (NV > 1) acc[r][1] += w * x1;
    }
  }
  for (int r = 0; r < R; r++)
    for (int v = 0; v < NV; v++) {
      float *out = o + (long)r * ldo + 16 * v;
      VSTORE(out, acc_out ? acc[r][v] + VLOAD(out) : acc[r][v]);
    }
}

void attn_tile_rows(float *o, int ldo, const float *p, int ldp, const float *v, int ldv, int T,
                    int hd) {
  for (int c = 0; c < hd; c += 32) {
    int t = 0;
    for (; t + 8 <= T; t += 8)
      tile_sum(o + (long)t * ldo + c, ldo, p + (long)t * ldp, ldp, 1, v + c, ldv, 0, t + 8, 8, 2,
               0);
    for (; t < T; t++)
      tile_sum(o + (long)t * ldo + c, ldo, p + (long)t * ldp, ldp, 1, v + c, ldv, 0, t + 1, 1, 2,
               0);
  }
}

/* 8 output rows by 32 columns at a time: each k reads an 8-float piece of p's row k and a
 * 32-float row of x, and the blocks start nearer their diagonal than 16 rows would. */
void attn_tile_cols(float *o, int ldo, const float *p, int ldp, const float *x, int ldx, int T,
                    int hd, int acc) {
  for (int c = 0; c < hd; c += 32) {
    int s = 0;
    for (; s + 8 <= T; s += 8)
      tile_sum(o + (long)s * ldo + c, ldo, p + s, 1, ldp, x + c, ldx, s, T, 8, 2, acc);
    for (; s < T; s++)
      tile_sum(o + (long)s * ldo + c, ldo, p + s, 1, ldp, x + c, ldx, s, T, 1, 2, acc);
  }
}
