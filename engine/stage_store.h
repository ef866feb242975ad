/* engine/stage_store.h: bf16 storage at rest of a stage's activations, for engine/stage.c only.
 *
 * Under train.precision bf16 (st->packed) a slot keeps each kept layer output as bf16 and, without
 * checkpointing, the parts of each saved area that forward writes (layer.h, saved_parts): bf16
 * where the part allows, else float32. The calls run on float32 buffers shared by the slots:
 * wk[li & 1] for kept outputs, wk_saved for the saved area (the checkpoint workspace holds the
 * rest, as in float32 storage). A split backward's stash set keeps, per layer with parameters,
 * the dout (bf16, but float32 for the loss gradient) and the parts only backward_input writes.
 * Every part that may be bf16 is rounded in place right after the step writing it, whichever the
 * path, so the copies at rest are exact and every path computes on the same values; but a part
 * backward reads only at rest (layer.h read_at_rest), which the forward product reading it
 * converts straight to its place at rest (kernels.h share_bf16_into): its floats, never
 * rounded, are undefined after forward (only products read them, and they read its bits).
 *
 * One exception, the model's logits (stage_logits), which no pass of their own rounds or packs.
 * Where the head writes them with one product (layer.h layer_out_by_product: a table with
 * share_bf16_into), their place at rest is handed to it alone, so they go to rest as the
 * product's bf16 and nowhere else; the loss reads them there (store_output registers them as
 * the working buffer's activation copy, kernels.h loss_acc) and may write its gradient's bits
 * over them. Otherwise their forward leaves them unrounded in their working buffer, not at rest
 * (st->raw_tag), since the loss that mostly follows at once reads them rounded (kernels.h
 * loss_rounds_bf16) and writes its gradient over them: the rounding and the packing would be
 * traffic for nothing. They go to rest (pack_bf16, which rounds) only when the buffer is about
 * to hold another tag first (another micro-batch's forward, an unpack, a recomputation), and
 * are rounded in place and kept for any reader but a loss (store_output). The loss reads the
 * same values either way (rounding is idempotent).
 */
#ifndef PT_STAGE_STORE_H
#define PT_STAGE_STORE_H

#include "engine/stage.h"

/* engine/stage.c's allocation, counted in st->bytes, and its release. */
void *stage_alloc(pt_stage *st, size_t bytes);
/* As stage_alloc, for a buffer whose first `touched` bytes alone are written (device.h
 * device_alloc_sparse): st->bytes counts what the device tracks. */
void *stage_alloc_sparse(pt_stage *st, size_t bytes, size_t touched);
void stage_release(pt_stage *st, void *p);

/* With checkpointing a slot keeps the output of each segment's last layer (the next segment's
 * input) and of the stage's last layer. */
static inline int stage_kept(const pt_stage *st, int li) {
  return st->ckpt == 0 || (li + 1) % st->ckpt == 0 || li == st->n - 1;
}

/* Layer li's output is the model's logits: the last layer of the model's last stage. */
static inline int stage_logits(const pt_stage *st, int li) {
  return li == st->n - 1 && st->last == st->m->n_layers;
}

void store_alloc(pt_stage *st);
void store_free(pt_stage *st);
/* Bytes of one stash set for layer li (a layer with parameters). */
size_t store_set_bytes(const pt_stage *st, int li);
/* The float32 buffers hold the slot's input of layer li (a kept output of li - 1) and, for a
 * backward step, its saved area (not its output: no backward reads it). Backward: the table's
 * activation copies (kernels.h) are then the saved parts only forward writes, read at rest by
 * products instead of converted, and those of them the layer reads only there (layer.h
 * read_at_rest) are not unpacked: undefined in the area (kernels.h unset_f32); forward: none
 * (forward rewrites the area), and those read_at_rest parts the table's to convert to rest. */
void store_ready(pt_stage *st, int slot, int li, int backward);
/* Before layer li's backward_input on dout: store_ready, then the table may keep one bf16
 * conversion of dout for both backward steps (kernels.h share_bf16), or, din_rounded: dout is
 * the input gradient the backward_input just before wrote and the table rounded as a norm wrote
 * it (kernels.h round_when_written said 1), whose bits it may have kept (kernels.h din_copy). */
void store_ready_backward(pt_stage *st, int slot, int li, const float *dout, int din_rounded);
/* Then, with layer li's io for backward_input and its stash set (NULL: backward_weight follows
 * at once): the places at rest of the stash parts backward_input itself reads only through
 * products (layer.h backward_at_rest; alone) or whose first reader converts them (and
 * backward_reads; not alone) handed to the table (kernels.h share_bf16_into): the set's, the
 * slot's for a part forward writes too, or, without a set, room the table keeps. */
void store_before_backward_input(pt_stage *st, int slot, int li, const pt_io *io,
                                 const void *set);
/* After layer li's forward wrote io: rounds its output and the parts it wrote, keeps the output
 * and parts at rest (rounded and packed in one pass; the parts a product converted to rest
 * already are left there, their floats unset); the logits' output stays as it is, held for the
 * loss (above). mark non-NULL: the output's finiteness check (kernels.h finite_check, mark and
 * value) is wanted; returns 1 when that pass did it (an output kept at rest), else 0 and the
 * caller checks. */
int store_after_forward(pt_stage *st, int slot, int li, const pt_io *io, int32_t *mark,
                        int32_t value);
/* The stage's last output of slot in its working buffer (store_ready of layer n), for a reader:
 * as it always was, rounded and kept at rest (logits held for the loss are rounded and packed in
 * one pass now); for_loss: logits held are handed over as they are, the loss rounding them as
 * it reads them, and since its gradient replaces them they are no longer held; logits at rest
 * and not in the buffer, on a table with activation_copies, are not unpacked: the buffer's
 * floats are undefined and its activation copy is them at rest, where the loss reads them. */
void store_output(pt_stage *st, int slot, int for_loss);
/* Where the loss of slot writes its gradient as bf16 (engine/stage.h stage_loss_gradient_bf16),
 * or NULL: the logits' place at rest, when the model's last layer reads dout only through
 * products (layers/layer.h layer_dout_at_rest). The backward that follows gets it as the
 * table's activation copy of the float32 buffer it is handed (store_ready_backward), whose
 * floats are unset; a stash set keeps it float32, unpacked from there
 * (store_after_backward_input). */
uint16_t *store_loss_place(pt_stage *st, int slot);
/* After layer li's backward_input: rounds the stash parts (without a stash set, the table
 * keeps their bits for the backward_weight that follows: kernels.h round_share_bf16); with a
 * stash set (split backward, layer with parameters) keeps there io->dout and the parts
 * backward_weight will read (the parts rounded and packed in one pass). Parts that went to
 * their places during backward_input (store_before_backward_input) are left there, their
 * floats unset. */
void store_after_backward_input(pt_stage *st, int slot, int li, const pt_io *io, void *set);
/* Before layer li's deferred backward_weight: store_ready, then the set's parts back into the
 * saved area; returns the dout the set kept, as float32 (unpacked into st->grad[0], or the
 * set itself for the loss gradient, kept float32). */
const float *store_before_backward_weight(pt_stage *st, int slot, int li, const void *set);

#endif
