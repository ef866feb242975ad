/* tests/gpu/test_cuda_ops.c: every kernel of kernels/cuda/ops_cuda.h against the CPU path.
 *
 * For each op: random inputs (fixed seed) on the host, the CPU kernel (kernels/cpu/ops.h,
 * kernels/loss.h, or the CPU kernel table kernels_cpu where the GPU's op has no single CPU
 * kernel; the optimizer against PyTorch's formulas in double), the same inputs uploaded, the
 * cuda_ op, the result downloaded and compared:
 *
 *   err = max_i |gpu_i - cpu_i| / max_i |cpu_i|      (a norm-wise relative error)
 *
 * against the op's tolerance (TOL_* below, each justified). Every GPU op runs twice from the
 * same inputs and must give the same bits (activation checkpointing relies on it); the acc = 1
 * paths start from non-zero destinations. Shapes: small odd ones (N = 7, D = 33, ...) and a
 * realistic one (B = 4, T = 128, d = 256, H = 8), plus the extremes the kernels are written for
 * (T = 1024, hd = 256, GPT-2's vocabulary).
 *
 * Without a usable GPU it prints "SKIP: no GPU (<reason>)" and exits 77 (CTest
 * SKIP_RETURN_CODE). Any failure prints the op, the shape and the error, and exits 1.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../test_util.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/cost.h"
#include "kernels/cuda/ops_cuda.h"
#include "device/device.h"
#include "kernels/cuda/gpu.h"
#include "kernels/cuda/kernels_gpu.h"
#include "kernels/kernels.h"
#include "kernels/loss.h"
#include "kernels/precision.h"
#include "layers/rope_freqs.h"
#include "model/model.h"
#include "model/optimizer.h"

/* Tolerances (norm-wise relative, see above). The CPU and the GPU both compute in float32 but
 * add in different orders (OpenBLAS blocks vs cuBLAS tiles, a sequential loop vs a tree), so
 * each carries its own rounding error and the difference is at most about the sum of the two.
 * The CPU kernels' own error against a double-precision evaluation of the same formulas, at
 * these shapes and inputs, measured on the host: at most 8.5e-7 (linear 6.6e-7 at Ni = 1024;
 * LayerNorm backward 6e-7 in dw, 1.1e-7 in dx; attention 8.5e-7 in o and 7.5e-7 in dqkv at
 * T = 1024, hd = 256), except gelu backward's 1.7e-6, which comes from the tanh approximation
 * that the GPU evaluates with the same formula (so it largely cancels in the difference). The
 * GPU's error is of the same size (tree sums are, if anything, closer), so 1e-5 leaves a margin
 * of 5x or more; no op needs the looser 2e-5. 0 where both sides do the same float operations
 * in the same order. */
#define TOL_DEFAULT 1e-5
/* Sums in double of exact float products (sumsq, mse's row sums), in a different order: the
 * reference's own sequential double sum over n terms is off by up to n * 2^-53 relative (2e-9
 * for n = 2e7; measured 1.4e-12 between the two orders there). */
#define TOL_DOUBLE_SUM 1e-9
/* Cross entropy's loss sum (double): each row's log(sum of exps) inherits the CPU's sequential
 * float sum over V terms, whose relative error grows with V (measured: the total off by 2.8e-6
 * relative at V = 50257, 2.6e-7 at V = 4096); the GPU's tree sum is closer. 1e-5. */
#define TOL_CE_LOSS 1e-5
/* The optimizer against PyTorch's formulas in double: float rounding of a few elementwise
 * operations per step, 3 steps (about 1e-7 relative). */
#define TOL_OPTIM 1e-5
/* A whole layer run with each kernel table: a chain of kernels each within TOL_DEFAULT, which
 * layernorm's and softmax's divisions can amplify; the bound the GPU training parity test uses
 * for 20 steps (tests/gpu/train_parity.sh) holds for one step with room to spare. */
#define TOL_LAYER 1e-4

static gpu_ctx G;

/* ---- memory: everything a test allocates is freed by scope_end() ---------------------------- */

#define MAX_PTRS 512
static void *g_host[MAX_PTRS], *g_dev[MAX_PTRS];
static int g_nhost, g_ndev;

static void *hnew(size_t bytes) {
  void *p = calloc(1, bytes ? bytes : 1);
  if (!p || g_nhost == MAX_PTRS) {
    fprintf(stderr, "test_cuda_ops: out of host memory or slots (%zu bytes)\n", bytes);
    exit(1);
  }
  return g_host[g_nhost++] = p;
}

static void *dnew(size_t bytes) {
  if (g_ndev == MAX_PTRS) {
    fprintf(stderr, "test_cuda_ops: out of device slots\n");
    exit(1);
  }
  return g_dev[g_ndev++] = gpu_alloc(&G, bytes);
}

static void scope_end(void) {
  gpu_sync(&G);
  for (int i = 0; i < g_nhost; i++) free(g_host[i]);
  for (int i = 0; i < g_ndev; i++) gpu_free(g_dev[i]);
  g_nhost = g_ndev = 0;
}

/* A forward's y16 output (ops_cuda.h) against its float32 output y: the same values as bf16 bits. */
static void expect_bf16_of(const char *what, const char *shape, const uint16_t *d16,
                           const float *y, int64_t n) {
  uint16_t *got = hnew(sizeof(uint16_t) * (size_t)n);
  gpu_to_host(&G, got, d16, sizeof(uint16_t) * (size_t)n);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; i++) wrong += got[i] != pt_bf16_bits(y[i]);
  CHECK(wrong == 0, "%s %s: y16 differs from y's bf16 bits at %lld of %lld elements", what, shape,
        (long long)wrong, (long long)n);
}

/* ---- random inputs (xorshift64*, fixed seed: the same inputs every run) --------------------- */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;

static double urand(void) { /* [0, 1) */
  g_rng ^= g_rng >> 12;
  g_rng ^= g_rng << 25;
  g_rng ^= g_rng >> 27;
  return (double)((g_rng * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

static float *hrand(int64_t n, float lo, float hi) {
  float *p = hnew(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) p[i] = lo + (hi - lo) * (float)urand();
  return p;
}

static float *hcopy(const float *src, int64_t n) {
  float *p = hnew(sizeof(float) * (size_t)n);
  memcpy(p, src, sizeof(float) * (size_t)n);
  return p;
}

static int32_t *hids(int64_t n, int lo, int hi) { /* ids in [lo, hi) */
  int32_t *p = hnew(sizeof(int32_t) * (size_t)n);
  for (int64_t i = 0; i < n; i++) p[i] = lo + (int32_t)(urand() * (hi - lo));
  return p;
}

/* ---- host <-> device ---------------------------------------------------------------------- */

static void *up(const void *h, size_t bytes) {
  void *d = dnew(bytes);
  gpu_to_device(&G, d, h, bytes);
  return d;
}
static float *upf(const float *h, int64_t n) { return up(h, sizeof(float) * (size_t)n); }
static void setf(float *d, const float *h, int64_t n) {
  gpu_to_device(&G, d, h, sizeof(float) * (size_t)n);
}
static float *downf(const float *d, int64_t n) {
  float *h = hnew(sizeof(float) * (size_t)n);
  gpu_to_host(&G, h, d, sizeof(float) * (size_t)n);
  return h;
}
static double down_double(const double *d) {
  double v;
  gpu_to_host(&G, &v, d, sizeof v);
  return v;
}

/* ---- comparisons -------------------------------------------------------------------------- */

/* max|gpu - cpu| / max|cpu|; *at: the element of the largest difference. NaN anywhere: inf. */
static double rel_err(const float *gpu, const float *cpu, int64_t n, int64_t *at) {
  double maxdiff = 0.0, maxref = 0.0;
  *at = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)gpu[i] - (double)cpu[i]);
    if (isnan(d) && !(isnan(gpu[i]) && isnan(cpu[i]))) {
      *at = i;
      return INFINITY;
    }
    if (d > maxdiff) maxdiff = d, *at = i;
    if (fabs((double)cpu[i]) > maxref) maxref = fabs((double)cpu[i]);
  }
  if (maxdiff == 0.0) return 0.0;
  return maxdiff / (maxref > 1e-30 ? maxref : 1e-30);
}

static void expect_close(const char *op, const char *shape, const float *gpu, const float *cpu,
                         int64_t n, double tol) {
  int64_t at;
  double e = rel_err(gpu, cpu, n, &at);
  CHECK(e <= tol, "%s [%s]: max|gpu-cpu|/max|cpu| = %.3g > %.1g (element %lld: gpu %.9g, cpu %.9g)",
        op, shape, e, tol, (long long)at, n ? gpu[at] : 0.0f, n ? cpu[at] : 0.0f);
}

/* The determinism check: two runs of the same op on the same inputs, bit for bit. */
static void expect_same_bits(const char *op, const char *shape, const float *a, const float *b,
                             int64_t n) {
  int64_t at = -1;
  for (int64_t i = 0; i < n && at < 0; i++)
    if (memcmp(&a[i], &b[i], sizeof(float)) != 0) at = i;
  CHECK(at < 0, "%s [%s]: not deterministic: two runs differ at element %lld (%.9g vs %.9g)", op,
        shape, (long long)at, at >= 0 ? a[at] : 0.0f, at >= 0 ? b[at] : 0.0f);
}

static void expect_close_d(const char *op, const char *shape, double gpu, double cpu,
                           double tol) {
  double e = fabs(gpu - cpu) / (fabs(cpu) > 1e-300 ? fabs(cpu) : 1e-300);
  CHECK(e <= tol, "%s [%s]: |gpu-cpu|/|cpu| = %.3g > %.1g (gpu %.17g, cpu %.17g)", op, shape, e,
        tol, gpu, cpu);
}

/* ---- memory ------------------------------------------------------------------------------- */

/* gpu_alloc's memory reads zero through the rank's stream, and a copy queued there right after
 * the allocation is not zeroed over: the zeroing is ordered on that stream. (It once ran as
 * cudaMemset on the legacy default stream, which the rank's non-blocking stream does not wait
 * for; a GPU rarely shows the race, an emulation that runs streams in an adversarial order
 * and returns cudaMalloc memory unzeroed does.) */
static void test_alloc_zeroed(void) {
  const size_t n = (1u << 16) + 3;
  for (int round = 0; round < 4; round++) {
    unsigned char *zero = dnew(n), *filled = dnew(n), *h = hnew(n), *back = hnew(n);
    memset(h, 0xA5, n);
    gpu_to_device(&G, filled, h, n);
    gpu_to_host(&G, back, zero, n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += back[i] != 0;
    gpu_to_host(&G, back, filled, n);
    for (size_t i = 0; i < n; i++) bad += back[i] != 0xA5;
    CHECK(bad == 0, "gpu_alloc [round %d, %zu bytes]: %zu bytes not as written: the zeroing is "
          "not ordered with the rank's stream", round, n, bad);
    scope_end();
  }
}

/* ---- linear ------------------------------------------------------------------------------- */

static void test_linear(int N, int Ni, int No) {
  char shape[96];
  snprintf(shape, sizeof shape, "N=%d Ni=%d No=%d", N, Ni, No);
  int64_t nx = (int64_t)N * Ni, ny = (int64_t)N * No, nw = (int64_t)No * Ni;
  float *x = hrand(nx, -1, 1), *W = hrand(nw, -1, 1), *b = hrand(No, -1, 1);
  float *res = hrand(ny, -1, 1), *dy = hrand(ny, -1, 1);
  float *dx0 = hrand(nx, -1, 1), *dW0 = hrand(nw, -1, 1), *db0 = hrand(No, -1, 1);
  float *d_x = upf(x, nx), *d_W = upf(W, nw), *d_b = upf(b, No), *d_res = upf(res, ny);
  float *d_dy = upf(dy, ny), *d_y = dnew(sizeof(float) * ny), *d_dx = dnew(sizeof(float) * nx);
  float *d_dW = dnew(sizeof(float) * nw), *d_db = dnew(sizeof(float) * No);

  /* forward, with and without the bias */
  for (int with_b = 1; with_b >= 0; with_b--) {
    const char *op = with_b ? "linear_forward" : "linear_forward (no bias)";
    float *yc = hnew(sizeof(float) * ny);
    op_linear_forward(yc, x, W, with_b ? b : NULL, N, Ni, No);
    cuda_op_linear_forward(&G, d_y, d_x, d_W, with_b ? d_b : NULL, N, Ni, No);
    float *y1 = downf(d_y, ny);
    cuda_op_linear_forward(&G, d_y, d_x, d_W, with_b ? d_b : NULL, N, Ni, No);
    expect_close(op, shape, y1, yc, ny, TOL_DEFAULT);
    expect_same_bits(op, shape, downf(d_y, ny), y1, ny);
  }
  { /* forward with the residual */
    float *yc = hnew(sizeof(float) * ny);
    op_linear_forward_residual(yc, res, x, W, b, N, Ni, No);
    cuda_op_linear_forward_residual(&G, d_y, d_res, d_x, d_W, d_b, N, Ni, No);
    float *y1 = downf(d_y, ny);
    cuda_op_linear_forward_residual(&G, d_y, d_res, d_x, d_W, d_b, N, Ni, No);
    expect_close("linear_forward_residual", shape, y1, yc, ny, TOL_DEFAULT);
    expect_same_bits("linear_forward_residual", shape, downf(d_y, ny), y1, ny);
  }
  /* backward input, overwriting (acc 0, over garbage) and accumulating (acc 1) */
  for (int acc = 0; acc <= 1; acc++) {
    const char *op = acc ? "linear_backward_input acc=1" : "linear_backward_input acc=0";
    float *dxc = hcopy(dx0, nx);
    op_linear_backward_input(dxc, dy, W, N, Ni, No, acc);
    setf(d_dx, dx0, nx);
    cuda_op_linear_backward_input(&G, d_dx, d_dy, d_W, N, Ni, No, acc);
    float *g1 = downf(d_dx, nx);
    setf(d_dx, dx0, nx);
    cuda_op_linear_backward_input(&G, d_dx, d_dy, d_W, N, Ni, No, acc);
    expect_close(op, shape, g1, dxc, nx, TOL_DEFAULT);
    expect_same_bits(op, shape, downf(d_dx, nx), g1, nx);
  }
  /* backward weight: dW += dy^T x, db += colsum(dy), from non-zero gradients; and db NULL */
  for (int with_db = 1; with_db >= 0; with_db--) {
    const char *op = with_db ? "linear_backward_weight" : "linear_backward_weight (db NULL)";
    float *dWc = hcopy(dW0, nw), *dbc = hcopy(db0, No);
    op_linear_backward_weight(dWc, with_db ? dbc : NULL, dy, x, N, Ni, No);
    float *gW[2], *gb[2];
    for (int run = 0; run < 2; run++) {
      setf(d_dW, dW0, nw);
      setf(d_db, db0, No);
      cuda_op_linear_backward_weight(&G, d_dW, with_db ? d_db : NULL, d_dy, d_x, N, Ni, No);
      gW[run] = downf(d_dW, nw);
      gb[run] = downf(d_db, No);
    }
    expect_close(op, shape, gW[0], dWc, nw, TOL_DEFAULT);
    expect_close(with_db ? "linear_backward_weight db" : "linear_backward_weight db untouched",
                 shape, gb[0], dbc, No, with_db ? TOL_DEFAULT : 0.0);
    expect_same_bits(op, shape, gW[1], gW[0], nw);
    expect_same_bits(op, shape, gb[1], gb[0], No);
  }
  scope_end();
}

/* ---- linear + gelu (the MLP's fc) --------------------------------------------------------- */

/* Launches the cost ledger holds for a kernel name (kernels/cuda/cost.h). */
static uint64_t ledger_launches(const char *kernel) {
  for (int i = 0; i < gpu_cost_count(); i++)
    if (!strcmp(gpu_cost_row_at(i)->kernel, kernel)) return gpu_cost_row_at(i)->launches;
  return 0;
}

/* Bytes the cost ledger holds for a kernel name. */
static double ledger_bytes(const char *kernel) {
  for (int i = 0; i < gpu_cost_count(); i++)
    if (!strcmp(gpu_cost_row_at(i)->kernel, kernel)) return gpu_cost_row_at(i)->bytes;
  return 0.0;
}

/* FLOPs off the tensor cores the cost ledger holds for a kernel name. */
static double ledger_other_flops(const char *kernel) {
  for (int i = 0; i < gpu_cost_count(); i++)
    if (!strcmp(gpu_cost_row_at(i)->kernel, kernel)) return gpu_cost_row_at(i)->other_flops;
  return 0.0;
}

/* The bf16 DGELU (ops_cuda.h h16, dh16): with h read from its bf16 copy and dh written to its
 * place, one matmul with a bf16 D and aux gives the bf16 bits of the float32 path's dh on h
 * rounded to bf16, writing no floats; in place (dh16 is h16) the same; with h16 alone, h is
 * widened from it and dh's floats are the float32 path's. */
static void test_dgelu_bf16(const char *shape, const float *h, const float *d_dy, const float *d_W,
                            float *d_scratch, int N, int Ni, int No) {
  int64_t nx = (int64_t)N * Ni;
  cuda_bf16_scratch s = {0};
  float *hr = hcopy(h, nx), *junk = hrand(nx, -1, 1);
  uint16_t *h16 = hnew(sizeof(uint16_t) * (size_t)nx);
  for (int64_t i = 0; i < nx; i++) h16[i] = pt_bf16_bits(h[i]), hr[i] = pt_round_bf16(h[i]);
  float *d_want = dnew(sizeof(float) * nx), *d_hr = upf(hr, nx);
  cuda_op_linear_backward_input_gelu(&G, &s, d_want, NULL, d_dy, d_W, d_hr, NULL, d_scratch, N,
                                     Ni, No);
  float *want = downf(d_want, nx);
  uint16_t *d_h16 = dnew(sizeof(uint16_t) * (size_t)nx), *d_dh16 = dnew(sizeof(uint16_t) * nx);
  gpu_to_device(&G, d_h16, h16, sizeof(uint16_t) * (size_t)nx);
  float *d_junk = upf(junk, nx);
  uint64_t l0 = ledger_launches("cublasLt_dgelu:bf16");
  cuda_op_linear_backward_input_gelu(&G, &s, d_junk, d_dh16, d_dy, d_W, d_junk, d_h16, d_scratch,
                                     N, Ni, No);
  CHECK(ledger_launches("cublasLt_dgelu:bf16") - l0 == 1, "%s: DGELU with h16 and dh16 is not "
        "one bf16 matmul", shape);
  expect_bf16_of("linear_backward_input_gelu h16 -> dh16", shape, d_dh16, want, nx);
  expect_same_bits("linear_backward_input_gelu h16 -> dh16: no floats", shape, downf(d_junk, nx),
                   junk, nx);
  cuda_op_linear_backward_input_gelu(&G, &s, d_junk, d_h16, d_dy, d_W, d_junk, d_h16, d_scratch,
                                     N, Ni, No); /* in place */
  expect_bf16_of("linear_backward_input_gelu in place (dh16 is h16)", shape, d_h16, want, nx);
  gpu_to_device(&G, d_h16, h16, sizeof(uint16_t) * (size_t)nx);
  float *d_dh = dnew(sizeof(float) * nx);
  cuda_op_linear_backward_input_gelu(&G, &s, d_dh, NULL, d_dy, d_W, d_junk, d_h16, d_scratch, N,
                                     Ni, No);
  expect_same_bits("linear_backward_input_gelu h16 alone: h widened", shape, downf(d_junk, nx),
                   hr, nx);
  expect_same_bits("linear_backward_input_gelu h16 alone: dh", shape, downf(d_dh, nx), want, nx);
  cuda_bf16_scratch_free(&s);
}

/* h = x W^T + b, y = gelu(h) and dh = (dy W) * gelu'(h) against the CPU's separate calls; one
 * cuBLASLt matmul each (GELU_AUX_BIAS, DGELU: the ledger shows it) where the auxiliary matrix's
 * leading dimension (No forward, Ni backward) is a multiple of 8, else the separate kernels. */
static void test_linear_gelu(int N, int Ni, int No) {
  char shape[96];
  snprintf(shape, sizeof shape, "N=%d Ni=%d No=%d", N, Ni, No);
  int64_t nx = (int64_t)N * Ni, ny = (int64_t)N * No, nw = (int64_t)No * Ni;
  float *x = hrand(nx, -1, 1), *W = hrand(nw, -1, 1), *b = hrand(No, -1, 1);
  float *d_x = upf(x, nx), *d_W = upf(W, nw), *d_b = upf(b, No);
  float *d_y = dnew(sizeof(float) * ny), *d_h = dnew(sizeof(float) * ny);
  float *hc = hnew(sizeof(float) * ny), *yc = hnew(sizeof(float) * ny);
  op_linear_forward(hc, x, W, b, N, Ni, No);
  op_gelu_forward(yc, hc, ny);
  uint64_t fused0 = ledger_launches("cublasLt_gelu_aux_bias");
  cuda_op_linear_forward_gelu(&G, NULL, d_y, NULL, d_h, NULL, d_x, d_W, d_b, N, Ni, No);
  float *y1 = downf(d_y, ny), *h1 = downf(d_h, ny);
  cuda_op_linear_forward_gelu(&G, NULL, d_y, NULL, d_h, NULL, d_x, d_W, d_b, N, Ni, No);
  expect_close("linear_forward_gelu h", shape, h1, hc, ny, TOL_DEFAULT);
  expect_close("linear_forward_gelu y", shape, y1, yc, ny, TOL_DEFAULT);
  expect_same_bits("linear_forward_gelu h", shape, downf(d_h, ny), h1, ny);
  expect_same_bits("linear_forward_gelu y", shape, downf(d_y, ny), y1, ny);
  CHECK(ledger_launches("cublasLt_gelu_aux_bias") - fused0 == (No % 8 == 0 ? 2u : 0u),
        "linear_forward_gelu [%s]: fused %llu times of 2, expected %s", shape,
        (unsigned long long)(ledger_launches("cublasLt_gelu_aux_bias") - fused0),
        No % 8 == 0 ? "both" : "none (aux leading dimension not a multiple of 8)");

  /* backward: the layer's input side is now the gelu's (dh, h [N, Ni]) */
  float *dy = hrand(ny, -1, 1), *h = hrand(nx, -4, 4), *d_dy = upf(dy, ny);
  float *d_hin = upf(h, nx), *d_dh = dnew(sizeof(float) * nx);
  float *d_scratch = dnew(sizeof(float) * nx), *dhc = hnew(sizeof(float) * nx);
  op_linear_backward_input(dhc, dy, W, N, Ni, No, 0);
  op_gelu_backward(dhc, dhc, h, nx);
  uint64_t dfused0 = ledger_launches("cublasLt_dgelu");
  cuda_op_linear_backward_input_gelu(&G, NULL, d_dh, NULL, d_dy, d_W, d_hin, NULL, d_scratch, N,
                                     Ni, No);
  float *dh1 = downf(d_dh, nx);
  expect_close("linear_backward_input_gelu", shape, dh1, dhc, nx, TOL_DEFAULT);
  /* in place, as the transformer block calls it (h overwritten by d(fc output)) */
  cuda_op_linear_backward_input_gelu(&G, NULL, d_hin, NULL, d_dy, d_W, d_hin, NULL, d_scratch, N,
                                     Ni, No);
  expect_same_bits("linear_backward_input_gelu (dh aliases h)", shape, downf(d_hin, nx), dh1, nx);
  CHECK(ledger_launches("cublasLt_dgelu") - dfused0 == (Ni % 8 == 0 ? 2u : 0u),
        "linear_backward_input_gelu [%s]: fused %llu times of 2", shape,
        (unsigned long long)(ledger_launches("cublasLt_dgelu") - dfused0));
  if (Ni % 8 == 0) test_dgelu_bf16(shape, h, d_dy, d_W, d_scratch, N, Ni, No);
  scope_end();
}

/* ---- layernorm ---------------------------------------------------------------------------- */

static void test_layernorm(int N, int D) {
  char shape[64];
  snprintf(shape, sizeof shape, "N=%d D=%d", N, D);
  int64_t n = (int64_t)N * D;
  const float eps = 1e-5f;
  float *x = hrand(n, -1, 1), *w = hrand(D, 0.5f, 1.5f), *b = hrand(D, -0.5f, 0.5f);
  for (int r = 0; r < N; r++) { /* rows with an offset and a scale of their own */
    float off = 4.0f * (float)urand() - 2.0f, sc = 0.1f + 3.0f * (float)urand();
    for (int i = 0; i < D; i++) x[(int64_t)r * D + i] = off + sc * x[(int64_t)r * D + i];
  }
  float *dy = hrand(n, -1, 1), *dx0 = hrand(n, -1, 1), *dw0 = hrand(D, -1, 1);
  float *db0 = hrand(D, -1, 1);
  float *yc = hnew(sizeof(float) * n), *mc = hnew(sizeof(float) * N), *rc = hnew(sizeof(float) * N);
  op_layernorm_forward(yc, mc, rc, x, w, b, N, D, eps);

  float *d_x = upf(x, n), *d_w = upf(w, D), *d_b = upf(b, D), *d_dy = upf(dy, n);
  float *d_y = dnew(sizeof(float) * n), *d_m = dnew(sizeof(float) * N);
  float *d_r = dnew(sizeof(float) * N);
  cuda_op_layernorm_forward(&G, d_y, NULL, d_m, d_r, d_x, NULL, d_w, d_b, N, D, eps);
  float *y1 = downf(d_y, n), *m1 = downf(d_m, N), *r1 = downf(d_r, N);
  cuda_op_layernorm_forward(&G, d_y, NULL, d_m, d_r, d_x, NULL, d_w, d_b, N, D, eps);
  expect_close("layernorm_forward y", shape, y1, yc, n, TOL_DEFAULT);
  expect_close("layernorm_forward mean", shape, m1, mc, N, TOL_DEFAULT);
  expect_close("layernorm_forward rstd", shape, r1, rc, N, TOL_DEFAULT);
  expect_same_bits("layernorm_forward y", shape, downf(d_y, n), y1, n);
  expect_same_bits("layernorm_forward mean", shape, downf(d_m, N), m1, N);
  expect_same_bits("layernorm_forward rstd", shape, downf(d_r, N), r1, N);
  uint16_t *d_y16 = dnew(sizeof(uint16_t) * n);
  cuda_op_layernorm_forward(&G, d_y, d_y16, d_m, d_r, d_x, NULL, d_w, d_b, N, D, eps);
  expect_bf16_of("layernorm_forward", shape, d_y16, y1, n);

  /* the backward ops get the CPU's mean and rstd: each op is compared on the same inputs */
  setf(d_m, mc, N);
  setf(d_r, rc, N);
  float *d_dx = dnew(sizeof(float) * n);
  for (int acc = 0; acc <= 1; acc++) {
    const char *op = acc ? "layernorm_backward_input acc=1" : "layernorm_backward_input acc=0";
    float *dxc = hcopy(dx0, n);
    op_layernorm_backward_input(dxc, dy, x, w, mc, rc, N, D, acc);
    setf(d_dx, dx0, n);
    cuda_op_layernorm_backward_input(&G, d_dx, NULL, d_dy, NULL, d_x, NULL, d_w, d_m, d_r, N, D,
                                     acc, 0);
    float *g1 = downf(d_dx, n);
    setf(d_dx, dx0, n);
    cuda_op_layernorm_backward_input(&G, d_dx, NULL, d_dy, NULL, d_x, NULL, d_w, d_m, d_r, N, D,
                                     acc, 0);
    expect_close(op, shape, g1, dxc, n, TOL_DEFAULT);
    expect_same_bits(op, shape, downf(d_dx, n), g1, n);
  }
  {
    float *dwc = hcopy(dw0, D), *dbc = hcopy(db0, D);
    op_layernorm_backward_weight(dwc, dbc, dy, x, mc, rc, N, D);
    float *d_dw = dnew(sizeof(float) * D), *d_db = dnew(sizeof(float) * D);
    float *gw[2], *gb[2];
    for (int run = 0; run < 2; run++) {
      setf(d_dw, dw0, D);
      setf(d_db, db0, D);
      cuda_op_layernorm_backward_weight(&G, d_dw, d_db, d_dy, d_x, d_m, d_r, N, D);
      gw[run] = downf(d_dw, D);
      gb[run] = downf(d_db, D);
    }
    expect_close("layernorm_backward_weight dw", shape, gw[0], dwc, D, TOL_DEFAULT);
    expect_close("layernorm_backward_weight db", shape, gb[0], dbc, D, TOL_DEFAULT);
    expect_same_bits("layernorm_backward_weight dw", shape, gw[1], gw[0], D);
    expect_same_bits("layernorm_backward_weight db", shape, gb[1], gb[0], D);
  }
  scope_end();
}

/* ---- residual + norm (ops_norm_residual.cu) ------------------------------------------------ */

/* One GPU run of each fused residual norm, kind 0 layernorm, 1 rmsnorm: forward's x1 (over a
 * when alias) and y, mean, rstd into out[0..3], backward's dx (over dres when alias) into out[4]. */
static void norm_residual_gpu(int kind, int alias, int N, int D, const float *a, const float *b,
                              const float *w, const float *bias, const float *dres,
                              const float *dy, const float *x, const float *m, const float *r,
                              float *out[5]) {
  const int64_t n = (int64_t)N * D;
  float *d_a = upf(a, n), *d_b = upf(b, n), *d_w = upf(w, D), *d_bias = upf(bias, D);
  float *d_x1 = alias ? d_a : dnew(sizeof(float) * n), *d_y = dnew(sizeof(float) * n);
  float *d_m = dnew(sizeof(float) * N), *d_r = dnew(sizeof(float) * N);
  float *d_dres = upf(dres, n), *d_dx = alias ? d_dres : dnew(sizeof(float) * n);
  float *d_dy = upf(dy, n), *d_x = upf(x, n), *d_cm = upf(m, N), *d_cr = upf(r, N);
  if (kind == 0) {
    cuda_op_layernorm_forward_residual(&G, d_x1, d_y, d_m, d_r, d_a, d_b, d_w, d_bias, N, D, 1e-5f);
    cuda_op_layernorm_backward_input_residual(&G, d_dx, NULL, d_dres, d_dy, NULL, d_x, NULL, d_w,
                                              d_cm, d_cr, N, D, 0);
  } else {
    cuda_op_rmsnorm_forward_residual(&G, d_x1, NULL, d_y, NULL, d_r, d_a, d_b, d_w, N, D, 1e-6f);
    cuda_op_rmsnorm_backward_input_residual(&G, d_dx, NULL, d_dres, d_dy, NULL, d_x, NULL, d_w,
                                            d_cr, N, D, 0);
  }
  out[0] = downf(d_x1, n), out[1] = downf(d_y, n), out[2] = kind == 0 ? downf(d_m, N) : NULL;
  out[3] = downf(d_r, N), out[4] = downf(d_dx, n);
}

/* The fused kernels against the CPU table's fused entries (which are the separate calls' bits,
 * tests/kernels/test_norm_residual.c); twice, and with the outputs over their residual
 * inputs, the same bits. The backward gets the CPU's x1 and statistics. */
static void test_norm_residual(int kind, int N, int D) {
  const char *name = kind == 0 ? "layernorm" : "rmsnorm";
  char shape[64], op[96];
  snprintf(shape, sizeof shape, "N=%d D=%d", N, D);
  const int64_t n = (int64_t)N * D;
  float *a = hrand(n, -2, 2), *b = hrand(n, -1, 3), *w = hrand(D, 0.5f, 1.5f);
  float *bias = hrand(D, -0.5f, 0.5f), *dres = hrand(n, -1, 1), *dy = hrand(n, -1, 1);
  float *x1 = hnew(sizeof(float) * n), *y = hnew(sizeof(float) * n), *dx = hnew(sizeof(float) * n);
  float *m = hnew(sizeof(float) * N), *r = hnew(sizeof(float) * N);
  const pt_kernels *c = &kernels_cpu;
  if (kind == 0) {
    c->layernorm_forward_residual(c, x1, y, m, r, a, b, w, bias, N, D, 1e-5f);
    c->layernorm_backward_input_residual(c, dx, dres, dy, x1, w, m, r, N, D);
  } else {
    c->rmsnorm_forward_residual(c, x1, y, r, a, b, w, N, D, 1e-6f);
    c->rmsnorm_backward_input_residual(c, dx, dres, dy, x1, w, r, N, D);
  }
  float *g[3][5];
  for (int run = 0; run < 3; run++) /* run 2: x1 over a, dx over dres */
    norm_residual_gpu(kind, run == 2, N, D, a, b, w, bias, dres, dy, x1, m, r, g[run]);
  const float *cpu[5] = {x1, y, m, r, dx};
  const int64_t len[5] = {n, n, N, N, n};
  static const char *const part[5] = {"x1", "y", "mean", "rstd", "dx"};
  for (int i = 0; i < 5; i++) {
    if (!g[0][i]) continue;
    snprintf(op, sizeof op, "%s residual %s", name, part[i]);
    expect_close(op, shape, g[0][i], cpu[i], len[i], i == 0 ? 0.0 : TOL_DEFAULT);
    expect_same_bits(op, shape, g[1][i], g[0][i], len[i]);
    snprintf(op, sizeof op, "%s residual %s (over its input)", name, part[i]);
    expect_same_bits(op, shape, g[2][i], g[0][i], len[i]);
  }
  scope_end();
}

/* ---- gelu, relu --------------------------------------------------------------------------- */

static void test_activations(int64_t n) {
  char shape[64];
  snprintf(shape, sizeof shape, "n=%lld", (long long)n);
  float *x = hrand(n, -6, 6), *dy = hrand(n, -1, 1);
  x[0] = 0.0f, x[n - 1] = -0.0f; /* relu's edge */
  float *d_x = upf(x, n), *d_dy = upf(dy, n), *d_out = dnew(sizeof(float) * n);
  float *yc = hnew(sizeof(float) * n), *dxc = hnew(sizeof(float) * n);

  op_gelu_forward(yc, x, n);
  cuda_op_gelu_forward(&G, d_out, d_x, n);
  float *g1 = downf(d_out, n);
  cuda_op_gelu_forward(&G, d_out, d_x, n);
  expect_close("gelu_forward", shape, g1, yc, n, TOL_DEFAULT);
  expect_same_bits("gelu_forward", shape, downf(d_out, n), g1, n);

  op_gelu_backward(dxc, dy, x, n);
  cuda_op_gelu_backward(&G, d_out, d_dy, d_x, n);
  g1 = downf(d_out, n);
  cuda_op_gelu_backward(&G, d_out, d_dy, d_x, n);
  expect_close("gelu_backward", shape, g1, dxc, n, TOL_DEFAULT);
  expect_same_bits("gelu_backward", shape, downf(d_out, n), g1, n);
  /* dx == x, as the transformer block calls it (h overwritten by d(fc output)) */
  float *d_h = upf(x, n);
  cuda_op_gelu_backward(&G, d_h, d_dy, d_h, n);
  expect_same_bits("gelu_backward (dx aliases x)", shape, downf(d_h, n), g1, n);

  /* relu: the same float comparison on both sides, exact */
  op_relu_forward(yc, x, n);
  op_relu_backward(dxc, dy, x, n);
  cuda_op_relu_forward(&G, d_out, d_x, n);
  g1 = downf(d_out, n);
  expect_same_bits("relu_forward (vs cpu)", shape, g1, yc, n);
  cuda_op_relu_backward(&G, d_out, d_dy, d_x, n);
  g1 = downf(d_out, n);
  expect_same_bits("relu_backward (vs cpu)", shape, g1, dxc, n);
  scope_end();
}

/* ---- attention ---------------------------------------------------------------------------- */

/* Each row's log-sum-exp of the scaled causal scores (opts: window, soft-cap, scale), in double
 * from qkv: the reference for what the fused forward saves (and the input its backward is
 * tested on). */
static float *attention_lse_reference(const float *qkv, int B, int T, int d, int H, int KVH,
                                      const int32_t *doc, const pt_attention_opts *opts) {
  const int hd = d / H, ld = d + 2 * KVH * hd, R = H / KVH;
  const double scale = opts->scale > 0 ? opts->scale : 1.0 / sqrt((double)hd);
  float *lse = hnew(sizeof(float) * (size_t)B * H * T);
  double *s = malloc(sizeof(double) * (size_t)T);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int t = 0; t < T; t++) {
        const float *q = qkv + ((int64_t)b * T + t) * ld + h * hd;
        double mx = -INFINITY, sum = 0.0;
        int lo = doc ? doc[b * T + t] : 0; /* packed documents: keys lo .. t */
        if (pt_attention_first_key(opts, t) > lo) lo = pt_attention_first_key(opts, t);
        for (int j = lo; j <= t; j++) {
          const float *k = qkv + ((int64_t)b * T + j) * ld + d + (h / R) * hd;
          double dot = 0.0;
          for (int i = 0; i < hd; i++) dot += (double)q[i] * k[i];
          s[j] = dot * scale;
          if (opts->softcap > 0) s[j] = opts->softcap * tanh(s[j] / opts->softcap);
          mx = s[j] > mx ? s[j] : mx;
        }
        for (int j = lo; j <= t; j++) sum += exp(s[j] - mx);
        lse[((int64_t)b * H + h) * T + t] = (float)(mx + log(sum));
      }
  free(s);
  return lse;
}

