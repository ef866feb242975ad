/* engine/eval.h: data.eval, the held-out loss, for both engines (docs/training.md "Evaluation").
 *
 * Eval batch i (0 <= i < K = data.eval.batches) is the global batch training step i would read
 * from the eval file (data_micro_batch of part.eval_data at step i: same rows, replicas and
 * micro-batches, file order: never shuffled; data_eval_due says when, data/data.h). The
 * pass is forward only: each micro-batch goes through the stages' executors in a slot of theirs
 * (eval_stage_forward), the last stage adds up its token losses (device_loss_acc, unscaled, one
 * double per micro-batch), and
 *   eval_loss = (sum over replicas d in order of S_d) / (K G T),
 *   S_d = 0.0 + the micro-batch sums of replica d, batch by batch, micro-batch by micro-batch,
 * the same additions in the sequential and the pipelined engine: bitwise equal. Nothing the
 * training reads is changed: no gradient, optimizer state, parameter, step counter or step
 * statistic; the slots' activations are overwritten, which the next step's forward does anyway.
 * Per process; the pipelined driver (pipeline_eval, engine/pipeline.h) is collective. */
#ifndef PT_EVAL_H
#define PT_EVAL_H

#include <stdint.h>

#include "device/stats.h"
#include "engine/part.h"
#include "engine/stage.h"
#include "engine/train.h"

/* stage_forward of slot that leaves the executor's step state (check counters, non-finite
 * bookkeeping) as it was and runs no finite checks (they feed the step's marks); the
 * checkpointing workspace is marked as holding no slot's segment (a backward recomputes it,
 * deterministically: the same bits). */
const float *eval_stage_forward(pt_stage *st, int slot, int B, int T);
/* Slot `i` of eval statistics s gets the token-loss sum of the last stage's output y [B, T, F]
 * (stage_loss_output) against targets; the loss gradient, which nobody reads, is written over
 * y. */
void eval_loss_into(pt_part *p, device_stats *s, int i, float *y, const void *targets);
/* The eval loss from the replicas' sums S_d (in replica order). */
double eval_loss_of(const pt_part *p, const double *replica_sums, int dp);

/* The sequential engine's eval: every replica's micro-batches in one process, through the
 * trainer's one slot; returns the eval loss. */
double eval_sequential(pt_trainer *t);

#endif
