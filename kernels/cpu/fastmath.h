/* kernels/cpu/fastmath.h: branch-free float exp/tanh that GCC vectorises (libm's are scalar
 * calls). Relative error of pt_expf below 2e-7 over [-87, 88]; results are deterministic.
 * The GPU kernels (kernels/cuda) include this too, so both sides use one approximation. */
#ifndef PT_FASTMATH_H
#define PT_FASTMATH_H

#ifdef __CUDACC__
#define PT_FASTMATH_FN static __host__ __device__ __forceinline__
#else
#define PT_FASTMATH_FN static inline
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

PT_FASTMATH_FN float pt_expf(float x) {
  /* Clamp with comparisons (fminf/fmaxf are libm calls that stop vectorisation), written so a
   * NaN lands on -87 and never reaches the float-to-int conversion below (undefined for NaN);
   * the NaN itself is handed back at the end, so non-finite values still propagate. */
  float xc = x > -87.0f ? x : -87.0f;
  xc = xc < 88.0f ? xc : 88.0f;
  float n = floorf(xc * 1.44269504088896341f + 0.5f);
  /* ln2 split in a part exact in float and a remainder, so r is accurate (Cody-Waite). */
  float r = xc - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = ((int32_t)n + 127) * (1 << 23); /* n in [-126, 127]: the exponent field */
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return x == x ? p * scale : x;
}

/* tanh(u) = 1 - 2 / (exp(2u) + 1): absolute error below 3e-7, exact limits +-1. */
PT_FASTMATH_FN float pt_tanhf(float u) { return 1.0f - 2.0f / (pt_expf(2.0f * u) + 1.0f); }

#endif