/* The fused GPU attention (it saves lse[B,H,T], not the probabilities) against the CPU's:
 * forward o against the CPU's o and lse against the double reference; backward dqkv, from the
 * CPU's o and the reference lse (each op on the same inputs), against the CPU's dqkv. Outputs
 * start as garbage and every call runs twice: the same bits (no atomics, fixed orders). */
static void attention_case(int B, int T, int d, int H, int KVH, const int32_t *doc,
                           const pt_attention_opts *opts) {
  char shape[160];
  snprintf(shape, sizeof shape, "B=%d T=%d d=%d H=%d KVH=%d (hd=%d)%s window=%d softcap=%g "
           "scale=%g", B, T, d, H, KVH, d / H, doc ? " documents" : "", opts->window,
           (double)opts->softcap, (double)opts->scale);
  int64_t nqkv = (int64_t)B * T * (d + 2 * KVH * (d / H)), no = (int64_t)B * T * d;
  int64_t np = (int64_t)B * H * T * T, nl = (int64_t)B * H * T;
  CHECK(cuda_op_attention_saved_floats(B, T, d, H, KVH) == nl, "attention saved [%s]: %lld "
        "floats, expected B*H*T = %lld", shape,
        (long long)cuda_op_attention_saved_floats(B, T, d, H, KVH), (long long)nl);
  CHECK(cuda_op_attention_scratch_floats(B, T, d, H, KVH) == 0, "attention scratch [%s]: not 0",
        shape);
  float *qkv = hrand(nqkv, -2, 2), *dout = hrand(no, -1, 1);
  float *oc = hnew(sizeof(float) * no), *pc = hnew(sizeof(float) * np);
  float *dqkvc = hnew(sizeof(float) * nqkv);
  float *scr = hnew(sizeof(float) * (size_t)op_attention_scratch_floats(T, d, H, KVH));
  op_attention_forward(oc, pc, qkv, B, T, d, H, KVH, doc, opts, scr);
  op_attention_backward(dqkvc, dout, qkv, pc, B, T, d, H, KVH, doc, opts, scr);
  float *lse_ref = attention_lse_reference(qkv, B, T, d, H, KVH, doc, opts);
  const int32_t *d_doc = doc ? up(doc, sizeof(int32_t) * (size_t)B * T) : NULL;

  float *garbage_o = hrand(no, 5, 6), *garbage_l = hrand(nl, 5, 6), *garbage_qkv = hrand(nqkv, 5, 6);
  float *d_qkv = upf(qkv, nqkv), *d_dout = upf(dout, no), *d_o = upf(garbage_o, no);
  float *d_lse = upf(garbage_l, nl), *d_dqkv = upf(garbage_qkv, nqkv);
  cuda_op_attention_forward(&G, d_o, d_lse, d_qkv, B, T, d, H, KVH, d_doc, opts, NULL);
  float *o1 = downf(d_o, no), *l1 = downf(d_lse, nl);
  setf(d_o, garbage_o, no);
  setf(d_lse, garbage_l, nl);
  cuda_op_attention_forward(&G, d_o, d_lse, d_qkv, B, T, d, H, KVH, d_doc, opts, NULL);
  expect_close("attention_forward o", shape, o1, oc, no, TOL_DEFAULT);
  expect_close("attention_forward lse", shape, l1, lse_ref, nl, TOL_DEFAULT);
  expect_same_bits("attention_forward o", shape, downf(d_o, no), o1, no);
  expect_same_bits("attention_forward lse", shape, downf(d_lse, nl), l1, nl);

  setf(d_o, oc, no);
  setf(d_lse, lse_ref, nl);
  cuda_op_attention_backward(&G, d_dqkv, d_dout, d_qkv, d_o, d_lse, B, T, d, H, KVH, d_doc, opts,
                             NULL);
  float *g1 = downf(d_dqkv, nqkv);
  setf(d_dqkv, garbage_qkv, nqkv);
  cuda_op_attention_backward(&G, d_dqkv, d_dout, d_qkv, d_o, d_lse, B, T, d, H, KVH, d_doc, opts,
                             NULL);
  expect_close("attention_backward dqkv", shape, g1, dqkvc, nqkv, TOL_DEFAULT);
  expect_same_bits("attention_backward dqkv", shape, downf(d_dqkv, nqkv), g1, nqkv);
  scope_end();
}

static void test_attention_gqa(int B, int T, int d, int H, int KVH) {
  attention_case(B, T, d, H, KVH, NULL, &(pt_attention_opts){0});
}

static void test_attention(int B, int T, int d, int H) { test_attention_gqa(B, T, d, H, H); }

/* Random packed documents per row (data.documents): doc_start [B,T], documents of 1 .. max_len
 * tokens (some crossing the fused kernels' tiles, some inside one), the first row one document. */
static int32_t *random_docs(int B, int T, int max_len) {
  int32_t *doc = hnew(sizeof(int32_t) * (size_t)B * T);
  for (int b = 0; b < B; b++)
    for (int t = 0, start = 0, end = 0; t < T; t++) {
      if (t == end && b > 0) start = t, end = t + 1 + (int)(urand() * max_len);
      if (b == 0) end = T + 1;
      doc[b * T + t] = start;
    }
  return doc;
}

/* The fused attention with a document mask against the CPU's (and the double lse). */
static void test_attention_docs(int B, int T, int d, int H, int KVH, int max_len) {
  attention_case(B, T, d, H, KVH, random_docs(B, T, max_len), &(pt_attention_opts){0});
}

/* The fused attention with a window, soft-capping or another scale (documents too) against the
 * CPU's; tiles wholly outside the band are skipped, which must change nothing. */
static void test_attention_opts(int B, int T, int d, int H, int KVH, int docs, int window,
                                float softcap, float scale) {
  const pt_attention_opts o = {.window = window, .softcap = softcap, .scale = scale};
  attention_case(B, T, d, H, KVH, docs ? random_docs(B, T, docs) : NULL, &o);
}

/* Positions restarting per document: pos_* exact against the CPU (the same (b, t) order), rope
 * close (cos/sin as the CPU's) and deterministic. */
static void test_positions(int B, int T, int D, int H, int KVH, int hd) {
  char shape[96];
  snprintf(shape, sizeof shape, "B=%d T=%d D=%d positions", B, T, D);
  const int32_t *doc = random_docs(B, T, 9);
  int32_t *p = hnew(sizeof(int32_t) * (size_t)B * T);
  for (int i = 0; i < B * T; i++) p[i] = i % T - doc[i];
  const int32_t *d_p = up(p, sizeof(int32_t) * (size_t)B * T);
  int64_t TD = (int64_t)T * D, n = (int64_t)B * TD;
  float *x = hrand(n, -1, 1), *pos = hrand(TD, -1, 1), *dy = hrand(n, -1, 1);
  float *dpos0 = hrand(TD, -1, 1), *yc = hnew(sizeof(float) * n), *dpc = hcopy(dpos0, TD);
  kernels_cpu.pos_forward(&kernels_cpu, yc, x, pos, B, T, D, p);
  kernels_cpu.pos_backward_weight(&kernels_cpu, dpc, dy, B, T, D, p);
  float *d_y = dnew(sizeof(float) * n), *d_dp = upf(dpos0, TD);
  cuda_op_pos_forward(&G, d_y, upf(x, n), upf(pos, TD), B, T, D, d_p);
  expect_same_bits("pos_forward (vs cpu)", shape, downf(d_y, n), yc, n);
  cuda_op_pos_backward_weight(&G, d_dp, upf(dy, n), B, T, D, d_p);
  expect_same_bits("pos_backward_weight (vs cpu, (b, t) order)", shape, downf(d_dp, TD), dpc, TD);
  int64_t nr = (int64_t)B * T * (H + 2 * KVH) * hd;
  float *r = hrand(nr, -2, 2), *rc = hcopy(r, nr), *d_r = upf(r, nr);
  pt_rope_freqs f;
  rope_freqs_make(&(pt_rope_scaling){.theta = 10000.0}, hd, &f);
  op_rope(rc, B, T, H, KVH, hd, &f, 1, p);
  cuda_op_rope(&G, d_r, NULL, NULL, B, T, H, KVH, hd, &f, 1, d_p);
  expect_close("rope dir=1 positions", shape, downf(d_r, nr), rc, nr, TOL_DEFAULT);
  op_rope(rc, B, T, H, KVH, hd, &f, -1, p);
  cuda_op_rope(&G, d_r, NULL, NULL, B, T, H, KVH, hd, &f, -1, d_p);
  expect_close("rope dir=-1 positions (back to x)", shape, downf(d_r, nr), r, nr, TOL_DEFAULT);
  scope_end();
}

/* ---- the Llama block's kernels: rmsnorm, rope, swiglu ------------------------------------- */

static void test_rmsnorm(int N, int D) {
  char shape[64];
  snprintf(shape, sizeof shape, "N=%d D=%d", N, D);
  int64_t n = (int64_t)N * D;
  const float eps = 1e-6f;
  float *x = hrand(n, -2, 2), *w = hrand(D, 0.5f, 1.5f), *dy = hrand(n, -1, 1);
  float *dx0 = hrand(n, -1, 1), *dw0 = hrand(D, -1, 1);
  float *yc = hnew(sizeof(float) * n), *rc = hnew(sizeof(float) * N);
  op_rmsnorm_forward(yc, rc, x, w, N, D, eps);
  float *d_x = upf(x, n), *d_w = upf(w, D), *d_dy = upf(dy, n);
  float *d_y = dnew(sizeof(float) * n), *d_r = dnew(sizeof(float) * N);
  cuda_op_rmsnorm_forward(&G, d_y, NULL, d_r, d_x, d_w, N, D, eps);
  float *y1 = downf(d_y, n), *r1 = downf(d_r, N);
  cuda_op_rmsnorm_forward(&G, d_y, NULL, d_r, d_x, d_w, N, D, eps);
  expect_close("rmsnorm_forward y", shape, y1, yc, n, TOL_DEFAULT);
  expect_close("rmsnorm_forward rstd", shape, r1, rc, N, TOL_DEFAULT);
  expect_same_bits("rmsnorm_forward y", shape, downf(d_y, n), y1, n);
  expect_same_bits("rmsnorm_forward rstd", shape, downf(d_r, N), r1, N);
  uint16_t *d_y16 = dnew(sizeof(uint16_t) * n);
  cuda_op_rmsnorm_forward(&G, d_y, d_y16, d_r, d_x, d_w, N, D, eps);
  expect_bf16_of("rmsnorm_forward", shape, d_y16, y1, n);
  setf(d_r, rc, N); /* the backward ops get the CPU's rstd */
  float *d_dx = dnew(sizeof(float) * n);
  for (int acc = 0; acc <= 1; acc++) {
    const char *op = acc ? "rmsnorm_backward_input acc=1" : "rmsnorm_backward_input acc=0";
    float *dxc = hcopy(dx0, n);
    op_rmsnorm_backward_input(dxc, dy, x, w, rc, N, D, acc);
    setf(d_dx, dx0, n);
    cuda_op_rmsnorm_backward_input(&G, d_dx, NULL, d_dy, NULL, d_x, NULL, d_w, d_r, N, D, acc,
                                   0);
    float *g1 = downf(d_dx, n);
    setf(d_dx, dx0, n);
    cuda_op_rmsnorm_backward_input(&G, d_dx, NULL, d_dy, NULL, d_x, NULL, d_w, d_r, N, D, acc,
                                   0);
    expect_close(op, shape, g1, dxc, n, TOL_DEFAULT);
    expect_same_bits(op, shape, downf(d_dx, n), g1, n);
  }
  float *dwc = hcopy(dw0, D), *d_dw = upf(dw0, D);
  op_rmsnorm_backward_weight(dwc, dy, x, rc, N, D);
  cuda_op_rmsnorm_backward_weight(&G, d_dw, d_dy, d_x, d_r, N, D);
  float *g1 = downf(d_dw, D);
  setf(d_dw, dw0, D);
  cuda_op_rmsnorm_backward_weight(&G, d_dw, d_dy, d_x, d_r, N, D);
  expect_close("rmsnorm_backward_weight (acc)", shape, g1, dwc, D, TOL_DEFAULT);
  expect_same_bits("rmsnorm_backward_weight", shape, downf(d_dw, D), g1, D);
  scope_end();
}

/* Qwen3's per-head q/k RMSNorm (head_rmsnorm_*) against the CPU's, deterministic, v copied. */
static void test_head_rmsnorm(int N, int H, int KVH, int hd) {
  char shape[64];
  snprintf(shape, sizeof shape, "N=%d H=%d KVH=%d hd=%d", N, H, KVH, hd);
  const int64_t n = (int64_t)N * (H + 2 * KVH) * hd, nr = (int64_t)N * (H + KVH);
  const float eps = 1e-6f;
  float *x = hrand(n, -2, 2), *wq = hrand(hd, 0.5f, 1.5f), *wk = hrand(hd, 0.5f, 1.5f);
  float *dy = hrand(n, -1, 1), *dwq0 = hrand(hd, -1, 1), *dwk0 = hrand(hd, -1, 1);
  float *yc = hnew(sizeof(float) * n), *rc = hnew(sizeof(float) * nr), *dxc = hnew(sizeof(float) * n);
  float *dwqc = hcopy(dwq0, hd), *dwkc = hcopy(dwk0, hd);
  op_head_rmsnorm_forward(yc, rc, x, wq, wk, N, H, KVH, hd, eps);
  op_head_rmsnorm_backward_input(dxc, dy, x, wq, wk, rc, N, H, KVH, hd);
  op_head_rmsnorm_backward_weight(dwqc, dwkc, dy, x, rc, N, H, KVH, hd);
  float *d_x = upf(x, n), *d_wq = upf(wq, hd), *d_wk = upf(wk, hd), *d_dy = upf(dy, n);
  float *d_y = dnew(sizeof(float) * n), *d_r = dnew(sizeof(float) * nr);
  float *d_dx = dnew(sizeof(float) * n), *d_dwq = upf(dwq0, hd), *d_dwk = upf(dwk0, hd);
  cuda_op_head_rmsnorm_forward(&G, d_y, d_r, d_x, d_wq, d_wk, N, H, KVH, hd, eps);
  float *y1 = downf(d_y, n);
  expect_close("head_rmsnorm_forward y", shape, y1, yc, n, TOL_DEFAULT);
  expect_close("head_rmsnorm_forward rstd", shape, downf(d_r, nr), rc, nr, TOL_DEFAULT);
  cuda_op_head_rmsnorm_forward(&G, d_y, d_r, d_x, d_wq, d_wk, N, H, KVH, hd, eps);
  expect_same_bits("head_rmsnorm_forward y", shape, downf(d_y, n), y1, n);
  setf(d_r, rc, nr); /* the backward ops get the CPU's rstd */
  cuda_op_head_rmsnorm_backward_input(&G, d_dx, d_dy, d_x, d_wq, d_wk, d_r, N, H, KVH, hd);
  expect_close("head_rmsnorm_backward_input", shape, downf(d_dx, n), dxc, n, TOL_DEFAULT);
  cuda_op_head_rmsnorm_backward_weight(&G, d_dwq, d_dwk, d_dy, d_x, d_r, N, H, KVH, hd);
  float *gq = downf(d_dwq, hd), *gk = downf(d_dwk, hd);
  expect_close("head_rmsnorm_backward_weight q (acc)", shape, gq, dwqc, hd, TOL_DEFAULT);
  expect_close("head_rmsnorm_backward_weight k (acc)", shape, gk, dwkc, hd, TOL_DEFAULT);
  setf(d_dwq, dwq0, hd);
  cuda_op_head_rmsnorm_backward_weight(&G, d_dwq, d_dwk, d_dy, d_x, d_r, N, H, KVH, hd);
  expect_same_bits("head_rmsnorm_backward_weight q", shape, downf(d_dwq, hd), gq, hd);
  scope_end();
}

/* rope forward, then backward (the transpose: a rotation's inverse, so it gives back q and k
 * times the table's scale squared, 1 but for yarn, and v untouched). */
