/* kernels/kernels_timed.h: the timing table gives the inner table's results bit for bit, keeps
 * its name, precision and bf16 entries, and tallies each call with the closed-form work of its
 * shapes under the right category; wrapping its own table wraps the inner one again. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_timed.h"
#include "test_util.h"

static void fill(float *x, int n, unsigned seed) {
  for (int i = 0; i < n; i++) x[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16) / 65536.0f - 0.5f;
}

static const pt_kernel_tally *tally(const pt_kernels_timed *t, pt_kernel_entry e) {
  return &t->entry[e];
}

static void check_tally(const pt_kernels_timed *t, pt_kernel_entry e, int64_t calls, double work,
                        pt_kernel_category c) {
  const pt_kernel_tally *s = tally(t, e);
  const char *name = kernels_timed_entry_name(e);
  CHECK(s->calls == calls, "%s: %lld calls, want %lld", name, (long long)s->calls,
        (long long)calls);
  CHECK(s->work == work, "%s: work %g, want %g", name, s->work, work);
  CHECK(s->category == c, "%s: category %s, want %s", name, kernels_timed_category_name(s->category),
        kernels_timed_category_name(c));
  CHECK(s->seconds >= 0 && isfinite(s->seconds), "%s: %g s", name, s->seconds);
}

static void test_results_and_work(void) {
  static pt_kernels_timed t;
  const pt_kernels *k = kernels_timed_wrap(&t, &kernels_cpu), *c = &kernels_cpu;
  CHECK(k == &t.table && t.inner == &kernels_cpu, "wrap returns its table");
  CHECK(!strcmp(k->name, "cpu") && k->precision == PT_PRECISION_FP32 && !k->round_bf16 &&
            !k->pack_bf16 && !k->unpack_bf16,
        "name, precision and bf16 entries are the inner table's");

  enum { N = 5, NI = 7, NO = 3 };
  float x[N * NI], W[NO * NI], b[NO], y1[N * NO], y2[N * NO];
  fill(x, N * NI, 1), fill(W, NO * NI, 2), fill(b, NO, 3);
  c->linear_forward(c, y1, x, W, b, N, NI, NO);
  k->linear_forward(k, y2, x, W, b, N, NI, NO);
  k->linear_forward(k, y2, x, W, b, N, NI, NO);
  CHECK(!memcmp(y1, y2, sizeof y1), "linear_forward: the inner table's bits");
  check_tally(&t, PT_KT_linear_forward, 2, 2 * 2.0 * N * NI * NO, PT_KCAT_GEMM);

  /* causal attention: B 1, T 4, d 8, 2 heads; work 2 B T (T + 1) d */
  enum { B = 1, T = 4, D = 8, H = 2 };
  float qkv[B * T * 3 * D], o1[B * T * D], o2[B * T * D];
  int64_t sv = c->attention_saved_floats(c, B, T, D, H, H);
  CHECK(k->attention_saved_floats(k, B, T, D, H, H) == sv, "sizes forwarded");
  int64_t sc = c->attention_scratch_floats(c, B, T, D, H, H);
  CHECK(k->attention_scratch_floats(k, B, T, D, H, H) == sc, "sizes forwarded");
  float *s1 = calloc((size_t)sv, 4), *s2 = calloc((size_t)sv, 4), *scr = calloc((size_t)sc + 1, 4);
  fill(qkv, B * T * 3 * D, 4);
  c->attention_forward(c, o1, s1, qkv, B, T, D, H, H, NULL, NULL, scr);
  k->attention_forward(k, o2, s2, qkv, B, T, D, H, H, NULL, NULL, scr);
  CHECK(!memcmp(o1, o2, sizeof o1) && !memcmp(s1, s2, (size_t)sv * 4), "attention: same bits");
  check_tally(&t, PT_KT_attention_forward, 1, 2.0 * B * T * (T + 1) * D, PT_KCAT_ATTENTION);
  free(s1), free(s2), free(scr);

  float g1[N * NI], g2[N * NI];
  c->gelu_forward(c, g1, x, N * NI);
  k->gelu_forward(k, g2, x, N * NI);
  CHECK(!memcmp(g1, g2, sizeof g1), "gelu: same bits");
  check_tally(&t, PT_KT_gelu_forward, 1, 8.0 * N * NI, PT_KCAT_ACTIVATION);

  int32_t ids[N] = {1, 0, 2, 2, 1};
  float dy1[N * NO], dy2[N * NO];
  double l1 = c->loss(c, LOSS_CROSS_ENTROPY, y1, ids, sizeof ids, N, NO, 0.5f, dy1);
  double l2 = k->loss(k, LOSS_CROSS_ENTROPY, y1, ids, sizeof ids, N, NO, 0.5f, dy2);
  CHECK(l1 == l2 && !memcmp(dy1, dy2, sizeof dy1), "loss: same value and gradient");
  check_tally(&t, PT_KT_loss, 1, 8.0 * N * NO + sizeof ids, PT_KCAT_LOSS);

  CHECK(k->sumsq(k, x, N * NI) == c->sumsq(c, x, N * NI), "sumsq: same value");
  CHECK(k->all_finite(k, x, N * NI) == 1, "all_finite: same value");
  check_tally(&t, PT_KT_sumsq, 1, 4.0 * N * NI, PT_KCAT_OPTIMIZER);
  const pt_sum_span spans[3] = {{0, 7}, {9, 0}, {12, N * NI - 12}};
  double q1[3] = {-1, -1, -1}, q2[3] = {-1, -1, -1};
  c->sumsq_spans_into(c, q1, x, spans, 3);
  k->sumsq_spans_into(k, q2, x, spans, 3);
  CHECK(!memcmp(q1, q2, sizeof q1) && q1[1] == 0.0 && q1[0] == c->sumsq(c, x, 7),
        "sumsq_spans_into: the spans' sums");
  check_tally(&t, PT_KT_sumsq_spans_into, 1, 4.0 * (N * NI - 5), PT_KCAT_OPTIMIZER);

  /* an AdamW update in two pieces with the bf16 copy: 7 floats and a bf16 moved per element */
  float w1[64], w2[64], m1[64] = {0}, m2[64] = {0}, v1[64] = {0}, v2[64] = {0}, gr[64];
  fill(w1, 64, 5), memcpy(w2, w1, sizeof w1), fill(gr, 64, 6);
  pt_opt_chunk ch[2] = {{0, 40, 1}, {48, 16, 0}};
  pt_update u = {.adam = 1, .decay = 1, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                 .weight_decay = 0.1, .t = 1, .bc1 = 0.1, .bc2 = 0.05, .keep = 0.9999f,
                 .step = 0.01f, .inv_sqrt_bc2 = 4.472136f, .clip = 1.0f};
  uint16_t h1[64] = {0}, h2[64] = {0};
  c->optimizer_chunks(c, &u, w1, h1, gr, m1, v1, ch, 2);
  k->optimizer_chunks(k, &u, w2, h2, gr, m2, v2, ch, 2);
  CHECK(!memcmp(w1, w2, sizeof w1) && !memcmp(m1, m2, sizeof m1) && !memcmp(v1, v2, sizeof v1) &&
            !memcmp(h1, h2, sizeof h1),
        "optimizer_chunks: same bits");
  check_tally(&t, PT_KT_optimizer_chunks, 1, (4.0 * 7 + 2) * 56, PT_KCAT_OPTIMIZER);

  k->copy(k, g2, x, N * NI);
  check_tally(&t, PT_KT_copy, 1, 8.0 * N * NI, PT_KCAT_OTHER);

  pt_kernel_tally cat[PT_KCAT_COUNT];
  kernels_timed_by_category(&t, cat);
  CHECK(cat[PT_KCAT_GEMM].calls == 2 && cat[PT_KCAT_OPTIMIZER].calls == 4 &&
            cat[PT_KCAT_NORM].calls == 0 && cat[PT_KCAT_OTHER].calls == 1,
        "categories sum their entries");
  CHECK(cat[PT_KCAT_OPTIMIZER].work == 4.0 * N * NI * 2 + 4.0 * (N * NI - 5) + (4.0 * 7 + 2) * 56,
        "optimizer work %g",
        cat[PT_KCAT_OPTIMIZER].work);
  kernels_timed_reset(&t);
  CHECK(tally(&t, PT_KT_linear_forward)->calls == 0, "reset zeroes the tallies");
}

