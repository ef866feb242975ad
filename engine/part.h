/* engine/part.h: what one process trains; the state and set-up both engines share.
 *
 * A part is the layers this process holds (one range [first, last), or a pipeline rank's chunks:
 * several ranges) on this process's device: their parameters, gradients and optimizer state in
 * one buffer each, the stage executor over one range with `slots` micro-batches in flight (the
 * sequential trainer's; a pipeline rank runs one executor per chunk, part_stage_init), the data
 * (opened only where it is read) and the step counters. The sequential trainer's part is the
 * whole model with one slot; a pipeline rank's is its chunks. Sizes: a micro-batch is
 * B sequences of T tokens (T = 1 for record data); a step's global batch is G = data_parallel x
 * micro_batches x B sequences. Nothing here is collective: a pipelined engine agrees on failures
 * itself. The engine that embeds a part owns it; part_free releases what part_* allocated (and is
 * safe on a part that failed half-way through its set-up). */
#ifndef PT_PART_H
#define PT_PART_H

#include <stddef.h>
#include <stdint.h>

#include "data/data.h"
#include "device/stats.h"
#include "engine/stage.h"
#include "model/model.h"
#include "model/optimizer.h"
#include "observe/metrics.h"
#include "spec/spec.h"

typedef struct {
  const pt_spec *spec;  /* borrowed: outlives the part */
  pt_model model;       /* configured whole, allocated over the held ranges */
  pt_stage stage;       /* part_alloc's executor (unused by part_alloc_ranges) */
  pt_optimizer opt;
  pt_data data;         /* the training data; data_init's geometry alone where it is not read */
  pt_data eval_data;    /* data.eval's file where data is open and data.eval set (else no file) */
  int B, T;             /* micro-batch: sequences, tokens per sequence (the most: buffers) */
  int cur_T;            /* tokens per sequence this step (train.seq_len_schedule, <= T); set by
                           part_begin_step from the step alone, so every stage agrees */
  int64_t G;            /* sequences per step over all replicas */
  size_t target_bytes;  /* one micro-batch of targets (host) */
  int64_t step;         /* steps done */
  int64_t skipped;      /* steps skipped for non-finite gradients */
  device_stats stats;   /* the step's numbers on the device: per-tensor gradient sums of squares
                           [n_tensors], then the micro-batches' loss sums [n_loss_slots]; a mark
                           per executor (device/stats.h), read once a step */
  int n_loss_slots;     /* micro-batches a step of this part can compute the loss of */
  int n_losses;         /* computed this step (part_compute_loss) */
  int n_marks;          /* executors given a mark (part_stage_init) */
  char error[512];      /* why the run must stop (a step returned -1) */
  float loss_scale;     /* this step's: 1 / (G T), or 1 / real targets with data.documents */
  int32_t *doc_host;    /* data.documents: a micro-batch's doc_start and positions (host) */
  /* A GPU's memory as its driver sees it (0 on other devices): bytes in use, by every process,
   * once part_open_device had opened it (the CUDA context and the kernel table's fixed
   * workspace in), and the most in use above that at a step's end since (part_end_step):
   * everything this rank allocated there, kernel scratch and touched managed pages included,
   * plus what other processes on the same GPU took meanwhile (ranks sharing it). */
  int64_t gpu_used_open, gpu_grown;
} pt_part;

/* Configures the model (no allocation) and the batch sizes; 0, or -1 with err (bad input). */
int part_configure(pt_part *p, const pt_spec *spec, char *err, size_t errsz);
/* The device kind pipeline.device resolves to (never SPEC_DEVICE_AUTO). */
spec_device part_resolve_device(const pt_part *p);
/* Makes device kind (local GPU `gpu` where it is one) this process's device and checks that it
 * runs the layers of the n ranges; 0 or -1 with err. */
int part_open_device(pt_part *p, spec_device kind, int gpu, const pt_range *ranges, int n,
                     char *err, size_t errsz);
/* Refuses, with the numbers, a part of `need` bytes that this machine cannot hold; `what` names
 * it. On a GPU: more than the GPU has free now (every process's holdings, this one's context
 * included, taken off), need being what all `sharers` ranks on it ask together; on the host:
 * more than its memory's share for each of `sharers` processes. 0 or -1 with err. */
