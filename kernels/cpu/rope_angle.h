/* kernels/cpu/rope_angle.h: the rotary embedding's cos and sin for position t and pair j of a
 * head of hd dims, shared by the CPU and GPU kernels (kernels.h, rope) so both rotate by the
 * same floats. As Hugging Face computes them in float32: exponent 2j/hd in float, inv_freq =
 * 1 / theta^exponent in float, angle = t * inv_freq in float; then cos and sin of that float,
 * evaluated in double and rounded once (the correctly rounded value in all but rare cases, on
 * either device, where float cosf/sinf of the two math libraries may differ in the last bit). */
#ifndef PT_ROPE_ANGLE_H
#define PT_ROPE_ANGLE_H

#include "kernels/cpu/fastmath.h"

PT_FASTMATH_FN void rope_cos_sin(int t, int j, int hd, float theta, float *c, float *s) {
  const float e = (float)(2 * j) / (float)hd;
  const float inv_freq = 1.0f / (float)pow((double)theta, (double)e);
  const float a = (float)t * inv_freq;
  *c = (float)cos((double)a);
  *s = (float)sin((double)a);
}

#endif