static void test_rope(int B, int T, int H, int KVH, int hd, const pt_rope_scaling *r) {
  char shape[96];
  snprintf(shape, sizeof shape, "B=%d T=%d H=%d KVH=%d hd=%d theta=%g %s", B, T, H, KVH, hd,
           r->theta, pt_rope_type_names[r->type]);
  pt_rope_freqs f;
  rope_freqs_make(r, hd, &f);
  int64_t n = (int64_t)B * T * (H + 2 * KVH) * hd;
  float *x = hrand(n, -2, 2), *xc = hcopy(x, n), *xs = hcopy(x, n);
  const int64_t ld = (int64_t)(H + 2 * KVH) * hd; /* v (the row's last KVH heads) not rotated */
  for (int64_t i = 0; i < n; i++)
    if (i % ld < (int64_t)(H + KVH) * hd) xs[i] = x[i] * f.scale * f.scale;
  op_rope(xc, B, T, H, KVH, hd, &f, 1, NULL);
  float *d_x = upf(x, n);
  cuda_op_rope(&G, d_x, NULL, NULL, B, T, H, KVH, hd, &f, 1, NULL);
  float *y1 = downf(d_x, n);
  setf(d_x, x, n);
  cuda_op_rope(&G, d_x, NULL, NULL, B, T, H, KVH, hd, &f, 1, NULL);
  expect_close("rope dir=1", shape, y1, xc, n, TOL_DEFAULT);
  expect_same_bits("rope dir=1", shape, downf(d_x, n), y1, n);
  op_rope(xc, B, T, H, KVH, hd, &f, -1, NULL);
  cuda_op_rope(&G, d_x, NULL, NULL, B, T, H, KVH, hd, &f, -1, NULL);
  float *x1 = downf(d_x, n);
  expect_close("rope dir=-1 (vs cpu)", shape, x1, xc, n, TOL_DEFAULT);
  expect_close("rope dir=-1 after dir=1 (vs x scale^2)", shape, x1, xs, n, TOL_DEFAULT);
  scope_end();
}

/* rope reading q|k|v from bf16 bits (ops_cuda.h src: backward's dqkv as the attention's library
 * left it, kernels.h pt_attention_opts.rotated), its floats NaN: the bits of rope on those bits
 * widened, v's widened too, with and without bits written (then the same bits as from the
 * floats); in rope's ledger row, a rotated pair read as 4 bytes, not 8, and v's elements read as
 * 2 bytes and written as 4 more (6 with no bits written, where v is not touched). */
static void test_rope_src(int B, int T, int H, int KVH, int hd) {
  char shape[64];
  snprintf(shape, sizeof shape, "B=%d T=%d H=%d KVH=%d hd=%d", B, T, H, KVH, hd);
  pt_rope_freqs f;
  rope_freqs_make(&(pt_rope_scaling){.theta = 10000.0}, hd, &f);
  const int64_t n = (int64_t)B * T * (H + 2 * KVH) * hd;
  const int64_t pairs = (int64_t)B * T * (H + KVH) * (hd / 2), nv = (int64_t)B * T * KVH * hd;
  float *x = hrand(n, -2, 2), *nan = hnew(sizeof(float) * (size_t)n);
  uint16_t *x16 = hnew(sizeof(uint16_t) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    x[i] = pt_round_bf16(x[i]);
    x16[i] = pt_bf16_bits(x[i]);
    nan[i] = NAN;
  }
  float *d_x = upf(x, n);
  uint16_t *d_src = up(x16, sizeof(uint16_t) * (size_t)n);
  uint16_t *d_bits = dnew(sizeof(uint16_t) * (size_t)n);
  for (int dir = -1; dir <= 1; dir += 2)
    for (int with_bits = 0; with_bits < 2; with_bits++) {
      char what[64];
      snprintf(what, sizeof what, "rope from bits dir=%d%s", dir, with_bits ? ", bits" : "");
      uint16_t *bits = with_bits ? d_bits : NULL;
      setf(d_x, x, n);
      double b0 = ledger_bytes("rope_kernel");
      cuda_op_rope(&G, d_x, bits, NULL, B, T, H, KVH, hd, &f, dir, NULL);
      const double want_bytes = ledger_bytes("rope_kernel") - b0;
      float *want = downf(d_x, n);
      setf(d_x, nan, n);
      b0 = ledger_bytes("rope_kernel");
      cuda_op_rope(&G, d_x, bits, d_src, B, T, H, KVH, hd, &f, dir, NULL);
      const double bytes = ledger_bytes("rope_kernel") - b0;
      expect_same_bits(what, shape, downf(d_x, n), want, n);
      if (bits) expect_bf16_of(what, shape, d_bits, want, n);
      const double more = -4.0 * (double)pairs + (with_bits ? 2.0 : 6.0) * (double)nv;
      CHECK(bytes == want_bytes + more, "%s [%s]: %g bytes in rope's row, want %g", what, shape,
            bytes, want_bytes + more);
    }
  scope_end();
}

typedef void (*gated_forward)(gpu_ctx *, float *, uint16_t *, const float *, uint16_t *, int,
                              int);
typedef void (*gated_backward)(gpu_ctx *, float *, uint16_t *, const float *, const float *,
                               const uint16_t *, int, int);

/* A gated activation's gu copy (ops_cuda.h gu16): forward writes gu's bf16 bits there as it
 * reads it, its y unchanged; backward reading that copy gives the bits of backward on gu's
 * floats rounded to bf16 (what the copy holds), the floats it is handed ignored; backward with
 * dgu16 writes there the bf16 bits of the dgu it writes without, and leaves dgu alone. */
static void test_gated_copies(const char *name, const char *shape, gated_forward fwd,
                              gated_backward bwd, const float *gu, const float *d_dy, int N,
                              int F) {
  int64_t n = (int64_t)N * F;
  char what[64];
  float *d_gu = upf(gu, 2 * n), *d_y = dnew(sizeof(float) * n);
  float *d_dgu = dnew(sizeof(float) * 2 * n), *gur = hcopy(gu, 2 * n);
  uint16_t *d_gu16 = dnew(sizeof(uint16_t) * 2 * n);
  fwd(&G, d_y, NULL, d_gu, NULL, N, F);
  float *y1 = downf(d_y, n);
  fwd(&G, d_y, NULL, d_gu, d_gu16, N, F);
  snprintf(what, sizeof what, "%s_forward with gu16", name);
  expect_same_bits(what, shape, downf(d_y, n), y1, n);
  expect_bf16_of(what, shape, d_gu16, gu, 2 * n);
  for (int64_t i = 0; i < 2 * n; i++) gur[i] = pt_round_bf16(gu[i]);
  bwd(&G, d_dgu, NULL, d_dy, upf(gur, 2 * n), NULL, N, F);
  float *want = downf(d_dgu, 2 * n);
  bwd(&G, d_dgu, NULL, d_dy, d_gu, d_gu16, N, F);
  snprintf(what, sizeof what, "%s_backward from gu16", name);
  expect_same_bits(what, shape, downf(d_dgu, 2 * n), want, 2 * n);
  uint16_t *d_dgu16 = dnew(sizeof(uint16_t) * 2 * n);
  float *junk = hrand(2 * n, -1, 1), *d_junk = upf(junk, 2 * n);
  bwd(&G, d_junk, d_dgu16, d_dy, d_gu, d_gu16, N, F);
  snprintf(what, sizeof what, "%s_backward into dgu16", name);
  expect_bf16_of(what, shape, d_dgu16, want, 2 * n);
  expect_same_bits(what, shape, downf(d_junk, 2 * n), junk, 2 * n); /* dgu not written */
}

static void test_swiglu(int N, int F) {
  char shape[64];
  snprintf(shape, sizeof shape, "N=%d F=%d", N, F);
  int64_t n = (int64_t)N * F;
  float *gu = hrand(2 * n, -4, 4), *dy = hrand(n, -1, 1);
  float *yc = hnew(sizeof(float) * n), *dguc = hnew(sizeof(float) * 2 * n);
  op_swiglu_forward(yc, gu, N, F);
  op_swiglu_backward(dguc, dy, gu, N, F);
  float *d_gu = upf(gu, 2 * n), *d_dy = upf(dy, n), *d_y = dnew(sizeof(float) * n);
  float *d_dgu = dnew(sizeof(float) * 2 * n);
  cuda_op_swiglu_forward(&G, d_y, NULL, d_gu, NULL, N, F);
  float *y1 = downf(d_y, n);
  cuda_op_swiglu_forward(&G, d_y, NULL, d_gu, NULL, N, F);
  expect_close("swiglu_forward", shape, y1, yc, n, TOL_DEFAULT);
  expect_same_bits("swiglu_forward", shape, downf(d_y, n), y1, n);
  uint16_t *d_y16 = dnew(sizeof(uint16_t) * n);
  cuda_op_swiglu_forward(&G, d_y, d_y16, d_gu, NULL, N, F);
  expect_bf16_of("swiglu_forward", shape, d_y16, y1, n);
  cuda_op_swiglu_backward(&G, d_dgu, NULL, d_dy, d_gu, NULL, N, F);
  float *g1 = downf(d_dgu, 2 * n);
  cuda_op_swiglu_backward(&G, d_dgu, NULL, d_dy, d_gu, NULL, N, F);
  expect_close("swiglu_backward", shape, g1, dguc, 2 * n, TOL_DEFAULT);
  expect_same_bits("swiglu_backward", shape, downf(d_dgu, 2 * n), g1, 2 * n);
  test_gated_copies("swiglu", shape, cuda_op_swiglu_forward, cuda_op_swiglu_backward, gu, d_dy,
                    N, F);
  scope_end();
}

/* Gemma 2's elementwise kernels: geglu (as swiglu), softcap forward and backward (in place, as
 * lm_head calls it), add_scalar; each close to the CPU's and bitwise repeatable. */
static void test_gemma_ops(int N, int F) {
  char shape[64];
  snprintf(shape, sizeof shape, "N=%d F=%d", N, F);
  int64_t n = (int64_t)N * F;
  float *gu = hrand(2 * n, -4, 4), *dy = hrand(n, -1, 1), *z = hrand(n, -60, 60);
  float *yc = hnew(sizeof(float) * n), *dguc = hnew(sizeof(float) * 2 * n);
  float *cc = hnew(sizeof(float) * n), *dc = hnew(sizeof(float) * n), *ac = hnew(sizeof(float) * n);
  op_geglu_forward(yc, gu, N, F);
  op_geglu_backward(dguc, dy, gu, N, F);
  op_softcap_forward(cc, z, 30.0f, n);
  op_softcap_backward(dc, dy, z, 30.0f, n);
  op_add_scalar(ac, dy, 1.0f, n);
  float *d_gu = upf(gu, 2 * n), *d_dy = upf(dy, n), *d_y = dnew(sizeof(float) * n);
  float *d_dgu = dnew(sizeof(float) * 2 * n), *d_z = upf(z, n);
  for (int rep = 0; rep < 2; rep++) { /* the second run must give the first's bits */
    float *y1 = rep ? downf(d_y, n) : NULL, *g1 = rep ? downf(d_dgu, 2 * n) : NULL;
    cuda_op_geglu_forward(&G, d_y, NULL, d_gu, NULL, N, F);
    cuda_op_geglu_backward(&G, d_dgu, NULL, d_dy, d_gu, NULL, N, F);
    if (!rep) continue;
    expect_close("geglu_forward", shape, y1, yc, n, TOL_DEFAULT);
    expect_same_bits("geglu_forward", shape, downf(d_y, n), y1, n);
    uint16_t *d_y16 = dnew(sizeof(uint16_t) * n);
    cuda_op_geglu_forward(&G, d_y, d_y16, d_gu, NULL, N, F);
    expect_bf16_of("geglu_forward", shape, d_y16, y1, n);
    expect_close("geglu_backward", shape, g1, dguc, 2 * n, TOL_DEFAULT);
    expect_same_bits("geglu_backward", shape, downf(d_dgu, 2 * n), g1, 2 * n);
  }
  test_gated_copies("geglu", shape, cuda_op_geglu_forward, cuda_op_geglu_backward, gu, d_dy, N,
                    F);
  cuda_op_softcap_forward(&G, d_y, d_z, 30.0f, n);
  expect_close("softcap_forward", shape, downf(d_y, n), cc, n, TOL_DEFAULT);
  cuda_op_softcap_backward(&G, d_z, d_dy, d_z, 30.0f, n); /* in place over the logits */
  expect_close("softcap_backward", shape, downf(d_z, n), dc, n, TOL_DEFAULT);
  cuda_op_add_scalar(&G, d_y, d_dy, 1.0f, n);
  expect_same_bits("add_scalar", shape, downf(d_y, n), ac, n);
  scope_end();
}

/* ---- add, add_inplace, copy, colsum_acc ------------------------------------------------------ */

static void test_misc(int N, int D) {
  char shape[64];
  snprintf(shape, sizeof shape, "N=%d D=%d", N, D);
  int64_t n = (int64_t)N * D;
  float *a = hrand(n, -1, 1), *b = hrand(n, -1, 1), *acc0 = hrand(D, -1, 1);
  float *c = hnew(sizeof(float) * n);
  float *d_a = upf(a, n), *d_b = upf(b, n), *d_y = dnew(sizeof(float) * n);

  op_add(c, a, b, n);
  cuda_op_add(&G, d_y, d_a, d_b, n);
  expect_same_bits("add (vs cpu)", shape, downf(d_y, n), c, n);
  op_add_inplace(c, a, n); /* c = a + b + a */
  cuda_op_add_inplace(&G, d_y, d_a, n);
  expect_same_bits("add_inplace (vs cpu)", shape, downf(d_y, n), c, n);
  cuda_op_copy(&G, d_y, d_b, n);
  expect_same_bits("copy", shape, downf(d_y, n), b, n);

  float *accc = hcopy(acc0, D), *d_acc = dnew(sizeof(float) * D), *g[2];
  op_colsum_acc(accc, a, N, D);
  for (int run = 0; run < 2; run++) {
    setf(d_acc, acc0, D);
    cuda_op_colsum_acc(&G, d_acc, d_a, N, D);
    g[run] = downf(d_acc, D);
  }
  expect_close("colsum_acc", shape, g[0], accc, D, TOL_DEFAULT);
  expect_same_bits("colsum_acc", shape, g[1], g[0], D);
  scope_end();
}

/* ---- embeddings --------------------------------------------------------------------------- */

/* ids: n_ids tokens from [0, id_range), then `pad` copies of id 0 spread through them. Both
 * sides add in token order: the same bits. */
static void test_embedding(int N, int D, int V, int id_range, int pad) {
  char shape[96];
  snprintf(shape, sizeof shape, "N=%d D=%d V=%d ids<%d pad=%d", N, D, V, id_range, pad);
  int64_t n = (int64_t)N * D, nt = (int64_t)V * D;
  int32_t *ids = hids(N, 0, id_range);
  for (int i = 0; i < pad; i++) ids[(int64_t)i * N / (pad > 0 ? pad : 1)] = 0;
  float *table = hrand(nt, -1, 1), *dy = hrand(n, -1, 1), *dtable0 = hrand(nt, -1, 1);
  float *yc = hnew(sizeof(float) * n), *dtc = hcopy(dtable0, nt);
  op_embedding_forward(yc, ids, table, N, D, V);
  op_embedding_backward(dtc, ids, dy, N, D);
  int32_t *d_ids = up(ids, sizeof(int32_t) * N);
  float *d_table = upf(table, nt), *d_dy = upf(dy, n), *d_y = dnew(sizeof(float) * n);
  float *d_dt = dnew(sizeof(float) * nt);
  uint64_t *d_keys = dnew(sizeof(uint64_t) * (size_t)cuda_op_embedding_scratch_keys(N));
  cuda_op_embedding_forward(&G, d_y, d_ids, d_table, N, D, V);
  expect_same_bits("embedding_forward (vs cpu)", shape, downf(d_y, n), yc, n);
  float *g[2];
  for (int run = 0; run < 2; run++) {
    setf(d_dt, dtable0, nt);
    cuda_op_embedding_backward(&G, d_dt, d_ids, d_dy, N, D, V, d_keys);
    g[run] = downf(d_dt, nt);
  }
  expect_same_bits("embedding_backward (vs cpu, token order)", shape, g[0], dtc, nt);
  expect_same_bits("embedding_backward", shape, g[1], g[0], nt);
  scope_end();
}

/* The sorted backward (a bitonic sort of the tokens by id, then per-id sums in token order) at
 * lengths around and above the sort's in-block chunk (2048 keys: 2048 is one block, 2049 and
 * 5000 need the steps across blocks), with skewed ids (a few ids take most tokens, as common
 * words do), the first and last ids of the table at both ends of the batch, through the GPU
 * table (whose sort scratch grows from the short call to the long one): the CPU's bits, and
 * the same bits on a second run. */
static void test_embedding_sorted(kernels_gpu *kg, int N, int D, int V) {
  char shape[64];
  snprintf(shape, sizeof shape, "N=%d D=%d V=%d skewed", N, D, V);
  int64_t n = (int64_t)N * D, nt = (int64_t)V * D;
  int32_t *ids = hnew(sizeof(int32_t) * (size_t)N);
  for (int i = 0; i < N; i++) {
    double u = urand();
    ids[i] = (int32_t)(u * u * u * V); /* id 0 about V^(-1/3) of the tokens */
  }
  ids[0] = V - 1, ids[N - 1] = V - 1, ids[N / 2] = 0, ids[1] = 0;
  float *dy = hrand(n, -1, 1), *dtable0 = hrand(nt, -1, 1), *dtc = hcopy(dtable0, nt);
  op_embedding_backward(dtc, ids, dy, N, D);
  int32_t *d_ids = up(ids, sizeof(int32_t) * (size_t)N);
  float *d_dy = upf(dy, n), *d_dt = dnew(sizeof(float) * nt), *g[2];
  for (int run = 0; run < 2; run++) {
    setf(d_dt, dtable0, nt);
    if (run == 0) /* a short call first: the table's scratch then has to grow */
      kg->table.embedding_backward(&kg->table, d_dt, d_ids, d_dy, 3, D, V);
    setf(d_dt, dtable0, nt);
    kg->table.embedding_backward(&kg->table, d_dt, d_ids, d_dy, N, D, V);
    g[run] = downf(d_dt, nt);
  }
  expect_same_bits("embedding_backward sorted (vs cpu, token order)", shape, g[0], dtc, nt);
  expect_same_bits("embedding_backward sorted", shape, g[1], g[0], nt);
  scope_end();
}

/* The CPU table's positions: y = x + pos[t]; dpos += dy[b] for b in order. Exact. */
static void test_pos(int B, int T, int D) {
  char shape[64];
  snprintf(shape, sizeof shape, "B=%d T=%d D=%d", B, T, D);
  int64_t TD = (int64_t)T * D, n = (int64_t)B * TD;
  float *x = hrand(n, -1, 1), *pos = hrand(TD, -1, 1), *dy = hrand(n, -1, 1);
  float *dpos0 = hrand(TD, -1, 1);
  float *yc = hnew(sizeof(float) * n), *dpc = hcopy(dpos0, TD);
  kernels_cpu.pos_forward(&kernels_cpu, yc, x, pos, B, T, D, NULL);
  kernels_cpu.pos_backward_weight(&kernels_cpu, dpc, dy, B, T, D, NULL);
  float *d_x = upf(x, n), *d_pos = upf(pos, TD), *d_dy = upf(dy, n);
  float *d_y = dnew(sizeof(float) * n), *d_dp = dnew(sizeof(float) * TD), *g[2];
  cuda_op_pos_forward(&G, d_y, d_x, d_pos, B, T, D, NULL);
  expect_same_bits("pos_forward (vs cpu)", shape, downf(d_y, n), yc, n);
  for (int run = 0; run < 2; run++) {
    setf(d_dp, dpos0, TD);
    cuda_op_pos_backward_weight(&G, d_dp, d_dy, B, T, D, NULL);
    g[run] = downf(d_dp, TD);
  }
  expect_same_bits("pos_backward_weight (vs cpu, batch order)", shape, g[0], dpc, TD);
  expect_same_bits("pos_backward_weight", shape, g[1], g[0], TD);
  scope_end();
}

/* ---- losses ------------------------------------------------------------------------------- */

/* cross_entropy with ignored targets (LOSS_IGNORE, packed documents): those rows add nothing
 * and get dy = 0 exactly, the rest as the CPU's. */
static void test_loss_ignore(int N, int F) {
  char shape[64];
  snprintf(shape, sizeof shape, "N=%d F=%d ignore", N, F);
  int64_t n = (int64_t)N * F;
  float *y = hrand(n, -8, 8), *dyc = hnew(sizeof(float) * n);
  int32_t *it = hids(N, 0, F);
  for (int i = 0; i < N; i += 3) it[i] = LOSS_IGNORE;
  double lc = loss_forward_backward(LOSS_CROSS_ENTROPY, y, it, N, F, 0.5f, dyc);
  double *d_loss = dnew(sizeof(double)), zero = 0.0;
  gpu_to_device(&G, d_loss, &zero, sizeof zero);
  float *d_dy = upf(hrand(n, 5, 6), n);
  cuda_loss_cross_entropy(&G, d_dy, NULL, d_loss, upf(y, n), NULL, up(it, sizeof(int32_t) * N),
                          N, F, 0.5f, dnew(sizeof(double) * CUDA_REDUCE_SCRATCH_DOUBLES),
                          (pt_loss_read){0});
  float *dyg = downf(d_dy, n);
  expect_close("loss_cross_entropy dy (ignored rows)", shape, dyg, dyc, n, TOL_DEFAULT);
  for (int i = 0; i < N; i += 3)
    for (int f = 0; f < F; f++)
      CHECK(dyg[(int64_t)i * F + f] == 0.0f, "ignored row %d: dy[%d] = %g", i, f,
            dyg[(int64_t)i * F + f]);
  expect_close_d("loss_cross_entropy loss sum (ignored rows)", shape, down_double(d_loss), lc,
                 TOL_CE_LOSS);
  scope_end();
}

static void loss_launch(pt_loss_kind kind, float *dy, uint16_t *dy16, double *loss, const float *y,
                        const uint16_t *y16, const void *t, int N, int F, float scale,
                        double *scr) {
  if (kind == LOSS_CROSS_ENTROPY)
    cuda_loss_cross_entropy(&G, dy, dy16, loss, y, y16, t, N, F, scale, scr, (pt_loss_read){0});
  else
    cuda_loss_mse(&G, dy, dy16, loss, y, y16, t, N, F, scale, scr, (pt_loss_read){0});
}

/* The gradient as bf16 (kernels.h loss_acc dy16): each element pt_bf16_bits of the float path's
 * (dy1), dy not written (its sentinel left), the same loss, 2 bytes a gradient element fewer in
 * the ledger than a float path's call (run first, over a scratch dy). */
static void test_loss_bf16(pt_loss_kind kind, const char *name, const char *shape, const float *d_y,
                           const void *d_t, int N, int F, float scale, double *d_scr,
                           const float *dy1, double loss1) {
  const int64_t n = (int64_t)N * F;
  const char *row = kind == LOSS_CROSS_ENTROPY ? "cross_entropy_kernel" : "mse_kernel";
  char op[96];
  float *sentinel = hnew(sizeof(float) * n);
  for (int64_t i = 0; i < n; i++) sentinel[i] = 7.0f;
  float *d_dy = upf(sentinel, n);
  uint16_t *d_16 = dnew(sizeof(uint16_t) * n), *want = hnew(sizeof(uint16_t) * n);
  double *d_loss = dnew(sizeof(double)), zero = 0.0, b0 = ledger_bytes(row);
  loss_launch(kind, dnew(sizeof(float) * n), NULL, d_loss, d_y, NULL, d_t, N, F, scale, d_scr);
  double full = ledger_bytes(row) - b0;
  b0 = ledger_bytes(row);
  gpu_to_device(&G, d_loss, &zero, sizeof zero);
  loss_launch(kind, d_dy, d_16, d_loss, d_y, NULL, d_t, N, F, scale, d_scr);
  double bytes = ledger_bytes(row) - b0;
  uint16_t *got = hnew(sizeof(uint16_t) * n);
  gpu_to_host(&G, got, d_16, sizeof(uint16_t) * n);
  for (int64_t i = 0; i < n; i++) want[i] = pt_bf16_bits(dy1[i]);
  snprintf(op, sizeof op, "%s dy16", name);
  CHECK(memcmp(got, want, sizeof(uint16_t) * n) == 0, "%s [%s]: not the float path's bits", op,
        shape);
  expect_same_bits(op, shape, downf(d_dy, n), sentinel, n); /* dy untouched */
  double l16 = down_double(d_loss);
  CHECK(memcmp(&l16, &loss1, sizeof(double)) == 0, "%s [%s]: loss %.17g, float path %.17g", op,
        shape, l16, loss1);
  CHECK(bytes == full - 2.0 * n, "%s [%s]: ledger %.0f bytes, want 2 a gradient element fewer than %.0f",
        op, shape, bytes, full);
}

/* y read from its bits (kernels.h loss_acc: the logits' activation copy), the gradient's bits
 * written over them: what the float path gives on y's floats rounded (its dy16 and its loss, bit
 * for bit) with y's floats NaN (unread), and 2 bytes a logit fewer in the ledger. */
static void test_loss_reads_bits(pt_loss_kind kind, const char *name, const char *shape,
                                 const float *y, const void *d_t, int N, int F, float scale,
                                 double *d_scr) {
  const int64_t n = (int64_t)N * F;
  const char *row = kind == LOSS_CROSS_ENTROPY ? "cross_entropy_kernel" : "mse_kernel";
  char op[96];
  float *yr = hnew(sizeof(float) * n), *nan = hnew(sizeof(float) * n);
  uint16_t *bits = hnew(sizeof(uint16_t) * n), *want = hnew(sizeof(uint16_t) * n);
  for (int64_t i = 0; i < n; i++) {
    yr[i] = pt_round_bf16(y[i]);
    bits[i] = pt_bf16_bits(y[i]);
    nan[i] = NAN;
  }
  uint16_t *d_want = dnew(sizeof(uint16_t) * n), *d_bits = up(bits, sizeof(uint16_t) * n);
  double *d_loss = dnew(sizeof(double)), zero = 0.0, b0 = ledger_bytes(row);
  gpu_to_device(&G, d_loss, &zero, sizeof zero);
  loss_launch(kind, dnew(sizeof(float) * n), d_want, d_loss, upf(yr, n), NULL, d_t, N, F, scale,
              d_scr);
  double full = ledger_bytes(row) - b0, l1 = down_double(d_loss);
  gpu_to_host(&G, want, d_want, sizeof(uint16_t) * n);
  gpu_to_device(&G, d_loss, &zero, sizeof zero);
  b0 = ledger_bytes(row);
  loss_launch(kind, upf(nan, n), d_bits, d_loss, upf(nan, n), d_bits, d_t, N, F, scale, d_scr);
  double bytes = ledger_bytes(row) - b0, l2 = down_double(d_loss);
  gpu_to_host(&G, bits, d_bits, sizeof(uint16_t) * n);
  snprintf(op, sizeof op, "%s y16 (dy16 over it)", name);
  CHECK(memcmp(bits, want, sizeof(uint16_t) * n) == 0, "%s [%s]: not the float path's bits", op,
        shape);
  CHECK(memcmp(&l1, &l2, sizeof(double)) == 0, "%s [%s]: loss %.17g, float path %.17g", op,
        shape, l2, l1);
  CHECK(bytes == full - 2.0 * n, "%s [%s]: ledger %.0f bytes, want 2 a logit fewer than %.0f", op,
        shape, bytes, full);
}

