/* layers/rope_freqs.h: llama_block's rotary embedding settings and the angle table they give.
 *
 * A llama_block's `rope_scaling` map (docs/layers.md) names one of transformers' RoPE types and
 * its parameters; rope_scaling_read parses it once at configure time and rope_freqs_make turns
 * it into the per-pair inverse frequencies (and yarn's cos/sin factor) that the kernels' rope
 * entry reads (kernels.h, pt_rope_freqs). The table is transformers' own float32 computation
 * (modeling_rope_utils.py: the default, _compute_linear_scaling_rope_parameters,
 * _compute_llama3_parameters, _compute_yarn_parameters), op by op in float where transformers
 * computes on float32 tensors and in double where it computes on Python floats; the default type
 * gives the table the kernels computed from rope_theta before scaling existed, bit for bit.
 */
#ifndef PT_ROPE_FREQS_H
#define PT_ROPE_FREQS_H

#include "kernels/kernels.h"
#include "spec/spec.h"

typedef enum { PT_ROPE_DEFAULT, PT_ROPE_LINEAR, PT_ROPE_LLAMA3, PT_ROPE_YARN } pt_rope_type;

/* The names of pt_rope_type (transformers' rope_type values), NULL-terminated. */
extern const char *const pt_rope_type_names[];

/* One rope_scaling map. Unused fields of a type are 0 (attention_factor 0: yarn derives it from
 * factor). */
typedef struct {
  pt_rope_type type;
  double theta;  /* the block's rope_theta */
  double factor; /* linear, llama3, yarn */
  double low_freq_factor, high_freq_factor; /* llama3 */
  int64_t original_max_position_embeddings; /* llama3, yarn */
  double beta_fast, beta_slow, attention_factor; /* yarn */
  int truncate;                                  /* yarn */
} pt_rope_scaling;

/* What a configured llama_block keeps (its pt_layer.state): the settings and their table. */
typedef struct {
  pt_rope_scaling scaling;
  pt_rope_freqs freqs;
} pt_rope;

/* Reads the rope_scaling map `map` (NULL or null: the default type) of a block with rope_theta
 * theta into r; errors (unknown type or key, a missing or out-of-range parameter) go to e with
 * the node's position. */
void rope_scaling_read(spec_node *map, double theta, pt_rope_scaling *r, spec_errors *e);
/* The table of r for heads of hd dims (hd even, hd / 2 <= PT_ROPE_MAX_PAIRS). */
void rope_freqs_make(const pt_rope_scaling *r, int hd, pt_rope_freqs *f);

#endif
