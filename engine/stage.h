/* engine/stage.h: runs a contiguous range of layers on micro-batches.
 *
 * A stage owns the activation memory of its layers for n_slots micro-batches in flight (the
 * pipeline schedule decides how many; the sequential path uses 1). With activation
 * checkpointing every k layers (k > 0), a slot keeps only each k-layer segment's output; the
 * segment's inner outputs and saved state live in one shared workspace and are recomputed
 * during backward. Recomputation calls the same deterministic forward, so gradients are
 * bitwise equal to k = 0.
 *
 * Use per micro-batch: write the input (int32 tokens [B,T] or float [B,T,in_dim]) to
 * stage_input_host(slot) and call stage_input_commit(slot), or receive it into
 * stage_input(slot) (a device buffer); stage_forward(), then stage_backward() with the
 * gradient of the output. Every buffer here is on the model's device (device.h). Buffers
 * returned stay valid until the slot's next stage_forward(). Per process, nothing collective; the
 * caller (engine/part.c) owns the pt_stage, and the model must outlive it.
 */
#ifndef PT_STAGE_H
#define PT_STAGE_H

#include <stddef.h>

#include "model/model.h"

typedef struct {
  pt_model *m;
  int first, last, n;   /* layer range [first, last), n = last - first */
  int B, T;             /* largest micro-batch */
  int ckpt;             /* checkpoint interval (0: keep everything) */
  int n_slots;
  void **input;         /* [slot], device buffers */
  void *input_host;     /* host staging of the data loader's input (NULL on the cpu) */
  size_t in_bytes;
  float **out;          /* [slot * n + li]: kept outputs (NULL where not kept) */
  void **saved;         /* [slot * n + li] when ckpt == 0 */
  float **ws_out;       /* [k]: workspace outputs, by position in segment */
  void **ws_saved;      /* [k] */
  int ws_slot, ws_seg;  /* which slot's segment the workspace holds (-1: none) */
  void *scratch;
  float *grad[2];
  int cur_B, cur_T;     /* shape of the micro-batch in each slot: set by stage_forward */
  size_t bytes;         /* activation memory allocated by this stage */
  int check_finite;     /* scan every layer output for inf/nan (train.on_nonfinite: abort) */
  int bad_layer;        /* global index of the first layer whose output was not finite, -1 */
} pt_stage;

void stage_init(pt_stage *st, pt_model *m, int first, int last, int B, int T, int n_slots,
                int ckpt);
void stage_free(pt_stage *st);
void *stage_input(pt_stage *st, int slot);
/* Host memory for the input of slot, and its copy to the device (nothing to do on the cpu). */
void *stage_input_host(pt_stage *st, int slot);
void stage_input_commit(pt_stage *st, int slot);
/* Runs forward for the micro-batch in slot; returns the stage output [B,T,out_dim]. */
const float *stage_forward(pt_stage *st, int slot, int B, int T);
/* Backward of the micro-batch in slot given dout = d loss / d output. When need_din is set (and
 * the input is not token ids) returns d loss / d input, written into din_out if it is not NULL
 * (e.g. a send buffer) or into a stage buffer; else NULL. */
const float *stage_backward(pt_stage *st, int slot, const float *dout, int need_din,
                            float *din_out);
/* The stage output of the micro-batch in slot (valid after its stage_forward). */
float *stage_output(pt_stage *st, int slot);

#endif
