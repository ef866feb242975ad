/* The CPU table's attention (kernels/cpu/ops_attention.c) against a double-precision reference:
 * the register-tile path (head dims a multiple of ATTN_TILE_HD) and the sgemm one, multi-head
 * and grouped-query, T around the 4-, 8- and 16-row tiles, with and without packed documents.
 * Also: probabilities exactly 0 above the diagonal and outside a document, the same bits on a
 * rerun, and all_finite on each non-finite pattern at every offset of a piece. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/ops.h"
#include "test_util.h"

static float urand(void) { return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f; }

static float *fnew(size_t n) { return calloc(n, sizeof(float)); }

/* o and dqkv in double, straight from the definition (kernels.h). */
static void reference(double *o, double *dqkv, const float *qkv, const float *dout, int B,
                      int T, int d, int H, int KVH, const int32_t *doc) {
  int hd = d / H, ld = d + 2 * KVH * hd, R = H / KVH;
  double scale = 1.0 / sqrt((double)hd), *p = malloc(sizeof(double) * T),
         *dp = malloc(sizeof(double) * T);
  memset(dqkv, 0, sizeof(double) * (size_t)B * T * ld);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      int qc = h * hd, kc = d + (h / R) * hd, vc = kc + KVH * hd;
      const float *base = qkv + (size_t)b * T * ld;
      double *dbase = dqkv + (size_t)b * T * ld;
      for (int t = 0; t < T; t++) {
        int lo = doc ? doc[b * T + t] : 0;
        double mx = -INFINITY, sum = 0.0, dot = 0.0;
        for (int s = lo; s <= t; s++) {
          double a = 0.0;
          for (int c = 0; c < hd; c++) a += (double)base[t * ld + qc + c] * base[s * ld + kc + c];
          p[s] = a * scale;
          mx = p[s] > mx ? p[s] : mx;
        }
        for (int s = lo; s <= t; s++) sum += p[s] = exp(p[s] - mx);
        const float *dor = dout + ((size_t)b * T + t) * d + qc;
        for (int c = 0; c < hd; c++) {
          double a = 0.0;
          for (int s = lo; s <= t; s++) a += p[s] / sum * base[s * ld + vc + c];
          o[((size_t)b * T + t) * d + qc + c] = a;
        }
        for (int s = lo; s <= t; s++) {
          p[s] /= sum;
          dp[s] = 0.0;
          for (int c = 0; c < hd; c++) dp[s] += (double)dor[c] * base[s * ld + vc + c];
          dot += p[s] * dp[s];
        }
        for (int s = lo; s <= t; s++) {
          double ds = p[s] * (dp[s] - dot) * scale;
          for (int c = 0; c < hd; c++) {
            dbase[t * ld + qc + c] += ds * base[s * ld + kc + c];
            dbase[s * ld + kc + c] += ds * base[t * ld + qc + c];
            dbase[s * ld + vc + c] += p[s] * dor[c];
          }
        }
      }
    }
  free(p);
  free(dp);
}

static double max_rel(const float *x, const double *ref, size_t n) {
  double worst = 0.0, big = 1e-6;
  for (size_t i = 0; i < n; i++) big = fmax(big, fabs(ref[i]));
  for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(x[i] - ref[i]) / big);
  return worst;
}

