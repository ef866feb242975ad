/* Packed documents (data.documents, data/data_pack.h):
 *   1. the packing of a hand-made file: sequence starts, inputs, targets (ignored at padding,
 *      at EOS and at the row's last real token), doc_start, positions, the real-target count;
 *   2. the CPU attention with doc_start against a double reference of block-diagonal causal
 *      attention, its backward against central finite differences of that reference, and
 *      masked probabilities exactly 0;
 *   3. the masking end to end, for a GPT (pos_embedding + transformer_block) and a Llama
 *      (llama_block with RoPE): the loss sum and the gradients of one packed row equal the sums
 *      over its documents each run alone as its own sequence (plain causal, positions from 0).
 *      Tolerance 1e-5 relative on the loss, 1e-4 of the largest gradient: the packed row adds
 *      the same products in other groupings (a row of T vs of the document's length). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "data/data.h"
#include "data/data_pack.h"
#include "engine/stage.h"
#include "kernels/cpu/ops.h"
#include "kernels/loss.h"
#include "model/model.h"
#include "test_util.h"

static uint64_t g_rng = 99;
static double urand(void) { /* uniform in [-1, 1) */
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* --- 1. Packing -------------------------------------------------------------------------- */

/* Documents (EOS '\n' included): A 5, B 3, C 12 (longer than T+1 = 9), D 1 (a lone EOS), E 4,
 * F 6 unterminated. Greedy: [A B] 8 | C's first 9 | C's last 3, D, E: 8 | F 6 + 2 padding. */
static void test_packing(void) {
  static const char text[] = "abcd\nef\nghijklmnopq\n\nrst\nuvwxyz";
  enum { T = 8 };
  char path[] = "/tmp/pt_docs_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0 && write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1), "temp file");
  close(fd);
  pt_spec s;
  memset(&s, 0, sizeof s);
  snprintf(s.data.path, sizeof s.data.path, "%s", path);
  s.data.format = SPEC_DATA_BYTES;
  s.data.documents = 1, s.data.doc_eos = '\n';
  s.vocab = 256, s.seq_len = T;
  s.train.micro_batch_size = 4, s.train.micro_batches = 1, s.pipeline.data_parallel = 1; /* G 4 */
  pt_data d;
  char err[512];
  CHECK(data_open(&d, &s, err, sizeof err) == 0, "%s", err);
  unlink(path);
  static const int64_t starts[] = {0, 8, 17, 25, 31};
  CHECK(d.n_seqs == 4, "%lld packed sequences, expected 4", (long long)d.n_seqs);
  for (int q = 0; q <= 4 && d.n_seqs == 4; q++)
    CHECK(d.seq_start[q] == starts[q], "seq_start[%d] = %lld, expected %lld", q,
          (long long)d.seq_start[q], (long long)starts[q]);
  /* row 2: "pq\n" "\n" "rst\n": doc starts 0, 3, 4 */
  static const int32_t ds2[T] = {0, 0, 0, 3, 4, 4, 4, 4}, tg2[T] = {'q', '\n', -1, -1, 's', 't',
                                                                   '\n', -1};
  /* row 3: "uvwxyz" then padding (EOS) from 6, its own document */
  static const int32_t ds3[T] = {0, 0, 0, 0, 0, 0, 6, 6}, tg3[T] = {'v', 'w', 'x', 'y', 'z', -1,
                                                                   -1, -1};
  int32_t in[4 * T], tg[4 * T], dst[4 * T], pos[4 * T];
  data_micro_batch(&d, 0, 0, 0, T, in, tg);
  data_micro_batch_docs(&d, 0, 0, 0, dst, pos);
  for (int t = 0; t < T; t++) {
    CHECK(in[2 * T + t] == text[17 + t], "row 2 input %d", t);
    CHECK(tg[2 * T + t] == tg2[t], "row 2 target %d: %d, expected %d", t, tg[2 * T + t], tg2[t]);
    CHECK(dst[2 * T + t] == ds2[t] && pos[2 * T + t] == t - ds2[t], "row 2 doc_start %d", t);
    CHECK(in[3 * T + t] == (t < 6 ? text[25 + t] : '\n'), "row 3 input %d", t);
    CHECK(tg[3 * T + t] == tg3[t], "row 3 target %d: %d, expected %d", t, tg[3 * T + t], tg3[t]);
    CHECK(dst[3 * T + t] == ds3[t] && pos[3 * T + t] == t - ds3[t], "row 3 doc_start %d", t);
    CHECK(tg[T + t] == (t < T ? text[9 + t] : -1), "row 1 (a piece): target %d", t);
    CHECK(dst[T + t] == 0, "row 1: one document");
  }
  CHECK(tg[4] == -1 && tg[7] == -1 && dst[5] == 5 && pos[7] == 2, "row 0: EOS, end, B's start");
  int64_t real = 0;
  for (int i = 0; i < 4 * T; i++) real += tg[i] != LOSS_IGNORE;
  CHECK(real == 24 && data_step_targets(&d, 0, T) == real,
        "real targets: counted %lld, data_step_targets %lld, expected 24", (long long)real,
        (long long)data_step_targets(&d, 0, T));
  /* step 1 of G = 3 reads sequences 3, 0, 1 (k mod n_seqs) */
  CHECK(data_pack_sequence(&d, 1, 3, 0) == 3 && data_pack_sequence(&d, 1, 3, 1) == 0,
        "sequence index");
  data_close(&d);
}