static void test_loss(pt_loss_kind kind, int N, int F) {
  const char *name = kind == LOSS_CROSS_ENTROPY ? "loss_cross_entropy" : "loss_mse";
  char shape[64], op[96];
  snprintf(shape, sizeof shape, "N=%d F=%d", N, F);
  int64_t n = (int64_t)N * F;
  float scale = 1.0f / (float)N;
  float *y = hrand(n, -8, 8), *ft = hrand(n, -1, 1);
  int32_t *it = hids(N, 0, F);
  const void *targets = kind == LOSS_CROSS_ENTROPY ? (const void *)it : (const void *)ft;
  size_t tbytes = kind == LOSS_CROSS_ENTROPY ? sizeof(int32_t) * N : sizeof(float) * n;
  float *dyc = hnew(sizeof(float) * n);
  double lc = loss_forward_backward(kind, y, targets, N, F, scale, dyc);

  const double start = 0.25; /* the loss is added to what the device double holds */
  float *d_y = upf(y, n), *d_dy = dnew(sizeof(float) * n), *dy1 = NULL;
  void *d_t = up(targets, tbytes);
  double *d_loss = dnew(sizeof(double));
  double *d_scr = dnew(sizeof(double) * CUDA_REDUCE_SCRATCH_DOUBLES), l[2];
  for (int run = 0; run < 2; run++) {
    gpu_to_device(&G, d_loss, &start, sizeof start);
    if (kind == LOSS_CROSS_ENTROPY)
      cuda_loss_cross_entropy(&G, d_dy, NULL, d_loss, d_y, NULL, d_t, N, F, scale, d_scr,
                              (pt_loss_read){0});
    else
      cuda_loss_mse(&G, d_dy, NULL, d_loss, d_y, NULL, d_t, N, F, scale, d_scr,
                    (pt_loss_read){0});
    float *dyg = downf(d_dy, n);
    l[run] = down_double(d_loss);
    if (run == 0) {
      dy1 = dyg;
      snprintf(op, sizeof op, "%s dy", name);
      /* mse's dy is 2 * diff / F * scale on both sides: the same bits */
      expect_close(op, shape, dyg, dyc, n, kind == LOSS_CROSS_ENTROPY ? TOL_DEFAULT : 0.0);
      snprintf(op, sizeof op, "%s loss sum", name);
      expect_close_d(op, shape, l[0], start + lc,
                     kind == LOSS_CROSS_ENTROPY ? TOL_CE_LOSS : TOL_DOUBLE_SUM);
    } else {
      snprintf(op, sizeof op, "%s dy", name);
      expect_same_bits(op, shape, dyg, dy1, n);
      snprintf(op, sizeof op, "%s loss sum", name);
      CHECK(memcmp(&l[0], &l[1], sizeof(double)) == 0,
            "%s [%s]: not deterministic: %.17g vs %.17g", op, shape, l[0], l[1]);
    }
  }
  /* dy over the logits (the last stage's way, kernels.h): the same bits */
  float *d_over = upf(y, n);
  gpu_to_device(&G, d_loss, &start, sizeof start);
  if (kind == LOSS_CROSS_ENTROPY)
    cuda_loss_cross_entropy(&G, d_over, NULL, d_loss, d_over, NULL, d_t, N, F, scale, d_scr,
                            (pt_loss_read){0});
  else
    cuda_loss_mse(&G, d_over, NULL, d_loss, d_over, NULL, d_t, N, F, scale, d_scr,
                  (pt_loss_read){0});
  snprintf(op, sizeof op, "%s dy over y", name);
  expect_same_bits(op, shape, downf(d_over, n), dy1, n);
  double lo = down_double(d_loss);
  CHECK(memcmp(&lo, &l[0], sizeof(double)) == 0, "%s [%s]: loss %.17g in place, %.17g apart",
        op, shape, lo, l[0]);
  test_loss_bf16(kind, name, shape, d_y, d_t, N, F, scale, d_scr, dy1, l[0] - start);
  test_loss_reads_bits(kind, name, shape, y, d_t, N, F, scale, d_scr);
  scope_end();
}

/* ---- optimizer ---------------------------------------------------------------------------- */

/* Three AdamW steps over n floats against PyTorch's formulas in double (as
 * tests/engine/test_data_optim.c), new gradients each step. Decay on the first n_decay floats (a
 * mask), or with use_mask 0 a NULL mask: weight decay wd on all of them (wd 0: none). */
static void test_adamw(int64_t n, int64_t n_decay, int use_mask, float wd) {
  char shape[96];
  snprintf(shape, sizeof shape, "n=%lld decay=%lld wd=%g%s", (long long)n,
           (long long)(use_mask ? n_decay : n), wd, use_mask ? "" : " (mask NULL)");
  const float lr = 0.01f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f;
  float *p = hrand(n, -1, 1);
  uint8_t *mask = hnew(n);
  for (int64_t i = 0; i < (use_mask ? n_decay : n); i++) mask[i] = 1;
  double *rp = hnew(sizeof(double) * n), *rm = hnew(sizeof(double) * n);
  double *rv = hnew(sizeof(double) * n);
  for (int64_t i = 0; i < n; i++) rp[i] = p[i];
  float *d_p = upf(p, n), *d_m = dnew(sizeof(float) * n), *d_v = dnew(sizeof(float) * n);
  float *d_g = dnew(sizeof(float) * n);
  uint8_t *d_mask = use_mask ? up(mask, n) : NULL;
  for (int t = 1; t <= 3; t++) {
    float *g = hrand(n, -1, 1);
    g[0] = 0.0f; /* a zero gradient: m, v stay small, eps matters */
    setf(d_g, g, n);
    double bc1 = 1.0 - pow((double)b1, t), bc2 = 1.0 - pow((double)b2, t);
    /* the factors as the host computes them for every device (model/optimizer.c) */
    float step = (float)((double)lr / bc1), inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
    float keep = (float)(1.0 - (double)lr * (double)wd);
    cuda_adamw_step(&G, d_p, NULL, d_g, d_m, d_v, d_mask, n, b1, b2, eps, step, inv_sqrt_bc2, keep,
                    1.0f);
    for (int64_t i = 0; i < n; i++) {
      if (mask[i]) rp[i] *= 1.0 - (double)lr * wd;
      rm[i] = b1 * rm[i] + (1.0 - b1) * g[i];
      rv[i] = b2 * rv[i] + (1.0 - b2) * (double)g[i] * g[i];
      rp[i] -= (double)lr * (rm[i] / bc1) / (sqrt(rv[i] / bc2) + eps);
    }
  }
  float *rpf = hnew(sizeof(float) * n), *rmf = hnew(sizeof(float) * n);
  float *rvf = hnew(sizeof(float) * n);
  for (int64_t i = 0; i < n; i++) rpf[i] = (float)rp[i], rmf[i] = (float)rm[i], rvf[i] = (float)rv[i];
  expect_close("adamw_step w", shape, downf(d_p, n), rpf, n, TOL_OPTIM);
  expect_close("adamw_step m", shape, downf(d_m, n), rmf, n, TOL_OPTIM);
  expect_close("adamw_step v", shape, downf(d_v, n), rvf, n, TOL_OPTIM);
  scope_end();
}

/* Three SGD steps (model/optimizer.c: d = g + wd p; m = t > 1 ? mu m + d : d;
 * p -= lr (mu > 0 ? m : d)) in double, decay on the first n_decay floats (a mask). mu = 0 runs
 * without a momentum buffer. */
static void test_sgd(int64_t n, int64_t n_decay, float mu) {
  char shape[64];
  snprintf(shape, sizeof shape, "n=%lld decay=%lld mu=%g", (long long)n, (long long)n_decay, mu);
  const float lr = 0.05f, wd = 0.01f;
  float *p = hrand(n, -1, 1);
  uint8_t *mask = hnew(n);
  for (int64_t i = 0; i < n_decay; i++) mask[i] = 1;
  double *rp = hnew(sizeof(double) * n), *rm = hnew(sizeof(double) * n);
  for (int64_t i = 0; i < n; i++) rp[i] = p[i];
  float *d_p = upf(p, n), *d_m = mu > 0.0f ? dnew(sizeof(float) * n) : NULL;
  float *d_g = dnew(sizeof(float) * n);
  uint8_t *d_mask = up(mask, n);
  for (int t = 1; t <= 3; t++) {
    float *g = hrand(n, -1, 1);
    setf(d_g, g, n);
    cuda_sgd_step(&G, d_p, NULL, d_g, d_m, d_mask, n, lr, mu, wd, t == 1, 1.0f);
    for (int64_t i = 0; i < n; i++) {
      double dd = g[i] + (mask[i] ? (double)wd : 0.0) * rp[i];
      rm[i] = t > 1 ? mu * rm[i] + dd : dd;
      rp[i] -= (double)lr * (mu > 0.0f ? rm[i] : dd);
    }
  }
  float *rpf = hnew(sizeof(float) * n);
  for (int64_t i = 0; i < n; i++) rpf[i] = (float)rp[i];
  expect_close("sgd_step w", shape, downf(d_p, n), rpf, n, TOL_OPTIM);
  if (d_m) {
    float *rmf = hnew(sizeof(float) * n);
    for (int64_t i = 0; i < n; i++) rmf[i] = (float)rm[i];
    expect_close("sgd_step momentum", shape, downf(d_m, n), rmf, n, TOL_OPTIM);
  }
  scope_end();
}

/* The factors the GPU once computed itself, in float from float settings, where the host gives
 * them in double rounded once (model/optimizer.c: optimizer_update). */
static int factors_differ(const pt_update *u) {
  float lr = (float)u->lr, bc1 = (float)u->bc1, bc2 = (float)u->bc2;
  float wd = u->decay ? (float)u->weight_decay : 0.0f;
  float step = (float)((double)lr / (double)bc1), inv = (float)(1.0 / sqrt((double)bc2));
  float keep = (float)(1.0 - (double)lr * (double)wd);
  return step != u->step || inv != u->inv_sqrt_bc2 || keep != u->keep;
}

/* Optimizer steps through the two kernel tables from the same pt_update (optimizer_update, as
 * model/optimizer.c makes it for every device) must give the same bits: the CPU kernel's
 * float operations on the host's factors. lr = 1e-3 at t = 1 and t = 3 (beta1 0.9) is where
 * step = lr / (1 - beta1^t) rounds differently when recomputed in float from float lr and
 * bias correction (the GPU's old way, an ulp off the CPU): checked below, so the inputs keep
 * telling the two apart. AdamW with and without decay, and SGD with and without momentum. */
static void test_optimizer_bits(kernels_gpu *kg, spec_optimizer kind, double mu, int decay) {
  char shape[96];
  snprintf(shape, sizeof shape, "%s mu=%g decay=%d n=4099", kind == SPEC_OPTIMIZER_SGD ? "sgd"
           : "adamw", mu, decay);
  const int64_t n = 4099;
  spec_train c = {.optimizer = kind, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                  .weight_decay = 0.1, .momentum = mu};
  float *w = hrand(n, -1, 1), *m = hnew(sizeof(float) * n), *v = hnew(sizeof(float) * n);
  float *d_w = upf(w, n), *d_m = dnew(sizeof(float) * n), *d_v = dnew(sizeof(float) * n);
  float *d_g = dnew(sizeof(float) * n);
  int differ = 0;
  for (int t = 1; t <= 3; t++) {
    float *g = hrand(n, -1, 1);
    g[0] = 0.0f;
    setf(d_g, g, n);
    device_update u = optimizer_update(&c, t, c.lr);
    optimizer_update_tensor(&u, &c, decay);
    differ |= factors_differ(&u);
    kernels_cpu.optimizer(&kernels_cpu, &u, w, NULL, g, m, v, n);
    kg->table.optimizer(&kg->table, &u, d_w, NULL, d_g, d_m, d_v, n);
    char op[64];
    snprintf(op, sizeof op, "optimizer step %d w (vs cpu)", t);
    expect_same_bits(op, shape, downf(d_w, n), w, n);
    snprintf(op, sizeof op, "optimizer step %d m (vs cpu)", t);
    expect_same_bits(op, shape, downf(d_m, n), m, n);
    snprintf(op, sizeof op, "optimizer step %d v (vs cpu)", t);
    if (kind == SPEC_OPTIMIZER_ADAMW) expect_same_bits(op, shape, downf(d_v, n), v, n);
  }
  CHECK(kind != SPEC_OPTIMIZER_ADAMW || differ, "%s: no step whose factors differ in float; "
        "the case no longer tells the host's factors from a recomputation", shape);
  scope_end();
}

/* The multi-tensor update (optimizer_chunks, what optimizer_step runs) against the per-tensor
 * loop it replaced (kernels_cpu.optimizer per tensor, optimizer_update_tensor's factors), bit
 * for bit, through both tables: tensors with and without decay, one longer than a piece
 * (several pieces), one of a single float, gaps between them (64-byte alignment) holding junk
 * that must stay as it is. Three steps, the second and third clipped: the reference scales the
 * gradients first (the pass the clip factor replaced) and steps with clip 1. Both tables also
 * write the bf16 weight copy: each piece's floats as pt_bf16_bits of the new weights, the
 * gaps' junk left alone. */
static void test_optimizer_chunks(kernels_gpu *kg, spec_optimizer kind, double mu) {
  char shape[96];
  snprintf(shape, sizeof shape, "%s mu=%g, 5 tensors", kind == SPEC_OPTIMIZER_SGD ? "sgd"
           : "adamw", mu);
  enum { NT = 5 };
  const int64_t numel[NT] = {4099, 33, 3 * PT_OPT_CHUNK_FLOATS + 5, 1, 768};
  const int decay[NT] = {1, 0, 1, 0, 1};
  int64_t offset[NT], n = 0;
  for (int i = 0; i < NT; i++) offset[i] = n, n = (n + numel[i] + 15) / 16 * 16 + 16;
  spec_train c = {.optimizer = kind, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                  .weight_decay = 0.1, .momentum = mu};
  pt_opt_chunk chunks[64];
  int64_t nc = 0;
  for (int i = 0; i < NT; i++)
    for (int64_t at = 0; at < numel[i]; at += PT_OPT_CHUNK_FLOATS)
      chunks[nc++] = (pt_opt_chunk){.offset = offset[i] + at, .decay = decay[i],
                                    .n = (int32_t)(numel[i] - at < PT_OPT_CHUNK_FLOATS
                                                       ? numel[i] - at : PT_OPT_CHUNK_FLOATS)};
  float *w = hrand(n, -1, 1), *m = hrand(n, -1, 1), *v = hrand(n, 0, 1);
  float *w1 = hcopy(w, n), *m1 = hcopy(m, n), *v1 = hcopy(v, n); /* the CPU table's chunks */
  float *d_w = upf(w, n), *d_m = upf(m, n), *d_v = upf(v, n), *d_g = dnew(sizeof(float) * n);
  pt_opt_chunk *d_chunks = up(chunks, sizeof chunks);
  uint16_t *h16 = hnew(sizeof(uint16_t) * (size_t)n), *junk = hnew(sizeof(uint16_t) * (size_t)n);
  for (int64_t i = 0; i < n; i++) junk[i] = h16[i] = (uint16_t)(0x5a5a + i);
  uint16_t *d16 = up(h16, sizeof(uint16_t) * (size_t)n);
  for (int t = 1; t <= 3; t++) {
    float *g = hrand(n, -1, 1), *gs = hnew(sizeof(float) * (size_t)n);
    const float clip = t == 1 ? 1.0f : 0.2f / (float)t;
    for (int64_t i = 0; i < n; i++) gs[i] = g[i] * clip;
    setf(d_g, g, n);
    device_update u = optimizer_update(&c, t, c.lr);
    for (int i = 0; i < NT; i++) { /* the reference: the loop optimizer_step used to run */
      optimizer_update_tensor(&u, &c, decay[i]);
      kernels_cpu.optimizer(&kernels_cpu, &u, w + offset[i], NULL, gs + offset[i],
                            m + offset[i], v + offset[i], numel[i]);
    }
    optimizer_update_tensor(&u, &c, 1);
    u.clip = clip;
    kernels_cpu.optimizer_chunks(&kernels_cpu, &u, w1, h16, g, m1, v1, chunks, nc);
    kg->table.optimizer_chunks(&kg->table, &u, d_w, d16, d_g, d_m, d_v, d_chunks, nc);
  }
  uint16_t *g16 = hnew(sizeof(uint16_t) * (size_t)n);
  gpu_to_host(&G, g16, d16, sizeof(uint16_t) * (size_t)n);
  int64_t bad = -1;
  for (int64_t i = 0, p = 0; i < n && bad < 0; i++) {
    while (p < nc && chunks[p].offset + chunks[p].n <= i) p++;
    int in = p < nc && chunks[p].offset <= i;
    uint16_t want = in ? pt_bf16_bits(w[i]) : junk[i];
    if (h16[i] != want || g16[i] != want) bad = i;
  }
  CHECK(bad < 0, "%s: optimizer_chunks' bf16 copy at %lld: cpu %04x, gpu %04x, want %04x",
        shape, (long long)bad, bad < 0 ? 0 : h16[bad], bad < 0 ? 0 : g16[bad],
        bad < 0 ? 0 : (unsigned)pt_bf16_bits(w[bad]));
  expect_same_bits("optimizer_chunks cpu w (vs per tensor)", shape, w1, w, n);
  expect_same_bits("optimizer_chunks cpu m (vs per tensor)", shape, m1, m, n);
  expect_same_bits("optimizer_chunks gpu w (vs per tensor)", shape, downf(d_w, n), w, n);
  expect_same_bits("optimizer_chunks gpu m (vs per tensor)", shape, downf(d_m, n), m, n);
  if (kind == SPEC_OPTIMIZER_ADAMW) {
    expect_same_bits("optimizer_chunks cpu v (vs per tensor)", shape, v1, v, n);
    expect_same_bits("optimizer_chunks gpu v (vs per tensor)", shape, downf(d_v, n), v, n);
  }
  scope_end();
}

/* The multi-tensor sum of squares (sumsq_spans_into, what the gradient norm runs) against
 * cuda_sumsq span by span, bit for bit: spans of 1 float, none (a tied copy's: 0 written over
 * junk), under one block, one block exactly and one float more, many blocks, and with `capped`
 * one whose block count is capped (1024); twice (the kept layout), then another list (the
 * layout rebuilt) and the first again. */
static void test_sumsq_spans(kernels_gpu *kg, int capped) {
  enum { S = 7 };
  const int64_t len[S] = {1, 0, 255, 4096, 4097, 100003, capped ? 4096 * 1024 + 777 : 3};
  pt_sum_span spans[S];
  int64_t n = 0;
  for (int j = 0; j < S; j++)
    spans[j] = (pt_sum_span){.offset = n + 3, .n = len[j]}, n += len[j] + 19;
  float *d_x = upf(hrand(n, -1, 1), n);
  double *d_one = dnew(sizeof(double)), *d_out = dnew(sizeof(double) * S), want[S], got[S];
  double *d_scr = dnew(sizeof(double) * CUDA_REDUCE_SCRATCH_DOUBLES);
  for (int j = 0; j < S; j++) {
    cuda_sumsq(&G, d_one, d_x + spans[j].offset, spans[j].n, d_scr);
    want[j] = down_double(d_one);
  }
  const pt_sum_span other[2] = {{5, 77}, {0, 9000}};
  for (int run = 0; run < 4; run++) {
    const double junk[S] = {7, 7, 7, 7, 7, 7, 7};
    gpu_to_device(&G, d_out, junk, sizeof junk);
    if (run == 2) { /* another list: its own sums, then the first list's layout is rebuilt */
      kg->table.sumsq_spans_into(&kg->table, d_out, d_x, other, 2);
      gpu_to_host(&G, got, d_out, 2 * sizeof(double));
      for (int j = 0; j < 2; j++) {
        cuda_sumsq(&G, d_one, d_x + other[j].offset, other[j].n, d_scr);
        double w = down_double(d_one);
        CHECK(!memcmp(&got[j], &w, sizeof w), "sumsq_spans_into, other list, span %d: %.17g vs "
              "%.17g", j, got[j], w);
      }
      continue;
    }
    kg->table.sumsq_spans_into(&kg->table, d_out, d_x, spans, S);
    gpu_to_host(&G, got, d_out, sizeof got);
    for (int j = 0; j < S; j++)
      CHECK(!memcmp(&got[j], &want[j], sizeof(double)),
            "sumsq_spans_into run %d span %d (%lld floats): %.17g, cuda_sumsq %.17g", run, j,
            (long long)len[j], got[j], want[j]);
  }
  scope_end();
}

/* scale (one multiply: exact), sumsq (double, fixed order), check_finite. */
static void test_reductions(int64_t n) {
  char shape[64];
  snprintf(shape, sizeof shape, "n=%lld", (long long)n);
  float *x = hrand(n, -1, 1), *xs = hnew(sizeof(float) * n);
  for (int64_t i = 0; i < n; i++) xs[i] = x[i] * 0.37f;
  float *d_x = upf(x, n);
  cuda_scale(&G, d_x, 0.37f, n);
  expect_same_bits("scale (vs cpu)", shape, downf(d_x, n), xs, n);

  double ref = 0.0;
  for (int64_t i = 0; i < n; i++) ref += (double)xs[i] * xs[i];
  double *d_out = dnew(sizeof(double)), got[2];
  double *d_scr = dnew(sizeof(double) * CUDA_REDUCE_SCRATCH_DOUBLES);
  for (int run = 0; run < 2; run++) {
    cuda_sumsq(&G, d_out, d_x, n, d_scr);
    got[run] = down_double(d_out);
  }
  expect_close_d("sumsq", shape, got[0], ref, TOL_DOUBLE_SUM);
  CHECK(memcmp(&got[0], &got[1], sizeof(double)) == 0,
        "sumsq [%s]: not deterministic: %.17g vs %.17g", shape, got[0], got[1]);

  int *d_flag = dnew(sizeof(int)), flag = -1;
  cuda_check_finite(&G, d_flag, d_x, n);
  gpu_to_host(&G, &flag, d_flag, sizeof flag);
  CHECK(flag == 0, "check_finite [%s]: flag %d on finite values", shape, flag);
  const float bad[2] = {INFINITY, NAN};
  for (int k = 0; k < 2; k++) {
    int64_t at = k == 0 ? n / 3 : n - 1;
    gpu_to_device(&G, d_x + at, &bad[k], sizeof(float));
    cuda_check_finite(&G, d_flag, d_x, n);
    gpu_to_host(&G, &flag, d_flag, sizeof flag);
    CHECK(flag == 1, "check_finite [%s]: flag %d with %g at %lld", shape, flag, bad[k],
          (long long)at);
    gpu_to_device(&G, d_x + at, &xs[at], sizeof(float));
  }
  scope_end();
}

/* ---- the kernel tables: every built-in layer written once, run with each -------------------- */

/* Every entry of PT_KERNELS_ENTRIES (kernels/kernels.h) is set: none may be missing. (The
 * precision entries after them are optional: test_precision_table checks those.) */