static void test_bf16_and_rewrap(void) {
  static pt_kernels_timed t;
  const pt_kernels *bf = kernels_cpu_for(PT_PRECISION_BF16);
  const pt_kernels *k = kernels_timed_wrap(&t, bf);
  CHECK(k->precision == PT_PRECISION_BF16 && k->round_bf16 && k->pack_bf16 && k->unpack_bf16,
        "the bf16 table's precision and entries");
  float x[8], y[8];
  uint16_t p1[8], p2[8];
  fill(x, 8, 7);
  bf->pack_bf16(bf, p1, x, 8);
  k->pack_bf16(k, p2, x, 8);
  CHECK(!memcmp(p1, p2, sizeof p1), "pack_bf16: same bits");
  k->unpack_bf16(k, y, p2, 8);
  check_tally(&t, PT_KT_pack_bf16, 1, 6.0 * 8, PT_KCAT_OTHER);
  check_tally(&t, PT_KT_unpack_bf16, 1, 6.0 * 8, PT_KCAT_OTHER);
  /* handed its own table back: wraps the same inner table again, tallies zeroed */
  CHECK(kernels_timed_wrap(&t, k) == k && t.inner == bf && tally(&t, PT_KT_pack_bf16)->calls == 0,
        "re-wrapping its own table");
}

static void test_names(void) {
  CHECK(!strcmp(kernels_timed_entry_name(PT_KT_linear_forward), "linear_forward") &&
            !strcmp(kernels_timed_entry_name(PT_KT_finite_check), "finite_check") &&
            !strcmp(kernels_timed_entry_name(PT_KT_unpack_bf16), "unpack_bf16"),
        "entry names follow the enum");
  CHECK(!strcmp(kernels_timed_category_name(PT_KCAT_GEMM), "gemm") &&
            !strcmp(kernels_timed_category_name(PT_KCAT_OTHER), "copies/other"),
        "category names");
  CHECK(kernels_timed_counts_flops(PT_KCAT_ATTENTION) && !kernels_timed_counts_flops(PT_KCAT_NORM),
        "units");
}

int main(void) {
  test_results_and_work();
  test_bf16_and_rewrap();
  test_names();
  return test_summary("kernels_timed");
}
