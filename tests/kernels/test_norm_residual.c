/* The CPU's fused entries against the separate calls they replace, bit for bit (kernels.h):
 *   - layernorm/rmsnorm _forward_residual == add(x1, a, b) then the plain forward of x1, also
 *     with x1 over a (what llama_block does);
 *   - _backward_input_residual == copy(dx, dres) then backward_input with acc = 1, also with dx
 *     over dres;
 *   - the losses with dy over y == with dy apart (cross entropy with ignored rows, mse).
 * So the layers' switch to them changes no CPU result. Also through the timing table and the
 * precision tables (which take these entries from kernels_cpu). */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_timed.h"
#include "test_util.h"

static unsigned g_seed = 12345u;

static float *rnd(int64_t n, float lo, float hi) {
  float *x = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    g_seed = g_seed * 1103515245u + 12345u;
    x[i] = lo + (hi - lo) * (float)(g_seed >> 8) / 16777216.0f;
  }
  return x;
}

static float *dup(const float *x, int64_t n) {
  float *y = malloc(sizeof(float) * (size_t)n);
  memcpy(y, x, sizeof(float) * (size_t)n);
  return y;
}

static void same(const char *what, const char *table, int N, int D, const float *a,
                 const float *b, int64_t n) {
  CHECK(!memcmp(a, b, sizeof(float) * (size_t)n), "%s [%s N=%d D=%d]: not the same bits", what,
        table, N, D);
}

static void test_layernorm(const pt_kernels *k, int N, int D) {
  const int64_t n = (int64_t)N * D;
  float *a = rnd(n, -2, 2), *b = rnd(n, -2, 2), *w = rnd(D, 0.5f, 1.5f), *bias = rnd(D, -1, 1);
  float *x1r = malloc(4 * n), *yr = malloc(4 * n), *mr = malloc(4 * N), *rr = malloc(4 * N);
  float *x1 = malloc(4 * n), *y = malloc(4 * n), *m = malloc(4 * N), *r = malloc(4 * N);
  k->add(k, x1r, a, b, n);
  k->layernorm_forward(k, yr, mr, rr, x1r, w, bias, N, D, 1e-5f);
  k->layernorm_forward_residual(k, x1, y, m, r, a, b, w, bias, N, D, 1e-5f);
  same("layernorm_forward_residual x1", k->name, N, D, x1, x1r, n);
  same("layernorm_forward_residual y", k->name, N, D, y, yr, n);
  same("layernorm_forward_residual mean", k->name, N, D, m, mr, N);
  same("layernorm_forward_residual rstd", k->name, N, D, r, rr, N);
  float *inplace = dup(a, n);
  k->layernorm_forward_residual(k, inplace, y, m, r, inplace, b, w, bias, N, D, 1e-5f);
  same("layernorm_forward_residual x1 over a", k->name, N, D, inplace, x1r, n);
  same("layernorm_forward_residual y (x1 over a)", k->name, N, D, y, yr, n);

  float *dres = rnd(n, -1, 1), *dy = rnd(n, -1, 1), *dxr = malloc(4 * n), *dx = malloc(4 * n);
  k->copy(k, dxr, dres, n);
  k->layernorm_backward_input(k, dxr, dy, x1r, w, mr, rr, N, D, 1);
  k->layernorm_backward_input_residual(k, dx, dres, dy, x1r, w, mr, rr, N, D);
  same("layernorm_backward_input_residual", k->name, N, D, dx, dxr, n);
  float *over = dup(dres, n);
  k->layernorm_backward_input_residual(k, over, over, dy, x1r, w, mr, rr, N, D);
  same("layernorm_backward_input_residual dx over dres", k->name, N, D, over, dxr, n);
  free(a), free(b), free(w), free(bias), free(x1r), free(yr), free(mr), free(rr), free(x1);
  free(y), free(m), free(r), free(inplace), free(dres), free(dy), free(dxr), free(dx), free(over);
}

