/* kernels/loss.h: losses on the last layer's output y [N, F] (N = B*T rows).
 *   cross_entropy: targets int32 [N] class/token ids in [0, F); per row -log softmax(y)[target]
 *   mse:           targets float [N, F]; per row sum_f (y - t)^2 / F
 * loss_forward_backward returns the SUM of the per-row losses (double) and writes
 * dy = scale * d(sum)/dy; dy may be y itself (each row's values are read before its gradient
 * overwrites them), so the last stage needs no [N, F] buffer beside its logits. The trainer passes scale = 1 / (G*T_s), T_s the step's tokens per
 * sequence (1 / the global batch's real targets with data.documents): the one place where the
 * loss is scaled, so accumulating micro-batches (or data-parallel replicas) is a plain sum. */
#ifndef PT_LOSS_H
#define PT_LOSS_H

#include <stdint.h>

typedef enum { LOSS_CROSS_ENTROPY, LOSS_MSE } pt_loss_kind;

/* A cross_entropy target of LOSS_IGNORE is no prediction (packed documents' padding and
 * boundaries, data/data_pack.h): the row adds 0 to the sum and gets dy = 0. */
#define LOSS_IGNORE (-1)

/* Ends the job (bad input) when a cross_entropy target is outside [0, F) and not LOSS_IGNORE:
 * the data holds a class the last layer has no output for. Host targets; nothing to check for mse. */
void loss_check_targets(pt_loss_kind kind, const void *targets, int N, int F);
double loss_forward_backward(pt_loss_kind kind, const float *y, const void *targets, int N, int F,
                             float scale, float *dy);

/* How a loss reads y (NULL, or a zeroed struct: as it is, nothing checked):
 *   round_bf16: each value read as pt_round_bf16(y) (kernels/precision.h). Under train.precision
 *     bf16 the stage hands the loss the logits unrounded (engine/stage_store.h); rounding is
 *     idempotent, so logits rounded before give the same bits;
 *   mark (NULL: no check): *mark = max(*mark, value) when a value as read is not finite, in any
 *     row (ignored targets' too): kernels.h finite_check on what the loss reads, in its pass. */
typedef struct {
  int round_bf16;
  int32_t *mark;
  int32_t value;
} pt_loss_read;

/* loss_forward_backward reading y as r says: the same bits as loss_forward_backward on y read
 * so beforehand. */
double loss_forward_backward_read(pt_loss_kind kind, const float *y, const void *targets, int N,
                                  int F, float scale, float *dy, const pt_loss_read *r);

#endif