/* --- 2. Attention with doc_start against a double reference ------------------------------ */

enum { AB = 2, AT = 11, AD = 8, AH = 2, AKVH = 1 };
#define ALD (AD + 2 * AKVH * (AD / AH))

static const int32_t g_doc[AB * AT] = {0, 0, 0, 3, 3, 3, 3, 3, 8, 8, 10,
                                       0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};

/* o[B,T,d] of block-diagonal causal GQA in double. */
static void ref_attention(double *o, const double *qkv) {
  const int hd = AD / AH, R = AH / AKVH;
  for (int b = 0; b < AB; b++)
    for (int h = 0; h < AH; h++)
      for (int t = 0; t < AT; t++) {
        const double *q = qkv + ((int64_t)b * AT + t) * ALD + h * hd;
        int lo = g_doc[b * AT + t];
        double s[AT], mx = -INFINITY, sum = 0.0;
        for (int j = lo; j <= t; j++) {
          const double *k = qkv + ((int64_t)b * AT + j) * ALD + AD + (h / R) * hd;
          s[j] = 0.0;
          for (int i = 0; i < hd; i++) s[j] += q[i] * k[i];
          s[j] /= sqrt((double)hd);
          mx = fmax(mx, s[j]);
        }
        for (int j = lo; j <= t; j++) sum += (s[j] = exp(s[j] - mx));
        double *out = o + ((int64_t)b * AT + t) * AD + h * hd;
        for (int i = 0; i < hd; i++) out[i] = 0.0;
        for (int j = lo; j <= t; j++) {
          const double *v = qkv + ((int64_t)b * AT + j) * ALD + AD + AKVH * hd + (h / R) * hd;
          for (int i = 0; i < hd; i++) out[i] += s[j] / sum * v[i];
        }
      }
}

static double ref_objective(const double *qkv, const double *R) {
  double o[AB * AT * AD], f = 0.0;
  ref_attention(o, qkv);
  for (int i = 0; i < AB * AT * AD; i++) f += o[i] * R[i];
  return f;
}

static void test_attention(void) {
  enum { NQ = AB * AT * ALD, NO = AB * AT * AD };
  float qkv[NQ], o[NO], dout[NO], dqkv[NQ], p[AB * AH * AT * AT], scr[AT * AT];
  double qd[NQ], od[NO], R[NO];
  for (int i = 0; i < NQ; i++) qd[i] = qkv[i] = (float)urand();
  for (int i = 0; i < NO; i++) R[i] = dout[i] = (float)urand();
  op_attention_forward(o, p, qkv, AB, AT, AD, AH, AKVH, g_doc, NULL, scr);
  op_attention_backward(dqkv, dout, qkv, p, AB, AT, AD, AH, AKVH, g_doc, NULL, scr);
  ref_attention(od, qd);
  for (int i = 0; i < NO; i++)
    CHECK(fabs(o[i] - od[i]) <= 1e-5 * (1.0 + fabs(od[i])), "attention o[%d] %.8g vs %.8g", i,
          o[i], od[i]);
  for (int b = 0; b < AB; b++)
    for (int h = 0; h < AH; h++)
      for (int t = 0; t < AT; t++)
        for (int j = 0; j < AT; j++) {
          float pv = p[(((int64_t)b * AH + h) * AT + t) * AT + j];
          int vis = j <= t && j >= g_doc[b * AT + t];
          CHECK(vis ? pv > 0.0f : pv == 0.0f, "p[b%d h%d t%d j%d] = %g", b, h, t, j, pv);
        }
  double gmax = 1e-6;
  for (int i = 0; i < NQ; i++) gmax = fmax(gmax, fabs(dqkv[i]));
  for (int i = 0; i < NQ; i++) {
    double keep = qd[i], hstep = 1e-6;
    qd[i] = keep + hstep;
    double fp = ref_objective(qd, R);
    qd[i] = keep - hstep;
    double fm = ref_objective(qd, R);
    qd[i] = keep;
    double fdv = (fp - fm) / (2 * hstep);
    CHECK(fabs(dqkv[i] - fdv) <= 1e-4 * gmax, "dqkv[%d]: analytic %.8g vs FD %.8g", i, dqkv[i],
          fdv);
  }
}

/* --- 3. Packed row vs its documents run alone --------------------------------------------- */

enum { T = 16, EOS = 0 };

/* Loss sum of one row of n tokens (targets tg, LOSS_IGNORE where ignored) with gradients added
 * into m->grads; doc_start/positions NULL: plain causal. */
