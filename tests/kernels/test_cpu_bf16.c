/* The CPU's bf16 table with products in hardware (kernels/cpu/kernels_cpu_bf16.c, oneDNN): its
 * four linear entries against float64 sums of products of the bf16-rounded operands
 * (kernels/precision.h), over odd shapes (rows across PT_PRECISION_BLOCK_ROWS blocks, odd
 * widths), acc 0/1, with and without bias, a residual that is x itself; the conversion's
 * roundings through one-term products (exact); and the same bits for 1, 2 and 4 threads.
 * Tolerance: float32 accumulation, so |got - want| <= 1e-5 * (sum |a||b| + |the terms added|).
 * Skips (77) where the build has no oneDNN or the CPU no bf16 products. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/precision.h"
#include "test_util.h"

static const pt_kernels *k;

static float *filled(int64_t n, double f, double scale) {
  float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) x[i] = (float)(sin((double)i * f + 0.3) * scale);
  return x;
}

static int close_to(double got, double want, double mag) {
  return fabs(got - want) <= 1e-5 * mag + 1e-30;
}

/* y = [res +] x W^T [+ b]: residual 1 passes res = x (Ni == No). */
static void check_forward(int N, int Ni, int No, int bias, int residual) {
  float *x = filled((int64_t)N * Ni, 1.3, 1.7), *W = filled((int64_t)No * Ni, 0.71, 1.0);
  float *b = bias ? filled(No, 0.9, 0.5) : NULL, *y = filled((int64_t)N * No, 0.5, 9.0);
  if (residual) k->linear_forward_residual(k, y, x, x, W, b, N, Ni, No);
  else k->linear_forward(k, y, x, W, b, N, Ni, No);
  for (int n = 0; n < N; n++)
    for (int o = 0; o < No; o++) {
      double want = 0, mag = 0, extra = (b ? b[o] : 0) + (residual ? x[n * Ni + o] : 0);
      for (int i = 0; i < Ni; i++) {
        double t = (double)pt_round_bf16(x[n * Ni + i]) * pt_round_bf16(W[o * Ni + i]);
        want += t, mag += fabs(t);
      }
      CHECK(close_to(y[n * No + o], want + extra, mag + fabs(extra)),
            "forward%s N%d Ni%d No%d bias%d: y[%d,%d] %.9g vs %.9g", residual ? "_residual" : "",
            N, Ni, No, bias, n, o, (double)y[n * No + o], want + extra);
    }
  free(x), free(W), free(b), free(y);
}

static void check_backward(int N, int Ni, int No, int acc) {
  float *dy = filled((int64_t)N * No, 2.9, 0.3), *W = filled((int64_t)No * Ni, 0.71, 1.0);
  float *x = filled((int64_t)N * Ni, 1.3, 1.7), *db = filled(No, 0.2, 1.0);
  float *dx = filled((int64_t)N * Ni, 0.4, 2.0), *dx0 = filled((int64_t)N * Ni, 0.4, 2.0);
  float *dW = filled((int64_t)No * Ni, 0.6, 3.0), *dW0 = filled((int64_t)No * Ni, 0.6, 3.0);
  float *db0 = filled(No, 0.2, 1.0);
  k->linear_backward_input(k, dx, dy, W, N, Ni, No, acc);
  k->linear_backward_weight(k, dW, db, dy, x, N, Ni, No);
  for (int n = 0; n < N; n++)
    for (int i = 0; i < Ni; i++) {
      double want = acc ? dx0[n * Ni + i] : 0, mag = fabs(want);
      for (int o = 0; o < No; o++) {
        double t = (double)pt_round_bf16(dy[n * No + o]) * pt_round_bf16(W[o * Ni + i]);
        want += t, mag += fabs(t);
      }
      CHECK(close_to(dx[n * Ni + i], want, mag), "backward_input N%d Ni%d No%d acc%d: dx[%d,%d]",
            N, Ni, No, acc, n, i);
    }
  for (int o = 0; o < No; o++) {
    double dbw = db0[o], dbm = fabs(dbw);
    for (int i = 0; i < Ni; i++) {
      double want = dW0[o * Ni + i], mag = fabs(want);
      for (int n = 0; n < N; n++) {
        double t = (double)pt_round_bf16(dy[n * No + o]) * pt_round_bf16(x[n * Ni + i]);
        want += t, mag += fabs(t);
      }
      CHECK(close_to(dW[o * Ni + i], want, mag), "backward_weight N%d Ni%d No%d: dW[%d,%d]", N,
            Ni, No, o, i);
    }
    for (int n = 0; n < N; n++) dbw += dy[n * No + o], dbm += fabs(dy[n * No + o]);
    CHECK(close_to(db[o], dbw, dbm), "db[%d]: the float32 dy's column sum", o);
  }
  free(dy), free(W), free(x), free(db), free(dx), free(dx0), free(dW), free(dW0), free(db0);
}

