/* engine/train.h: single-process training of a whole spec (the sequential path).
 *
 * Each step processes the global batch G = data_parallel * micro_batches * micro_batch_size
 * sequences, one micro-batch of B at a time in the order replica d, micro-batch m (the order a
 * pipelined run's samples are defined in). Gradients are summed the way the pipeline sums them
 * (per replica, tied copies folded per replica, replicas added in order), so a pipelined run of
 * the same spec ends with bitwise-equal parameters. */
#ifndef PT_TRAIN_H
#define PT_TRAIN_H

#include <stdio.h>

#include "spec/spec.h"
#include "checkpoint/checkpoint.h"
#include "engine/data.h"
#include "observe/metrics.h"
#include "model/model.h"
#include "model/optimizer.h"
#include "engine/stage.h"

typedef struct {
  const pt_spec *spec;
  pt_model model;
  pt_stage stage;
  pt_optimizer opt;
  pt_data data;
  void *targets;   /* one micro-batch of targets (host) */
  size_t target_bytes;
  float *dlogits;  /* gradient of the last output (device) */
  float *grad_total; /* sum over data-parallel replicas (data_parallel > 1 only) */
  int64_t step;    /* steps done */
  int64_t skipped; /* steps skipped for non-finite gradients */
  char error[512];
} pt_trainer;

/* Builds everything for spec; returns 0 or -1 with a message in err (bad input). */
int trainer_init(pt_trainer *t, const pt_spec *spec, char *err, size_t errsz);
void trainer_free(pt_trainer *t);
/* Runs one optimizer step and fills out (loss, lr, norm, timing). Returns 0, 1 when the step
 * was skipped for non-finite gradients (train.on_nonfinite: skip), or -1 when they must abort
 * the run (message in t->error). */
int trainer_step(pt_trainer *t, pt_step_metrics *out);

/* Loads a checkpoint (any layout) and continues at its step; 0 or -1 with err. */
int trainer_load(pt_trainer *t, const char *path, char *err, size_t errsz);
/* Saves a checkpoint of the whole model into dir (one stage); 0 or -1 with err. A failed save
 * changes nothing: not the trainer, not dir's previous checkpoint. */
int trainer_save(pt_trainer *t, const char *dir, const pt_spec_source *src, char *err,
                 size_t errsz);

/* Model FLOPs per token: 6 * params + 12 * layers * dim * seq_len (the usual estimate, with
 * `layers` counting transformer blocks). */
double train_flops_per_token(const pt_trainer *t);

#endif
