/* layers/builtin.h: the layer types pipetrain ships (registered by layer_register_builtins). */
#ifndef PT_LAYERS_BUILTIN_H
#define PT_LAYERS_BUILTIN_H

#include "layers/layer.h"

extern const pt_layer_type layer_type_embedding;
extern const pt_layer_type layer_type_pos_embedding;
extern const pt_layer_type layer_type_transformer_block;
extern const pt_layer_type layer_type_layernorm;
extern const pt_layer_type layer_type_linear;
extern const pt_layer_type layer_type_gelu;
extern const pt_layer_type layer_type_relu;
extern const pt_layer_type layer_type_lm_head;
extern const pt_layer_type layer_type_rmsnorm;
extern const pt_layer_type layer_type_llama_block;

/* Shared by configure functions: the model's `dim`, or an error naming the layer when unset. */
int64_t layer_require_model_int(const pt_layer_setup *s, int64_t value, const char *key,
                                const char *layer, spec_errors *e);
/* Error unless the input is float features of the expected width. */
void layer_expect_features(const pt_layer_setup *s, int64_t dim, const char *layer,
                           spec_errors *e);

/* 1 when table k's attention of this shape reads q|k|v and o only as bf16 (kernels.h
 * attention_reads_bf16; 0 on a table without it): the blocks then mark those parts read_at_rest
 * (layer.h), as the attention call with the same arguments follows. */
static inline int layer_attention_at_rest(const pt_kernels *k, int B, int T, int d, int H,
                                          int KVH, const pt_attention_opts *opts) {
  return k->attention_reads_bf16 && k->attention_reads_bf16(k, B, T, d, H, KVH, opts);
}

/* Before the product writing an attention's dout [B*T, d] in a block's backward_input: where
 * that attention reads it only as bf16 (layer_attention_at_rest, with packed documents asked
 * with their count, opts->documents, as the call will be: never without it), room the table
 * keeps is handed over for it alone (kernels.h share_bf16_into), so the product writes its bits
 * there only and the attention reads them, no conversion between. Nothing else may read dout's
 * floats. */
static inline void layer_attention_dout_at_rest(const pt_io *io, float *dout, int d, int H,
                                                int KVH, const pt_attention_opts *opts) {
  const pt_kernels *k = io->k;
  const int counted = !io->doc_start || (opts && opts->documents > 0);
  if (k->share_bf16_into && counted && layer_attention_at_rest(k, io->B, io->T, d, H, KVH, opts))
    k->share_bf16_into(k, dout, (int64_t)io->B * io->T * d, NULL, 1);
}

#endif