static double run_row(pt_model *m, pt_stage *st, const int32_t *tok, const int32_t *tg, int n,
                      const int32_t *ds, const int32_t *pos) {
  int F = m->layers[m->n_layers - 1].out_dim;
  memcpy(stage_input(st, 0), tok, sizeof(int32_t) * n);
  if (ds) stage_set_docs(st, 0, ds, pos, 1, n);
  const float *y = stage_forward(st, 0, 1, n);
  float *dy = pt_alloc_aligned(sizeof(float) * (size_t)n * F);
  double sum = loss_forward_backward(LOSS_CROSS_ENTROPY, y, tg, n, F, 1.0f, dy);
  stage_backward(st, 0, dy, 0, NULL);
  pt_free_aligned(dy);
  return sum;
}

static void run_masking_case(const char *yaml, const char *what) {
  pt_spec s;
  spec_errors e = {0};
  if (spec_load_text(yaml, strlen(yaml), "docs.yaml", NULL, 0, &s, &e) != 0) pt_fatal("%s", e.msg);
  pt_model m;
  if (model_configure(&m, &s, &e) != 0) pt_fatal("%s", e.msg);
  model_alloc(&m, 0, m.n_layers);
  for (int64_t i = 0; i < m.n_floats; i++) m.params[i] += (float)(0.05 * urand());
  /* documents of 5, 6 and 3 tokens (each ending in EOS) then 2 padding: used 14 of T+1 = 17,
   * so the row's inputs are 14 real tokens and 2 padding */
  static const int lens[3] = {5, 6, 3};
  int32_t tok[T + 1], tg[T], ds[T], pos[T];
  int at = 0;
  for (int d = 0; d < 3; d++)
    for (int i = 0; i < lens[d]; i++, at++)
      tok[at] = i == lens[d] - 1 ? EOS : 1 + (int32_t)((urand() + 1.0) * 0.5 * (s.vocab - 1));
  for (int t = at; t <= T; t++) tok[t] = EOS;
  for (int t = 0, start = 0; t < T; t++) {
    if (t > 0 && (t == at || (t < at && tok[t - 1] == EOS))) start = t;
    ds[t] = start, pos[t] = t - start;
    tg[t] = t + 1 < at && tok[t] != EOS ? tok[t + 1] : LOSS_IGNORE;
  }
  pt_stage packed, alone;
  stage_init(&packed, &m, 0, m.n_layers, 1, T, 1, 0);
  stage_enable_docs(&packed);
  stage_init(&alone, &m, 0, m.n_layers, 1, T, 1, 0);
  model_zero_grads(&m);
  double lp = run_row(&m, &packed, tok, tg, T, ds, pos);
  float *gp = pt_calloc((size_t)m.n_floats, sizeof(float));
  memcpy(gp, m.grads, sizeof(float) * (size_t)m.n_floats);
  model_zero_grads(&m);
  double ls = 0.0;
  for (int d = 0, o = 0; d < 3; o += lens[d++]) {
    int32_t dt[T];
    for (int i = 0; i < lens[d]; i++) dt[i] = i + 1 < lens[d] ? tok[o + i + 1] : LOSS_IGNORE;
    ls += run_row(&m, &alone, tok + o, dt, lens[d], NULL, NULL);
  }
  CHECK(fabs(lp - ls) <= 1e-5 * fabs(ls), "%s: packed loss sum %.9g vs documents alone %.9g",
        what, lp, ls);
  double gmax = 1e-6, worst = 0.0;
  for (int64_t i = 0; i < m.n_floats; i++) gmax = fmax(gmax, fabs(m.grads[i]));
  for (int64_t i = 0; i < m.n_floats; i++) worst = fmax(worst, fabs(gp[i] - m.grads[i]));
  CHECK(worst <= 1e-4 * gmax, "%s: gradients differ by %.3g (largest %.3g)", what, worst, gmax);
  printf("%s: packed loss %.9g, alone %.9g; gradients differ by at most %.3g of %.3g\n", what, lp,
         ls, worst, gmax);
  free(gp);
  stage_free(&packed);
  stage_free(&alone);
  model_free(&m);
  spec_free(&s);
}

int main(void) {
  test_packing();
  test_attention();
  run_masking_case("model: {vocab: 24, seq_len: 16, dim: 16, heads: 2}\n"
                   "layers:\n  - embedding: {}\n  - pos_embedding: {}\n"
                   "  - transformer_block: {repeat: 2}\n  - layernorm: {}\n  - lm_head: {}\n"
                   "loss: cross_entropy\n",
                   "gpt");
  run_masking_case("model: {vocab: 24, seq_len: 16, dim: 16, heads: 4}\n"
                   "layers:\n  - embedding: {}\n"
                   "  - llama_block: {repeat: 2, kv_heads: 2, ffn_dim: 24, rope_theta: 10000}\n"
                   "  - rmsnorm: {}\n  - lm_head: {}\n"
                   "loss: cross_entropy\n",
                   "llama");
  return test_summary("test_documents");
}
