/* schedule/schedule.h: a pipeline schedule is data, one action list per rank.
 *
 * The executor (engine/pipeline_step.c) interprets these lists and nothing else, so new
 * schedules are new entries in the registry (schedule/registry.h) or files
 * (schedule_from_file), not new engine code.
 *
 * Chunks. The model is cut into n_chunks contiguous pieces (virtual stages): chunk c holds the
 * c-th slice of layers, and chunk_rank[c] says which of the n_ranks runs it. With one chunk
 * per rank, chunk c is stage c on rank c. Placements (pt_placement): loop puts chunk c on rank
 * c mod P (interleaved schedules); v puts chunk c on rank c for c < P and on rank 2P - 1 - c
 * after (two chunks per rank, down and back up). Every per-micro-batch action names its chunk.
 *
 * Slots. Micro-batch mb of chunk c uses activation slot mb % n_slots[c]: the slot is taken by
 * the first action that writes it (RECV_ACT, LOAD or FORWARD) and released by the action that
 * ends the weight gradient (BACKWARD, or BACKWARD_WEIGHT when the backward is split).
 * n_w_pending[c] is the most micro-batches of chunk c between their BACKWARD_INPUT and
 * BACKWARD_WEIGHT at once: what a W needs from its I (the output gradients of the chunk's
 * layers) stays alive that long.
 *
 * Semantics of the actions of chunk c on its rank:
 *   RECV_ACT mb    post the receive of mb's input from chunk c-1's rank into the slot's input
 *   LOAD mb        read mb's inputs (chunk 0) and/or targets (chunk C-1) from the data
 *   FORWARD mb     run the chunk's layers (waits for the RECV_ACT of mb)
 *   SEND_ACT mb    start sending mb's output to chunk c+1's rank (completes in the background)
 *   RECV_GRAD mb   post the receive of d loss / d output of mb from chunk c+1's rank
 *   BACKWARD mb    loss (chunk C-1) or wait for RECV_GRAD, then backward_input and
 *                  backward_weight of every layer ("B")
 *   BACKWARD_INPUT mb   the same but backward_input only ("I"): d loss / d input, passed on
 *   BACKWARD_WEIGHT mb  backward_weight of every layer for mb ("W"), from what its I kept
 *                  (B, I and W mean what torch.distributed.pipelining's B, I and W mean)
 *   SEND_GRAD mb   start sending d loss / d input of mb to chunk c-1's rank
 *   FLUSH          issue the sends the device transport holds back ("FLUSH"): over NCCL a send
 *                  goes out only with the next receive the rank waits for (comm_flush), so a
 *                  rank about to block on something else (a reduction on another group) must
 *                  let its sends go first. Nothing on MPI. The builder puts one before the
 *                  step's reductions; it may stand anywhere before OPTIMIZER.
 *   REDUCE_TIED    sum tied-weight gradients over the ranks holding a copy (on the tie group)
 *   REDUCE_DP      sum gradients over the data-parallel replicas of this rank (on its group)
 *   OPTIMIZER      global norm, clipping and the optimizer step
 *
 * Local hand-off. When chunks c and c+1 run on the same rank (the turn of a V, or one rank)
 * there is no SEND/RECV between them: FORWARD of c+1 copies mb's output of chunk c from c's slot
 * (still held: c releases it only after its own backward, which needs c+1's), and the
 * BACKWARD/BACKWARD_INPUT of c+1 writes d loss / d input of mb straight into chunk c's incoming
 * gradient buffer for mb (c's slot already holds mb: its forward came first).
 *
 * Exactness. On every chunk, weight gradients accumulate (B or W) in ascending micro-batch
 * order, the order the sequential path adds them in, and W of mb comes after its I; with a
 * fixed order for every cross-rank sum this makes results agree bit for bit.
 * schedule_validate enforces it.
 */
#ifndef PT_SCHEDULE_H
#define PT_SCHEDULE_H

#include <stddef.h>
#include <stdio.h>

#include "schedule/registry.h"

typedef enum {
  ACT_RECV_ACT,
  ACT_LOAD,
  ACT_FORWARD,
  ACT_SEND_ACT,
  ACT_RECV_GRAD,
  ACT_BACKWARD,
  ACT_SEND_GRAD,
  ACT_REDUCE_TIED,
  ACT_REDUCE_DP,
  ACT_OPTIMIZER,
  ACT_BACKWARD_INPUT,
  ACT_BACKWARD_WEIGHT,
  ACT_FLUSH,
} pt_action_kind;
#define ACT_KINDS 13

typedef struct {
  pt_action_kind kind;
  int mb;    /* micro-batch, -1 for step-wide actions (FLUSH and the step end) */
  int chunk; /* the chunk it belongs to, -1 for step-wide actions */
} pt_action;

typedef struct {
  char name[96];                /* the registry's name, or "file NAME" */
  const pt_schedule_type *type; /* the registry entry it was built from; NULL for a file */
  int n_ranks, n_chunks, n_micro;
  pt_placement placement;
  int *chunk_rank;  /* [chunk] */
  pt_action **acts; /* [rank][i] */
  int *n_acts;      /* [rank] */
  int *n_slots;     /* [chunk]: activation slots (micro-batches in flight) */
  int *n_w_pending; /* [chunk]: most micro-batches between I and W at once (0: no split) */
} pt_schedule;

/* Where a check found the problem: a rank and the index of the action in its list. */
typedef struct {
  int rank, index;
} pt_sched_where;

