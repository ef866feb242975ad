/* engine/pipeline.h: one rank's part of a pipelined, data-parallel training run.
 *
 * Rank r = replica * stages + stage (see partition/plan.h) owns the layers of its stage's chunks
 * (one, or several virtual stages: schedule/schedule.h) and interprets the stage's action list
 * every step, each action on the chunk it names. Every chunk has its own stage executor, slots,
 * buffers and requests; the parameters of all of them share one buffer (model_alloc_ranges).
 * Activations arrive directly in a chunk's input slots and leave from its output slots (no
 * copies; under train.precision bf16 they travel packed, through the chunk's wire buffers);
 * each send completes in the background and its buffer is reused only after it has.
 * Between two chunks on the same rank nothing is sent: the forward of the later one copies the
 * earlier one's output, and its backward writes the input gradient straight into the earlier
 * one's gradient slot. Groups: the pipeline of this replica, the data-parallel group of this
 * stage, and one group per tie key and replica (the stages holding a copy). The loss of each
 * step is the sum over replicas of their micro-batch losses, reported by rank 0.
 * pipeline.shard_optimizer with replicas (engine/pipeline_shard.c): each replica of a stage
 * keeps the optimizer state of one range of the stage's parameters, updates that range and
 * gathers the others from the other replicas; the bits stay the unsharded run's.
 *
 * Every rank of the job calls every function here (collective) unless it says otherwise; the
 * caller owns the pt_pipeline and the spec, which must outlive it. The loop that drives it is
 * engine/run.c, through engine/engine.h.
 */
#ifndef PT_PIPELINE_H
#define PT_PIPELINE_H

#include "checkpoint/checkpoint.h"
#include "comm/comm.h"
#include "engine/part.h"
#include "observe/trace.h"
#include "partition/plan.h"
#include "schedule/schedule.h"

/* The gradient sum of one tie key over the stages holding a copy. The copies are added in layer
 * order, the order the sequential path adds them in: a chain through the holders (several
 * visits to a stage that holds copies apart), the last holder broadcasting the sum. */
typedef struct {
  pt_comm *comm;       /* the stages holding a copy of this tie key, in stage order */
  int tensor;          /* index in model.tensors of this rank's copy */
  int n_copies;        /* copies of the key in the model */
  int *holder;         /* [n_copies] group rank holding copy i, in layer order */
  int *local;          /* [n_copies] this rank's copy i: -1 its stored tensor, else its index in
                        * model.tie_copies; -2 for other ranks' copies */
  int plain;           /* the chain is one comm_allreduce_sum_f32 after the local folds */
  float *partial;      /* device scratch for a running sum arriving before this rank's first
                        * copy is added (ordered chains only; else NULL) */
} pt_tie_group;

/* One chunk this rank runs. Slot of micro-batch mb: mb % slots. */
typedef struct {
  int id;              /* the chunk's index in model order */
  int first, last;     /* its layers [first, last) */
  int slots;
  int is_first, is_last; /* chunk 0 (reads the inputs), the last chunk (computes the loss) */
  int prev, next;      /* the neighbour chunks' indices in pt_pipeline.chunks when they run on
                        * this rank (local hand-off), else -1 */
  int prev_stage, next_stage; /* the neighbours' stages when they run on another rank, else -1 */
  pt_stage stage;
  float **dout;        /* [slot] d loss / d output: received, or written by the next chunk when
                        * it runs here (not on the last chunk) */
  float **din;         /* [slot] d loss / d input to send (only with a remote previous chunk) */
  void **targets;      /* [slot] (last chunk; host) */
  void *scratch_in, *scratch_tg; /* data_micro_batch's output this chunk does not need */
  pt_request *recv_act, *recv_grad, *send_act, *send_grad; /* [slot] */
  size_t in_bytes, out_bytes;
  /* train.precision bf16: what crosses to a remote neighbour goes as packed bf16, half the
   * bytes, through these [slot] buffers (NULL otherwise): the activation received and the
   * input gradient sent (remote previous chunk), the activation sent and the output gradient
   * received (remote next chunk). The float buffers above are unpacked into / packed from. */
  uint16_t **wire_act_in, **wire_grad_out, **wire_act_out, **wire_grad_in;
} pt_chunk;