/* One-term products by 1: the result is the bf16 conversion itself, exactly (a product of two
 * bf16 values is exact in float32). Subnormal bf16 operands are left out: the hardware's bf16
 * dot products treat them as zero (docs/gpu.md, Precision). */
static void check_conversion(void) {
  static const uint32_t cases[] = {
      0x3f800000u, 0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, 0x3fffffffu, 0x7f7fffffu,
      0xff7fffffu, 0x7f7f7fffu, 0x7f7f8000u, 0x7f800000u, 0xff800000u, 0x3eaaaaabu, 0xbeaaaaabu,
      0x00800000u, 0x80800000u, 0x00000000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u};
  enum { N = sizeof cases / sizeof cases[0] + 1000 };
  float x[N], y[N], one = 1.0f;
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < N; i++) {
    uint32_t u = i < (int)(sizeof cases / sizeof cases[0]) ? cases[i] : 0;
    if (!u && i >= (int)(sizeof cases / sizeof cases[0]))
      do s ^= s << 13, s ^= s >> 7, s ^= s << 17, u = (uint32_t)s;
      while ((u & 0x7f800000u) == 0 || (u & 0x7f800000u) == 0x7f800000u);
    memcpy(&x[i], &u, sizeof u);
  }
  k->linear_forward(k, y, x, &one, NULL, N, 1, 1);
  for (int i = 0; i < N; i++) {
    float want = pt_round_bf16(x[i]);
    CHECK(isnan(want) ? isnan(y[i]) : !memcmp(&want, &y[i], sizeof want),
          "conversion of %08x: %08x, want %08x", pt_float_bits(x[i]), pt_float_bits(y[i]),
          pt_float_bits(want));
  }
}

/* Every entry's output for 1 thread and for `threads`, bitwise, on shapes that tempt a split
 * over K (oneDNN may split a product's sum across threads; it must not change the bits). */
static void check_threads(int N, int Ni, int No, int threads) {
  float *x = filled((int64_t)N * Ni, 1.3, 1.7), *W = filled((int64_t)No * Ni, 0.71, 1.0);
  float *dy = filled((int64_t)N * No, 2.9, 0.3), *b = filled(No, 0.9, 0.5);
  float *out[2][3];
  for (int t = 0; t < 2; t++) {
    kernels_cpu_set_threads(t ? threads : 1);
    out[t][0] = filled((int64_t)N * No, 0.5, 1.0);
    out[t][1] = filled((int64_t)N * Ni, 0.4, 1.0);
    out[t][2] = filled((int64_t)No * Ni, 0.6, 1.0);
    k->linear_forward(k, out[t][0], x, W, b, N, Ni, No);
    k->linear_backward_input(k, out[t][1], dy, W, N, Ni, No, 1);
    k->linear_backward_weight(k, out[t][2], NULL, dy, x, N, Ni, No);
  }
  kernels_cpu_set_threads(1);
  int64_t n[3] = {(int64_t)N * No, (int64_t)N * Ni, (int64_t)No * Ni};
  static const char *name[3] = {"forward", "backward_input", "backward_weight"};
  for (int e = 0; e < 3; e++) {
    CHECK(!memcmp(out[0][e], out[1][e], sizeof(float) * (size_t)n[e]),
          "%s N%d Ni%d No%d: 1 and %d threads differ", name[e], N, Ni, No, threads);
    free(out[0][e]), free(out[1][e]);
  }
  free(x), free(W), free(dy), free(b);
}

int main(void) {
  k = kernels_cpu_bf16_hardware();
  if (!k) {
    printf("cpu_bf16: skipped: %s\n", "no bf16 products in hardware (build without oneDNN, or "
                                      "the CPU multiplies no bf16)");
    return 77;
  }
  printf("cpu_bf16: products %s\n", kernels_cpu_bf16_products());
  kernels_cpu_set_threads(1);
  check_conversion();
  static const int shapes[][3] = {{1, 33, 5}, {7, 17, 65}, {37, 129, 31}, {300, 65, 65},
                                  {513, 48, 33}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int N = shapes[s][0], Ni = shapes[s][1], No = shapes[s][2];
    for (int bias = 0; bias < 2; bias++) check_forward(N, Ni, No, bias, 0);
    if (Ni == No) check_forward(N, Ni, No, 1, 1), check_forward(N, Ni, No, 0, 1);
    for (int acc = 0; acc < 2; acc++) check_backward(N, Ni, No, acc);
  }
  for (int threads = 2; threads <= 4; threads += 2) { /* 4: more threads than blocks, too */
    check_threads(7, 16, 2048, threads);   /* a long K, small M and N: backward_input */
    check_threads(256, 1024, 64, threads); /* a long K in forward */
    check_threads(600, 64, 48, threads);   /* dW over three row blocks */
    check_threads(256, 512, 512, threads);
  }
  return test_summary("cpu_bf16");
}
