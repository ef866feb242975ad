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

#endif