#define PT_EXPECT_ENTRY(entry) \
  CHECK(k->entry != NULL, "kernel table %s: entry %s is NULL", k->name, #entry);
static void expect_table_complete(const pt_kernels *k) { PT_KERNELS_ENTRIES(PT_EXPECT_ENTRY) }

/* Layer L's three steps on the host with kernels_cpu and on the GPU with kg, from the same
 * input, parameters and output gradient; out, din and every gradient compared. */
static void test_layer_tables(kernels_gpu *kg, const pt_layer *L, int B, int T, int vocab) {
  char shape[96];
  snprintf(shape, sizeof shape, "layer %d (%s) B=%d T=%d", L->index, L->type->name, B, T);
  int64_t n_in = (int64_t)B * T * (L->in_tokens ? 1 : L->in_dim);
  int64_t n_out = (int64_t)B * T * L->out_dim;
  void *in = L->in_tokens ? (void *)hids(n_in, 0, vocab) : (void *)hrand(n_in, -1, 1);
  size_t in_bytes = (size_t)n_in * (L->in_tokens ? sizeof(int32_t) : sizeof(float));
  float *dout = hrand(n_out, -1, 1);
  pt_layer Lc = *L, Lg = *L;
  Lc.k = &kernels_cpu;
  Lg.k = &kg->table;
  /* the layer's tensors in one block each, laid out as the model's (layer_param_stride):
   * llama_block multiplies by its parameter groups q|k|v and gate|up as stacked tensors */
  int64_t total = 0, off = 0;
  for (int p = 0; p < L->n_params; p++) total += layer_param_stride(L, p);
  float *cg = hnew(sizeof(float) * (size_t)total), *gw = dnew(sizeof(float) * (size_t)total);
  float *gg = dnew(sizeof(float) * (size_t)total);
  for (int p = 0; p < L->n_params; p++) {
    Lc.g[p] = cg + off;
    Lg.w[p] = gw + off;
    Lg.g[p] = gg + off;
    setf(Lg.w[p], L->w[p], L->params[p].numel);
    off += layer_param_stride(L, p);
  }
  pt_io c = {&kernels_cpu, B, T, in, hnew(sizeof(float) * n_out),
             hnew(layer_saved_bytes(L, &kernels_cpu, B, T)),
             hnew(layer_scratch_bytes(L, &kernels_cpu, B, T)), dout,
             L->in_tokens ? NULL : hnew(in_bytes), NULL, NULL, 0};
  pt_io g = {&kg->table, B, T, up(in, in_bytes), dnew(sizeof(float) * n_out),
             dnew(layer_saved_bytes(L, &kg->table, B, T)),
             dnew(layer_scratch_bytes(L, &kg->table, B, T)), upf(dout, n_out),
             L->in_tokens ? NULL : dnew(in_bytes), NULL, NULL, 0};
  const pt_io *io[2] = {&c, &g};
  pt_layer *ls[2] = {&Lc, &Lg};
  for (int side = 0; side < 2; side++) {
    ls[side]->type->forward(ls[side], io[side]);
    ls[side]->type->backward_input(ls[side], io[side]);
    ls[side]->type->backward_weight(ls[side], io[side]);
  }
  char op[160];
  snprintf(op, sizeof op, "%s: out", shape);
  expect_close(op, "tables", downf(g.out, n_out), c.out, n_out, TOL_LAYER);
  snprintf(op, sizeof op, "%s: din", shape);
  if (c.din) expect_close(op, "tables", downf(g.din, n_in), c.din, n_in, TOL_LAYER);
  for (int p = 0; p < L->n_params; p++) {
    snprintf(op, sizeof op, "%s: grad %s", shape, L->params[p].name);
    expect_close(op, "tables", downf(Lg.g[p], L->params[p].numel), Lc.g[p], L->params[p].numel,
                 TOL_LAYER);
  }
  scope_end();
}

/* The model yaml describes, configured into *m (its spec *s); 0, else a failed check. */
static int model_of(const char *yaml, pt_spec *s, pt_model *m) {
  spec_errors e = {0};
  if (spec_load_text(yaml, strlen(yaml), "model.yaml", NULL, 0, s, &e) == 0 &&
      model_configure(m, s, &e) == 0)
    return 0;
  CHECK(0, "model: %s", e.msg);
  return -1;
}

/* Every layer of the model yaml describes, through both tables. */
static void test_model_tables(kernels_gpu *kg, const char *yaml) {
  pt_spec s;
  pt_model m;
  if (model_of(yaml, &s, &m) != 0) return;
  model_alloc_on(&m, 0, m.n_layers, device_host()); /* initialised parameters, on the host */
  for (int li = 0; li < m.n_layers; li++) test_layer_tables(kg, &m.layers[li], 3, 64, 97);
  model_free(&m);
  spec_free(&s);
}

static void test_tables(kernels_gpu *kg) {
  expect_table_complete(&kernels_cpu);
  expect_table_complete(&kg->table);
  test_model_tables(kg,
      "model: {vocab: 97, seq_len: 64, dim: 96, heads: 3}\n"
      "layers:\n  - embedding: {}\n  - pos_embedding: {}\n  - transformer_block: {}\n"
      "  - layernorm: {}\n  - linear: {out: 160}\n  - relu: {}\n  - linear: {bias: false}\n"
      "  - gelu: {}\n  - lm_head: {}\n");
  test_model_tables(kg,
      "model: {vocab: 97, seq_len: 64, dim: 96, heads: 6}\n"
      "layers:\n  - embedding: {}\n  - llama_block: {kv_heads: 2, ffn_dim: 160}\n"
      "  - rmsnorm: {}\n  - lm_head: {}\n");

  /* the entries that bring a result back through the table's own device buffers */
  int64_t n = 100003;
  float *x = hrand(n, -1, 1), *d_x = upf(x, n);
  double sc = kernels_cpu.sumsq(&kernels_cpu, x, n), sg = kg->table.sumsq(&kg->table, d_x, n);
  expect_close_d("table sumsq", "n=100003", sg, sc, TOL_DOUBLE_SUM);
  CHECK(kg->table.all_finite(&kg->table, d_x, n) == 1, "table all_finite: finite values refused");
  const float inf = INFINITY;
  gpu_to_device(&G, d_x + 7, &inf, sizeof inf);
  CHECK(kg->table.all_finite(&kg->table, d_x, n) == 0, "table all_finite: an infinity missed");
  int N = 37, F = 11;
  float *y = hrand((int64_t)N * F, -4, 4), *dyc = hnew(sizeof(float) * N * F);
  int32_t *ids = hids(N, 0, F);
  float *d_y = upf(y, (int64_t)N * F), *d_dy = dnew(sizeof(float) * N * F);
  double lc = kernels_cpu.loss(&kernels_cpu, LOSS_CROSS_ENTROPY, y, ids, sizeof(int32_t) * N, N,
                               F, 0.5f, dyc);
  double lg = kg->table.loss(&kg->table, LOSS_CROSS_ENTROPY, d_y, ids, sizeof(int32_t) * N, N, F,
                             0.5f, d_dy);
  expect_close_d("table loss", "N=37 F=11", lg, lc, TOL_CE_LOSS);
  expect_close("table loss dy", "N=37 F=11", downf(d_dy, (int64_t)N * F), dyc, (int64_t)N * F,
               TOL_DEFAULT);

  /* The step statistics' entries (no wait): the same kernels as above, so the same bits, left
   * in device slots read once at the end. loss_acc is called more times than the pinned ring
   * has buffers, the host targets overwritten after each call (the copy must have been taken). */
  enum { CALLS = GPU_STAGING_SLOTS + 9 };
  float *d_x2 = upf(x, n);
  double *d_sum = dnew(2 * sizeof(double)), stats[2], want = 0.0;
  int32_t *d_mark = dnew(sizeof(int32_t)), mark = -1;
  const pt_sum_span whole = {.offset = 0, .n = n};
  kg->table.sumsq_spans_into(&kg->table, d_sum, d_x2, &whole, 1);
  kg->table.finite_check(&kg->table, d_mark, 5, d_x2, n); /* finite: no mark */
  kg->table.finite_check(&kg->table, d_mark, 3, d_x, n);  /* the infinity: 3 */
  kg->table.finite_check(&kg->table, d_mark, 9, d_x, n);  /* a larger value wins */
  kg->table.finite_check(&kg->table, d_mark, 4, d_x, n);  /* a smaller one does not */
  int32_t *kept = hnew(sizeof(int32_t) * N);
  memcpy(kept, ids, sizeof(int32_t) * N);
  double lgs[CALLS]; /* each call's targets differ: the waiting entry's losses of them */
  for (int c = 0; c < CALLS; c++) {
    for (int i = 0; i < N; i++) ids[i] = (kept[i] + c) % F;
    lgs[c] = kg->table.loss(&kg->table, LOSS_CROSS_ENTROPY, d_y, ids, sizeof(int32_t) * N, N, F,
                            0.5f, d_dy);
  }
  for (int c = 0; c < CALLS; c++) {
    for (int i = 0; i < N; i++) ids[i] = (kept[i] + c) % F;
    kg->table.loss_acc(&kg->table, LOSS_CROSS_ENTROPY, d_y, ids, sizeof(int32_t) * N, N, F, 0.5f,
                       d_dy, NULL, d_sum + 1, NULL, 0);
    memset(ids, 0, sizeof(int32_t) * N); /* the caller reuses its buffer at once */
    want += lgs[c];
  }
  gpu_to_host(&G, stats, d_sum, sizeof stats);
  gpu_to_host(&G, &mark, d_mark, sizeof mark);
  CHECK(stats[0] == sg, "table sumsq_spans_into: %.17g, sumsq gave %.17g", stats[0], sg);
  CHECK(mark == 9, "table finite_check: mark %d, expected 9 (the largest failed check's)", mark);
  CHECK(stats[1] == want, "table loss_acc: %d calls added %.17g, expected %.17g", CALLS, stats[1],
        want);
  scope_end();
}

/* ---- train.precision ---------------------------------------------------------------------- */

/* Buffers of the table's device (gpu) or the host. */
static void to_table(int gpu, void *dst, const void *src, size_t bytes) {
  if (gpu) gpu_to_device(&G, dst, src, bytes);
  else memcpy(dst, src, bytes);
}
static float *from_table(int gpu, const float *src, int64_t n) {
  if (gpu) return downf(src, n);
  return hcopy(src, n);
}

/* A bf16 table's weight_copy entry (the GPU's, the CPU's oneDNN one): with W's copy registered
 * the forward and input-gradient products read it and give the bits converting W gives; a wrong
 * copy changes them (so it is read); forgotten, W is converted again. */
static void test_weight_copy(const pt_kernels *k, const char *shape, float *y, const float *x,
                             const float *W, const float *b, float *dx, const float *dy, int N,
                             int Ni, int No, int gpu) {
  int64_t nx = (int64_t)N * Ni, ny = (int64_t)N * No, nw = (int64_t)No * Ni;
  char what[160];
  snprintf(what, sizeof what, "%s %s", shape, gpu ? "gpu" : "cpu");
  k->linear_forward(k, y, x, W, b, N, Ni, No);
  k->linear_backward_input(k, dx, dy, W, N, Ni, No, 0);
  float *want_y = from_table(gpu, y, ny), *want_dx = from_table(gpu, dx, nx);
  uint16_t *copy = gpu ? dnew(sizeof(uint16_t) * (size_t)nw) : hnew(sizeof(uint16_t) * (size_t)nw);
  k->pack_bf16(k, copy, W, nw);
  k->weight_copy(k, W, copy, nw);
  k->linear_forward(k, y, x, W, b, N, Ni, No);
  expect_same_bits("weight copy linear_forward", what, from_table(gpu, y, ny), want_y, ny);
  k->linear_backward_input(k, dx, dy, W, N, Ni, No, 0);
  expect_same_bits("weight copy linear_backward_input", what, from_table(gpu, dx, nx), want_dx,
                   nx);
  uint16_t *zeros = hnew(sizeof(uint16_t) * (size_t)nw);
  memset(zeros, 0, sizeof(uint16_t) * (size_t)nw);
  to_table(gpu, copy, zeros, sizeof(uint16_t) * (size_t)nw);
  k->linear_forward(k, y, x, W, NULL, N, Ni, No);
  float *got = from_table(gpu, y, ny);
  int64_t nonzero = 0;
  for (int64_t i = 0; i < ny; i++) nonzero += got[i] != 0.0f;
  CHECK(nonzero == 0, "%s: a zero weight copy gave %lld nonzero outputs: the copy is not read",
        what, (long long)nonzero);
  k->weight_copy(k, W, NULL, 0);
  k->linear_forward(k, y, x, W, b, N, Ni, No);
  expect_same_bits("weight copy forgotten: linear_forward", what, from_table(gpu, y, ny), want_y,
                   ny);
}

/* The GPU table's activation_copies entry: with copies of x and dy registered every product
 * reads them (either operand) and gives the bits converting gives; a wrong copy changes them
 * (so it is read); after the set is replaced by none, x and dy are converted again. */
static void test_activation_copies(const pt_kernels *k, const char *shape, float *y,
                                   const float *x, const float *W, float *dx, const float *dy,
                                   float *dW, int N, int Ni, int No) {
  int64_t nx = (int64_t)N * Ni, ny = (int64_t)N * No, nw = (int64_t)No * Ni;
  uint16_t *cx = dnew(sizeof(uint16_t) * (size_t)nx), *cdy = dnew(sizeof(uint16_t) * (size_t)ny);
  k->pack_bf16(k, cx, x, nx);
  k->pack_bf16(k, cdy, dy, ny);
  float *zero = hnew(sizeof(float) * (size_t)nw);
  memset(zero, 0, sizeof(float) * (size_t)nw);
  uint16_t *zero16 = hnew(sizeof(uint16_t) * (size_t)nx);
  memset(zero16, 0, sizeof(uint16_t) * (size_t)nx);
  const int rounds = 3; /* none, the true copies, x's copy zeroed */
  float *got[3][3];
  for (int r = 0; r < rounds; r++) {
    pt_weight_range ranges[2];
    weight_range_put(&ranges[0], x, cx, nx);
    weight_range_put(&ranges[1], dy, cdy, ny);
    if (r == 2) to_table(1, cx, zero16, sizeof(uint16_t) * (size_t)nx);
    k->activation_copies(k, ranges, r ? 2 : 0);
    to_table(1, dW, zero, sizeof(float) * (size_t)nw);
    k->linear_forward(k, y, x, W, NULL, N, Ni, No);
    k->linear_backward_input(k, dx, dy, W, N, Ni, No, 0);
    k->linear_backward_weight(k, dW, NULL, dy, x, N, Ni, No);
    got[r][0] = downf(y, ny), got[r][1] = downf(dx, nx), got[r][2] = downf(dW, nw);
  }
  k->activation_copies(k, NULL, 0);
  expect_same_bits("activation copies linear_forward", shape, got[1][0], got[0][0], ny);
  expect_same_bits("activation copies linear_backward_input", shape, got[1][1], got[0][1], nx);
  expect_same_bits("activation copies linear_backward_weight", shape, got[1][2], got[0][2], nw);
  int64_t nonzero = 0;
  for (int64_t i = 0; i < ny; i++) nonzero += got[2][0][i] != 0.0f;
  for (int64_t i = 0; i < nw; i++) nonzero += got[2][2][i] != 0.0f;
  CHECK(nonzero == 0, "%s: a zero copy of x gave %lld nonzero products: the copy is not read",
        shape, (long long)nonzero);
  k->linear_forward(k, y, x, W, NULL, N, Ni, No);
  expect_same_bits("activation copies replaced by none: linear_forward", shape, downf(y, ny),
                   got[0][0], ny);
}

/* Operand conversions the ledger holds so far. */
static uint64_t conversions(void) { return ledger_launches("to_bf16_kernel:operand"); }

/* The GPU table's share_bf16 and round_share_bf16: a shared x is converted once, by the first
 * product reading it, and read there by the next (one conversion fewer than unshared; x changed
 * behind the promise leaves the next product's result as it was, so the kept copy is what it
 * reads); round_share_bf16 rounds x as round_bf16 does and the products read its kept bits at
 * once; after activation_copies x is converted again. x is left as it came. */
static void test_share(const pt_kernels *k, const char *shape, float *y, float *x, const float *W,
                       int N, int Ni, int No) {
  int64_t nx = (int64_t)N * Ni, ny = (int64_t)N * No;
  float *x0 = downf(x, nx), *other = hrand(nx, -3, 3);
  k->activation_copies(k, NULL, 0);
  uint64_t c0 = conversions();
  k->linear_forward(k, y, x, W, NULL, N, Ni, No);
  k->linear_forward(k, y, x, W, NULL, N, Ni, No);
  uint64_t unshared = conversions() - c0;
  float *want = downf(y, ny);
  for (int round = 0; round < 2; round++) {
    const char *what = round ? "round_share_bf16" : "share_bf16";
    char why[160];
    to_table(1, x, x0, sizeof(float) * (size_t)nx);
    c0 = conversions();
    if (round) {
      float *xr = upf(x0, nx);
      k->round_bf16(k, xr, nx);
      k->round_share_bf16(k, x, nx, 0);
      snprintf(why, sizeof why, "%s: x rounded", what);
      expect_same_bits(why, shape, downf(x, nx), downf(xr, nx), nx);
    } else {
      k->share_bf16(k, x, nx, 0);
    }
    k->linear_forward(k, y, x, W, NULL, N, Ni, No);
    snprintf(why, sizeof why, "%s: the first product", what);
    expect_same_bits(why, shape, downf(y, ny), want, ny);
    to_table(1, x, other, sizeof(float) * (size_t)nx); /* behind the promise */
    k->linear_forward(k, y, x, W, NULL, N, Ni, No);
    snprintf(why, sizeof why, "%s: the second product reads the kept copy", what);
    expect_same_bits(why, shape, downf(y, ny), want, ny);
    uint64_t got = conversions() - c0, ought = unshared - 1 - (uint64_t)round;
    CHECK(got == ought, "%s %s: %llu operand conversions for two products, not %llu", shape,
          what, (unsigned long long)got, (unsigned long long)ought);
    k->activation_copies(k, NULL, 0);
    k->linear_forward(k, y, x, W, NULL, N, Ni, No);
    float *after = downf(y, ny);
    int64_t same = 0;
    for (int64_t i = 0; i < ny; i++) same += after[i] == want[i];
    CHECK(same < ny, "%s %s: after activation_copies the old x is still read", shape, what);
  }
  to_table(1, x, x0, sizeof(float) * (size_t)nx);
}

/* The GPU table's share_bf16_into: x is converted whole into the caller's place by the first
 * product reading it (place then holds x's bits, x left unrounded, shared_into_done 1) and read
 * there by the next (x converted once for both, x changed behind the promise unseen); before a
 * product reads it, and after activation_copies, shared_into_done is 0. */
static void test_share_into(const pt_kernels *k, const char *shape, float *y, float *x,
                            const float *W, int N, int Ni, int No) {
  int64_t nx = (int64_t)N * Ni, ny = (int64_t)N * No;
  float *x0 = downf(x, nx), *other = hrand(nx, -3, 3);
  uint16_t *place = dnew(sizeof(uint16_t) * (size_t)nx), *bits = hnew(sizeof(uint16_t) * nx);
  k->activation_copies(k, NULL, 0);
  uint64_t c0 = conversions();
  k->linear_forward(k, y, x, W, NULL, N, Ni, No);
  uint64_t unshared = 2 * (conversions() - c0); /* x's and W's, per product */
  float *want = downf(y, ny);
  k->share_bf16_into(k, x, nx, place, 0);
  CHECK(!k->shared_into_done(k, x), "%s: share_bf16_into done before any product", shape);
  c0 = conversions();
  k->linear_forward(k, y, x, W, NULL, N, Ni, No);
  expect_same_bits("share_bf16_into: the first product", shape, downf(y, ny), want, ny);
  CHECK(k->shared_into_done(k, x), "%s: share_bf16_into not done after a product", shape);
  gpu_to_host(&G, bits, place, sizeof(uint16_t) * (size_t)nx);
  int64_t wrong = 0;
  for (int64_t i = 0; i < nx; i++) wrong += bits[i] != pt_bf16_bits(x0[i]);
  CHECK(wrong == 0, "%s: share_bf16_into's place differs from x's bits at %lld elements", shape,
        (long long)wrong);
  expect_same_bits("share_bf16_into: x left as it was", shape, downf(x, nx), x0, nx);
  to_table(1, x, other, sizeof(float) * (size_t)nx); /* behind the promise */
  k->linear_forward(k, y, x, W, NULL, N, Ni, No);
  expect_same_bits("share_bf16_into: the second product reads the place", shape, downf(y, ny),
                   want, ny);
  CHECK(conversions() - c0 == unshared - 1, "%s: %llu operand conversions for two products, "
        "not %llu (x's once)", shape, (unsigned long long)(conversions() - c0),
        (unsigned long long)(unshared - 1));
  k->activation_copies(k, NULL, 0);
  CHECK(!k->shared_into_done(k, x), "%s: share_bf16_into done after activation_copies", shape);
  to_table(1, x, x0, sizeof(float) * (size_t)nx);
}

/* 1 when every float of x[0..n) is a NaN: unset on the emulated GPU (kernels.h unset_f32). */
static int all_nan(const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!isnan(x[i])) return 0;
  return 1;
}

/* linear_backward_input (acc 0) with dx's place handed over alone (kernels.h share_bf16_into;
 * the blocks' attention dout, layers/builtin.h layer_attention_dout_at_rest): one cuBLASLt
 * matmul with a bf16 D writes there the bits converting the float32 dx gives, dx's floats unset
 * (NaN), no conversion more; with room the table keeps (place NULL) a product reading dx then
 * reads those bits (the float path's product, bit for bit); acc 1 takes no place (dx's floats
 * accumulate as ever). dy: any [N, No] device tensor. */
static void test_backward_input_alone(const pt_kernels *k, const char *shape, const float *dy,
                                      const float *W, int N, int Ni, int No) {
  const char *row = "cublasLt_bwd_input:bf16";
  const int64_t nx = (int64_t)N * Ni, ny = (int64_t)N * No;
  float *dx = dnew(sizeof(float) * nx), *y = dnew(sizeof(float) * ny);
  uint16_t *dx16 = dnew(sizeof(uint16_t) * (size_t)nx);
  k->activation_copies(k, NULL, 0);
  uint64_t c0 = conversions();
  k->linear_backward_input(k, dx, dy, W, N, Ni, No, 0);
  const uint64_t plain = conversions() - c0;
  float *want = downf(dx, nx);
  k->linear_forward(k, y, dx, W, NULL, N, Ni, No); /* a product reading dx's floats */
  float *want_y = downf(y, ny);
  for (int room = 0; room < 2; room++) {
    k->activation_copies(k, NULL, 0);
    k->share_bf16_into(k, dx, nx, room ? NULL : dx16, 1);
    uint64_t l0 = ledger_launches(row);
    c0 = conversions();
    k->linear_backward_input(k, dx, dy, W, N, Ni, No, 0);
    CHECK(ledger_launches(row) - l0 == 1, "%s: linear_backward_input into %s alone: %llu "
          "launches of %s, expected 1", shape, room ? "room" : "its place",
          (unsigned long long)(ledger_launches(row) - l0), row);
    CHECK(conversions() - c0 == plain, "%s: %llu operand conversions, expected %llu", shape,
          (unsigned long long)(conversions() - c0), (unsigned long long)plain);
    CHECK(k->shared_into_done(k, dx), "%s: linear_backward_input's place not counted written",
          shape);
    CHECK(all_nan(downf(dx, nx), nx), "%s: linear_backward_input wrote floats beside its place "
          "alone", shape);
    if (!room) {
      expect_bf16_of("linear_backward_input into its place alone", shape, dx16, want, nx);
      continue;
    }
    k->linear_forward(k, y, dx, W, NULL, N, Ni, No);
    expect_same_bits("a product reading linear_backward_input's bits in room", shape,
                     downf(y, ny), want_y, ny);
  }
  const float *once = want;
  for (int shared = 0; shared < 2; shared++) { /* acc: as without a place */
    k->activation_copies(k, NULL, 0);
    if (shared) k->share_bf16_into(k, dx, nx, dx16, 1);
    gpu_to_device(&G, dx, once, sizeof(float) * (size_t)nx);
    k->linear_backward_input(k, dx, dy, W, N, Ni, No, 1);
    if (!shared) {
      want = downf(dx, nx);
      continue;
    }
    CHECK(!k->shared_into_done(k, dx), "%s: linear_backward_input with acc took dx's place",
          shape);
    expect_same_bits("linear_backward_input with acc, dx's place handed over", shape,
                     downf(dx, nx), want, nx);
  }
  k->activation_copies(k, NULL, 0);
}

/* The GPU table's products writing their output's place at rest handed over alone (kernels.h
 * share_bf16_into, alone): linear_forward (with and without a bias) and linear_forward_gelu's y
 * and h (both handed over) written there by one cuBLASLt matmul with a bf16 D (and aux), the
 * bits converting the float32 results gives, the floats unset; with only y handed over, the
 * float32 matmul and y's bits packed there, h's floats as before. shape: its No a multiple of
 * 8 (GELU's aux leading dimension). */
static void test_products_alone(const pt_kernels *k, const char *shape, const float *x,
                                const float *W, const float *b, int N, int Ni, int No) {
  int64_t ny = (int64_t)N * No;
  float *y = dnew(sizeof(float) * ny), *h = dnew(sizeof(float) * ny);
  uint16_t *y16 = dnew(sizeof(uint16_t) * (size_t)ny), *h16 = dnew(sizeof(uint16_t) * (size_t)ny);
  for (int with_b = 0; with_b < 2; with_b++) {
    const char *row = with_b ? "cublasLt_bias:bf16" : "cublasLt:bf16";
    k->activation_copies(k, NULL, 0);
    uint64_t r0 = conversions();
    k->linear_forward(k, y, x, W, with_b ? b : NULL, N, Ni, No);
    uint64_t plain = conversions() - r0; /* x's and W's: the output's bits cost none more */
    float *want = downf(y, ny);
    k->share_bf16_into(k, y, ny, y16, 1);
    uint64_t l0 = ledger_launches(row), c0 = conversions();
    k->linear_forward(k, y, x, W, with_b ? b : NULL, N, Ni, No);
    CHECK(ledger_launches(row) - l0 == 1, "%s: linear_forward (bias %d) into its place alone: "
          "%llu launches of %s, expected 1", shape, with_b,
          (unsigned long long)(ledger_launches(row) - l0), row);
    expect_bf16_of("linear_forward into its place alone", shape, y16, want, ny);
    CHECK(k->shared_into_done(k, y), "%s: linear_forward's place not counted written", shape);
    CHECK(all_nan(downf(y, ny), ny), "%s: linear_forward wrote its floats beside its place alone", shape);
    CHECK(conversions() - c0 == plain, "%s: %llu operand conversions, expected %llu", shape,
          (unsigned long long)(conversions() - c0), (unsigned long long)plain);
  }
  test_backward_input_alone(k, shape, y, W, N, Ni, No);
  float *d_g = y;
  k->activation_copies(k, NULL, 0);
  k->linear_forward_gelu(k, d_g, h, x, W, b, N, Ni, No);
  float *want_g = downf(d_g, ny), *want_h = downf(h, ny);
  k->share_bf16_into(k, d_g, ny, y16, 1);
  k->share_bf16_into(k, h, ny, h16, 1);
  uint64_t l0 = ledger_launches("cublasLt_gelu_aux_bias:bf16");
  k->linear_forward_gelu(k, d_g, h, x, W, b, N, Ni, No);
  CHECK(ledger_launches("cublasLt_gelu_aux_bias:bf16") - l0 == 1,
        "%s: linear_forward_gelu into both places alone not one bf16 matmul", shape);
  expect_bf16_of("linear_forward_gelu y into its place alone", shape, y16, want_g, ny);
  expect_bf16_of("linear_forward_gelu h into its place alone", shape, h16, want_h, ny);
  CHECK(all_nan(downf(d_g, ny), ny) && all_nan(downf(h, ny), ny), "%s: linear_forward_gelu wrote floats beside its "
        "places alone", shape);
  /* y's place alone, h's not: float32 D and aux (aux takes D's type), y's bits packed */
  k->activation_copies(k, NULL, 0);
  k->share_bf16_into(k, d_g, ny, y16, 1);
  gpu_to_device(&G, y16, hnew(sizeof(uint16_t) * (size_t)ny), sizeof(uint16_t) * (size_t)ny);
  l0 = ledger_launches("cublasLt_gelu_aux_bias:bf16");
  k->linear_forward_gelu(k, d_g, h, x, W, b, N, Ni, No);
  CHECK(ledger_launches("cublasLt_gelu_aux_bias:bf16") == l0,
        "%s: linear_forward_gelu with only y's place ran a bf16 D", shape);
  expect_bf16_of("linear_forward_gelu y into its place, h not handed over", shape, y16, want_g,
                 ny);
  expect_same_bits("linear_forward_gelu h not handed over", shape, downf(h, ny), want_h, ny);
  k->activation_copies(k, NULL, 0);
}

/* The GPU table's bf16 attention with opts.shared (kernels.h): o and dqkv kept as their
 * activation copies give the products reading them the bits converting gives, with one operand
 * conversion fewer each; round_share_bf16 over a run [pre | dqkv | post] rounds pre and post as
 * round_bf16 does, in one launch over them only, and leaves dqkv (bf16 values already); the
 * weight gradients of dqkv, pre and post then read kept bits equal to converting's (with unset
 * too: pre and post packed alone, their floats NaN, 6 bytes an element). Unshared
 * (opts 0) is the reference: the same calls, converting. After activation_copies a rewritten o
 * is converted again. Runs where the library takes the shape (the emulator's substitute here). */