typedef struct {
  pt_part part;        /* this stage's layers, optimizer, data (end chunks), step counters */
  pt_plan plan;
  pt_schedule sched;
  int rank, stage_id, replica, P, dp;
  int holds_first, holds_last; /* runs chunk 0, the last chunk */
  pt_chunk *chunks;    /* [n_chunks] this rank's chunks, ascending */
  int n_chunks;
  int *chunk_at;       /* [plan.n_chunks]: index in chunks, or -1 for another rank's chunk */
  pt_comm *pipe, *dp_comm;
  int sharded;         /* pipeline.shard_optimizer with dp > 1: part.opt holds one range */
  int grads_on_last;   /* sharded over the chain: the whole gradient sum is on the last replica */
  size_t *shard_ends;  /* [dp] where each replica's range ends (comm.h's ends; sharded only) */
  pt_tie_group *ties;
  int n_ties;
  char wait_text[96];  /* what the watchdog says a wait is for, with the chunk */
  int in_flight, peak_in_flight;
  double compute_s, total_s; /* over all steps: time computing, and wall time of the steps */
  double step_compute_s;     /* time computing in the last step */
  double last_step_s;        /* wall time of the last step */
  pt_trace trace;            /* spans of the traced steps (enabled by the caller) */
  int64_t span_ticket;       /* the running action's span kept by the device for the trace, or -1 */
  int nonfinite;             /* this step: 0, 1 skipped, -1 abort (part.error: every rank) */
} pt_pipeline;

/* Builds this rank's stage. Collective: returns 0 everywhere, or -1 everywhere with the one-line
 * message on exactly one rank (err empty on the others). */
int pipeline_init(pt_pipeline *p, const pt_spec *spec, char *err, size_t errsz);
void pipeline_free(pt_pipeline *p);
/* One optimizer step on every rank; rank 0's out gets the global loss, lr, norm, timing.
 * Returns 0, 1 when the step was skipped for non-finite gradients, or -1 when the run must
 * abort (p->part.error holds the message on every rank). The same on every rank. */
int pipeline_step(pt_pipeline *p, pt_step_metrics *out);
/* The trace's spans of what the device ran that it has run by now get their times
 * (trace_resolve); after device_sync, all of them. Every rank, where its trace is enabled. */
void pipeline_trace_resolve(pt_pipeline *p);
/* Loads a checkpoint written under any layout (each rank reads the tensors it holds) and
 * continues at its step. Collective; returns 0, or -1 on every rank with err set on the rank
 * that failed first (and empty elsewhere). */
int pipeline_load(pt_pipeline *p, const char *path, char *err, size_t errsz);
/* Saves a checkpoint into dir: replica 0's ranks write their stage, rank 0 the manifest last.
 * Collective; returns 0 everywhere, or -1 everywhere when any rank's write failed (disk full,
 * I/O error): err then holds this rank's own failure, or is empty where this rank's part went
 * well. A failed save changes nothing: the training state, and dir's previous checkpoint,
 * which rank 0 puts back. */
int pipeline_save(pt_pipeline *p, const char *dir, const pt_spec_source *src, char *err,
                  size_t errsz);
/* Rank 0 receives every stage's weights (replica 0) and writes one sequential safetensors file
 * at path (see checkpoint_write_sequential): no shared file system needed. Collective. A
 * failure ends the job with a line starting with `what` (the option: "--gather"). */
void pipeline_gather(pt_pipeline *p, const char *path, const char *what);
/* Rank 0 receives n doubles from every rank (all: [ranks * n], on rank 0 only), peer by peer,
 * so that a dead or hung rank is named by the watchdog. Collective. */
void pipeline_gather_root(pt_pipeline *p, const double *mine, int n, double *all,
                          const char *what);
/* data.eval's forward-only pass (engine/eval.h, engine/pipeline_eval.c); the eval loss on rank 0
 * (0 elsewhere). Collective. */
double pipeline_eval(pt_pipeline *p);
/* Compares the tied copies across their stages and aborts the job naming the tie if they differ. */
void pipeline_check_ties(pt_pipeline *p);

#endif