static void test_rmsnorm(const pt_kernels *k, int N, int D) {
  const int64_t n = (int64_t)N * D;
  float *a = rnd(n, -2, 2), *b = rnd(n, -2, 2), *w = rnd(D, 0.5f, 1.5f);
  float *x1r = malloc(4 * n), *yr = malloc(4 * n), *rr = malloc(4 * N);
  float *y = malloc(4 * n), *r = malloc(4 * N);
  /* llama_block's former order: the product's output, then the residual added in place */
  k->copy(k, x1r, a, n);
  k->add_inplace(k, x1r, b, n);
  k->rmsnorm_forward(k, yr, rr, x1r, w, N, D, 1e-6f);
  float *x1 = dup(a, n);
  k->rmsnorm_forward_residual(k, x1, y, r, x1, b, w, N, D, 1e-6f);
  same("rmsnorm_forward_residual x1 over a", k->name, N, D, x1, x1r, n);
  same("rmsnorm_forward_residual y", k->name, N, D, y, yr, n);
  same("rmsnorm_forward_residual rstd", k->name, N, D, r, rr, N);

  float *dres = rnd(n, -1, 1), *dy = rnd(n, -1, 1), *dxr = malloc(4 * n), *dx = malloc(4 * n);
  k->copy(k, dxr, dres, n);
  k->rmsnorm_backward_input(k, dxr, dy, x1r, w, rr, N, D, 1);
  k->rmsnorm_backward_input_residual(k, dx, dres, dy, x1r, w, rr, N, D);
  same("rmsnorm_backward_input_residual", k->name, N, D, dx, dxr, n);
  k->rmsnorm_backward_input_residual(k, dres, dres, dy, x1r, w, rr, N, D);
  same("rmsnorm_backward_input_residual dx over dres", k->name, N, D, dres, dxr, n);
  free(a), free(b), free(w), free(x1r), free(yr), free(rr), free(y), free(r), free(x1);
  free(dres), free(dy), free(dxr), free(dx);
}

static void test_loss_in_place(pt_loss_kind kind, int N, int F) {
  const int64_t n = (int64_t)N * F;
  float *y = rnd(n, -8, 8), *dy = malloc(4 * n), *ft = rnd(n, -1, 1);
  int32_t *ids = malloc(sizeof(int32_t) * (size_t)N);
  for (int i = 0; i < N; i++) ids[i] = i % 4 == 1 ? LOSS_IGNORE : (i * 7919) % F;
  const void *t = kind == LOSS_CROSS_ENTROPY ? (const void *)ids : (const void *)ft;
  size_t tb = kind == LOSS_CROSS_ENTROPY ? sizeof(int32_t) * (size_t)N : sizeof(float) * (size_t)n;
  double l1 = kernels_cpu.loss(&kernels_cpu, kind, y, t, tb, N, F, 0.25f, dy);
  float *over = dup(y, n);
  double l2 = kernels_cpu.loss(&kernels_cpu, kind, over, t, tb, N, F, 0.25f, over);
  CHECK(!memcmp(&l1, &l2, sizeof l1), "loss %d in place: %.17g vs %.17g", (int)kind, l2, l1);
  CHECK(!memcmp(over, dy, sizeof(float) * (size_t)n), "loss %d in place: dy not the same bits",
        (int)kind);
  free(y), free(dy), free(ft), free(ids), free(over);
}

int main(void) {
  static pt_kernels_timed timed;
  const pt_kernels *tables[] = {&kernels_cpu, kernels_timed_wrap(&timed, &kernels_cpu),
                                kernels_cpu_for_emulated(PT_PRECISION_BF16)};
  const int shapes[][2] = {{1, 1}, {7, 33}, {64, 768}, {3, 4099}};
  double work = 0.0; /* the timing table's closed form: two calls per shape */
  for (int i = 0; i < 3; i++)
    for (int s = 0; s < 4; s++) {
      const int N = shapes[s][0], D = shapes[s][1];
      test_layernorm(tables[i], N, D);
      test_rmsnorm(tables[i], N, D);
      if (i == 1) work += 2 * 4.0 * (4.0 * N * D + 2.0 * N + 2.0 * D);
    }
  const pt_kernel_tally *t = &timed.entry[PT_KT_layernorm_forward_residual];
  CHECK(t->calls == 8 && t->work == work && t->category == PT_KCAT_NORM,
        "timing table: layernorm_forward_residual %lld calls, work %g (want 8, %g)",
        (long long)t->calls, t->work, work);
  test_loss_in_place(LOSS_CROSS_ENTROPY, 37, 11);
  test_loss_in_place(LOSS_CROSS_ENTROPY, 9, 50257);
  test_loss_in_place(LOSS_MSE, 13, 17);
  return test_summary("test_norm_residual");
}
