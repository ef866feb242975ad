/* train.precision's numerics: the bf16 and tf32 roundings (kernels/precision.h) against a closed
 * form in double (the two neighbours of x in the format, the nearer one, ties to the even
 * mantissa), over hand-picked patterns (ties, carries into the exponent, overflow, subnormals,
 * infinities, NaN) and random bit patterns; the CPU bf16 table's pack/unpack round trip; and the
 * CPU tf32/bf16 tables' linear kernels against double products of the rounded inputs. */
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/precision.h"
#include "test_util.h"

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint32_t to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* The closed form: keep the top 32 - drop bits. Candidates: x truncated toward zero, and the
 * next value of the format away from zero (which may be infinity); pick the nearer in exact
 * double arithmetic, on a tie the one whose last kept bit is 0. Finite x only. */
static uint32_t reference(uint32_t u, int drop) {
  uint32_t mask = (1u << drop) - 1u, lo = u & ~mask, hi = lo + (1u << drop);
  double x = fabs((double)from_bits(u)), a = fabs((double)from_bits(lo));
  /* hi's magnitude: the next format value (hi's pattern, read as float, is it, or infinity) */
  double b = fabs((double)from_bits(hi));
  if ((hi & 0x7f800000u) == 0x7f800000u) /* past the largest finite: infinity's distance */
    b = ldexp(1.0, 128);                    /* as if the exponent went on (IEEE overflow rule) */
  double da = x - a, db = b - x;
  if (da < db) return lo;
  if (db < da) return hi;
  return (lo >> drop) & 1u ? hi : lo;
}

static void check_round(uint32_t u, int drop) {
  float x = from_bits(u);
  uint32_t got = to_bits(drop == 16 ? pt_round_bf16(x) : pt_round_tf32(x));
  if (isnan(x)) {
    CHECK(isnan(from_bits(got)) && (got & 0x80000000u) == (u & 0x80000000u) &&
              (got & 0x00400000u) && !(got & ((1u << drop) - 1u)),
          "drop %d: NaN %08x -> %08x", drop, u, got);
    return;
  }
  uint32_t want = reference(u, drop);
  CHECK(got == want, "drop %d: %08x (%g) -> %08x, want %08x", drop, u, (double)x, got, want);
}

static void test_roundings(void) {
  static const uint32_t cases[] = {
      0x00000000u, 0x80000000u, 0x3f800000u, 0x3f808000u, /* 1 + tie: to even (1) */
      0x3f818000u,                                          /* tie: to even (up) */
      0x3f808001u, 0x3f807fffu, 0x3fffffffu,                /* carry into the exponent */
      0x7f7fffffu, 0xff7fffffu, 0x7f7f7fffu, 0x7f7f8000u,   /* overflow, tie to infinity */
      0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, /* inf, NaN, sNaN */
      0x00000001u, 0x00008000u, 0x00018000u, 0x0000ffffu, 0x007fffffu, /* subnormals */
      0x80008000u, 0x80018000u, 0x00800000u, 0x3eaaaaabu, 0xbeaaaaabu};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    check_round(cases[i], 16);
    check_round(cases[i], 13);
  }
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 200000; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    check_round((uint32_t)s, 16);
    check_round((uint32_t)(s >> 32), 13);
  }
  /* the packed form is the top half of the rounded float, and unpacks exactly */
  for (int i = 0; i < 1000; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    float x = from_bits((uint32_t)s);
    if (isnan(x)) continue;
    uint16_t h = pt_bf16_bits(x);
    CHECK(to_bits(pt_bf16_float(h)) == to_bits(pt_round_bf16(x)), "pack %08x", (uint32_t)s);
  }
}