static void attention_case(int B, int T, int d, int H, int KVH, int max_doc) {
  int hd = d / H, ld = d + 2 * KVH * hd;
  size_t nq = (size_t)B * T * ld, no = (size_t)B * T * d, np = (size_t)B * H * T * T;
  float *qkv = fnew(nq), *dout = fnew(no), *o = fnew(no), *o2 = fnew(no), *p = fnew(np);
  float *dqkv = fnew(nq), *dqkv2 = fnew(nq), *scr = fnew((size_t)op_attention_scratch_floats(T, d, H, KVH));
  double *ro = malloc(sizeof(double) * no), *rd = malloc(sizeof(double) * nq);
  int32_t *doc = NULL;
  for (size_t i = 0; i < nq; i++) qkv[i] = 2.0f * urand();
  for (size_t i = 0; i < no; i++) dout[i] = urand();
  if (max_doc) {
    doc = malloc(sizeof(int32_t) * (size_t)B * T);
    for (int b = 0; b < B; b++)
      for (int t = 0, start = 0, end = 0; t < T; t++) {
        if (t == end) start = t, end = t + 1 + rand() % max_doc;
        doc[b * T + t] = start;
      }
  }
  op_attention_forward(o, p, qkv, B, T, d, H, KVH, doc, NULL, scr);
  op_attention_backward(dqkv, dout, qkv, p, B, T, d, H, KVH, doc, NULL, scr);
  reference(ro, rd, qkv, dout, B, T, d, H, KVH, doc);
  double eo = max_rel(o, ro, no), ed = max_rel(dqkv, rd, nq);
  CHECK(eo < 2e-6 && ed < 2e-6, "B=%d T=%d d=%d H=%d KVH=%d docs=%d: o off by %.3g, dqkv by %.3g",
        B, T, d, H, KVH, max_doc, eo, ed);
  int zeros = 1;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int t = 0; t < T; t++)
        for (int s = 0; s < T; s++)
          if ((s > t || (doc && s < doc[b * T + t])) && p[(((size_t)b * H + h) * T + t) * T + s] != 0.0f)
            zeros = 0;
  CHECK(zeros, "B=%d T=%d d=%d H=%d: masked probabilities not 0", B, T, d, H);
  op_attention_forward(o2, p, qkv, B, T, d, H, KVH, doc, NULL, scr);
  op_attention_backward(dqkv2, dout, qkv, p, B, T, d, H, KVH, doc, NULL, scr);
  CHECK(!memcmp(o, o2, sizeof(float) * no) && !memcmp(dqkv, dqkv2, sizeof(float) * nq),
        "B=%d T=%d d=%d H=%d: a rerun gave other bits", B, T, d, H);
  free(qkv), free(dout), free(o), free(o2), free(p), free(dqkv), free(dqkv2), free(scr);
  free(ro), free(rd), free(doc);
}

static void all_finite_cases(void) {
  float x[700];
  const uint32_t bad[3] = {0x7f800000u, 0xff800000u, 0x7fc00001u};
  for (int i = 0; i < 700; i++) x[i] = urand() * 3e38f;
  CHECK(op_all_finite(x, 700), "finite values reported non-finite");
  for (int k = 0; k < 3; k++)
    for (int at = 0; at < 700; at += 37) {
      float keep = x[at];
      memcpy(&x[at], &bad[k], sizeof(float));
      CHECK(!op_all_finite(x, 700), "pattern %08x at %d missed", bad[k], at);
      CHECK(op_all_finite(x, at), "pattern %08x at %d seen before it", bad[k], at);
      x[at] = keep;
    }
}

int main(void) {
  srand(7);
  attention_case(2, 70, 64, 2, 2, 0);    /* tiles, hd 32: 8-row tiles and leftover rows */
  attention_case(1, 130, 128, 2, 1, 0);  /* hd 64, multi-query, 16-column tiles + leftovers */
  attention_case(2, 37, 256, 8, 4, 0);   /* hd 32, grouped-query, T not a multiple of 16 */
  attention_case(1, 1, 64, 2, 2, 0);     /* one token */
  attention_case(2, 45, 128, 4, 2, 12);  /* packed documents, grouped-query */
  attention_case(1, 33, 64, 1, 1, 1);    /* every token its own document */
  attention_case(2, 9, 16, 2, 1, 0);     /* hd 8: the sgemm path */
  attention_case(1, 70, 48, 2, 2, 20);   /* hd 24: the sgemm path, documents */
  all_finite_cases();
  return test_summary("attention_cpu");
}