/* Builds the registered schedule `name` (schedule/registry.h) with its own chunks per rank
 * (1 unless the entry fixes another count); returns 0, or -1 for a name the registry does not
 * have or a layout it is not defined for. */
int schedule_build(pt_schedule *s, const char *name, int n_ranks, int n_micro);
/* The same for entry t with v chunks per rank. Returns 0, or -1 with the reason in err (v the
 * entry does not take, fewer micro-batches than it needs). */
int schedule_build_v(pt_schedule *s, const pt_schedule_type *t, int n_ranks, int v, int n_micro,
                     char *err, size_t errsz);
/* The schedule a spec asks for: pipeline.schedule_file, or pipeline.schedule with
 * pipeline.virtual_stages, for pipeline.stages ranks and train.micro_batches. Returns 0, or
 * -1 with a one-line reason in err (a file's reason starts with FILE:LINE). */
int schedule_build_spec(pt_schedule *s, const pt_spec *spec, char *err, size_t errsz);
/* Reads a schedule file (docs/schedules.md, "Schedule files": our "rank N:" lines, or
 * torch.distributed.pipelining's CSV or table, its lowering's transfers dropped and its FSDP
 * actions ignored, one notice saying so) for n_ranks ranks and n_micro micro-batches, v chunks
 * per rank (0: as the file has them), inserts what it leaves implied and runs every check
 * (schedule_validate, schedule_check_rendezvous with any layout's reductions). Returns 0, or
 * -1 with one line: "FILE:LINE: rank R, action A: what is wrong; the fix". */
int schedule_from_file(pt_schedule *s, const char *path, int n_ranks, int n_micro, int v,
                       char *err, size_t errsz);
void schedule_free(pt_schedule *s);

/* Simulates all ranks together: every send matched by one receive, every micro-batch through
 * forward and backward once per chunk, slot reuse only after the slot's release and send, the
 * exactness rule, no deadlock. Returns 0, or -1 with a one-line reason in err
 * ("rank R, action A: ...") and, when where is not NULL, the action it names. */
int schedule_validate(const pt_schedule *s, char *err, size_t errsz);
int schedule_validate_where(const pt_schedule *s, pt_sched_where *where, char *err,
                            size_t errsz);
/* The reductions a layout runs at the step end, each on a communicator of its own: a rank
 * blocked in one waits for the other ranks of that group, and its sends held back on the
 * pipeline's communicator stay held (only a wait on them or a FLUSH issues them). */
typedef struct {
  int n_ties;               /* tie groups spanning more than one rank, in the engine's order */
  const unsigned char *tie; /* [g * n_ranks + rank]: rank holds a copy of tie group g */
  int dp;                   /* data-parallel replicas (1: REDUCE_DP exchanges nothing) */
} pt_sched_reductions;

/* The stricter condition for NCCL: each rank's transfers run in issue order on one stream and
 * a send finishes only with its receive (rendezvous); the tie and data-parallel reductions are
 * rendezvous of their own groups. A rank entering a reduction that exchanges anything with a
 * send still held back fails too, deadlock or not: its peer would wait for the send until the
 * reduction ends. red: the layout's reductions; NULL (and schedule_check_rendezvous): any
 * layout, i.e. one tie group over every rank and data parallelism, which every layout's
 * reductions pass if these do. Returns 0, or -1 with the stuck state. */
int schedule_check_rendezvous(const pt_schedule *s, char *err, size_t errsz);
int schedule_check_rendezvous_where(const pt_schedule *s, pt_sched_where *where, char *err,
                                    size_t errsz);
int schedule_check_rendezvous_in(const pt_schedule *s, const pt_sched_reductions *red,
                                 pt_sched_where *where, char *err, size_t errsz);

/* Under activation checkpointing a split schedule's I runs the fused backward (engine/stage.h),
 * so weight gradients accumulate at B and I, which must then come in ascending micro-batch order
 * on every chunk. 0, or -1 with a one-line reason (which chunk, and the fix) in err. */
int schedule_check_checkpoint_order(const pt_schedule *s, char *err, size_t errsz);

/* One line per rank: "stage 0 (2 slots): rA0 L0 F0 sA0 ..." with one chunk per rank, else
 * "rank 0 (chunk 0: 8 slots; chunk 7: 1 slot): 0L0 0F0 0sA0 ..." (chunk before each code). */
void schedule_print(FILE *f, const pt_schedule *s);
/* The schedule in the file format schedule_from_file reads, every action written out, each
 * receive right before the action waiting for it (reading it back posts them early again). */
void schedule_write_actions(FILE *f, const pt_schedule *s);
/* The schedule as torch.distributed.pipelining's _dump_csv writes one: a row per rank of its
 * compute actions (0F1, 1I0, 1W0, 2B3), for _load_csv(path) to lower itself; with comms the
 * lowered form for _load_csv(path, format="compute_comms"): our sends and receives as
 * SEND_F/RECV_F/SEND_B/RECV_B, each receive right before its consumer, and the WAIT_SEND_F/B
 * torch wants for every send. Loads, FLUSH and the step end have no torch action and are left
 * out (schedule_from_file adds them back). */
void schedule_write_torch(FILE *f, const pt_schedule *s, int comms);
const char *schedule_action_code(pt_action_kind k);
/* "1W2" (chunk, code, micro-batch), "OPT" or "FLUSH" for step-wide actions, into buf. Returns
 * buf. */
const char *schedule_action_text(const pt_action *a, char *buf, size_t size);
/* The chunk that c's activations go to (+1) or come from (-1) lives on the same rank. */
int schedule_is_local(const pt_schedule *s, int chunk, int dir);

#endif