static void test_pack_table(void) {
  const pt_kernels *k = kernels_cpu_for(PT_PRECISION_BF16);
  CHECK(k->precision == PT_PRECISION_BF16 && k->round_bf16 && k->pack_bf16 && k->unpack_bf16,
        "bf16 table entries");
  CHECK(kernels_cpu_for(PT_PRECISION_FP32) == &kernels_cpu && !kernels_cpu.round_bf16,
        "fp32 is the plain table");
  CHECK(!kernels_cpu_for(PT_PRECISION_TF32)->round_bf16, "tf32 stores float32");
  float x[64], y[64];
  uint16_t w[64];
  for (int i = 0; i < 64; i++) x[i] = sinf((float)i * 0.37f) * powf(2.0f, (float)(i % 9) - 4);
  k->round_bf16(k, x, 64);
  k->pack_bf16(k, w, x, 64);
  k->unpack_bf16(k, y, w, 64);
  CHECK(!memcmp(x, y, sizeof x), "bf16 values survive pack and unpack bit for bit");
}

/* y = x W^T + b by each table against double sums of the rounded operands; dW and dx too. */
static void test_linear(pt_precision p, int N) {
  enum { NI = 33, NO = 5 };
  const pt_kernels *k = kernels_cpu_for(p);
  float *x = calloc((size_t)N * NI, sizeof(float)), W[NO * NI], b[NO];
  float *y = calloc((size_t)N * NO, sizeof(float)), *dy = calloc((size_t)N * NO, sizeof(float));
  float *dx = calloc((size_t)N * NI, sizeof(float)), dW[NO * NI] = {0};
  float (*r)(float) = p == PT_PRECISION_BF16 ? pt_round_bf16 : pt_round_tf32;
  for (int i = 0; i < N * NI; i++) x[i] = cosf((float)i * 1.3f) * 1.7f;
  for (int i = 0; i < NO * NI; i++) W[i] = sinf((float)i * 0.71f + 0.1f);
  for (int i = 0; i < NO; i++) b[i] = 0.25f * (float)i;
  for (int i = 0; i < N * NO; i++) dy[i] = sinf((float)i * 2.9f) * 0.3f;
  k->linear_forward(k, y, x, W, b, N, NI, NO);
  k->linear_backward_input(k, dx, dy, W, N, NI, NO, 0);
  k->linear_backward_weight(k, dW, NULL, dy, x, N, NI, NO);
  int same_as_fp32 = 1;
  for (int n = 0; n < N; n++)
    for (int o = 0; o < NO; o++) {
      double want = b[o], plain = b[o];
      for (int i = 0; i < NI; i++) {
        want += (double)r(x[n * NI + i]) * r(W[o * NI + i]);
        plain += (double)x[n * NI + i] * W[o * NI + i];
      }
      CHECK(fabs(y[n * NO + o] - want) <= 1e-5 * (1 + fabs(want)), "y[%d,%d] %g vs %g", n, o,
            (double)y[n * NO + o], want);
      same_as_fp32 &= fabs(want - plain) < 1e-7;
    }
  CHECK(!same_as_fp32, "the rounding changed the products (else this test proves nothing)");
  for (int n = 0; n < N; n++)
    for (int i = 0; i < NI; i++) {
      double want = 0;
      for (int o = 0; o < NO; o++) want += (double)r(dy[n * NO + o]) * r(W[o * NI + i]);
      CHECK(fabs(dx[n * NI + i] - want) <= 1e-5 * (1 + fabs(want)), "dx[%d,%d]", n, i);
    }
  for (int o = 0; o < NO; o++)
    for (int i = 0; i < NI; i++) {
      double want = 0;
      for (int n = 0; n < N; n++) want += (double)r(dy[n * NO + o]) * r(x[n * NI + i]);
      CHECK(fabs(dW[o * NI + i] - want) <= 1e-5 * (1 + fabs(want)), "dW[%d,%d]", o, i);
    }
  free(x), free(y), free(dy), free(dx);
}

int main(void) {
  test_roundings();
  test_pack_table();
  /* 7 rows: one block; 600: three blocks of PT_PRECISION_BLOCK_ROWS, the last partial */
  for (int N = 7; N <= 600; N += 593) {
    test_linear(PT_PRECISION_TF32, N);
    test_linear(PT_PRECISION_BF16, N);
  }
  return test_summary("precision");
}
