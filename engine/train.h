/* engine/train.h: single-process training of a whole spec (the sequential engine's core).
 *
 * Each step processes the global batch G = data_parallel * micro_batches * micro_batch_size
 * sequences, one micro-batch of B at a time in the order replica d, micro-batch m (the order a
 * pipelined run's samples are defined in). Gradients are summed the way the pipeline sums them
 * (per replica, tied copies folded per replica, replicas added in order), so a pipelined run of
 * the same spec ends with bitwise-equal parameters. One process, no collectives; the caller owns
 * the pt_trainer and its spec (which must outlive it). */
#ifndef PT_TRAIN_H
#define PT_TRAIN_H

#include "checkpoint/checkpoint.h"
#include "engine/part.h"

typedef struct {
  pt_part part;      /* every layer, one slot */
  void *targets;     /* one micro-batch of targets (host, part.target_bytes) */
  float *grad_total; /* sum over data-parallel replicas (data_parallel > 1 only; device) */
} pt_trainer;

/* Builds everything for spec; returns 0 or -1 with a message in err (bad input). */
int trainer_init(pt_trainer *t, const pt_spec *spec, char *err, size_t errsz);
void trainer_free(pt_trainer *t);
/* Runs one optimizer step and fills out (loss, lr, norm, timing). Returns 0, 1 when the step
 * was skipped for non-finite gradients (train.on_nonfinite: skip), or -1 when they must abort
 * the run (message in t->part.error). */
int trainer_step(pt_trainer *t, pt_step_metrics *out);

/* Loads a checkpoint (any layout) and continues at its step; 0 or -1 with err. */
int trainer_load(pt_trainer *t, const char *path, char *err, size_t errsz);
/* Saves a checkpoint of the whole model into dir (one stage); 0 or -1 with err. A failed save
 * changes nothing: not the trainer, not dir's previous checkpoint. */
int trainer_save(pt_trainer *t, const char *dir, const pt_spec_source *src, char *err,
                 size_t errsz);
/* Writes the whole model to one safetensors file at path (checkpoint_write_sequential); a
 * failure ends the process (exit 1) with a line starting with `what` (the option). */
void trainer_gather(pt_trainer *t, const char *path, const char *what);

#endif
