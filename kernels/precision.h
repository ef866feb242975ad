/* kernels/precision.h: the roundings of train.precision, one float at a time (the CPU tables,
 * the CUDA kernels and the emulator's cuBLAS all use these, so every device rounds alike).
 *
 * bf16: the top 16 bits of a float32 (sign, 8 exponent bits, 7 mantissa bits). pt_bf16_bits
 * rounds to nearest, ties to even, in the bit pattern: finite values that round past the
 * largest bf16 become infinity, subnormals round like normal numbers (same exponent range),
 * infinities stay, a NaN stays a NaN (quiet, same sign). pt_bf16_float is exact.
 * tf32: a float32 with only the top 10 mantissa bits, rounded the same way (what the emulator
 * and the CPU use for TF32 tensor-core inputs; a real GPU's conversion may differ in the last
 * place, so tf32 runs are compared with tolerances, never bitwise).
 */
#ifndef PT_KERNELS_PRECISION_H
#define PT_KERNELS_PRECISION_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define PT_PRECISION_FN static __host__ __device__ __forceinline__
#else
#define PT_PRECISION_FN static inline
#endif

PT_PRECISION_FN uint32_t pt_float_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

PT_PRECISION_FN float pt_bits_float(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* Keeps the top 32 - drop bits of x's pattern, rounded to nearest even; NaN made quiet. */
PT_PRECISION_FN uint32_t pt_round_bits(uint32_t u, int drop) {
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))
    return (u | 0x00400000u) & ~((1u << drop) - 1u); /* the quiet bit survives any drop <= 22 */
  uint32_t half = (1u << (drop - 1)) - 1u + ((u >> drop) & 1u);
  return (u + half) & ~((1u << drop) - 1u);
}

PT_PRECISION_FN uint16_t pt_bf16_bits(float x) {
  return (uint16_t)(pt_round_bits(pt_float_bits(x), 16) >> 16);
}
PT_PRECISION_FN float pt_bf16_float(uint16_t h) { return pt_bits_float((uint32_t)h << 16); }
PT_PRECISION_FN float pt_round_bf16(float x) { return pt_bits_float(pt_round_bits(pt_float_bits(x), 16)); }
PT_PRECISION_FN float pt_round_tf32(float x) { return pt_bits_float(pt_round_bits(pt_float_bits(x), 13)); }

#endif