static void test_attention_share(const pt_kernels *k) {
  const int B = 2, T = 24, H = 2, d = 32, N = B * T;
  const char *shape = "attention shared B=2 T=24 d=32 H=2";
  const int64_t n_qkv = (int64_t)N * 3 * d, n_o = (int64_t)N * d, n_run = 2 * n_o + n_qkv;
  float *qkv = upf(hrand(n_qkv, -2, 2), n_qkv), *dout = upf(hrand(n_o, -1, 1), n_o);
  float *Wo = upf(hrand((int64_t)d * d, -1, 1), (int64_t)d * d);
  float *Wq = upf(hrand(3 * (int64_t)d * d, -1, 1), 3 * (int64_t)d * d);
  float *xin = upf(hrand(n_o, -1, 1), n_o), *sides = hrand(2 * n_o, -1, 1);
  float *o = dnew(sizeof(float) * (size_t)n_o), *lse = dnew(sizeof(float) * (size_t)B * H * T);
  float *run = dnew(sizeof(float) * (size_t)n_run), *y = dnew(sizeof(float) * (size_t)n_o);
  float *dx = dnew(sizeof(float) * (size_t)n_o), *dWq = dnew(sizeof(float) * 3 * (size_t)d * d);
  float *dWs = dnew(sizeof(float) * 2 * (size_t)d * d);
  float *zero = hnew(sizeof(float) * 3 * (size_t)d * d);
  memset(zero, 0, sizeof(float) * 3 * (size_t)d * d);
  float *pre = run, *dqkv = run + n_o, *post = run + n_o + n_qkv;
  float *got[3][6];
  uint64_t conv[3], packs[3];
  double pack_bytes[3];
  /* pass 0 only asks for the room the table keeps from the next activation_copies on (a
   * step's first micro-batch, in training); then unshared (1), shared (2), and shared with
   * round_share_bf16 unset (3: pre and post packed alone, their floats NaN) */
  for (int pass = 0; pass < 4; pass++) {
    const int shared = pass != 1, at = pass == 3 ? 2 : shared, unset = pass == 3;
    const char *row = unset ? "pack_bf16_around_kernel" : "round_pack_bf16_kernel";
    const pt_attention_opts opts = {.shared = shared};
    k->activation_copies(k, NULL, 0);
    to_table(1, pre, sides, sizeof(float) * (size_t)n_o);
    to_table(1, post, sides + n_o, sizeof(float) * (size_t)n_o);
    to_table(1, dWq, zero, sizeof(float) * 3 * (size_t)d * d);
    to_table(1, dWs, zero, sizeof(float) * 2 * (size_t)d * d);
    uint64_t c0 = conversions(), p0 = ledger_launches(row);
    double b0 = ledger_bytes(row);
    k->attention_forward(k, o, lse, qkv, B, T, d, H, H, NULL, &opts, NULL);
    k->linear_forward(k, y, o, Wo, NULL, N, d, d);
    k->attention_backward(k, dqkv, dout, qkv, o, lse, B, T, d, H, H, NULL, &opts, NULL);
    k->linear_backward_input(k, dx, dqkv, Wq, N, d, 3 * d, 0);
    k->round_share_bf16(k, run, n_run, unset);
    k->linear_backward_weight(k, dWq, NULL, dqkv, xin, N, d, 3 * d);
    k->linear_backward_weight(k, dWs, NULL, pre, xin, N, d, d);
    k->linear_backward_weight(k, dWs + d * d, NULL, post, xin, N, d, d);
    if (pass == 0) continue;
    conv[at] = conversions() - c0;
    packs[at] = ledger_launches(row) - p0;
    pack_bytes[at] = ledger_bytes(row) - b0;
    got[at][0] = downf(o, n_o), got[at][1] = downf(y, n_o);
    got[at][2] = downf(dx, n_o), got[at][3] = downf(run, n_run);
    got[at][4] = downf(dWq, 3 * (int64_t)d * d), got[at][5] = downf(dWs, 2 * (int64_t)d * d);
  }
  static const char *what[6] = {"o", "o W^T (kept o)", "dqkv W (kept dqkv)",
                                "the run after round_share_bf16", "dW of kept dqkv",
                                "dW of pre and post"};
  const int64_t n[6] = {n_o, n_o, n_o, n_run, 3 * (int64_t)d * d, 2 * (int64_t)d * d};
  for (int i = 0; i < 6; i++) {
    char op[96];
    snprintf(op, sizeof op, "attention shared: %s", what[i]);
    expect_same_bits(op, shape, got[1][i], got[0][i], n[i]);
    if (i == 3) continue; /* unset: the run's pre and post NaN, its dqkv as it was */
    snprintf(op, sizeof op, "attention shared, round_share_bf16 unset: %s", what[i]);
    expect_same_bits(op, shape, got[2][i], got[0][i], n[i]);
  }
  int64_t nan = 0;
  for (int64_t i = 0; i < n_run; i++) nan += got[2][3][i] != got[2][3][i];
  CHECK(nan == 2 * n_o, "%s: round_share_bf16 unset left %lld NaN floats, not pre's and post's "
        "%lld", shape, (long long)nan, (long long)(2 * n_o));
  expect_same_bits("attention shared, round_share_bf16 unset: dqkv left", shape,
                   got[2][3] + n_o, got[0][3] + n_o, n_qkv);
  CHECK(packs[2] == 1 && pack_bytes[2] == 6.0 * 2.0 * (double)n_o, "%s: round_share_bf16 unset "
        "launched %llu packs of %g bytes, not one of 6 an element of pre and post", shape,
        (unsigned long long)packs[2], pack_bytes[2]);
  CHECK(conv[1] + 2 == conv[0], "%s: %llu operand conversions shared, %llu unshared: o and dqkv "
        "should be read from their kept bits", shape, (unsigned long long)conv[1],
        (unsigned long long)conv[0]);
  CHECK(packs[0] == 1 && packs[1] == 1, "%s: round_share_bf16 launched %llu and %llu times, not "
        "once", shape, (unsigned long long)packs[0], (unsigned long long)packs[1]);
  CHECK(pack_bytes[0] == 10.0 * (double)n_run && pack_bytes[1] == 10.0 * 2.0 * (double)n_o,
        "%s: round_share_bf16 moved %g and %g bytes: dqkv should be skipped when kept", shape,
        pack_bytes[0], pack_bytes[1]);
  /* a new set forgets the kept o: the product converts the o written behind it */
  k->activation_copies(k, NULL, 0);
  to_table(1, o, sides, sizeof(float) * (size_t)n_o);
  k->linear_forward(k, y, o, Wo, NULL, N, d, d);
  float *after = downf(y, n_o);
  int64_t same = 0;
  for (int64_t i = 0; i < n_o; i++) same += after[i] == got[1][1][i];
  CHECK(same < n_o, "%s: after activation_copies the kept o is still read", shape);
}

/* Read at rest where cuDNN runs (kernels.h attention_reads_bf16, layers/layer.h read_at_rest):
 * a bf16 table's attention says so for the shapes its library takes, not for a refused head dim
 * nor soft-capping, and the blocks' saved parts follow it (two more read at rest: qkv, atty).
 * Then, as engine/stage_store.c runs it, qkv's and o's places handed over alone: forward writes
 * o there only (not widened: its floats NaN on the emulator, no unpack launched) and o W^T
 * reads it; backward with qkv and o unset (NaN) and registered as copies reads the copies, the
 * library's path and the in-house one packed documents take alike. Every result has the bits
 * of the reference, the same calls on floats. */
static int at_rest_parts(const pt_layer *L, const pt_kernels *k, int B, int T) {
  pt_saved_part parts[PT_MAX_SAVED_PARTS];
  int n = layer_saved_parts(L, k, B, T, parts), at_rest = 0;
  for (int i = 0; i < n; i++) /* forward's: the stash's are read at rest on every table */
    at_rest += parts[i].read_at_rest && parts[i].writers == PT_SAVED_FORWARD;
  return at_rest;
}

/* Parts backward_input reads only through products once it has written them (layer.h
 * backward_at_rest): the same on every table. */
static int backward_at_rest_parts(const pt_layer *L, const pt_kernels *k, int B, int T) {
  pt_saved_part parts[PT_MAX_SAVED_PARTS];
  int n = layer_saved_parts(L, k, B, T, parts), at_rest = 0;
  for (int i = 0; i < n; i++) at_rest += parts[i].backward_at_rest;
  return at_rest;
}

static void test_at_rest_parts(const pt_kernels *k) {
  const int B = 2, T = 16;
  const char *yaml =
      "model: {vocab: 97, seq_len: 64, dim: 96, heads: 3}\n"
      "layers:\n  - embedding: {}\n  - transformer_block: {}\n  - transformer_block: {heads: 8}\n"
      "  - llama_block: {heads: 6, kv_heads: 2, ffn_dim: 160}\n"
      "  - llama_block: {heads: 6, kv_heads: 2, ffn_dim: 160, window: 4}\n"
      "  - llama_block: {heads: 6, kv_heads: 2, ffn_dim: 160, attn_softcap: 50.0}\n"
      "  - lm_head: {}\n";
  /* hd 32, 12 (refused), 16, 16 in a window, 16 soft-capped: cuDNN's or not */
  static const int takes[5] = {1, 0, 1, 1, 0};
  pt_spec s;
  pt_model m;
  if (model_of(yaml, &s, &m) != 0) return;
  const pt_attention_opts plain = {0}, soft = {.softcap = 50.0f}, band = {.window = 4};
  CHECK(k->attention_reads_bf16(k, B, T, 96, 3, 3, &plain), "attention_reads_bf16: hd 32 refused");
  CHECK(k->attention_reads_bf16(k, B, T, 96, 6, 2, &band), "attention_reads_bf16: window refused");
  CHECK(!k->attention_reads_bf16(k, B, T, 96, 8, 8, &plain), "attention_reads_bf16: hd 12 taken");
  CHECK(!k->attention_reads_bf16(k, B, T, 96, 6, 2, &soft), "attention_reads_bf16: soft-cap taken");
  for (int li = 1; li <= 5; li++) {
    const pt_layer *L = &m.layers[li];
    int cpu = at_rest_parts(L, &kernels_cpu, B, T), gpu = at_rest_parts(L, k, B, T);
    int base = 4; /* GPT-2's xln1, xln2, g and x1; the Llama's xn1, xn2, a, h and gu (swiglu's) */
    base += li >= 3;
    CHECK(cpu == base && gpu == base + 2 * takes[li - 1],
          "layer %d (%s): %d parts read at rest on the cpu, %d on the bf16 gpu; want %d and %d "
          "(qkv and atty where cuDNN runs)", li, L->type->name, cpu, gpu, base,
          base + 2 * takes[li - 1]);
    /* GPT-2's d(fc output), dqkv, dx1, dxln2 and dxln1; the Llama's gate gradient, dh, dxn2,
     * dqkv and dxn1 (no qk_norm, no post-norms) */
    const int back = 5;
    CHECK(backward_at_rest_parts(L, &kernels_cpu, B, T) == back &&
              backward_at_rest_parts(L, k, B, T) == back,
          "layer %d (%s): %d and %d parts backward_at_rest on the cpu and the gpu, want %d", li,
          L->type->name, backward_at_rest_parts(L, &kernels_cpu, B, T),
          backward_at_rest_parts(L, k, B, T), back);
  }
  model_free(&m);
  spec_free(&s);
}

static void test_attention_at_rest(const pt_kernels *k) {
  test_at_rest_parts(k);
  const int B = 2, T = 24, H = 2, d = 32, N = B * T;
  const char *shape = "attention at rest B=2 T=24 d=32 H=2";
  const int64_t n_qkv = (int64_t)N * 3 * d, n_o = (int64_t)N * d, n_lse = (int64_t)B * H * T;
  const pt_attention_opts opts = {.shared = 1};
  float *hq = hrand(n_qkv, -2, 2);
  kernels_cpu_for(PT_PRECISION_BF16)->round_bf16(kernels_cpu_for(PT_PRECISION_BF16), hq, n_qkv);
  float *qkv = upf(hq, n_qkv), *dout = upf(hrand(n_o, -1, 1), n_o);
  float *Wo = upf(hrand((int64_t)d * d, -1, 1), (int64_t)d * d);
  float *o = dnew(sizeof(float) * (size_t)n_o), *lse = dnew(sizeof(float) * (size_t)n_lse);
  float *y = dnew(sizeof(float) * (size_t)n_o), *dqkv = dnew(sizeof(float) * (size_t)n_qkv);
  uint16_t *place = dnew(sizeof(uint16_t) * (size_t)(n_qkv + n_o)), *place_o = place + n_qkv;
  const int32_t *doc = up(random_docs(B, T, 7), sizeof(int32_t) * (size_t)N);
  float *want[2][3], *got[2][3];
  CHECK(k->attention_reads_bf16(k, B, T, d, H, H, &opts), "%s: not read at rest", shape);
  for (int docs = 0; docs < 2; docs++) {
    const int32_t *ds = docs ? doc : NULL;
    /* the reference: every tensor float32, converted where read, o rounded after forward (the
     * stage's rounding: the in-house kernels' o is not bf16 values) */
    k->activation_copies(k, NULL, 0);
    k->attention_forward(k, o, lse, qkv, B, T, d, H, H, ds, &opts, NULL);
    k->linear_forward(k, y, o, Wo, NULL, N, d, d);
    k->activation_copies(k, NULL, 0);
    k->round_bf16(k, o, n_o);
    k->attention_backward(k, dqkv, dout, qkv, o, lse, B, T, d, H, H, ds, &opts, NULL);
    want[docs][0] = downf(o, n_o), want[docs][1] = downf(y, n_o);
    want[docs][2] = downf(dqkv, n_qkv);
    /* at rest: the places handed over alone before forward (share_bf16_into) */
    k->activation_copies(k, NULL, 0);
    k->share_bf16_into(k, qkv, n_qkv, place, 1);
    k->share_bf16_into(k, o, n_o, place_o, 1);
    uint64_t widen0 = ledger_launches("from_bf16_kernel");
    k->attention_forward(k, o, lse, qkv, B, T, d, H, H, ds, &opts, NULL);
    CHECK(docs || ledger_launches("from_bf16_kernel") == widen0,
          "%s: o widened although its place stands alone", shape);
    CHECK(docs || all_nan(downf(o, n_o), n_o), "%s: o's floats written (or not unset)", shape);
    k->linear_forward(k, y, o, Wo, NULL, N, d, d);
    CHECK(k->shared_into_done(k, o), "%s%s: o's place not written", shape, docs ? " docs" : "");
    got[docs][1] = downf(y, n_o);
    if (!k->shared_into_done(k, qkv)) k->pack_bf16(k, place, qkv, n_qkv); /* the stage's pack */
    /* backward: neither unpacked, their floats unset, the places the copies */
    k->unset_f32(k, qkv, n_qkv);
    k->unset_f32(k, o, n_o);
    pt_weight_range r[2];
    weight_range_put(&r[0], qkv, place, n_qkv);
    weight_range_put(&r[1], o, place_o, n_o);
    k->activation_copies(k, r, 2);
    k->attention_backward(k, dqkv, dout, qkv, o, lse, B, T, d, H, H, ds, &opts, NULL);
    got[docs][2] = downf(dqkv, n_qkv);
    k->unpack_bf16(k, o, place_o, n_o); /* o's bits at rest */
    got[docs][0] = downf(o, n_o);
    setf(qkv, hq, n_qkv);
    static const char *what[3] = {"o at rest", "o W^T (o read at rest)", "dqkv (read at rest)"};
    for (int i = 0; i < 3; i++) {
      char op[96];
      snprintf(op, sizeof op, "%s%s", what[i], docs ? ", documents" : "");
      expect_same_bits(op, shape, got[docs][i], want[docs][i], i == 2 ? n_qkv : n_o);
    }
  }
  k->activation_copies(k, NULL, 0);
  scope_end();
}

/* The stash's places handed over before backward_input, as engine/stage_store.c runs it
 * (kernels.h share_bf16_into; layers/layer.h backward_at_rest). dqkv alone, into room the table
 * keeps (no place: a backward_weight right after) or into the caller's place (a stash set's):
 * the attention writes it there only (no widening in the ledger, its floats NaN,
 * shared_into_done), dqkv W reads it there, and dqkv's weight and bias gradients (room kept: the
 * bias sum from the copy; a set's: from its floats unpacked, as the stage does) have the bits
 * of the reference, the same calls with nothing handed over (today's path: dqkv kept widened).
 * Then a tensor h (GPT-2's d(fc output): written unrounded, read next by a product) handed over
 * without a place: that product converts it into room kept (shared_into_done), and the stage,
 * h's floats unset, packs [pre | h | post] with round_share_bf16 unset in one launch over pre and
 * post only; h's weight and bias gradients read the copy, with the bits of the reference (h not
 * handed over: converted, then packed with the rest). Where the table has no free range, h is not
 * shared at all: today's path. */
static void test_stash_at_rest(const pt_kernels *k) {
  const int B = 2, T = 24, H = 2, d = 32, N = B * T;
  const char *shape = "stash at rest B=2 T=24 d=32 H=2";
  const int64_t n_qkv = (int64_t)N * 3 * d, n_o = (int64_t)N * d, nw = 3 * (int64_t)d * d;
  const pt_attention_opts opts = {.shared = 1};
  float *hq = hrand(n_qkv, -2, 2), *hh = hrand(n_o, -3, 3), *sides = hrand(2 * n_o, -1, 1);
  kernels_cpu_for(PT_PRECISION_BF16)->round_bf16(kernels_cpu_for(PT_PRECISION_BF16), hq, n_qkv);
  float *qkv = upf(hq, n_qkv), *dout = upf(hrand(n_o, -1, 1), n_o);
  float *Wq = upf(hrand(nw, -1, 1), nw), *xin = upf(hrand(n_o, -1, 1), n_o);
  float *o = dnew(sizeof(float) * (size_t)n_o), *lse = dnew(sizeof(float) * (size_t)B * H * T);
  float *dqkv = dnew(sizeof(float) * (size_t)n_qkv), *dx = dnew(sizeof(float) * (size_t)n_o);
  float *dW = dnew(sizeof(float) * (size_t)nw), *db = dnew(sizeof(float) * 3 * (size_t)d);
  float *run = dnew(sizeof(float) * 3 * (size_t)n_o), *h = run + n_o;
  uint16_t *place = dnew(sizeof(uint16_t) * (size_t)n_qkv);
  float *zero = hnew(sizeof(float) * (size_t)nw);
  memset(zero, 0, sizeof(float) * (size_t)nw);
  k->activation_copies(k, NULL, 0);
  k->attention_forward(k, o, lse, qkv, B, T, d, H, H, NULL, &opts, NULL);
  /* how 0: nothing handed over (the reference); 1: room kept; 2: the caller's place */
  float *want[4] = {0}, *got[4] = {0};
  for (int how = 0; how < 3; how++) {
    k->activation_copies(k, NULL, 0);
    setf(dW, zero, nw);
    setf(db, zero, 3 * d);
    if (how) k->share_bf16_into(k, dqkv, n_qkv, how == 2 ? place : NULL, 1);
    uint64_t w0 = ledger_launches("from_bf16_kernel");
    k->attention_backward(k, dqkv, dout, qkv, o, lse, B, T, d, H, H, NULL, &opts, NULL);
    uint64_t widened = ledger_launches("from_bf16_kernel") - w0;
    CHECK(widened == (how == 0), "%s (%s): dqkv widened %llu times", shape,
          how ? "handed over" : "reference", (unsigned long long)widened);
    if (how) {
      CHECK(all_nan(downf(dqkv, n_qkv), n_qkv), "%s: dqkv's floats written (or not unset)",
            shape);
      CHECK(k->shared_into_done(k, dqkv), "%s: dqkv's place not written", shape);
    }
    k->linear_backward_input(k, dx, dqkv, Wq, N, d, 3 * d, 0);
    if (how == 2) { /* the set's: unpacked for a backward_weight later, no copies then */
      k->unpack_bf16(k, dqkv, place, n_qkv);
      k->activation_copies(k, NULL, 0);
    }
    uint64_t l0 = ledger_launches("colsum_acc_kernel:bf16");
    k->linear_backward_weight(k, dW, db, dqkv, xin, N, d, 3 * d);
    CHECK(how == 2 || ledger_launches("colsum_acc_kernel:bf16") - l0 == 1,
          "%s: dqkv's bias sum not from its copy", shape);
    float **to = how ? got : want;
    to[0] = downf(dx, n_o), to[1] = downf(dW, nw), to[2] = downf(db, 3 * d);
    if (!how) continue;
    static const char *what[3] = {"dqkv W", "dW of dqkv", "db of dqkv"};
    const int64_t n[3] = {n_o, nw, 3 * d};
    for (int i = 0; i < 3; i++) {
      char op[96];
      snprintf(op, sizeof op, "%s (%s)", what[i], how == 1 ? "room kept" : "a set's place");
      expect_same_bits(op, shape, got[i], want[i], n[i]);
    }
  }
  /* h: 0 the reference, 1 handed over without a place, 2 the same with no free range */
  const char *row = "pack_bf16_around_kernel";
  for (int how = 0; how < 3; how++) {
    pt_weight_range full[PT_WEIGHT_COPY_RANGES];
    for (int i = 0; i < PT_WEIGHT_COPY_RANGES; i++) /* ranges of nothing the calls read */
      weight_range_put(&full[i], dW + i, place + i, 1);
    k->activation_copies(k, how == 2 ? full : NULL, how == 2 ? PT_WEIGHT_COPY_RANGES : 0);
    setf(run, sides, n_o);
    setf(h, hh, n_o);
    setf(run + 2 * n_o, sides + n_o, n_o);
    setf(dW, zero, d * d);
    setf(db, zero, d);
    if (how) k->share_bf16_into(k, h, n_o, NULL, 0);
    k->linear_backward_input(k, dx, h, Wq, N, d, d, 0);
    int went = k->shared_into_done(k, h);
    CHECK(went == (how == 1), "%s: h %s its room after the product", shape,
          went ? "converted into" : "not converted into");
    expect_same_bits("h after the product reading it", shape, downf(h, n_o), hh, n_o);
    if (how == 2) k->activation_copies(k, NULL, 0); /* ranges free again: today's path on */
    if (went) k->unset_f32(k, h, n_o); /* the stage's: what went is not rounded */
    uint64_t p0 = ledger_launches(row);
    double b0 = ledger_bytes(row);
    k->round_share_bf16(k, run, 3 * n_o, 1);
    const double packed = ledger_bytes(row) - b0, want_bytes = 6.0 * (went ? 2 : 3) * n_o;
    CHECK(ledger_launches(row) - p0 == 1 && packed == want_bytes, "%s: round_share_bf16 unset "
          "over [pre | h | post] launched %llu packs of %g bytes, not one of %g", shape,
          (unsigned long long)(ledger_launches(row) - p0), packed, want_bytes);
    uint64_t l0 = ledger_launches("colsum_acc_kernel:bf16");
    k->linear_backward_weight(k, dW, db, h, xin, N, d, d);
    CHECK(ledger_launches("colsum_acc_kernel:bf16") - l0 == 1, "%s: h's bias sum not from its "
          "copy", shape);
    CHECK(all_nan(downf(h, n_o), n_o), "%s: h's floats left after the stage", shape);
    float **to = how ? got : want;
    to[0] = downf(dx, n_o), to[1] = downf(dW, d * d), to[2] = downf(db, d);
    if (!how) continue;
    static const char *what[3] = {"h W", "dW of h", "db of h"};
    const int64_t n[3] = {n_o, d * d, d};
    for (int i = 0; i < 3; i++) {
      char op[96];
      snprintf(op, sizeof op, "%s (%s)", what[i], how == 1 ? "room kept" : "no free range");
      expect_same_bits(op, shape, got[i], want[i], n[i]);
    }
  }
  k->activation_copies(k, NULL, 0);
  scope_end();
}

/* The four norm backward_input entries (e: layernorm, rmsnorm, their _residual ones) on one set
 * of arguments (rrstd: rmsnorm's statistics; acc for the plain ones), each noting its row of the
 * ledger (k_norm_bwd_rows[e]); returns the bytes the call added there. */
typedef struct {
  float *dx;
  const float *dres, *dy, *x, *w, *mean, *rstd, *rrstd;
  int N, D, acc;
} norm_bwd_args;
static const char *const k_norm_bwd_rows[4] = {
    "layernorm_backward_input_kernel", "rmsnorm_backward_input_kernel",
    "layernorm_backward_input_residual_kernel", "rmsnorm_backward_input_residual_kernel"};

static double norm_bwd_run(const pt_kernels *k, int e, const norm_bwd_args *a) {
  double b0 = ledger_bytes(k_norm_bwd_rows[e]);
  if (e == 0)
    k->layernorm_backward_input(k, a->dx, a->dy, a->x, a->w, a->mean, a->rstd, a->N, a->D,
                                a->acc);
  if (e == 1) k->rmsnorm_backward_input(k, a->dx, a->dy, a->x, a->w, a->rrstd, a->N, a->D, a->acc);
  if (e == 2)
    k->layernorm_backward_input_residual(k, a->dx, a->dres, a->dy, a->x, a->w, a->mean, a->rstd,
                                         a->N, a->D);
  if (e == 3)
    k->rmsnorm_backward_input_residual(k, a->dx, a->dres, a->dy, a->x, a->w, a->rrstd, a->N, a->D);
  return ledger_bytes(k_norm_bwd_rows[e]) - b0;
}

/* Arguments for norm_bwd_run over N=24 rows of D=40: random x, dres and dy, a dx of its own,
 * the statistics of layernorm_forward and rmsnorm_forward of x. */
static norm_bwd_args norm_bwd_setup(const pt_kernels *k, int acc) {
  const int N = 24, D = 40;
  const int64_t n = (int64_t)N * D;
  float *x = upf(hrand(n, -2, 2), n), *w = upf(hrand(D, 0.5f, 1.5f), D);
  float *b = upf(hrand(D, -0.5f, 0.5f), D), *y = dnew(sizeof(float) * (size_t)n);
  float *mean = dnew(sizeof(float) * N), *rstd = dnew(sizeof(float) * N);
  float *rrstd = dnew(sizeof(float) * N);
  k->activation_copies(k, NULL, 0);
  k->layernorm_forward(k, y, mean, rstd, x, w, b, N, D, 1e-5f);
  k->rmsnorm_forward(k, y, rrstd, x, w, N, D, 1e-5f);
  return (norm_bwd_args){dnew(sizeof(float) * (size_t)n), upf(hrand(n, -1, 1), n),
                         upf(hrand(n, -1, 1), n), x, w, mean, rstd, rrstd, N, D, acc};
}

/* round_when_written (kernels.h; the stage's input gradients, layers/layer.h din_by_norm): each
 * of the four norm backward_input entries whose dx is the tensor given writes it rounded, the
 * bits of the call followed by round_bf16 (the plain ones accumulating: rounded after the add),
 * and round_when_written(NULL) then says so; given another tensor, dx is written as it was and
 * it says not. */