int part_check_memory(const pt_part *p, int64_t need, int sharers, const char *what, char *err,
                      size_t errsz);
/* Allocates layers [first, last), their stage executor with `slots` slots, the optimizer. */
void part_alloc(pt_part *p, int first, int last, int slots);
/* Allocates the layers of n ranges (model_alloc_ranges) and the optimizer, whose state covers
 * range `shard` of `shards` of the parameters (optimizer_init_shard; 0 of 1: all); no executor. */
void part_alloc_ranges(pt_part *p, const pt_range *ranges, int n, int shard, int shards);
/* An executor over layers [first, last) of the allocated model with `slots` slots, set to check
 * outputs for non-finite values as train.on_nonfinite asks. */
void part_stage_init(pt_part *p, pt_stage *st, int first, int last, int slots);
/* The same with pipeline.offload's plan for the chunk (engine/stage_offload.h; NULL: none). */
void part_stage_init_offload(pt_part *p, pt_stage *st, int first, int last, int slots,
                             const struct stage_offload_plan *offload);
void part_free(pt_part *p);

/* Writes micro-batch mb of replica `replica` of the current step: inputs (the stage's input
 * layout) and targets (target_bytes); either may be scratch the caller does not use. */
void part_fill(pt_part *p, int64_t replica, int64_t mb, void *inputs, void *targets);
/* data.documents (the data opened on every rank then): gives the executor's slots room for
 * documents (stage_enable_docs); nothing without documents. */
void part_enable_docs(pt_part *p, pt_stage *st);
/* data.documents: hands micro-batch mb of replica `replica` of the current step its doc_start
 * and positions, computed from the data (stage_set_docs into slot); nothing without. */
void part_set_docs(pt_part *p, pt_stage *st, int slot, int64_t replica, int64_t mb);
/* A step begins: the step statistics zeroed (no wait), no loss computed yet, cur_T set to the
 * step's sequence length (spec_seq_len_at; 1 for record data), the loss scale set (1 / (G cur_T),
 * or with data.documents 1 / the global batch's real targets: bad input when it has none). */
void part_begin_step(pt_part *p);
/* One micro-batch's loss of the last layer's output [B, T, F] of slot of st (the model's last
 * stage, after the slot's stage_forward) against targets, scaled by loss_scale: 1 / (G T), or
 * 1 / (the real targets of the global batch) with data.documents (the only scaling anywhere);
 * returns its gradient [B, T, F], written over the output (stage_loss_gradient). The check of
 * the output the loss owes is made as it reads it (stage_loss_check). The loss is kept on the
 * device (the step's next slot) until part_losses reads it; targets may be reused when this
 * returns. */
float *part_compute_loss(pt_part *p, pt_stage *st, int slot, const void *targets);
/* The scaled losses of this step's part_compute_loss calls [from, to), added in call order
 * (0.0 + l_from + ...): reads the step statistics (one wait, unless already read). */
double part_losses(pt_part *p, int from, int to);
/* The per-tensor sums of squares of the gradients into out[n_tensors] (grad_tensor_sumsq's),
 * and each executor's first non-finite layer into its bad_layer: queues the sums, then reads
 * the step statistics (one wait for the step). Call after the step's backward passes. */
void part_read_step(pt_part *p, pt_stage *const *stages, int n_stages, double *out);
/* Applies the step's gradients (global norm `norm`, clipped per train.grad_clip as the
 * optimizer reads them: the gradients in memory stay as they are) at learning
 * rate lr: 0. A non-finite norm changes nothing (weights, optimizer state): 1 when the step is
 * skipped (train.on_nonfinite: skip, counted), -1 when the run must stop. */
int part_update(pt_part *p, double norm, double lr);
/* Counts the step as done and describes it in out (mfu unknown, no per-stage figures);
 * returns its wall time in seconds since t0 (pt_now_s). On a GPU, updates gpu_grown after
 * the time is taken. */
double part_end_step(pt_part *p, double t0, double loss, double lr, double norm,
                     pt_step_metrics *out);
/* Reads this part's tensors and optimizer state (a sharded optimizer's range of it) from a
 * checkpoint of any layout and continues at its step; 0 or -1 with err. */
int part_load(pt_part *p, const char *path, char *err, size_t errsz);

#endif
