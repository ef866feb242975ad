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
 *
 * Split backward (zero-bubble schedules): stage_backward_input() then, later,
 * stage_backward_weight() of the same slot do together what stage_backward() does, with the
 * same results bit for bit. Between the two, each layer with parameters keeps its output
 * gradient in a dout set (the layer API keeps in, out and saved per slot already);
 * stage_alloc_stash() allocates n_sets of them, the most micro-batches the schedule holds between
 * their I and W. Sets are taken by I and returned by W in any order. Layers without parameters
 * have no weight gradient to defer: their backward_weight runs inside I. With checkpointing the
 * segment workspace is shared between slots, so I runs the fused backward (one recomputation;
 * the weight gradients accumulate at I) and W does nothing; no sets are allocated.
 *
 * train.precision bf16 (the table has pack_bf16): the slots keep their layers' outputs and saved
 * areas packed, bf16 where the layer's saved_parts allow (engine/stage_store.c), and every call
 * runs on float32 working buffers shared by the slots, filled from the packed copies when they
 * do not hold the slot's values already. The stash sets keep the douts (bf16 but the loss
 * gradient) and the parts only backward_input writes. The stage input stays as received. The
 * results are those of float32 storage of the same (bf16) values: packing is lossless on them.
 * The model's logits are the exception: forward leaves them unrounded for the loss, which
 * rounds them as it reads them (kernels.h loss_rounds_bf16), so they are rounded and packed
 * only where they must wait, or, where the head's product can write them at rest alone, puts
 * them only there (engine/stage_store.h); stage_output hands them rounded, as ever,
 * stage_loss_output and stage_loss_gradient as they are (at rest: the buffer's floats
 * undefined, its activation copy the logits, which the loss reads, kernels.h loss_acc). Their
 * finiteness check, too, is the loss's (stage_loss_check): it reads them anyway.
 */
#ifndef PT_STAGE_H
#define PT_STAGE_H

#include <stddef.h>
#include <stdint.h>

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
  int n_stash;          /* dout sets for split backward (0: fused only, or checkpointing) */
  float **stash;        /* [set * n + li]: layer li's dout (packed: at rest, then the parts
                           only backward_input writes); NULL where li has no parameters */
  int *stash_of;        /* [slot]: the set holding the slot's douts between I and W, or -1 */
  char *stash_used;     /* [set] */
  int check_finite;     /* scan every layer output for inf/nan (train.on_nonfinite: abort) */
  int32_t *loss_check;  /* [slot]: the check of the logits its loss owes (stage_loss_check) */
  int32_t *finite_mark; /* device mark the checks raise (device/stats.h), when check_finite */
  int check_seq;        /* forward passes over layers this step: orders the checks in time */
  int bad_layer;        /* global index of the first layer whose output was not finite, -1 */
  int32_t **docs;       /* [slot]: data.documents' doc_start then positions, 2*B*T int32 on the
                           device (stage_enable_docs); NULL without documents */
  int *doc_count;       /* [slot]: how many documents docs[slot] holds (pt_io.documents) */
  /* bf16 storage at rest (packed set; engine/stage_store.c); out and saved then stay NULL */
  int packed;
  void **out16;         /* [slot * n + li]: kept outputs as bf16 */
  void **saved16;       /* [slot * n + li]: the parts forward writes, at rest (ckpt == 0) */
  float *wk[2];         /* float32 kept outputs of the layers of each parity being run */
  void *wk_saved;       /* float32 saved area of the layer being run (ckpt == 0) */
  int wk_tag[2], wk_saved_tag; /* slot * n + li whose values they hold, -1: none */
  int raw_tag;          /* slot * n + n - 1 whose logits wk holds unrounded and not at rest, -1:
                           none (engine/stage_store.h) */
  int dout16_tag;       /* slot * n + n - 1 whose loss gradient out16 holds (store_loss_place)
                           for the backward that follows, -1: none */
  /* pipeline.offload: the pooled slot buffers' frames and host copies (engine/stage_offload.h);
   * NULL: every slot has buffers of its own */
  struct stage_offload *offload;
} pt_stage;

typedef struct stage_offload stage_offload;
struct stage_offload_plan;

void stage_init(pt_stage *st, pt_model *m, int first, int last, int B, int T, int n_slots,
                int ckpt);
/* stage_init with part of the stashed activations offloaded as plan says
 * (engine/stage_offload.h); plan NULL: stage_init. */
void stage_init_offload(pt_stage *st, pt_model *m, int first, int last, int B, int T,
                        int n_slots, int ckpt, const struct stage_offload_plan *plan);
void stage_free(pt_stage *st);
void *stage_input(pt_stage *st, int slot);
/* Host memory for the input of slot, and its copy to the device (nothing to do on the cpu). */
void *stage_input_host(pt_stage *st, int slot);
void stage_input_commit(pt_stage *st, int slot);
/* Runs forward for the micro-batch in slot; returns the stage output [B,T,out_dim] (on the
 * model's last stage under bf16 storage the logits, unrounded or, at rest, undefined: read them
 * through stage_output or a loss, stage_loss_output). */