static void test_norm_dx_rounded(const pt_kernels *k) {
  const norm_bwd_args args = norm_bwd_setup(k, 1);
  const int64_t n = (int64_t)args.N * args.D;
  const char *shape = "N=24 D=40";
  float *hdx = hrand(n, -1, 1), *dx = args.dx, *other = dnew(sizeof(float) * (size_t)n);
  for (int e = 0; e < 4; e++) {
    float *want = NULL;
    for (int how = 0; how < 3; how++) { /* 0: the reference, 1: dx given, 2: another given */
      setf(dx, hdx, n);
      if (how) k->round_when_written(k, how == 1 ? dx : other, n);
      norm_bwd_run(k, e, &args);
      const int said = how ? k->round_when_written(k, NULL, 0) : 0;
      if (!how) {
        want = downf(dx, n);
        continue;
      }
      char what[96];
      snprintf(what, sizeof what, "%s, round_when_written %s", k_norm_bwd_rows[e],
               how == 1 ? "dx" : "another tensor");
      CHECK(said == (how == 1), "%s [%s]: says %d", what, shape, said);
      float *ref = hcopy(want, n);
      if (how == 1)
        for (int64_t i = 0; i < n; i++) ref[i] = pt_round_bf16(ref[i]);
      expect_same_bits(what, shape, downf(dx, n), ref, n);
    }
  }
  scope_end();
}

/* The norms' x at rest (layers/layer.h read_at_rest, forward_reads: GPT-2's x1, the Llama's h).
 * Forward: layernorm_forward reading x, and rmsnorm_forward_residual writing x1, whose place at
 * rest was handed over not alone (kernels.h share_bf16_into) write its bf16 bits there
 * (shared_into_done), their results and x's floats as with nothing handed over, 2 bytes an
 * element more in their rows. Backward: each of the four norm backward_input entries reads x
 * from its activation copy (kernels.h activation_copies; x's floats NaN), with the bits of the
 * reference on x's floats rounded, 2 bytes an element fewer in its row. */
static void test_norm_x_copies(const pt_kernels *k) {
  const int N = 24, D = 40;
  const int64_t n = (int64_t)N * D;
  const char *shape = "N=24 D=40";
  float *hx = hrand(n, -2, 2), *hxr = hnew(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) hxr[i] = pt_round_bf16(hx[i]);
  float *x = upf(hx, n), *a = upf(hrand(n, -1, 1), n), *dres = upf(hrand(n, -1, 1), n);
  float *dy = upf(hrand(n, -1, 1), n), *w = upf(hrand(D, 0.5f, 1.5f), D);
  float *b = upf(hrand(D, -0.5f, 0.5f), D), *x1 = dnew(sizeof(float) * (size_t)n);
  float *y = dnew(sizeof(float) * (size_t)n), *dx = dnew(sizeof(float) * (size_t)n);
  float *mean = dnew(sizeof(float) * N), *rstd = dnew(sizeof(float) * N);
  uint16_t *place = dnew(sizeof(uint16_t) * (size_t)n);
  float *want[2][3] = {{0}}, *want_dx = NULL;
  double want_bytes[2] = {0};
  static const char *fwd_rows[2] = {"layernorm_forward_kernel", "rmsnorm_forward_residual_kernel"};
  for (int shared = 0; shared < 2; shared++)
    for (int e = 0; e < 2; e++) {
      k->activation_copies(k, NULL, 0);
      setf(x, hx, n);
      if (shared) k->share_bf16_into(k, e ? x1 : x, n, place, 0);
      double b0 = ledger_bytes(fwd_rows[e]);
      if (e == 0) k->layernorm_forward(k, y, mean, rstd, x, w, b, N, D, 1e-5f);
      else k->rmsnorm_forward_residual(k, x1, y, rstd, a, x, w, N, D, 1e-6f);
      const double bytes = ledger_bytes(fwd_rows[e]) - b0;
      float *got[3] = {downf(y, n), downf(rstd, N), e ? downf(x1, n) : downf(x, n)};
      if (!shared) {
        for (int i = 0; i < 3; i++) want[e][i] = got[i];
        want_bytes[e] = bytes;
        continue;
      }
      CHECK(k->shared_into_done(k, e ? x1 : x), "%s [%s]: x's place not written", fwd_rows[e],
            shape);
      CHECK(bytes == want_bytes[e] + 2.0 * n, "%s [%s]: %g bytes, want %g", fwd_rows[e], shape,
            bytes, want_bytes[e] + 2.0 * n);
      expect_bf16_of(fwd_rows[e], shape, place, got[2], n);
      for (int i = 0; i < 3; i++)
        expect_same_bits(fwd_rows[e], shape, got[i], want[e][i], i == 1 ? N : n);
    }
  k->layernorm_forward(k, y, mean, rstd, x, w, b, N, D, 1e-5f); /* statistics for the backward */
  k->pack_bf16(k, place, x, n);
  const norm_bwd_args args = {dx, dres, dy, x, w, mean, rstd, rstd, N, D, 0};
  for (int e = 0; e < 4; e++)
    for (int at_rest = 0; at_rest < 2; at_rest++) {
      pt_weight_range r;
      weight_range_put(&r, x, place, n);
      setf(x, hxr, n);
      if (at_rest) k->unset_f32(k, x, n);
      k->activation_copies(k, &r, at_rest);
      const double bytes = norm_bwd_run(k, e, &args);
      if (!at_rest) {
        want_dx = downf(dx, n), want_bytes[0] = bytes;
        continue;
      }
      CHECK(bytes == want_bytes[0] - 2.0 * n, "%s [%s]: x read from its copy in %g bytes, want %g",
            k_norm_bwd_rows[e], shape, bytes, want_bytes[0] - 2.0 * n);
      expect_same_bits(k_norm_bwd_rows[e], shape, downf(dx, n), want_dx, n);
    }
  k->activation_copies(k, NULL, 0);
  scope_end();
}

/* A norm's backward_input reading a dy whose place at rest was handed over not alone (kernels.h
 * share_bf16_into; layers/layer.h backward_reads: GPT-2's dxln2 and dxln1, the Llama's dxn2 and
 * dxn1), on each of the four entries: it writes dy's bf16 bits there as it reads it
 * (shared_into_done; the caller's place holds them, or room the table keeps), in the same
 * launch (2 bytes an element more in its row, no pass of its own), dx and dy's floats as with
 * nothing handed over. */
static void test_norm_dy_copies(const pt_kernels *k) {
  const norm_bwd_args args = norm_bwd_setup(k, 1);
  const int64_t n = (int64_t)args.N * args.D;
  const char *shape = "N=24 D=40";
  float *dx = args.dx, *hdy = downf(args.dy, n);
  const float *dy = args.dy;
  uint16_t *place = dnew(sizeof(uint16_t) * (size_t)n);
  for (int e = 0; e < 4; e++) {
    float *want = NULL;
    double want_bytes = 0.0;
    /* how 0: nothing handed over (the reference); 1: the caller's place; 2: room kept */
    for (int how = 0; how < 3; how++) {
      k->activation_copies(k, NULL, 0);
      setf(dx, hdy, n); /* acc 1 below adds to it */
      if (how) k->share_bf16_into(k, dy, n, how == 2 ? NULL : place, 0);
      const double bytes = norm_bwd_run(k, e, &args);
      char what[96];
      snprintf(what, sizeof what, "%s, dy handed over %s", k_norm_bwd_rows[e],
               (const char *[]){"not at all", "with a place", "into room kept"}[how]);
      CHECK(k->shared_into_done(k, dy) == (how != 0), "%s [%s]: dy's place %s", what, shape,
            how ? "not written" : "taken");
      CHECK(!how || bytes == want_bytes + 2.0 * n, "%s [%s]: %g bytes in the kernel's row, want %g",
            what, shape, bytes, want_bytes + 2.0 * n);
      expect_same_bits(what, shape, downf(dy, n), hdy, n);
      if (how == 1) expect_bf16_of(what, shape, place, hdy, n);
      if (!how) {
        want = downf(dx, n), want_bytes = bytes;
        continue;
      }
      expect_same_bits(what, shape, downf(dx, n), want, n);
    }
  }
  k->activation_copies(k, NULL, 0);
  scope_end();
}

/* A norm's backward_input writing a dx whose place at rest was handed over not alone (kernels.h
 * share_bf16_into; layers/layer.h backward_reads: GPT-2's dx1, the Llama's dh), on each of the
 * four entries, as written and rounded (round_when_written): it writes dx's bf16 bits there as
 * it writes it (shared_into_done; the caller's place holds them, or room the table keeps), in
 * the same launch (2 bytes an element more in its row, none rounding: it writes them to the
 * table's own then, din_copy), dx's floats as with nothing handed over; a product reading dx
 * next reads those bits, converting it no more (one operand conversion fewer), with the same
 * result. */
static void test_norm_dx_copies(const pt_kernels *k) {
  const norm_bwd_args args = norm_bwd_setup(k, 1);
  const int N = args.N, D = args.D;
  const int64_t n = (int64_t)N * D;
  const char *shape = "N=24 D=40";
  float *hdx = hrand(n, -1, 1), *dx = args.dx, *dxin = dnew(sizeof(float) * (size_t)n);
  float *W = upf(hrand((int64_t)D * D, -0.3f, 0.3f), D * D);
  uint16_t *place = dnew(sizeof(uint16_t) * (size_t)n);
  for (int e = 0; e < 4; e++)
    for (int rounded = 0; rounded < 2; rounded++) {
      float *want = NULL, *want_in = NULL;
      double want_bytes = 0.0;
      uint64_t want_conv = 0;
      /* how 0: nothing handed over (the reference); 1: the caller's place; 2: room kept */
      for (int how = 0; how < 3; how++) {
        k->activation_copies(k, NULL, 0);
        setf(dx, hdx, n); /* acc 1 below adds to it */
        if (how) k->share_bf16_into(k, dx, n, how == 2 ? NULL : place, 0);
        if (rounded) k->round_when_written(k, dx, n);
        const double bytes = norm_bwd_run(k, e, &args);
        if (rounded) k->round_when_written(k, NULL, 0);
        const uint64_t c0 = conversions();
        k->linear_backward_input(k, dxin, dx, W, N, D, D, 0);
        const uint64_t conv = conversions() - c0;
        char what[128];
        snprintf(what, sizeof what, "%s%s, dx handed over %s", k_norm_bwd_rows[e],
                 rounded ? " rounding" : "",
                 (const char *[]){"not at all", "with a place", "into room kept"}[how]);
        CHECK(k->shared_into_done(k, dx) == (how != 0), "%s [%s]: dx's place %s", what, shape,
              how ? "not written" : "taken");
        if (!how) {
          want = downf(dx, n), want_in = downf(dxin, n), want_bytes = bytes, want_conv = conv;
          CHECK(conv >= 1, "%s [%s]: the product converted nothing", what, shape);
          continue;
        }
        /* rounding, the reference writes the bits too, to the table's own (din_copy) */
        const double more = rounded ? 0.0 : 2.0 * n;
        CHECK(bytes == want_bytes + more, "%s [%s]: %g bytes in the kernel's row, want %g", what,
              shape, bytes, want_bytes + more);
        CHECK(conv + 1 == want_conv, "%s [%s]: the product made %llu conversions, want %llu", what,
              shape, (unsigned long long)conv, (unsigned long long)want_conv - 1);
        expect_same_bits(what, shape, downf(dx, n), want, n);
        if (how == 1) expect_bf16_of(what, shape, place, want, n);
        expect_same_bits(what, shape, downf(dxin, n), want_in, n);
      }
    }
  k->activation_copies(k, NULL, 0);
  scope_end();
}

/* din_copy (kernels.h): the input gradient a norm's backward rounds as it writes it
 * (round_when_written) has its bits kept by the table, 2 bytes an element more in the norm's
 * row, for each of the four entries; once the stage's activation_copies has come, din_copy
 * makes them its activation copy of values: a product reading it converts nothing and a bias
 * gradient of it sums the copy, both with the reference's bits. The next input gradient's bits
 * go to the other buffer: the copy stays right while that one is written. din_copy says 0 (and
 * registers nothing) for another tensor, a second time, after a new round_when_written, and
 * where the norm did not round. */
static void test_din_copy(const pt_kernels *k) {
  const norm_bwd_args args = norm_bwd_setup(k, 0);
  const int N = args.N, D = args.D;
  const int64_t n = (int64_t)N * D;
  const char *shape = "N=24 D=40";
  float *dx = args.dx, *other = dnew(sizeof(float) * (size_t)n);
  float *W = upf(hrand((int64_t)D * D, -0.3f, 0.3f), D * D), *out = dnew(sizeof(float) * n);
  float *dW = dnew(sizeof(float) * D * D), *db = dnew(sizeof(float) * D);
  float *zero = hnew(sizeof(float) * D * D); /* hnew zeroes */
  for (int e = 0; e < 4; e++) {
    char what[96];
    snprintf(what, sizeof what, "%s, din_copy", k_norm_bwd_rows[e]);
    float *want[3];
    double bytes[2];
    uint64_t want_conv = 0;
    for (int kept = 0; kept < 2; kept++) { /* the reference: rounded in a pass of its own */
      k->activation_copies(k, NULL, 0);
      if (kept) k->round_when_written(k, dx, n);
      bytes[kept] = norm_bwd_run(k, e, &args);
      CHECK(!kept || k->round_when_written(k, NULL, 0), "%s [%s]: not rounded", what, shape);
      if (!kept) k->round_bf16(k, dx, n);
      k->activation_copies(k, NULL, 0);
      if (kept) {
        CHECK(!k->din_copy(k, other, n), "%s [%s]: another tensor taken", what, shape);
        CHECK(k->din_copy(k, dx, n), "%s [%s]: the bits not kept", what, shape);
        CHECK(!k->din_copy(k, dx, n), "%s [%s]: taken twice", what, shape);
        norm_bwd_args next = args; /* the next input gradient (another), to the other buffer */
        next.dx = other, next.dy = args.dres;
        k->round_when_written(k, other, n);
        norm_bwd_run(k, e, &next);
        k->round_when_written(k, NULL, 0);
      }
      const uint64_t c0 = conversions();
      k->linear_backward_input(k, out, dx, W, N, D, D, 0);
      setf(db, zero, D);
      setf(dW, zero, (int64_t)D * D);
      k->linear_backward_weight(k, dW, db, dx, dx, N, D, D);
      const uint64_t conv = conversions() - c0;
      float *got[3] = {downf(out, n), downf(dW, (int64_t)D * D), downf(db, D)};
      if (!kept) {
        for (int i = 0; i < 3; i++) want[i] = got[i];
        want_conv = conv;
        continue;
      }
      /* dx read three times as an operand (dy twice, x once), converted three times fewer */
      CHECK(conv + 3 == want_conv, "%s [%s]: %llu conversions, want %llu", what, shape,
            (unsigned long long)conv, (unsigned long long)want_conv - 3);
      CHECK(bytes[1] == bytes[0] + 2.0 * n, "%s [%s]: %g bytes in the norm's row, want %g", what,
            shape, bytes[1], bytes[0] + 2.0 * n);
      const int64_t sizes[3] = {n, (int64_t)D * D, D};
      for (int i = 0; i < 3; i++) expect_same_bits(what, shape, got[i], want[i], sizes[i]);
    }
    /* no copy where a new tensor was given since, or where the norm did not round */
    k->round_when_written(k, dx, n);
    norm_bwd_run(k, e, &args);
    k->round_when_written(k, NULL, 0);
    k->round_when_written(k, other, n);
    k->round_when_written(k, NULL, 0);
    CHECK(!k->din_copy(k, dx, n), "%s [%s]: taken after a new round_when_written", what, shape);
    norm_bwd_run(k, e, &args);
    CHECK(!k->din_copy(k, dx, n), "%s [%s]: taken where the norm did not round", what, shape);
  }
  k->activation_copies(k, NULL, 0);
  scope_end();
}

/* rope on a q|k|v whose place at rest was handed over not alone (kernels.h share_bf16_into;
 * layers/llama_block.c: forward's qkv, which the attention reads as bf16, and backward's dqkv,
 * which the q|k|v product reads), forward and backward: the rotation writes the bits of all of
 * q|k|v there (shared_into_done; the caller's place holds them, v's included, or room the table
 * keeps), in its own launch (4 bytes more a rotated pair, 6 a v element, in its row), the
 * floats as with nothing handed over; a product reading q|k|v next converts it no more. */
static void test_rope_copies(const pt_kernels *k) {
  const int B = 2, T = 6, H = 4, KVH = 2, hd = 8, W = (H + 2 * KVH) * hd, N = B * T;
  const int64_t n = (int64_t)N * W, pairs = (int64_t)N * (H + KVH) * (hd / 2);
  const int64_t nv = (int64_t)N * KVH * hd;
  const char *shape = "B=2 T=6 H=4 KVH=2 hd=8";
  pt_rope_freqs f;
  rope_freqs_make(&(pt_rope_scaling){.theta = 10000.0}, hd, &f);
  float *hq = hrand(n, -1, 1), *qkv = dnew(sizeof(float) * (size_t)n);
  float *Wt = upf(hrand((int64_t)W * 16, -0.3f, 0.3f), (int64_t)W * 16);
  float *out = dnew(sizeof(float) * (size_t)N * 16);
  uint16_t *place = dnew(sizeof(uint16_t) * (size_t)n);
  for (int dir = -1; dir <= 1; dir += 2) {
    float *want = NULL, *want_out = NULL;
    double want_bytes = 0.0;
    uint64_t want_conv = 0;
    for (int how = 0; how < 3; how++) { /* nothing handed over, the caller's place, room kept */
      k->activation_copies(k, NULL, 0);
      setf(qkv, hq, n);
      if (how) k->share_bf16_into(k, qkv, n, how == 2 ? NULL : place, 0);
      const double b0 = ledger_bytes("rope_kernel");
      k->rope(k, qkv, B, T, H, KVH, hd, &f, dir, NULL);
      const double bytes = ledger_bytes("rope_kernel") - b0;
      const uint64_t c0 = conversions();
      k->linear_backward_input(k, out, qkv, Wt, N, 16, W, 0); /* reads qkv as its dy */
      const uint64_t conv = conversions() - c0;
      char what[96];
      snprintf(what, sizeof what, "rope dir=%d, q|k|v handed over %s", dir,
               (const char *[]){"not at all", "with a place", "into room kept"}[how]);
      CHECK(k->shared_into_done(k, qkv) == (how != 0), "%s [%s]: the place %s", what, shape,
            how ? "not written" : "taken");
      if (!how) {
        want = downf(qkv, n), want_out = downf(out, (int64_t)N * 16);
        want_bytes = bytes, want_conv = conv;
        CHECK(conv >= 1, "%s [%s]: the product converted nothing", what, shape);
        continue;
      }
      const double more = 4.0 * (double)pairs + 6.0 * (double)nv;
      CHECK(bytes == want_bytes + more, "%s [%s]: %g bytes in rope's row, want %g", what, shape,
            bytes, want_bytes + more);
      CHECK(conv + 1 == want_conv, "%s [%s]: the product made %llu conversions, want %llu", what,
            shape, (unsigned long long)conv, (unsigned long long)want_conv - 1);
      expect_same_bits(what, shape, downf(qkv, n), want, n);
      if (how == 1) expect_bf16_of(what, shape, place, want, n);
      expect_same_bits(what, shape, downf(out, (int64_t)N * 16), want_out, (int64_t)N * 16);
    }
  }
  k->activation_copies(k, NULL, 0);
  scope_end();
}

/* The GPU table's bias gradient under bf16 reads dy's copy where the table holds one with dy's
 * values (round_share_bf16's, or the product's conversion inside a share_bf16 range of values):
 * the float path's bits (on dy rounded, or dy packed by round_share_bf16 unset: its floats not
 * rounded but NaN, 6 bytes an element in the ledger's pack row), the ledger's colsum row
 * for the copy with 2 bytes an element fewer than the float row's; dy shared without values (a
 * loss gradient, not rounded) is summed as floats. */
static void test_colsum_copies(const pt_kernels *k, const char *shape, float *dW, float *db,
                               const float *dy, const float *x, int N, int Ni, int No) {
  int64_t ny = (int64_t)N * No;
  float *zero = hnew(sizeof(float) * (size_t)No), *dyr = downf(dy, ny);
  for (int64_t i = 0; i < ny; i++) dyr[i] = pt_round_bf16(dyr[i]);
  float *d_r = upf(dyr, ny), *want[2];
  double float_bytes = 0.0; /* the float row's, on rounded dy */
  for (int raw = 0; raw < 2; raw++) { /* the float path: rounded dy, then dy as it is */
    k->activation_copies(k, NULL, 0);
    setf(db, zero, No);
    double b0 = ledger_bytes("colsum_acc_kernel");
    k->linear_backward_weight(k, dW, db, raw ? dy : d_r, x, N, Ni, No);
    if (!raw) float_bytes = ledger_bytes("colsum_acc_kernel") - b0;
    want[raw] = downf(db, No);
  }
  const char *how[] = {"round_share_bf16", "round_share_bf16 unset", "share_bf16 values",
                       "share_bf16 of unrounded dy"};
  for (int c = 0; c < 4; c++) {
    char why[160];
    k->activation_copies(k, NULL, 0);
    setf(db, zero, No);
    setf(d_r, dyr, ny);
    if (c == 1) k->copy(k, d_r, dy, ny); /* packed from dy unrounded, its floats left unset */
    uint64_t p0 = ledger_launches("pack_bf16_around_kernel");
    double pb0 = ledger_bytes("pack_bf16_around_kernel");
    if (c < 2) k->round_share_bf16(k, d_r, ny, c == 1);
    if (c == 1) {
      float *left = downf(d_r, ny);
      int64_t nan = 0;
      for (int64_t i = 0; i < ny; i++) nan += left[i] != left[i];
      CHECK(nan == ny, "%s round_share_bf16 unset: %lld of %lld floats NaN", shape,
            (long long)nan, (long long)ny);
      CHECK(ledger_launches("pack_bf16_around_kernel") - p0 == 1 &&
                ledger_bytes("pack_bf16_around_kernel") - pb0 == 6.0 * (double)ny,
            "%s round_share_bf16 unset: %g bytes packed, not 6 an element", shape,
            ledger_bytes("pack_bf16_around_kernel") - pb0);
    }
    if (c >= 2) k->share_bf16(k, c == 2 ? d_r : dy, ny, c == 2);
    uint64_t l0 = ledger_launches("colsum_acc_kernel:bf16");
    uint64_t f0 = ledger_launches("colsum_acc_kernel");
    double b0 = ledger_bytes("colsum_acc_kernel:bf16");
    k->linear_backward_weight(k, dW, db, c == 3 ? dy : d_r, x, N, Ni, No);
    uint64_t copies = ledger_launches("colsum_acc_kernel:bf16") - l0;
    uint64_t floats = ledger_launches("colsum_acc_kernel") - f0;
    snprintf(why, sizeof why, "colsum of dy's copy (%s)", how[c]);
    expect_same_bits(why, shape, downf(db, No), want[c == 3], No);
    CHECK(copies == (c < 3) && floats == (c == 3), "%s %s: %llu colsums of the copy and %llu of "
          "the floats", shape, how[c], (unsigned long long)copies, (unsigned long long)floats);
    if (c < 3)
      CHECK(ledger_bytes("colsum_acc_kernel:bf16") - b0 == float_bytes - 2.0 * (double)ny,
            "%s %s: the colsum of the copy noted %g bytes, not the float row's %g less 2 an "
            "element", shape, how[c], ledger_bytes("colsum_acc_kernel:bf16") - b0, float_bytes);
  }
  k->activation_copies(k, NULL, 0);
}

/* A norm's weight gradient through table k: rmsnorm_backward_weight (rms; db untouched) or
 * layernorm_backward_weight. */
static void norm_weight(const pt_kernels *k, int rms, float *dw, float *db, const float *dy,
                        const float *x, const float *mean, const float *rstd, int N, int D) {
  if (rms) k->rmsnorm_backward_weight(k, dw, dy, x, rstd, N, D);
  else k->layernorm_backward_weight(k, dw, db, dy, x, mean, rstd, N, D);
}

/* The GPU table's layernorm_backward_weight and rmsnorm_backward_weight under bf16 read dy and x
 * from their copies where the table holds them with their values (dy kept by round_share_bf16
 * unset, x an activation copy): the float path's bits with both floats unset, and 2 bytes an element
 * of each copy fewer in the ledger's row for it. */
static void test_norm_weight_copies(const pt_kernels *k, const char *shape, int rms, int N,
                                    int D) {
  int64_t n = (int64_t)N * D;
  float *dy = hrand(n, -1, 1), *x = hrand(n, -2, 2), *zero = hnew(sizeof(float) * (size_t)D);
  uint16_t *x16 = hnew(sizeof(uint16_t) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    dy[i] = pt_round_bf16(dy[i]);
    x16[i] = pt_bf16_bits(x[i]);
    x[i] = pt_bf16_float(x16[i]);
  }
  float *d_dy = upf(dy, n), *d_x = upf(x, n), *d_m = upf(hrand(N, -0.5f, 0.5f), N);
  float *d_r = upf(hrand(N, 0.5f, 2), N), *dw = dnew(sizeof(float) * D);
  float *db = dnew(sizeof(float) * D), *want[2], *got[2];
  uint16_t *d_x16 = up(x16, sizeof(uint16_t) * (size_t)n);
  const char *plain = rms ? "rmsnorm_backward_weight_kernel" : "layernorm_backward_weight_kernel";
  char copies[64], why[96];
  snprintf(copies, sizeof copies, "%s:bf16", plain);
  double fb = ledger_bytes(plain);
  k->activation_copies(k, NULL, 0);
  setf(dw, zero, D), setf(db, zero, D);
  norm_weight(k, rms, dw, db, d_dy, d_x, d_m, d_r, N, D);
  fb = ledger_bytes(plain) - fb;
  want[0] = downf(dw, D), want[1] = downf(db, D);
  pt_weight_range r;
  weight_range_put(&r, d_x, d_x16, n);
  k->activation_copies(k, &r, 1);
  k->round_share_bf16(k, d_dy, n, 1); /* the copies stand for the floats */
  k->unset_f32(k, d_x, n);
  setf(dw, zero, D), setf(db, zero, D);
  uint64_t l0 = ledger_launches(copies), f0 = ledger_launches(plain);
  double b0 = ledger_bytes(copies);
  norm_weight(k, rms, dw, db, d_dy, d_x, d_m, d_r, N, D);
  got[0] = downf(dw, D), got[1] = downf(db, D);
  snprintf(why, sizeof why, "%s from the copies: dw", plain);
  expect_same_bits(why, shape, got[0], want[0], D);
  snprintf(why, sizeof why, "%s from the copies: db", plain);
  expect_same_bits(why, shape, got[1], want[1], D);
  CHECK(ledger_launches(copies) - l0 == 1 && ledger_launches(plain) == f0,
        "%s: %s did not read the copies", shape, plain);
  CHECK(ledger_bytes(copies) - b0 == fb - 4.0 * (double)n, "%s: %s on the copies noted %g "
        "bytes, not the float row's %g less 4 an element", shape, plain,
        ledger_bytes(copies) - b0, fb);
  k->activation_copies(k, NULL, 0);
}

