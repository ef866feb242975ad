/* kernels/cpu/attention_tile.h: the products of one attention head, written for heads whose
 * dims are a multiple of ATTN_TILE_HD (ops_attention_tile.c), in place of one OpenBLAS call
 * per block (their packing and call overhead dominate at T = 128, hd = 32). A head lives in L1
 * and L2 (q, k, v: T x hd; scores: T x T), so these loops keep a tile of sums in registers
 * (scores 8 rows x 32 columns, rows 8 x 32, cols 8 x 32). Every sum adds in index order
 * (fixed by the sizes): the same inputs give the same bits. Row-major; ld* are row strides in
 * floats. */
#ifndef PT_ATTENTION_TILE_H
#define PT_ATTENTION_TILE_H

/* hd must be a multiple of this for the tile kernels (ops_attention.c falls back to sgemm). */
#define ATTN_TILE_HD 32

/* Row length of a transposed head (attn_tile_transpose): T rounded up to 16 floats. */
static inline int attn_tile_tpad(int T) { return (T + 15) & ~15; }

/* bt[c * tpad + s] = b[s * ldb + c] for c < hd, s < T; columns T..tpad-1 set to 0. */
void attn_tile_transpose(float *bt, const float *b, int ldb, int T, int hd);
/* dst[(g * T + t) * hd + c] = src[t * lds + g * hd + c] for g < G: a sequence's heads (G
 * groups of hd columns) each made contiguous (a head's strided rows fall in few L1 sets). */
void attn_tile_pack_heads(float *dst, const float *src, int lds, int T, int G, int hd);
/* s[t * lds + j] = sum_c a[t * lda + c] * bt[c * tpad + j] for j <= t (causal rows; a row may
 * get columns past t up to its 32-float chunk pair or the next 8 rows' t, lds >= tpad). */
void attn_tile_scores(float *s, int lds, const float *a, int lda, const float *bt, int T, int hd);
/* o[t] = sum_{s <= t} p[t * ldp + s] * v[s] (hd floats each): p is zero above its diagonal,
 * which rows of an 8-row block read past their own t. */
void attn_tile_rows(float *o, int ldo, const float *p, int ldp, const float *v, int ldv, int T,
                    int hd);
/* o[s] (=|+= when acc) sum_{t >= s} p[t * ldp + s] * x[t]: the transposed product (dV = P^T dO,
 * dK = dS^T Q), p zero above its diagonal. */
void attn_tile_cols(float *o, int ldo, const float *p, int ldp, const float *x, int ldx, int T,
                    int hd, int acc);

#endif
