/* kernels/cpu/rope_angle.h: the rotary embedding's cos and sin for position t of a pair whose
 * inverse frequency is inv_freq, shared by the CPU and GPU kernels (kernels.h, rope) so both
 * rotate by the same floats. As Hugging Face computes them in float32: angle = t * inv_freq in
 * float; then cos and sin of that float, evaluated in double and rounded once (the correctly
 * rounded value in all but rare cases, on either device, where float cosf/sinf of the two math
 * libraries may differ in the last bit), each times scale in float as transformers multiplies by
 * its attention_scaling (1 but for yarn, and x * 1.0f is x). */
#ifndef PT_ROPE_ANGLE_H
#define PT_ROPE_ANGLE_H

#include "kernels/cpu/fastmath.h"

PT_FASTMATH_FN void rope_cos_sin(int t, float inv_freq, float scale, float *c, float *s) {
  const float a = (float)t * inv_freq;
  *c = (float)cos((double)a) * scale;
  *s = (float)sin((double)a) * scale;
}

#endif
