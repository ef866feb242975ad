/* layers/transformer_block.h: the transformer block's parameter order and the layout of its
 * saved area, shared by its CPU (transformer_block.c) and GPU (cuda/layers_gpu.c) versions so
 * either can run the backward of the other's forward. */
#ifndef PT_TRANSFORMER_BLOCK_H
#define PT_TRANSFORMER_BLOCK_H

#include "layers/layer.h"

enum { LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, MP_W, MP_B };

/* Views into the saved area. The first group is written by forward; the stash by
 * backward_input for backward_weight (which may run later in zero-bubble schedules). */
typedef struct {
  float *mean1, *rstd1, *xln1, *qkv, *probs, *atty, *x1, *mean2, *rstd2, *xln2, *h, *g;
  float *dx1, *dxln2, *dqkv, *dxln1; /* stash; h holds d(fc output) after backward_input */
} block_saved;

enum { N_SAVED = 16 };

/* Points v's fields into saved (saved_bytes(B, T) bytes) for a micro-batch of B x T. */
void transformer_block_views(const pt_layer *L, int B, int T, void *saved, block_saved *v);

#endif
