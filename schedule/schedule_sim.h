/* schedule/schedule_sim.h: a schedule's action lists run in simulated time, for pictures
 * (schedule_svg.h), docs and the planner: step time and bubble per rank at given costs.
 *
 * A compute action (F, B, I, W) takes its chunk's cost for its kind; a transfer between ranks
 * delays its data by the chunk's send cost; loads and reductions take no time. An action starts when the previous action of its rank is done and
 * its input is there: a FORWARD of chunk c the SEND_ACT of c - 1 (or, on the same rank, the
 * forward of c - 1), a B or I the SEND_GRAD of c + 1 (or the backward of c + 1 on the same
 * rank), a W its own I. With unit costs (F = I = W = 1, B = 2) GPipe and 1F1B idle
 * (P - 1) / (M + P - 1) of the step, the figure docs/schedules.md quotes with the others.
 */
#ifndef PT_SCHEDULE_SIM_H
#define PT_SCHEDULE_SIM_H

#include <stddef.h>

#include "schedule/schedule.h"

#define SCHED_FORWARD_COST 1.0
#define SCHED_BACKWARD_COST 2.0

/* The time of a FORWARD, BACKWARD, BACKWARD_INPUT and BACKWARD_WEIGHT of one chunk, and of its
 * transfers to another rank: send_act its output to the next chunk, send_grad its input
 * gradient to the previous one (the time from the send to the data being there; the sender
 * goes on at once, as the engine's sends are asynchronous). A hand-off to a chunk on the same
 * rank takes no time. */
typedef struct {
  double f, b, i, w;
  double send_act, send_grad;
} pt_sched_costs;

/* Unit costs: F = I = W = 1, B = 2 (backward = 2 x forward). */
extern const pt_sched_costs schedule_unit_costs;

typedef enum {
  SCHED_BOX_F,
  SCHED_BOX_B,
  SCHED_BOX_WAIT,
  SCHED_BOX_I,
  SCHED_BOX_W,
} pt_sched_box_kind;

/* One span: a compute action of micro-batch mb on a row (stage, i.e. rank), or a wait inside
 * one (mb is then the micro-batch of the box it lies in). t0 < t1 in the picture's time unit.
 * chunk: the action's chunk (0 for measured traces). */
typedef struct {
  int stage, mb;
  pt_sched_box_kind kind;
  double t0, t1;
  int chunk;
} pt_sched_box;

/* Simulates s with costs (n_costs of them: 1 for every chunk, or one per chunk) into boxes
 * (room for 3 x n_chunks x n_micro; each rank's boxes in its run order) and *span, when the
 * last box ends. Returns the number of boxes, or -1 with a one-line reason in err when the
 * lists cannot run to the end (a wait on a send that never comes, more boxes than room). */
int schedule_simulate_costs(const pt_schedule *s, const pt_sched_costs *costs, int n_costs,
                            pt_sched_box *boxes, double *span, char *err, size_t errsz);
/* Activation offload's copies (schedule/schedule_offload.h), per chunk and kind of tensor
 * (n_kinds of them; entry chunk * n_kinds + k): offloaded[] marks the micro-batches that go to
 * host memory (NULL: none), out_s and in_s one micro-batch's copy out and back in. The copy-out
 * is issued when its FORWARD ends, the prefetch when the compute action before its BACKWARD or
 * BACKWARD_INPUT starts (schedule_prefetch_at), and that backward waits for it. overlap: copies
 * run on a copy stream of their own per rank, one at a time, a prefetch after its copy-out (a
 * GPU); 0: each copy runs on the rank itself when issued, delaying its compute (the emulated
 * device, whose copies are memcpy calls). */
typedef struct {
  int n_kinds, overlap;
  const unsigned char *const *offloaded; /* [n_chunks * n_kinds] -> [n_micro] */
  const double *out_s, *in_s;            /* [n_chunks * n_kinds] */
} pt_sched_copies;

/* schedule_simulate_costs with the offload copies (copies NULL: none). *copy_busy, when not
 * NULL, gets the seconds the copies take in all, and *copy_exposed the compute time they add:
 * with overlap the waits of the backwards for their prefetches (a copy hidden behind compute
 * adds nothing), else all of it. */
int schedule_simulate_copies(const pt_schedule *s, const pt_sched_costs *costs, int n_costs,
                             const pt_sched_copies *copies, pt_sched_box *boxes, double *span,
                             double *copy_busy, double *copy_exposed, char *err, size_t errsz);
/* The same with unit costs. */
int schedule_simulate(const pt_schedule *s, pt_sched_box *boxes, double *span, char *err,
                      size_t errsz);
/* Step time and idle share per rank (bubble[n_ranks], may be NULL) at the given costs (as
 * schedule_simulate_costs). Returns the share of the whole step idle over all ranks, or -1
 * with err set. */
double schedule_time(const pt_schedule *s, const pt_sched_costs *costs, int n_costs,
                     double *step, double *bubble, char *err, size_t errsz);
/* Idle fraction of the window [t0, t1] over n_stages rows: 1 - (compute time less the waits
 * inside it) / (n_stages * (t1 - t0)); 0 for an empty window. */
double sched_bubble(const pt_sched_box *boxes, int n, int n_stages, double t0, double t1);

#endif
