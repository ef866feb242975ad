/* layers/rope_freqs.c: rope_scaling maps and their angle tables (rope_freqs.h). Compiled with
 * -ffp-contract=off (CMakeLists.txt): transformers rounds every float32 product and sum, so no
 * fused multiply-add may merge them here. */
#include "layers/rope_freqs.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const double PI = 3.141592653589793; /* Python's math.pi */

const char *const pt_rope_type_names[] = {"default", "linear", "llama3", "yarn", NULL};

void rope_scaling_read(spec_node *map, double theta, pt_rope_scaling *r, spec_errors *e) {
  memset(r, 0, sizeof *r);
  r->theta = theta;
  r->type = PT_ROPE_DEFAULT;
  if (!map || spec_node_is_null(map)) return;
  if (!spec_expect_map(map, "rope_scaling", e)) return;
  spec_node *type = spec_find(map, "type");
  if (!type) {
    spec_error(e, map, 0, "rope_scaling: missing 'type' (one of default, linear, llama3, yarn)");
    return;
  }
  int t = spec_node_choice(type, pt_rope_type_names, e);
  if (t < 0) return;
  r->type = (pt_rope_type)t;
  const double big = 1e30;
  if (r->type != PT_ROPE_DEFAULT)
    r->factor = spec_get_num(map, "factor", 1, 0, 1e-30, big, e);
  if (r->type == PT_ROPE_LLAMA3) {
    r->low_freq_factor = spec_get_num(map, "low_freq_factor", 1, 0, 1e-30, big, e);
    r->high_freq_factor = spec_get_num(map, "high_freq_factor", 1, 0, 1e-30, big, e);
    if (!e->failed && !(r->high_freq_factor > r->low_freq_factor))
      spec_error(e, map, 0, "rope_scaling: high_freq_factor %g must exceed low_freq_factor %g",
                 r->high_freq_factor, r->low_freq_factor);
  }
  if (r->type == PT_ROPE_LLAMA3 || r->type == PT_ROPE_YARN)
    r->original_max_position_embeddings =
        spec_get_int(map, "original_max_position_embeddings", 1, 0, 1, INT32_MAX, e);
  if (r->type == PT_ROPE_YARN) {
    r->beta_fast = spec_get_num(map, "beta_fast", 0, 32.0, 1e-30, big, e);
    r->beta_slow = spec_get_num(map, "beta_slow", 0, 1.0, 1e-30, big, e);
    r->attention_factor = spec_get_num(map, "attention_factor", 0, 0.0, 0.0, big, e);
    r->truncate = spec_get_bool(map, "truncate", 1, e);
  }
  static const char *const known[] = {"type", "factor", "low_freq_factor", "high_freq_factor",
                                      "original_max_position_embeddings", "beta_fast",
                                      "beta_slow", "attention_factor", "truncate", NULL};
  char what[64];
  snprintf(what, sizeof what, "rope_scaling (type %s)", pt_rope_type_names[r->type]);
  spec_check_unused(map, what, known, e);
}

/* transformers' default: 1 / theta^(2j/hd), the exponent in float. */
static float default_inv_freq(float theta, int j, int hd) {
  const float e = (float)(2 * j) / (float)hd;
  return 1.0f / (float)pow((double)theta, (double)e);
}

/* _compute_llama3_parameters for one pair (Python scalars meet float32 tensors as floats;
 * `a / tensor` is transformers' reciprocal-then-multiply). */
static float llama3_inv_freq(const pt_rope_scaling *r, float inv) {
  const double old = (double)r->original_max_position_embeddings;
  const float factor = (float)r->factor, lo = (float)r->low_freq_factor;
  const float low_wavelen = (float)(old / r->low_freq_factor);
  const float high_wavelen = (float)(old / r->high_freq_factor);
  const float wavelen = (1.0f / inv) * (float)(2 * PI);
  const float scaled = wavelen > low_wavelen ? inv / factor : inv;
  const float smooth =
      ((1.0f / wavelen) * (float)old - lo) / (float)(r->high_freq_factor - r->low_freq_factor);
  const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
  const int medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
  return medium ? smoothed : scaled;
}

/* _compute_yarn_parameters' find_correction_dim, in double as transformers' Python floats. */
static double yarn_correction_dim(double rotations, int hd, double theta, double orig) {
  return (hd * log(orig / (rotations * 2 * PI))) / (2 * log(theta));
}

static void yarn_make(const pt_rope_scaling *r, int hd, float theta, pt_rope_freqs *f) {
  const double orig = (double)r->original_max_position_embeddings;
  double low = yarn_correction_dim(r->beta_fast, hd, r->theta, orig);
  double high = yarn_correction_dim(r->beta_slow, hd, r->theta, orig);
  if (r->truncate) low = floor(low), high = ceil(high);
  if (low < 0) low = 0;
  if (high > hd - 1) high = hd - 1;
  if (low == high) high += 0.001; /* transformers' guard against a zero-width ramp */
  for (int j = 0; j < hd / 2; j++) {
    const float pos_freq = (float)pow((double)theta, (double)((float)(2 * j) / (float)hd));
    const float extrapolation = 1.0f / pos_freq;
    const float interpolation = 1.0f / ((float)r->factor * pos_freq);
    float ramp = ((float)j - (float)low) / (float)(high - low);
    ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
    const float extra_share = 1.0f - ramp;
    f->inv_freq[j] = interpolation * (1.0f - extra_share) + extrapolation * extra_share;
  }
  double att = r->attention_factor;
  if (att == 0.0) att = r->factor <= 1 ? 1.0 : 0.1 * log(r->factor) + 1.0;
  f->scale = (float)att;
}

void rope_freqs_make(const pt_rope_scaling *r, int hd, pt_rope_freqs *f) {
  memset(f, 0, sizeof *f);
  const float theta = (float)r->theta;
  f->pairs = hd / 2;
  f->scale = 1.0f;
  if (r->type == PT_ROPE_YARN) {
    yarn_make(r, hd, theta, f);
    return;
  }
  for (int j = 0; j < hd / 2; j++) {
    float inv = default_inv_freq(theta, j, hd);
    if (r->type == PT_ROPE_LINEAR) inv = inv / (float)r->factor;
    if (r->type == PT_ROPE_LLAMA3) inv = llama3_inv_freq(r, inv);
    f->inv_freq[j] = inv;
  }
}