/* round_pack_bf16 with a mark is a finite_check of x as rounded, in its pass (kernels.h): the
 * bits as without, the GPU's and the CPU's; the mark raised by a float32 value that rounds to an
 * infinity (finite as float32) and by a NaN, never by finite values, the largest value winning;
 * the check's FLOP a float on the kernel's ledger row, no bytes more. */
static void test_round_pack_mark(const pt_kernels *gk, const pt_kernels *ck, const char *shape,
                                 const float *x, int64_t n) {
  const float big = 3.4e38f; /* rounds to bf16's infinity (test_loss_rounds) */
  float *h = hnew(sizeof(float) * (size_t)n), *d_h = dnew(sizeof(float) * (size_t)n);
  uint16_t *bits = hnew(sizeof(uint16_t) * (size_t)n), *d_bits = dnew(sizeof(uint16_t) * (size_t)n);
  for (int gpu = 0; gpu < 2; gpu++) {
    const pt_kernels *t = gpu ? gk : ck;
    int32_t mark = 0, *m = gpu ? dnew(sizeof(int32_t)) : &mark;
    if (gpu) gpu_to_device(&G, m, &mark, sizeof mark);
    for (int call = 0; call < 4; call++) {
      static const int32_t value[] = {7, 5, 9, 2};
      int64_t at = call == 0 ? -1 : call == 1 ? n / 2 : n - 1;
      memcpy(h, x, sizeof(float) * (size_t)n);
      if (at >= 0) h[at] = call == 1 ? big : NAN;
      float *v = h;
      uint16_t *b = bits;
      if (gpu) gpu_to_device(&G, d_h, h, sizeof(float) * (size_t)n), v = d_h, b = d_bits;
      double flops = ledger_other_flops("round_pack_bf16_kernel");
      double bytes = ledger_bytes("round_pack_bf16_kernel");
      t->round_pack_bf16(t, b, v, n, m, value[call]);
      if (gpu) {
        CHECK(ledger_other_flops("round_pack_bf16_kernel") - flops == (double)n &&
                  ledger_bytes("round_pack_bf16_kernel") - bytes == 10.0 * (double)n,
              "%s: round_pack_bf16 with a mark: ledger row %g FLOPs, %g bytes more", shape,
              ledger_other_flops("round_pack_bf16_kernel") - flops,
              ledger_bytes("round_pack_bf16_kernel") - bytes);
        gpu_to_host(&G, &mark, m, sizeof mark);
      }
      int32_t expect = call == 0 ? 0 : call == 1 ? 5 : 9; /* 2 < 9: the mark stays */
      CHECK(mark == expect, "%s %s round_pack_bf16 call %d: mark %d, expected %d", shape,
            gpu ? "gpu" : "cpu", call, mark, expect);
      if (call > 0) continue;
      float *want = hcopy(x, n); /* without a mark: the same bits */
      uint16_t *want16 = hnew(sizeof(uint16_t) * (size_t)n);
      ck->round_pack_bf16(ck, want16, want, n, NULL, 0);
      expect_same_bits("round_pack_bf16 with a mark: rounded", shape, gpu ? downf(d_h, n) : h,
                       want, n);
      if (gpu) gpu_to_host(&G, bits, d_bits, sizeof(uint16_t) * (size_t)n);
      CHECK(memcmp(bits, want16, sizeof(uint16_t) * (size_t)n) == 0,
            "%s: %s round_pack_bf16 with a mark: its bits differ", shape, gpu ? "gpu" : "cpu");
    }
  }
}

/* The GPU table set to tf32 or bf16 against the CPU's table for the same precision: the same
 * products of rounded operands (CPU: rounded copies and sgemm; GPU: cublasGemmEx on bf16, or
 * the handle's TF32 math), so they agree as float32 products do (TOL_DEFAULT); the bf16 entries
 * round, pack and unpack bit for bit as the CPU does (one formula, kernels/precision.h). */
static void test_precision_table(kernels_gpu *kg, pt_precision p, int N, int Ni, int No) {
  char shape[96];
  snprintf(shape, sizeof shape, "%s N=%d Ni=%d No=%d", p == PT_PRECISION_BF16 ? "bf16" : "tf32",
           N, Ni, No);
  kernels_gpu_set_precision(kg, p);
  const pt_kernels *gk = &kg->table, *ck = kernels_cpu_for(p);
  int64_t nx = (int64_t)N * Ni, ny = (int64_t)N * No, nw = (int64_t)No * Ni;
  float *x = hrand(nx, -1, 1), *W = hrand(nw, -1, 1), *b = hrand(No, -1, 1);
  float *res = hrand(ny, -1, 1), *dy = hrand(ny, -1, 1);
  float *d_x = upf(x, nx), *d_W = upf(W, nw), *d_b = upf(b, No), *d_res = upf(res, ny);
  float *d_dy = upf(dy, ny), *d_y = dnew(sizeof(float) * ny), *d_dx = dnew(sizeof(float) * nx);
  float *d_dW = dnew(sizeof(float) * nw), *d_db = dnew(sizeof(float) * No);
  float *yc = hnew(sizeof(float) * ny), *dxc = hnew(sizeof(float) * nx);
  float *dWc = hnew(sizeof(float) * nw), *dbc = hnew(sizeof(float) * No);
  ck->linear_forward(ck, yc, x, W, b, N, Ni, No);
  gk->linear_forward(gk, d_y, d_x, d_W, d_b, N, Ni, No);
  expect_close("precision linear_forward", shape, downf(d_y, ny), yc, ny, TOL_DEFAULT);
  ck->linear_forward_residual(ck, yc, res, x, W, b, N, Ni, No);
  gk->linear_forward_residual(gk, d_y, d_res, d_x, d_W, d_b, N, Ni, No);
  expect_close("precision linear_forward_residual", shape, downf(d_y, ny), yc, ny, TOL_DEFAULT);
  ck->linear_backward_input(ck, dxc, dy, W, N, Ni, No, 0);
  gk->linear_backward_input(gk, d_dx, d_dy, d_W, N, Ni, No, 0);
  expect_close("precision linear_backward_input", shape, downf(d_dx, nx), dxc, nx, TOL_DEFAULT);
  float *hc = hnew(sizeof(float) * ny), *gc = hnew(sizeof(float) * ny);
  float *d_h = dnew(sizeof(float) * ny);
  ck->linear_forward_gelu(ck, gc, hc, x, W, b, N, Ni, No);
  gk->linear_forward_gelu(gk, d_y, d_h, d_x, d_W, d_b, N, Ni, No);
  expect_close("precision linear_forward_gelu h", shape, downf(d_h, ny), hc, ny, TOL_DEFAULT);
  expect_close("precision linear_forward_gelu y", shape, downf(d_y, ny), gc, ny, TOL_DEFAULT);
  float *hx = hrand(nx, -4, 4), *d_hx = upf(hx, nx), *d_scratch = dnew(sizeof(float) * nx);
  ck->linear_backward_input_gelu(ck, dxc, dy, W, hx, hnew(sizeof(float) * nx), N, Ni, No);
  gk->linear_backward_input_gelu(gk, d_dx, d_dy, d_W, d_hx, d_scratch, N, Ni, No);
  expect_close("precision linear_backward_input_gelu", shape, downf(d_dx, nx), dxc, nx,
               TOL_DEFAULT);
  ck->linear_backward_weight(ck, dWc, dbc, dy, x, N, Ni, No);
  gk->linear_backward_weight(gk, d_dW, d_db, d_dy, d_x, N, Ni, No);
  expect_close("precision linear_backward_weight", shape, downf(d_dW, nw), dWc, nw, TOL_DEFAULT);
  expect_close("precision linear_backward_weight db", shape, downf(d_db, No), dbc, No,
               TOL_DEFAULT);
  /* the products differ from float32 ones: the mode is on */
  float *plain = hnew(sizeof(float) * ny);
  kernels_cpu.linear_forward(&kernels_cpu, plain, x, W, b, N, Ni, No);
  int64_t at;
  CHECK(rel_err(yc, plain, ny, &at) > 1e-6, "%s: the products equal float32's", shape);
  if (p == PT_PRECISION_BF16) {
    gk->round_bf16(gk, d_x, nx);
    float *xr = hcopy(x, nx);
    ck->round_bf16(ck, xr, nx);
    expect_same_bits("round_bf16", shape, downf(d_x, nx), xr, nx);
    uint16_t *d_w16 = dnew(sizeof(uint16_t) * (size_t)nx);
    gk->pack_bf16(gk, d_w16, d_y, ny < nx ? ny : nx);
    gk->unpack_bf16(gk, d_dx, d_w16, ny < nx ? ny : nx);
    float *yr = downf(d_y, ny), *back = downf(d_dx, nx);
    ck->round_bf16(ck, yr, ny);
    expect_same_bits("pack_bf16 + unpack_bf16", shape, back, yr, ny < nx ? ny : nx);
    float *d_r = upf(dy, ny), *rr = hcopy(dy, ny);
    uint16_t *packed = hnew(sizeof(uint16_t) * (size_t)ny);
    gk->round_pack_bf16(gk, d_w16, d_r, ny < nx ? ny : nx, NULL, 0);
    ck->round_pack_bf16(ck, packed, rr, ny < nx ? ny : nx, NULL, 0);
    expect_same_bits("round_pack_bf16: rounded", shape, downf(d_r, ny), rr, ny);
    uint16_t *got16 = hnew(sizeof(uint16_t) * (size_t)nx);
    gpu_to_host(&G, got16, d_w16, sizeof(uint16_t) * (size_t)(ny < nx ? ny : nx));
    CHECK(memcmp(got16, packed, sizeof(uint16_t) * (size_t)(ny < nx ? ny : nx)) == 0,
          "%s: round_pack_bf16's bits differ from the CPU's", shape);
    test_round_pack_mark(gk, ck, shape, dy, ny < nx ? ny : nx);
    test_activation_copies(gk, shape, d_y, d_x, d_W, d_dx, d_dy, d_dW, N, Ni, No);
    test_share(gk, shape, d_y, d_x, d_W, N, Ni, No);
    test_share_into(gk, shape, d_y, d_x, d_W, N, Ni, No);
    if (No % 8 == 0) test_products_alone(gk, shape, d_x, d_W, d_b, N, Ni, No);
    test_colsum_copies(gk, shape, d_dW, d_db, d_dy, d_x, N, Ni, No);
    test_norm_weight_copies(gk, shape, 0, N, No);
    test_norm_weight_copies(gk, shape, 1, N, No);
    test_weight_copy(gk, shape, d_y, d_x, d_W, d_b, d_dx, d_dy, N, Ni, No, 1);
    if (ck->weight_copy) test_weight_copy(ck, shape, yc, x, W, b, dxc, dy, N, Ni, No, 0);
  }
  kernels_gpu_set_precision(kg, PT_PRECISION_FP32);
  scope_end();
}

/* A bf16 table's losses read y rounded to bf16 (kernels.h loss_rounds_bf16): on unrounded y
 * they give the bits of the plain losses on y rounded beforehand (what the stage handed them
 * before it left the logits unrounded), the CPU's and the GPU's alike, through loss and loss_acc
 * (dy over y, as the last stage does); loss_acc's mark is a finite_check of the values read:
 * raised by a float32 value that rounds to an infinity (finite as float32), by a NaN in an
 * ignored row, not by finite values; the largest value wins. */
static void test_loss_rounds(kernels_gpu *kg, pt_loss_kind kind, int N, int F) {
  const char *name = kind == LOSS_CROSS_ENTROPY ? "cross_entropy" : "mse";
  char shape[96];
  snprintf(shape, sizeof shape, "bf16 %s N=%d F=%d", name, N, F);
  kernels_gpu_set_precision(kg, PT_PRECISION_BF16);
  const pt_kernels *gk = &kg->table, *ck = kernels_cpu_for(PT_PRECISION_BF16);
  CHECK(gk->loss_rounds_bf16 && ck->loss_rounds_bf16, "%s: a bf16 table does not round", shape);
  int64_t n = (int64_t)N * F;
  float *y = hrand(n, -8, 8), *yr = hcopy(y, n), *ft = hrand(n, -1, 1);
  ck->round_bf16(ck, yr, n);
  int32_t *it = hids(N, 0, F);
  if (kind == LOSS_CROSS_ENTROPY) it[1] = LOSS_IGNORE;
  const void *tg = kind == LOSS_CROSS_ENTROPY ? (const void *)it : (const void *)ft;
  size_t tb = kind == LOSS_CROSS_ENTROPY ? sizeof(int32_t) * N : sizeof(float) * n;
  float *want = hnew(sizeof(float) * n), *got = hcopy(y, n);
  double lw = kernels_cpu.loss(&kernels_cpu, kind, yr, tg, tb, N, F, 0.25f, want);
  double lc = ck->loss(ck, kind, got, tg, tb, N, F, 0.25f, got);
  expect_same_bits("cpu loss rounding on read: dy", shape, got, want, n);
  CHECK(lc == lw, "%s: cpu loss %.17g on read, %.17g rounded before", shape, lc, lw);
  double *d_loss = dnew(sizeof(double)), zero = 0.0, lg[2];
  float *d_y = upf(y, n), *d_yr = upf(yr, n);
  for (int rounded = 0; rounded < 2; rounded++) { /* raw y through the table, then rounded y */
    gpu_to_device(&G, d_loss, &zero, sizeof zero);
    float *d = rounded ? d_yr : d_y;
    if (rounded) kernels_gpu_set_precision(kg, PT_PRECISION_FP32);
    gk->loss_acc(gk, kind, d, tg, tb, N, F, 0.25f, d, NULL, d_loss, NULL, 0);
    lg[rounded] = down_double(d_loss);
  }
  expect_same_bits("gpu loss rounding on read: dy", shape, downf(d_y, n), downf(d_yr, n), n);
  CHECK(lg[0] == lg[1], "%s: gpu loss %.17g on read, %.17g rounded before", shape, lg[0], lg[1]);
  expect_close("gpu loss rounding on read vs cpu", shape, downf(d_y, n), want, n, TOL_DEFAULT);
  /* the mark: finite float32 values that bf16 makes infinite, a NaN in an ignored row */
  const float big = 3.4e38f; /* past bf16's largest finite value 3.3895e38 and the halfway point
                               * 3.3961e38 to the next: it rounds to an infinity */
  float *h = hnew(sizeof(float) * n), *d_h = dnew(sizeof(float) * n);
  for (int bf16 = 0; bf16 < 2; bf16++) {
    kernels_gpu_set_precision(kg, bf16 ? PT_PRECISION_BF16 : PT_PRECISION_FP32);
    for (int gpu = 0; gpu < 2; gpu++) {
      const pt_kernels *t = gpu ? gk : bf16 ? ck : &kernels_cpu;
      int32_t mark = 0, *m = gpu ? dnew(sizeof(int32_t)) : &mark;
      double sum = 0.0, *sm = gpu ? dnew(sizeof(double)) : &sum;
      float *v = gpu ? d_h : h;
      if (gpu) gpu_to_device(&G, m, &mark, sizeof mark);
      /* y with one value changed (at `at`, or none) through loss_acc with the mark at `value` */
      for (int call = 0; call < 4; call++) {
        static const int32_t value[] = {7, 5, 9, 2};
        int64_t at[] = {-1, (int64_t)2 * F + 3, F, F};
        if (call >= 2 && kind != LOSS_CROSS_ENTROPY) break;
        memcpy(h, y, sizeof(float) * (size_t)n);
        if (at[call] >= 0) h[at[call]] = call == 1 ? big : NAN;
        if (gpu) gpu_to_device(&G, d_h, h, sizeof(float) * (size_t)n);
        t->loss_acc(t, kind, v, tg, tb, N, F, 0.25f, v, NULL, sm, m, value[call]);
        if (gpu) gpu_to_host(&G, &mark, m, sizeof mark);
        /* finite: none; big: only where bf16 rounds it; the NaN (row 1: ignored): 9, then stays */
        int32_t expect = call == 0 ? 0 : call == 1 ? (bf16 ? 5 : 0) : 9;
        CHECK(mark == expect, "%s %s, %s table, call %d: mark %d, expected %d", shape,
              gpu ? "gpu" : "cpu", bf16 ? "bf16" : "fp32", call, mark, expect);
      }
    }
  }
  kernels_gpu_set_precision(kg, PT_PRECISION_FP32);
  scope_end();
}

int main(void) {
  char why[256] = "";
  if (gpu_count(why, sizeof why) == 0) {
    printf("SKIP: no GPU (%s)\n", why);
    return 77;
  }
  char err[512];
  if (gpu_open(&G, 0, err, sizeof err) != 0) {
    fprintf(stderr, "test_cuda_ops: %s\n", err);
    return 1;
  }
  printf("test_cuda_ops: %s\n", G.name);
  /* PT_CUDA_OPS_SMALL=1 (the sanitizer build): the small shapes only, partial tiles and block
   * edges included; the large ones add time, not memory checks. */
  const int small_only = getenv("PT_CUDA_OPS_SMALL") != NULL;

  test_alloc_zeroed();
  test_linear(7, 33, 17);
  if (!small_only) test_linear(512, 256, 768);  /* B=4 T=128 d=256: qkv */
  if (!small_only) test_linear(512, 1024, 256); /* mlp.proj */
  test_linear_gelu(7, 33, 17);  /* no aux leading dimension cuBLASLt takes: the separate kernels */
  test_linear_gelu(7, 16, 24);  /* fused, forward and backward */
  if (!small_only) test_linear_gelu(512, 256, 1024); /* B=4 T=128 d=256: mlp.fc */
  test_layernorm(7, 33);
  if (!small_only) test_layernorm(512, 256);
  test_layernorm(3, 4099); /* rows longer than a block */
  test_layernorm(4000, 16); /* weight gradient: many row chunks of one column group */
  for (int kind = 0; kind < 2; kind++) {
    test_norm_residual(kind, 7, 33);
    if (!small_only) test_norm_residual(kind, 512, 768); /* GPT-2 small's rows */
    test_norm_residual(kind, 3, 4099);                   /* rows longer than a block */
  }
  test_activations(7 * 33);
  if (!small_only) test_activations(512 * 1024);
  test_attention(2, 7, 33, 3);
  if (!small_only) test_attention(4, 128, 256, 8);
  test_attention(1, 130, 96, 3);
  if (!small_only) test_attention(1, 1024, 128, 2); /* T = 1024 (32 tiles of 32 rows) */
  if (!small_only) test_attention(1, 203, 512, 2);  /* hd = 256, the largest the fused kernels take */
  /* the fused kernels' tiles (32 rows up to hd 64, 16 up to 128, 8 up to 256) cut partially */
  test_attention(1, 1, 8, 2);     /* one row */
  test_attention(2, 37, 4, 1);    /* hd = 4 */
  test_attention(3, 50, 16, 2);   /* hd = 8 */
  test_attention(2, 45, 48, 3);   /* hd = 16 */
  test_attention(2, 100, 128, 2); /* hd = 64 */
  if (!small_only) test_attention(1, 75, 360, 3);  /* hd = 120 */
  test_attention(1, 29, 200, 1);  /* hd = 200 */
  /* grouped-query attention: dK, dV of a kv head summed over its query heads */
  test_attention_gqa(2, 37, 32, 4, 2);    /* hd = 8, 2 query heads per kv head */
  test_attention_gqa(1, 130, 128, 8, 2);  /* hd = 16, 4 per kv head, partial tiles */
  test_attention_gqa(2, 45, 256, 4, 1);   /* hd = 64, multi-query */
  if (!small_only) test_attention_gqa(1, 70, 768, 6, 3);   /* hd = 128 */
  /* packed documents: the mask inside tiles, tiles skipped before a row's document */
  if (!small_only) test_attention_docs(3, 100, 128, 2, 2, 40); /* hd = 64, tiles of 32 */
  test_attention_docs(2, 70, 128, 8, 2, 12);  /* hd = 16, grouped-query */
  if (!small_only) test_attention_docs(2, 45, 360, 3, 3, 20);  /* hd = 120, tiles of 16 */
  test_attention_docs(2, 29, 400, 2, 1, 9);   /* hd = 200, tiles of 8, multi-query */
  test_attention_docs(1, 130, 32, 2, 2, 1);   /* every token its own document */
  test_attention_opts(2, 100, 64, 2, 1, 0, 5, 0.0f, 0.0f);  /* hd = 32, tiles of 32, window 5 */
  test_attention_opts(2, 90, 64, 2, 2, 0, 40, 0.0f, 0.0f);  /* a window across tiles */
  test_attention_opts(1, 50, 256, 2, 1, 0, 9, 0.0f, 0.0f);  /* hd = 128, tiles of 16 */
  test_attention_opts(2, 29, 400, 2, 1, 0, 1, 0.0f, 0.0f);  /* hd = 200, tiles of 8, window 1 */
  test_attention_opts(2, 70, 128, 8, 2, 12, 20, 0.0f, 0.0f); /* window and documents */
  test_attention_opts(2, 45, 48, 3, 3, 0, 0, 1.5f, 0.0f);   /* soft-capped */
  test_attention_opts(2, 45, 48, 3, 1, 0, 0, 0.0f, 0.3f);   /* another scale */
  test_attention_opts(2, 70, 64, 4, 2, 0, 33, 2.0f, 0.25f); /* Gemma 2: all three */
  test_rmsnorm(7, 33);
  if (!small_only) test_rmsnorm(512, 256);
  test_rmsnorm(4000, 16); /* weight gradient: many row chunks */
  test_head_rmsnorm(5, 4, 2, 8);
  test_head_rmsnorm(300, 2, 1, 128);
  test_rope(2, 7, 4, 2, 8, &(pt_rope_scaling){.theta = 10000.0});
  test_rope_src(2, 7, 4, 2, 8);
  /* the scaled types: llama3 (Llama 3.1's parameters at a short original context, so pairs
   * fall in all three bands), linear, yarn (cos/sin scaled) */
  test_rope(2, 7, 4, 2, 16, &(pt_rope_scaling){.type = PT_ROPE_LLAMA3, .theta = 500000.0,
            .factor = 8, .low_freq_factor = 1, .high_freq_factor = 4,
            .original_max_position_embeddings = 64});
  test_rope(2, 7, 4, 2, 8, &(pt_rope_scaling){.type = PT_ROPE_LINEAR, .theta = 10000.0,
            .factor = 2});
  test_rope(2, 7, 4, 2, 16, &(pt_rope_scaling){.type = PT_ROPE_YARN, .theta = 10000.0,
            .factor = 4, .original_max_position_embeddings = 32, .beta_fast = 32,
            .beta_slow = 1, .truncate = 1});
  if (!small_only) /* long positions, Llama 3's theta */
    test_rope(1, 1024, 2, 1, 64, &(pt_rope_scaling){.theta = 500000.0});
  test_swiglu(7, 33);
  if (!small_only) test_swiglu(512, 344);
  test_gemma_ops(7, 33);
  if (!small_only) test_gemma_ops(512, 344);
  test_misc(7, 33);
  if (!small_only) test_misc(512, 768);  /* colsum: 4 row chunks */
  test_misc(6000, 8);   /* colsum: 46 row chunks of one column group */
  if (!small_only) test_misc(300, 3000); /* colsum: 2 row chunks of 94 column groups */
  test_embedding(7, 33, 50, 50, 0);
  if (!small_only) test_embedding(512, 256, 1000, 64, 100); /* many repeats, id 0 about 100 times */
  test_embedding(2000, 40, 10, 1, 0);      /* one id everywhere */
  test_pos(3, 7, 33);
  if (!small_only) test_pos(4, 128, 256);
  test_positions(3, 40, 24, 4, 2, 8);
  test_loss(LOSS_CROSS_ENTROPY, 7, 33);
  if (!small_only) test_loss(LOSS_CROSS_ENTROPY, 512, 4096);
  if (!small_only) test_loss(LOSS_CROSS_ENTROPY, 16, 50257); /* GPT-2's vocabulary */
  test_loss(LOSS_MSE, 7, 33);
  if (!small_only) test_loss(LOSS_MSE, 512, 256);
  test_loss_ignore(300, 77);
  test_adamw(1037, 1000, 1, 0.1f);
  test_adamw(1037, 0, 0, 0.1f);
  test_adamw(1037, 0, 0, 0.0f);
  test_sgd(1037, 1000, 0.9f);
  test_sgd(1037, 500, 0.0f);
  test_reductions(7 * 33);
  if (!small_only) test_reductions(3000001);  /* several first-pass blocks */
  if (!small_only) test_reductions(20000000); /* the block count capped at 1024 */
  kernels_gpu kg;
  kernels_gpu_open(&kg, &G);
  test_tables(&kg);
  test_optimizer_bits(&kg, SPEC_OPTIMIZER_ADAMW, 0.0, 1);
  test_optimizer_bits(&kg, SPEC_OPTIMIZER_ADAMW, 0.0, 0);
  test_optimizer_bits(&kg, SPEC_OPTIMIZER_SGD, 0.9, 1);
  test_optimizer_bits(&kg, SPEC_OPTIMIZER_SGD, 0.0, 0);
  test_optimizer_chunks(&kg, SPEC_OPTIMIZER_ADAMW, 0.0);
  test_optimizer_chunks(&kg, SPEC_OPTIMIZER_SGD, 0.9);
  test_optimizer_chunks(&kg, SPEC_OPTIMIZER_SGD, 0.0);
  test_sumsq_spans(&kg, !small_only);
  test_embedding_sorted(&kg, 2048, 24, 300);
  test_embedding_sorted(&kg, 2049, 24, 300);
  if (!small_only) test_embedding_sorted(&kg, 5000, 40, 1000);
  for (pt_precision p = PT_PRECISION_TF32; p <= PT_PRECISION_BF16; p++) {
    test_precision_table(&kg, p, 7, 33, 17);
    if (!small_only) test_precision_table(&kg, p, 128, 96, 64);
  }
  kernels_gpu_set_precision(&kg, PT_PRECISION_BF16);
  test_attention_share(&kg.table);
  test_attention_at_rest(&kg.table);
  test_stash_at_rest(&kg.table);
  test_norm_dy_copies(&kg.table);
  test_norm_dx_copies(&kg.table);
  test_rope_copies(&kg.table);
  test_din_copy(&kg.table);
  test_norm_x_copies(&kg.table);
  test_norm_dx_rounded(&kg.table);
  kernels_gpu_set_precision(&kg, PT_PRECISION_FP32);
  test_loss_rounds(&kg, LOSS_CROSS_ENTROPY, 7, 33);
  test_loss_rounds(&kg, LOSS_MSE, 7, 33);
  if (!small_only) test_loss_rounds(&kg, LOSS_CROSS_ENTROPY, 16, 50257);
  scope_end();

  kernels_gpu_close(&kg);
  gpu_close(&G);
  return test_summary("test_cuda_ops");
}