const float *stage_forward(pt_stage *st, int slot, int B, int T);
/* Backward of the micro-batch in slot given dout = d loss / d output. When need_din is set (and
 * the input is not token ids) returns d loss / d input, written into din_out if it is not NULL
 * (e.g. a send buffer) or into a stage buffer; else NULL. */
const float *stage_backward(pt_stage *st, int slot, const float *dout, int need_din,
                            float *din_out);
/* Allocates n_sets dout sets for split backward (counted in bytes); nothing under
 * checkpointing. Call once after stage_init, before the first stage_backward_input. */
void stage_alloc_stash(pt_stage *st, int n_sets);
/* The input half of stage_backward: every layer's backward_input in reverse (and the
 * backward_weight of layers without parameters), keeping the douts in a free set until
 * stage_backward_weight(slot); same arguments and result as stage_backward. Fatal when no set is
 * free (the schedule holds more micro-batches between I and W than stage_alloc_stash allowed).
 * Under checkpointing it is stage_backward. */
const float *stage_backward_input(pt_stage *st, int slot, const float *dout, int need_din,
                                  float *din_out);
/* The weight half: every remaining backward_weight of the micro-batch in slot, in the layer
 * order stage_backward uses, then frees its set. Must follow the slot's stage_backward_input,
 * before the slot's next stage_forward; calls for different slots must come in the order the
 * weight gradients are to accumulate in (ascending micro-batch for exactness). No-op under
 * checkpointing. */
void stage_backward_weight(pt_stage *st, int slot);
/* A step begins: no layer is known bad, the checks count from 0, no loss owes a check. */
void stage_begin_step(pt_stage *st);
/* The step's finiteness checks ran on the device without waiting: each failed check raised
 * *finite_mark to a value that is larger for earlier checks (this step's first forward pass
 * over a layer, in time order). Given the mark as read back, sets bad_layer to the layer of the
 * earliest failed check, the one the check made the step's first failure (-1: none failed). */
void stage_take_mark(pt_stage *st, int32_t mark);
/* data.documents: gives every slot device room for its micro-batch's doc_start and positions,
 * which every layer then sees (pt_io.doc_start, positions, and their count, documents). Call
 * once after stage_init. */
void stage_enable_docs(pt_stage *st);
/* The micro-batch in slot (B x T, before its stage_forward) has these doc_start and positions
 * (host int32 [B*T] each, reusable at once: uploaded without waiting). */
void stage_set_docs(pt_stage *st, int slot, const int32_t *doc_start, const int32_t *positions,
                    int B, int T);
/* The stage output of the micro-batch in slot (valid after its stage_forward). */
float *stage_output(pt_stage *st, int slot);
/* The same buffer for a loss that reads it and writes its gradient over it (kernels.h: dy ==
 * y) with no backward to follow (eval; training takes stage_loss_gradient): under bf16 storage
 * the model's logits there may be unrounded (the losses round them as they read them) or
 * undefined (at rest, the buffer's activation copy: kernels.h loss_acc reads that), and the
 * stage keeps nothing of them afterwards. Call right before the loss. */
float *stage_loss_output(pt_stage *st, int slot);
/* The finiteness check of the logits of slot that its loss owes, taken once (0: none, then):
 * under bf16 storage with check_finite, forward leaves it to the loss, which reads the logits
 * anyway: the loss raises *finite_mark to this value when a logit as it reads it (rounded) is
 * not finite (kernels.h loss_acc), as the forward's check would have (stage_take_mark). Every
 * forward of the slot on the model's last stage is followed by its loss within the step. */
int32_t stage_loss_check(pt_stage *st, int slot);
/* Where the loss writes d loss / d output of the micro-batch in slot: over its output itself
 * (kernels.h: the losses allow dy == y; no layer's backward reads its own output, layer.h), so
 * the last stage keeps no [B, T, F] gradient buffer beside its logits. Under checkpointing it
 * first recomputes the slot's last segment when the workspace holds another (what the slot's
 * stage_backward would do first; the same bits), so that backward does not write the logits
 * again over the gradient. Call after the slot's stage_forward, then the loss on this buffer
 * (its y and its dy: stage_loss_output's buffer, so under bf16 storage the logits maybe
 * unrounded, which the loss rounds as it reads them), then the slot's stage_backward(_input)
 * with it (engine/part.c part_compute_loss, with stage_loss_check). */
float *stage_loss_gradient(pt_stage *st, int slot);
/* After stage_loss_gradient: NULL, or where the loss writes that gradient instead, as bf16
 * alone (kernels.h loss_acc dy16; the buffer stage_loss_gradient returned then stands for it,
 * its floats not to be read): under bf16 storage when the model's last layer reads its dout
 * only through products (layers/layer.h layer_dout_at_rest). The place is the logits' own at
 * rest, which the loss no longer needs: no memory of its own. */
uint16_t *stage_loss_gradient_bf16(pt_stage *st, int slot);

#endif
